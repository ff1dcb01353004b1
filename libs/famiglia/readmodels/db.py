"""Database engines for the read models: SQLite (WAL) by default, PostgreSQL by URL.

SQLite: WAL so readers (the QueryService) never block the writer, and every
write transaction starts with BEGIN IMMEDIATE so two projection processes on one
file serialise at the start instead of failing half-way on an upgrade from a
read lock. PostgreSQL: `postgresql+psycopg://` (psycopg 3); plain `postgresql://`
URLs are mapped to it. Nothing connects until the engine is first used. Every PostgreSQL
connection gives up on a server that stops answering within `FAMIGLIA_DATABASE_TIMEOUT_S`
(`postgres_timeouts`): before, a dropped host cost psycopg's 130 s a connect, and the projection
retried it within one round, so its holds did not run and its waiting entries were taken over.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session, create_engine

from famiglia.config import database_timeout_s


def normalize_url(url: str) -> str:
    """`postgres://` and `postgresql://` mean psycopg 3 here (psycopg2 is not a dependency). A URL's
    scheme is case-insensitive (RFC 3986): `POSTGRES://` is the same URL."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower() in ("postgres", "postgresql"):
        return "postgresql+psycopg://" + rest
    return url


def is_sqlite(engine_or_url: Engine | str) -> bool:
    url = engine_or_url.url if isinstance(engine_or_url, Engine) else make_url(normalize_url(engine_or_url))
    return url.get_backend_name() == "sqlite"


_INT_MAX = 2**31 - 1
"""The most libpq reads of an integer parameter."""
_KEEPALIVE_MAX_S = 32767
"""The most Linux takes of TCP_KEEPIDLE and TCP_KEEPINTVL: more fails every connection (setsockopt)."""


def postgres_timeouts(timeout_s: float, url: str = "") -> dict[str, Any]:
    """libpq's bounds on a server that stops answering, `timeout_s` each: the connect
    (`connect_timeout`, 2 s at least, as libpq counts it), data sent and never acknowledged
    (`tcp_user_timeout`: a host whose packets are dropped under an open connection, which a
    connect timeout never sees) and a reply awaited on a silent connection (keepalives). None
    cuts a slow statement short on a server that answers. Parameters `url` sets itself stay its."""
    whole = min(_INT_MAX, max(1, math.ceil(timeout_s)))
    bounds: dict[str, Any] = {"connect_timeout": max(2, whole),
                              "tcp_user_timeout": min(_INT_MAX, math.ceil(timeout_s * 1000)),
                              "keepalives": 1, "keepalives_idle": min(_KEEPALIVE_MAX_S, whole),
                              "keepalives_interval": min(_KEEPALIVE_MAX_S, max(1, math.ceil(timeout_s / 3))),
                              "keepalives_count": 3}
    given = make_url(normalize_url(url)).query if url else {}
    return {key: value for key, value in bounds.items() if key not in given}


def make_engine(url: str, *, echo: bool = False, timeout_s: float | None = None) -> Engine:
    """An engine configured for the projection's transactions (see the module docstring).
    Its errors never quote their statement's parameters: the projection logs them, and the rows
    it writes hold archived events, private ones too, and the players' names. On PostgreSQL a
    silent server is given up on within `timeout_s` (default `FAMIGLIA_DATABASE_TIMEOUT_S`)."""
    url = normalize_url(url)
    if is_sqlite(url):
        database = make_url(url).database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, echo=echo, hide_parameters=True,
                               connect_args={"check_same_thread": False, "timeout": 30})
        _sqlite_transactions(engine)
        return engine
    timeouts = postgres_timeouts(database_timeout_s() if timeout_s is None else timeout_s, url)
    return create_engine(url, echo=echo, hide_parameters=True, pool_pre_ping=True, pool_size=10, max_overflow=20,
                         connect_args=timeouts)


def _sqlite_transactions(engine: Engine) -> None:
    """Let SQLAlchemy, not the sqlite3 module, decide when transactions begin (the documented recipe)."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # no implicit BEGIN from pysqlite
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        mode = connection.get_execution_options().get("sqlite_begin", "IMMEDIATE")
        connection.exec_driver_sql(f"BEGIN {mode}")


def dialect_insert(dialect: str) -> Any:
    """The INSERT of `dialect` that knows ON CONFLICT (upserts); the read models live on SQLite or PostgreSQL."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert
    raise NotImplementedError(f"read models need SQLite or PostgreSQL, not {dialect}")


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """One write transaction: commit on success, roll back on any error."""
    with Session(engine, expire_on_commit=False) as session:
        with session.begin():
            yield session


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """A read-only unit: on SQLite a deferred (shared) transaction, so readers never queue behind the writer."""
    bind = engine.execution_options(sqlite_begin="DEFERRED") if is_sqlite(engine) else engine
    with Session(bind, expire_on_commit=False) as session:
        yield session  # closing ends the transaction and keeps loaded rows readable (detached)
