"""Every RPC of every service over real gRPC, with requests no well-behaved client sends: each
is refused with a status that has a stable code (never INTERNAL with none), and the services
answer valid calls afterwards."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import redis
from google.protobuf import descriptor_pool, symbol_database
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from famiglia.auth import TokenSigner
from famiglia.config import Settings
from famiglia.engine.registry import default_registry
from famiglia.eventstore.redis_store import RedisEventStore
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

SECRET = "hostile-secret"
SERVICES = ("GameService", "ReplayService", "QueryService", "MatchmakingService", "PlayerService",
            "TournamentService")


@pytest.fixture()
def stack(redis_url: str, tmp_path: Path) -> Iterator[dict[str, grpc.Channel]]:
    """Every famiglia gRPC service in this process, on free ports, over one redis-server and a
    SQLite read-model database: service name -> a channel to it."""
    from services.bots.entrypoints.grpc_server import serve as serve_tournaments
    from services.bots.tournaments import TournamentRepo
    from services.command.bootstrap import bootstrap as command_bootstrap
    from services.command.entrypoints.grpc_server import serve as serve_command
    from services.matchmaking.bootstrap import bootstrap as matchmaking_bootstrap
    from services.matchmaking.entrypoints.grpc_server import serve as serve_matchmaking
    from services.matchmaking.settings import MatchmakingSettings
    from services.projection.bootstrap import bootstrap as projection_bootstrap
    from services.projection.entrypoints.grpc_server import serve as serve_queries
    from services.replay.bootstrap import ReplaySettings
    from services.replay.bootstrap import bootstrap as replay_bootstrap
    from services.replay.entrypoints.grpc_server import serve as serve_replay

    settings = Settings(redis_url=redis_url, secret=SECRET, database_url=f"sqlite:///{tmp_path / 'read.db'}")
    store = RedisEventStore.connect(redis_url)
    projection = projection_bootstrap(store=store, settings=settings)
    matchmaking = matchmaking_bootstrap(settings=settings, mm=MatchmakingSettings())
    client = redis.Redis.from_url(redis_url)
    started = [
        ("GameService", serve_command(command_bootstrap(store=store, settings=settings), "127.0.0.1:0", workers=8)),
        ("ReplayService", serve_replay(replay_bootstrap(store=store, settings=settings,
                                                        replay_settings=ReplaySettings(), use_archive=False),
                                       "127.0.0.1:0", workers=4)),
        ("QueryService", serve_queries(projection.sql, "127.0.0.1:0", workers=4)),
        ("MatchmakingService", serve_matchmaking(matchmaking.app, "127.0.0.1:0", workers=4)),
        ("TournamentService", serve_tournaments(TournamentRepo(client), default_registry(), "127.0.0.1:0",
                                                workers=4, signer=TokenSigner(SECRET))),
    ]
    channels = {}
    for name, (server, port) in started:
        server.start()
        channels[name] = grpc.insecure_channel(f"127.0.0.1:{port}")
    channels["PlayerService"] = channels["MatchmakingService"]
    yield channels
    for channel in set(channels.values()):
        channel.close()
    for _name, (server, _port) in started:
        server.stop(grace=None)
    matchmaking.close()
    projection.sql.dispose()
    client.close()
    store.close()


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
