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

The consumer's BRPOP is re-armed after every message: kombu rebuilds the key
list and packs the command through redis-py each time; the channel keeps the
packed command for each queue order it has seen (the same bytes).

Selected with Celery's `broker_transport` (celery_app.celery_config); the URL
stays `redis://...`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from time import monotonic, time
from typing import Any

import redis
from hiredis import pack_command
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.json import dumps

Command = tuple[Any, ...]


class QoS(kombu_redis.QoS):
    def append(self, message: Any, delivery_tag: str) -> None:
        """kombu's unacked record (ZADD to the index, HSET of the message), written on the
        channel's own connection (Channel.bookkeep) instead of a pipeline."""
        if self.channel.global_keyprefix:  # kombu prefixes keys in its client: leave it that path
            super().append(message, delivery_tag)
            return
        delivery = message.delivery_info
        self.channel.bookkeep((
            ("ZADD", self.unacked_index_key, time(), delivery_tag),
            ("HSET", self.unacked_key, delivery_tag,
             dumps([message._raw, delivery["exchange"], delivery["routing_key"]])),
        ))
        virtual.QoS.append(self, message, delivery_tag)

    def ack(self, delivery_tag: str) -> None:
        """The record's removal (ZREM, HDEL) on the channel's own connection."""
        if self.channel.global_keyprefix:
            super().ack(delivery_tag)
            return
        self.channel.bookkeep((("ZREM", self.unacked_index_key, delivery_tag),
                               ("HDEL", self.unacked_key, delivery_tag)))
        virtual.QoS.ack(self, delivery_tag)

    @contextmanager
    def pipe_or_acquire(self, pipe: Any = None, client: Any = None) -> Iterator[Any]:
        """A plain pipeline where kombu would open a transaction (reject); a pipe
        given by the caller (restore's WATCH transaction) is used as it is."""
        if pipe:
            yield pipe
        else:
            with self.channel.conn_or_acquire(client) as client:
                yield client.pipeline(transaction=False)


class Channel(kombu_redis.Channel):
    QoS = QoS
    _shared_client: Any = None
    _held: threading.local | None = None
    _brpops: dict[tuple[Any, ...], bytes] | None = None

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

    def bookkeep(self, commands: Sequence[Command]) -> list[Any]:
        """Send `commands` in one write on a connection this thread holds and read their replies.

        What a redis-py pipeline would send, without its per-call work: a connection
        checked out of the pool and back (with redis-py's observability hooks on
        each), the command stack, the retry wrapper and the response callbacks. The
        connection is per thread (a `threads` pool acks from its own threads). A
        broken connection is dropped and the write tried once more on a new one."""
        for attempt in (1, 2):
            connection = self._held_connection()
            try:
                connection.send_packed_command([b"".join(map(pack_command, commands))])
                return [connection.read_response() for _ in commands]
            except (redis.ConnectionError, redis.TimeoutError):
                self._drop_held_connection(connection)
                if attempt == 2:
                    raise
            except redis.ResponseError:  # replies may be left unread: the connection is out of step
                self._drop_held_connection(connection)
                raise
        raise AssertionError("unreachable")

    def _held_connection(self) -> Any:
        held = self._held
        if held is None:
            held = self._held = threading.local()
        pool = self.pool
        connection = getattr(held, "connection", None)
        if connection is None or held.pool is not pool:  # first use, or a new pool after a reconnect
            connection = held.connection = pool.get_connection()
            held.pool = pool
        return connection

    def _drop_held_connection(self, connection: Any) -> None:
        connection.disconnect()
        held = self._held
        if held is not None and getattr(held, "connection", None) is connection:
            held.pool.release(connection)
            held.connection = None


class Transport(kombu_redis.Transport):
    Channel = Channel


TRANSPORT = f"{__name__}:Transport"
