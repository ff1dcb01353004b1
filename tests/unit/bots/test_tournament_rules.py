"""Tournaments: the runner, the repo's records, the TournamentService (rules a mutation once changed unnoticed)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import grpc
import pytest
import redis

from famiglia.auth import TokenSigner
from famiglia.bots.policy import BadPolicyParameter, make_policy
from famiglia.bots.tournament import BadTournament, GamePlan, TournamentSpec, check
from famiglia.bots.toy import toy_registry
from famiglia.grpcutil.errors import InvalidArgument
from famiglia.v1 import tournament_service_pb2 as tpb
from services.bots.entrypoints import grpc_server
from services.bots.tournaments import (
    CANCELLED,
    FINISHED,
    RUNNING,
    RUNNING_KEY,
    TournamentObserver,
    TournamentRecord,
    TournamentRepo,
    TournamentRunner,
)
from tests.unit.bots.test_handlers import _RpcError


def _spec(**kwargs) -> TournamentSpec:
    base = dict(name="t", games=(GamePlan("highcard", (2,)),), entrants=("random", "heuristic"),
                matches_per_game=6, concurrency=2)
    base.update(kwargs)
    return TournamentSpec(**base)  # type: ignore[arg-type]


class Game:
    """A GameClient's create_match (a new match id per call, or an error) and cancel_match."""

    def __init__(self) -> None:
        self.created: list[int] = []
        self.cancelled: list[str] = []
        self.fail: grpc.StatusCode | None = None

    def cancel_match(self, match_id, reason, **kwargs):
        self.cancelled.append(match_id)
        return SimpleNamespace(duplicate=False)

    def create_match(self, game_id, seats, **kwargs):
        if self.fail is not None:
            raise _RpcError(self.fail)
        self.created.append(len(self.created))
        return SimpleNamespace(match_id=f"m{len(self.created)}")


class Store:
    def __init__(self) -> None:
        self.versions: dict[str, int] = {}

    def version(self, match_id: str) -> int:
        return self.versions.get(match_id, 2)


def _result(game: str = "highcard", ranks=(1, 2), entrants=("random", "heuristic"), finished_ms: int = 1) -> dict:
    return {"game_id": game, "seats": [{"seat": i, "entrant": e, "rank": r, "score": 0.0}
                                       for i, (e, r) in enumerate(zip(entrants, ranks, strict=True))],
            "commands": 6, "finished_ms": finished_ms}


@pytest.fixture
def repo(redis_url: str) -> TournamentRepo:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    return TournamentRepo(client)


def test_the_runner_keeps_at_most_concurrency_matches_in_play(repo: TournamentRepo) -> None:
    """Fails on a change the suite once missed (room not less the matches in play)."""
    tid = repo.create(_spec(concurrency=2))
    game = Game()
    runner = TournamentRunner(repo, game, Store())  # type: ignore[arg-type]
    for _ in range(3):
        runner.step()
    record = repo.get(tid)
    assert record is not None and len(record.started) == 2 and len(game.created) == 2
    repo.record(tid, record.started[0], _result())
    runner.step()
    assert len(repo.get(tid).started) == 3  # one finished: one more starts


def test_a_tournament_past_its_deadline_finishes_when_its_started_matches_do(repo: TournamentRepo) -> None:
    """Fails on a change the suite once missed: past the deadline no match starts, so the tournament must finish once the
    started ones have results, or it stays running for ever."""
    tid = repo.create(_spec(concurrency=1, deadline_seconds=1.0))
    runner = TournamentRunner(repo, Game(), Store())  # type: ignore[arg-type]
    runner.step()
    record = repo.get(tid)
    assert record is not None and list(record.started) == [0]
    repo.client.hset(repo._key(tid), "created_ms", int(time.time() * 1000) - 10_000)  # the deadline passed
    repo.record(tid, record.started[0], _result())
    runner.step()
    record = repo.get(tid)
    assert record.status == FINISHED and list(record.started) == [0]


def test_a_command_service_away_does_not_abandon_planned_matches(repo: TournamentRepo) -> None:
    """Fails on a change the suite once missed: UNAVAILABLE at CreateMatch is tried again at the next step, never recorded as a
    failed (abandoned) match."""
    tid = repo.create(_spec(concurrency=1))
    game = Game()
    game.fail = grpc.StatusCode.UNAVAILABLE
    runner = TournamentRunner(repo, game, Store())  # type: ignore[arg-type]
    with pytest.raises(grpc.RpcError):
        runner.step()
    record = repo.get(tid)
    assert record is not None and not record.started and not record.results
    game.fail = None
    runner.step()
    assert repo.get(tid).started == {0: "m1"}


@pytest.mark.parametrize("code", [grpc.StatusCode.INTERNAL, grpc.StatusCode.RESOURCE_EXHAUSTED,
                                  grpc.StatusCode.UNAUTHENTICATED])
def test_a_refusal_that_may_pass_abandons_a_planned_match_only_once_it_kept_failing(
        repo: TournamentRepo, code: grpc.StatusCode) -> None:
    """CreateMatch refused for a reason that may pass (the service at its limits, its Redis away
    for a moment) is tried again at the next steps, and the planned match is abandoned only once
    it kept failing for `stuck_seconds` (before, the first refusal abandoned it for good)."""
    tid = repo.create(_spec(concurrency=1))
    game = Game()
    game.fail = code
    runner = TournamentRunner(repo, game, Store(), stuck_seconds=60)  # type: ignore[arg-type]
    with pytest.raises(grpc.RpcError):
        runner.step()
    assert not repo.get(tid).started
    game.fail = None
    runner.step()
    assert repo.get(tid).started == {0: "m1"}
    other = repo.create(_spec(concurrency=1), request_id="other")
    game.fail = code
    runner.stuck_seconds = 0  # it kept failing that long
    runner.step()
    assert repo.get(other).started and all(m.startswith("failed:") for m in repo.get(other).started.values())


def test_abandoned_matches_are_left_out_of_the_standings() -> None:
    """Fails on a change the suite once missed (abandoned results read as finished matches)."""
    record = TournamentRecord("t1", _spec(), RUNNING, 0, started={0: "m1", 1: "failed:t1:1"},
                              results={"m1": _result(), "failed:t1:1": {"abandoned": True, "game_id": "highcard"}})
    assert [m.match_id for m in record.match_records()] == ["m1"]
    proto = grpc_server.tournament_proto(record)
    assert {(s.entrant, s.matches, s.wins) for s in proto.standings} == {("random", 1, 1), ("heuristic", 1, 0)}


def test_moves_a_failed_flush_could_not_write_are_written_by_the_next() -> None:
    """Fails on a change the suite once missed (the moves of a failed flush dropped)."""
    written: list[tuple[str, int]] = []
    fail = [True]

    class Repo:
        def exists(self, tid: str) -> bool:
            return True

        def add_moves(self, tid: str, moves: int) -> None:
            if fail[0]:
                raise redis.ConnectionError("away")
            written.append((tid, moves))

    now = [0.0]
    observer = TournamentObserver(Repo(), flush_seconds=0.5, now=lambda: now[0])  # type: ignore[arg-type]
    observer.match_progress("t1", "m1", 3)
    with pytest.raises(redis.ConnectionError):
        observer.flush()
    fail[0] = False
    observer.match_progress("t1", "m1", 2)
    observer.flush()
    assert written == [("t1", 5)]


class _Calling:
    """The part of a gRPC context the servicer reads: the caller's metadata."""

    def __init__(self, token: str | None) -> None:
        self.metadata = [("authorization", f"Bearer {token}")] if token is not None else []

    def invocation_metadata(self):
        return self.metadata


_SIGNER = TokenSigner("unit-secret")


def _as_operator(token: str) -> grpc.UnaryUnaryClientInterceptor:
    """A channel interceptor that sends `token` with every call."""

    class Interceptor(grpc.UnaryUnaryClientInterceptor):
        def intercept_unary_unary(self, continuation, details, request):
            details = details._replace(metadata=[*(details.metadata or ()), ("authorization", f"Bearer {token}")])
            return continuation(details, request)

    return Interceptor()


def test_cancelling_a_finished_tournament_leaves_it_finished(repo: TournamentRepo) -> None:
    """Fails on a change the suite once missed (CancelTournament rewrites any status)."""
    tid = repo.create(_spec())
    repo.set_status(tid, FINISHED)
    servicer = grpc_server.TournamentServicer(repo, toy_registry(), _SIGNER)
    operator = _Calling(_SIGNER.operator_token("tests"))
    answer = grpc_server.TournamentServicer.CancelTournament.__wrapped__(
        servicer, tpb.CancelTournamentRequest(tournament_id=tid), operator)
    assert answer.status == tpb.TOURNAMENT_FINISHED
    assert repo.get(tid).status == FINISHED
    running = repo.create(_spec(), request_id="other")
    grpc_server.TournamentServicer.CancelTournament.__wrapped__(
        servicer, tpb.CancelTournamentRequest(tournament_id=running), operator)
    assert repo.get(running).status == CANCELLED


@pytest.mark.parametrize(("token", "code"), [
    (None, "no_token"), ("forged.token", "bad_token"), ("seat", "operator_only"), ("no signer", "operator_only")])
def test_only_an_operator_creates_or_cancels_a_tournament(repo: TournamentRepo, token: str | None,
                                                          code: str) -> None:
    """TournamentService had no authentication: anyone could cancel anyone's tournament, or
    create one of 20,000 matches at an hour a decision and keep every bot worker busy for days.
    Reading (Get, List, ListPolicies) stays open."""
    from famiglia.grpcutil.errors import AppError

    signer = None if token == "no signer" else _SIGNER
    if token == "seat":
        token = _SIGNER.seat_token("m1", 0)
    elif token == "no signer":
        token = _SIGNER.operator_token("tests")
    servicer = grpc_server.TournamentServicer(repo, toy_registry(), signer)
    running = repo.create(_spec(), request_id="running")
    calls = [(grpc_server.TournamentServicer.CancelTournament, tpb.CancelTournamentRequest(tournament_id=running)),
             (grpc_server.TournamentServicer.CreateTournament,
              tpb.CreateTournamentRequest(name="x", entrants=["random", "heuristic"]))]
    before = repo.ids(limit=100)
    for method, request in calls:
        with pytest.raises(AppError) as refused:
            method.__wrapped__(servicer, request, _Calling(token))
        assert refused.value.code == code
    assert repo.get(running).status == RUNNING and repo.ids(limit=100) == before
    seen = grpc_server.TournamentServicer.GetTournament.__wrapped__(
        servicer, tpb.GetTournamentRequest(tournament_id=running), _Calling(None))
    assert seen.tournament_id == running


def test_the_service_shows_standings_with_every_result_so_far() -> None:
    """Fails on a change the suite once missed (standings cached past a new result)."""
    servicer = grpc_server.TournamentServicer(repo=None, registry=None)  # type: ignore[arg-type]
    record = TournamentRecord("t1", _spec(), RUNNING, 0, started={0: "m1", 1: "m2"}, results={"m1": _result()})
    first = servicer._proto(record)
    assert {s.entrant: s.matches for s in first.standings} == {"random": 1, "heuristic": 1}
    record.results["m2"] = _result(ranks=(2, 1), finished_ms=2)
    again = servicer._proto(record)
    assert {s.entrant: (s.matches, s.wins) for s in again.standings} == {"random": (2, 1), "heuristic": (2, 1)}


def test_without_matches_per_game_each_entrant_gets_two_per_game() -> None:
    """Fails on a change the suite once missed (docs: `matches_per_game` 0 = 2 per entrant)."""
    request = tpb.CreateTournamentRequest(games=[tpb.TournamentGame(game_id="highcard", seat_counts=[2])],
                                          entrants=["random", "heuristic"], seed=1)
    assert grpc_server.spec_from_request(request, toy_registry()).matches_per_game == 4


def test_a_policy_spec_longer_than_seat_info_keeps_is_refused_before_the_tournament() -> None:
    """Fails on a change the suite once missed: CreateMatch refuses a seat_info policy over 64 characters (bad_seat_info), so a
    longer entrant accepted here would have every match of the tournament abandoned."""
    long = "heuristic?samples=" + "0" * 60 + "2"
    with pytest.raises(BadPolicyParameter):
        make_policy(long)
    request = tpb.CreateTournamentRequest(games=[tpb.TournamentGame(game_id="highcard", seat_counts=[2])],
                                          entrants=["random", long], seed=1)
    with pytest.raises(InvalidArgument) as refused:
        grpc_server.spec_from_request(request, toy_registry())
    assert refused.value.code == "bad_policy_params"


def test_options_are_checked_at_every_seat_count_of_the_game() -> None:
    """Fails on a change the suite once missed (options judged at the smallest seat count only): High Card deals 4 cards to
    2 or 3 seats but not to 4, and the plan's 4-seat matches would all be refused."""
    spec = _spec(games=(GamePlan("highcard", (2, 4), {"hand": "4"}),))
    with pytest.raises(BadTournament) as refused:
        check(spec, toy_registry())
    assert refused.value.code == "HC-1"
    check(_spec(games=(GamePlan("highcard", (2, 3), {"hand": "4"}),)), toy_registry())



def test_a_creation_cut_short_and_retried_is_a_tournament_that_runs(repo: TournamentRepo) -> None:
    """TournamentRepo.create writes the tournament (spec, status, time) and then, in separate
    calls, the two indexes. A creation cut short after the tournament (Redis away, the process
    killed: the client sees an error and retries with its request_id) left a tournament the retry
    only found: shown as running but in no index, so the runner never started a match of it and
    it never finished."""
    client = repo.client
    real_zadd = client.zadd
    cut = [True]

    def zadd(*args, **kwargs):
        if cut[0]:
            cut[0] = False
            raise redis.ConnectionError("Connection closed by server.")
        return real_zadd(*args, **kwargs)

    client.zadd = zadd  # type: ignore[method-assign]
    with pytest.raises(redis.ConnectionError):
        repo.create(_spec(), request_id="req-1")
    tid = repo.create(_spec(), request_id="req-1")  # the client's retry
    assert repo.get(tid).status == RUNNING
    game = Game()
    TournamentRunner(repo, game, Store()).step()  # type: ignore[arg-type]
    assert game.created  # before: the runner never saw it


def test_a_creation_sent_twice_at_once_records_one_creation_time_in_the_tournament_and_its_indexes(
        repo: TournamentRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two CreateTournaments with one request id at once (a client's retry racing its first try;
    found by tests/e2e/test_races.py): the second ran between the first's HSETNX of the spec and
    its HSET of the rest, wrote its own `created_ms` (HSETNX) and scored the indexes with it; the
    first's HSET then overwrote it, so the tournament and its indexes named two moments."""
    from services.bots import tournaments

    clock = iter(range(1_000, 100_000, 1_000))
    monkeypatch.setattr(tournaments, "_ms", lambda: next(clock))
    client = repo.client
    real_hsetnx = client.hsetnx
    raced: list[str] = []

    def hsetnx(key, field, value):  # the other creation runs right after this one's first write
        wrote = real_hsetnx(key, field, value)
        if field == "spec" and not raced:
            raced.append("")
            raced[0] = repo.create(_spec(), request_id="twice")
        return wrote

    client.hsetnx = hsetnx  # type: ignore[method-assign]
    tid = repo.create(_spec(), request_id="twice")
    client.hsetnx = real_hsetnx  # type: ignore[method-assign]
    assert raced in ([], [tid])
    created_ms = repo.get(tid).created_ms
    assert client.zscore("famiglia:bots:tournaments", tid) == created_ms
    assert client.zscore(RUNNING_KEY, tid) == created_ms


def test_a_request_id_reused_for_another_tournament_is_refused_not_answered_with_the_first(
        repo: TournamentRepo) -> None:
    """CreateTournament's request_id makes a retry safe: the retry gets the tournament it made.
    A request id reused for a different tournament was answered with the first one, OK, and the
    new request silently dropped: refused instead, as CreateMatch refuses it (ALREADY_EXISTS
    request_id_reused). A retry without a seed (the server draws one each time) is still a retry."""
    from famiglia.grpcutil.errors import error_code
    from famiglia.v1 import tournament_service_pb2_grpc as tgrpc

    server, port = grpc_server.serve(repo, toy_registry(), "127.0.0.1:0", workers=2, signer=_SIGNER)
    server.start()
    channel = grpc.intercept_channel(grpc.insecure_channel(f"127.0.0.1:{port}"),
                                     _as_operator(_SIGNER.operator_token("tests")))
    try:
        stub = tgrpc.TournamentServiceStub(channel)
        asked = tpb.CreateTournamentRequest(name="cup", games=[tpb.TournamentGame(game_id="highcard")],
                                            entrants=["random", "heuristic"], request_id="req-7")
        first = stub.CreateTournament(asked)
        assert stub.CreateTournament(asked).tournament_id == first.tournament_id  # the retry
        other = tpb.CreateTournamentRequest()
        other.CopyFrom(asked)
        other.name, other.matches_per_game = "another cup", 40
        with pytest.raises(grpc.RpcError) as exc:
            stub.CreateTournament(other)
        assert exc.value.code() == grpc.StatusCode.ALREADY_EXISTS and error_code(exc.value) == "request_id_reused"
        reseeded = tpb.CreateTournamentRequest()
        reseeded.CopyFrom(asked)
        reseeded.seed = 99
        with pytest.raises(grpc.RpcError) as exc:
            stub.CreateTournament(reseeded)
        assert error_code(exc.value) == "request_id_reused"
        assert repo.get(first.tournament_id).spec.name == "cup"
    finally:
        channel.close()
        server.stop(grace=None)


def test_a_tournament_that_ended_out_of_the_runners_sight_is_not_left_running_in_the_read_models(
        repo: TournamentRepo, tmp_path) -> None:
    """The runner told the projection's tournament table only of the ends it made itself, at the
    moment it made them: a cancelled tournament (CancelTournament sets the status in Redis) and
    one the runner finished just before it was killed stayed `running` there for good, whatever
    came after."""
    from famiglia.readmodels.db import make_engine, read_session
    from famiglia.readmodels.tournaments import get_tournament
    from services.bots.tournaments import ReadModelLog
    from services.projection import schema

    url = f"sqlite:///{tmp_path / 'read.db'}"
    engine = make_engine(url)
    schema.upgrade(engine)
    cancelled, finished = repo.create(_spec(), request_id="cancelled"), repo.create(_spec(), request_id="finished")
    runner = TournamentRunner(repo, Game(), Store(), read_model=ReadModelLog(url))  # type: ignore[arg-type]
    runner.step()
    servicer = grpc_server.TournamentServicer(repo, toy_registry(), _SIGNER)
    grpc_server.TournamentServicer.CancelTournament.__wrapped__(
        servicer, tpb.CancelTournamentRequest(tournament_id=cancelled), _Calling(_SIGNER.operator_token("tests")))
    repo.set_status(finished, FINISHED)  # the runner that finished it was killed before it told the read models
    restarted = TournamentRunner(repo, Game(), Store(), read_model=ReadModelLog(url))  # type: ignore[arg-type]
    restarted.step()
    with read_session(engine) as session:
        ended = {tid: get_tournament(session, tid) for tid in (cancelled, finished)}
    engine.dispose()
    assert {tid: info.status for tid, info in ended.items() if info} == {cancelled: "cancelled", finished: "finished"}
    assert all(info and info.finished_ms for info in ended.values())
