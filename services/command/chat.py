"""Match chat's rules, free of I/O: what a seat may send, and who may read a message.

Talk is outside the engine in GoodCritters (GC-D08), Grifters (GR-D08) and Nostra City: the
table talks through the command service's match chat, stored beside the match and never in its
events (`famiglia.eventstore.chat`). A game whose rules keep chat in the engine, as a command
capped per phase (Nothing Personal's `send_chat`, NP-M7/NP-M10; `GameInfo.engine_chat`),
has no match chat, so that a table has one channel and the engine's caps hold.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from famiglia.chat_text import shows_nothing, unshowable
from famiglia.config import number, whole
from famiglia.engine import GameInfo
from famiglia.eventstore.chat import (
    DEFAULT_KEEP,
    DEFAULT_RATE,
    DEFAULT_TTL_S,
    DEFAULT_WINDOW_S,
    ChatEntry,
    ChatLimits,
)
from famiglia.eventstore.port import entry_key
from famiglia.grpcutil.errors import FailedPrecondition, InvalidArgument

#: A message's most characters, once the whitespace around it is trimmed.
MAX_CHAT_TEXT = 500
#: A message id is its seat's idempotency key, as a command id is (and as long).
MAX_MESSAGE_ID = 128
#: The most messages one ListChat answers (and what a limit of 0 asks for).
MAX_CHAT_PAGE = 100

_CURSOR = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")


@dataclass(frozen=True)
class ChatSettings:
    """The command service's chat settings (README, "Configuration")."""

    limits: ChatLimits = ChatLimits()

    @classmethod
    def from_env(cls) -> ChatSettings:
        return cls(ChatLimits(
            keep=whole("FAMIGLIA_CHAT_KEEP", DEFAULT_KEEP),
            ttl_ms=round(number("FAMIGLIA_CHAT_TTL_S", DEFAULT_TTL_S, above=True) * 1000),
            rate=whole("FAMIGLIA_CHAT_RATE", DEFAULT_RATE, low=0),
            window_ms=round(number("FAMIGLIA_CHAT_RATE_WINDOW_S", DEFAULT_WINDOW_S, above=True) * 1000),
        ))


def check_chat_offered(info: GameInfo) -> None:
    """Refuse match chat on a game whose engine carries the table's talk (`GameInfo.engine_chat`)."""
    if info.engine_chat:
        raise FailedPrecondition("chat_in_engine", f"{info.title} has its own chat: the `{info.engine_chat}` "
                                                   "command (SubmitCommand), capped by its rules; it has no "
                                                   "match chat")


def check_text(text: str) -> str:
    """The text as stored: line ends made newlines (a phone's keyboard may send "\r\n"),
    trimmed, 1 to MAX_CHAT_TEXT characters, something visible in it and nothing that could
    garble another line (`famiglia.chat_text`, the checks Nothing Personal's own chat takes too:
    no control character but newline, none of the format characters that reorder or hide the
    text after them, no lone surrogate)."""
    trimmed = text.replace("\r\n", "\n").strip()
    if not trimmed or shows_nothing(trimmed[:MAX_CHAT_TEXT + 1]):
        raise InvalidArgument("no_text", "a chat message needs text (something visible)")
    if len(trimmed) > MAX_CHAT_TEXT:
        raise InvalidArgument("bad_text", f"a chat message is at most {MAX_CHAT_TEXT} characters, "
                                          f"not {len(trimmed)}")
    why = unshowable(trimmed)
    if why:
        raise InvalidArgument("bad_text", why)
    return trimmed


def check_recipients(to_seats: Sequence[int], sender: int, seats: int) -> tuple[int, ...]:
    """The recipients as stored, in seat order: () is the table; else seats of the match, none
    twice, not the sender alone (a note to oneself is no message to the table)."""
    if not to_seats:
        return ()
    chosen = sorted(to_seats)
    if any(not 0 <= s < seats for s in chosen) or len(set(chosen)) < len(chosen):
        raise InvalidArgument("bad_to_seats", f"to_seats names a seat twice or outside 0-{seats - 1}")
    if chosen == [sender]:
        raise InvalidArgument("bad_to_seats", "to_seats names the sender alone: name another seat, "
                                              "or none for the whole table")
    return tuple(chosen)


def check_message_id(message_id: str) -> None:
    """A message id as a command id is checked: required, bounded, no NUL (it names a key)."""
    if not message_id:
        raise InvalidArgument("no_message_id", "message_id (the idempotency key) is required")
    if len(message_id) > MAX_MESSAGE_ID or "\x00" in message_id:
        raise InvalidArgument("bad_message_id", f"message_id is at most {MAX_MESSAGE_ID} characters, without NUL")


def check_cursor(after_id: str) -> str:
    """A cursor is "" (from the start) or a message's id, "<ms>-<n>" (each part below 2**64, as
    Redis reads stream ids)."""
    if after_id and not (_CURSOR.fullmatch(after_id) and all(int(part) < 2**64 for part in after_id.split("-"))):
        raise InvalidArgument("bad_after_id", "after_id is empty or a ChatMessage id (\"<ms>-<n>\")")
    return after_id


def check_cursor_reached(after_id: str, newest_id: str, now_ms: int) -> None:
    """Refuse a cursor no message has yet (`bad_after_id`): past the chat's newest message and
    not before the store's clock, whose millisecond the next ids start from. A stream from it
    waited for ever (or until the clock got there), and a list was empty as a quiet table's,
    while the messages stored up to it went unseen. A cursor past the newest message kept but
    behind the clock is taken: every message to come has a later id, so none is skipped, and
    such a cursor is a reader's honest one when the chat expired (30 days quiet) or its store
    went back to an older copy."""
    if not after_id:
        return
    cursor = entry_key(after_id)
    if (not newest_id or cursor > entry_key(newest_id)) and cursor[0] >= now_ms:
        # The newest message's id is not named: it may be a private one, which the reader must
        # not learn was sent, nor when (`cursor_as_known`).
        raise InvalidArgument("bad_after_id", f"after_id {after_id} is past the chat's newest message and its "
                                              f"clock ({now_ms} ms): no message has that id; resume from the id "
                                              "of the last message received, or empty for the oldest kept")


def page_size(limit: int) -> int:
    """A ListChat limit: 0 or less is the cap, as ListLegalCommands' is; more is the cap."""
    return MAX_CHAT_PAGE if limit <= 0 else min(limit, MAX_CHAT_PAGE)


def previous_id(entry_id: str) -> str:
    """The greatest stream entry id below `entry_id` ("" below the first one): a read after it
    starts at `entry_id`."""
    ms, seq = entry_key(entry_id)
    if seq:
        return f"{ms}-{seq - 1}"
    return f"{ms - 1}-{2**64 - 1}" if ms else ""


def cursor_as_known(cursor: str, entry: ChatEntry | None, seat: int | None) -> str:
    """The newest message `check_cursor_reached` weighs a cursor at or past the store's clock
    against, as `seat` may know the chat, when no message it may read comes after the cursor:
    the cursor itself if it is the id of a message the reader may read (`entry`, read by that
    id), its honest cursor; else none, so that the cursor is refused as it would be in a chat
    without the messages the reader may not read (a whisper's id, sent this millisecond, is
    no cursor of a seat it was not sent to)."""
    return cursor if entry is not None and entry.id == cursor and readable(entry, seat) else ""


def readable(entry: ChatEntry, seat: int | None) -> bool:
    """Whether `seat` (None: a spectator) may read the message: a table message everyone, a
    private one its sender and its recipients only."""
    if not entry.to_seats:
        return True
    return seat is not None and (seat == entry.from_seat or seat in entry.to_seats)
