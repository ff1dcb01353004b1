"""The operator's sweep of old tournaments' Redis records (`famiglia tournament sweep`,
TournamentRepo.sweep), on a real server. Until it, every tournament's spec, started matches and
results stayed in Redis for good. It deletes only tournaments that ended before the cutoff, with
nothing in play, whose end and standings the read models hold; run again, it deletes nothing twice."""

from __future__ import annotations

import time

import grpc
import pytest
import redis

from famiglia.bots.tournament import GamePlan, TournamentSpec
from famiglia.v1 import query_service_pb2 as query_pb
from famiglia.v1 import query_service_pb2_grpc as query_grpc
from services.bots import tournaments
from services.bots.tournaments import (
    CANCELLED,
    CANCELLING_KEY,
    ENDED_KEY,
    FINISHED,
    Ended,
    TournamentRepo,
    TournamentSwept,
)

DAY_MS = 86_400_000
T0 = 1_700_000_000_000
CUTOFF = T0 + 30 * DAY_MS  # "finished more than N days ago", N days before now


def _spec(name: str) -> TournamentSpec:
    return TournamentSpec(name=name, entrants=("random", "heuristic"),
                          games=(GamePlan("goodcritters", (4,)),), seed=1)


def _result(match_id: str) -> dict[str, object]:
    return {"game_id": "goodcritters", "commands": 40, "finished_ms": T0,
            "seats": [{"seat": s, "entrant": "random", "rank": s + 1} for s in range(4)]}


@pytest.fixture()
def repo(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> TournamentRepo:
    monkeypatch.setattr(tournaments, "_ms", lambda: T0)
    return TournamentRepo(redis.Redis.from_url(redis_url))


def _ended(repo: TournamentRepo, name: str, status: str = FINISHED, *, matches: int = 2,
           recorded: bool = True, request_id: str = "") -> str:
    """A tournament played to its end at T0 (its matches' results in), its end told to the read
    models (`recorded`) as the runner does."""
    tid = repo.create(_spec(name), request_id=request_id)
    for i in range(matches):
        repo.mark_started(tid, i, f"{tid}-m{i}")
        repo.record(tid, f"{tid}-m{i}", _result(f"{tid}-m{i}"))
    repo.set_status(tid, status)
    if recorded:
        repo.end_recorded(tid)
        repo.matches_cancelled(tid)
    return tid


def _keys(repo: TournamentRepo, tid: str) -> list[str]:
    return sorted(k.decode() for k in repo.client.scan_iter(match=f"*{{t:{tid}}}*"))


def test_a_tournament_finished_long_ago_is_deleted_and_a_second_sweep_deletes_nothing(repo: TournamentRepo) -> None:
    old = _ended(repo, "old")
    cancelled = _ended(repo, "cancelled", CANCELLED, matches=1)
    asked: list[Ended] = []
    done = repo.sweep(CUTOFF, held=lambda e: asked.append(e) or True)
    assert sorted((e.tournament_id, e.matches, outcome) for e, outcome in done) == \
        sorted([(old, 2, "swept"), (cancelled, 1, "swept")])
    assert [e.tournament_id for e in asked] == [e.tournament_id for e, _ in done]
    for tid in (old, cancelled):
        assert repo.get(tid) is None and _keys(repo, tid) == [] and not repo.exists(tid)
    assert repo.ids(limit=50) == []  # ListTournaments no longer lists them
    assert repo.sweep(CUTOFF, held=lambda e: True) == []


def test_running_recent_and_unfinished_business_stay(repo: TournamentRepo) -> None:
    running = repo.create(_spec("running"))
    repo.mark_started(running, 0, "r-m0")
    recent = _ended(repo, "recent")
    repo.client.hset(repo._key(recent), "finished_ms", CUTOFF + 1)  # ended after the cutoff
    unrecorded = _ended(repo, "unrecorded", recorded=False)  # the read models lack its end
    cancelling = _ended(repo, "cancelling", CANCELLED)
    repo.cancel_matches_of(cancelling)  # its matches in play not all cancelled yet
    in_play = _ended(repo, "in_play", CANCELLED)
    repo.mark_started(in_play, 5, "left-playing")  # a cancel refused: the match plays on
    outstanding = _ended(repo, "outstanding", CANCELLED)
    repo.claim_starting(outstanding, 7, "req-7")  # a CreateMatch whose answer was never recorded
    asked: list[str] = []
    done = {e.tournament_id: outcome for e, outcome in repo.sweep(CUTOFF, held=lambda e: asked.append(e.tournament_id) or True)}
    assert done == {unrecorded: "unrecorded", cancelling: "cancelling", in_play: "in_play", outstanding: "in_play"}
    assert asked == []  # the read models are asked only of tournaments that may go
    for tid in (running, recent, unrecorded, cancelling, in_play, outstanding):
        assert repo.get(tid) is not None
    assert repo.client.sismember(ENDED_KEY, unrecorded) and repo.client.sismember(CANCELLING_KEY, cancelling)


def test_one_the_read_models_do_not_hold_stays_and_a_dry_run_deletes_nothing(repo: TournamentRepo) -> None:
    tid = _ended(repo, "t")
    assert [o for _, o in repo.sweep(CUTOFF, held=lambda e: False)] == ["not_in_read_models"]
    assert [o for _, o in repo.sweep(CUTOFF, held=lambda e: True, dry_run=True)] == ["sweepable"]
    assert repo.get(tid) is not None and tid in repo.ids()


def test_the_delete_checks_again_what_changed_since_the_listing(repo: TournamentRepo) -> None:
    """A match recorded started between the listing and the delete (a second CancelTournament's
    recovery) keeps the tournament: the script that deletes checks on the tournament's slot."""
    tid = _ended(repo, "t", CANCELLED)
    (ended,) = repo.ended_before(CUTOFF)
    assert ended.left == ""
    repo.mark_started(tid, 9, "late")
    assert repo.drop(tid, CUTOFF) == "in_play" and repo.get(tid) is not None
    assert repo.drop(tid, T0) == "recent"


def test_a_sweep_cut_short_is_finished_by_the_next(repo: TournamentRepo) -> None:
    tid = _ended(repo, "t")
    repo.client.delete(repo._key(tid), repo._key(tid, "started"), repo._key(tid, "results"))  # deleted, still indexed
    assert [(e.tournament_id, o) for e, o in repo.sweep(CUTOFF, held=lambda e: False)] == [(tid, "gone")]
    assert repo.ids() == [] and repo.sweep(CUTOFF, held=lambda e: True) == []


def test_a_creation_retried_with_a_swept_tournaments_request_id_is_refused(repo: TournamentRepo) -> None:
    """Its id derives from the request id: made anew, it would run again under the old id, its
    matches' creation request ids the old ones."""
    tid = _ended(repo, "t", request_id="req-123")
    assert repo.create(_spec("t"), request_id="req-123") == tid  # a retry while it is kept
    repo.sweep(CUTOFF, held=lambda e: True)
    with pytest.raises(TournamentSwept):
        repo.create(_spec("t"), request_id="req-123")
    assert repo.get(tid) is None and _keys(repo, tid) == []
    assert repo.create(_spec("t"), request_id="req-456") != tid


class _ReadModels(query_grpc.QueryServiceServicer):
    """GetTournamentStandings as the projection answers it, from a dict: tournament -> (status,
    matches finished); NOT_FOUND for the others."""

    def __init__(self, held: dict[str, tuple[str, int]]) -> None:
        self.held = held

    def GetTournamentStandings(self, request, context):  # type: ignore[no-untyped-def]
        if request.tournament_id not in self.held:
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown_tournament")
        status, finished = self.held[request.tournament_id]
        return query_pb.GetTournamentStandingsResponse(tournament_id=request.tournament_id, status=status,
                                                       matches_finished=finished)


def test_famiglia_tournament_sweep_deletes_what_the_read_models_hold(
        repo: TournamentRepo, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line: the read models asked over gRPC; a tournament they lack, or whose
    standings count fewer matches than its results (the projection behind), stays."""
    from concurrent import futures

    from famiglia.cli.main import main

    held, lacking, behind = _ended(repo, "held"), _ended(repo, "lacking"), _ended(repo, "behind", matches=3)
    for tid in (held, lacking, behind):  # ended more than a day before the command runs
        repo.client.hset(repo._key(tid), "finished_ms", int(time.time() * 1000) - 2 * DAY_MS)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    query_grpc.add_QueryServiceServicer_to_server(
        _ReadModels({held: ("finished", 2), behind: ("finished", 2)}), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    monkeypatch.setenv("FAMIGLIA_REDIS_URL", redis_url)
    monkeypatch.setenv("FAMIGLIA_PROJECTION_ADDR", f"127.0.0.1:{port}")
    try:
        assert main(["tournament", "sweep", "--finished-days", "1", "--dry-run"]) == 0
        assert all(repo.get(t) is not None for t in (held, lacking, behind))
        assert main(["tournament", "sweep", "--finished-days", "3"]) == 0  # none ended that long ago
        assert all(repo.get(t) is not None for t in (held, lacking, behind))
        assert main(["tournament", "sweep", "--finished-days", "1"]) == 0
        assert repo.get(held) is None
        assert repo.get(lacking) is not None and repo.get(behind) is not None
        assert main(["tournament", "sweep", "--finished-days", "0"]) == 2
    finally:
        server.stop(grace=None)


def test_the_tournament_service_after_a_sweep(repo: TournamentRepo) -> None:
    """GetTournament and CancelTournament: NOT_FOUND unknown_tournament; ListTournaments leaves it
    out; CreateTournament with its request id: ALREADY_EXISTS request_id_reused."""
    from famiglia.bots.toy import toy_registry
    from famiglia.grpcutil.errors import AlreadyExists, NotFound
    from famiglia.v1 import tournament_service_pb2 as tpb
    from services.bots.entrypoints.grpc_server import TournamentServicer
    from tests.unit.bots.test_tournament_cancel import SIGNER, Calling

    servicer = TournamentServicer(repo, toy_registry(), SIGNER)
    operator = Calling(SIGNER.operator_token("ops"))
    request = tpb.CreateTournamentRequest(name="cup", entrants=["random", "heuristic"], seed=3, request_id="r" * 32,
                                          games=[tpb.TournamentGame(game_id="highcard", seat_counts=[2])])
    tid = TournamentServicer.CreateTournament.__wrapped__(servicer, request, operator).tournament_id
    repo.set_status(tid, CANCELLED)
    repo.end_recorded(tid)
    repo.matches_cancelled(tid)
    assert [o for _, o in repo.sweep(CUTOFF, held=lambda e: True)] == ["swept"]
    for call, asked in ((TournamentServicer.GetTournament, tpb.GetTournamentRequest(tournament_id=tid)),
                        (TournamentServicer.CancelTournament, tpb.CancelTournamentRequest(tournament_id=tid))):
        with pytest.raises(NotFound) as gone:
            call.__wrapped__(servicer, asked, operator)
        assert gone.value.code == "unknown_tournament"
    assert not TournamentServicer.ListTournaments.__wrapped__(servicer, tpb.ListTournamentsRequest(), None).tournaments
    with pytest.raises(AlreadyExists) as again:
        TournamentServicer.CreateTournament.__wrapped__(servicer, request, operator)
    assert again.value.code == "request_id_reused"


def test_a_late_write_of_a_swept_tournament_leaves_no_record_behind(repo: TournamentRepo) -> None:
    """A match abandoned as stuck that ends after all (cancelled by `famiglia match sweep`, say)
    reaches the dispatcher's MatchObserver, which still knows the tournament (it caches that it
    exists) and writes its result and moves: written after the sweep, they made a `results` hash
    and a record of `moves` alone that no sweep lists any more, left in Redis for good."""
    tid = _ended(repo, "stuck")
    assert [outcome for _, outcome in repo.sweep(CUTOFF, held=lambda e: True)] == ["swept"]
    assert repo.record(tid, f"{tid}-late", _result(f"{tid}-late")) is False
    repo.add_moves(tid, 12)
    assert _keys(repo, tid) == [] and repo.get(tid) is None


def test_a_sweep_cut_short_after_its_delete_still_refuses_the_request_id(repo: TournamentRepo,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep killed between the script's delete and its writes to the other slots: the id
    was not yet in the swept set, so a creation retried with the request id before the next
    sweep made the tournament anew and ran it again under its old id."""
    tid = _ended(repo, "cut", request_id="req-cut")
    pipeline = repo.client.pipeline

    def killed(*args: object, **kwargs: object) -> object:
        pipe = pipeline(*args, **kwargs)  # type: ignore[arg-type]
        pipe.execute = lambda *a, **k: (_ for _ in ()).throw(redis.ConnectionError("sweep killed"))  # type: ignore[method-assign]
        return pipe

    with monkeypatch.context() as patch:
        patch.setattr(repo.client, "pipeline", killed)
        with pytest.raises(redis.ConnectionError):
            repo.drop(tid, CUTOFF)
    with pytest.raises(TournamentSwept):
        repo.create(_spec("cut"), request_id="req-cut")
    assert repo.get(tid) is None
    assert [(e.tournament_id, outcome) for e, outcome in repo.sweep(CUTOFF, held=lambda e: True)] == [(tid, "gone")]


def test_a_creation_racing_the_sweep_of_its_request_ids_tournament_is_refused(repo: TournamentRepo,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The creation found the id not swept, the sweep deleted the tournament, then the
    creation's write made it anew: a tournament ended long ago ran again under its old id."""
    tid = _ended(repo, "raced", request_id="req-raced")
    sismember = repo.client.sismember

    def swept_meanwhile(key: str, member: str) -> object:
        found = sismember(key, member)
        if key == tournaments.SWEPT_KEY and not found:
            assert repo.drop(tid, CUTOFF) == "swept"
        return found

    with monkeypatch.context() as patch:
        patch.setattr(repo.client, "sismember", swept_meanwhile)
        with pytest.raises(TournamentSwept):
            repo.create(_spec("raced"), request_id="req-raced")
    assert repo.get(tid) is None and _keys(repo, tid) == []
    assert repo.ids(limit=50) == [] and repo.ids(limit=50, running_only=True) == []


def test_famiglia_tournament_sweep_stopped_midway_names_what_it_deleted(
        repo: TournamentRepo, redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The QueryService lost after the first tournament was deleted: the command said only the
    error, so the operator never learnt which tournaments went (none is listed again)."""
    from concurrent import futures

    from famiglia.cli.main import main

    first, second = _ended(repo, "first"), _ended(repo, "second")
    for tid in (first, second):
        repo.client.hset(repo._key(tid), "finished_ms", int(time.time() * 1000) - 2 * DAY_MS)

    class LostAfterOne(_ReadModels):
        def GetTournamentStandings(self, request, context):  # type: ignore[no-untyped-def]
            if len(self.held) < 2:
                context.abort(grpc.StatusCode.UNAVAILABLE, "projection restarting")
            self.held.pop(request.tournament_id, None)
            return query_pb.GetTournamentStandingsResponse(tournament_id=request.tournament_id, status="finished",
                                                           matches_finished=2)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    lost = LostAfterOne({first: ("finished", 2), second: ("finished", 2)})  # type: ignore[abstract]
    query_grpc.add_QueryServiceServicer_to_server(lost, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    monkeypatch.setenv("FAMIGLIA_REDIS_URL", redis_url)
    monkeypatch.setenv("FAMIGLIA_PROJECTION_ADDR", f"127.0.0.1:{port}")
    try:
        assert main(["tournament", "sweep", "--finished-days", "1"]) == 2
    finally:
        server.stop(grace=None)
    out = capsys.readouterr().out
    gone = [t for t in (first, second) if repo.get(t) is None]
    assert len(gone) == 1 and f"{gone[0]}: finished" in out and "swept" in out and "UNAVAILABLE" in out
