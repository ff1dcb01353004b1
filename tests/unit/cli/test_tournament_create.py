"""`famiglia tournament run` (and `make run`) creating its tournament: under a request id, asked
once more with the same id when no answer came. It sent none, so a retry after a lost answer
(or none at all) could leave a second tournament running beside the first."""

from __future__ import annotations

import argparse

import grpc
import pytest

from famiglia.cli import tournament as cli
from famiglia.v1 import tournament_service_pb2 as pb
from tests.unit.cli.test_matchmake_follow import Refused


class Tournaments:
    """TournamentService as the CLI calls it: the first CreateTournament fails with `first`
    (made first when `made`: only its answer was lost), later ones answer as the server does."""

    def __init__(self, first: grpc.StatusCode | None, made: bool = True) -> None:
        self.first, self.made = first, made
        self.requests: list[pb.CreateTournamentRequest] = []
        self.tournaments: dict[str, str] = {}  # request id -> tournament id

    def CreateTournament(self, request: pb.CreateTournamentRequest, **_: object) -> pb.Tournament:
        self.requests.append(request)
        key = request.request_id or f"none{len(self.requests)}"  # no id: a new tournament each time
        if len(self.requests) == 1 and self.first is not None:
            if self.made:
                self.tournaments.setdefault(key, f"t{len(self.tournaments)}")
            raise Refused(self.first)
        tid = self.tournaments.setdefault(key, f"t{len(self.tournaments)}")
        return pb.Tournament(tournament_id=tid, planned=6, status=pb.TOURNAMENT_RUNNING)


def _client(monkeypatch: pytest.MonkeyPatch, stub: Tournaments) -> cli.TournamentClient:
    monkeypatch.setattr(cli, "dial", lambda _address: type("Channel", (), {"close": lambda self: None})())
    monkeypatch.setattr(cli.pb_grpc, "TournamentServiceStub", lambda _channel: stub)
    return cli.TournamentClient("localhost:1", secret="s" * 32)


def _run(monkeypatch: pytest.MonkeyPatch, stub: Tournaments) -> int:
    client = _client(monkeypatch, stub)
    monkeypatch.setattr(cli, "_client", lambda _args: client)
    args = argparse.Namespace(game=["grifters"], seats=[], entrants="random,heuristic", matches=0,
                              round_robin=False, seed=1, concurrency=4, deadline=0.0, name="cli", no_wait=True)
    return cli.cmd_run(args)


@pytest.mark.parametrize("lost", [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED])
def test_a_creation_left_without_an_answer_is_asked_again_under_the_same_request_id(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], lost: grpc.StatusCode) -> None:
    stub = Tournaments(lost)
    assert _run(monkeypatch, stub) == 0
    ids = [r.request_id for r in stub.requests]
    assert len(ids) == 2 and ids[0] and ids[0] == ids[1]
    assert list(stub.tournaments.values()) == ["t0"], "one tournament, not two"
    out = capsys.readouterr().out
    assert "asking again" in out and "tournament t0" in out


def test_every_run_sends_a_request_id_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    stub = Tournaments(None)
    assert _run(monkeypatch, stub) == 0 and _run(monkeypatch, stub) == 0
    first, second = (r.request_id for r in stub.requests)
    assert len(first) >= 16 and first != second


def test_a_request_id_the_caller_gave_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """`make run`'s request, and any caller's own id, go out as they are."""
    stub = Tournaments(grpc.StatusCode.UNAVAILABLE)
    request = pb.CreateTournamentRequest(name="mine", request_id="my-own-request-id-1")
    assert _client(monkeypatch, stub).create(request).tournament_id == "t0"
    assert [r.request_id for r in stub.requests] == ["my-own-request-id-1"] * 2


@pytest.mark.parametrize("answer", [grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED,
                                    grpc.StatusCode.INTERNAL])
def test_an_answer_is_not_asked_again(monkeypatch: pytest.MonkeyPatch, answer: grpc.StatusCode) -> None:
    stub = Tournaments(answer, made=False)
    with pytest.raises(grpc.RpcError) as refused:
        _client(monkeypatch, stub).create(pb.CreateTournamentRequest(name="x"))
    assert refused.value.code() == answer and len(stub.requests) == 1  # type: ignore[attr-defined]


def test_no_answer_twice_is_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    class Away(Tournaments):
        def CreateTournament(self, request: pb.CreateTournamentRequest, **_: object) -> pb.Tournament:
            self.requests.append(request)
            raise Refused(grpc.StatusCode.UNAVAILABLE)

    stub = Away(None)
    with pytest.raises(grpc.RpcError):
        _client(monkeypatch, stub).create(pb.CreateTournamentRequest(name="x"))
    assert len(stub.requests) == 2
