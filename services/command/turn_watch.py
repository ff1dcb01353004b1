"""WatchMyTurns: a player's ListMyTurns, then its turn notifications as the bots' dispatcher
writes them (famiglia.eventstore.turn_notices), until the client leaves or the server stops.

The snapshot is made after the stream's position is read, so a notification written while it
is made comes after it (told twice at worst, never missed). A reconnect with the last cursor
received gets a fresh snapshot, then what was written after the cursor.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from famiglia.eventstore.turn_notices import StoredNotice
from famiglia.grpcutil.errors import InvalidArgument

if TYPE_CHECKING:
    from .app import CommandApp, MyTurn

#: The cursor of a player's notifications before any: the stream's start.
START = "0-0"
#: Notifications read at once.
PAGE = 100


@dataclass(frozen=True)
class Snapshot:
    """The first reply: ListMyTurns' answer and where the notifications stood when it was made."""

    turns: list[MyTurn]
    cursor: str


def watch_my_turns(app: CommandApp, player_id: str, after_id: str = "", limit: int = 0, *,
                   is_active: Callable[[], bool] = lambda: True,
                   poll_ms: int = 1000, until_now: bool = False) -> Iterator[Snapshot | StoredNotice]:
    """The snapshot, then each notification after `after_id` ("": after the newest now) as it
    is written; `until_now`: only those written so far, then the end. A cursor that is no id, or
    one no notification has yet (past the newest and the store's clock), is refused as a chat
    cursor is (`bad_after_id`)."""
    notices = app.notices
    cursor = check_cursor(after_id)
    newest, now_ms = notices.newest(player_id)
    if cursor:
        check_cursor_reached(cursor, newest, now_ms)
    else:
        cursor = newest or START
    yield Snapshot(app.my_turns(player_id, limit), cursor)
    page = notices.read(player_id, cursor, PAGE)
    while is_active():
        for notice in page:
            yield notice
            cursor = notice.id
        if until_now and len(page) < PAGE:
            return
        # A full page may have more behind it; else one wait a poll (it reads from the cursor:
        # what came since is there at once), not a read and a wait each quiet second.
        page = notices.read(player_id, cursor, PAGE) if len(page) >= PAGE else notices.wait(player_id, cursor, poll_ms)


_ID = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, n = entry_id.partition("-")
    return int(ms), int(n)


def check_cursor(after_id: str) -> str:
    """A cursor is "" (from now) or a notification's id, "<ms>-<n>" (each part below 2**64, as
    Redis reads stream ids)."""
    if after_id and not (_ID.fullmatch(after_id) and all(part < 2**64 for part in _id_key(after_id))):
        raise InvalidArgument("bad_after_id", "after_id is empty or a WatchMyTurnsResponse cursor (\"<ms>-<n>\")")
    return after_id


def check_cursor_reached(after_id: str, newest_id: str, now_ms: int) -> None:
    """Refuse a cursor no notification has yet: past the newest and not before the store's clock,
    whose millisecond the next ids start from (a stream from it would skip what comes first). One
    behind the clock is taken: every notification to come has a later id (the stream expired, or
    its store went back to an older copy)."""
    cursor = _id_key(after_id)
    if (not newest_id or cursor > _id_key(newest_id)) and cursor[0] >= now_ms:
        raise InvalidArgument("bad_after_id", f"after_id {after_id} is past the newest notification "
                                              f"({newest_id or 'none'}) and the server's clock ({now_ms} ms): resume "
                                              "from the last cursor received, or empty for those from now on")
