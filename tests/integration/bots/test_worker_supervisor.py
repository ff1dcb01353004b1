"""The bots' worker supervisor (`python -m services.bots.worker`, pool `solo`) forks one Celery
worker per core. Killed itself (kill -9, the OOM killer), its workers went on as orphans: `make
status` said bots-worker was not running, `make up` started another supervisor with as many
workers again, and `make down`, which signals the recorded process's group, never stopped the
first ones. (In a container the supervisor is PID 1, whose death ends them all.)"""

from __future__ import annotations

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


def test_the_workers_of_a_killed_supervisor_stop_too(redis_url: str, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'libs'}{os.pathsep}{ROOT}", FAMIGLIA_REDIS_URL=redis_url,
               FAMIGLIA_SECRET="test", FAMIGLIA_VAR_DIR=str(tmp_path / "var"), FAMIGLIA_DATABASE_URL="",
               FAMIGLIA_COMMAND_ADDR="127.0.0.1:1", FAMIGLIA_BOTS_POOL="solo", FAMIGLIA_BOTS_CONCURRENCY="2",
               FAMIGLIA_BOTS_THREADS_PER_WORKER="1", OTEL_SDK_DISABLED="true")
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        supervisor = subprocess.Popen([sys.executable, "-m", "services.bots.worker"], env=env, cwd=ROOT,
                                      stdout=out, stderr=out, start_new_session=True)
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
