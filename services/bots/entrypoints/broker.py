"""The Celery broker transport of the bots: kombu's Redis transport, with one Redis
client object per channel instead of one per command.

kombu's Redis channel builds a fresh `redis.Redis` for every publish, every
unacked-message record and every ack (`Channel._create_client`), and redis-py
fills ~170 response callbacks into each new client. For a bot decision that is
three clients — one in the dispatcher, two in the worker — and about a quarter
of Celery's CPU per task. A `redis.Redis` over a connection pool is safe to
share (each command borrows a pooled connection; pipelines are their own
objects), so the channel keeps one per pool. Nothing else changes: same
messages, same keys, same acks, visibility timeout and restore.

The unacked-message bookkeeping (kombu's QoS: a ZADD and an HSET when a worker
takes a message, a ZREM and an HDEL at its ack) is written on a connection the
channel holds (one per thread), each pair in one write, without MULTI/EXEC: a
redis-py pipeline per pair checked a connection out of the pool and back, with
redis-py's observability hooks on each, and that was a third of a no-op task's
CPU. Nothing is lost by dropping the transaction: a write cut short can leave an
index entry without its record (kombu's restore skips it) or a record without its
index entry after the ack (a leftover, never redelivered); the message itself was
already taken by BRPOP before either, as with the transaction. The keys and the
record are kombu's, so its restore (visibility timeout) works unchanged.

A write's replies are read at the connection's next write, not before the task
starts or after its ack returns: the bytes are in the socket when `bookkeep`
returns, and a worker killed after that still has them delivered (the kernel
sends a closed socket's data), exactly as if it had died one instruction after
reading the replies. An error reply is logged when it is read; a connection found
broken is replaced and its unanswered writes sent again in order (each is
idempotent: the same score, the same record, removals of what may be gone). The
HSET record is the message's own JSON text as BRPOP returned it, not kombu's
re-encoding of the dict it just decoded from that text (the same JSON value).

The consumer's BRPOP is re-armed after every message: kombu rebuilds the key
list and packs the command through redis-py each time; the channel keeps the
packed command for each queue order it has seen (the same bytes).

A failover: the channel's pools follow one (famiglia.redis_clients), and a node demoted
by it is a lost connection to kombu and Celery (`NodeDemoted`, a redis-py ConnectionError),
never a reply error: the BRPOP a demoted node cuts short (`UNBLOCKED ... master -> replica`)
and the READONLY of every write after it reached Celery as a ResponseError, which it calls
unrecoverable: the worker exited and took no task again until it was restarted. Now the
consumer reconnects as after a lost connection, to wherever the address leads then; a publish
is tried again on a new connection (redis-py's retries, then kombu's `ensure`), and the
unacked bookkeeping's refused writes are sent again on a new one, as after a broken one.

Selected with Celery's `broker_transport` (celery_app.celery_config); the URL
stays `redis://...`.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from queue import Empty
from time import monotonic, time
from typing import Any

import redis
from hiredis import pack_command
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import dumps, loads

from famiglia.redis_clients import follow_pool, following_class

Command = tuple[Any, ...]

log = logging.getLogger(__name__)


class QoS(kombu_redis.QoS):
    _keys: tuple[str, str] | None = None  # (the unacked index, the unacked records)

    def append(self, message: Any, delivery_tag: str) -> None:
        """kombu's unacked record (ZADD to the index, HSET of the message), written on the
        channel's own connection (Channel.bookkeep) instead of a pipeline."""
        if self.channel.global_keyprefix:  # kombu prefixes keys in its client: leave it that path
            super().append(message, delivery_tag)
            return
        index, records = self._keys or self._keep_keys()
        delivery = message.delivery_info
        self.channel.bookkeep((
            ("ZADD", index, time(), delivery_tag),
            ("HSET", records, delivery_tag,
             self.channel.unacked_record(message, delivery["exchange"], delivery["routing_key"])),
        ))
        virtual.QoS.append(self, message, delivery_tag)

    def ack(self, delivery_tag: str) -> None:
        """The record's removal (ZREM, HDEL) on the channel's own connection."""
        if self.channel.global_keyprefix:
            super().ack(delivery_tag)
            return
        index, records = self._keys or self._keep_keys()
        self.channel.bookkeep((("ZREM", index, delivery_tag), ("HDEL", records, delivery_tag)))
        virtual.QoS.ack(self, delivery_tag)

    def _keep_keys(self) -> tuple[str, str]:
        """kombu's two keys, read once: each read of its cached properties takes a lock."""
        self._keys = (self.unacked_index_key, self.unacked_key)
        return self._keys

    @contextmanager
    def pipe_or_acquire(self, pipe: Any = None, client: Any = None) -> Iterator[Any]:
        """A plain pipeline where kombu would open a transaction (reject); a pipe
        given by the caller (restore's WATCH transaction) is used as it is."""
        if pipe:
            yield pipe
        else:
            with self.channel.conn_or_acquire(client) as client:
                yield client.pipeline(transaction=False)


class _Held(threading.local):
    """A thread's bookkeeping connection and its writes not yet answered."""

    connection: Any = None
    pool: Any = None
    unread: list[tuple[bytes, int]]  # (packed write, its command count), oldest first

    def __init__(self) -> None:
        self.unread = []


class Channel(kombu_redis.Channel):
    QoS = QoS
    # Each pool's connections follow a failover (`_get_pool`); kombu's consumer subclasses these.
    connection_class = following_class(redis.Connection)
    connection_class_ssl = following_class(redis.SSLConnection)
    _shared_client: Any = None
    _held: _Held | None = None
    _brpops: dict[tuple[Any, ...], bytes] | None = None
    _taken: tuple[Any, str] | None = None  # (the payload BRPOP's reply was decoded to, that reply's text)

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        """kombu's, refused with a connection error once the transport was let go. On a lost
        broker Celery collects the connection (its channel's close fails in the pending
        BRPOP's read, left undone) and then closes it again; that close gives the unacked
        tasks back, and a task that ends meanwhile is acked, each through a new pool, built
        from the connection parameters of a transport that has none left: an AttributeError,
        which Celery takes as unrecoverable (the worker exited at a Redis restart, and no bot
        played again). A connection error is logged and let pass there; the tasks stay in
        kombu's unacked records, given back after the visibility timeout."""
        if self.connection.client is None:
            raise redis.ConnectionError("the broker connection was closed (lost); reconnecting")
        return dict(super()._connparams(asynchronous=asynchronous))

    def _get_pool(self, asynchronous: bool = False) -> Any:
        """kombu's pool, following a failover, a demoted node's replies raised as a lost
        connection (see the module's docstring)."""
        return follow_pool(super()._get_pool(asynchronous=asynchronous), as_connection_error=True)

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:  # the consumer's polling client: kombu already keeps that one
            return super()._create_client(asynchronous=True)
        client = self._shared_client
        if client is None or client.connection_pool is not self.pool:  # a new pool after a reconnect
            client = self._shared_client = super()._create_client()
        return client

    def _brpop_start(self, timeout: Any = None) -> None:
        """kombu's BRPOP for the next message, its packed bytes kept per queue order and timeout."""
        if self.global_keyprefix:
            super()._brpop_start(timeout)
            return
        if timeout is None:
            timeout = self.brpop_timeout
        queues = self._queue_cycle.consume(len(self.active_queues))
        if not queues:
            return
        brpops = self._brpops
        if brpops is None or len(brpops) > 64:  # a handful of orders in practice; never grows unbounded
            brpops = self._brpops = {}
        key = (*queues, timeout)
        packed = brpops.get(key)
        if packed is None:
            keys = [self._q_for_pri(queue, pri) for pri in self.priority_steps for queue in queues]
            packed = brpops[key] = pack_command(("BRPOP", *keys, timeout or 0))
        connection = self.client.connection
        self._in_poll = connection
        self._brpop_sent_at = monotonic()  # type: ignore[assignment]  # kombu declares it None
        connection.send_packed_command([packed])

    def _brpop_read(self, **options: Any) -> bool:
        """kombu's read of BRPOP's reply, keeping the message's text for its unacked record."""
        if self.global_keyprefix:
            return bool(super()._brpop_read(**options))
        try:
            try:
                dest__item = self.client.parse_response(self.client.connection, "BRPOP", **options)
            except self.connection_errors:
                self.client.connection.disconnect()  # the next poll reconnects
                raise
            if not dest__item:
                raise Empty()
            dest, item = dest__item
            dest = bytes_to_str(dest).rsplit(self.sep, 1)[0]
            self._queue_cycle.rotate(dest)
            text = bytes_to_str(item)
            payload = loads(text)
            self._taken = (payload, text)
            try:
                self.connection._deliver(payload, dest)
            finally:
                self._taken = None
            return True
        finally:
            self._in_poll = None  # type: ignore[assignment]  # kombu's own reset
            self._flush_brpop_reauth()

    def unacked_record(self, message: Any, exchange: str, routing_key: str) -> str:
        """kombu's unacked record, `[message, exchange, routing_key]` in JSON, with the
        message as the text it came in when that is at hand (what `loads` made `_raw` from)."""
        taken = self._taken
        if taken is not None and taken[0] is message._raw:
            return f"[{taken[1]}, {json.dumps(exchange)}, {json.dumps(routing_key)}]"
        return str(dumps([message._raw, exchange, routing_key]))

    def bookkeep(self, commands: Sequence[Command]) -> None:
        """Send `commands` in one write on a connection this thread holds; their replies
        are read at this thread's next write (see the module's docstring).

        What a redis-py pipeline would send, without its per-call work: a connection
        checked out of the pool and back (with redis-py's observability hooks on
        each), the command stack, the retry wrapper and the response callbacks. The
        connection is per thread (a `threads` pool acks from its own threads). A
        connection found broken is dropped and the unanswered writes, this one last,
        sent again once on a new one."""
        held = self._held
        if held is None:
            held = self._held = _Held()
        held.unread.append((b"".join(map(pack_command, commands)), len(commands)))
        self._flush(held, keep=1, send_last=True)

    def settle(self, timeout: float = 5.0) -> None:
        """Read the replies of every write this thread sent (at close, and in tests),
        redoing them on a new connection if the held one broke; one still silent after
        `timeout` seconds is given up (logged)."""
        held = self._held
        if held is None or not held.unread:
            return
        try:
            self._flush(held, keep=0, send_last=False, timeout=timeout)
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            log.warning("unacked bookkeeping not confirmed: %s", exc)

    def close(self) -> None:
        try:
            self.settle()
        except Exception:  # noqa: BLE001 - a channel must still close (a broken connection's parameters...)
            log.warning("unacked bookkeeping not settled at close", exc_info=True)
        super().close()

    def _flush(self, held: _Held, keep: int, send_last: bool, timeout: float | None = None) -> None:
        """Send (the last write, or every unanswered one on a new connection) and read the
        replies of all but the last `keep` writes; a broken connection is dropped and the
        whole thing tried once more on a new one, which gets every unanswered write (the
        old one's replies are lost with it)."""
        for attempt in (1, 2):
            connection = held.connection
            fresh = connection is None or held.pool is not self.pool
            if fresh:  # first use, after a broken one, or a new pool after a reconnect
                connection = self._hold_new_connection(held)
            try:
                if fresh:
                    connection.send_packed_command([packed for packed, _ in held.unread], check_health=False)
                elif send_last:
                    connection.send_packed_command([held.unread[-1][0]], check_health=False)
                if timeout is not None and len(held.unread) > keep and not connection.can_read(timeout=timeout):
                    raise redis.TimeoutError("no reply to the unacked bookkeeping")
                self._read_answered(held, connection, keep)
                return
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                self._drop_held_connection(held)
                if attempt == 2:
                    held.unread.clear()  # nothing is in step any more: start afresh next time
                    raise

    def _read_answered(self, held: _Held, connection: Any, keep: int) -> None:
        """Read the replies of the writes before the last `keep` (sent a task ago, so
        their answers are in), logging any error reply; a write is done once read."""
        unread = held.unread
        while len(unread) > keep:
            _, count = unread[0]
            for _ in range(count):
                try:
                    connection.read_response()
                except redis.ResponseError as exc:  # one command refused; the stream stays in step
                    log.error("unacked bookkeeping refused by Redis: %s", exc)
            del unread[0]

    def _hold_new_connection(self, held: _Held) -> Any:
        if held.connection is not None:  # the old pool's, after a reconnect
            self._drop_held_connection(held)
        held.connection, held.pool = self.pool.get_connection(), self.pool
        return held.connection

    def _drop_held_connection(self, held: _Held) -> None:
        connection, pool = held.connection, held.pool
        held.connection = held.pool = None
        if connection is not None:
            connection.disconnect()
            pool.release(connection)


class Transport(kombu_redis.Transport):
    Channel = Channel

    def register_with_event_loop(self, connection: Any, loop: Any) -> None:
        """kombu's, but its per-tick callback adds a reader only for a socket the loop
        does not already read with it.

        kombu's `on_poll_start` calls `loop.add_reader` for every socket on every tick
        — once per message — and each is an `epoll_ctl` that fails with EEXIST, raised
        and caught in Python. A socket that was paused, dropped or replaced has left
        `loop.readers` (kombu removes it there), so it is still added again."""
        before = set(loop.on_tick)
        super().register_with_event_loop(connection, loop)
        added = set(loop.on_tick) - before
        if len(added) != 1:  # not kombu's shape as known: leave kombu's callback
            return
        loop.on_tick.discard(added.pop())
        cycle: Any = self.cycle
        readers, add_reader, on_readable = loop.readers, loop.add_reader, self.on_readable

        def on_poll_start() -> None:
            cycle.on_poll_start()
            for fd in cycle.fds:
                if readers.get(fd) != (on_readable, (fd,)):
                    add_reader(fd, on_readable, fd)

        loop.on_tick.add(on_poll_start)


TRANSPORT = f"{__name__}:Transport"
