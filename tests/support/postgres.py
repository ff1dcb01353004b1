"""A throwaway PostgreSQL server for integration tests.

Debian's packages put `initdb` and `pg_ctl` under /usr/lib/postgresql/<major>/bin
(not on PATH). PostgreSQL refuses to run as root, so when the tests run as root
the cluster belongs to the `postgres` user and every server command runs through
`runuser -u postgres --`. Tests that need it skip with a reason when no
PostgreSQL is installed; CI installs Debian's `postgresql` package, and with `CI` set
(.ci/run sets it) a missing PostgreSQL fails those tests instead of skipping them.

Use the `postgres_url` fixture (one server per test session, a fresh database
per test) from a conftest: `from tests.support.postgres import postgres_database, postgres_server, postgres_url`.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import pytest


class NoPostgres(RuntimeError):
    """No PostgreSQL server binaries on this machine."""


def find_pg_bin() -> Path:
    """The bin folder holding initdb and pg_ctl: FAMIGLIA_PG_BIN, PATH, or the newest Debian major."""
    env = os.environ.get("FAMIGLIA_PG_BIN")
    if env:
        return Path(env)
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).parent
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0
    )
    for folder in reversed(candidates):
        if (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    raise NoPostgres("no PostgreSQL server installed (initdb/pg_ctl not found; apt-get install -y postgresql)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PostgresServer:
    """One PostgreSQL cluster in a temporary folder, trusted local connections, no password."""

    bindir: Path
    base: Path
    port: int = 0
    user: str = "postgres"
    _as_postgres: list[str] = field(default_factory=list)

    @property
    def datadir(self) -> Path:
        return self.base / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}"

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self._as_postgres, *argv], check=check, capture_output=True, text=True, timeout=120)

    def start(self) -> PostgresServer:
        if os.geteuid() == 0:
            runuser = shutil.which("runuser")
            if runuser is None:
                raise NoPostgres("running as root without `runuser`: cannot start PostgreSQL as postgres")
            self._as_postgres = [runuser, "-u", "postgres", "--"]
            os.chmod(self.base, 0o755)
            shutil.chown(self.base, "postgres", "postgres")
        self.port = self.port or _free_port()
        self._run(str(self.bindir / "initdb"), "-D", str(self.datadir), "-U", self.user, "--auth=trust",
                  "--encoding=UTF8", "--no-sync")
        self.resume()
        return self

    def resume(self) -> None:
        """Start the server on its cluster (after `start` made it, or `halt` stopped it)."""
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.base} -c fsync=off " \
                  "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        result = self._run(str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-l", str(self.base / "log"),
                           "-o", options, "-w", "-t", "60", "start", check=False)
        if result.returncode != 0:
            log = (self.base / "log").read_text() if (self.base / "log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {result.stderr}\n{log[-2000:]}")
        self._wait_ready()

    def halt(self) -> None:
        """Stop the server but keep its cluster, as an outage does (`resume` brings it back)."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "immediate", "-w", "stop")

    def _wait_ready(self, timeout: float = 30.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.url().replace("+psycopg", ""), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url().replace("+psycopg", ""), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def reset_database(self, name: str) -> None:
        """Empty a database in a few milliseconds (CREATE DATABASE takes a second or more)."""
        import psycopg

        with psycopg.connect(self.url(name).replace("+psycopg", ""), autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            conn.execute("DROP SCHEMA public CASCADE")
            conn.execute("CREATE SCHEMA public")

    def stop(self) -> None:
        if self.datadir.exists():
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "immediate", "-w", "stop",
                      check=False)
        shutil.rmtree(self.base, ignore_errors=True)


def _no_postgres(reason: str) -> NoReturn:
    """Skip on a developer's machine; on CI (`CI` set, as .ci/run and CI services set it), which
    installs PostgreSQL, fail: a skip there would pass every [postgres] test without running it."""
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"CI runs the PostgreSQL tests, but: {reason}")
    pytest.skip(reason)


def started_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of its own, stopped after; skipped when PostgreSQL is not installed
    (a failure on CI). The body of every PostgreSQL server fixture."""
    try:
        bindir = find_pg_bin()
    except NoPostgres as exc:
        _no_postgres(str(exc))
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _no_postgres("psycopg (3) is not installed: pip install 'psycopg[binary]'")
    base = Path(tempfile.mkdtemp(prefix="famiglia-pg-"))
    server = PostgresServer(bindir=bindir, base=base)
    try:
        server.start()
    except NoPostgres as exc:
        shutil.rmtree(base, ignore_errors=True)
        _no_postgres(str(exc))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the whole session."""
    yield from started_postgres()


@pytest.fixture(scope="session")
def postgres_database(postgres_server: PostgresServer) -> str:
    """The session's test database (one per test process)."""
    name = "t_" + uuid.uuid4().hex[:12]
    postgres_server.create_database(name)
    return name


@pytest.fixture()
def postgres_url(postgres_server: PostgresServer, postgres_database: str) -> str:
    """The session's database, emptied for each test."""
    postgres_server.reset_database(postgres_database)
    return postgres_server.url(postgres_database)
