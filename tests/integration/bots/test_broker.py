"""The bots' broker transport: kombu's Redis transport with one shared client per
channel — messages still round-trip, and unacked ones are still tracked and acked; and
the dispatcher's decision messages, written without send_task, are send_task's."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
import redis
from kombu import Connection, Queue
from kombu.transport import redis as kombu_redis

from famiglia.config import Settings
from famiglia.localstack.redis_server import RedisServer
from services.bots.bootstrap import BotsSettings, bootstrap
from services.bots.entrypoints.broker import TRANSPORT
from services.bots.entrypoints.celery_app import (
    DECIDE,
    DECISIONS_QUEUE,
    TRACE_HEADER,
    CeleryTasks,
    DecisionMessages,
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
            channel.settle()  # the record's replies read: it is in Redis
            assert channel.client.hlen(channel.unacked_key) == 1  # held until acked (acks late)
            message.ack()
        assert sorted(got) == [0, 1, 2]
        channel.settle()
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


def test_the_unacked_record_is_kombus_and_a_dead_workers_message_comes_back(redis_server: RedisServer) -> None:
    """The record written on the channel's own connection is the one kombu's QoS writes,
    so kombu's restore (visibility timeout) finds it and requeues the message."""
    queue = Queue("famiglia.test.restore")
    with Connection(redis_server.url, transport=TRANSPORT) as conn:
        channel = conn.channel()
        conn.Producer(channel).publish({"n": 7}, routing_key=queue.name, declare=[queue], serializer="json")
        message = queue(channel).get(no_ack=False)
        assert message is not None
        tag = message.delivery_tag
        channel.settle()
        client = channel.client
        raw, exchange, routing_key = json.loads(client.hget(channel.unacked_key, tag))
        assert raw == message._raw and (exchange, routing_key) == ("", queue.name)  # type: ignore[attr-defined]
        assert client.zscore(channel.unacked_index_key, tag) is not None
        assert not client.llen(queue.name)
        # The worker dies here: no ack. Another one restores what is past its visibility timeout.
        with Connection(redis_server.url, transport=TRANSPORT,
                        transport_options={"visibility_timeout": 0}) as other:
            survivor = other.channel()
            survivor.qos.restore_visible(num=100)
            again = queue(survivor).get(no_ack=False)
            assert again is not None and again.payload == {"n": 7}
            again.ack()
            assert not survivor.client.hlen(survivor.unacked_key)
            survivor.close()
        channel.close()


def test_the_bookkeeping_holds_a_connection_per_thread_and_survives_a_dropped_one(redis_server: RedisServer) -> None:
    import threading

    queue = Queue("famiglia.test.held")
    with Connection(redis_server.url, transport=TRANSPORT) as conn:
        channel = conn.channel()
        producer = conn.Producer(channel)
        for n in range(4):
            producer.publish({"n": n}, routing_key=queue.name, declare=[queue], serializer="json")
        first = queue(channel).get(no_ack=False)
        held = channel._held.connection
        second = queue(channel).get(no_ack=False)
        assert channel._held.connection is held  # the same connection, no checkout per write
        assert channel.client.hlen(channel.unacked_key) == 2
        acked_in: list[object] = []

        def ack_elsewhere() -> None:  # a `threads` pool acks from its own threads
            second.ack()
            acked_in.append(channel._held.connection)

        thread = threading.Thread(target=ack_elsewhere)
        thread.start()
        thread.join(10)
        assert acked_in and acked_in[0] is not held
        redis.Redis.from_url(redis_server.url).client_kill_filter(_type="normal", skipme=True)  # every connection
        first.ack()  # written into the dropped connection, or at once on a fresh one if that failed
        channel.settle()  # its replies read: the dropped connection found, the write redone on a fresh one
        assert not channel.client.hlen(channel.unacked_key)
        for _ in range(2):
            message = queue(channel).get(no_ack=False)
            assert message is not None
            message.ack()
        channel.settle()
        assert not channel.client.hlen(channel.unacked_key)
        channel.close()


def test_a_rejected_unacked_record_is_removed_in_a_plain_pipeline(redis_server: RedisServer) -> None:
    with Connection(redis_server.url, transport=TRANSPORT) as conn:
        channel = conn.channel()
        with channel.qos.pipe_or_acquire() as pipe:
            assert not pipe.transaction
        with channel.conn_or_acquire() as client, client.pipeline() as given:
            with channel.qos.pipe_or_acquire(given) as pipe:
                assert pipe is given  # restore's own WATCH transaction is kept
        channel.close()


def test_a_batch_is_one_push_in_order_and_a_broken_kept_connection_is_redone(redis_url: str) -> None:
    celery = make_celery(bootstrap(settings=Settings(redis_url=redis_url, secret="test"), bots=BotsSettings()))
    tasks = CeleryTasks(celery)
    client = redis.Redis.from_url(redis_url)
    client.delete(DECISIONS_QUEUE)

    def queued() -> list[int]:  # the versions in the queue, oldest first (LPUSH: newest at the head)
        return [json.loads(base64.b64decode(json.loads(m)["body"]))[0][3]
                for m in reversed(client.lrange(DECISIONS_QUEUE, 0, -1))]

    with tasks.batch():
        for version in (1, 2, 3):
            tasks.decide("m1", "highcard", 1, version, "random")
    assert queued() == [1, 2, 3]
    client.client_kill_filter(_type="normal", skipme=True)  # the kept connection dies between batches
    with tasks.batch():
        tasks.decide("m1", "highcard", 1, 4, "random")
    assert queued() == [1, 2, 3, 4]
    assert tasks._own is None  # the broken one was dropped; the push went through the client


@pytest.mark.parametrize("headers", [{}, {TRACE_HEADER: {"traceparent": "00-ab\"\\é"}}, {"retries": 3, "x": [1, None]}])
@pytest.mark.parametrize("argsrepr", ["('m1', 'highcard', 1, 17, 'random')", "\"q\\\u00e9\u2028\x00"])
def test_a_decision_message_from_its_template_is_the_whole_envelope_dumped(
        redis_url: str, headers: dict[str, object], argsrepr: str) -> None:
    messages = DecisionMessages(make_celery(bootstrap(settings=Settings(redis_url=redis_url, secret="test"),
                                                      bots=BotsSettings())))
    body = json.dumps([["m1"], {"decision": {"view": "", "legal": []}}, DecisionMessages.EMBED]).encode()
    for kwargsrepr in ("{}", "{decision: 3 legal}"):
        fast = messages.render(body, "id-1", "tag-1", argsrepr=argsrepr, kwargsrepr=kwargsrepr, headers=headers)
        assert fast == messages.render_dumped(body, "id-1", "tag-1", argsrepr=argsrepr, kwargsrepr=kwargsrepr,
                                              headers=headers)
        assert json.loads(fast)["headers"]["argsrepr"] == argsrepr


def test_a_consumed_messages_record_is_its_own_text_and_kombus_restore_brings_it_back(
        redis_server: RedisServer) -> None:
    """On the worker's path (BRPOP) the HSET record holds the message's text as it came,
    the same JSON kombu would dump; a dead worker's message is restored from it intact."""
    queue = Queue("famiglia.test.raw")
    client = redis.Redis.from_url(redis_server.url)
    with Connection(redis_server.url, transport=TRANSPORT) as conn:
        channel = conn.channel()
        conn.Producer(channel).publish({"n": 7, "s": "\u00e9\"q\u2028"}, routing_key=queue.name, declare=[queue],
                                       serializer="json", headers={"famiglia_trace": {"a": "b"}})
        (text,) = client.lrange(queue.name, 0, -1)
        assert isinstance(text, bytes)
        taken: list[object] = []
        with conn.Consumer([queue], channel=channel, callbacks=[lambda body, message: taken.append(message)],
                           accept=["json"]):
            conn.drain_events(timeout=5)
        (message,) = taken
        channel.settle()
        record = client.hget(channel.unacked_key, message.delivery_tag)  # type: ignore[attr-defined]
        assert record == b"[" + text + b', "", "' + queue.name.encode() + b'"]'
        assert json.loads(record) == [message._raw, "", queue.name]  # type: ignore[attr-defined]
        assert channel._taken is None  # kept only while the message is delivered
        # The worker dies here, unacked: another one restores it past the visibility timeout.
        with Connection(redis_server.url, transport=TRANSPORT, transport_options={"visibility_timeout": 0}) as other:
            survivor = other.channel()
            survivor.qos.restore_visible(num=100)
            again = queue(survivor).get(no_ack=False)
            assert again is not None and again.payload == {"n": 7, "s": "\u00e9\"q\u2028"}
            assert again.headers["famiglia_trace"] == {"a": "b"}
            again.ack()
            survivor.settle()
            assert not survivor.client.hlen(survivor.unacked_key)
            survivor.close()
        channel.close()


def test_a_refused_bookkeeping_write_is_logged_and_the_connection_stays_in_step(
        redis_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    client = redis.Redis.from_url(redis_server.url)
    client.set("famiglia.test.string", "x")
    with Connection(redis_server.url, transport=TRANSPORT) as conn:
        channel = conn.channel()
        channel.bookkeep((("HSET", "famiglia.test.string", "f", "v"), ("SET", "famiglia.test.a", "1")))
        channel.bookkeep((("SET", "famiglia.test.b", "2"),))  # reads the first write's replies
        assert len(channel._held.unread) == 1  # only the last write's replies are still to come
        assert any("WRONGTYPE" in r.getMessage() for r in caplog.records)
        channel.bookkeep((("INCR", "famiglia.test.a"),))
        channel.settle()
        assert not channel._held.unread
        assert client.mget("famiglia.test.a", "famiglia.test.b") == [b"2", b"2"]
        channel.close()


def test_writes_into_a_dropped_connection_are_redone_in_order_on_a_new_one(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url)
    client.delete("famiglia.test.order")
    with Connection(redis_server.url, transport=TRANSPORT) as conn:
        channel = conn.channel()
        channel.bookkeep((("RPUSH", "famiglia.test.order", "1"),))
        channel.settle()
        dropped = channel._held.connection._sock
        client.client_kill_filter(_type="normal", skipme=True)
        for n in (2, 3, 4):  # the first may go into the dead socket: found at the next write, then redone
            channel.bookkeep((("RPUSH", "famiglia.test.order", str(n)),))
        channel.settle()
        assert channel._held.connection._sock is not dropped  # a new socket (the pool may reuse the object)
        pushed = [int(v) for v in client.lrange("famiglia.test.order", 0, -1)]
        assert sorted(set(pushed)) == [1, 2, 3, 4] and pushed[0] == 1
        assert pushed == sorted(pushed)  # in order; a write may be there twice if it was done before the drop
        channel.close()


def test_the_event_loop_adds_a_reader_once_not_every_tick(redis_server: RedisServer) -> None:
    """kombu's per-tick callback added every socket to the poller at every tick (an
    epoll_ctl failing with EEXIST each time); ours adds each once, and messages flow."""
    from kombu.asynchronous import Hub

    queue = Queue("famiglia.test.loop")
    for transport, most in ((TRANSPORT, 1), (kombu_redis.Transport, None)):
        hub = Hub()
        added: list[int] = []
        register = hub.poller.register

        def counted(fd: int, events: int, register: Any = register, added: list[int] = added) -> Any:
            added.append(fd)
            return register(fd, events)

        hub.poller.register = counted  # type: ignore[method-assign]
        with Connection(redis_server.url, transport=transport) as conn:
            channel = conn.channel()
            got: list[int] = []

            def take(body: Any, message: Any, got: list[int] = got) -> None:
                got.append(body["n"])
                message.ack()

            consumer = conn.Consumer([queue], channel=channel, callbacks=[take], accept=["json"])
            consumer.consume()
            conn.transport.register_with_event_loop(conn.connection, hub)
            producer = conn.Producer(conn.channel())
            for n in range(5):
                producer.publish({"n": n}, routing_key=queue.name, declare=[queue], serializer="json")
            deadline = time.monotonic() + 30
            while len(got) < 5 and time.monotonic() < deadline:
                hub.run_once()
            assert sorted(got) == list(range(5))
            brpop = [fd for fd, (_, kind) in conn.transport.cycle._fd_to_chan.items() if kind == "BRPOP"]
            assert brpop and hub.readers.get(brpop[0]) is not None
            per_fd = [added.count(fd) for fd in brpop]
            if most is not None:
                assert max(per_fd) <= most + 1  # kombu's own _register, then the loop's add at most once
            else:
                assert max(per_fd) >= 5  # kombu's own callback: once a tick (the check can fail)
            consumer.cancel()
            channel.close()
        hub.close()
