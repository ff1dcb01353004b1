"""`make down` (Stack.down): every service is told to stop before any is waited for, and
Redis stops only once they are all gone (they may write to it while they drain)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from famiglia.localstack.stack import Stack

# A stand-in process: on SIGTERM it notes that it was told, waits (up to `patience`
# seconds) until every file in `wait_for` exists, notes which it saw and exits.
_SERVICE = textwrap.dedent("""
    import pathlib, signal, sys, time
    here, name, patience, wait_for = pathlib.Path(sys.argv[2]), sys.argv[3], float(sys.argv[4]), sys.argv[5:]
    def stop(*_):
        (here / f"told-{name}").touch()
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline and not all((here / f"{w}").exists() for w in wait_for):
            time.sleep(0.02)
        seen = [w for w in wait_for if (here / w).exists()]
        (here / f"saw-{name}").write_text(" ".join(seen))
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    (here / f"ready-{name}").touch()
    while True:
        time.sleep(1)
""")


def _start(tmp: Path, name: str, patience: float, *wait_for: str) -> int:
    # Its command line says which of the stack's processes it stands for, as down() checks (a
    # recorded pid may be another program's by now): redis-server's name, or the -m module.
    marker = "services.bots" if name == "bots" else f"services.{name}"
    proc = subprocess.Popen(["redis-server" if name == "redis" else sys.executable, "-c", _SERVICE, marker, str(tmp),
                             name, str(patience), *wait_for], executable=sys.executable, start_new_session=True)
    while not (tmp / f"ready-{name}").exists():
        assert proc.poll() is None, f"{name} exited early"
        time.sleep(0.01)
    return proc.pid


def test_services_stop_together_and_redis_after_them(tmp_path: Path) -> None:
    pids = {
        # each service waits until the other was told: stopped one after the other, the
        # first would wait for a SIGTERM that only comes once it is gone (and be killed)
        "command": _start(tmp_path, "command", 20, "told-bots"),
        "bots": _start(tmp_path, "bots", 20, "told-command"),
        # Redis looks at once whether both services had finished when it was told
        "redis": _start(tmp_path, "redis", 0, "saw-command", "saw-bots"),
    }
    stack = Stack(var=tmp_path / "var", redis_port=1)
    stack.var.mkdir()
    stack._save(pids)
    stopped: list[str] = []

    stack.down(log=stopped.append)

    assert (tmp_path / "saw-command").read_text() == "told-bots"
    assert (tmp_path / "saw-bots").read_text() == "told-command"
    assert (tmp_path / "saw-redis").read_text() == "saw-command saw-bots"
    assert [line.split()[0] for line in stopped] == ["command", "bots", "redis"]
    assert not stack.state_file.exists()


@pytest.mark.parametrize(("name", "value"), [
    ("FAMIGLIA_BOTS_ADDR", "localhost:5005x"),
    ("FAMIGLIA_COMMAND_ADDR", "localhost"),
    ("FAMIGLIA_REDIS_PORT", "63 90"),
])
def test_down_stops_what_up_started_whatever_an_address_setting_says_now(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        name: str, value: str) -> None:
    """A typo in an address made after `up` (or in the shell that runs `down`): `down` read every
    service's address to tell the stack's processes from other programs (`_ours`) and stopped at
    the first bad one, its own line naming it, with nothing stopped; a bad FAMIGLIA_REDIS_PORT
    stopped it before it read var/stack.json. `down` needs no address: it stops what the file
    records, then names the bad setting in one line (`up` refuses it)."""
    from famiglia.cli.main import main

    pids = {"command": _start(tmp_path, "command", 0), "bots": _start(tmp_path, "bots", 0),
            "redis": _start(tmp_path, "redis", 0)}
    monkeypatch.setenv("FAMIGLIA_VAR_DIR", str(tmp_path / "var"))
    stack = Stack(var=tmp_path / "var", redis_port=1)
    stack.var.mkdir()
    stack._save(pids)
    monkeypatch.setenv(name, value)

    try:
        code = main(["down"])
    finally:
        for pid in pids.values():  # whatever `down` left running
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    out = capsys.readouterr().out
    assert all((tmp_path / f"saw-{service}").exists() for service in pids), out
    assert not stack.state_file.exists()
    assert code == 0
    said = [line for line in out.splitlines() if name in line]
    assert len(said) == 1 and repr(value) in said[0], out
