"""A GameService over real gRPC and a real redis-server: in-process, or as its own process; or
every service in this process (`stack`); or what a mobile client meets, the bots and their
Celery worker included (`WalkStack`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
import redis

from famiglia.auth import TokenSigner
from famiglia.config import Settings
from famiglia.engine.registry import default_registry
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.localstack.redis_server import free_port
from famiglia.v1 import game_service_pb2_grpc as game_grpc
from famiglia.v1 import matchmaking_service_pb2_grpc as mm_grpc
from famiglia.v1 import query_service_pb2_grpc as query_grpc
from famiglia.v1 import replay_service_pb2_grpc as replay_grpc
from famiglia.v1 import tournament_service_pb2_grpc as tournament_grpc
from services.command.bootstrap import bootstrap
from services.command.entrypoints.grpc_server import serve

SECRET = "e2e-secret"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def command_address(redis_url: str) -> Iterator[str]:
    settings = Settings(redis_url=redis_url, secret=SECRET)
    store = RedisEventStore.connect(redis_url)
    app = bootstrap(store=store, settings=settings)
    server, port = serve(app, "127.0.0.1:0", workers=16)
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(grace=None)
    store.close()


class Stack(dict[str, grpc.Channel]):
    """`stack`'s channels, service name -> channel, and the projection app beside them
    (`services.projection.app.ProjectionApp`), which no consumer runs: a test projects a match
    when it wants the read models to show it (`projection.unpark(match_id)`)."""

    projection: Any
    addresses: dict[str, str]
    """Service name -> its host:port (for the CLI)."""


@pytest.fixture()
def stack(redis_url: str, tmp_path: Path) -> Iterator[Stack]:
    """Every famiglia gRPC service in this process, on free ports, over one redis-server and a
    SQLite read-model database: service name -> a channel to it (a `Stack`)."""
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
    channels = Stack()
    channels.projection = projection
    channels.addresses = {}
    for name, (server, port) in started:
        server.start()
        channels.addresses[name] = f"127.0.0.1:{port}"
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


@dataclass
class Services:
    """A stub for every public service of the `stack`."""

    game: game_grpc.GameServiceStub
    replay: replay_grpc.ReplayServiceStub
    query: query_grpc.QueryServiceStub
    players: mm_grpc.PlayerServiceStub
    matchmaking: mm_grpc.MatchmakingServiceStub
    tournaments: tournament_grpc.TournamentServiceStub


@pytest.fixture()
def stubs(stack: Stack) -> Services:
    return Services(game_grpc.GameServiceStub(stack["GameService"]),
                    replay_grpc.ReplayServiceStub(stack["ReplayService"]),
                    query_grpc.QueryServiceStub(stack["QueryService"]),
                    mm_grpc.PlayerServiceStub(stack["PlayerService"]),
                    mm_grpc.MatchmakingServiceStub(stack["MatchmakingService"]),
                    tournament_grpc.TournamentServiceStub(stack["TournamentService"]))


@dataclass
class CommandProcess:
    redis_url: str
    port: int
    log: Path
    proc: subprocess.Popen | None = None
    module: str = "services.command"
    """What runs: `python -m <module>` (tests.support.stalling_command: with an engine that stalls)."""
    env: dict[str, str] = field(default_factory=dict)
    """Settings of its own, beside the address, Redis and secret."""

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> CommandProcess:
        env = dict(os.environ)
        env.update({
            "FAMIGLIA_REDIS_URL": self.redis_url,
            "FAMIGLIA_SECRET": SECRET,
            "FAMIGLIA_COMMAND_ADDR": self.address,
            "PYTHONPATH": f"{ROOT / 'libs'}{os.pathsep}{ROOT}",
            "OTEL_SDK_DISABLED": "true",
            **self.env,
        })
        # Logs go to a file: an unread pipe would fill up and block the server.
        logged = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", self.module], env=env, cwd=ROOT,
                                         stdout=subprocess.DEVNULL, stderr=log)
        # A ready-future asks for a connection once: one that meets the subchannel (shared by
        # every channel of this process to the address) in its reconnect backoff after the
        # last process died may wait past the new one's start. Ask again each second. Ready is
        # not enough: `free_port`'s port may have been taken meanwhile by another test's server
        # (the suite runs two workers), which would answer instead of this process, which fails
        # to bind. So this process must also have said it started.
        deadline = time.monotonic() + 30
        while True:
            channel = grpc.insecure_channel(self.address)
            try:
                grpc.channel_ready_future(channel).result(timeout=1)
                if b"command_service_started" in self.log.read_bytes()[logged:]:
                    return self
                if self.proc.poll() is None and time.monotonic() <= deadline:
                    time.sleep(0.05)
                    continue
                raise grpc.FutureTimeoutError()
            except grpc.FutureTimeoutError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.proc.kill()
                    raise RuntimeError(self.log.read_text()[-3000:]) from None
            finally:
                channel.close()

    def kill(self) -> None:
        """A crash, not a shutdown."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


@pytest.fixture()
def command_process(redis_url: str, tmp_path: Path) -> Iterator[CommandProcess]:
    proc = CommandProcess(redis_url, free_port(), tmp_path / "command.log").start()
    yield proc
    proc.kill()


class WalkStack:
    """Every service a mobile client meets: command (a process of its own, so it can be
    restarted), the bots dispatcher in process and a Celery worker process, replay in process."""

    def __init__(self, redis_url: str, tmp: Path) -> None:
        from famiglia.bots.games import playable_registry
        from famiglia.client import GameClient
        from famiglia.replay.client import ReplayClient
        from services.bots.__main__ import start_background
        from services.bots.bootstrap import BotsSettings
        from services.bots.bootstrap import bootstrap as bots_bootstrap
        from services.replay.bootstrap import bootstrap as replay_bootstrap
        from services.replay.entrypoints.grpc_server import serve as serve_replay

        registry = playable_registry()
        self.tmp = tmp
        self.command = CommandProcess(redis_url, free_port(), tmp / "command.log").start()
        settings = Settings(redis_url=redis_url, secret=SECRET, command_addr=self.command.address)
        self.bots = bots_bootstrap(settings=settings, registry=registry,
                                   bots=BotsSettings(pool="threads", concurrency=1, visibility_timeout=6,
                                                     stall_seconds=3, clock_grace_seconds=0.1))
        self.stop = threading.Event()
        self.threads = start_background(self.bots, self.stop, block_ms=100)
        env = dict(os.environ, FAMIGLIA_REDIS_URL=redis_url, FAMIGLIA_COMMAND_ADDR=self.command.address,
                   FAMIGLIA_SECRET=SECRET, FAMIGLIA_BOTS_POOL="threads", FAMIGLIA_BOTS_CONCURRENCY="1",
                   FAMIGLIA_BOTS_VISIBILITY_TIMEOUT="6", FAMIGLIA_VAR_DIR=str(tmp), OTEL_SDK_DISABLED="true",
                   PYTHONPATH=os.pathsep.join([str(ROOT / "libs"), str(ROOT)]))
        with open(tmp / "worker.log", "ab") as log:
            self.worker = subprocess.Popen([sys.executable, "-m", "services.bots.worker"], env=env, cwd=ROOT,
                                           stdout=log, stderr=log, start_new_session=True)
        self.replay_store = RedisEventStore.connect(redis_url)
        replay_app = replay_bootstrap(store=self.replay_store, registry=registry,
                                      settings=Settings(redis_url=redis_url, secret=SECRET), use_archive=False)
        self.replay_server, port = serve_replay(replay_app, "127.0.0.1:0", workers=8)
        self.replay_server.start()
        self.replay = ReplayClient(f"127.0.0.1:{port}")
        self.game = GameClient(self.command.address, timeout=20)

    def restart_command(self) -> None:
        """A crash and a new process on the same address: what a client sees of a redeploy."""
        self.command.kill()
        self.command.start()

    def close(self) -> None:
        os.killpg(self.worker.pid, signal.SIGTERM)
        try:
            self.worker.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.worker.pid, signal.SIGKILL)
            self.worker.wait()
        self.stop.set()
        for t in self.threads:
            t.join(5)
        self.game.close()
        self.replay.close()
        self.replay_server.stop(None)
        self.bots.close()
        self.command.kill()


def wait_until(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def match_and_first_move(client, seed: int):  # type: ignore[no-untyped-def]
    """A new match of the first registered game at its fewest seats, the seat client of the
    first seat asked, and a legal command of that seat: (match, seat client, command)."""
    from famiglia.engine.registry import default_registry

    registry = default_registry()
    game_id = next(iter(registry))
    match = client.create_match(game_id, registry.get(game_id).info.min_players, seed=seed)
    seat = client.spectator(match.match_id).view().to_act[0].seat
    me = client.seat(match.match_id, match.seat_tokens[seat])
    return match, me, me.legal_commands().commands[0]
