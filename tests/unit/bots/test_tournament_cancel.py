"""CancelTournament ends the tournament's matches in play: the runner cancels each one in the
command service (CancelMatch, request id `tournament:<tid>:<match>`) and records it abandoned,
starts no further match, and a runner killed mid-way or a second CancelTournament finishes the
job without a second cancel of any match; a match whose creation was never recorded (the runner
killed right after CreateMatch, or its answer lost) is cancelled too, and a restarted runner, even
with another secret, finds it rather than create the planned match twice. The records are a real
Redis's; the command service is a fake that keeps each match's creations and cancels as the real
one does (the request id their key)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import grpc
import pytest
import redis
import structlog

from famiglia.auth import TokenSigner
from famiglia.bots.tournament import GamePlan, TournamentSpec
from famiglia.bots.toy import toy_registry
from famiglia.grpcutil.errors import AlreadyExists, InvalidArgument
from famiglia.v1 import tournament_service_pb2 as tpb
from services.bots.entrypoints import grpc_server
from services.bots.tournaments import (
    CANCELLED,
    FINISHED,
    MAX_FAILING_PAUSE,
    RUNNING,
    TournamentRepo,
    TournamentRunner,
)
from services.command.app import cancel_reason
from tests.support.refusals import Refused
from tests.unit.bots.test_handlers import _RpcError

SIGNER = TokenSigner("unit-secret")


class Killed(BaseException):
    """The runner's process dying where it stands (nothing after it runs)."""


class CommandService:
    """CreateMatch and CancelMatch as the command service answers them: a creation's request id
    again answers with the match it made; a cancel appends one `match_cancelled` (counted in
    `events`), the same request id again answers `duplicate`, a match over is `match_over`."""

    def __init__(self) -> None:
        self.signer = SIGNER
        self.created: list[str] = []
        self.made: dict[str, str] = {}
        """creation request id -> its match"""
        self.lose_answer: grpc.StatusCode | None = None
        """Make the match, then answer this (a reply lost on the way)."""
        self.events: dict[str, list[str]] = {}
        """match -> the reason of each match_cancelled appended"""
        self.request_ids: dict[str, str] = {}
        self.over: set[str] = set()
        self.fail: grpc.StatusCode | None = None
        self.die_after_cancels: int | None = None
        """Kill the caller after this many cancels took effect, before it reads the answer."""

    def create_match(self, game_id: str, seats: int, *, request_id: str, token: str, **kwargs) -> SimpleNamespace:
        assert self.signer.read_operator(token) and request_id
        if request_id not in self.made:
            self.made[request_id] = f"m{len(self.created) + 1}"
            self.created.append(self.made[request_id])
        if self.lose_answer is not None:
            raise _RpcError(self.lose_answer)
        return SimpleNamespace(match_id=self.made[request_id])

    def cancel_match(self, match_id: str, reason: str, *, token: str, request_id: str = "") -> SimpleNamespace:
        assert self.signer.read_operator(token)
        try:  # the reason as the command service checks it (shown to every seat)
            cancel_reason(reason)
        except InvalidArgument as exc:
            raise _RpcError(grpc.StatusCode.INVALID_ARGUMENT, exc.code, exc.message) from None
        if self.fail is not None:
            raise _RpcError(self.fail)
        if self.request_ids.get(match_id) == request_id:
            return SimpleNamespace(duplicate=True)
        if match_id in self.over or match_id in self.events:
            raise _RpcError(grpc.StatusCode.FAILED_PRECONDITION)
        self.request_ids[match_id] = request_id
        self.events[match_id] = [reason]
        if self.die_after_cancels is not None and len(self.events) >= self.die_after_cancels:
            raise Killed()
        return SimpleNamespace(duplicate=False)


class Store:
    def version(self, match_id: str) -> int:
        return 2


class Calling:
    def __init__(self, token: str) -> None:
        self.metadata = [("authorization", f"Bearer {token}")]

    def invocation_metadata(self):
        return self.metadata


def _spec(**kwargs) -> TournamentSpec:
    base = dict(name="cup", games=(GamePlan("highcard", (2,)),), entrants=("random", "heuristic"),
                matches_per_game=8, concurrency=3)
    base.update(kwargs)
    return TournamentSpec(**base)  # type: ignore[arg-type]


def _result() -> dict:
    return {"game_id": "highcard", "commands": 6, "finished_ms": 1,
            "seats": [{"seat": 0, "entrant": "random", "rank": 1, "score": 0.0},
                      {"seat": 1, "entrant": "heuristic", "rank": 2, "score": 0.0}]}


def _cancel(repo: TournamentRepo, tid: str) -> tpb.Tournament:
    servicer = grpc_server.TournamentServicer(repo, toy_registry(), SIGNER)
    return grpc_server.TournamentServicer.CancelTournament.__wrapped__(
        servicer, tpb.CancelTournamentRequest(tournament_id=tid), Calling(SIGNER.operator_token("ops")))


@pytest.fixture
def repo(redis_url: str) -> TournamentRepo:
    return TournamentRepo(redis.Redis.from_url(redis_url))


def _runner(repo: TournamentRepo, command: CommandService, secret: str = "unit-secret") -> TournamentRunner:
    return TournamentRunner(repo, command, Store(), secret=secret)  # type: ignore[arg-type]


class DyingRepo(TournamentRepo):
    """The runner's records, in a process killed as it was about to record the `at`-th match it
    started: its CreateMatch was answered, the answer never written down."""

    def __init__(self, client: redis.Redis, at: int) -> None:
        super().__init__(client)
        self.left = at

    def mark_started(self, tid: str, index: int, match_id: str) -> None:
        self.left -= 1
        if self.left <= 0:
            raise Killed()
        super().mark_started(tid, index, match_id)


def test_a_cancelled_tournament_cancels_its_matches_in_play_and_starts_no_more(repo: TournamentRepo) -> None:
    """Before, CancelTournament only stopped new matches: those in play were played to the end
    (bots deciding, clocks running) for results nobody would read."""
    tid = repo.create(_spec())
    command = CommandService()
    runner = _runner(repo, command)
    runner.step()
    assert command.created == ["m1", "m2", "m3"]
    repo.record(tid, "m1", _result())  # one finished by its rules
    answer = _cancel(repo, tid)
    assert answer.status == tpb.TOURNAMENT_CANCELLED
    assert command.events == {}  # the answer does not wait for the cancels: the runner makes them
    runner.step()
    assert sorted(command.events) == ["m2", "m3"]  # the finished one is left alone
    assert all(tid in reasons[0] and "cup" in reasons[0] for reasons in command.events.values())
    assert command.request_ids == {"m2": f"tournament:{tid}:m2", "m3": f"tournament:{tid}:m3"}
    record = repo.get(tid)
    assert record is not None and record.status == CANCELLED
    assert {m: r.get("error") for m, r in record.results.items() if r.get("abandoned")} == {
        "m2": f"cancelled: {command.events['m2'][0]}", "m3": f"cancelled: {command.events['m3'][0]}"}
    assert [m.match_id for m in record.match_records()] == ["m1"]  # the standings pass them over
    runner.step()
    assert command.created == ["m1", "m2", "m3"]  # no further match is ever created
    assert repo.cancelling() == []


@pytest.mark.parametrize("name", ["cup\t2026", "\x1b[31mcup", "cup \u202epuc"])
def test_a_tournament_named_before_names_were_checked_still_has_its_matches_cancelled(
        repo: TournamentRepo, name: str) -> None:
    """A tournament created before its name was held to a line's checks (a tab, an escape, a
    right-to-left override): its name went into every CancelMatch reason, which the command
    service refuses with such a character (`bad_reason`, shown to every seat), so each match was
    left playing on for a cancelled tournament (`tournament_match_not_cancelled`)."""
    tid = repo.create(_spec(name=name))
    command = CommandService()
    runner = _runner(repo, command)
    runner.step()
    _cancel(repo, tid)
    runner.step()
    assert sorted(command.events) == ["m1", "m2", "m3"]
    assert all(tid in reasons[0] for reasons in command.events.values())
    assert all(r.get("abandoned") for r in repo.get(tid).results.values()) and len(repo.get(tid).results) == 3


def test_a_runner_killed_mid_cancel_is_finished_by_the_next_and_no_match_is_cancelled_twice(
        repo: TournamentRepo) -> None:
    tid = repo.create(_spec())
    command = CommandService()
    _runner(repo, command).step()
    _cancel(repo, tid)
    command.die_after_cancels = 2  # the second cancel went in; its answer never came back
    with pytest.raises(Killed):
        _runner(repo, command).step()
    assert repo.cancelling() == [tid]
    assert set(repo.get(tid).results) == {"m1"}  # the one recorded before it died
    command.die_after_cancels = None
    resumed = _runner(repo, command)  # the restarted process
    resumed.step()
    assert {m: len(reasons) for m, reasons in command.events.items()} == {"m1": 1, "m2": 1, "m3": 1}
    assert all(r.get("abandoned") for r in repo.get(tid).results.values()) and len(repo.get(tid).results) == 3
    assert repo.cancelling() == []
    _cancel(repo, tid)  # asked again: listed again, every cancel answered as a duplicate
    assert repo.cancelling() == [tid]
    resumed.step()
    assert {m: len(reasons) for m, reasons in command.events.items()} == {"m1": 1, "m2": 1, "m3": 1}
    assert repo.cancelling() == [] and command.created == ["m1", "m2", "m3"]


@pytest.mark.parametrize(("refused", "left"), [(grpc.StatusCode.UNAVAILABLE, True),
                                               (grpc.StatusCode.DEADLINE_EXCEEDED, True),
                                               (grpc.StatusCode.PERMISSION_DENIED, False)])
def test_a_cancel_the_command_service_could_not_answer_is_made_again_at_the_next_step(
        repo: TournamentRepo, refused: grpc.StatusCode, left: bool) -> None:
    """The command service away: the step fails, the tournament stays listed and nothing is
    recorded, so the next step cancels its matches. A refusal that will not pass (a token of
    another deployment) is logged and not tried for ever."""
    tid = repo.create(_spec(concurrency=1))
    command = CommandService()
    runner = _runner(repo, command)
    runner.step()
    _cancel(repo, tid)
    command.fail = refused
    if left:
        with pytest.raises(grpc.RpcError):
            runner.step()
        assert repo.cancelling() == [tid] and not repo.get(tid).results
        command.fail = None
        runner.step()
        assert list(command.events) == ["m1"] and repo.get(tid).results["m1"]["abandoned"]
    else:
        runner.step()
        assert not repo.get(tid).results
    assert repo.cancelling() == []


def test_a_match_over_before_its_cancel_is_left_to_the_dispatcher_to_record(repo: TournamentRepo) -> None:
    """A match that ended by its rules (or was cancelled as stuck) a moment before is
    `match_over`: its real outcome is the dispatcher's to record, not an abandonment."""
    tid = repo.create(_spec(concurrency=2))
    command = CommandService()
    runner = _runner(repo, command)
    runner.step()
    command.over.add("m1")
    _cancel(repo, tid)
    runner.step()
    assert list(command.events) == ["m2"]
    assert set(repo.get(tid).results) == {"m2"} and repo.cancelling() == []


def test_cancelling_a_finished_tournament_cancels_nothing(repo: TournamentRepo) -> None:
    tid = repo.create(_spec(concurrency=1))
    command = CommandService()
    runner = _runner(repo, command)
    runner.step()
    repo.set_status(tid, FINISHED)
    assert _cancel(repo, tid).status == tpb.TOURNAMENT_FINISHED
    assert repo.cancelling() == []
    runner.step()
    assert command.events == {}


def test_a_cancel_listed_while_its_status_is_being_set_waits_for_it(repo: TournamentRepo) -> None:
    """set_status lists the tournament before it writes the status: a runner between the two
    must not cancel the matches of a tournament that still runs, nor forget the cancel."""
    tid = repo.create(_spec(concurrency=1))
    command = CommandService()
    runner = _runner(repo, command)
    runner.step()
    repo.cancel_matches_of(tid)  # listed, the status not written yet
    runner.step()
    assert command.events == {} and repo.cancelling() == [tid] and repo.get(tid).status == RUNNING


@pytest.mark.parametrize("restarted_secret", ["unit-secret", "rotated-secret"])
def test_a_match_created_by_a_runner_killed_before_recording_it_is_cancelled_with_its_tournament(
        repo: TournamentRepo, restarted_secret: str) -> None:
    """Before, the cancel knew only the started matches: a match whose CreateMatch was answered
    to a runner killed before it recorded it played on to its end, for nobody. The runner that
    comes next (with the same secret, or another after a rotation the command service followed)
    finds it under its written-down request id and cancels it; no planned match is made twice."""
    tid = repo.create(_spec())
    command = CommandService()
    with pytest.raises(Killed):
        _runner(DyingRepo(repo.client, at=3), command).step()  # type: ignore[arg-type]
    assert command.created == ["m1", "m2", "m3"] and sorted(repo.get(tid).started.values()) == ["m1", "m2"]
    _cancel(repo, tid)
    command.signer = TokenSigner(restarted_secret)
    _runner(repo, command, restarted_secret).step()
    assert command.created == ["m1", "m2", "m3"]  # asked again, the same request id answered m3
    assert {m: len(reasons) for m, reasons in command.events.items()} == {"m1": 1, "m2": 1, "m3": 1}
    record = repo.get(tid)
    assert record is not None and record.started == {0: "m1", 1: "m2", 2: "m3"}
    assert set(record.results) == {"m1", "m2", "m3"} and all(r["abandoned"] for r in record.results.values())
    assert record.unrecorded() == [] and repo.cancelling() == []


def test_a_match_whose_creation_answer_was_lost_is_cancelled_with_its_tournament(repo: TournamentRepo) -> None:
    """No kill needed: a CreateMatch that made its match and whose answer was lost (a deadline)
    fails the step; a cancel before the next one must still reach that match."""
    tid = repo.create(_spec(concurrency=1))
    command = CommandService()
    runner = _runner(repo, command)
    command.lose_answer = grpc.StatusCode.DEADLINE_EXCEEDED
    with pytest.raises(grpc.RpcError):
        runner.step()
    command.lose_answer = None
    assert command.created == ["m1"] and not repo.get(tid).started
    _cancel(repo, tid)
    runner.step()
    assert command.created == ["m1"] and list(command.events) == ["m1"]
    assert repo.get(tid).results["m1"]["abandoned"] and repo.cancelling() == []


def _lost_creation_cancelled(repo: TournamentRepo, lost: grpc.StatusCode = grpc.StatusCode.DEADLINE_EXCEEDED,
                             ) -> tuple[str, CommandService]:
    """A one-match-at-a-time tournament whose first CreateMatch made m1 and lost its answer
    (`lost`, failing the step), then cancelled: the tournament and the command service."""
    tid = repo.create(_spec(concurrency=1))
    command = CommandService()
    command.lose_answer = lost
    with pytest.raises(grpc.RpcError):
        _runner(repo, command).step()
    _cancel(repo, tid)
    return tid, command


def test_a_creation_the_cancel_cannot_look_up_is_recorded_failed_and_not_tried_for_ever(
        repo: TournamentRepo) -> None:
    """A refusal that will not pass (a token of another deployment) ends the look-up: the planned
    match is recorded failed, as a refused cancel is logged and left."""
    tid, command = _lost_creation_cancelled(repo, grpc.StatusCode.UNAVAILABLE)
    command.lose_answer = grpc.StatusCode.PERMISSION_DENIED
    _runner(repo, command).step()
    record = repo.get(tid)
    assert record is not None and record.started == {0: f"failed:{tid}:0"} and record.unrecorded() == []
    assert record.results[f"failed:{tid}:0"]["abandoned"] and repo.cancelling() == []


@pytest.mark.parametrize("restarted_secret", ["unit-secret", "rotated-secret"])
def test_a_restarted_runner_records_the_match_the_killed_one_created_even_past_the_deadline(
        repo: TournamentRepo, restarted_secret: str) -> None:
    """A running tournament: the restarted runner (its secret the same, or rotated) records the
    very match the killed one created, not a second one under another request id, and waits for
    its result even when the deadline passed meanwhile (before, the tournament finished without
    it while it played on, and its result came in after the end)."""
    tid = repo.create(_spec(concurrency=2, deadline_seconds=60.0))
    command = CommandService()
    with pytest.raises(Killed):
        _runner(DyingRepo(repo.client, at=2), command).step()  # type: ignore[arg-type]
    assert command.created == ["m1", "m2"] and repo.get(tid).started == {0: "m1"}
    repo.record(tid, "m1", _result())
    repo.client.hset(repo._key(tid), "created_ms", 1)  # the deadline passed while no runner ran
    command.signer = TokenSigner(restarted_secret)
    runner = _runner(repo, command, restarted_secret)
    runner.step()
    record = repo.get(tid)
    assert command.created == ["m1", "m2"] and record.started == {0: "m1", 1: "m2"}
    assert record.status == RUNNING and record.unrecorded() == []
    repo.record(tid, "m2", _result())
    runner.step()
    assert repo.get(tid).status == FINISHED and command.created == ["m1", "m2"]


@pytest.mark.parametrize("passing", [grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INTERNAL,
                                     grpc.StatusCode.ABORTED], ids=lambda code: code.name)
def test_a_lost_creation_the_cancel_is_refused_for_a_moment_is_looked_up_again_and_cancelled(
        repo: TournamentRepo, passing: grpc.StatusCode) -> None:
    """A refusal that may pass (the command service at its limits, its Redis away for a moment:
    a CreateMatch is tried again for `stuck_seconds` on one) fails the step, as the command
    service away does: the next step asks again and cancels the match made before. Before, the
    look-up took it as final, recorded the planned match failed and left the match it had made
    playing on, for nobody: what the written-down request id is there to prevent."""
    tid, command = _lost_creation_cancelled(repo)
    runner = _runner(repo, command)
    command.lose_answer = passing
    with pytest.raises(grpc.RpcError):
        runner.step()
    record = repo.get(tid)
    assert record is not None and record.started == {} and record.unrecorded() == [0]
    assert command.events == {} and repo.cancelling() == [tid]
    command.lose_answer = None
    runner.step()
    record = repo.get(tid)
    assert record is not None and record.started == {0: "m1"} and command.created == ["m1"]
    assert command.events == {"m1": [f"tournament {tid} (cup) cancelled"]}
    assert record.results["m1"]["abandoned"] and repo.cancelling() == []


def test_a_lost_creation_the_cancel_is_refused_for_stuck_seconds_is_recorded_failed(repo: TournamentRepo) -> None:
    """A refusal that may pass is not tried for ever: past `stuck_seconds` the planned match is
    recorded failed, as `_start` abandons one, and the tournament's cancel is done."""
    tid, command = _lost_creation_cancelled(repo)
    command.lose_answer = grpc.StatusCode.INTERNAL
    TournamentRunner(repo, command, Store(), secret="unit-secret", stuck_seconds=0.0).step()  # type: ignore[arg-type]
    record = repo.get(tid)
    assert record is not None and record.started == {0: f"failed:{tid}:0"} and record.unrecorded() == []
    assert record.results[f"failed:{tid}:0"]["abandoned"] and repo.cancelling() == []


class EitherSecret:
    """A command service in a rolling deploy that rotates the secret: both replicas' tokens pass."""

    def __init__(self, *secrets: str) -> None:
        self.signers = [TokenSigner(s) for s in secrets]

    def read_operator(self, token: str):
        for signer in self.signers:
            try:
                return signer.read_operator(token)
            except Exception:  # noqa: BLE001 - the other secret's token
                continue
        raise AssertionError("a token neither secret signed")


def _two_runners(repo: TournamentRepo) -> tuple[str, CommandService, TournamentRunner, TournamentRunner]:
    """A tournament, and the old and the new runner of a rolling deploy that rotates the secret."""
    tid = repo.create(_spec(concurrency=2))
    command = CommandService()
    command.signer = EitherSecret("unit-secret", "rotated-secret")  # type: ignore[assignment]
    return tid, command, _runner(repo, command, "unit-secret"), _runner(repo, command, "rotated-secret")


def test_two_runners_with_different_secrets_at_once_create_each_planned_match_once(repo: TournamentRepo) -> None:
    """Two runners step the same tournament at once, each with its own secret (the old and the new
    replica of a rolling deploy that rotates it), both having read it before either wrote anything
    down: the second finds the match the first recorded under the first request id written down and
    sends nothing, so the command service makes one match (before, each sent its own id and two
    matches played, one recorded by nobody; two creations in flight at once: the last test below)."""
    tid, command, old, new = _two_runners(repo)
    seen_by_old, seen_by_new = repo.get(tid), repo.get(tid)
    planned = old.plan_of(seen_by_old)[0]
    assert old._start(seen_by_old, planned) == new._start(seen_by_new, planned) == "m1"
    assert command.created == ["m1"] and repo.get(tid).started == {0: "m1"}
    assert repo.get(tid).unrecorded() == [] and not repo.client.hgetall(repo._key(tid, "starting"))


def test_a_runner_that_read_a_tournament_before_another_recorded_its_match_sends_no_creation(
        repo: TournamentRepo) -> None:
    """The other runner created the planned match and recorded it while this one held an older read
    of the tournament: this one takes the recorded match and leaves no creation outstanding."""
    tid, command, old, new = _two_runners(repo)
    stale = repo.get(tid)
    planned = old.plan_of(stale)[0]
    assert old._start(repo.get(tid), planned) == "m1"
    assert new._start(stale, planned) == "m1"
    assert command.created == ["m1"] and repo.get(tid).started == {0: "m1"}
    assert not repo.client.hgetall(repo._key(tid, "starting"))


def test_a_runner_that_meets_another_runners_creation_in_flight_sends_that_request_id(
        repo: TournamentRepo) -> None:
    """The two runners' steps overlap: the old one wrote its request id down and sent CreateMatch,
    whose answer has not come back (the match is made, not recorded), when the new one, with an
    older read of the tournament, starts the same planned match. The new one sends the old one's
    request id, so the command service answers with the match the old one made (before, it wrote
    its own id over the first and a second match played, one recorded by nobody)."""
    tid, command, old, new = _two_runners(repo)
    stale = repo.get(tid)
    planned = old.plan_of(stale)[0]
    command.lose_answer = grpc.StatusCode.DEADLINE_EXCEEDED  # made, its answer still on the way
    with pytest.raises(grpc.RpcError):
        old._start(repo.get(tid), planned)
    command.lose_answer = None
    written = repo.get(tid).starting[0]
    assert new._start(stale, planned) == "m1"
    assert command.created == ["m1"] and command.made == {written: "m1"}
    assert repo.get(tid).started == {0: "m1"} and repo.get(tid).unrecorded() == []


class CancelledMeanwhile(TournamentRepo):
    """The records as one runner sees them while, after it read its tournament as running and
    before it wrote down its next match's request id, an operator cancels the tournament and
    another runner (a rolling deploy's other replica) makes its whole cancel pass."""

    def __init__(self, client: redis.Redis, meanwhile) -> None:  # type: ignore[no-untyped-def]
        super().__init__(client)
        self.meanwhile = meanwhile

    def claim_starting(self, tid: str, index: int, request_id: str) -> tuple[str, str | None]:
        if self.meanwhile is not None:
            meanwhile, self.meanwhile = self.meanwhile, None
            meanwhile()
        return super().claim_starting(tid, index, request_id)


def test_a_match_started_as_another_runner_cancels_the_tournament_is_cancelled_or_never_made(
        repo: TournamentRepo) -> None:
    """Found auditing the races (tests/e2e/test_races.py): a runner that read the tournament
    as running went on to create its next match while the other runner made the cancel pass
    and took the tournament off the cancelling list; nobody cancelled that match, which was
    then played to its end for nobody."""
    command = CommandService()
    tid = repo.create(_spec(concurrency=2))
    other = _runner(repo, command)
    other.step()  # two matches in play
    first = repo.get(tid)
    repo.record(tid, first.started[0], _result())  # one ends: room for the next

    def cancel_and_pass() -> None:
        _cancel(repo, tid)
        other.step()

    late = _runner(CancelledMeanwhile(repo.client, cancel_and_pass), command)  # type: ignore[arg-type]
    late.step()
    late.step()
    other.step()
    in_play = [m for m in command.created if m not in command.events and m != first.started[0]]
    assert not in_play, (command.created, command.events)
    assert repo.get(tid).status == CANCELLED


class _Stop(threading.Event):
    """The loop's stop event, recording the pauses it is asked for instead of waiting them."""

    def __init__(self) -> None:
        super().__init__()
        self.pauses: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.pauses.append(float(timeout or 0.0))
        return self.is_set()


def test_steps_that_keep_failing_are_spaced_out_and_an_outage_is_told_without_tracebacks(
        repo: TournamentRepo) -> None:
    """With Redis away the runner wrote a traceback every 1.25 s (~1 MB in five minutes): now one
    warning line a step, the pause doubling from 1 s to MAX_FAILING_PAUSE, and 1 s again after a
    step that went through. A failure of another kind keeps its traceback."""
    runner = _runner(repo, CommandService())
    stop = _Stop()
    outcomes: list[BaseException | None] = [redis.ConnectionError("refused")] * 5 + [
        _RpcError(grpc.StatusCode.UNAVAILABLE), None, ValueError("a bug"), None]

    def step() -> None:
        outcome = outcomes.pop(0)
        if not outcomes:
            stop.set()
        if outcome is not None:
            raise outcome

    runner.step = step  # type: ignore[method-assign]
    with structlog.testing.capture_logs() as logs:
        runner.run(stop, interval=0.0)
    failing = [p for p in stop.pauses if p >= 1.0]
    assert failing == [1.0, 2.0, 4.0, MAX_FAILING_PAUSE, MAX_FAILING_PAUSE, MAX_FAILING_PAUSE, 1.0]
    events = [(e["event"], "exc_info" in e) for e in logs]
    assert events == [("tournament_step_unavailable", False)] * 6 + [("tournament_step_failed", True)]


def test_a_runner_restarted_with_the_new_secret_creates_and_cancels_on_a_replica_not_yet_restarted(
        repo: TournamentRepo) -> None:
    """A command service takes an operator token by its own secret alone (docs/operations.md,
    "Rotating the secret"): in step 2's roll the runner (new secret, the old accepted) meets
    replicas signing with the old secret, whose tokens its own must carry a signature of."""
    tid = repo.create(_spec(concurrency=1))
    command = CommandService()
    command.signer = TokenSigner("unit-secret", ["rotated-secret"])  # not yet restarted
    runner = TournamentRunner(repo, command, Store(), secret="rotated-secret",  # type: ignore[arg-type]
                              accepted_secret="unit-secret")
    runner.step()
    assert command.created == ["m1"]
    _cancel(repo, tid)
    runner.step()
    assert command.events == {"m1": [f"tournament {tid} (cup) cancelled"]}



def test_a_creation_retried_after_its_match_was_archived_takes_that_match(repo: TournamentRepo) -> None:
    """The runner away while its match was made, played to its end and archived: the command
    service refuses the request id again (`request_id_reused`, the match in ErrorInfo), and the
    runner records that match, not a planned match that failed."""
    tid = repo.create(_spec(concurrency=1))

    class Archived(CommandService):
        def create_match(self, game_id, seats, *, request_id, token, **kwargs):
            raise Refused(AlreadyExists("request_id_reused", "archived", metadata={"match_id": "m-archived"}))

    runner = _runner(repo, Archived())
    runner.step()
    assert repo.get(tid).started[0] == "m-archived"  # type: ignore[union-attr]
    # A request id refused for another reason still fails the planned match.
    tid2 = repo.create(_spec(concurrency=1))

    class Reused(CommandService):
        def create_match(self, game_id, seats, *, request_id, token, **kwargs):
            raise Refused(AlreadyExists("request_id_reused", "another match"))

    _runner(repo, Reused()).step()
    assert repo.get(tid2).started[0].startswith("failed:")  # type: ignore[union-attr]
