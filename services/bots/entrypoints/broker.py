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
takes a message, a ZREM and an HDEL at its ack) goes in plain pipelines instead
of MULTI/EXEC transactions: the same commands in one write, two replies fewer to
parse each time. Nothing is lost by it: a pipeline cut short can leave an index
entry without its record (kombu's restore skips it) or a record without its index
entry after the ack (a leftover, never redelivered); the message itself was
already taken by BRPOP before either, as with the transaction.

Selected with Celery's `broker_transport` (celery_app.celery_config); the URL
stays `redis://...`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kombu.transport import redis as kombu_redis


class QoS(kombu_redis.QoS):
    @contextmanager
    def pipe_or_acquire(self, pipe: Any = None, client: Any = None) -> Iterator[Any]:
        """A plain pipeline where kombu would open a transaction (append, ack); a pipe
        given by the caller (restore's WATCH transaction) is used as it is."""
        if pipe:
            yield pipe
        else:
            with self.channel.conn_or_acquire(client) as client:
                yield client.pipeline(transaction=False)


class Channel(kombu_redis.Channel):
    QoS = QoS
    _shared_client: Any = None

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:  # the consumer's polling client: kombu already keeps that one
            return super()._create_client(asynchronous=True)
        client = self._shared_client
        if client is None or client.connection_pool is not self.pool:  # a new pool after a reconnect
            client = self._shared_client = super()._create_client()
        return client


class Transport(kombu_redis.Transport):
    Channel = Channel


TRANSPORT = f"{__name__}:Transport"
