"""`make run` / the CLI stopped from outside: Ctrl-C, `kill`, a closed terminal. The stack a run
started is taken down, and the run ends with one line and a non-zero code, not a traceback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# `famiglia run` on a stand-in stack (its down() leaves a file) and a main job that says it
# started, then plays for a minute: the signal arrives while it plays.
_RUN = textwrap.dedent("""
    import pathlib, sys, time
    from famiglia.cli import main as cli, tournament

    here = pathlib.Path(sys.argv[1])

    class Stack:
        def running(self):
            return {}
        def up(self, *, log=print):
            pass
        def down(self, *, log=print):
            (here / "down").touch()

    def main_job(args, console):
        (here / "playing").touch()
        time.sleep(60)
        return 0

    cli.Stack = Stack
    tournament.run_main_job = main_job
    sys.exit(cli.main(["run"]))
""")


def _default_signals() -> None:
    """The child starts as from a terminal: a test runner started in the background (`make soak &`:
    SIGINT ignored) or under nohup (SIGHUP ignored) passes those on, and the run keeps an ignored
    signal ignored, as it should (`test_a_run_under_nohup_outlives_its_terminal`)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def _env(tmp: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=f"{ROOT / 'libs'}{os.pathsep}{ROOT}", FAMIGLIA_VAR_DIR=str(tmp / "var"),
                FAMIGLIA_SECRET="x", OTEL_SDK_DISABLED="true")


def _playing_run(tmp_path: Path, signals) -> subprocess.Popen:
    """`famiglia run` over a stand-in stack (`_RUN`), started with `signals` set up in the child,
    once its main job is playing."""
    proc = subprocess.Popen([sys.executable, "-c", _RUN, str(tmp_path)], env=_env(tmp_path), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=signals)
    deadline = time.monotonic() + 60
    while not (tmp_path / "playing").exists():
        if proc.poll() is not None or time.monotonic() >= deadline:
            proc.kill()
            out, _ = proc.communicate()
            raise AssertionError(f"the run never started playing:\n{out}")
        time.sleep(0.05)
    return proc


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_run_stopped_from_outside_takes_its_stack_down_without_a_traceback(tmp_path: Path,
                                                                             signum: int) -> None:
    """Ctrl-C printed a KeyboardInterrupt traceback; SIGTERM (`kill`, `timeout make run`, CI) and
    SIGHUP (the terminal closed) ended the run at once, leaving redis-server and every service
    running in the background, and the next `make run` then played on that stack and left it up."""
    proc = _playing_run(tmp_path, _default_signals)
    try:
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (tmp_path / "down").exists(), f"the stack was left running after {signal.Signals(signum).name}"
    assert proc.returncode not in (0, None)
    assert "Traceback" not in out, out[-1500:]


def test_ctrl_c_while_waiting_for_a_service_is_one_line(tmp_path: Path) -> None:
    """`famiglia play` waits up to 15 s for the command service; Ctrl-C meanwhile is an answer.
    The "service" is a bare TCP listener that never speaks gRPC: its first connection says the
    CLI is imported and waiting (a fixed sleep sent the signal during the imports on a loaded
    machine, and cost 4 s everywhere else)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        listener.settimeout(60)
        proc = subprocess.Popen([sys.executable, "-m", "famiglia.cli.main", "play", "grifters", "--address",
                                 f"127.0.0.1:{port}"], env=_env(tmp_path), cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                preexec_fn=_default_signals)
        try:
            conn, _ = listener.accept()  # the client's first try: it is in wait_ready now
            conn.close()
            assert proc.poll() is None
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130, out[-1500:]
    assert "Traceback" not in out, out[-1500:]


def test_a_run_under_nohup_outlives_its_terminal(tmp_path: Path) -> None:
    """`nohup make run &` (or a parent that ignores SIGHUP) means: keep going when the terminal
    closes. The run's SIGHUP handler replaced that SIG_IGN, so the closed terminal stopped the run
    and took its stack down anyway; an ignored SIGHUP (or SIGTERM) stays ignored."""
    def ignore_hup() -> None:
        _default_signals()
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    proc = _playing_run(tmp_path, ignore_hup)
    try:
        proc.send_signal(signal.SIGHUP)
        time.sleep(1.0)  # a handled SIGHUP unwinds within milliseconds
        assert proc.poll() is None, "SIGHUP ignored by the parent (nohup) stopped the run"
        assert not (tmp_path / "down").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_ctrl_c_during_a_projection_rebuild_is_one_line(tmp_path: Path) -> None:
    """`famiglia projection rebuild` runs `python -m services.projection rebuild`, which a Ctrl-C
    (the terminal's, to both) ended with a KeyboardInterrupt traceback, killed by its parent
    halfway through. The "Redis" is a bare TCP listener that never answers: its first connection
    says the rebuild is under way."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        listener.settimeout(60)
        env = dict(_env(tmp_path), FAMIGLIA_REDIS_URL=f"redis://127.0.0.1:{port}/0",
                   FAMIGLIA_DATABASE_URL=f"sqlite:///{tmp_path / 'rm.db'}")
        proc = subprocess.Popen([sys.executable, "-m", "famiglia.cli.main", "projection", "rebuild"], env=env,
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                preexec_fn=_default_signals, start_new_session=True)
        try:
            conn, _ = listener.accept()  # the rebuild reads Redis now, and waits
            assert proc.poll() is None
            os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: to the CLI and its child
            out, _ = proc.communicate(timeout=60)
            conn.close()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert proc.returncode == 130, out[-1500:]
    assert "Traceback" not in out, out[-1500:]
    assert "rebuild interrupted" in out and "interrupted (SIGINT)" in out
