"""The bots worker (handlers.py, bootstrap.py, celery_app.py): rules a mutation of the code once changed unnoticed, and the store losing a bot's move."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import grpc
import pytest

from famiglia.bots.toy import ENGINE as HIGHCARD
from famiglia.bots.toy import toy_registry
from famiglia.engine import MatchConfig, fold
from famiglia.v1 import game_service_pb2 as pb
from services.bots import handlers
from services.bots.payload import DecisionPayload, seat_payload
from tests.unit.bots.test_handlers import _RpcError


@pytest.fixture(autouse=True)
def _fresh_process() -> None:
    handlers._REACHED.clear()
    handlers._LOCAL_TRIES.clear()


def _payload() -> DecisionPayload:
    state = fold(HIGHCARD, HIGHCARD.setup(MatchConfig(2, {"hand": "3"}), 7))
    seat = HIGHCARD.pending(state)[0].seat
    return seat_payload(HIGHCARD, state, seat)


@dataclass
class Seat:
    match_id: str
    seat: int
    app: App
    token: str = "tok"

    def view(self):
        self.app.calls.append(("view", self.seat))
        return SimpleNamespace(finished=False, version=self.app.version,
                               to_act=[SimpleNamespace(seat=s) for s in self.app.to_act],
                               view=SimpleNamespace(value=b""))

    def legal_commands(self, limit: int = 0):
        self.app.calls.append(("legal", self.seat))
        return SimpleNamespace(version=self.app.version, complete=True,
                               commands=[SimpleNamespace(value=c) for c in _payload().legal])

    def submit(self, command, *, command_id=None, expected_version=None, omit_events=False):
        self.app.calls.append(("submit", self.seat, command_id, expected_version))
        if len(self.app.calls) > 60:
            raise AssertionError("the task does not stop")
        return self.app.on_submit(self, command_id, expected_version)


@dataclass
class App:
    registry: object = field(default_factory=toy_registry)
    calls: list = field(default_factory=list)
    version: int = 9
    to_act: tuple[int, ...] = ()
    on_submit: object = None
    on_chain: object = None

    def __post_init__(self) -> None:
        self.game_client = SimpleNamespace(submit_commands=self._chain)

    def _chain(self, match_id, entries, **kwargs):
        self.calls.append(("chain", [e[2] for e in entries], kwargs.get("expected_version")))
        if self.on_chain is None:
            raise _RpcError(grpc.StatusCode.UNIMPLEMENTED)
        return self.on_chain(entries, kwargs)

    def seat(self, match_id: str, seat: int) -> Seat:
        return Seat(match_id, seat, self)


# -- confirmed bugs ---------------------------------------------------------------------------


def test_a_decision_queued_again_after_the_store_lost_the_move_is_played_by_the_same_process() -> None:
    """The store loses a bot's acknowledged move (docs/eventstore.md); the dispatcher finds its
    fold ahead at the stall time and queues the lost decision again at the store's version
    (test_dispatcher: `..._stalled_on_writes_the_store_lost_...`). The worker process that played
    it first remembers the match past that version (`_REACHED`) and answers "stale" without a
    single RPC, however often the dispatcher queues it: with one worker process the match never
    moves again."""
    from tests.unit.bots.test_bot_batches import LocalWorker
    from tests.unit.bots.test_dispatcher import Table, _lose_tail

    now = [0.0]
    table = Table(now)
    match_id = table.create({0: "random", 1: "random"})
    table.pump(match_id)
    worker = LocalWorker(table, chained=False)

    def play(task: int) -> list[str]:
        mid, seat, version, policy = table.tasks.decisions[task]
        return handlers.play_bot_decisions(worker, mid, "highcard", version,  # type: ignore[arg-type]
                                           [(seat, policy, table.tasks.payloads[task])])

    lost_at = table.version(match_id)
    assert play(-1) == ["submitted"]
    assert table.version(match_id) == lost_at + 1
    _lose_tail(table, match_id, lost_at)
    now[0] = 11.0
    assert table.dispatcher.check_stalls() == 1
    assert table.tasks.decisions[-1][2] == lost_at  # queued again where the store is
    assert play(-1) == ["submitted"]  # before: ["stale"], and nothing was sent
    assert table.version(match_id) == lost_at + 1


# -- rules a mutation of the code once changed unnoticed ---------------------------------------


def test_a_command_service_restarting_makes_the_task_retry() -> None:
    """Fails on a change the suite once missed (UNAVAILABLE not transient), and (a first step's Transient swallowed)."""
    def unavailable(seat, command_id, expected):
        raise _RpcError(grpc.StatusCode.UNAVAILABLE)

    app = App(on_submit=unavailable)
    with pytest.raises(handlers.Transient):
        handlers.play_bot_decision(app, "m1", "highcard", 0, 9, "random", _payload())  # type: ignore[arg-type]


def test_a_task_without_payload_for_a_seat_not_asked_reads_nothing_more_and_submits_nothing() -> None:
    """Fails on a change the suite once missed (`_fetch_decision` without its not-asked check)."""
    app = App(to_act=(1,), on_submit=lambda s, i, v: pb.SubmitCommandResponse(version=v + 1))
    assert handlers.play_bot_decision(app, "m1", "highcard", 0, 9, "random") == "not_pending"  # type: ignore[arg-type]
    assert app.calls == [("view", 0)]


def test_a_chain_stale_after_a_held_answer_does_not_mark_the_version_passed() -> None:
    """Fails on a change the suite once missed: a chain whose first (held) answer left the version at 9 and whose second entry is
    stale at the position (another held answer) must not make this process treat version 9 as
    past: the dispatcher's next task at 9 must still reach the server."""
    def chain(entries, kwargs):
        return pb.SubmitCommandsResponse(
            results=[pb.SubmitCommandResponse(version=9, held=True)],
            refusal=pb.CommandRefusal(index=1, status=grpc.StatusCode.ABORTED.value[0], code="stale_version"))

    app = App(on_chain=chain, on_submit=lambda s, i, v: pb.SubmitCommandResponse(version=v + 1))
    payload = _payload()
    assert handlers.play_bot_decisions(app, "m1", "highcard", 9,  # type: ignore[arg-type]
                                       [(0, "random", payload), (1, "random", payload)]) == ["submitted", "stale"]
    assert handlers.play_bot_decision(app, "m1", "highcard", 1, 9, "random", payload) == "submitted"  # type: ignore[arg-type]


def _held_then_asked_again(app: App, payload: DecisionPayload, times: int | None):
    """Every submit is held back (the version stays 9); the service keeps asking seat 0."""
    asks = [0]

    def chain(entries, kwargs):
        assert not entries  # only asking
        asks[0] += 1
        answer = pb.SubmitCommandsResponse(next_version=9)
        if times is None or asks[0] <= times:
            nxt = answer.next.add(seat=0, complete=True)
            for c in payload.legal:
                nxt.legal.add(value=c)
        return answer

    app.on_chain = chain
    app.on_submit = lambda s, i, v: pb.SubmitCommandResponse(version=9, held=True)


def test_a_turn_played_on_after_a_held_answer_has_its_own_command_id() -> None:
    """Fails on a change the suite once missed: held answers leave the version where it was, so a follow-up named like a
    task's first command (`bot:m:9:0`) would be answered as its duplicate and never played."""
    payload = _payload()
    app = App()
    _held_then_asked_again(app, payload, times=1)
    outcomes = handlers.play_bot_decision(app, "m1", "highcard", 0, 9, "random", payload)  # type: ignore[arg-type]
    assert outcomes == "submitted"
    ids = [c[2] for c in app.calls if c[0] == "submit"]
    assert ids == ["bot:m1:9:0", "bot:m1:9:0:h"]
    assert len(set(ids)) == len(ids)


def test_a_task_plays_on_after_held_answers_a_bounded_number_of_turns() -> None:
    """Fails on a change the suite once missed: a seat the service keeps asking while its answers are held must not keep one
    task playing for ever."""
    payload = _payload()
    app = App()
    _held_then_asked_again(app, payload, times=None)
    handlers.play_bot_decision(app, "m1", "highcard", 0, 9, "random", payload)  # type: ignore[arg-type]
    submits = [c for c in app.calls if c[0] == "submit"]
    assert len(submits) == 1 + handlers.MAX_HELD_FOLLOW_UPS


def test_both_tasks_retry_transient_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails on a change the suite once missed (autoretry_for without handlers.Transient): a decide or clock task that meets the
    command service away is tried again, not given up on the first failure."""
    from famiglia.config import Settings
    from famiglia.eventstore.memory_store import InMemoryEventStore
    from services.bots.bootstrap import BotsSettings, bootstrap
    from services.bots.entrypoints.celery_app import CLOCK, DECIDE, make_celery

    calls: list[str] = []

    def away(*args, **kwargs):
        calls.append("x")
        raise handlers.Transient("UNAVAILABLE")

    monkeypatch.setattr(handlers, "run_clock", away)
    monkeypatch.setattr(handlers, "play_bot_decision", away)
    bots = bootstrap(settings=Settings(redis_url="redis://127.0.0.1:1/0", secret="test"),
                     store=InMemoryEventStore(), bots=BotsSettings())
    celery = make_celery(bots)
    for name, args in ((DECIDE, ("m1", "highcard", 0, 5, "random")), (CLOCK, ("m1", 0, 5))):
        calls.clear()
        celery.tasks[name].apply(args=args)  # eager: each retry runs at once
        assert len(calls) > 1, name


def test_a_clock_that_meets_redis_away_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """run_clock reads the match from Redis itself (MatchState.from_envelopes(store.read(...))).
    A Redis restart or failover at the clock's time raises redis' ConnectionError, which is
    neither handlers.Transient nor the builtin ConnectionError: autoretry does not cover it, the
    clock task fails for good and is acked. Nothing queues it again (check_stalls re-queues bot
    decisions only: "their clocks move the match on"), so the person's seat waits for ever."""
    import redis

    from famiglia.config import Settings
    from services.bots.bootstrap import BotsSettings, bootstrap
    from services.bots.entrypoints.celery_app import CLOCK, make_celery

    reads: list[str] = []

    class AwayStore:
        def read(self, match_id, after=0, limit=None):
            reads.append(match_id)
            raise redis.exceptions.ConnectionError("Error 111 connecting to redis:6379. Connection refused.")

        version = read  # (the clock's first look, at the match's version)

    bots = bootstrap(settings=Settings(redis_url="redis://127.0.0.1:1/0", secret="test"),
                     store=AwayStore(), bots=BotsSettings())  # type: ignore[arg-type]
    celery = make_celery(bots)
    celery.tasks[CLOCK].apply(args=("m1", 0, 5))
    assert len(reads) > 1  # before: 1, the task given up at once
