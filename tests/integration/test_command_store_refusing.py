"""The command service on a real Redis that answers but refuses writes for now: past maxmemory
with nothing to evict (OOM) and a replica (READONLY, the primary failed over away from it). Both
were answered INTERNAL, which clients and bots do not retry; they are UNAVAILABLE
`store_unavailable` now, and the refused write left nothing behind (append.lua is one script,
refused before its first write)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import redis

from famiglia.client import GameClient
from famiglia.config import Settings
from famiglia.engine.registry import default_registry
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil.errors import error_code
from famiglia.grpcutil.server import build_server
from famiglia.localstack.redis_server import RedisServer
from famiglia.v1 import game_service_pb2_grpc as pb_grpc
from services.command.bootstrap import bootstrap
from services.command.entrypoints.grpc_server import GameServicer

pytestmark = pytest.mark.redis

REGISTRY = default_registry()
GS = "famiglia.v1.GameService"


@pytest.fixture()
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test alone: its memory bound is changed."""
    server = RedisServer(data_dir=tmp_path / "redis").start()
    yield server
    server.stop()


def _serve(url: str) -> tuple[grpc.Server, GameClient, grpc.Channel, RedisEventStore]:
    store = RedisEventStore.connect(url)
    app = bootstrap(store=store, settings=Settings(redis_url=url, secret="s"))
    server, port = build_server("127.0.0.1:0", [(pb_grpc.add_GameServiceServicer_to_server, GameServicer(app), GS)],
                                workers=4, call_workers=1)
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    return server, GameClient(channel=channel, timeout=10), channel, store


def _refused(call) -> grpc.RpcError:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as refused:
        call()
    return refused.value


def test_a_command_redis_refuses_past_maxmemory_is_unavailable_and_writes_nothing(own_redis: RedisServer) -> None:
    server, client, channel, store = _serve(own_redis.url)
    admin = redis.Redis.from_url(own_redis.url)
    try:
        game_id = next(iter(REGISTRY))
        match = client.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=11)
        view = client.spectator(match.match_id).view()
        me = client.seat(match.match_id, match.seat_tokens[view.to_act[0].seat])
        command = me.legal_commands().commands[0]
        stream, version = store.keys.match_stream(match.match_id), store.keys.version(match.match_id)
        stored = (admin.xlen(stream), admin.get(version))
        admin.config_set("maxmemory-policy", "noeviction")
        admin.config_set("maxmemory", 1)
        try:
            refused = _refused(lambda: me.submit(command))
            assert refused.code() == grpc.StatusCode.UNAVAILABLE, refused.details()
            assert error_code(refused) == "store_unavailable"
            # (a read in a MULTI is refused too past maxmemory: the test reads outside one)
            assert (admin.xlen(stream), admin.get(version)) == stored
            refused = _refused(lambda: client.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=12))
            assert refused.code() == grpc.StatusCode.UNAVAILABLE and error_code(refused) == "store_unavailable"
        finally:
            admin.config_set("maxmemory", 0)
        assert me.submit(command).version > view.version  # the same command, once Redis has room
    finally:
        server.stop(grace=None)
        channel.close()
        store.close()
        admin.close()


def test_a_command_service_on_a_replica_answers_unavailable_and_writes_nothing(own_redis: RedisServer,
                                                                                tmp_path: Path) -> None:
    """What a replica pointed at a node demoted by a failover sees: READONLY on every write."""
    primary = redis.Redis.from_url(own_redis.url)
    replica = RedisServer(data_dir=tmp_path / "replica",
                          extra_args=("--replicaof", "127.0.0.1", str(own_redis.port))).start()
    server = None
    try:
        store = RedisEventStore.connect(own_redis.url)
        app = bootstrap(store=store, settings=Settings(redis_url=own_redis.url, secret="s"))
        game_id = next(iter(REGISTRY))
        created = app.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=11)
        store.close()
        on_replica = redis.Redis.from_url(replica.url)
        deadline = time.monotonic() + 30
        while on_replica.info("replication").get("master_link_status") != "up" or on_replica.dbsize() < primary.dbsize():
            assert time.monotonic() < deadline, "the replica never caught up"
            time.sleep(0.05)
        keys = sorted(primary.keys())
        server, client, channel, store = _serve(replica.url)
        view = client.spectator(created.match_id).view()
        assert view.version == created.version  # reads are served
        me = client.seat(created.match_id, created.seat_tokens[view.to_act[0].seat])
        refused = _refused(lambda: me.submit(me.legal_commands().commands[0]))
        assert refused.code() == grpc.StatusCode.UNAVAILABLE, refused.details()
        assert error_code(refused) == "store_unavailable"
        refused = _refused(lambda: client.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=12))
        assert refused.code() == grpc.StatusCode.UNAVAILABLE and error_code(refused) == "store_unavailable"
        assert sorted(on_replica.keys()) == keys == sorted(primary.keys())
        on_replica.close()
    finally:
        if server is not None:
            server.stop(grace=None)
            channel.close()
            store.close()
        replica.stop()
        primary.close()
