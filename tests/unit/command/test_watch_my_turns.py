"""WatchMyTurns in the command app (services/command/turn_watch.py): ListMyTurns' answer first,
then the player's notifications as they are written, resumable from a cursor; a cursor that is
no id, or that no notification has yet, is refused."""

from __future__ import annotations

import threading

import pytest

from famiglia.config import Settings
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.eventstore.turn_notices import YOUR_TURN, InMemoryTurnNotices, StoredNotice, TurnNotice
from famiglia.grpcutil.errors import InvalidArgument
from famiglia.v1 import envelope_pb2
from services.command.bootstrap import bootstrap
from services.command.turn_watch import START, Snapshot

ANN = "ann"


def _notice(match_id: str, at: int) -> TurnNotice:
    return TurnNotice(ANN, match_id, "grifters", 0, YOUR_TURN, at, asked_at=at)


@pytest.fixture()
def app():
    made = bootstrap(store=InMemoryEventStore(), settings=Settings(secret="unit"))
    made.notices = InMemoryTurnNotices()
    return made


def test_the_snapshot_then_what_is_written_after_it_then_a_resume_from_a_cursor(app) -> None:
    match_id = app.create_match("grifters", 2, seed=5, seat_info=[envelope_pb2.SeatInfo(seat=0, player_id=ANN)]).match_id
    app.notices.tell([_notice(match_id, 1)])  # before the watch: not sent again
    stop = threading.Event()
    stream = app.watch_my_turns(ANN, is_active=lambda: not stop.is_set(), poll_ms=50)
    snapshot = next(stream)
    assert isinstance(snapshot, Snapshot)
    assert [t.match_id for t in snapshot.turns] == [match_id] == [t.match_id for t in app.my_turns(ANN)]
    assert snapshot.cursor == app.notices.read(ANN)[-1].id
    threading.Timer(0.1, app.notices.tell, args=([_notice(match_id, 4)],)).start()
    live = next(stream)
    assert isinstance(live, StoredNotice) and (live.match_id, live.version) == (match_id, 4)
    stop.set()
    assert list(stream) == []
    app.notices.tell([_notice(match_id, 7)])
    resumed = list(app.watch_my_turns(ANN, snapshot.cursor, is_active=iter([True, False]).__next__, poll_ms=1))
    assert isinstance(resumed[0], Snapshot)
    assert [n.version for n in resumed[1:]] == [4, 7]


def test_a_player_without_notifications_resumes_from_the_start() -> None:
    app = bootstrap(store=InMemoryEventStore(), settings=Settings(secret="unit"))
    (snapshot,) = list(app.watch_my_turns("nobody", is_active=lambda: False))
    assert snapshot == Snapshot([], START)


@pytest.mark.parametrize("cursor", ["x", "1-2-3", "-1", f"{2**64}-0", "99999999999999-0"])
def test_a_cursor_that_is_no_id_or_no_notification_has_yet_is_refused(app, cursor: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        next(app.watch_my_turns(ANN, cursor))
    assert refused.value.code == "bad_after_id"


def test_a_quiet_watch_asks_the_store_once_a_poll() -> None:
    """Each quiet poll is one wait (it reads from the cursor itself), not a read then a wait:
    every open watch was two round trips a second to Redis."""
    calls: list[str] = []

    class Counted(InMemoryTurnNotices):
        waiting = False

        def read(self, player_id: str, after_id: str = "", count: int = 100) -> list[StoredNotice]:
            if not self.waiting:  # (the in-memory wait reads as it waits: one round trip in Redis)
                calls.append("read")
            return super().read(player_id, after_id, count)

        def wait(self, player_id: str, after_id: str, timeout_ms: int) -> list[StoredNotice]:
            calls.append("wait")
            self.waiting = True
            try:
                return super().wait(player_id, after_id, timeout_ms)
            finally:
                self.waiting = False

    app = bootstrap(store=InMemoryEventStore(), settings=Settings(secret="unit"))
    app.notices = Counted()
    app.notices.tell([_notice("m1", 1)])
    polls = iter([True] * 5 + [False])
    (snapshot, *told) = list(app.watch_my_turns(ANN, START, is_active=polls.__next__, poll_ms=1))
    assert isinstance(snapshot, Snapshot) and [n.version for n in told] == [1]
    assert calls.count("read") == 1 and calls.count("wait") == 5


def test_until_now_ends_after_the_notifications_written_so_far(app) -> None:
    """A one-shot catch-up (WatchMyTurnsRequest.until_now): the snapshot, what was written after
    the cursor, then the end, though the stream is still wanted."""
    match_id = app.create_match("grifters", 2, seed=5, seat_info=[envelope_pb2.SeatInfo(seat=0, player_id=ANN)]).match_id
    app.notices.tell([_notice(match_id, 1)])
    cursor = app.notices.read(ANN)[-1].id
    app.notices.tell([_notice(match_id, 4), _notice(match_id, 7)])
    got = list(app.watch_my_turns(ANN, cursor, is_active=lambda: True, poll_ms=1, until_now=True))
    assert isinstance(got[0], Snapshot) and [n.version for n in got[1:]] == [4, 7]
    assert list(app.watch_my_turns(ANN, is_active=lambda: True, poll_ms=1, until_now=True)) == [
        Snapshot(app.my_turns(ANN), app.notices.read(ANN)[-1].id)]
