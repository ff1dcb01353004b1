"""The SDK's own retries (`GameClient(retries=...)`): a unary call that got no answer is sent
again under the same idempotency key, so it answers once. `SeatClient.submit` without a command
id and `create_match` without a request id made an id no retry could name: the caller never
learnt it, and a retry of its own was another command, another match."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from famiglia.auth.request_ids import guessable
from famiglia.client import GameClient, game_client
from famiglia.v1 import game_service_pb2 as pb


class _NoAnswer(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code


class _Stub:
    """GameService answering each call with the next of `outcomes` (a status raised, or an
    answer), keeping every request it got."""

    def __init__(self, *outcomes: grpc.StatusCode | Any) -> None:
        self.outcomes = list(outcomes)
        self.requests: list[Any] = []

    def __getattr__(self, rpc: str) -> Any:
        def call(request: Any, **kwargs: Any) -> Any:
            self.requests.append(request)
            outcome = self.outcomes.pop(0)
            if isinstance(outcome, grpc.StatusCode):
                raise _NoAnswer(outcome)
            return outcome
        return call


@pytest.fixture(autouse=True)
def _no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(game_client.time, "sleep", lambda _s: None)


def _client(stub: _Stub, retries: int) -> GameClient:
    client = GameClient("localhost:1", retries=retries)
    client.stub = stub  # type: ignore[assignment]
    return client


def test_a_submit_without_an_id_is_sent_again_under_the_id_made_for_it() -> None:
    stub = _Stub(grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE,
                 pb.SubmitCommandResponse(version=7, duplicate=True))
    client = _client(stub, retries=2)
    answer = client.seat("m1", "token").submit(pb.ListGamesRequest())
    assert answer.version == 7 and len(stub.requests) == 3
    ids = {r.command_id for r in stub.requests}
    assert len(ids) == 1 and not guessable(ids.pop())
    stub.outcomes.append(pb.SubmitCommandResponse(version=8))
    client.seat("m1", "token").submit(pb.ListGamesRequest(), command_id="mine")
    assert stub.requests[-1].command_id == "mine"


def test_a_creation_without_a_request_id_is_sent_again_under_the_unguessable_one_made_for_it() -> None:
    stub = _Stub(grpc.StatusCode.UNAVAILABLE, pb.CreateMatchResponse(match_id="m1", seat_tokens=["a", "b"], version=3))
    client = _client(stub, retries=1)
    handle = client.create_match("grifters", 2)
    assert (handle.match_id, handle.seat_tokens) == ("m1", ["a", "b"])
    first, again = stub.requests
    assert first.request_id == again.request_id and not guessable(first.request_id)
    stub.outcomes.append(pb.CreateMatchResponse(match_id="m2"))
    client.create_match("grifters", 2, request_id="my-own-request-id-0001")
    assert stub.requests[-1].request_id == "my-own-request-id-0001"
    stub.outcomes.append(pb.CreateMatchResponse(match_id="m3"))
    client.create_match("grifters", 2)
    assert stub.requests[-1].request_id != first.request_id  # a new creation, a new id


@pytest.mark.parametrize("code", [grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.ABORTED,
                                  grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED])
def test_an_answer_is_never_sent_again(code: grpc.StatusCode) -> None:
    stub = _Stub(code)
    with pytest.raises(grpc.RpcError) as raised:
        _client(stub, retries=3).seat("m1", "token").view()
    assert raised.value.code() is code and len(stub.requests) == 1


def test_no_retry_by_default_and_the_last_failure_is_raised() -> None:
    stub = _Stub(grpc.StatusCode.UNAVAILABLE)
    with pytest.raises(grpc.RpcError):
        _client(stub, retries=0).list_games()
    assert len(stub.requests) == 1
    stub = _Stub(*[grpc.StatusCode.UNAVAILABLE] * 2, grpc.StatusCode.DEADLINE_EXCEEDED)
    with pytest.raises(grpc.RpcError) as raised:
        _client(stub, retries=2).seat("m1", None).legal_commands()
    assert raised.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED and len(stub.requests) == 3
    with pytest.raises(ValueError, match="retries"):
        GameClient("localhost:1", retries=-1)


def test_a_chain_named_by_the_versions_it_goes_in_at_is_sent_again_only_at_a_version() -> None:
    """SubmitCommands fills "{version}" in an id with the version the entry goes in at, the
    match's own when no `expected_version` is given: a chain taken whose answer was lost, sent
    again, named new ids and was refused (the seat had played) or played twice. It is sent once;
    at a version its ids are the same again (answered `duplicate`), and it is retried."""
    chain = [("token", pb.ListGamesRequest(), "bot:m1:{version}:0")]
    stub = _Stub(grpc.StatusCode.UNAVAILABLE, pb.SubmitCommandsResponse())
    with pytest.raises(grpc.RpcError) as raised:
        _client(stub, retries=2).submit_commands("m1", chain)
    assert raised.value.code() is grpc.StatusCode.UNAVAILABLE and len(stub.requests) == 1
    stub = _Stub(grpc.StatusCode.UNAVAILABLE, pb.SubmitCommandsResponse())
    _client(stub, retries=2).submit_commands("m1", chain, expected_version=12)
    assert len(stub.requests) == 2 and stub.requests[0] == stub.requests[1]
    stub = _Stub(grpc.StatusCode.DEADLINE_EXCEEDED, pb.SubmitCommandsResponse())
    _client(stub, retries=2).submit_commands("m1", [("token", pb.ListGamesRequest(), "mine-1")])
    assert len(stub.requests) == 2


def test_chat_calls_are_sent_again_and_a_message_under_the_id_made_for_it() -> None:
    """`send_chat` and `chat` called their stubs bare: `GameClient(retries=...)` never sent them
    again, though every unary call is said to be, and a lost SendChat answer was raised."""
    stub = _Stub(grpc.StatusCode.UNAVAILABLE, pb.SendChatResponse(duplicate=True),
                 grpc.StatusCode.DEADLINE_EXCEEDED, pb.ListChatResponse(messages=[pb.ChatMessage(id="1-0")]))
    seat = _client(stub, retries=1).seat("m1", "token")
    assert seat.send_chat("deal?", to_seats=[2]).duplicate
    first, again = stub.requests
    assert first == again and not guessable(first.message_id)
    assert [m.id for m in seat.chat()] == ["1-0"] and len(stub.requests) == 4


def test_my_turns_is_sent_again_as_every_read_with_the_player_token_as_bearer() -> None:
    stub = _Stub(grpc.StatusCode.UNAVAILABLE, pb.ListMyTurnsResponse(matches=[pb.MyMatch(match_id="m1", to_act=True)]))
    sent: list[Any] = []
    call = stub.__getattr__("ListMyTurns")

    class _Recording:
        def ListMyTurns(self, request: Any, **kwargs: Any) -> Any:  # noqa: N802 - the RPC's name
            sent.append(dict(kwargs["metadata"]))
            return call(request, **kwargs)

    client = _client(stub, retries=1)
    client.stub = _Recording()  # type: ignore[assignment]
    assert [(m.match_id, m.to_act) for m in client.my_turns("player-token", limit=5)] == [("m1", True)]
    assert len(stub.requests) == 2 and all(r.limit == 5 for r in stub.requests)
    assert all(md["authorization"] == "Bearer player-token" for md in sent)


def test_leaving_and_returning_are_sent_again_as_the_idempotent_calls_they_are() -> None:
    """A second LeaveMatch answers the first's `seat_left` (`duplicate`), a second ReturnToMatch
    the match's version: both are retried like every call safe to send again."""
    stub = _Stub(grpc.StatusCode.UNAVAILABLE, pb.LeaveMatchResponse(version=9, duplicate=True),
                 grpc.StatusCode.DEADLINE_EXCEEDED, pb.ReturnToMatchResponse(version=12))
    seat = _client(stub, retries=1).seat("m1", "token")
    assert seat.leave_match().version == 9
    assert seat.return_to_match().version == 12
    assert [type(r).__name__ for r in stub.requests] == ["LeaveMatchRequest"] * 2 + ["ReturnToMatchRequest"] * 2
    assert all(r.match_id == "m1" for r in stub.requests)
