"""A service's start-up line does not carry the Redis password of FAMIGLIA_REDIS_URL (it did,
beside the database URL the projection already showed without its password); its drain on
SIGTERM is told by a line at its start and one at its end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from famiglia.localstack.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "hunter2-s3cr3t"


@pytest.mark.parametrize("service", ["command", "replay"])
def test_the_started_line_does_not_log_the_redis_password(tmp_path: Path, service: str) -> None:
    port = free_port()
    log = tmp_path / f"{service}.log"
    env = dict(os.environ,
               PYTHONPATH=f"{ROOT / 'libs'}{os.pathsep}{ROOT}",
               FAMIGLIA_VAR_DIR=str(tmp_path / "var"), FAMIGLIA_SECRET="x",
               # nobody listens there: the services connect lazily and start all the same
               FAMIGLIA_REDIS_URL=f"redis://:{PASSWORD}@127.0.0.1:{free_port()}/0",
               FAMIGLIA_DATABASE_URL="",
               **{f"FAMIGLIA_{service.upper()}_ADDR": f"127.0.0.1:{port}"},
               OTEL_SDK_DISABLED="true")
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", f"services.{service}"], env=env, cwd=ROOT,
                                stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and f"{service}_service_started" not in log.read_text():
            if proc.poll() is not None:  # a crash at start-up is a failure, not a reason to skip
                pytest.fail(f"{service} exited ({proc.returncode}) before it started: {log.read_text()[-1500:]}")
            time.sleep(0.1)
        text = log.read_text()
        assert f"{service}_service_started" in text, text[-1500:]
        assert PASSWORD not in text
        # SIGTERM is a drain (docs/operations.md): its start and end are told, then the process exits 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()[-1500:]
        text = log.read_text()
        assert f"{service}_service_stopping" in text and f"{service}_service_stopped" in text, text[-1500:]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
