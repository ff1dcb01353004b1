"""The embedded stack must not leave processes behind when it fails to come up."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from famiglia.localstack import stack as stack_mod
from famiglia.localstack.redis_server import RedisServer, find_redis_server, free_port


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _shutdown_redis(port: int) -> None:
    import redis

    if not _listening(port):  # nothing to stop: redis-py would retry a refused connection for seconds
        return
    try:
        redis.Redis(port=port, socket_timeout=2).shutdown(nosave=True)
    except Exception:  # noqa: BLE001 - it closes the connection as it goes
        pass


def test_redis_is_stopped_when_the_first_service_port_is_taken(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """`famiglia up`/`run` with the command port taken: Stack.up raises before it records the
    redis-server it has just started, so `down` (what `run` calls on failure, what `make down`
    calls) cannot find it and the redis-server keeps running, holding its port."""
    pytest.importorskip("redis")
    find_redis_server()
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    redis_port = free_port()
    monkeypatch.setenv("FAMIGLIA_COMMAND_ADDR", f"127.0.0.1:{busy.getsockname()[1]}")
    stack = stack_mod.Stack(var=tmp_path / "var", redis_port=redis_port)
    try:
        with pytest.raises(SystemExit, match="taken"):
            stack.up(log=lambda *_: None)
        stack.down(log=lambda *_: None)
        deadline = time.monotonic() + 30  # a loaded machine may take a while to end the process
        while _listening(redis_port) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _listening(redis_port), "redis-server left running after a failed `up` + `down`"
    finally:
        busy.close()
        _shutdown_redis(redis_port)


def test_a_redis_server_that_does_not_answer_in_time_is_not_left_running(tmp_path: Path) -> None:
    """RedisServer.start gives up after `timeout` (a big AOF still loading answers -LOADING)
    and raises, but leaves the child process running with nobody holding its pid."""
    fake = tmp_path / "slow-redis"
    fake.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    fake.chmod(0o755)
    server = RedisServer(data_dir=tmp_path / "data", port=free_port(), binary=str(fake))
    with pytest.raises(RuntimeError, match="did not answer"):
        server.start(timeout=0.5)
    proc = server.process
    try:
        assert proc is None or proc.poll() is not None, "the redis-server child outlived the failed start"
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


def test_down_does_not_signal_a_process_that_merely_reuses_a_recorded_pid(tmp_path: Path) -> None:
    """var/stack.json outlives the processes it names (a reboot, a crash, kill -9): `_alive`
    only asks whether *some* process has that pid, so `status`/`run` count an unrelated
    process as the stack's service and `down` SIGTERMs it (killpg fails, then os.kill)."""
    import subprocess

    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stack = stack_mod.Stack(var=tmp_path / "var", redis_port=1)
        stack.var.mkdir()
        stack._save({"command": stranger.pid})
        stack.down(log=lambda *_: None)
        time.sleep(0.2)
        assert stranger.poll() is None, "`famiglia down` killed a process that is not the stack's"
    finally:
        stranger.kill()
        stranger.wait()


def test_a_service_whose_port_lingers_in_time_wait_is_started_again_not_given_up(tmp_path: Path) -> None:
    """A client that took a service's port as its own ephemeral one (Linux's range holds 50051-
    50055) and closed first leaves it in TIME_WAIT for a minute, and no server can bind it then:
    the stack starts that service again until it can (before, `make up`/`run` stopped there).
    Any other exit is the service's own failure, reported as before."""
    from famiglia.localstack.redis_server import free_port
    from famiglia.localstack.stack import _lingering

    port = free_port()
    log = tmp_path / "svc.log"
    for said, expected in ((f"Error in bind for address '[::ffff:127.0.0.1]:{port}': Address already in use", True),
                           ("ModuleNotFoundError: No module named 'x'", False)):
        log.write_text("an earlier start's lines: Address already in use :1\n")
        since = log.stat().st_size
        with open(log, "ab") as out:
            proc = subprocess.Popen([sys.executable, "-c", f"import sys; print({said!r}); sys.exit(1)"],
                                    stdout=out, stderr=out)
        assert _lingering(port, proc, log, since, time.monotonic() + 60) is expected
        assert not _lingering(port, proc, log, since, time.monotonic() - 1)  # no time left: given up


def test_up_killed_while_it_records_a_pid_leaves_the_stack_state_readable(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`famiglia up` records every pid in var/stack.json as it starts each process; killed while
    it writes the file (Ctrl-C twice, kill -9, the machine going down), the file must still name
    what was recorded before. Written in place, it is left truncated: `down` and `status` then
    fail on the JSON and the redis-server and services already running are nobody's to stop."""
    stack = stack_mod.Stack(var=tmp_path / "var", redis_port=1)
    stack.var.mkdir()
    stack._save({"redis": 101, "command": 102})

    class Killed(BaseException):
        pass

    def half_then_killed(self: Path, data: str, *args, **kwargs) -> int:  # type: ignore[no-untyped-def]
        with open(self, "w") as f:
            f.write(data[: len(data) // 2])
        raise Killed

    with monkeypatch.context() as patched:
        patched.setattr(Path, "write_text", half_then_killed)
        with pytest.raises(Killed):
            stack._save({"redis": 101, "command": 102, "projection": 103})
    assert stack.read_state()["pids"] == {"redis": 101, "command": 102}


@pytest.mark.parametrize("binary", ["/nowhere/redis-server", "/etc/hostname", "/bin/false"])
def test_a_redis_server_that_cannot_start_stops_up_with_a_line_not_a_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, binary: str) -> None:
    """FAMIGLIA_REDIS_SERVER naming no file, a file that is not a program, or one that exits at
    once: `make up`/`run` ended in a FileNotFoundError / PermissionError / RuntimeError traceback,
    the last one quoting the lines an *earlier* redis-server left in var/redis/redis.log (its
    "Ready to accept connections" and "bye bye") as if they were why this one failed."""
    if not binary.startswith("/nowhere") and not os.path.exists(binary):
        pytest.skip(f"{binary} is not on this machine")
    monkeypatch.setenv("FAMIGLIA_REDIS_SERVER", binary)
    stack = stack_mod.Stack(var=tmp_path / "var", redis_port=free_port())
    (stack.var / "redis").mkdir(parents=True)
    (stack.var / "redis" / "redis.log").write_text("1:M an earlier run * Ready to accept connections\n")
    with pytest.raises(SystemExit) as stopped:
        stack.up(log=lambda *_: None)
    message = str(stopped.value.code)
    assert "redis-server" in message and "earlier run" not in message, message
    assert stack.running() == {}


@pytest.mark.parametrize("addr", ["localhost:5005x", "localhost", "localhost:0", "localhost:70000"])
def test_a_service_address_that_names_no_port_stops_up_before_anything_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, addr: str) -> None:
    """A typo in FAMIGLIA_BOTS_ADDR: `make up`/`run` started redis-server, then died in a bare
    `int()` ValueError traceback (and `make status` / `make down` did too, reading the same
    variable), where FAMIGLIA_REDIS_PORT's typo is one line naming it."""
    pytest.importorskip("redis")
    find_redis_server()
    for service in ("command", "matchmaking", "replay", "projection"):  # never the default ports
        monkeypatch.setenv(f"FAMIGLIA_{service.upper()}_ADDR", f"localhost:{free_port()}")
    monkeypatch.setenv("FAMIGLIA_BOTS_ADDR", addr)
    redis_port = free_port()
    stack = stack_mod.Stack(var=tmp_path / "var", redis_port=redis_port)
    try:
        with pytest.raises(SystemExit, match="FAMIGLIA_BOTS_ADDR"):
            stack.up(log=lambda *_: None)
        assert not _listening(redis_port), "redis-server started for a stack that cannot come up"
    finally:
        monkeypatch.delenv("FAMIGLIA_BOTS_ADDR")
        stack.down(log=lambda *_: None)
        if _listening(redis_port):
            _shutdown_redis(redis_port)


def test_up_waits_for_the_service_to_say_it_started_not_for_its_port_to_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another program took the command service's port after `up` looked at it: the port answers,
    but the service exits failing to bind it. `up` said `command up` all the same (and `run` went
    on to a tournament nobody served)."""
    pytest.importorskip("redis")
    find_redis_server()
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    looked: list[int] = []

    def port_busy(p: int) -> bool:  # free when `up` looks, taken just after
        looked.append(p)
        return _listening(p) and looked.count(p) > 1

    fails = (sys.executable, "-c", "import time; time.sleep(1); raise SystemExit('Address already in use')")
    monkeypatch.delenv("FAMIGLIA_LOG_LEVEL", raising=False)  # info: the start line is written
    monkeypatch.setattr(stack_mod, "_port_busy", port_busy)
    monkeypatch.setattr(stack_mod, "default_services", lambda: [stack_mod.ServiceSpec("command", fails, port)])
    redis_port = free_port()
    stack = stack_mod.Stack(var=tmp_path / "var", redis_port=redis_port)
    try:
        with pytest.raises(SystemExit, match="command exited"):
            stack.up(log=lambda *_: None)
    finally:
        stack.down(log=lambda *_: None)
        busy.close()
        _shutdown_redis(redis_port)


def test_up_knows_a_service_started_when_its_log_level_hides_the_start_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """FAMIGLIA_LOG_LEVEL=warning (an operator keeping the logs short): the services never write
    their info line `<service>_service_started`, which `up` waited for, so `make up` and `make run`
    stopped after 30 s a service, `did not start`, that served all along."""
    pytest.importorskip("redis")
    find_redis_server()
    port = free_port()
    monkeypatch.setenv("FAMIGLIA_LOG_LEVEL", "warning")
    monkeypatch.setenv("FAMIGLIA_COMMAND_ADDR", f"127.0.0.1:{port}")
    monkeypatch.setattr(stack_mod, "default_services",
                        lambda: [stack_mod.ServiceSpec("command", (sys.executable, "-m", "services.command"), port)])
    redis_port = free_port()
    stack = stack_mod.Stack(var=tmp_path / "var", redis_port=redis_port)
    said: list[str] = []
    try:
        stack.up(log=said.append)
        assert _listening(port) and "command" in stack.running(), said
    finally:
        stack.down(log=lambda *_: None)
        _shutdown_redis(redis_port)
