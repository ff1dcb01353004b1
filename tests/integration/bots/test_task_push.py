"""The dispatcher's decide messages on their way to the broker: held for the next read
when the broker is the event store's own Redis (one round trip, MULTI/EXEC ahead of the
acks), pushed at the batch's end otherwise; the message text is send_task's, written out."""

from __future__ import annotations

import base64
import datetime
import json
import re
import threading
import time
import uuid

import pytest
import redis

from famiglia.bots.toy import toy_registry
from famiglia.config import Settings
from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.v1 import envelope_pb2
from services.bots.bootstrap import BotsSettings, bootstrap
from services.bots.dispatcher import GROUP, Dispatcher
from services.bots.entrypoints.celery_app import (
    CLOCK,
    CLOCKS_QUEUE,
    DECISIONS_QUEUE,
    TRACE_HEADER,
    CeleryTasks,
    DecisionMessages,
    clock_hop,
    make_celery,
    new_uuid,
)
from services.bots.payload import DecisionPayload
from services.command.bootstrap import bootstrap as command_bootstrap

pytestmark = [pytest.mark.redis, pytest.mark.xdist_group("bots")]

UUID4 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def _tasks(broker_url: str) -> CeleryTasks:
    return CeleryTasks(make_celery(bootstrap(settings=Settings(redis_url=broker_url, secret="test"),
                                             bots=BotsSettings())))


def _versions(client: redis.Redis) -> list[int]:
    """The queued decisions' versions, oldest first (LPUSH: newest at the head)."""
    return [json.loads(base64.b64decode(json.loads(m)["body"]))[0][3]
            for m in reversed(client.lrange(DECISIONS_QUEUE, 0, -1))]


def test_the_broker_shares_the_stores_server_only_at_the_same_address_and_database(redis_url: str) -> None:
    tasks = _tasks(redis_url)
    assert tasks.shares_server(redis.Redis.from_url(redis_url, decode_responses=False, socket_timeout=3))
    assert tasks.shares_server(RedisEventStore.connect(redis_url).client)  # its pool follows a failover
    assert not tasks.shares_server(redis.Redis.from_url(redis_url.rsplit("/", 1)[0] + "/1"))
    assert not tasks.shares_server(redis.Redis(host="127.0.0.2", port=1))
    assert not tasks.shares_server(None)


def test_a_held_batch_is_one_packed_lpush_sent_ahead_of_the_acks_or_on_its_own(redis_url: str) -> None:
    tasks = _tasks(redis_url)
    client = redis.Redis.from_url(redis_url)
    with tasks.batch(hold=True):
        for version in (1, 2):
            tasks.decide("m1", "highcard", 1, version, "random")
    with tasks.batch(hold=True):
        tasks.decide("m1", "highcard", 1, 3, "random")
    assert client.llen(DECISIONS_QUEUE) == 0  # held, not sent
    held = tasks.take_batch()
    assert held is not None and tasks.take_batch() is None
    conn = client.connection_pool.get_connection()
    try:
        assert held.commands == (b"".join(conn.pack_command("LPUSH", DECISIONS_QUEUE, *held.messages)),)
    finally:
        client.connection_pool.release(conn)
    store = RedisEventStore.connect(redis_url)
    consumer = PartitionConsumer.for_store(store, "g", "c")
    consumer.ensure_groups(start_id="$")
    assert consumer.read(count=10, before_ack=held.commands) == []
    assert _versions(client) == [1, 2, 3]
    tasks.push_held(held)  # again, on its own (a failed read's redo): queued twice
    assert _versions(client) == [1, 2, 3, 1, 2, 3]


def test_a_decide_message_written_out_is_the_dumped_one_but_for_its_ids(redis_url: str) -> None:
    messages = DecisionMessages(make_celery(bootstrap(settings=Settings(redis_url=redis_url, secret="test"),
                                                      bots=BotsSettings())))
    payloads = [None, DecisionPayload(b"", ()), DecisionPayload(b"\x08\x01v", (b"\x0a\x01a", b"", b"\xff" * 40))]
    for payload in payloads:
        for trace in ({}, {"traceparent": "00-ab\"\\é"}):
            for match_id in ("m1", "q\"\\é\u2028\x00'x"):
                args = (match_id, "highcard", 1, 17, "random")
                headers = {TRACE_HEADER: trace}
                written = messages.decide(*args, payload, messages.headers_text(headers) or "")
                dumped = messages.message(
                    args, {"decision": payload.to_json()} if payload is not None else {}, argsrepr=repr(args),
                    kwargsrepr=f"{{decision: {len(payload.legal)} legal}}" if payload else "{}", headers=headers)
                assert len(UUID4.findall(written)) == 4  # id, root_id, correlation_id, delivery_tag
                assert UUID4.sub("ID", written) == UUID4.sub("ID", dumped)


def test_a_decide_message_of_several_seats_written_out_is_the_dumped_one_but_for_its_ids(redis_url: str) -> None:
    messages = DecisionMessages(make_celery(bootstrap(settings=Settings(redis_url=redis_url, secret="test"),
                                                      bots=BotsSettings())))
    first = DecisionPayload(b"\x08\x01v", (b"\x0a\x01a", b"\xff" * 40))
    then = [(2, "heuristic?samples=1", DecisionPayload(b"\x08\x02w", (b"\x0a\x01b",))),
            (0, "q\"\\é\u2028", DecisionPayload(b"", ()))]
    args = ("m1", "goodcritters", 1, 17, "random")
    headers = {TRACE_HEADER: {"traceparent": "00-ab"}}
    written = messages.decide(*args, first, messages.headers_text(headers) or "", then)
    dumped = messages.message(
        args, {"decision": first.to_json(), "then": [[s, p, d.to_json()] for s, p, d in then]},
        argsrepr=repr(args), kwargsrepr="{decision: 2 legal, then: 2 seats}", headers=headers)
    assert UUID4.sub("ID", written) == UUID4.sub("ID", dumped)


def test_task_ids_are_unique_random_uuid4s() -> None:
    ids = [new_uuid() for _ in range(2000)]  # several pool refills
    assert len(set(ids)) == len(ids)
    for text in ids:
        value = uuid.UUID(text)
        assert str(value) == text and value.version == 4 and value.variant == uuid.RFC_4122


@pytest.mark.parametrize("same_server", [True, False])
def test_the_running_dispatcher_queues_each_decision_and_acks_its_entries(redis_url: str, same_server: bool) -> None:
    broker_url = redis_url if same_server else redis_url.rsplit("/", 1)[0] + "/1"
    broker = redis.Redis.from_url(broker_url)
    broker.delete(DECISIONS_QUEUE)
    store = RedisEventStore.connect(redis_url)
    registry = toy_registry()
    tasks = _tasks(broker_url)
    assert tasks.shares_server(store.client) is same_server
    dispatcher = Dispatcher(store, registry, tasks)
    consumer = PartitionConsumer.for_store(store, GROUP, "d")
    consumer.ensure_groups(start_id="$")
    command = command_bootstrap(store=store, registry=registry, settings=Settings(secret="test"))
    stop = threading.Event()
    thread = threading.Thread(target=dispatcher.run, args=(consumer, stop), kwargs={"block_ms": 50}, daemon=True)
    thread.start()
    try:
        info = [envelope_pb2.SeatInfo(seat=s, bot=True, policy="random", player_id="p") for s in (0, 1)]
        matches = [command.create_match("highcard", 2, seed=s, seat_info=info).match_id for s in (1, 2, 3)]
        deadline = time.monotonic() + 30
        while broker.llen(DECISIONS_QUEUE) < len(matches) and time.monotonic() < deadline:
            time.sleep(0.02)
        queued = {json.loads(base64.b64decode(json.loads(m)["body"]))[0][0]
                  for m in broker.lrange(DECISIONS_QUEUE, 0, -1)}
        assert queued == set(matches)
        while consumer.pending_count() and time.monotonic() < deadline:
            time.sleep(0.02)  # acked with the next read (of an empty stream: every 50 ms)
        assert consumer.pending_count() == 0
    finally:
        stop.set()
        thread.join(5)
    if not same_server:
        assert redis.Redis.from_url(redis_url).llen(DECISIONS_QUEUE) == 0


def test_a_clock_longer_than_half_the_visibility_timeout_travels_in_hops(redis_url: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A clock waits for its time in a worker, unacknowledged, and the broker gives such a message
    back after the visibility timeout: a 24-hour clock came back every 300 s, each copy firing at
    the deadline. One longer than half of it is sent ahead, with its deadline (`due`), and each
    hop sends the next until the deadline is near; a hop whose match moved on stops there."""
    celery = make_celery(bootstrap(settings=Settings(redis_url=redis_url, secret="test"),
                                   bots=BotsSettings(visibility_timeout=10)))
    tasks, client = CeleryTasks(celery), redis.Redis.from_url(redis_url)
    assert clock_hop(celery) == 5.0
    client.delete(CLOCKS_QUEUE)
    sent_at = time.time()
    tasks.clock("m1", 0, 3, 4.0)
    tasks.clock("m1", 1, 3, 60.0)
    messages = [json.loads(m) for m in reversed(client.lrange(CLOCKS_QUEUE, 0, -1))]
    args = [json.loads(base64.b64decode(m["body"]))[0] for m in messages]
    etas = [datetime.datetime.fromisoformat(m["headers"]["eta"]).timestamp() - sent_at for m in messages]
    assert args[0] == ["m1", 0, 3] and 3.0 < etas[0] < 5.0  # within a hop: as it always was
    assert args[1][:3] == ["m1", 1, 3] and 59.0 < args[1][3] - sent_at < 61.0 and 4.0 < etas[1] < 6.0

    hopped: list[dict] = []
    monkeypatch.setattr(celery, "send_task", lambda name, **options: hopped.append({"name": name, **options}))
    clock = celery.tasks[CLOCK]
    due = time.time() + 30
    assert clock("m1", 1, 0, due) == "rearmed"  # the match is still at the clock's version (0: none yet)
    assert [(h["name"], h["args"], h["countdown"]) for h in hopped] == [(CLOCK, ("m1", 1, 0, due), 5.0)]
    assert clock("m1", 1, 7, due) == "stale" and len(hopped) == 1  # moved on: no further hop
