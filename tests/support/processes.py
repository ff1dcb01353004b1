"""A service started as its own process, as a deployment starts it, and known ready only once
it said so. A port picked free beforehand (`free_port`) may be taken by another test's server
before the process binds it (the suite runs two workers): a ready channel would then talk to
that server, and the process, failing to bind, would exit unseen. So the process binds port 0
(the kernel's pick, nobody's) and its start line (`<service>_service_started`) names the port."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def started_line(log: Path, event: str, proc: subprocess.Popen[bytes], *, since: int = 0,
                 timeout: float = 60.0) -> dict[str, object]:
    """The first JSON line `event` that `proc` writes to `log` past byte `since`; RuntimeError with
    the log's end if the process exits first or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        with open(log, "rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace")
        for line in text.splitlines():
            if line.startswith("{") and f'"{event}"' in line:
                record = json.loads(line)
                if record.get("event") == event:
                    return record
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited ({proc.returncode}) before {event}: {text[-3000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{proc.args} did not say {event} in {timeout:.0f} s: {text[-3000:]}")
        time.sleep(0.05)


def start_service(module: str, env: Mapping[str, str], log: Path, *,
                  timeout: float = 60.0) -> tuple[subprocess.Popen[bytes], int]:
    """`python -m <module>` (services.command, services.matchmaking, ...) with `env`, whose own
    address (FAMIGLIA_<SERVICE>_ADDR) binds port 0, its lines appended to `log`; once it said it
    started: the process and the port it listens on. The caller stops it."""
    service = module.split(".")[1]
    env = dict(env)
    env.setdefault("PYTHONPATH", f"{ROOT / 'libs'}{os.pathsep}{ROOT}")
    if env.get("FAMIGLIA_LOG_LEVEL", "").strip().lower() not in ("", "debug", "info"):
        env["FAMIGLIA_LOG_LEVEL"] = "info"  # the start line is an info line (a shell's own level aside)
    since = log.stat().st_size if log.exists() else 0
    with open(log, "ab") as out:  # a file: an unread pipe would fill up and block the service
        proc = subprocess.Popen([sys.executable, "-m", module], env=env, cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=out)
    try:
        line = started_line(log, f"{service}_service_started", proc, since=since, timeout=timeout)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    port = line.get("port")
    assert isinstance(port, int) and port > 0, line
    return proc, port
