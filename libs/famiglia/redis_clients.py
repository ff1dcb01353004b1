"""Redis clients that follow a failover: the one way our services make a long-lived client.

A failover moves the primary to another node; the Redis URL's host then resolves to (or is
proxied to) the new one, but a pooled connection stays on the node it was opened to, now a
replica, and every write on it is refused READONLY until the process restarts. A client made
here drops its pool's connections at the first READONLY, once: the connections open then are
made again, to wherever the address leads now, before their next command. (The command that
met READONLY is still refused: UNAVAILABLE `store_unavailable`, for its caller to retry.) One
watching keys then (a WATCH transaction: kombu's restore) is a lost connection instead, redis-py's
WatchError, for the transaction to be run again: made again silently, its EXEC ran unwatched.

A client of a library that reconnects on a lost connection and takes any other error for its
own fault (kombu's and Celery's, the bots' broker) is told a demoted node as a lost connection
(`NodeDemoted`, `as_connection_error`): a Celery worker exited at the failover's first reply,
"Unrecoverable error", and no task was taken again until someone restarted it.

A script's EVALSHA, its SCRIPT LOAD at NOSCRIPT and its EVALSHA again each take whichever pooled
connection is free: after a failover those may be on two nodes, the new primary (which never had
the script: scripts are not replicated) and the demoted one (where the load succeeds, nothing
answering READONLY to drop them). A NOSCRIPT again right after a load drops the pool's
connections before the script is loaded once more (`load_script`, `loaded_and_run`: redis-py's
scripts, `FollowingScript`, and the event store's append, which sends its own EVALSHA).
"""

from __future__ import annotations

import threading
import types
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import redis
from redis.client import Pipeline
from redis.commands.core import Script
from redis.exceptions import NoScriptError

from famiglia.grpcutil.errors import store_demoted
from famiglia.telemetry import get_logger

FAILOVER = "famiglia_failover"
"""The connection setting that carries a pool's `Failover` to its connections."""


class NodeDemoted(redis.ConnectionError):
    """A reply that says the node a connection reached is no longer the primary, raised as a
    lost connection (`as_connection_error`): the connection is dropped, and the command wrote
    nothing, so a retry on a new one, to wherever the address leads now, is safe."""


class Failover:
    """One pool's failovers: how many times it dropped its connections (`drops`). A connection
    notes the count when it is made or disconnected (so when it next connects); one that
    noted an older count was open at a drop and is made again before it sends anything."""

    def __init__(self, pool: redis.ConnectionPool, where: str, *, as_connection_error: bool = False) -> None:
        self.pool = pool
        self.where = where
        self.drops = 0
        self.as_connection_error = as_connection_error
        """Whether a demoted node's reply is raised as `NodeDemoted` (see the module's docstring)."""
        with _FOLLOWING_LOCK:
            _FOLLOWING.add(self)

    def demoted(self, connection: Any) -> None:
        """`connection` met READONLY: drop the pool's connections, unless they were dropped
        since it connected (a storm of READONLY from the connections open then drops once)."""
        if getattr(connection, "followed", self.drops) != self.drops:
            return
        self.drop()
        get_logger().warning("redis_demoted", redis=self.where, drops=self.drops,
                             hint="READONLY: the connections to it are made again")

    def drop(self) -> None:
        """Every connection of the pool made again before its next command."""
        self.drops += 1  # (two threads at once may both count: two drops, no harm)
        self.pool.disconnect(inuse_connections=False)  # the idle ones now; those in use at their next send

    def refused(self, connection: Any, exc: BaseException) -> BaseException:
        """What to raise for the reply error `exc` read on `connection` (by redis-py, or past it):
        a demoted node's drops the pool's connections and, `as_connection_error`, is raised as
        `NodeDemoted`, `connection` dropped (whatever it had not read yet is stale)."""
        if not store_demoted(exc):  # a READONLY, or a blocked command's UNBLOCKED as its node turned replica
            return exc
        self.demoted(connection)
        if not self.as_connection_error:
            return exc
        connection.disconnect()
        demoted = NodeDemoted(f"{type(exc).__name__}: {exc} (a failover demoted {self.where}: connecting again)")
        demoted.__cause__ = exc
        return demoted


_FOLLOWING: weakref.WeakSet[Failover] = weakref.WeakSet()
"""Every pool of this process that follows a failover (`reconnect_all`)."""
_FOLLOWING_LOCK = threading.Lock()


def reconnect_all() -> int:
    """Drop the connections of every pool of this process that follows a failover, each made
    again before its next command; how many pools. Readiness calls it when the address leads to
    the primary again after a replica (`grpcutil.readiness.redis_primary`): a pool that no call
    wrote on meanwhile would otherwise refuse its first writes READONLY once the service is back."""
    with _FOLLOWING_LOCK:
        pools = list(_FOLLOWING)
    for failover in pools:
        failover.drop()
    return len(pools)


class _Following:
    """A redis-py connection of a pool that follows a failover (`Failover`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.failover: Failover | None = kwargs.pop(FAILOVER, None)
        self.followed = self.failover.drops if self.failover is not None else 0
        self.watching = False
        """Whether a WATCH was sent and no UNWATCH, EXEC or DISCARD since (redis-py's pipeline
        ends a watching transaction with UNWATCH)."""
        super().__init__(*args, **kwargs)

    def disconnect(self, *args: Any, **kwargs: Any) -> None:
        if self.failover is not None:
            self.followed = self.failover.drops  # it connects next to wherever the address leads then
        self.watching = False  # (a closed connection's WATCHes are gone)
        super().disconnect(*args, **kwargs)  # type: ignore[misc]

    def stale(self) -> bool:
        """Whether this connection was open when its pool dropped its connections."""
        return self.failover is not None and self.followed != self.failover.drops

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        name = args[0].upper() if args and isinstance(args[0], (str, bytes)) else ""
        if name in ("UNWATCH", "EXEC", "DISCARD", b"UNWATCH", b"EXEC", b"DISCARD"):
            self.watching = False
        super().send_command(*args, **kwargs)  # type: ignore[misc]
        if name in ("WATCH", b"WATCH"):
            self.watching = True

    def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
        if self.stale():
            watched = self.watching
            self.disconnect()
            if watched:  # made again silently, its transaction would run unwatched: a lost connection
                raise redis.ConnectionError("the connections were dropped (a failover) while this one watched "
                                            "keys: its WATCH is lost; the transaction is to be run again")
        super().send_packed_command(*args, **kwargs)  # type: ignore[misc]

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)  # type: ignore[misc]
        except redis.ResponseError as exc:
            if self.failover is None:
                raise
            raised = self.failover.refused(self, exc)
            if raised is exc:
                raise
            raise raised from exc


_CLASSES: dict[type, type] = {}


def _following(base: type) -> type:
    """`base` (Connection, SSLConnection, UnixDomainSocketConnection) following a failover."""
    if base not in _CLASSES:
        _CLASSES[base] = type(f"Following{base.__name__}", (_Following, base), {"plain": base})
    return _CLASSES[base]


def plain_connection_class(connection_class: type) -> type:
    """redis-py's own class under a following one (`_following`), to compare pools by."""
    return getattr(connection_class, "plain", connection_class)


_Connection = TypeVar("_Connection")


def following_class(connection_class: type[_Connection]) -> type[_Connection]:
    """`connection_class` following a failover, for a library that builds its pools itself
    from a class (kombu); its pool must then carry a `Failover` (`follow_pool`)."""
    if issubclass(connection_class, _Following):
        return connection_class
    return _following(connection_class)


def follow_pool(pool: redis.ConnectionPool, *, as_connection_error: bool = False) -> redis.ConnectionPool:
    """`pool` following a failover; none of its connections may have been made yet. A class
    already following (a subclass of one, as kombu makes for its consumer) is kept."""
    pool.connection_class = following_class(pool.connection_class)
    kwargs = pool.connection_kwargs
    where = kwargs.get("path") or f"{kwargs.get('host', '')}:{kwargs.get('port', '')}"
    kwargs[FAILOVER] = Failover(pool, str(where), as_connection_error=as_connection_error)
    return pool


def follow_failover(client: redis.Redis, *, as_connection_error: bool = False) -> redis.Redis:
    """`client`, its pool now following a failover, its scripts too (`register_script` makes a
    `FollowingScript`); it must not have connected yet."""
    follow_pool(client.connection_pool, as_connection_error=as_connection_error)
    client.register_script = types.MethodType(FollowingScript, client)  # type: ignore[method-assign]
    return client


LOADS = 2
"""How many times one call loads its script at NOSCRIPT: the second time after every connection
of the pool was made again (`load_script`); a NOSCRIPT after that is UNAVAILABLE (`script_lost`)."""


def load_script(client: Any, script: Script, again: bool) -> None:
    """Load `script` through `client` after its EVALSHA met NOSCRIPT; `again`, after it met NOSCRIPT
    once more right after a load: the load went to another node than the EVALSHA (a failover left
    the pool's connections on the demoted node and on the new primary, see the module's
    docstring), so every connection of the pool is made again first, and this load and the next
    EVALSHA both go to wherever the address leads now."""
    if again:
        failover = failover_of(client)
        if failover is not None:
            failover.drop()
            get_logger().warning("redis_script_loaded_elsewhere", redis=failover.where, drops=failover.drops,
                                 hint="NOSCRIPT after SCRIPT LOAD: the connections to it are made again")
    script.sha = client.script_load(script.script)


def script_lost(exc: NoScriptError) -> redis.ConnectionError:
    """What a call raises at NOSCRIPT after `LOADS` loads: the address leads to another node at
    each connection (a failover under way); UNAVAILABLE, for its caller to retry."""
    return redis.ConnectionError(f"the script was loaded {LOADS} times and is still missing ({exc}): "
                                 "a failover under way; connecting again")


_Reply = TypeVar("_Reply")


def loaded_and_run(run: Callable[[], _Reply], load: Callable[[bool], None]) -> _Reply:
    """What a call does once its script's EVALSHA met NOSCRIPT: `load(again)` then `run()` once
    more, `LOADS` times at most, `again` from the second (a NOSCRIPT right after a load:
    `load_script`); a NOSCRIPT after that is `script_lost`. The first EVALSHA stays the caller's,
    so none of this is on its path while the script is there (the event store's append, timed)."""
    for attempt in range(LOADS):
        load(attempt > 0)
        try:
            return run()
        except NoScriptError as exc:
            missing = exc
    raise script_lost(missing) from missing


class FollowingScript(Script):
    """redis-py's Script for a client following a failover: a NOSCRIPT right after the load
    loads it again with the pool's connections made again (`load_script`), rather than raising
    NoScriptError (INTERNAL) while the pool is split between the demoted node and the new primary."""

    def __call__(self, keys: Sequence[Any] | None = None, args: Iterable[Any] | None = None,
                 client: Any = None) -> Any:
        client = self.registered_client if client is None else client
        if isinstance(client, Pipeline):  # loaded (SCRIPT EXISTS) when the pipeline is sent: redis-py's way
            return super().__call__(keys, args, client)
        keys, args = list(keys or ()), list(args or ())
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return loaded_and_run(lambda: client.evalsha(self.sha, len(keys), *keys, *args),
                                  lambda again: load_script(client, self, again))


def connect(url: str, *, as_connection_error: bool = False, **kwargs: Any) -> redis.Redis:
    """`redis.Redis.from_url(url, **kwargs)` following a failover; nothing connects yet."""
    return follow_failover(redis.Redis.from_url(url, **kwargs), as_connection_error=as_connection_error)


def failover_of(client: Any) -> Failover | None:
    """The `Failover` a client's pool follows, or None (a client not made here)."""
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None) or {}
    found = kwargs.get(FAILOVER)
    return found if isinstance(found, Failover) else None
