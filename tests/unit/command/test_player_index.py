"""The players' index backfill (`services.command.player_index`) on the in-memory stores: a match
that ends while its entry is written is not left listed, and a write lost to an outage is counted
for a run again, not taken for done."""

from __future__ import annotations

import pytest
import redis

from famiglia.config import Settings
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.eventstore.player_matches import InMemoryPlayerMatches
from famiglia.v1 import envelope_pb2
from services.command.app import CommandApp
from services.command.bootstrap import bootstrap
from services.command.player_index import reindex_players

SEATING = [envelope_pb2.SeatInfo(seat=0, player_id="ann"), envelope_pb2.SeatInfo(seat=1, player_id="bob")]


@pytest.fixture()
def app() -> CommandApp:
    return bootstrap(store=InMemoryEventStore(), settings=Settings(secret="unit-test-secret"))


def _created_unindexed(app: CommandApp) -> str:
    """A match created as a server before the index did: no entry."""
    index, app.players = app.players, InMemoryPlayerMatches()
    match_id = app.create_match("grifters", 2, seed=1, seat_info=SEATING).match_id
    app.players = index
    return match_id


def test_a_match_that_ends_while_the_backfill_writes_its_entry_is_not_left_listed(app: CommandApp) -> None:
    """The end's ZREM came between the backfill's read (live) and its ZADD: the entry it wrote
    would list a match over until a reading dropped it."""
    _created_unindexed(app)
    index = app.players

    class EndedMeanwhile(InMemoryPlayerMatches):
        def add(self, match_id: str, player_ids, created_ms: int) -> None:  # type: ignore[no-untyped-def]
            app.players = index
            app.cancel_match(match_id, "ops", "ended as the backfill wrote")  # its ZREM: nothing there yet
            index.add(match_id, player_ids, created_ms)

    app.players = EndedMeanwhile()
    done = reindex_players(app)
    assert (done.indexed, done.over) == (0, 1)
    assert index.newest("ann", 10) == [] and index.newest("bob", 10) == []


def test_a_write_lost_to_an_outage_is_counted_for_a_run_again(app: CommandApp) -> None:
    match_id = _created_unindexed(app)

    class Away(InMemoryPlayerMatches):
        def add(self, match_id: str, player_ids, created_ms: int) -> None:  # type: ignore[no-untyped-def]
            raise redis.ConnectionError("Redis is restarting")

    index, app.players = app.players, Away()
    lost = reindex_players(app)
    assert (lost.indexed, lost.unwritten) == (0, 1)
    app.players = index
    again = reindex_players(app)
    assert (again.indexed, again.unwritten) == (1, 0) and index.newest("ann", 10) == [match_id]


def _highcard() -> tuple[CommandApp, str]:
    """A High Card match of two people, created before the index: no entry."""
    from famiglia.bots.toy import toy_registry

    app = bootstrap(store=InMemoryEventStore(), registry=toy_registry(), settings=Settings(secret="unit-test-secret"))
    index, app.players = app.players, InMemoryPlayerMatches()
    match_id = app.create_match("highcard", 2, seed=5, options={"hand": "6"},
                                seat_info=[envelope_pb2.SeatInfo(seat=s, player_id=f"p{s}") for s in range(2)]).match_id
    app.players = index
    return app, match_id


def _leave(app: CommandApp, match_id: str, seat: int) -> None:
    from famiglia.auth import TokenSigner

    token = TokenSigner("unit-test-secret").seat_token(match_id, seat, f"p{seat}")
    app.leave_match(match_id, app.viewer(match_id, token))


def test_the_backfill_does_not_list_a_match_for_a_player_who_left_it() -> None:
    """LeaveMatch takes the match out of its player's list; the backfill put it back (it named
    everyone the creation seated), and ListMyTurns showed it on."""
    app, match_id = _highcard()
    _leave(app, match_id, 0)
    done = reindex_players(app)
    assert (done.indexed, done.entries) == (1, 1)
    assert app.players.newest("p0", 10) == [] and app.players.newest("p1", 10) == [match_id]
    assert app.my_turns("p0") == []


def test_a_player_who_leaves_while_the_backfill_writes_is_not_left_listed() -> None:
    """The leave's ZREM came between the backfill's read (seated) and its ZADD."""
    app, match_id = _highcard()
    index = app.players

    class LeftMeanwhile(InMemoryPlayerMatches):
        def add(self, match_id: str, player_ids, created_ms: int) -> None:  # type: ignore[no-untyped-def]
            app.players = index
            _leave(app, match_id, 0)  # its ZREM: nothing there yet
            index.add(match_id, player_ids, created_ms)

    app.players = LeftMeanwhile()
    reindex_players(app)
    assert index.newest("p0", 10) == [] and index.newest("p1", 10) == [match_id]



@pytest.mark.parametrize("refusal", ["READONLY You can't write against a read only replica.",
                                     "OOM command not allowed when used memory > 'maxmemory'.",
                                     "MISCONF Redis is configured to save RDB snapshots, but it's currently "
                                     "unable to persist to disk."])
def test_a_creation_whose_index_write_redis_refuses_is_still_answered(app: CommandApp, refusal: str) -> None:
    """A creation is two writes: the match (one script) and then its people's index, a hint. Redis
    refusing the second for now (a failover between them, memory full) was no outage to the
    index's guard, so the caller was answered INTERNAL for a match that was made."""
    from redis._parsers.base import BaseParser

    class Refusing(InMemoryPlayerMatches):
        def add(self, match_id: str, player_ids, created_ms: int) -> None:  # type: ignore[no-untyped-def]
            raise BaseParser.parse_error(refusal)

    app.players = Refusing()
    created = app.create_match("grifters", 2, seed=1, seat_info=SEATING)
    assert app.store.version(created.match_id) == created.version > 0
