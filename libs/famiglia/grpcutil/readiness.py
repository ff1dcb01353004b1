"""Readiness: whether this replica can answer its calls now, told through the health service.

A process whose Redis (or database) is out of reach is alive, but every call that needs it can
only fail: its health then answers NOT_SERVING, for the whole server ("") and for each of its
services, so a readiness probe (Kubernetes, a load balancer, a client's health checking) sends
the traffic to another replica until the dependency answers again. The checks run on one
background thread every `CHECK_EVERY_S`, each on a connection of its own with short timeouts
(a PING, a `SELECT 1`): they never wait behind a call, take a call's connection or hold one up.
`LIVENESS` is never flipped by them, so a liveness probe does not restart, in a loop, a process
whose only trouble is a dependency that a restart cannot bring back (nor by a stuck call while
they fail, `server._Health`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from famiglia.telemetry import get_logger

log = get_logger("famiglia.health")

#: The health service name a liveness probe asks: SERVING for as long as the process runs
#: (NOT_SERVING once it stops, and while a call is stuck: `watchdog`), whatever its dependencies say.
LIVENESS = "liveness"

#: Seconds between two rounds of checks, and the longest one check may take (its connection's
#: timeouts): a dependency gone is seen within about both, one back within one round.
CHECK_EVERY_S = 2.0
CHECK_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Dependency:
    """Something the service's calls need: `check` raises when it is out of reach."""

    name: str
    check: Callable[[], object]
    close: Callable[[], None] = field(default=lambda: None)
    target: str = ""
    """Where it is, as a log line may show it (no password)."""


def redis_ping(url: str, *, timeout: float = CHECK_TIMEOUT_S) -> Dependency:
    """Redis answers PING (not while it loads its AOF after a restart: it answers LOADING).

    Its own client (one connection: one thread uses it; its last command in CLIENT LIST is
    `ping`), no retries (redis-py's own would stretch a check over seconds), and no CLIENT
    SETNAME (an ACL that allows the store's commands need not allow it); nothing connects
    until a check."""
    client, target = _check_client(url, timeout)
    return Dependency("redis", client.ping, client.close, target)


def _check_client(url: str, timeout: float) -> tuple[Any, str]:
    """`redis_ping`'s client, and where it connects as a line may show it."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    from famiglia.config import shown_url

    client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout,
                                  retry=Retry(NoBackoff(), 0))
    return client, shown_url(url)


class RedisReplica(Exception):
    """Redis answers, but as a replica: every write is refused READONLY."""


def redis_primary(url: str, *, timeout: float = CHECK_TIMEOUT_S) -> Dependency:
    """Redis answers PING, and as the primary: for a service whose calls write to it.

    After a failover the address may still lead to the demoted node (a name not yet updated, or
    cached), which answers PING but refuses every write READONLY: the calls that write would
    all fail UNAVAILABLE `store_unavailable`, so this replica is not ready, and the line
    (`dependency_down`) says why. The role is HELLO's (no arguments: it switches nothing; no ACL
    refuses it, walked: a user allowed PING alone is answered HELLO, and refused ROLE and INFO
    NOPERM), sent with the PING in one round trip, both O(1), on `redis_ping`'s one connection
    and timeouts. Found a replica, that connection is dropped, so the next check connects to
    wherever the address leads then; found the primary again after a replica, every pool of
    the process that follows a failover (`famiglia.redis_clients.reconnect_all`) drops its
    connections too, so a pool that no call wrote on meanwhile does not refuse the first
    writes once the service is back."""
    client, target = _check_client(url, timeout)
    return Dependency("redis", _PrimaryCheck(client, target), client.close, target)


class _PrimaryCheck:
    """`redis_primary`'s check: PING and HELLO, and whether the last one found a replica."""

    def __init__(self, client: Any, target: str) -> None:
        self.client = client
        self.target = target
        self.replica = False

    def __call__(self) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.ping()
        pipe.execute_command("HELLO")
        pong, hello = pipe.execute(raise_on_error=False)  # a lost connection raises
        if isinstance(pong, Exception):  # LOADING
            raise pong
        # HELLO refused (a proxy that does not know it: Envoy's "unsupported command") or naming no
        # role: the PING decides, as before `redis_primary` (else NOT_SERVING for good behind one).
        role = "" if isinstance(hello, Exception) else _field(hello, "role")
        if role and role not in ("master", "primary"):
            self.replica = True
            self.client.connection_pool.disconnect()  # the next check connects afresh
            raise RedisReplica(f"Redis answers as a {role}: every write is refused READONLY (a failover "
                               "left the address on the demoted node); ready once it leads to the primary")
        if self.replica:
            from famiglia.redis_clients import reconnect_all

            self.replica = False
            log.info("redis_primary_again", target=self.target, pools_reconnected=reconnect_all())


def _field(reply: Any, name: str) -> str:
    """A field of HELLO's reply (a map in RESP3, a flat list in RESP2), as text."""
    pairs = reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2], strict=False)
    for key, value in pairs:
        if (key.decode() if isinstance(key, bytes) else key) == name:
            return value.decode() if isinstance(value, bytes) else str(value)
    return ""


def sql_select_one(url: str, *, timeout: float = CHECK_TIMEOUT_S) -> Dependency:
    """The SQL database answers `SELECT 1` on a new connection (no pool: a pooled connection
    could look alive on a network that is gone, and a round of checks takes no call's)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    from famiglia.readmodels.db import is_sqlite, normalize_url, postgres_timeouts

    url = normalize_url(url)
    # The engines' bounds at `timeout` (the URL's own parameters win: connect arguments would
    # override them); SQLite's timeout is for locks SELECT 1 never takes.
    connect_args: dict[str, Any] = {} if is_sqlite(url) else postgres_timeouts(timeout, url)
    engine = create_engine(url, poolclass=NullPool, connect_args=connect_args)

    def select_one() -> None:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    return Dependency("database", select_one, engine.dispose, engine.url.render_as_string(hide_password=True))


class Readiness:
    """Checks `dependencies` every `every` seconds on a thread of its own and calls
    `on_change(ready)` when the answer changes (the first round always tells it). Each
    dependency's change is one log line (`dependency_down` with the error, `dependency_up`),
    never a line per check."""

    def __init__(self, dependencies: Sequence[Dependency], on_change: Callable[[bool], None], *,
                 every: float = CHECK_EVERY_S) -> None:
        self.dependencies = tuple(dependencies)
        self._on_change = on_change
        self._every = every
        self._up: dict[str, bool] = {}
        self._ready: bool | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def ready(self) -> bool:
        """Whether the last round found every dependency (False before the first)."""
        return bool(self._ready)

    def check(self) -> bool:
        """One round: each dependency checked once, each change logged, `on_change` told."""
        for dependency in self.dependencies:
            try:
                dependency.check()
            except Exception as exc:  # noqa: BLE001 - whatever its client raises, it is out of reach
                if self._up.get(dependency.name) is not False:
                    log.warning("dependency_down", dependency=dependency.name, target=dependency.target,
                                error=f"{type(exc).__name__}: {exc}"[:300])
                self._up[dependency.name] = False
            else:
                if self._up.get(dependency.name) is not True:
                    log.info("dependency_up", dependency=dependency.name, target=dependency.target)
                self._up[dependency.name] = True
        ready = all(self._up.values())
        if ready != self._ready:
            self._ready = ready
            self._on_change(ready)
        return ready

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="readiness", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.check()
            except Exception:  # noqa: BLE001 - a bug here must not end the checks silently
                log.exception("readiness_check_failed")
            self._stop.wait(self._every)

    def stop(self) -> None:
        """End the checks (within the round under way) and close their connections."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=CHECK_TIMEOUT_S * (len(self.dependencies) + 1))
        for dependency in self.dependencies:
            try:
                dependency.close()
            except Exception:  # noqa: BLE001 - closing at shutdown: nothing left to tell
                pass
