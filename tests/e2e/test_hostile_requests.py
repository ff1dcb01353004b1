"""Every RPC of every service over real gRPC, with requests no well-behaved client sends: each
is refused with a status that has a stable code (never INTERNAL with none), and the services
answer valid calls afterwards."""

from __future__ import annotations

import base64

import grpc
import pytest
from google.protobuf import descriptor_pool, symbol_database
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from famiglia.grpcutil.errors import error_code
from famiglia.v1 import game_service_pb2 as game_pb
from famiglia.v1 import game_service_pb2_grpc as game_grpc
from famiglia.v1 import matchmaking_service_pb2 as mm_pb
from famiglia.v1 import matchmaking_service_pb2_grpc as mm_grpc
from famiglia.v1 import query_service_pb2 as query_pb
from famiglia.v1 import query_service_pb2_grpc as query_grpc
from famiglia.v1 import replay_service_pb2 as replay_pb
from famiglia.v1 import replay_service_pb2_grpc as replay_grpc
from famiglia.v1 import tournament_service_pb2 as tournament_pb
from famiglia.v1 import tournament_service_pb2_grpc as tournament_grpc

SERVICES = ("GameService", "ReplayService", "QueryService", "MatchmakingService", "PlayerService",
            "TournamentService")


def _raw(channel: grpc.Channel, service: str, method: str, streaming: bool):  # type: ignore[no-untyped-def]
    path = f"/famiglia.v1.{service}/{method}"
    kind = channel.unary_stream if streaming else channel.unary_unary
    return kind(path, request_serializer=lambda b: b, response_deserializer=lambda b: b)


#: Bytes no request message parses from: a string field (1) holding bytes that are not UTF-8,
#: a field cut short, a varint that never ends.
UNDECODABLE = (b"\x0a\x02\xff\xfe", b"\x0a\x05ab", b"\x08" + b"\xff" * 11)


def test_a_request_that_does_not_parse_is_invalid_argument_on_every_rpc(stack: dict[str, grpc.Channel]) -> None:
    """gRPC answered these INTERNAL "Exception deserializing request!", with no code: a client
    with a mismatched or broken protobuf library could not tell its own fault from the server's."""
    pool = descriptor_pool.Default()
    checked = 0
    for service in SERVICES:
        for method in pool.FindServiceByName(f"famiglia.v1.{service}").methods:
            request_type = symbol_database.Default().GetSymbol(method.input_type.full_name)
            call = _raw(stack[service], service, method.name, method.server_streaming)
            for data in UNDECODABLE:
                try:
                    request_type.FromString(data)
                    continue  # it parses as this request (a bytes field, no field 1)
                except DecodeError:
                    pass
                with pytest.raises(grpc.RpcError) as exc:
                    reply = call(data, timeout=10)
                    if method.server_streaming:
                        list(reply)
                got = (exc.value.code(), error_code(exc.value))
                assert got == (grpc.StatusCode.INVALID_ARGUMENT, "undecodable_request"), (method.full_name, data)
                assert method.input_type.full_name in exc.value.details()
                checked += 1
    assert checked >= 60
    # and every service still answers
    game = game_grpc.GameServiceStub(stack["GameService"])
    created = game.CreateMatch(game_pb.CreateMatchRequest(game_id="grifters", seats=3))
    assert game.GetView(game_pb.GetViewRequest(match_id=created.match_id)).version == created.version
    assert replay_grpc.ReplayServiceStub(stack["ReplayService"]).ListMatchEvents(
        replay_pb.ListMatchEventsRequest(match_id=created.match_id)).events
    assert not query_grpc.QueryServiceStub(stack["QueryService"]).ListMatches(query_pb.ListMatchesRequest()).matches
    assert mm_grpc.PlayerServiceStub(stack["PlayerService"]).RegisterGuest(
        mm_pb.RegisterGuestRequest(display_name="ann")).player_token
    assert tournament_grpc.TournamentServiceStub(stack["TournamentService"]).ListPolicies(
        tournament_pb.ListPoliciesRequest()).policies


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(created_ms=st.integers(min_value=-2**70, max_value=2**70),
       match_id=st.lists(st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr)),  # lone surrogates too
                         max_size=80).map("".join))
def test_a_crafted_page_token_is_bad_page_token_or_a_page(stack: dict[str, grpc.Channel], created_ms: int,
                                                          match_id: str) -> None:
    """A page token is the client's to send back: whatever JSON position it holds (lone
    surrogates included, which JSON escapes and no database holds), the answer is a page or
    INVALID_ARGUMENT bad_page_token."""
    import json

    token = base64.urlsafe_b64encode(json.dumps([created_ms, match_id]).encode()).decode().rstrip("=")
    stub = query_grpc.QueryServiceStub(stack["QueryService"])
    for call, request in ((stub.ListMatches, query_pb.ListMatchesRequest(page_token=token)),
                          (stub.GetPlayerHistory, query_pb.GetPlayerHistoryRequest(player_id="ann", page_token=token))):
        try:
            call(request, timeout=10)
        except grpc.RpcError as exc:
            assert (exc.code(), error_code(exc)) in {(grpc.StatusCode.INVALID_ARGUMENT, "bad_page_token"),
                                                     (grpc.StatusCode.NOT_FOUND, "unknown_player")}, exc.details()
