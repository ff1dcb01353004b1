"""Players' live matches (ListMyTurns' index, `famiglia.eventstore.player_matches`): who is
indexed, the guarded write the command service makes at a creation and at a match's end, and
the operator's backfill for the matches that write never saw.

The service writes a match's entries once its creation is stored; a match created before the
index existed is in no player's list. `reindex_players` walks every match in the store (its
version keys, the one record kept for each match ever created) and writes each live match's
people with the same write: `ZADD NX`, which keeps an entry already there, so a run again, or a
run over matches the service indexed itself, changes nothing. It goes a page of keys at a time,
the page's creations read together (`EventStore.firsts`: a few round trips a page, not one a
match), and says after each where it is (a SCAN cursor): an interrupted run resumes from there,
or starts again from 0 at the cost of reading again what it read. A match imported by
`ReplayService.ImportMatch` names no player (admission clears its seats' player ids: a file's
claims), so it is in no list, by the service or by this.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from famiglia.eventstore.envelopes import open_match_created
from famiglia.grpcutil.errors import FailedPrecondition, NotFound, store_away
from famiglia.telemetry import get_logger
from famiglia.v1 import envelope_pb2

from .hot_matches import HotMatch, UnknownMatch, UnreadableMatch

if TYPE_CHECKING:
    from .app import CommandApp

log = get_logger("famiglia.command")

#: Version keys one SCAN call of the backfill asks Redis for (a hint: Redis may give more or fewer).
REINDEX_PAGE = 500


def people(seat_info: Sequence[envelope_pb2.SeatInfo]) -> set[str]:
    """The players a match's seating names, bots' seats aside (a tournament's entrants): the
    people whose live matches it is among."""
    return {info.player_id for info in seat_info if info.player_id and not info.bot}


def write_index(match_id: str, named: set[str], write: Callable[[set[str]], None]) -> bool:
    """A write to the players' index, which is a hint: lost to an outage (Redis away), it costs
    the match its place in ListMyTurns, never the creation or the command the caller is answered
    for. False when it was lost (logged `player_index_unwritten`); nobody named: nothing to write."""
    if not named:
        return True
    try:
        write(named)
    except Exception as exc:
        if not store_away(exc):
            raise
        log.warning("player_index_unwritten", match_id=match_id, error=repr(exc))
        return False
    return True


@dataclass
class Reindexed:
    """What a backfill found, match by match (each counted once, under one outcome)."""

    looked_at: int = 0
    indexed: int = 0
    """Live matches naming people, their entries written (a dry run: to be written)."""
    entries: int = 0
    """The player entries of those matches (an entry already there is kept as it is)."""
    over: int = 0
    """Finished, cancelled or archived (its stream trimmed): in no list."""
    nobody: int = 0
    """Live, naming no person still seated (bots' seats, a match made without an operator token,
    an import; every person named left it for good)."""
    unreadable: int = 0
    """Not this server's to fold (a game it does not serve, a newer server's events): left out."""
    unwritten: int = 0
    """The write lost to an outage: run the backfill again."""
    cursor: int = 0
    """Where the walk is: 0 once it went through every match (a SCAN cursor, to resume from)."""


def reindex_players(app: CommandApp, *, dry_run: bool = False, cursor: int = 0, page: int = REINDEX_PAGE,
                    on_page: Callable[[Reindexed], None] | None = None) -> Reindexed:
    """Every live match in `app.store` (a RedisEventStore) among its people's live matches, from
    `cursor` (0: the start) to the end; `on_page` is told after each page (its `cursor` is where
    a run stopped after it resumes). A dry run writes nothing and counts what it would write."""
    done = Reindexed(cursor=cursor)
    while True:
        cursor, match_ids = app.store.match_ids(cursor, page)
        firsts = app.store.firsts(match_ids)  # the page's creations together: most matches need no more
        for match_id in match_ids:
            _reindex(app, match_id, firsts.get(match_id), dry_run, done)
        done.cursor = cursor
        if on_page is not None:
            on_page(done)
        if cursor == 0:
            return done


def _reindex(app: CommandApp, match_id: str, first: envelope_pb2.EventEnvelope | None, dry_run: bool,
             done: Reindexed) -> None:
    """One match, its first event read with its page's (None: its stream is gone), through the
    command service's own fold (`app.matches`, as ListMyTurns reads) when it names people."""
    done.looked_at += 1
    if first is None:  # trimmed: archived, so over (or its creation lost)
        done.over += 1
        return
    try:
        named = people(open_match_created(first).seat_info)
    except Exception:  # noqa: BLE001 - no match_created a fold could read: no match of this server's
        done.unreadable += 1
        return
    if not named:
        done.nobody += 1
        return
    try:
        hot = app.matches.get(match_id)
    except UnknownMatch:
        done.over += 1
        return
    except UnreadableMatch:
        done.unreadable += 1
        return
    over, seated = _now(app, hot)
    if over is None or over:
        done.unreadable += over is None
        done.over += over is True
        return
    named &= seated  # a player who left for good (LeaveMatch) took the match out of its list
    if not named:
        done.nobody += 1
        return
    if not dry_run:
        stamp = first.timestamp
        created_ms = stamp.seconds * 1000 + stamp.nanos // 1_000_000  # the creation's time, as ZADD NX keeps it
        if not write_index(match_id, named, lambda them: app.players.add(match_id, them, created_ms)):
            done.unwritten += 1
            return
        # The match may have ended, or a player left it, while this read and wrote, the end's
        # (or the leave's) ZREM before this ZADD: folded again after the write, what is over now
        # is taken out again (seen here or, when it came later, by its own ZREM after this ZADD).
        over, seated = _now(app, hot)
        if over is not False:
            write_index(match_id, named, lambda them: app.players.remove(match_id, them))
            done.over += 1
            return
        if named - seated:
            write_index(match_id, named - seated, lambda them: app.players.remove(match_id, them))
            named &= seated
    done.indexed += 1
    done.entries += len(named)


def _now(app: CommandApp, hot: HotMatch) -> tuple[bool | None, set[str]]:
    """Whether the match is over as the store has it now (trimmed since: over; None when this
    server cannot fold what was written since, `match_unreadable`), and the people still seated
    at it: not a seat they left for good (`LeaveMatch`: the bots play it, and ListMyTurns leaves
    it out, as the leave took it out of their lists)."""
    from .app import LEFT  # the command service's own word for a seat left for good

    try:
        with hot.lock:
            m = app.matches.catch_up(hot)
    except NotFound:  # archived since this process folded it (`HotMatches.catch_up`)
        return True, set()
    except FailedPrecondition:  # match_unreadable
        return None, set()
    left = {seat for seat, (change, _seq) in m.away.items() if change.reason == LEFT}
    return m.finished, {info.player_id for info in m.created.seat_info
                        if info.player_id and not info.bot and info.seat not in left}
