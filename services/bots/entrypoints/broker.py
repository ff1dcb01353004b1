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

Selected with Celery's `broker_transport` (celery_app.celery_config); the URL
stays `redis://...`.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
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
