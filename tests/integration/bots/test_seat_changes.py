"""A seat's player leaves mid-match on a real Redis, as the dispatcher sees it: from the seat's
`seat_left` on, the seat is the bots' (a decide task with the policy the event names, no
clock); after its `seat_returned` it is its person's again (a clock, no decide task, and no
stalled decision queued again for it). A dispatcher that meets the match after a restart
folds the same seats."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from famiglia.bots.toy import toy_registry
from famiglia.config import Settings
from famiglia.eventstore.envelopes import seat_change_envelope
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.v1 import envelope_pb2
from services.bots.dispatcher import Dispatcher
from services.command.app import Viewer
from services.command.bootstrap import bootstrap as command_bootstrap


@dataclass
class Tasks:
    decisions: list[tuple] = field(default_factory=list)
    clocks: list[tuple] = field(default_factory=list)

    def decide(self, match_id, game_id, seat, version, policy, trace=None, payload=None, then=(),
               lease=None) -> None:
        self.decisions.append((seat, version, policy))

    def clock(self, match_id, seat, version, countdown, trace=None) -> None:
        self.clocks.append((seat, version))

    def batch(self):
        return contextlib.nullcontext()


def _change(store: RedisEventStore, match_id: str, change) -> int:
    """Append a seat change as the command service does (LeaveMatch, ReturnToMatch): its version."""
    version = store.version(match_id)
    env = seat_change_envelope(match_id, version, "highcard", change, command_id=f"seat:{version}")
    return store.append(match_id, version, [env]).version


def test_a_seat_left_is_decided_by_the_bots_until_it_returns(redis_url: str) -> None:
    registry = toy_registry()
    store = RedisEventStore.connect(redis_url)
    command = command_bootstrap(store=store, registry=registry, settings=Settings(redis_url=redis_url, secret="s"))
    now = [0.0]
    tasks = Tasks()
    dispatcher = Dispatcher(store, registry, tasks, stall_seconds=5.0, now=lambda: now[0])
    seen = [0]

    def pump() -> None:
        envelopes = store.read(match_id, after=seen[0])
        if envelopes:
            seen[0] = envelopes[-1].seq
            dispatcher.handle(envelopes)

    try:
        info = [envelope_pb2.SeatInfo(seat=0, bot=True, policy="random", player_id="random"),
                envelope_pb2.SeatInfo(seat=1, player_id="ada")]
        match_id = command.create_match("highcard", 2, seed=5, options={"hand": "3", "clock_s": "30"},
                                        seat_info=info).match_id
        pump()
        hot = command.matches.get(match_id).match
        if hot.engine.pending(hot.state)[0].seat == 0:  # the bot's move in, so the person (seat 1) is asked
            command.submit(match_id, Viewer(0), "bot-first", hot.engine.legal_commands(hot.state, 0)[0])
            pump()
        asked_at = store.version(match_id)
        assert (1, asked_at) in tasks.clocks and not any(d[0] == 1 for d in tasks.decisions)

        left_at = _change(store, match_id, envelope_pb2.SeatLeft(seat=1, policy="heuristic", reason="timeouts"))
        pump()
        assert (1, left_at, "heuristic") in tasks.decisions, "the bots play the seat from its seat_left on"
        assert (1, left_at) not in tasks.clocks, "a seat the bots play has no clock"
        assert dispatcher.matches[match_id].bots == {0: "random", 1: "heuristic"}

        # A dispatcher that meets the match mid-way (a restart) folds the same bot seats.
        again = Tasks()
        restarted = Dispatcher(store, registry, again, stall_seconds=5.0, now=lambda: now[0])
        assert restarted.recover() == 1
        assert again.decisions == [(1, left_at, "heuristic")] and not again.clocks

        back_at = _change(store, match_id, envelope_pb2.SeatReturned(seat=1))
        pump()
        assert dispatcher.matches[match_id].bots == {0: "random"}
        assert (1, back_at) in tasks.clocks, "the person who took the seat back is on the clock again"
        assert not [d for d in tasks.decisions if d[0] == 1 and d[1] >= back_at]
        decided = len(tasks.decisions)
        now[0] += 3600.0
        dispatcher.check_stalls()  # the bot's decision at left_at is not the seat's any more: not queued again
        assert not [d for d in tasks.decisions[decided:] if d[0] == 1]
    finally:
        store.close()
