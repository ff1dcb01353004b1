"""The bots' worker supervisor (`python -m services.bots.worker`, pool `solo`) forks one Celery
worker per core. Killed itself (kill -9, the OOM killer), its workers went on as orphans: `make
status` said bots-worker was not running, `make up` started another supervisor with as many
workers again, and `make down`, which signals the recorded process's group, never stopped the
first ones. (In a container the supervisor is PID 1, whose death ends them all.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc (Linux)")


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _start_worker(redis_url: str, tmp_path: Path, concurrency: int) -> tuple[subprocess.Popen[bytes], Path]:
    """`python -m services.bots.worker` (pool `solo`, `concurrency` processes), its stdout and
    stderr in one log file, as the embedded stack and a container keep them."""
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'libs'}{os.pathsep}{ROOT}", FAMIGLIA_REDIS_URL=redis_url,
               FAMIGLIA_SECRET="test", FAMIGLIA_VAR_DIR=str(tmp_path / "var"), FAMIGLIA_DATABASE_URL="",
               FAMIGLIA_COMMAND_ADDR="127.0.0.1:1", FAMIGLIA_BOTS_POOL="solo",
               FAMIGLIA_BOTS_CONCURRENCY=str(concurrency), FAMIGLIA_BOTS_THREADS_PER_WORKER="1",
               OTEL_SDK_DISABLED="true", FAMIGLIA_LOG_LEVEL="info")  # Celery says "ready." at info
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        worker = subprocess.Popen([sys.executable, "-m", "services.bots.worker"], env=env, cwd=ROOT,
                                  stdout=out, stderr=out, start_new_session=True)
    return worker, log


def _until_ready(worker: subprocess.Popen[bytes], log: Path) -> None:
    """Until the one Celery worker says "ready." (a minute at most)."""
    deadline = time.monotonic() + 60
    while "ready." not in log.read_text():
        assert worker.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.1)


def test_the_workers_of_a_killed_supervisor_stop_too(redis_url: str, tmp_path: Path) -> None:
    supervisor, log = _start_worker(redis_url, tmp_path, 2)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(workers) < 2 or log.read_text().count("ready.") < 2:  # each Celery worker says so
            assert supervisor.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
            workers = _children(supervisor.pid)
        supervisor.kill()
        supervisor.wait()
        deadline = time.monotonic() + 60  # a worker ends its task at hand first (none here)
        while any(_running(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in workers if _running(pid)], log.read_text()[-3000:]
    finally:
        for pid in workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()


def test_every_line_a_worker_writes_is_a_json_object(redis_url: str, tmp_path: Path) -> None:
    """README, "Logs and traces": one JSON object a line, Celery's lines included. Celery's
    start-up banner (some twenty lines of ASCII art and settings, on stdout) and Python's
    warnings (Celery's SecurityWarning when run as root, over several lines) were not, and a log
    collector parsing the stream as JSON choked on each worker's start."""
    worker, log = _start_worker(redis_url, tmp_path, 1)
    try:
        _until_ready(worker, log)
        worker.terminate()
        assert worker.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    assert lines
    for line in lines:
        assert line.startswith("{") and isinstance(json.loads(line), dict), line


def test_a_killed_worker_leaves_nothing_of_itself_in_redis(redis_url: str, tmp_path: Path) -> None:
    """A worker killed (kill -9, the OOM killer, a pod evicted) runs no shutdown: every Redis key
    or member it wrote for itself alone stays for good. Celery's remote control (nothing of
    famiglia's uses it) bound a `<name>.celery.pidbox` queue per worker process in
    `_kombu.binding.celery.pidbox`, a set that live workers keep alive: one member more for
    every worker ever killed. Fails if a killed worker's name is left in Redis."""
    import redis

    worker, log = _start_worker(redis_url, tmp_path, 1)
    try:
        _until_ready(worker, log)
    finally:
        worker.kill()
        worker.wait()
    name = f"bots-{worker.pid}@".encode()  # worker.argv's name of a one-process worker
    client = redis.Redis.from_url(redis_url)
    try:
        left = [key for key in client.keys("*") if name in key]
        for key in client.keys("_kombu.binding*"):
            if client.type(key) == b"set":
                left += [member for member in client.smembers(key) if name in member]
            elif client.type(key) == b"zset":
                left += [member for member in client.zrange(key, 0, -1) if name in member]
    finally:
        client.close()
    assert not left, left
