"""The bots' broker transport: kombu's Redis transport with one shared client per
channel — messages still round-trip, and unacked ones are still tracked and acked; and
the dispatcher's decision messages, written without send_task, are send_task's."""

from __future__ import annotations

import base64
import json

import pytest
import redis
from kombu import Connection, Queue

from famiglia.config import Settings
from famiglia.localstack.redis_server import RedisServer
from services.bots.bootstrap import BotsSettings, bootstrap
from services.bots.entrypoints.broker import TRANSPORT
from services.bots.entrypoints.celery_app import (
    DECIDE,
    DECISIONS_QUEUE,
    TRACE_HEADER,
    CeleryTasks,
    make_celery,
)
from services.bots.payload import DecisionPayload

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


def test_a_decision_message_is_the_one_celery_send_task_writes_but_for_its_ids(redis_url: str) -> None:
    celery = make_celery(bootstrap(settings=Settings(redis_url=redis_url, secret="test"), bots=BotsSettings()))
    payload = DecisionPayload(b"\x08\x01view", (b"\x0a\x01a", b"\x0a\x01b"))
    args = ("m1", "highcard", 1, 17, "heuristic")
    kwargsrepr = "{decision: 2 legal}"
    trace = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    with celery.producer_or_acquire() as producer:  # the general path, as the dispatcher sent before
        celery.send_task(DECIDE, args=args, kwargs={"decision": payload.to_json()}, queue=DECISIONS_QUEUE,
                         headers={TRACE_HEADER: trace}, ignore_result=True, argsrepr=repr(args),
                         kwargsrepr=kwargsrepr, declare=[], producer=producer)
    tasks = CeleryTasks(celery)
    with tasks.batch():
        tasks.decide(*args, trace=trace, payload=payload)
    client = redis.Redis.from_url(redis_url)
    fast, general = (json.loads(m) for m in client.lrange(DECISIONS_QUEUE, 0, -1))  # LPUSH: newest first
    assert base64.b64decode(fast.pop("body")) == base64.b64decode(general.pop("body"))
    for message in (fast, general):
        for key in ("id", "root_id"):
            assert message["headers"].pop(key) == message["properties"]["correlation_id"]
        for key in ("correlation_id", "delivery_tag", "reply_to"):
            message["properties"].pop(key)
    assert fast == general


def test_the_unacked_bookkeeping_is_pipelined_without_a_transaction(redis_server: RedisServer) -> None:
    with Connection(redis_server.url, transport=TRANSPORT) as conn:
        channel = conn.channel()
        with channel.qos.pipe_or_acquire() as pipe:
            assert not pipe.transaction
        with channel.conn_or_acquire() as client, client.pipeline() as given:
            with channel.qos.pipe_or_acquire(given) as pipe:
                assert pipe is given  # restore's own WATCH transaction is kept
        channel.close()
