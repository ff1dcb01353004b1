"""A decide task with the dispatcher's payload chooses from that payload and makes one
call, SubmitCommand with the expected version; a policy that overruns its time plays random."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import grpc
import pytest
import structlog

from famiglia import telemetry
from famiglia.bots.toy import ENGINE as HIGHCARD
from famiglia.bots.toy import toy_registry
from famiglia.engine import MatchConfig, fold
from famiglia.v1 import game_service_pb2 as pb
from services.bots import handlers
from services.bots.payload import DecisionPayload, seat_payload


@dataclass
class FakeSeat:
    """A SeatClient that records calls; reads fail, since the payload path must not read."""

    match_id: str
    submitted: list[tuple] = field(default_factory=list)
    omitted: list[bool] = field(default_factory=list)
    refuse_with: grpc.StatusCode | None = None
    refuse_code: str = ""
    refuse_details: str = ""

    def view(self):
        raise AssertionError("GetView called although the task carried the view")

    def legal_commands(self, limit: int = 0):
        raise AssertionError("ListLegalCommands called although the task carried the legal commands")

    def submit(self, command, *, command_id=None, expected_version=None, omit_events=False):
        self.submitted.append((command, command_id, expected_version))
        self.omitted.append(omit_events)
        if self.refuse_with is not None:
            raise _RpcError(self.refuse_with, self.refuse_code, self.refuse_details)
        return pb.SubmitCommandResponse(version=expected_version + 1)


class _RpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, famiglia_code: str = "", details: str = "") -> None:
        self._code, self._famiglia_code, self._details = code, famiglia_code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def trailing_metadata(self):
        return (("famiglia-code", self._famiglia_code),) if self._famiglia_code else ()

    def details(self) -> str:
        return self._details or self._code.name


@dataclass
class FakeApp:
    seats: dict[int, FakeSeat] = field(default_factory=dict)
    registry: object = field(default_factory=toy_registry)

    def seat(self, match_id: str, seat: int) -> FakeSeat:
        return self.seats.setdefault(seat, FakeSeat(match_id))


@pytest.fixture(autouse=True)
def _fresh_process() -> None:
    """What a process learnt of its matches' versions, and of its decisions' tries, stays with each test."""
    handlers._REACHED.clear()
    handlers._LOCAL_TRIES.clear()


def highcard_decision() -> tuple[int, DecisionPayload, list]:
    state = fold(HIGHCARD, HIGHCARD.setup(MatchConfig(2, {"hand": "3"}), 7))
    seat = HIGHCARD.pending(state)[0].seat
    payload = seat_payload(HIGHCARD, state, seat)
    return seat, DecisionPayload.from_json(payload.to_json()), HIGHCARD.legal_commands(state, seat)


def test_a_task_with_a_payload_only_submits_one_of_its_commands_at_its_version() -> None:
    app = FakeApp()
    seat, payload, legal = highcard_decision()
    outcome = handlers.play_bot_decision(app, "m1", "highcard", seat, 9, "heuristic", payload)  # type: ignore[arg-type]
    assert outcome == "submitted"
    [(command, command_id, expected)] = app.seats[seat].submitted
    assert command in legal
    assert (command_id, expected) == (handlers.bot_command_id("m1", 9, seat), 9)
    assert app.seats[seat].omitted == [True]  # a bot never reads the rendered events


def test_a_stale_payload_is_refused_by_the_server_and_does_nothing_else() -> None:
    app = FakeApp()
    seat, payload, _ = highcard_decision()
    app.seat("m1", seat).refuse_with = grpc.StatusCode.ABORTED
    assert handlers.play_bot_decision(app, "m1", "highcard", seat, 9, "random", payload) == "stale"  # type: ignore[arg-type]
    assert len(app.seats[seat].submitted) == 1


def test_a_match_that_ended_meanwhile_is_no_refusal_to_retry() -> None:
    """A match over by the time the bot answers (its last move, an operator's CancelMatch)
    refuses with `match_over`: the task stops there, without the warning of a refused
    command and without retrying another command."""
    app = FakeApp()
    seat, payload, _ = highcard_decision()
    app.seat("m1", seat).refuse_with = grpc.StatusCode.FAILED_PRECONDITION
    app.seat("m1", seat).refuse_code = "match_over"
    assert handlers.play_bot_decision(app, "m1", "highcard", seat, 9, "random", payload) == "finished"  # type: ignore[arg-type]
    assert len(app.seats[seat].submitted) == 1  # no fallback command tried


def test_a_refused_command_falls_back_to_another_under_a_command_id_of_its_own() -> None:
    """The fallback goes in under `<id>:f`, which the dispatcher follows too: under the refused
    command's own id, a redelivered task's first submit (the refused command again) would meet
    the fallback's id with another command (`command_id_reused`), be stale, and stop the task."""
    app = FakeApp()
    seat, payload, _ = highcard_decision()
    refused_once = app.seat("m1", seat)
    submit = FakeSeat.submit.__get__(refused_once)

    def submit_refusing_the_first(command, **kwargs):
        refused_once.refuse_with = grpc.StatusCode.FAILED_PRECONDITION if not refused_once.submitted else None
        return submit(command, **kwargs)

    refused_once.submit = submit_refusing_the_first  # type: ignore[method-assign]
    assert handlers.play_bot_decision(app, "m1", "highcard", seat, 9, "random", payload) == "submitted"  # type: ignore[arg-type]
    [(first, first_id, _), (fallback, fallback_id, expected)] = refused_once.submitted
    assert fallback != first and expected == 9
    assert fallback_id == handlers.bot_command_id("m1", 9, seat) + ":f" != first_id


def test_a_command_the_server_failed_on_falls_back_to_another_and_an_outage_is_retried() -> None:
    """INTERNAL (the engine raised on the command: a bug, no rule's refusal) is not cured by
    sending the same command again, and a task queued again chooses it again: the seat plays
    another listed command under `<id>:f`, as for a refused one. UNAVAILABLE is an outage:
    Celery retries the task (`Transient`), and so it does when the fallback fails too."""
    seat, payload, _ = highcard_decision()
    app = FakeApp()
    failing = app.seat("m1", seat)
    submit = FakeSeat.submit.__get__(failing)

    def submit_failing_the_first(command, **kwargs):
        failing.refuse_with = grpc.StatusCode.INTERNAL if not failing.submitted else None
        return submit(command, **kwargs)

    failing.submit = submit_failing_the_first  # type: ignore[method-assign]
    with structlog.testing.capture_logs() as lines:
        assert handlers.play_bot_decision(app, "m1", "highcard", seat, 9, "random", payload) == "submitted"  # type: ignore[arg-type]
    [(first, first_id, _), (fallback, fallback_id, expected)] = failing.submitted
    assert fallback != first and expected == 9 and fallback_id == first_id + ":f"
    [line] = [line for line in lines if line["event"] == "bot_command_failed"]
    assert (line["match_id"], line["seat"], line["version"], line["code"]) == ("m1", seat, 9, "INTERNAL")

    for code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL):  # an outage; a fallback failing too
        handlers._REACHED.clear()
        app = FakeApp()
        app.seat("m1", seat).refuse_with = code
        with pytest.raises(handlers.Transient):
            handlers.play_bot_decision(app, "m1", "highcard", seat, 9, "random", payload)  # type: ignore[arg-type]
        assert len(app.seats[seat].submitted) == (1 if code == grpc.StatusCode.UNAVAILABLE else 2)


@pytest.mark.parametrize("status", [grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INTERNAL])
def test_a_decision_queued_again_passes_over_the_commands_refused_there_before(status) -> None:
    """A seat's chosen command and its fallback both refused (or failed on): the task ends, and
    the stall timer (or, for a failure, Celery's retry) tries the decision again, on whichever
    worker. It used to choose the same command and the same fallback (the same seed) and be
    refused again at every re-queue. The commands refused at that (match, version, seat) are now
    written down (tries.py), and the next task's fallback is a listed command not tried there.
    Fails if the second task submits only the two commands refused before."""
    seat, payload, legal = highcard_decision()
    assert len(legal) >= 3
    app = FakeApp()
    client = app.seat("m1", seat)
    client.refuse_with = status
    if status == grpc.StatusCode.INTERNAL:
        with pytest.raises(handlers.Transient):  # Celery retries it
            handlers.play_bot_decision(app, "m1", "highcard", seat, 9, "random", payload)  # type: ignore[arg-type]
    else:
        assert handlers.play_bot_decision(app, "m1", "highcard", seat, 9, "random", payload) == "refused"  # type: ignore[arg-type]
    refused = [command for command, _, _ in client.submitted]
    assert len(refused) == 2 and refused[0] != refused[1]
    # The same decision again (a retry, a re-queue, a redelivery): those two are still refused.
    handlers._REACHED.clear()
    client = app.seats[seat] = FakeSeat("m1")
    submit = FakeSeat.submit.__get__(client)

    def submit_refusing_those(command, **kwargs):
        client.refuse_with = status if command in refused else None
        return submit(command, **kwargs)

    client.submit = submit_refusing_those  # type: ignore[method-assign]
    assert handlers.play_bot_decision(app, "m1", "highcard", seat, 9, "random", payload) == "submitted"  # type: ignore[arg-type]
    *_, (taken, taken_id, expected) = client.submitted
    assert taken not in refused and taken in legal
    assert (taken_id, expected) == (handlers.bot_command_id("m1", 9, seat) + ":f", 9)


@pytest.mark.parametrize(("status", "code"), [(grpc.StatusCode.ABORTED, "stale_version"),
                                           (grpc.StatusCode.FAILED_PRECONDITION, "match_over"),
                                           (grpc.StatusCode.FAILED_PRECONDITION, "GC-S01"),
                                           (grpc.StatusCode.INVALID_ARGUMENT, "malformed_command")])
def test_every_line_of_an_unusual_submit_names_its_match_seat_and_version(status, code) -> None:
    """An operator follows a seat that stopped moving by its lines: `bot_command_stale`,
    `bot_match_over` and `bot_command_refused` named the match and the version but not the seat
    (only inside the command id). Fails if one of them leaves the seat out."""
    seat, payload, _ = highcard_decision()
    app = FakeApp()
    app.seat("m1", seat).refuse_with, app.seat("m1", seat).refuse_code = status, code
    with structlog.testing.capture_logs() as lines:
        handlers.play_bot_decision(app, "m1", "highcard", seat, 9, "random", payload)  # type: ignore[arg-type]
    shown = [line for line in lines if line["log_level"] != "debug"]
    assert shown
    for line in shown:
        assert (line.get("match_id"), line.get("seat"), line.get("version")) == ("m1", seat, 9), line


def test_a_refused_bot_command_keeps_the_rules_text_out_of_lines_at_info_and_above(monkeypatch) -> None:
    """A rule tells its refusal from what the seat knows, the bot's own hand too ("I39 cannot be
    played in this window"): no line at INFO or above may carry it (README, "Logs and traces").
    Fails if `bot_command_refused` names the refusal's text."""
    monkeypatch.setattr(telemetry, "_json_out", None)
    app = FakeApp()
    seat, payload, _ = highcard_decision()
    refused = app.seat("m1", seat)
    refused.refuse_with, refused.refuse_code = grpc.StatusCode.FAILED_PRECONDITION, "NP-C23"
    refused.refuse_details = "NP-C23: I39 cannot be played in this window"
    with structlog.testing.capture_logs() as lines:
        handlers.play_bot_decision(app, "m1", "highcard", seat, 9, "random", payload)  # type: ignore[arg-type]
    shown = [line for line in lines if line["log_level"] != "debug"]
    assert [line["code"] for line in shown if line["event"] == "bot_command_refused"][0] == "NP-C23"
    assert not [line for line in shown if any("I39" in str(value) for value in line.values())]
    assert [line for line in lines if line["event"] == "bot_command_refused_reason" and "I39" in line["reason"]]


def _busy(seconds: float) -> None:
    """Python code running (a policy thinking), which an interrupt can stop, unlike a sleep."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        pass


def test_a_policy_past_its_time_limit_plays_random(monkeypatch: pytest.MonkeyPatch) -> None:
    class Slow:
        name = "slow"

        def choose(self, rules, decision):
            _busy(5)
            raise AssertionError("not interrupted")

    monkeypatch.setattr(handlers, "make_policy", lambda name: Slow())
    app = FakeApp()
    seat, payload, legal = highcard_decision()
    started = time.monotonic()
    outcome = handlers.play_bot_decision(app, "m1", "highcard", seat, 4, "slow", payload,  # type: ignore[arg-type]
                                         think_seconds=0.1, interrupt_seconds=0.2)
    assert outcome == "submitted" and time.monotonic() - started < 3
    assert app.seats[seat].submitted[0][0] in legal


def test_a_policy_answers_by_its_deadline_and_is_not_interrupted(monkeypatch: pytest.MonkeyPatch) -> None:
    class Punctual:
        name = "punctual"

        def choose(self, rules, decision):
            while time.monotonic() < decision.deadline:
                pass
            return decision.legal[-1]

    monkeypatch.setattr(handlers, "make_policy", lambda name: Punctual())
    app = FakeApp()
    seat, payload, legal = highcard_decision()
    handlers.play_bot_decision(app, "m1", "highcard", seat, 4, "punctual", payload,  # type: ignore[arg-type]
                               think_seconds=0.1, interrupt_seconds=0.5)
    assert app.seats[seat].submitted[0][0] == legal[-1]  # its own answer, not random's
    _busy(0.6)  # nothing left armed


def test_the_time_limit_is_lifted_after_the_block() -> None:
    with handlers.time_limit(0.2):
        pass
    _busy(0.3)  # a limit left armed would raise here
    with pytest.raises(handlers.PolicyTimeout), handlers.time_limit(0.05):
        _busy(2)


def test_the_time_limit_works_in_a_pool_thread() -> None:
    """Celery's `threads` pool runs tasks off the main thread, where no signal arrives."""
    outcomes: list[str] = []

    def task(limit: float, seconds: float) -> None:
        try:
            with handlers.time_limit(limit):
                _busy(seconds)
            outcomes.append("done")
        except handlers.PolicyTimeout:
            outcomes.append("interrupted")

    # The short one's limit is far past its work: on a loaded machine its thread may wait a tenth
    # of a second for the CPU or the GIL (it was interrupted there once, under a 0.1 s limit).
    threads = [threading.Thread(target=task, args=args) for args in ((0.1, 3.0), (2.5, 0.01))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert sorted(outcomes) == ["done", "interrupted"]


def test_an_interrupt_never_arrives_after_its_block() -> None:
    """Blocks ending around their limit: one that fired is either raised in the block or
    cleared, never delivered to the code after it. (The watchdog needs the GIL to fire,
    which a busy thread gives up every `sys.getswitchinterval()`, 5 ms: the longer blocks
    outlast that, so some fire even on a loaded machine.)"""
    fired = 0
    for i in range(120):
        try:
            with handlers.time_limit(0.004):
                _busy(0.002 + (i % 12) * 0.002)
        except handlers.PolicyTimeout:
            fired += 1
        _busy(0.001)  # a leaked interrupt would raise here, failing the test
    assert fired > 0


def test_a_duplicate_of_a_decision_this_process_answered_is_stale_without_thinking(
        monkeypatch: pytest.MonkeyPatch) -> None:
    thought: list[int] = []

    class Counting:
        name = "counting"

        def choose(self, rules, decision):
            thought.append(decision.version)
            return decision.legal[0]

    monkeypatch.setattr(handlers, "make_policy", lambda name: Counting())
    app = FakeApp()
    seat, payload, _ = highcard_decision()
    play = handlers.play_bot_decision
    assert play(app, "m-dup", "highcard", seat, 6, "counting", payload) == "submitted"  # type: ignore[arg-type]
    assert play(app, "m-dup", "highcard", seat, 6, "counting", payload) == "stale"  # type: ignore[arg-type]
    assert play(app, "m-dup", "highcard", seat, 5, "counting", payload) == "stale"  # type: ignore[arg-type]
    assert thought == [6] and len(app.seats[seat].submitted) == 1
    assert play(app, "m-dup", "highcard", seat, 7, "counting", payload) == "submitted"  # type: ignore[arg-type]
    assert play(app, "m-other", "highcard", seat, 6, "counting", payload) == "submitted"  # type: ignore[arg-type]
    assert thought == [6, 7, 6]


def test_a_decision_is_timed_by_game_and_policy_name_when_metrics_are_on() -> None:
    from services.bots.metrics import bots_metrics
    from tests.support.metrics import recorded

    app = FakeApp()
    seat, payload, _ = highcard_decision()
    with recorded() as seen:
        app.metrics = bots_metrics()  # type: ignore[attr-defined]  # what BotsApp makes per process
        assert handlers.play_bot_decision(app, "m1", "highcard", seat, 9, "heuristic?depth=1", payload) == "submitted"  # type: ignore[arg-type]
    for name in ("famiglia.bots.decision.cpu", "famiglia.bots.decision.duration"):
        count, total = seen.value(name, game="highcard", policy="heuristic")
        assert count == 1 and total >= 0


def test_a_policy_is_labelled_by_a_name_the_bots_know_never_by_a_clients_string() -> None:
    """Each label value is a series of its own in the collector: a seat of an imported match may
    name any policy (admission checks its length alone), and its name became a label."""
    from services.bots.metrics import policy_name

    assert policy_name("ismcts?iterations=500") == "ismcts"
    assert [policy_name(f"made-up-{n}?depth=1") for n in range(3)] == ["unknown"] * 3
