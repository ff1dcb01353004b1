"""A real bots stack for integration tests: the command service in-process over
gRPC, the dispatcher in-process, and a real `celery worker` subprocess — all on
the session's redis-server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from famiglia.auth import TokenSigner
from famiglia.bots.games import playable_registry
from famiglia.bots.toy import toy_registry
from famiglia.client import GameClient
from famiglia.config import Settings
from famiglia.engine.registry import Registry
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.localstack.redis_server import RedisServer
from services.bots.__main__ import start_background
from services.bots.bootstrap import BotsApp, BotsSettings
from services.bots.bootstrap import bootstrap as bots_bootstrap
from services.command.bootstrap import bootstrap as command_bootstrap
from services.command.entrypoints.grpc_server import serve

ROOT = Path(__file__).resolve().parents[3]
SECRET = "test"
WORKER = (
    "from famiglia.bots.games import playable_registry\n"
    "from famiglia.bots.toy import toy_registry\n"
    "from services.bots.worker import main\n"
    "main(registry=toy_registry(playable_registry()))\n"
)


class BotsStack:
    def __init__(self, redis_url: str, tmp: Path, clock_grace_seconds: float = 0.1,
                 worker_env: dict[str, str] | None = None) -> None:
        """`worker_env`: settings of the worker process over the defaults below."""
        self.redis_url = redis_url
        self.tmp = tmp
        self.worker_env = worker_env or {}
        self.registry: Registry = toy_registry(playable_registry())
        settings = Settings(redis_url=redis_url, secret=SECRET)
        self.command = command_bootstrap(store=RedisEventStore.connect(redis_url), registry=self.registry,
                                         settings=settings)
        self.server, port = serve(self.command, "127.0.0.1:0", workers=32)
        self.server.start()
        self.command_addr = f"127.0.0.1:{port}"
        self.settings = Settings(redis_url=redis_url, secret=SECRET, command_addr=self.command_addr)
        self.bots: BotsApp = bots_bootstrap(
            settings=self.settings, registry=self.registry,
            bots=BotsSettings(pool="threads", concurrency=2, visibility_timeout=6, stall_seconds=3,
                              clock_grace_seconds=clock_grace_seconds))
        self.stop = threading.Event()
        self.threads = start_background(self.bots, self.stop, block_ms=100)
        self.client = GameClient(self.command_addr)
        self.worker: subprocess.Popen | None = None
        self.start_worker()

    def create_match(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        """GameClient.create_match as an operator: a match naming its seats' players takes one."""
        return self.client.create_match(*args, token=TokenSigner(SECRET).operator_token("tests"), **kwargs)

    def start_worker(self, pool: str = "threads") -> None:
        env = dict(os.environ, FAMIGLIA_REDIS_URL=self.redis_url, FAMIGLIA_COMMAND_ADDR=self.command_addr,
                   FAMIGLIA_SECRET=SECRET, FAMIGLIA_BOTS_POOL=pool, FAMIGLIA_BOTS_CONCURRENCY="2",
                   FAMIGLIA_BOTS_VISIBILITY_TIMEOUT="6", FAMIGLIA_VAR_DIR=str(self.tmp),
                   OTEL_SDK_DISABLED="true", FAMIGLIA_LOG_LEVEL="info",
                   PYTHONPATH=os.pathsep.join([str(ROOT / "libs"), str(ROOT)]))
        env.update(self.worker_env)
        log = open(self.tmp / "worker.log", "ab")
        self.worker = subprocess.Popen([sys.executable, "-c", WORKER], env=env, stdout=log, stderr=log,
                                       cwd=ROOT, start_new_session=True)

    def kill_worker(self) -> None:
        """SIGKILL the whole worker: no chance to requeue or ack anything."""
        assert self.worker is not None
        os.killpg(self.worker.pid, signal.SIGKILL)
        self.worker.wait(10)
        self.worker = None

    def wait_going(self, match_id: str, version: int, timeout: float = 60) -> None:
        """Wait until the worker has played the match on to `version`."""
        deadline = time.monotonic() + timeout
        while self.command.store.version(match_id) < version and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.command.store.version(match_id) >= version, "the worker never got going"

    def wait_finished(self, match_id: str, timeout: float):
        spectator = self.client.spectator(match_id)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            view = spectator.view()
            if view.finished:
                return view
            time.sleep(0.1)
        log = (self.tmp / "worker.log").read_text()[-3000:]
        raise AssertionError(f"{match_id} not finished after {timeout}s (version {view.version})\n{log}")

    def close(self) -> None:
        """Stop everything (again: nothing more to do)."""
        if self.stop.is_set():
            return
        if self.worker is not None:
            os.killpg(self.worker.pid, signal.SIGTERM)
            try:
                self.worker.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.worker.pid, signal.SIGKILL)
        self.stop.set()
        for t in self.threads:
            t.join(5)
        self.client.close()
        self.server.stop(0)
        self.bots.close()


@pytest.fixture(scope="module")
def bots_stack(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BotsStack]:
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    stack = BotsStack(redis_server.url, tmp_path_factory.mktemp("bots"))
    yield stack
    stack.close()
