"""Redis clients that follow a failover: the one way our services make a long-lived client.

A failover moves the primary to another node; the Redis URL's host then resolves to (or is
proxied to) the new one, but a pooled connection stays on the node it was opened to, now a
replica, and every write on it is refused READONLY until the process restarts. A client made
here drops its pool's connections at the first READONLY, once: the connections open then are
made again, to wherever the address leads now, before their next command. (The command that
met READONLY is still refused: UNAVAILABLE `store_unavailable`, for its caller to retry.)
"""

from __future__ import annotations

from typing import Any

import redis

from famiglia.grpcutil.errors import store_demoted
from famiglia.telemetry import get_logger

FAILOVER = "famiglia_failover"
"""The connection setting that carries a pool's `Failover` to its connections."""


class Failover:
    """One pool's failovers: how many times it dropped its connections (`drops`). A connection
    notes the count when it is made or disconnected (so when it next connects); one that
    noted an older count was open at a drop and is made again before it sends anything."""

    def __init__(self, pool: redis.ConnectionPool, where: str) -> None:
        self.pool = pool
        self.where = where
        self.drops = 0

    def demoted(self, connection: Any) -> None:
        """`connection` met READONLY: drop the pool's connections, unless they were dropped
        since it connected (a storm of READONLY from the connections open then drops once)."""
        if getattr(connection, "followed", self.drops) != self.drops:
            return
        self.drops += 1  # (two threads at once may both count: two drops, no harm)
        self.pool.disconnect(inuse_connections=False)  # the idle ones now; those in use at their next send
        get_logger().warning("redis_demoted", redis=self.where, drops=self.drops,
                             hint="READONLY: the connections to it are made again")


class _Following:
    """A redis-py connection of a pool that follows a failover (`Failover`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.failover: Failover | None = kwargs.pop(FAILOVER, None)
        self.followed = self.failover.drops if self.failover is not None else 0
        super().__init__(*args, **kwargs)

    def disconnect(self, *args: Any, **kwargs: Any) -> None:
        if self.failover is not None:
            self.followed = self.failover.drops  # it connects next to wherever the address leads then
        super().disconnect(*args, **kwargs)  # type: ignore[misc]

    def stale(self) -> bool:
        """Whether this connection was open when its pool dropped its connections."""
        return self.failover is not None and self.followed != self.failover.drops

    def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
        if self.stale():
            self.disconnect()
        super().send_packed_command(*args, **kwargs)  # type: ignore[misc]

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)  # type: ignore[misc]
        except redis.ResponseError as exc:
            if self.failover is not None and store_demoted(exc):
                self.failover.demoted(self)
            raise


_CLASSES: dict[type, type] = {}


def _following(base: type) -> type:
    """`base` (Connection, SSLConnection, UnixDomainSocketConnection) following a failover."""
    if base not in _CLASSES:
        _CLASSES[base] = type(f"Following{base.__name__}", (_Following, base), {"plain": base})
    return _CLASSES[base]


def plain_connection_class(connection_class: type) -> type:
    """redis-py's own class under a following one (`_following`), to compare pools by."""
    return getattr(connection_class, "plain", connection_class)


def follow_failover(client: redis.Redis) -> redis.Redis:
    """`client`, its pool now following a failover; it must not have connected yet."""
    pool = client.connection_pool
    pool.connection_class = _following(plain_connection_class(pool.connection_class))
    kwargs = pool.connection_kwargs
    where = kwargs.get("path") or f"{kwargs.get('host', '')}:{kwargs.get('port', '')}"
    kwargs[FAILOVER] = Failover(pool, str(where))
    return client


def connect(url: str, **kwargs: Any) -> redis.Redis:
    """`redis.Redis.from_url(url, **kwargs)` following a failover; nothing connects yet."""
    return follow_failover(redis.Redis.from_url(url, **kwargs))


def failover_of(client: Any) -> Failover | None:
    """The `Failover` a client's pool follows, or None (a client not made here)."""
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None) or {}
    found = kwargs.get(FAILOVER)
    return found if isinstance(found, Failover) else None
