"""A bot decision the server cannot let the bot make is tried a bounded number of times, then
given up: the seat plays its game's documented default, as a person's seat whose clock ran out,
and with none it is left as it is and never queued again (handlers.py `_hopeless`, `_give_up`;
dispatcher.py `_give_up`; tries.py). Before session 35 each of these was tried for ever: a seat
whose view the server failed on, the same refused command and fallback at every re-queue, and a
match the dispatcher failed on at a bot's turn every 16 stall times."""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
import pytest
import redis
import structlog

from famiglia.bots.toy import ENGINE as HIGHCARD
from famiglia.matchstate import command_key
from services.bots import dispatcher as dispatcher_module
from services.bots import handlers
from services.bots.dispatcher import MAX_DISPATCH_FAILURES
from services.bots.payload import bot_command_id
from services.bots.tries import MAX_FAILURES

from .test_bot_batches import LocalWorker
from .test_dispatcher import Table


@dataclass
class Counted:
    """The worker's metrics, as far as these tests read them."""

    given_up: list[tuple[str, str]] = field(default_factory=list)

    def decided(self, game: str, policy: str, cpu_s: float, wall_s: float) -> None:
        pass

    def decision_given_up(self, game: str, reason: str) -> None:
        self.given_up.append((game, reason))

    def clock_default(self, game: str) -> None:
        pass


def _worker(table: Table) -> LocalWorker:
    """A worker sharing the dispatcher's record of tries, as both share Redis in a deployment."""
    worker = LocalWorker(table)
    worker.tries = table.dispatcher.tries  # type: ignore[attr-defined]
    worker.metrics = Counted()  # type: ignore[attr-defined]
    return worker


def _view_fails(monkeypatch: pytest.MonkeyPatch, table: Table) -> None:
    def get_view(*args, **kwargs):
        raise RuntimeError("engine bug: the view of this state")

    monkeypatch.setattr(table.app, "get_view", get_view)  # the command service answers INTERNAL


def _bot_asked(table: Table) -> tuple[str, int, int, str, LocalWorker]:
    """A two-bot match whose first bot seat is asked: its id, the seat's decision, and a worker."""
    match_id = table.create({0: "random", 1: "random"})
    table.pump(match_id)
    [(_, seat, version, policy)] = table.tasks.decisions
    return match_id, seat, version, policy, _worker(table)


def _stall_checks(table: Table, times: int) -> None:
    """`times` passes of the stall check, 10 s apart (the stall time)."""
    for _ in range(times):
        table.clock_now[0] += 10
        table.dispatcher.check_stalls()


def _retried(times: int, worker: LocalWorker, match_id: str, seat: int, version: int, policy: str,
             payload=None) -> None:
    """`times` tries of the seat's decision, each failing for now (`Transient`: Celery retries it)."""
    for _ in range(times):
        with pytest.raises(handlers.Transient):
            handlers.play_bot_decision(worker, match_id, "highcard", seat, version, policy, payload)  # type: ignore[arg-type]


def test_a_seat_whose_view_the_server_cannot_show_plays_its_default_after_a_few_tries(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """GetView answering INTERNAL (the engine raises on the seat's view) was `Transient`: Celery
    retried the task, every task the stall timer queued again did the same, and the bot seat
    never moved again. It now fails MAX_FAILURES times (Celery's retries, with their backoff),
    then the seat plays its default under the clock's command id, logged and counted once.
    Fails if the last try is retried again."""
    table = Table()
    match_id, seat, version, policy, worker = _bot_asked(table)
    _view_fails(monkeypatch, table)
    with structlog.testing.capture_logs() as lines:
        _retried(MAX_FAILURES - 1, worker, match_id, seat, version, policy)  # a task without a payload reads the view
        assert handlers.play_bot_decision(worker, match_id, "highcard", seat, version, policy) == "default"  # type: ignore[arg-type]
    assert table.version(match_id) == version + 1
    commands = table.app.matches.get(match_id).match.commands
    assert command_key(seat, handlers.clock_command_id(match_id, version, seat)) in commands
    [line] = [line for line in lines if line["event"] == "bot_seat_given_up"]
    assert (line["match_id"], line["seat"], line["version"], line["reason"], line["default"]) == (
        match_id, seat, version, "unreadable", "submitted")
    assert worker.metrics.given_up == [("highcard", "unreadable")]  # type: ignore[attr-defined]
    # The match goes on: the next seat's decision is queued as usual.
    assert table.tasks.decisions[-1][1:3] == (1 - seat, version + 1)
    handlers._REACHED.clear()  # a retry of the old task in another process: stale, no second line
    with structlog.testing.capture_logs() as lines:
        assert handlers.play_bot_decision(worker, match_id, "highcard", seat, version, policy) == "stale"  # type: ignore[arg-type]
    assert not [line for line in lines if line["event"] == "bot_seat_given_up"]


def test_a_seat_given_up_without_a_default_is_not_queued_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no default to play (or one refused too) nothing can move the seat: it is logged and
    counted once, a later task does nothing more, and the dispatcher's stall timer queues the
    decision no more. Fails if the stall timer queues it again."""
    table = Table()
    match_id, seat, version, policy, worker = _bot_asked(table)
    _view_fails(monkeypatch, table)
    monkeypatch.setattr(type(HIGHCARD), "timeout_command", lambda self, state, seat: None)
    with structlog.testing.capture_logs() as lines:
        _retried(MAX_FAILURES - 1, worker, match_id, seat, version, policy)
        for _ in range(2):  # the last try, and a task queued again meanwhile
            assert handlers.play_bot_decision(worker, match_id, "highcard", seat, version, policy) == "given_up"  # type: ignore[arg-type]
    [line] = [line for line in lines if line["event"] == "bot_seat_given_up"]
    assert line["default"] == "no_default"
    assert worker.metrics.given_up == [("highcard", "unreadable")]  # type: ignore[attr-defined]
    assert table.version(match_id) == version
    queued = len(table.tasks.decisions)
    _stall_checks(table, 40)  # 400 s of stall checks (stall time 10 s)
    assert len(table.tasks.decisions) == queued


def test_a_seat_not_given_up_is_still_queued_again_by_the_stall_timer() -> None:
    """The other side of the test above: a decision whose task only stalled (a worker killed)
    is queued again, however many times it stalls."""
    table = Table()
    match_id = table.create({0: "random", 1: "random"})
    table.pump(match_id)
    _stall_checks(table, 40)
    assert len(table.tasks.decisions) > 3


def test_a_match_the_dispatcher_keeps_failing_on_at_a_bots_turn_plays_its_default_and_stops(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The dispatcher failing at a bot's turn (here building the seat's payload: the engine's
    view raises at that state) folded the match again after 1, 2, 4 ... 16 stall times, for good.
    At its MAX_DISPATCH_FAILURES-th failure in a row it now gives the match up: the bot seat
    asked gets a clock task at once (its default, which `run_clock` plays), and the match is
    not folded again until an event comes. Fails if no default is queued, or the folds go on."""
    table = Table()
    metrics = table.dispatcher.metrics = Counted()  # type: ignore[assignment]
    match_id = table.create({0: "random", 1: "random"})
    broken = table.version(match_id)
    payload = dispatcher_module.seat_payload
    built: list[float] = []

    def seat_payload(engine, state, seat, *args, **kwargs):
        if table.app.matches.get(match_id).match.version == broken:
            built.append(table.clock_now[0])
            raise RuntimeError("engine bug: the view of this state")
        return payload(engine, state, seat, *args, **kwargs)

    monkeypatch.setattr(dispatcher_module, "seat_payload", seat_payload)
    with structlog.testing.capture_logs() as lines:
        table.pump(match_id)
        _stall_checks(table, 100)  # 1,000 s of checks (stall time 10 s)
    assert len(built) == MAX_DISPATCH_FAILURES  # then no more
    assert table.tasks.decisions == []
    [(_, seat, version, countdown)] = table.tasks.clocks
    assert (version, countdown) == (broken, 0.0)
    [line] = [line for line in lines if line["event"] == "bot_match_given_up"]
    assert (line["match_id"], line["failures"], line["defaults"]) == (match_id, MAX_DISPATCH_FAILURES, [seat])
    assert metrics.given_up == [("highcard", "dispatch_failed")]  # one decision given up, counted once
    # The clock task plays the default; its event schedules the match as usual.
    assert handlers.run_clock(_worker(table), match_id, seat, version) == "submitted"  # type: ignore[arg-type]
    assert table.tasks.decisions == [(match_id, 1 - seat, broken + 1, "random")]


def test_a_match_whose_requeue_fails_does_not_stop_the_stall_check_of_the_others(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A stalled decision whose new task could not be built (an engine bug at that state) raised
    out of the stall check, at every pass: the matches after it were never looked at again, their
    lost tasks never queued again. The match is now let go, as `handle` does with one it fails on.
    Fails if the other match's stalled decision is not queued again."""
    table = Table()
    broken, other = table.create({0: "random", 1: "random"}), table.create({0: "random", 1: "random"}, seed=4)
    table.pump(broken)
    table.pump(other)
    assert [d[0] for d in table.tasks.decisions] == [broken, other]
    payload = dispatcher_module.seat_payload

    def seat_payload(engine, state, seat, *args, **kwargs):
        if any(t.match.state is state for m, t in table.dispatcher.matches.items() if m == broken):
            raise RuntimeError("engine bug: the view of this state")
        return payload(engine, state, seat, *args, **kwargs)

    monkeypatch.setattr(dispatcher_module, "seat_payload", seat_payload)
    table.clock_now[0] += 10  # both tasks lost with their worker
    table.dispatcher.check_stalls()
    assert [d[0] for d in table.tasks.decisions] == [broken, other, other]


class _Refusal(grpc.RpcError):
    """A refusal as the command service answers it: its famiglia code in the trailing metadata."""

    def __init__(self, code: grpc.StatusCode, famiglia_code: str) -> None:
        self._code, self._famiglia_code = code, famiglia_code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return f"{self._famiglia_code}: refused"

    def trailing_metadata(self):
        return (("famiglia-code", self._famiglia_code),)


def _refusing(code: grpc.StatusCode, famiglia_code: str):  # type: ignore[no-untyped-def]
    """A client call the command service refuses, every time (an old replica's, a call set aside)."""
    def refused(*args, **kwargs):
        raise _Refusal(code, famiglia_code)

    return refused


def test_a_replica_that_cannot_read_the_match_mid_deploy_does_not_give_the_seat_up(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """In a rolling deploy a command service replica of the old version refuses every command to a
    match a newer one wrote an event of a new kind to (FAILED_PRECONDITION `match_unreadable`: the
    replica, not the command). That was counted as the seat's commands refused: three tasks of the
    stall timer later the seat was given up (its default played, or, without one, the decision was
    never queued again), though the seat's own command goes in once the deploy is over. Fails if
    the refusal counts, or if the seat plays anything but its own choice afterwards."""
    table = Table()
    match_id, seat, version, policy, worker = _bot_asked(table)
    client = worker.seat(match_id, seat)
    submit = client.submit
    client.submit = _refusing(grpc.StatusCode.FAILED_PRECONDITION, "match_unreadable")  # type: ignore[method-assign]
    with structlog.testing.capture_logs() as lines:
        for _ in range(MAX_FAILURES + 2):  # the deploy outlasts several stall times
            payload = table.tasks.payloads[-1]
            with pytest.raises(handlers.Transient):  # retried, by Celery then by the stall timer
                handlers.play_bot_decision(worker, match_id, "highcard", seat, version, policy, payload)  # type: ignore[arg-type]
            table.clock_now[0] += 200
            table.dispatcher.check_stalls()
        client.submit = submit  # type: ignore[method-assign]  # the deploy is over
        queued = len(table.tasks.decisions)
        table.clock_now[0] += 200
        table.dispatcher.check_stalls()
        assert len(table.tasks.decisions) == queued + 1  # the decision is still queued again
        payload = table.tasks.payloads[-1]
        assert handlers.play_bot_decision(worker, match_id, "highcard", seat, version, policy, payload) == "submitted"  # type: ignore[arg-type]
    assert not [line for line in lines if line["event"] == "bot_seat_given_up"]
    assert worker.tries.failures(match_id, version, seat) == 0  # type: ignore[attr-defined]
    commands = table.app.matches.get(match_id).match.commands
    assert command_key(seat, bot_command_id(match_id, version, seat)) in commands
    assert command_key(seat, handlers.clock_command_id(match_id, version, seat)) not in commands


def test_a_store_refusing_writes_for_longer_than_the_bound_does_not_give_the_match_up(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Redis refusing writes for now (READONLY in a failover, OOM past maxmemory, MISCONF: no
    connection error, so the dispatcher lets the match go and folds it again after a stall wait)
    counted towards MAX_DISPATCH_FAILURES: past 1 + 2 + 4 + 8 stall waits the match was given
    up, and the give-up's own fold failed the same way, so nothing was played and the match was
    never folded again: once Redis took writes again, its bots waited for good. Fails if the
    match is given up, or its bot's decision is not queued once Redis is back."""
    table = Table()
    match_id = table.create({0: "random", 1: "random"})
    follow = table.dispatcher.live.add

    def read_only(match_id: str) -> None:
        raise redis.exceptions.ReadOnlyError("You can't write against a read only replica.")

    monkeypatch.setattr(table.dispatcher.live, "add", read_only)
    with structlog.testing.capture_logs() as lines:
        table.pump(match_id)
        _stall_checks(table, 100)  # 1,000 s of a store refusing writes (stall time 10 s)
        assert table.tasks.decisions == []
        monkeypatch.setattr(table.dispatcher.live, "add", follow)  # failed over: writes go in again
        _stall_checks(table, 20)
    assert not [line for line in lines if line["event"] == "bot_match_given_up"]
    assert {(m, v) for m, _s, v, _p in table.tasks.decisions} == {(match_id, table.version(match_id))}  # (and again when stalled)
    assert table.tasks.clocks == []


def test_a_match_given_up_while_the_store_refuses_writes_plays_its_default_once_it_takes_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The give-up folds the match to find the bot seats asked; a store refusing for now there
    (READONLY) left nothing played and the match never folded again. The give-up now waits for
    the store, as any let-go match does. Fails if no default is queued once Redis takes writes."""
    table = Table()
    match_id = table.create({0: "random", 1: "random"})
    broken = table.version(match_id)
    payload = dispatcher_module.seat_payload
    follow = table.dispatcher.live.add
    built: list[float] = []

    def read_only(match_id: str) -> None:
        raise redis.exceptions.ReadOnlyError("You can't write against a read only replica.")

    def seat_payload(engine, state, seat, *args, **kwargs):
        if table.app.matches.get(match_id).match.version == broken:
            built.append(table.clock_now[0])
            if len(built) == MAX_DISPATCH_FAILURES:  # a failover just as the match is given up
                monkeypatch.setattr(table.dispatcher.live, "add", read_only)
            raise RuntimeError("engine bug: the view of this state")
        return payload(engine, state, seat, *args, **kwargs)

    monkeypatch.setattr(dispatcher_module, "seat_payload", seat_payload)
    with structlog.testing.capture_logs() as lines:
        table.pump(match_id)
        _stall_checks(table, 100)
        assert table.tasks.clocks == []
        monkeypatch.setattr(table.dispatcher.live, "add", follow)
        _stall_checks(table, 40)
    assert len(built) == MAX_DISPATCH_FAILURES
    [(_, seat, version, countdown)] = table.tasks.clocks
    assert (version, countdown) == (broken, 0.0)
    [line] = [line for line in lines if line["event"] == "bot_match_given_up"]
    assert (line["failures"], line["defaults"], line["error"]) == (MAX_DISPATCH_FAILURES, [seat], "")


def test_a_seat_whose_default_met_an_outage_is_still_queued_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seat's default is due, and the command service is restarting (UNAVAILABLE) when it
    goes: the task is retried by Celery, whose retries may run out before the service is back.
    The stall check took the failures counted for a give-up that had happened and queued the
    decision no more: nothing moved the seat again (for a day, until the record expired).
    Only a give-up that ended (its default refused, or none) stops the stall timer now. Fails
    if the decision is not queued again once the service is back, or the seat does not move."""
    table = Table()
    match_id, seat, version, policy, worker = _bot_asked(table)
    _view_fails(monkeypatch, table)
    client = worker.seat(match_id, seat)
    submit, restarting = client.submit, [True]

    def submit_while_restarting(command, *, command_id=None, **kwargs):
        if restarting[0]:
            raise _Refusal(grpc.StatusCode.UNAVAILABLE, "server_stopping")
        return submit(command, command_id=command_id, **kwargs)

    client.submit = submit_while_restarting  # type: ignore[method-assign]
    # The last one's default meets the restart: Celery's retries run out.
    _retried(MAX_FAILURES, worker, match_id, seat, version, policy)
    restarting[0] = False
    queued = len(table.tasks.decisions)
    _stall_checks(table, 40)  # 400 s of stall checks (stall time 10 s)
    assert len(table.tasks.decisions) > queued
    handlers.play_bot_decision(worker, match_id, "highcard", seat, version, policy)  # type: ignore[arg-type]
    assert table.version(match_id) == version + 1


def test_a_worker_that_cannot_fold_the_match_for_its_default_leaves_the_decision_to_another(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The default is read from the worker's own fold of the match; a worker that cannot fold it
    (a worker of the old version in a rolling deploy, the events a newer server's) gives nothing
    up for good: the decision is still queued again, for a worker that can. Fails if the stall
    timer stops there."""
    table = Table()
    match_id, seat, version, policy, worker = _bot_asked(table)
    _view_fails(monkeypatch, table)

    def old_worker(*args, **kwargs):
        raise ValueError("unknown event kind: a newer server's")

    monkeypatch.setattr(handlers.MatchState, "from_envelopes", old_worker)
    _retried(MAX_FAILURES - 1, worker, match_id, seat, version, policy)
    assert handlers.play_bot_decision(worker, match_id, "highcard", seat, version, policy) == "given_up"  # type: ignore[arg-type]
    queued = len(table.tasks.decisions)
    _stall_checks(table, 40)
    assert len(table.tasks.decisions) > queued


@pytest.mark.parametrize("call", ["view", "submit"])
def test_a_command_service_dying_mid_call_again_and_again_gives_no_seat_up(
        monkeypatch: pytest.MonkeyPatch, call: str) -> None:
    """A command service killed mid-call (OOM, a crash loop, SIGKILL past a deploy's grace)
    leaves the call UNKNOWN "Stream removed" (gRPC's, grpc/grpc#34076), never an answer of the
    server's: its `@rpc` answers its own failures INTERNAL. Counted as the server failing on the
    seat's view or commands, three such crashes at one decision gave the seat up and played its
    default. Fails if the seat plays anything but its own choice once the service stays up."""
    table = Table()
    match_id, seat, version, policy, worker = _bot_asked(table)
    client = worker.seat(match_id, seat)
    real, crashing = getattr(client, call), [True]

    def dying(*args, **kwargs):
        if crashing[0]:
            raise _Refusal(grpc.StatusCode.UNKNOWN, "")
        return real(*args, **kwargs)

    setattr(client, call, dying)
    payload = table.tasks.payloads[-1] if call == "submit" else None
    _retried(MAX_FAILURES + 1, worker, match_id, seat, version, policy, payload)
    crashing[0] = False
    assert handlers.play_bot_decision(worker, match_id, "highcard", seat, version, policy, payload) == "submitted"  # type: ignore[arg-type]
    assert worker.tries.failures(match_id, version, seat) == 0  # type: ignore[attr-defined]
    assert worker.tries.refused(match_id, version, seat) == frozenset()  # type: ignore[attr-defined]
    commands = table.app.matches.get(match_id).match.commands
    assert command_key(seat, handlers.clock_command_id(match_id, version, seat)) not in commands


def test_a_match_the_dispatcher_stops_retrying_at_a_persons_turn_gives_no_bot_seat_up(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The dispatcher failing on a match while a person is asked (here queuing the person's
    clock) gives it up as at a bot's turn, but no bot seat is asked: nothing is played, and the
    person's own command folds the match again. It was logged as `bot_match_given_up` and counted
    in `famiglia.bots.decisions_given_up` all the same, a bot decision given up that never was.
    Fails if that give-up is counted, or logged as a bot seat's."""
    table = Table()
    metrics = table.dispatcher.metrics = Counted()  # type: ignore[assignment]
    match_id = table.create({1: "random"})  # seat 0 is a person's, and asked first
    broken = table.version(match_id)
    assert [p.seat for p in HIGHCARD.pending(table.app.matches.get(match_id).match.state)] == [0]
    queue_clocks = dispatcher_module.Dispatcher._queue_clocks
    built: list[float] = []

    def failing_clocks(self, tracked, pendings):
        if tracked.match.version == broken:
            built.append(table.clock_now[0])
            raise RuntimeError("engine bug: the clock of this state")
        return queue_clocks(self, tracked, pendings)

    monkeypatch.setattr(dispatcher_module.Dispatcher, "_queue_clocks", failing_clocks)
    with structlog.testing.capture_logs() as lines:
        table.pump(match_id)
        _stall_checks(table, 100)  # 1,000 s of checks (stall time 10 s)
    assert len(built) == MAX_DISPATCH_FAILURES  # then no more: it waits for the person
    assert table.tasks.decisions == [] and table.tasks.clocks == []
    assert metrics.given_up == []
    assert not [line for line in lines if line["event"] == "bot_match_given_up"]
    [line] = [line for line in lines if line["event"] == "match_dispatch_stopped"]
    assert (line["match_id"], line["failures"], line["asked"], line["error"]) == (
        match_id, MAX_DISPATCH_FAILURES, [0], "")
    # The person's command is an event: the match is folded again and its bot's turn queued.
    table.act(match_id, 0)
    table.pump(match_id)
    assert [(m, s) for m, s, _v, _p in table.tasks.decisions] == [(match_id, 1)]


@pytest.mark.parametrize("asked", ["view", "legal_commands"])
def test_a_seat_whose_view_is_set_aside_plays_its_default_after_a_few_tries(asked: str) -> None:
    """A seat's view or legal commands the command service set aside, its engine stuck making
    them (FAILED_PRECONDITION `call_quarantined`, refused for up to six hours where the match
    stands), is a read the server cannot answer, as INTERNAL is: the seat's decision fails a few
    times, then the seat plays its default. The refusal escaped the task instead (neither
    `Transient` nor counted): every task the stall timer queued again met it, and the seat
    waited till the quarantine ended, to loop the engine again. Read so by a task deciding a
    seat over gRPC (a batch's later seat decided afresh, a lease asking seat by seat). Fails
    if the refusal escapes, or no default goes in at the bound."""
    table = Table()
    match_id, seat, version, policy, worker = _bot_asked(table)
    set_aside = _refusing(grpc.StatusCode.FAILED_PRECONDITION, "call_quarantined")
    setattr(worker.seat(match_id, seat), asked, set_aside)
    with structlog.testing.capture_logs() as lines:
        _retried(MAX_FAILURES - 1, worker, match_id, seat, version, policy)
        assert handlers.play_bot_decision(worker, match_id, "highcard", seat, version, policy) == "default"  # type: ignore[arg-type]
    assert table.version(match_id) == version + 1
    [line] = [line for line in lines if line["event"] == "bot_seat_given_up"]
    assert (line["reason"], line["default"]) == ("unreadable", "submitted")
    assert worker.metrics.given_up == [("highcard", "unreadable")]  # type: ignore[attr-defined]


def test_a_replica_that_cannot_read_the_match_mid_deploy_is_retried_on_a_read_too() -> None:
    """GetView from an old replica in a rolling deploy (FAILED_PRECONDITION `match_unreadable`)
    is the replica's, as on a submit: `Transient`, retried by Celery, not counted. On a read the
    refusal escaped the task (a failed task, no retry: the seat waited for the stall timer).
    Fails if the refusal escapes, or counts towards giving the seat up."""
    table = Table()
    match_id, seat, version, policy, worker = _bot_asked(table)
    client = worker.seat(match_id, seat)
    view = client.view
    client.view = _refusing(grpc.StatusCode.FAILED_PRECONDITION, "match_unreadable")  # type: ignore[method-assign]
    _retried(MAX_FAILURES + 1, worker, match_id, seat, version, policy)
    assert worker.tries.failures(match_id, version, seat) == 0  # type: ignore[attr-defined]
    client.view = view  # type: ignore[method-assign]  # the deploy is over
    assert handlers.play_bot_decision(worker, match_id, "highcard", seat, version, policy) == "submitted"  # type: ignore[arg-type]
