"""The dispatcher's own unacknowledged entries on a real Redis: a restarted dispatcher redoes
every one it left (its consumer's pending list), not only the first read of them; what it
left beyond that read sat until its own XAUTOCLAIM took them, at most 100 every
`claim_idle_ms` (60 s), so a match created among them waited minutes for its first task."""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time

import pytest

from famiglia.bots.toy import toy_registry
from famiglia.config import Settings
from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.v1 import envelope_pb2
from famiglia.v1.envelope_pb2 import EventEnvelope
from services.bots.bootstrap import BotsSettings, bootstrap
from services.bots.dispatcher import GROUP, Dispatcher
from services.bots.entrypoints.celery_app import DECISIONS_QUEUE, CeleryTasks, make_celery
from services.command.bootstrap import bootstrap as command_bootstrap

pytestmark = [pytest.mark.redis, pytest.mark.xdist_group("bots")]


class _Tasks:
    def decide(self, *args, **kwargs) -> None: ...

    def clock(self, *args, **kwargs) -> None: ...

    def batch(self):
        return contextlib.nullcontext()


class _Claims(PartitionConsumer):
    """A consumer that keeps what its XAUTOCLAIMs took."""

    claimed: list

    def claim_stale(self, min_idle_ms: int, count: int = 100):
        got = super().claim_stale(min_idle_ms, count)
        self.claimed += got
        return got


def test_a_restarted_dispatcher_redoes_all_its_pending_entries_without_claiming_them(redis_url: str) -> None:
    store = RedisEventStore.connect(redis_url)
    consumer = _Claims(store.client, store.keys, GROUP, "dispatcher-a")
    consumer.claimed = []
    consumer.ensure_groups(start_id="$")
    stream = store.keys.partition_stream(0)
    for seq in range(1, 1301):  # one partition, more than a read of pending entries gives
        store.client.xadd(stream, {"e": EventEnvelope(match_id="m-gone", seq=seq).SerializeToString()})
    read = []
    while len(read) < 1300:  # read, never acked: the dispatcher died here
        read += consumer.read(count=200)
    handled: list[int] = []
    dispatcher = Dispatcher(store, toy_registry(), _Tasks(), stall_seconds=600)
    handle = dispatcher.handle
    dispatcher.handle = lambda envelopes, **kw: handle(  # type: ignore[method-assign]
        [handled.append(e.seq) or e for e in envelopes], **kw)
    stop = threading.Event()
    thread = threading.Thread(target=dispatcher.run, args=(consumer, stop),
                              kwargs={"block_ms": 50, "claim_idle_ms": 1000})
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while consumer.pending_count() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(10)
    assert consumer.pending_count() == 0
    assert sorted(handled) == list(range(1, 1301))  # each once
    assert consumer.claimed == []  # redone as its own, not taken over from itself


def test_another_dispatcher_takes_none_of_a_restarted_ones_pending_entries_once_it_started(redis_url: str) -> None:
    """Away past `claim_idle_ms`, the dispatcher's pending entries beyond the first read back
    (`PENDING_COUNT` a partition) went to the first other replica whose XAUTOCLAIM came while it
    worked through that read; now it holds them all before its first read."""
    store = RedisEventStore.connect(redis_url)
    consumer = _Claims(store.client, store.keys, GROUP, "dispatcher-a")
    consumer.claimed = []
    consumer.ensure_groups(start_id="$")
    _filler(store, 0, 1300)  # one partition, more than a read of pending entries gives
    read = []
    while len(read) < 1300:  # read, never acked: the dispatcher died here
        read += consumer.read(count=200)
    stream = store.keys.partition_stream(0)
    store.client.xclaim(stream, GROUP, "dispatcher-a", 0, [e.entry_id for e in read], idle=600_000,
                        justid=True)  # as if it had been away ten minutes
    handled: list[int] = []
    started, go = threading.Event(), threading.Event()
    dispatcher = Dispatcher(store, toy_registry(), _Tasks(), stall_seconds=600)
    handle = dispatcher.handle

    def handling(envelopes, **kw):  # type: ignore[no-untyped-def]
        started.set()  # its first batch: it is running
        go.wait(30)
        return handle([handled.append(e.seq) or e for e in envelopes], **kw)

    dispatcher.handle = handling  # type: ignore[method-assign]
    stop = threading.Event()
    thread = threading.Thread(target=dispatcher.run, args=(consumer, stop),
                              kwargs={"block_ms": 50, "claim_idle_ms": 60_000})
    thread.start()
    try:
        assert started.wait(30)
        other = PartitionConsumer.for_store(store, GROUP, "dispatcher-b")
        assert other.claim_stale(60_000, count=2000) == []
        go.set()
        deadline = time.monotonic() + 30
        while consumer.pending_count() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        go.set()
        stop.set()
        thread.join(10)
    assert consumer.pending_count() == 0
    assert sorted(handled) == list(range(1, 1301))  # each once, by the restarted dispatcher
    assert consumer.claimed == []


def _filler(store: RedisEventStore, partition: int, count: int) -> None:
    """Entries of a match the dispatcher does not follow (its stream is gone)."""
    stream = store.keys.partition_stream(partition)
    with store.client.pipeline(transaction=False) as pipe:
        for seq in range(count):
            pipe.xadd(stream, {"e": EventEnvelope(match_id="m-gone", seq=seq + 1).SerializeToString()})
        pipe.execute()


def test_a_match_created_among_a_dead_dispatchers_later_pending_entries_gets_its_task(redis_url: str) -> None:
    """The dispatcher died with a match's creation read and not handled, past the first 500 of
    its partition's pending entries and the last 500 entries `recover` looks at, and before it
    was in the live set: restarted (the broker its own Redis, so batches ride on the reads),
    it queues the match's first decision, not an XAUTOCLAIM later."""
    registry = toy_registry()
    store = RedisEventStore.connect(redis_url, partitions=1)  # every match in the one partition
    consumer = _Claims(store.client, store.keys, GROUP, "dispatcher-a")
    consumer.claimed = []
    consumer.ensure_groups(start_id="$")
    command = command_bootstrap(store=store, registry=registry, settings=Settings(secret="test"))
    info = [envelope_pb2.SeatInfo(seat=s, bot=True, policy="random", player_id="p") for s in (0, 1)]
    _filler(store, 0, 600)
    match_id = command.create_match("highcard", 2, seed=2, seat_info=info).match_id
    _filler(store, 0, 600)
    while consumer.read(count=200):  # read, never acked: the dispatcher died here
        pass
    tasks = CeleryTasks(make_celery(bootstrap(settings=Settings(redis_url=redis_url, secret="test"),
                                              bots=BotsSettings())))
    dispatcher = Dispatcher(store, registry, tasks, stall_seconds=600)
    assert dispatcher._holding(consumer)
    stop = threading.Event()
    thread = threading.Thread(target=dispatcher.run, args=(consumer, stop),
                              kwargs={"block_ms": 50, "claim_idle_ms": 600_000})
    thread.start()
    try:
        deadline = time.monotonic() + 30
        queued: set[str] = set()
        while (match_id not in queued or consumer.pending_count()) and time.monotonic() < deadline:
            time.sleep(0.05)
            queued = {json.loads(base64.b64decode(json.loads(m)["body"]))[0][0]
                      for m in store.client.lrange(DECISIONS_QUEUE, 0, -1)}
    finally:
        stop.set()
        thread.join(10)
    assert match_id in queued
    assert consumer.pending_count() == 0 and consumer.claimed == []
