"""Readiness against a real redis-server (and PostgreSQL) that the test stops and restarts.

Every service answered SERVING while its Redis was away, so a readiness probe kept sending
calls to a replica that could only fail them. Health now follows its dependencies' checks
(famiglia.grpcutil.readiness): NOT_SERVING while one is out of reach, SERVING once it is back;
`liveness` stays SERVING, and the checks never touch a call's connection.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import redis
import structlog
from grpc_health.v1 import health_pb2, health_pb2_grpc

from famiglia.client import GameClient
from famiglia.config import Settings
from famiglia.engine.registry import default_registry
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil.readiness import LIVENESS, Readiness, redis_ping, sql_select_one
from famiglia.grpcutil.server import build_server
from famiglia.localstack.redis_server import RedisServer
from famiglia.v1 import game_service_pb2_grpc as pb_grpc
from services.command.bootstrap import bootstrap
from services.command.entrypoints.grpc_server import GameServicer
from tests.support.postgres import PostgresServer, started_postgres

REGISTRY = default_registry()
GS = "famiglia.v1.GameService"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.fixture()
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test alone: it is stopped and started again."""
    server = RedisServer(data_dir=tmp_path / "redis").start()
    yield server
    server.stop()


def _status(channel: grpc.Channel, service: str) -> int:
    return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status


def _until(channel: grpc.Channel, status: int, services: tuple[str, ...] = ("", GS)) -> None:
    """Wait for health to answer `status` for every one of `services` (the checks run apart)."""
    deadline = time.monotonic() + 60
    while any(_status(channel, s) != status for s in services):
        assert time.monotonic() < deadline, f"health never answered {status} for {services}"
        time.sleep(0.05)


def _command_server(url: str, check_every: float) -> tuple[grpc.Server, int, RedisEventStore]:
    """The command service's server as `services.command.serve` builds it, checking `url`'s Redis."""
    store = RedisEventStore.connect(url)
    app = bootstrap(store=store, settings=Settings(redis_url=url, secret="s"))
    server, port = build_server("127.0.0.1:0", [(pb_grpc.add_GameServiceServicer_to_server, GameServicer(app), GS)],
                                workers=4, call_workers=1, dependencies=[redis_ping(url)], check_every=check_every)
    return server, port, store


def _move(client: GameClient, match_id: str, tokens: list[str]) -> int:
    view = client.spectator(match_id).view()
    me = client.seat(match_id, tokens[view.to_act[0].seat])
    return me.submit(me.legal_commands().commands[0]).version


def test_health_is_not_serving_while_redis_is_down_and_serving_once_it_is_back(own_redis: RedisServer) -> None:
    server, port, store = _command_server(own_redis.url, check_every=0.05)
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    client = GameClient(channel=channel, timeout=10)
    try:
        _until(channel, SERVING)
        own_redis.stop()
        _until(channel, NOT_SERVING)
        # The process is alive: liveness keeps answering, and health refuses no call itself
        # (ListGames needs no Redis); only the probe moves the traffic.
        assert _status(channel, LIVENESS) == SERVING
        assert [g.game_id for g in client.list_games()] == list(REGISTRY)
        own_redis.start()  # the same port
        _until(channel, SERVING)
        game_id = next(iter(REGISTRY))
        match = client.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=11)
        assert _move(client, match.match_id, match.seat_tokens) > match.version
    finally:
        server.stop(grace=None)
        channel.close()
        store.close()


def test_a_replica_started_before_its_redis_is_ready_only_once_redis_answers(own_redis: RedisServer) -> None:
    """A pod started while Redis is still coming up gets no calls until it can serve them."""
    own_redis.stop()
    server, port, store = _command_server(own_redis.url, check_every=0.05)
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        assert _status(channel, "") == NOT_SERVING and _status(channel, GS) == NOT_SERVING
        assert _status(channel, LIVENESS) == SERVING
        own_redis.start()
        _until(channel, SERVING)
        assert _status(channel, LIVENESS) == SERVING
    finally:
        server.stop(grace=None)
        channel.close()
        store.close()


def test_calls_and_streams_in_flight_are_untouched_by_the_checks(own_redis: RedisServer) -> None:
    """Checks run every few milliseconds here, many of them during the match: on their own
    connection (the one whose last command is PING), never the store's, so every submit is
    answered and an open StreamEvents follower gets every event once, in order."""
    server, port, store = _command_server(own_redis.url, check_every=0.005)
    server.start()
    client = GameClient(f"127.0.0.1:{port}", timeout=30)
    admin = redis.Redis.from_url(own_redis.url)
    try:
        _until(client.channel, SERVING)
        game_id = next(iter(REGISTRY))
        match = client.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=12)
        seen: list[int] = []
        stream = client.spectator(match.match_id).stream(from_version=0, timeout=120)

        def follow() -> None:
            try:
                for reply in stream:
                    if reply.HasField("event"):
                        seen.append(reply.event.seq)
            except grpc.RpcError:
                pass  # cancelled below, once every event is in

        threading.Thread(target=follow, daemon=True).start()
        pings_before = _pings(admin)
        version = 0
        for _ in range(20):
            version = _move(client, match.match_id, match.seat_tokens)
        assert _pings(admin) - pings_before >= 2, "the checks did not run while the calls did"
        deadline = time.monotonic() + 60
        while not seen or seen[-1] < version:
            assert time.monotonic() < deadline, f"the follower stopped at {seen[-1:]} of {version}"
            time.sleep(0.02)
        stream.cancel()
        everything = [r.event.seq for r in client.spectator(match.match_id).stream(from_version=0, until_now=True)
                      if r.HasField("event")]
        assert seen == everything
        last_commands = [c.get("cmd") for c in admin.client_list()]
        assert last_commands.count("ping") == 1, last_commands  # the checks' one connection
        assert _status(client.channel, GS) == SERVING
    finally:
        server.stop(grace=None)
        client.close()
        admin.close()
        store.close()


def _pings(admin: redis.Redis) -> int:
    return int(admin.info("commandstats").get("cmdstat_ping", {}).get("calls", 0))


def _logged(event: str, captured: list[dict[str, Any]]) -> int:
    return sum(1 for line in captured if line["event"] == event)


def test_each_change_is_one_log_line_not_one_per_check(own_redis: RedisServer) -> None:
    told: list[bool] = []
    readiness = Readiness([redis_ping(own_redis.url)], told.append)
    try:
        with structlog.testing.capture_logs() as captured:
            assert readiness.check() and readiness.check()
            own_redis.stop()
            assert not any([readiness.check(), readiness.check(), readiness.check()])
            own_redis.start()
            assert readiness.check() and readiness.check()
    finally:
        readiness.stop()
    assert told == [True, False, True]
    assert (_logged("dependency_up", captured), _logged("dependency_down", captured)) == (2, 1), captured
    down = next(line for line in captured if line["event"] == "dependency_down")
    assert down["dependency"] == "redis" and down["target"] == own_redis.url and down["error"], down
    assert down["log_level"] == "warning"


@pytest.fixture()
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this test alone: it is halted and resumed."""
    yield from started_postgres()


def test_the_database_check_follows_postgres_going_and_coming_back(own_postgres: PostgresServer) -> None:
    """The projection's QueryService answers from SQL: its readiness is the database's."""
    told: list[bool] = []
    readiness = Readiness([sql_select_one(own_postgres.url())], told.append)
    try:
        assert readiness.check()
        own_postgres.halt()
        assert not readiness.check()
        own_postgres.resume()
        assert readiness.check()
    finally:
        readiness.stop()
    assert told == [True, False, True]


def test_the_database_check_on_sqlite_fails_when_its_file_cannot_be_opened(tmp_path: Path) -> None:
    folder = tmp_path / "var"
    folder.mkdir()
    check: Callable[[], object] = sql_select_one(f"sqlite:///{folder / 'famiglia.db'}").check
    check()
    shutil.rmtree(folder)
    with pytest.raises(Exception, match="unable to open database file"):
        check()
