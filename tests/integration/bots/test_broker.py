"""The bots' broker transport: kombu's Redis transport with one shared client per
channel — messages still round-trip, and unacked ones are still tracked and acked."""

from __future__ import annotations

import pytest
from kombu import Connection, Queue

from famiglia.localstack.redis_server import RedisServer
from services.bots.entrypoints.broker import TRANSPORT

pytestmark = [pytest.mark.redis, pytest.mark.xdist_group("bots")]


def test_a_channel_reuses_one_client_and_messages_still_round_trip(redis_server: RedisServer) -> None:
    queue = Queue("famiglia.test.broker")
    with Connection(redis_server.url, transport=TRANSPORT) as conn:
        channel = conn.channel()
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
            assert first is second
        producer = conn.Producer(channel)
        for n in range(3):
            producer.publish({"n": n}, routing_key=queue.name, declare=[queue], serializer="json")
        got = []
        for _ in range(3):
            message = queue(channel).get(no_ack=False)
            assert message is not None
            got.append(message.payload["n"])
            assert channel.client.hlen(channel.unacked_key) == 1  # held until acked (acks late)
            message.ack()
        assert sorted(got) == [0, 1, 2]
        assert not channel.client.hlen(channel.unacked_key)  # every ack removed its record
        channel.close()
