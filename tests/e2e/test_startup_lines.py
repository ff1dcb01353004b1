"""A service's start-up line does not carry the Redis password of FAMIGLIA_REDIS_URL (it did,
beside the database URL the projection already showed without its password); its drain on
SIGTERM is told by a line at its start and one at its end."""

from __future__ import annotations

import os
import re
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


SERVICES = ["command", "matchmaking", "replay", "projection", "bots"]
GRPC_CORE = re.compile(r"^[EWI]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\] ")


def _start_env(tmp_path: Path, service: str, address: str) -> dict[str, str]:
    env = dict(os.environ,
               PYTHONPATH=f"{ROOT / 'libs'}{os.pathsep}{ROOT}",
               FAMIGLIA_VAR_DIR=str(tmp_path / "var"), FAMIGLIA_SECRET="x",
               FAMIGLIA_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",  # nobody there: never reached
               FAMIGLIA_DATABASE_URL=f"sqlite:///{tmp_path / 'read.db'}",
               OTEL_SDK_DISABLED="true")
    env.update({f"FAMIGLIA_{other.upper()}_ADDR": "127.0.0.1:0" for other in SERVICES})
    env[f"FAMIGLIA_{service.upper()}_ADDR"] = address
    return env


def _exit_line(tmp_path: Path, service: str, address: str) -> str:
    """The service started with its own address `address`: it must stop at once (exit 1) with one
    line, which is returned."""
    done = subprocess.run([sys.executable, "-m", f"services.{service}"], env=_start_env(tmp_path, service, address),
                          cwd=ROOT, capture_output=True, text=True, timeout=30)
    # gRPC's C core says why it bound nothing on a line of its own, before Python hears of it
    lines = [line for line in (done.stdout + done.stderr).strip().splitlines() if not GRPC_CORE.match(line)]
    assert done.returncode == 1 and len(lines) == 1, (done.returncode, lines[-30:])  # one line, no traceback
    return lines[0]


@pytest.mark.parametrize("service", SERVICES)
@pytest.mark.parametrize("address", ["localhost:abc", "127.0.0.1:99999", "command"])
def test_an_address_that_is_no_host_and_port_stops_the_service_with_a_line_naming_it(
        tmp_path: Path, service: str, address: str) -> None:
    """Under compose or Kubernetes nothing checks FAMIGLIA_<SERVICE>_ADDR before the service binds
    it (`make up` does, for the embedded stack): a typo ended in gRPC's traceback naming neither the
    setting nor what is wrong with it, or (a port past 65535) the service served elsewhere unsaid."""
    line = _exit_line(tmp_path, service, address)
    name = f"FAMIGLIA_{service.upper()}_ADDR"
    assert line.startswith(f"{name}={address!r}") and "HOST:PORT" in line, line


@pytest.mark.parametrize("service", SERVICES)
def test_a_port_another_process_holds_stops_the_service_with_a_line_naming_it(tmp_path: Path, service: str) -> None:
    """A replica started twice on one host, or a port an old process still holds: one line
    naming the setting and the address, not a 20-line RuntimeError."""
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        line = _exit_line(tmp_path, service, f"localhost:{port}")
    name = f"FAMIGLIA_{service.upper()}_ADDR"
    assert line.startswith(f"{name}='localhost:{port}'") and "cannot listen" in line, line


@pytest.mark.parametrize(("service", "name", "value"), [
    ("command", "FAMIGLIA_REDIS_URL", "localhost:6379"),
    ("bots", "FAMIGLIA_REDIS_URL", f"redis://:{PASSWORD}@127.0.0.1:notaport/0"),
    ("projection", "FAMIGLIA_DATABASE_URL", "postgresq://famiglia@db/famiglia"),
    ("replay", "FAMIGLIA_DATABASE_URL", "famiglia.db"),
])
def test_a_url_that_is_none_stops_the_service_with_a_line_naming_it(tmp_path: Path, service: str, name: str,
                                                                     value: str) -> None:
    """redis-py and SQLAlchemy refused them with a traceback naming neither the setting nor its
    value (the projection's 31 lines of `NoSuchModuleError: sqlalchemy.dialects:postgresq`),
    and a password in the URL is not shown."""
    env = _start_env(tmp_path, service, "127.0.0.1:0")
    env[name] = value
    done = subprocess.run([sys.executable, "-m", f"services.{service}"], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=30)
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, (done.returncode, lines[-30:])
    assert lines[0].startswith(f"{name}=") and PASSWORD not in lines[0], lines[0]
