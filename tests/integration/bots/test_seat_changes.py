"""A seat's player leaves mid-match on a real Redis, as the dispatcher sees it: from the seat's
`seat_left` on, the seat is the bots' (a decide task with the policy the event names, no
clock); after its `seat_returned` it is its person's again (a clock, no decide task, and no
stalled decision queued again for it). A dispatcher that meets the match after a restart
folds the same seats."""

from __future__ import annotations

import contextlib
from collections import Counter
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


# -- seats changing hands while the dispatcher dies ------------------------------------------------
@dataclass
class Queue:
    """The broker, as the dispatcher sends to it: tasks kept until a worker takes them, in any order."""

    tasks: list[tuple] = field(default_factory=list)
    sent: Counter = field(default_factory=Counter)
    """How often each (kind, match, seat, version) was sent."""

    def decide(self, match_id, game_id, seat, version, policy, trace=None, payload=None, then=(),
               lease=None) -> None:
        self.tasks.append(("decide", match_id, game_id, version, [(seat, policy, payload), *then], lease))
        self.sent["decide", match_id, seat, version] += 1

    def clock(self, match_id, seat, version, countdown, trace=None) -> None:
        self.tasks.append(("clock", match_id, seat, version))
        self.sent["clock", match_id, seat, version] += 1

    def batch(self):
        return contextlib.nullcontext()


def test_seats_change_hands_while_the_dispatcher_is_restarted_or_killed_mid_batch(redis_url: str) -> None:
    """Matches of people and bots on a real Redis and the command service over gRPC; the
    dispatcher's tasks run by the worker's own handlers in any order, clocks running out at
    random; the players leave, let their clocks run out and come back at random; the dispatcher
    is restarted between batches, or killed mid-batch (the batch handed again, as the stream's
    consumer group hands an unacknowledged one) and the broker loses the tasks in flight. Every
    match still ends, each seat change stands where the rules put it, only the bots act for a
    seat between its `seat_left` and its `seat_returned` (and never for a seat its person
    plays), and no decision is sent again and again."""
    import random

    from famiglia.bots.games import playable_registry
    from famiglia.bots.toy import toy_registry
    from famiglia.grpcutil.errors import AppError
    from famiglia.replay.verify import verify_envelopes
    from services.bots import handlers
    from services.bots.bootstrap import BotsSettings
    from services.bots.bootstrap import bootstrap as bots_bootstrap
    from services.command.bootstrap import CommandSettings
    from services.command.entrypoints.grpc_server import serve
    from tests.profile import examples
    from tests.support.seat_changes import seat_change_problems

    registry = toy_registry(playable_registry())
    store = RedisEventStore.connect(redis_url)
    settings = Settings(redis_url=redis_url, secret="s")
    command = command_bootstrap(store=store, registry=registry, settings=settings,
                                command_settings=CommandSettings(leave_policy="random"))
    server, port = serve(command, "127.0.0.1:0", workers=8)
    server.start()
    bots = bots_bootstrap(settings=Settings(redis_url=redis_url, secret="s", command_addr=f"127.0.0.1:{port}"),
                          registry=registry, store=store, bots=BotsSettings())
    try:
        for run in range(examples(quick=4, soak=40)):
            rng = random.Random(run)
            now = [0.0]
            queue = Queue()
            lease = 8 if run % 2 else 0

            def dispatcher(queue: Queue = queue, now: list[float] = now, lease: int = lease) -> Dispatcher:
                return Dispatcher(store, registry, queue, stall_seconds=5.0, now=lambda: now[0], lease_moves=lease)

            matches = [command.create_match("highcard", 2, seed=run, options={"hand": "6", "clock_s": "30"},
                                            seat_info=[envelope_pb2.SeatInfo(seat=0, bot=True, policy="random",
                                                                             player_id="random"),
                                                       envelope_pb2.SeatInfo(seat=1, player_id="ada")])]
            if "grifters" in registry:
                matches.append(command.create_match("grifters", 3, seed=run,
                                                    seat_info=[envelope_pb2.SeatInfo(seat=s, player_id=f"p{s}")
                                                               for s in range(3)]))
            people = {m.match_id: m.seat_tokens for m in matches}
            seen = dict.fromkeys(people, 0)
            current = dispatcher()
            restarts = kills = 0
            for _step in range(3000):
                m_states = {mid: command.matches.catch_up(command.matches.get(mid)) for mid in people}
                if all(m.finished for m in m_states.values()):
                    break
                # the dispatcher reads what was appended; now and then it dies on the way
                for match_id in people:
                    batch = store.read(match_id, after=seen[match_id])
                    if not batch:
                        continue
                    if len(batch) > 1 and (rng.random() < 0.05 or (not kills and _step >= 10)):
                        # killed mid-batch: the tasks in flight lost
                        current.handle(batch[:rng.randrange(1, len(batch))])
                        queue.tasks.clear()
                        current = dispatcher()
                        current.recover()
                        kills += 1
                    elif rng.random() < 0.03:  # restarted between batches
                        current = dispatcher()
                        current.recover()
                        restarts += 1
                    current.handle(batch)
                    seen[match_id] = batch[-1].seq
                # the players
                for match_id, tokens in people.items():
                    m = m_states[match_id]
                    if m.finished or rng.random() < 0.5:
                        continue
                    seat = rng.randrange(len(tokens))
                    if not tokens[seat]:
                        continue
                    viewer = command.viewer(match_id, tokens[seat])
                    try:
                        if rng.random() < 0.04:
                            command.leave_match(match_id, viewer)
                        elif seat in m.away and rng.random() < 0.3:
                            command.return_to_match(match_id, viewer)
                        elif seat not in m.away and seat in {p.seat for p in m.engine.pending(m.state)} \
                                and rng.random() < 0.4:
                            options = command.legal_commands(match_id, viewer).commands
                            command.submit(match_id, viewer, f"p{_step}", rng.choice(options), omit_events=True)
                    except AppError as refused:
                        assert refused.code in {"seat_left", "seat_away", "seat_is_bot", "match_over",
                                                "stale_version"}, refused
                # the worker: a few tasks, in any order; a clock runs out only now and then
                rng.shuffle(queue.tasks)
                for task in [queue.tasks.pop() for _ in range(min(3, len(queue.tasks)))]:
                    if task[0] == "clock":
                        if rng.random() < 0.5:
                            queue.tasks.insert(0, task)  # not yet
                            continue
                        handlers.run_clock(bots, task[1], task[2], task[3])
                    else:
                        _, match_id, game_id, version, seats, lease_of = task
                        handlers.play_bot_decisions(  # as the Celery task hands them on
                            bots, match_id, game_id, version, seats,
                            lease=None if not lease_of else (lease_of[0], dict(lease_of[1])))
                now[0] += 1.0
                current.check_stalls()
            else:
                raise AssertionError(f"run {run}: a match never ended")
            assert kills + restarts, "no dispatcher died: the faults were never injected"
            changes = 0
            for match_id in people:
                envelopes = store.read(match_id)
                assert verify_envelopes(registry, envelopes).ok, match_id
                assert seat_change_problems(registry, envelopes) == [], match_id
                changes += sum(e.type in ("seat_left", "seat_returned") for e in envelopes)
            assert changes, "no seat changed hands"
            # no task loops: the dispatcher sent a bounded number of tasks for what was played
            assert sum(queue.sent.values()) <= 3 * sum(store.version(mid) for mid in people), queue.sent.total()
            assert max(queue.sent.values()) <= 6, queue.sent.most_common(3)
    finally:
        bots.close()
        server.stop(grace=None)
        store.close()
