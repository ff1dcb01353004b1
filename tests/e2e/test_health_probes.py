"""What the deployments' probes ask each service process (`python -m services.<name>`), against
a real redis-server that the test stops and starts again.

Every service answered SERVING to its readiness probe while its Redis was out of reach, so
Kubernetes kept sending calls to replicas that could only fail them, and a liveness probe on
the same answer would have restarted them in a loop had it followed Redis. Readiness (health's
"" and each service's name) follows what the service's calls need; `liveness` does not.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from famiglia.grpcutil.readiness import LIVENESS
from famiglia.localstack.redis_server import RedisServer, free_port
from tests.support.processes import started_line

ROOT = Path(__file__).resolve().parents[2]
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICES = {
    "command": "famiglia.v1.GameService",
    "matchmaking": "famiglia.v1.MatchmakingService",
    "replay": "famiglia.v1.ReplayService",
    "bots": "famiglia.v1.TournamentService",
    "projection": "famiglia.v1.QueryService",
}


class Process:
    """One service process, its log in a file (an unread pipe would fill up and block it)."""

    def __init__(self, service: str, redis_url: str, database_url: str, tmp_path: Path) -> None:
        self.log = tmp_path / f"{service}.log"
        env = dict(os.environ,
                   PYTHONPATH=f"{ROOT / 'libs'}{os.pathsep}{ROOT}",
                   FAMIGLIA_VAR_DIR=str(tmp_path / "var"), FAMIGLIA_SECRET="x",
                   FAMIGLIA_REDIS_URL=redis_url, FAMIGLIA_DATABASE_URL=database_url,
                   OTEL_SDK_DISABLED="true", OTEL_METRICS_EXPORTER="none",
                   FAMIGLIA_LOG_LEVEL="info")  # its start line is an info line (a shell's own level aside)
        env["FAMIGLIA_COMMAND_ADDR"] = f"127.0.0.1:{free_port()}"  # matchmaking's and bots': nobody there
        env[f"FAMIGLIA_{service.upper()}_ADDR"] = "127.0.0.1:0"  # the kernel's pick, named by its start line
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", f"services.{service}"], env=env, cwd=ROOT,
                                         stdout=out, stderr=out)
        try:
            self.port = int(started_line(self.log, f"{service}_service_started", self.proc)["port"])  # type: ignore[call-overload]
        except RuntimeError as exc:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(str(exc))
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.health = health_pb2_grpc.HealthStub(self.channel)

    def status(self, name: str) -> int:
        return self.health.Check(health_pb2.HealthCheckRequest(service=name), timeout=10).status

    def until(self, status: int, names: tuple[str, ...]) -> None:
        deadline = time.monotonic() + 90
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"the service exited ({self.proc.returncode}): {self.log.read_text()[-2000:]}")
            try:
                if all(self.status(n) == status for n in names):
                    return
            except grpc.RpcError:
                pass  # not listening yet
            assert time.monotonic() < deadline, f"never {status} for {names}: {self.log.read_text()[-2000:]}"
            time.sleep(0.1)

    def lines(self, event: str) -> list[dict[str, object]]:
        out = []
        for line in self.log.read_text().splitlines():
            if line.startswith("{"):
                record = json.loads(line)
                if record.get("event") == event:
                    out.append(record)
        return out

    def stop(self) -> None:
        self.channel.close()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture()
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(data_dir=tmp_path / "redis").start()
    yield server
    server.stop()


@pytest.mark.parametrize("service", ["command", "matchmaking", "replay", "bots"])
def test_readiness_follows_redis_and_liveness_does_not(service: str, own_redis: RedisServer, tmp_path: Path) -> None:
    process = Process(service, own_redis.url, "", tmp_path)
    ready = ("", SERVICES[service])
    try:
        process.until(SERVING, (*ready, LIVENESS))
        own_redis.stop()
        process.until(NOT_SERVING, ready)
        assert process.status(LIVENESS) == SERVING
        own_redis.start()  # on the same port
        process.until(SERVING, ready)
        assert process.status(LIVENESS) == SERVING
    finally:
        process.stop()
    # One line when Redis went and one when it came back, however many checks it was away for.
    down = process.lines("dependency_down")
    assert [line["dependency"] for line in down] == ["redis"], down
    assert [line["dependency"] for line in process.lines("dependency_up")] == ["redis", "redis"]


def test_the_projection_is_ready_while_its_database_answers_whatever_redis_does(
        own_redis: RedisServer, tmp_path: Path) -> None:
    """QueryService answers from the read models alone: a Redis outage only puts them behind,
    so it takes no projection replica out of service; a database out of reach does."""
    folder = tmp_path / "db"
    process = Process("projection", own_redis.url, f"sqlite:///{folder / 'readmodels.db'}", tmp_path)
    ready = ("", SERVICES["projection"])
    try:
        process.until(SERVING, ready)
        own_redis.stop()
        shutil.rmtree(folder)  # a new connection to the database cannot open its file
        process.until(NOT_SERVING, ready)
        assert process.status(LIVENESS) == SERVING
        folder.mkdir()
        process.until(SERVING, ready)  # Redis still away
    finally:
        process.stop()
    assert [line["dependency"] for line in process.lines("dependency_down")] == ["database"]


@pytest.mark.parametrize("service", ["command", "matchmaking", "replay", "bots"])
def test_a_service_started_while_redis_is_away_waits_for_it_not_serving(service: str, own_redis: RedisServer,
                                                                         tmp_path: Path) -> None:
    """A Redis restarting while a replica starts (a node drained, both rescheduled): liveness
    SERVING, readiness NOT_SERVING until Redis answers, then the service works. The bots service
    created its dispatcher's consumer group before anything else and exited on a 54-line
    ConnectionError traceback (a crash loop under Kubernetes, for as long as Redis was away)."""
    own_redis.stop()
    process = Process(service, own_redis.url, "", tmp_path)
    ready = ("", SERVICES[service])
    try:
        process.until(NOT_SERVING, ready)
        assert process.status(LIVENESS) == SERVING
        own_redis.start()  # on the same port
        process.until(SERVING, ready)
        if service == "bots":  # its dispatcher runs once Redis answers
            deadline = time.monotonic() + 60
            while not process.lines("dispatcher_recovered"):
                assert process.proc.poll() is None and time.monotonic() < deadline, process.log.read_text()[-2000:]
                time.sleep(0.1)
    finally:
        process.stop()
    assert process.proc.returncode == 0, process.log.read_text()[-2000:]
