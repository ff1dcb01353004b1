"""The Redis Streams store against a real redis-server.

It passes the event-store contract, then shows what only Redis can: one hash
slot per match, writer processes racing over separate connections, every
acknowledged event surviving a SIGKILL (AOF, appendfsync always), trimming,
and consumer groups (delivery, ack, XAUTOCLAIM of a dead consumer's entries).
"""

from __future__ import annotations

import math
import multiprocessing
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.crc import key_slot

from famiglia.eventstore import ConcurrencyConflict, EventStore
from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.eventstore.redis_store import KeyLayout, RedisEventStore
from famiglia.localstack.redis_server import RedisServer
from tests.contracts.eventstore_contract import EventStoreContract, batch, envelope, new_match_id

pytestmark = pytest.mark.redis


class TestRedisEventStore(EventStoreContract):
    @pytest.fixture(autouse=True)
    def _clean_redis(self, redis_url: str) -> None:
        self.url = redis_url

    def make_store(self) -> EventStore:
        return RedisEventStore.connect(self.url)


class _AlwaysIdle:
    """A machine whose CPUs are always idle: every append polls for its reply."""

    def poll_now(self, now: float) -> bool:
        return True


class TestRedisEventStorePollingForReplies(EventStoreContract):
    """The contract again with every append polling for its reply (famiglia.spinwait)."""

    @pytest.fixture(autouse=True)
    def _clean_redis(self, redis_url: str) -> None:
        self.url = redis_url

    def make_store(self) -> EventStore:
        store = RedisEventStore.connect(self.url)
        store._idle_cpus = _AlwaysIdle()  # type: ignore[assignment]
        return store


@pytest.fixture()
def store(redis_url: str) -> Iterator[RedisEventStore]:
    store = RedisEventStore.connect(redis_url)
    yield store
    store.close()


# -- key layout -------------------------------------------------------------------------
def test_every_key_of_a_match_shares_one_hash_slot(store: RedisEventStore) -> None:
    for n in range(40):
        match = f"match-{n}"
        partition = store.partition_of(match)
        tag = f"{{p{partition:02d}}}"
        store.append(match, 0, batch(match, 0, 1), command_id="c")
        keys = [
            store.keys.match_stream(match),
            store.keys.version(match),
            store.keys.command(match, "c"),
            store.keys.partition_stream(partition),
        ]
        assert all(tag in key for key in keys)
        assert {key_slot(key.encode()) for key in keys} == {key_slot(tag[1:-1].encode())}
        assert set(keys) <= {key.decode() for key in store.client.keys(f"famiglia:{tag}:*")}
    assert store.partitions_keys() == [f"famiglia:{{p{p:02d}}}:partition" for p in range(16)]


def test_the_layout_follows_prefix_and_partition_count(redis_url: str) -> None:
    store = RedisEventStore.connect(redis_url, partitions=128, prefix="other")
    try:
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 1))
        assert store.keys.match_stream(match) == f"other:{{p{store.partition_of(match):03d}}}:match:{match}"
        assert len(store.partitions_keys()) == 128
        assert store.client.exists(store.keys.match_stream(match))
    finally:
        store.close()
    assert KeyLayout(partitions=4).partition_streams()[3] == "famiglia:{p03}:partition"


# -- the Lua append ---------------------------------------------------------------------
def test_a_version_key_behind_the_stream_is_healed_not_half_written(store: RedisEventStore) -> None:
    """Should the version key ever lag the stream, the script takes the stream's last id
    before writing, so an explicit XADD id can never be refused half-way through a batch."""
    match = new_match_id()
    store.append(match, 0, batch(match, 0, 3))
    store.client.set(store.keys.version(match), 1)
    with pytest.raises(ConcurrencyConflict) as refused:
        store.append(match, 1, batch(match, 1, 3))
    assert refused.value.actual == 3
    assert store.version(match) == 3
    store.client.delete(store.keys.version(match))
    assert store.append(match, 3, batch(match, 3, 2)).last_seq == 5
    assert [e.seq for e in store.read(match)] == [1, 2, 3, 4, 5]


def test_a_version_key_spelled_otherwise_is_read_as_its_number(store: RedisEventStore) -> None:
    """The script compares the version key with the expected version as text on its common
    path; a key holding the same number in other digits takes the slow path and still agrees."""
    match = new_match_id()
    store.append(match, 0, batch(match, 0, 3))
    store.client.set(store.keys.version(match), "03")
    assert store.append(match, 3, batch(match, 3, 2), command_id="c").last_seq == 5
    assert store.client.get(store.keys.version(match)) == b"5"
    with pytest.raises(ConcurrencyConflict) as refused:
        store.append(match, 4, batch(match, 4, 1))
    assert refused.value.actual == 5


def test_the_script_is_reloaded_after_a_script_flush(store: RedisEventStore) -> None:
    match = new_match_id()
    store.append(match, 0, batch(match, 0, 1))
    store.client.script_flush()
    assert store.append(match, 1, batch(match, 1, 1)).last_seq == 2


def test_an_append_after_its_kept_connection_was_cut_reconnects_and_writes_once(store: RedisEventStore) -> None:
    match = new_match_id()
    store.append(match, 0, batch(match, 0, 1), command_id="c1")
    killer = redis.Redis.from_url(_url_of(store))
    assert killer.client_kill_filter(_type="normal", skipme=True) >= 1  # the store's kept connection too
    killer.close()
    result = store.append(match, 1, batch(match, 1, 2), command_id="c2")
    assert (result.version, result.duplicate) == (3, False)
    assert [e.seq for e in store.read(match)] == [1, 2, 3]
    assert store.append(match, 3, batch(match, 3, 1), command_id="c3").version == 4  # and it keeps working


def test_an_error_reply_leaves_the_kept_connection_usable(store: RedisEventStore) -> None:
    match = new_match_id()
    store.append(match, 0, batch(match, 0, 1))
    stream = store.keys.match_stream(match)
    store.client.rename(stream, stream + ":aside")
    store.client.set(stream, "not a stream")  # the script's XADD and XREVRANGE fail: WRONGTYPE
    with pytest.raises(redis.ResponseError):
        store.append(match, 1, batch(match, 1, 1))
    store.client.delete(stream)
    store.client.rename(stream + ":aside", stream)
    assert store.append(match, 1, batch(match, 1, 1)).last_seq == 2


def _url_of(store: RedisEventStore) -> str:
    kwargs = store.client.get_connection_kwargs()
    return f"redis://{kwargs['host']}:{kwargs['port']}/{kwargs.get('db', 0)}"


def test_partition_maxlen_caps_the_partition_stream(redis_url: str) -> None:
    store = RedisEventStore.connect(redis_url, partitions=1, partition_maxlen=10)
    try:
        match = new_match_id()
        for after in range(0, 500, 5):
            store.append(match, after, batch(match, after, 5))
        assert store.client.xlen(store.partitions_keys()[0]) < 500
        assert len(store.read(match)) == 500  # the match stream itself is never capped
    finally:
        store.close()


# -- racing writer processes ------------------------------------------------------------
def _race_writer(url: str, match: str, writer: str, appends: int) -> None:
    """Runs in a spawned process: its own interpreter, its own connection."""
    store = RedisEventStore.connect(url)
    try:
        for i in range(appends):
            while True:
                version = store.version(match)
                try:
                    command = f"{writer}-{i}"
                    store.append(match, version, batch(match, version, 2, command), command_id=command)
                    break
                except ConcurrencyConflict:
                    continue
    finally:
        store.close()


def test_writer_processes_racing_on_one_match_get_one_winner_per_version(redis_url: str) -> None:
    match, writers, appends = new_match_id(), 4, 10
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=_race_writer, args=(redis_url, match, f"p{n}", appends)) for n in range(writers)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    store = RedisEventStore.connect(redis_url)
    try:
        events = store.read(match)
        total = writers * appends * 2
        assert [e.seq for e in events] == list(range(1, total + 1))
        assert store.version(match) == total
        # each command landed exactly once, as one whole batch of two
        batches = [(events[i].command_id, events[i + 1].command_id) for i in range(0, total, 2)]
        assert all(a == b for a, b in batches)
        assert sorted(a for a, _ in batches) == sorted(f"p{n}-{i}" for n in range(writers) for i in range(appends))
        partition = store.read_partition(store.partition_of(match), count=10_000)
        assert [entry.envelope.seq for entry in partition] == list(range(1, total + 1))
    finally:
        store.close()


# -- crash survival ---------------------------------------------------------------------
def test_every_acknowledged_event_survives_a_sigkill(tmp_path: Path) -> None:
    """appendfsync always: an append is acknowledged only after its AOF write is fsynced."""
    server = RedisServer(data_dir=tmp_path, appendfsync="always").start()
    try:
        store = RedisEventStore.connect(server.url)
        matches = [new_match_id() for _ in range(4)]
        acked: dict[str, int] = dict.fromkeys(matches, 0)
        acked_ids: set[str] = set()
        stop = threading.Event()
        failures: list[BaseException] = []

        def write() -> None:
            n = 0
            while not stop.is_set():
                match = matches[n % len(matches)]
                events = batch(match, acked[match], 3)
                try:
                    result = store.append(match, acked[match], events, command_id=f"cmd-{n}")
                except (redis.ConnectionError, redis.TimeoutError):
                    return  # the server died under us: this batch was never acknowledged
                except BaseException as error:
                    failures.append(error)
                    return
                acked[match] = result.last_seq
                if not result.duplicate:
                    acked_ids.update(e.event_id for e in events)
                n += 1

        writer = threading.Thread(target=write)
        writer.start()
        deadline = time.monotonic() + 60  # a condition, not a speed: only a stuck writer waits this long
        while sum(acked.values()) < 150 and time.monotonic() < deadline:
            time.sleep(0.01)
        server.stop(kill=True)  # mid-stream: the writer is busy appending
        writer.join(timeout=30)
        stop.set()
        assert not failures, failures
        assert sum(acked.values()) >= 150

        server.start()  # same port and data dir; replays the AOF
        survivor = RedisEventStore.connect(server.url)
        try:
            for match in matches:
                events = survivor.read(match)
                version = survivor.version(match)
                assert version >= acked[match]
                assert version % 3 == 0  # an unacknowledged batch is there whole or not at all
                assert [e.seq for e in events] == list(range(1, version + 1))
            stored_ids = {e.event_id for match in matches for e in survivor.read(match)}
            assert acked_ids <= stored_ids
            # the command records survived too: a retry gets its first answer
            match = matches[0]
            assert survivor.append(match, 0, batch(match, 0, 3), command_id="cmd-0").duplicate
            # and the match goes on (the script cache is empty after the restart)
            version = survivor.version(match)
            assert survivor.append(match, version, batch(match, version, 1)).last_seq == version + 1
        finally:
            survivor.close()
            store.close()
    finally:
        server.stop()


# -- trimming ---------------------------------------------------------------------------
def test_trim_drops_a_finished_match_but_keeps_its_version(store: RedisEventStore) -> None:
    match, other = new_match_id(), new_match_id()
    store.append(match, 0, batch(match, 0, 2), command_id="c1")
    store.append(match, 2, batch(match, 2, 3), command_id="c2")
    store.append(other, 0, batch(other, 0, 1), command_id="c1")
    partition_entries = len(store.read_partition(store.partition_of(match), count=10_000))

    assert store.trim(match) == 5
    assert store.read(match) == []
    assert store.version(match) == 5 and store.exists(match)
    assert not store.client.exists(store.keys.match_stream(match))
    assert not store.client.exists(store.keys.command(match, "c1"), store.keys.command(match, "c2"))
    assert store.client.exists(store.keys.command(other, "c1"))  # other matches untouched
    assert len(store.read_partition(store.partition_of(match), count=10_000)) == partition_entries
    # stale appends are still refused, a retried command included (its record went with the stream)
    for stale in (0, 2):
        with pytest.raises(ConcurrencyConflict) as refused:
            store.append(match, stale, batch(match, stale, 1), command_id="c1")
        assert refused.value.actual == 5
    assert store.trim(match) == 0
    assert store.append(match, 5, batch(match, 5, 1)).last_seq == 6
    assert [e.seq for e in store.read(match)] == [6]
    assert store.trim(new_match_id()) == 0



def test_trim_keeps_a_match_whose_rematch_creation_is_pending(store: RedisEventStore) -> None:
    """trim.lua looks at the match's rematch in the script that drops the stream: a pending
    creation (the table asked in full, the rematch not made yet) is made from the finished
    match, so the trim refuses (RematchPending) and drops nothing; once the creation is done,
    or its asks expired (nothing can make it then), the match goes."""
    from famiglia.eventstore.redis_store import RematchPending
    from famiglia.eventstore.rematch_asks import RedisRematchAsks

    asks = RedisRematchAsks(store.client, store.keys)
    for done in ("made", "asks expired"):
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 3), command_id="c1")
        asks.fix_request_id(match, "a-secret-request-id")
        with pytest.raises(RematchPending):
            store.trim(match)
        assert len(store.read(match)) == 3 and store.client.exists(store.keys.command(match, "c1"))
        if done == "made":
            asks.drop_pending(match)
        else:
            store.client.delete(store.keys.rematch(match))
        assert store.trim(match) == 3 and store.read(match) == []

# -- consumer groups --------------------------------------------------------------------
def _fill(store: RedisEventStore, matches: int = 10, each: int = 3) -> set[tuple[str, int]]:
    written: set[tuple[str, int]] = set()
    for _ in range(matches):
        match = new_match_id()
        store.append(match, 0, batch(match, 0, each))
        written |= {(match, seq) for seq in range(1, each + 1)}
    return written


def _keys(entries: list) -> set[tuple[str, int]]:
    return {(entry.envelope.match_id, entry.envelope.seq) for entry in entries}


def test_a_consumer_group_delivers_each_entry_once(store: RedisEventStore) -> None:
    written = _fill(store)
    first = PartitionConsumer.for_store(store, "projection", "a")
    second = PartitionConsumer.for_store(store, "projection", "b")
    other_group = PartitionConsumer.for_store(store, "bots", "a")
    got = first.read(count=100)
    assert _keys(got) == written and len(got) == len(written)
    assert first.read() == [] and second.read() == []
    assert _keys(other_group.read(count=100)) == written  # groups are independent
    for entry in got:
        assert entry.partition == store.partition_of(entry.envelope.match_id)
        assert entry.entry_id in {e.entry_id for e in store.read_partition(entry.partition, count=10_000)}


def test_entries_stay_pending_until_acked(store: RedisEventStore) -> None:
    written = _fill(store)
    consumer = PartitionConsumer.for_store(store, "projection", "a")
    got = consumer.read(count=100)
    assert consumer.pending_count() == len(written)
    done, left = got[: len(got) // 2], got[len(got) // 2 :]
    assert consumer.ack(done) == len(done)
    assert consumer.ack(done) == 0  # acking twice is harmless
    assert consumer.pending_count() == len(left)
    # a restarted consumer with the same name redoes its own pending entries
    restarted = PartitionConsumer.for_store(store, "projection", "a")
    assert _keys(restarted.read_pending(count=100)) == _keys(left)
    restarted.ack(left)
    assert consumer.pending_count() == 0 and restarted.read_pending() == []


def test_entries_of_a_dead_consumer_are_reclaimed_once_idle(store: RedisEventStore) -> None:
    written = _fill(store)
    dead = PartitionConsumer.for_store(store, "projection", "dead")
    alive = PartitionConsumer.for_store(store, "projection", "alive")
    taken = dead.read(count=100)
    assert len(taken) == len(written)
    assert alive.claim_stale(min_idle_ms=60_000) == []  # not idle long enough yet
    time.sleep(0.15)
    claimed = alive.claim_stale(min_idle_ms=100, count=100)
    assert _keys(claimed) == written
    assert alive.pending_count() == len(written)
    assert alive.ack(claimed) == len(written)
    assert alive.pending_count() == 0


def test_claim_stale_honours_count(store: RedisEventStore) -> None:
    written = _fill(store, matches=12, each=2)
    PartitionConsumer.for_store(store, "projection", "dead").read(count=100)
    time.sleep(0.05)
    alive = PartitionConsumer.for_store(store, "projection", "alive")
    first = alive.claim_stale(min_idle_ms=10, count=5)
    assert len(first) == 5
    rest = alive.claim_stale(min_idle_ms=10, count=100)
    assert _keys(first) | _keys(rest) == written


def test_pending_entries_gone_from_the_stream_are_skipped_not_redone(store: RedisEventStore) -> None:
    """A pending entry trimmed from its partition stream meanwhile (MAXLEN ~) comes back from
    XREADGROUP `0` without its fields: there is nothing left to redo, and the rest is still
    redone (found by mutating PartitionConsumer._entries)."""
    written = _fill(store, matches=1, each=3)
    first = PartitionConsumer.for_store(store, "projection", "a")
    got = first.read(count=100)
    gone = got[0]
    store.client.xdel(store.keys.partition_stream(gone.partition), gone.entry_id)
    restarted = PartitionConsumer.for_store(store, "projection", "a")
    assert _keys(restarted.read_pending(count=100)) == written - _keys([gone])
    other = PartitionConsumer.for_store(store, "projection", "b")
    assert _keys(other.claim_stale(min_idle_ms=0, count=100)) == written - _keys([gone])


def test_trim_consumed_leaves_a_stream_alone_until_the_named_group_reads_it(store: RedisEventStore) -> None:
    """Entries every other group acked stay until the named group (the projection, which
    archives them) has them too: a stream without that group is not trimmed (found by mutating
    trim_consumed)."""
    from famiglia.eventstore.consumer import trim_consumed

    far_future_ms = 10**15
    _fill(store, matches=10, each=3)
    bots = PartitionConsumer.for_store(store, "bots", "a")
    bots.ack(bots.read(count=100))
    lengths = [store.client.xlen(key) for key in store.partitions_keys()]
    assert trim_consumed(store, "projection", keep_after_ms=far_future_ms) == 0
    assert [store.client.xlen(key) for key in store.partitions_keys()] == lengths
    projection = PartitionConsumer.for_store(store, "projection", "p")
    projection.ack(projection.read(count=100))
    assert trim_consumed(store, "projection", keep_after_ms=far_future_ms) == sum(lengths) - sum(
        1 for n in lengths if n)  # each stream keeps its newest entry


def test_a_blocking_read_wakes_on_an_append(store: RedisEventStore) -> None:
    consumer = PartitionConsumer.for_store(store, "projection", "a")
    consumer.ensure_groups()
    consumer.ensure_groups()  # idempotent (BUSYGROUP is fine)
    match = new_match_id()
    timer = threading.Timer(0.1, lambda: store.append(match, 0, [envelope(match, 1)]))
    timer.start()
    try:
        got = consumer.read(block_ms=5_000)
    finally:
        timer.join()
    assert _keys(got) == {(match, 1)}
    assert consumer.read(block_ms=50) == []


def test_a_consumer_of_some_partitions_sees_only_those(store: RedisEventStore) -> None:
    written = _fill(store, matches=20, each=1)
    mine = [0, 1, 2, 3]
    consumer = PartitionConsumer.for_store(store, "projection", "a", partitions=mine)
    got = consumer.read(count=100)
    assert _keys(got) == {(m, s) for m, s in written if store.partition_of(m) in mine}
    with pytest.raises(ValueError):
        PartitionConsumer.for_store(store, "projection", "a", partitions=[16])


def test_a_forked_child_appends_on_its_own_connection_not_its_parents(store: RedisEventStore) -> None:
    import os

    match = new_match_id()
    store.append(match, 0, batch(match, 0, 1), command_id="c1")  # the parent keeps a connection
    (parents,) = store._idle
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, and leave without running the parent's cleanup
        try:
            version = store.append(match, 1, batch(match, 1, 1), command_id="c2").version
            ok = version == 2 and parents not in store._idle and len(store._idle) == 1
            os.write(write_end, b"ok" if ok else b"no")
        finally:
            os._exit(0)
    os.close(write_end)
    answer = os.read(read_end, 2)
    os.waitpid(pid, 0)
    os.close(read_end)
    assert answer == b"ok"
    assert store._idle == [parents]  # the parent's own connection, still clean
    assert store.append(match, 2, batch(match, 2, 1), command_id="c3").version == 3


@pytest.mark.parametrize("held", [0, 7])
def test_what_a_held_send_leaves_goes_out_with_sendall(store: RedisEventStore, monkeypatch, held: int) -> None:
    """The request's bytes that `send_held` did not send (none, or a first few) follow with
    the socket's sendall, in order: the append is whole either way."""
    from famiglia.eventstore import redis_store

    match = new_match_id()
    store.append(match, 0, batch(match, 0, 1), command_id="c1")  # connects the kept connection
    sent: list[int] = []

    def partly(sock, data: bytes) -> int:
        sent.append(held)
        return sock.send(data[:held]) if held else 0

    monkeypatch.setattr(redis_store, "send_held", partly)
    assert store.append(match, 1, batch(match, 1, 2), command_id="c2").version == 3
    assert sent == [held]
    assert [e.seq for e in store.read(match)] == [1, 2, 3]


def test_a_connected_kept_connection_exchanges_without_redis_py_layers(store: RedisEventStore) -> None:
    """The append's request and reply go straight through the connection's socket and
    hiredis reader once it is connected (redis-py's send/read are only for connecting)."""
    match = new_match_id()
    store.append(match, 0, batch(match, 0, 1), command_id="c1")  # connects the kept connection
    (conn,) = store._idle

    def refused(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("redis-py's send/read were used on a connected kept connection")

    conn.send_packed_command, conn.read_response = refused, refused
    assert store.append(match, 1, batch(match, 1, 2), command_id="c2").version == 3
    assert store.append(match, 1, batch(match, 1, 2), command_id="c2").duplicate
    with pytest.raises(ConcurrencyConflict):
        store.append(match, 1, batch(match, 1, 1), command_id="c3")
    store.client.script_flush()  # NOSCRIPT comes back as redis-py's NoScriptError: reloaded
    assert store.append(match, 3, batch(match, 3, 1), command_id="c4").version == 4
    assert [e.seq for e in store.read(match)] == [1, 2, 3, 4]


@pytest.mark.parametrize("budget_us", [0.0, 150.0])
def test_an_append_polls_for_its_reply_only_with_a_budget_and_idle_cpus(redis_url: str, monkeypatch,
                                                                        budget_us: float) -> None:
    """With a budget and an idle machine an append's reply is polled for (and read whole,
    conflicts and duplicates as ever); with budget 0, or a busy machine, it never is."""
    from famiglia.eventstore import redis_store

    polls: list[float] = []
    real = redis_store.recv_polling

    def counted(sock, buffer, budget: float):  # type: ignore[no-untyped-def]
        polls.append(budget)
        return real(sock, buffer, budget)

    monkeypatch.setattr(redis_store, "recv_polling", counted)
    store = RedisEventStore.connect(redis_url, reply_poll_us=budget_us)
    try:
        idle = _AlwaysIdle()
        if budget_us:
            assert store._idle_cpus is not None
            store._idle_cpus = idle  # type: ignore[assignment]
        else:
            assert store._idle_cpus is None
        match = new_match_id()
        assert store.append(match, 0, batch(match, 0, 2), command_id="c1").version == 2
        assert store.append(match, 0, batch(match, 0, 2), command_id="c1").duplicate
        with pytest.raises(ConcurrencyConflict):
            store.append(match, 0, batch(match, 0, 1), command_id="c2")
        assert polls == ([budget_us / 1e6] * 3 if budget_us else [])
        if budget_us:
            monkeypatch.setattr(idle, "poll_now", lambda now: False)  # the machine got busy
            assert store.append(match, 2, batch(match, 2, 1), command_id="c3").version == 3
            assert len(polls) == 3
        assert store.version(match) == (3 if budget_us else 2)
        assert len(polls) == (3 if budget_us else 0)  # reads and blocking reads never poll
    finally:
        store.close()


def test_a_poll_that_finds_the_connection_cut_reconnects_and_writes_once(redis_url: str) -> None:
    """A kept connection cut while an append polls for its reply is retried on a fresh one,
    as with a blocking read: the append is written once."""
    store = RedisEventStore.connect(redis_url, reply_poll_us=150.0)
    try:
        store._idle_cpus = _AlwaysIdle()  # type: ignore[assignment]
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 1), command_id="c1")
        (conn,) = store._idle
        admin = redis.Redis.from_url(redis_url)
        try:
            admin.client_kill_filter(_type="normal", skipme=True)
        finally:
            admin.close()
        assert conn._sock is not None
        assert store.append(match, 1, batch(match, 1, 1), command_id="c2").version == 2
        assert [e.seq for e in store.read(match)] == [1, 2]
    finally:
        store.close()


@pytest.mark.parametrize(("url", "env", "budget"), [
    ("redis://127.0.0.1:1/0", None, 150e-6),
    ("redis://localhost:1/0", None, 150e-6),
    ("unix:///tmp/no-such-redis.sock", None, 150e-6),
    ("redis://redis.example:6379/0", None, 0.0),  # across the network: never polls
    ("redis://redis.example:6379/0", "40", 40e-6),  # unless told to
    ("redis://127.0.0.1:1/0", "0", 0.0),
    ("redis://redis.example:6379/0", " ", 0.0),  # blank: the default
])
def test_the_poll_budget_follows_where_redis_is_and_the_setting(monkeypatch, url: str, env: str | None,
                                                                budget: float) -> None:
    if env is None:
        monkeypatch.delenv("FAMIGLIA_REDIS_POLL_US", raising=False)
    else:
        monkeypatch.setenv("FAMIGLIA_REDIS_POLL_US", env)
    store = RedisEventStore.connect(url)  # no I/O until the first call
    try:
        assert store.reply_poll == pytest.approx(budget)
        assert (store._idle_cpus is None) == (budget == 0.0)
    finally:
        store.close()


@pytest.mark.parametrize("setting", ["abc", "-5", "nan", "inf"])
def test_a_poll_budget_that_is_not_microseconds_is_refused_clearly(monkeypatch, setting: str) -> None:
    """A setting: the service stops with one line naming it (README, Configuration), as for
    every other setting, not a ValueError traceback."""
    monkeypatch.setenv("FAMIGLIA_REDIS_POLL_US", setting)
    with pytest.raises(SystemExit, match="FAMIGLIA_REDIS_POLL_US="):
        RedisEventStore.connect("redis://127.0.0.1:1/0")


@pytest.mark.parametrize("budget", [-5.0, math.nan, math.inf])
def test_a_poll_budget_argument_that_is_not_microseconds_is_refused_clearly(budget: float) -> None:
    with pytest.raises(ValueError, match="must be microseconds"):
        RedisEventStore.connect("redis://127.0.0.1:1/0", reply_poll_us=budget)



def test_staged_commands_are_named_in_the_stream_so_trim_drops_their_records(store: RedisEventStore) -> None:
    """NP-H9's staged events carry their command id into the match stream when they are
    written (field `c`, as appended ones), so a trim finds their records too."""
    match = new_match_id()
    store.append(match, 0, batch(match, 0, 1))
    store.stage(match, 1, batch(match, 1, 2, "answer"), command_id="answer")
    assert store.client.get(store.keys.version(match)) == b"3:1"  # position:version while staged
    store.append(match, 3, batch(match, 3, 1, "resolve"), command_id="resolve")
    assert store.client.get(store.keys.version(match)) == b"4"
    assert not store.client.exists(store.keys.staged(match))
    assert store.client.exists(store.keys.command(match, "answer"))
    assert store.trim(match) == 4
    assert not store.client.exists(store.keys.command(match, "answer"), store.keys.command(match, "resolve"))
    assert store.version(match) == 4


def test_written_out_commands_are_named_at_their_new_seqs_so_trim_drops_their_records(
        store: RedisEventStore) -> None:
    """`write_out` names each command in the stream on its first event where it now is (field
    `c`), the staged ones included, so a trim finds their records where they now are."""
    from tests.contracts.eventstore_contract import renumbered

    match = new_match_id()
    store.append(match, 0, batch(match, 0, 1))
    store.stage(match, 1, batch(match, 1, 2, "answer"), command_id="answer")
    first, second = store.read_staged(match)
    block = [envelope(match, 2, "padding"), renumbered(first, 3), renumbered(second, 4)]
    store.write_out(match, 3, block, [3, 4], [envelope(match, 5, command_id="chat")], "chat")
    named = {int(entry_id.split(b"-")[0]): fields.get(b"c")
             for entry_id, fields in store.client.xrange(store.keys.match_stream(match))}
    assert named == {1: None, 2: None, 3: b"answer", 4: None, 5: b"chat"}
    assert store.client.get(store.keys.version(match)) == b"5"
    assert store.client.get(store.keys.command(match, "answer")) == b"3:4"
    assert store.trim(match) == 5
    assert not store.client.exists(store.keys.command(match, "answer"), store.keys.command(match, "chat"))


def test_the_rare_path_scripts_heal_a_version_key_behind_the_stream_as_the_append_does(redis_url: str) -> None:
    """stage.lua, write_out.lua and trim.lua read the version through shared.lua: a version key
    behind the stream (lost, or restored from an older file) gives way to the stream's last id,
    as in append.lua. Their partition writes honour a capped partition stream's MAXLEN."""
    from tests.contracts.eventstore_contract import renumbered

    store = RedisEventStore.connect(redis_url, partitions=1, partition_maxlen=1000)
    try:
        partition = store.partitions_keys()[0]
        before = store.client.xlen(partition)
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 2))
        store.client.set(store.keys.version(match), 1)
        with pytest.raises(ConcurrencyConflict) as refused:
            store.stage(match, 1, batch(match, 1, 1, "answer"), command_id="answer")
        assert refused.value.actual == 2
        assert store.stage(match, 2, batch(match, 2, 1, "answer"), command_id="answer").version == 3

        staged, = store.read_staged(match)
        store.write_out(match, 3, [renumbered(staged, 3)], [3], [envelope(match, 4, command_id="chat")], "chat")
        assert [e.seq for e in store.read(match)] == [1, 2, 3, 4]
        store.client.set(store.keys.version(match), 2)
        with pytest.raises(ConcurrencyConflict) as refused:
            store.write_out(match, 2, [], [], [envelope(match, 3, command_id="late")], "late")
        assert refused.value.actual == 4
        assert store.client.xlen(partition) - before == 4

        store.client.set(store.keys.version(match), 1)
        assert store.trim(match) == 4
        assert store.version(match) == 4 and store.client.get(store.keys.version(match)) == b"4"
    finally:
        store.close()


def test_staged_events_that_cannot_take_their_seqs_are_refused_before_anything_is_written(
        store: RedisEventStore) -> None:
    """append.lua writes staged events out at seqs version + 1, ...: should the stream already
    hold the first of them (it is ahead of the version key), the append is a conflict and
    writes nothing, so no staged event lands after a gap or out of order."""
    match = new_match_id()
    store.append(match, 0, batch(match, 0, 1))
    store.stage(match, 1, batch(match, 1, 2, "answer"), command_id="answer")
    intruder = envelope(match, 2, "intruder")
    store.client.xadd(store.keys.match_stream(match), {"e": intruder.SerializeToString()}, id="2-0")
    with pytest.raises(ConcurrencyConflict):
        store.append(match, 3, batch(match, 3, 1, "resolve"), command_id="resolve")
    assert [(e.seq, e.type) for e in store.read(match)] == [(1, "tick"), (2, "intruder")]
    assert len(store.read_staged(match)) == 2
    assert not store.client.exists(store.keys.command(match, "resolve"))


# -- found by mutating the store (review 6) ---------------------------------------------
def test_a_trim_raced_by_an_append_never_sets_the_version_back(store: RedisEventStore, monkeypatch) -> None:
    """trim.lua drops the stream only at the version the caller read the command ids at: an
    append landing in between makes the trim read again, so its record goes too and the
    version key keeps the newest version (a stale append is still refused)."""
    match = new_match_id()
    store.append(match, 0, batch(match, 0, 2), command_id="c1")
    read_ids = store._command_ids
    raced: list[int] = []

    def racing(stream: str, chunk: int = 1000) -> set[str]:
        found = read_ids(stream, chunk)
        if not raced:  # an append between the trim's read and its script, once
            raced.append(store.append(match, 2, batch(match, 2, 1), command_id="late").version)
        return found

    monkeypatch.setattr(store, "_command_ids", racing)
    assert store.trim(match) == 3
    assert raced == [3] and store.version(match) == 3
    assert not store.client.exists(store.keys.command(match, "c1"), store.keys.command(match, "late"))
    with pytest.raises(ConcurrencyConflict) as refused:
        store.append(match, 2, batch(match, 2, 1))
    assert refused.value.actual == 3


def test_trim_finds_the_command_records_past_a_page_of_the_stream(store: RedisEventStore) -> None:
    """trim() reads the stream's command ids page by page: a command past the first page
    (1,000 entries) loses its record with the stream too."""
    match = new_match_id()
    store.append(match, 0, batch(match, 0, 1000), command_id="opening")
    store.append(match, 1000, batch(match, 1000, 2), command_id="late")
    assert store.trim(match) == 1002
    assert not store.client.exists(store.keys.command(match, "opening"), store.keys.command(match, "late"))


def test_a_write_out_honours_a_capped_partition_stream(redis_url: str) -> None:
    """write_out.lua writes its block to the partition stream with the store's MAXLEN (~), as
    an append does: a long block does not grow it without bound."""
    from tests.contracts.eventstore_contract import renumbered

    store = RedisEventStore.connect(redis_url, partitions=1, partition_maxlen=10)
    try:
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 1))
        store.stage(match, 1, batch(match, 1, 1, "answer"), command_id="answer")
        (staged,) = store.read_staged(match)
        block = [renumbered(staged, 2), *(envelope(match, seq, "padding") for seq in range(3, 503))]
        store.write_out(match, 2, block, [2], [envelope(match, 503, command_id="chat")], "chat")
        assert len(store.read(match)) == 503  # the match stream itself is never capped
        assert store.client.xlen(store.partitions_keys()[0]) < 500
    finally:
        store.close()


def test_a_write_out_whose_block_the_stream_already_holds_is_refused_before_anything_is_written(
        store: RedisEventStore) -> None:
    """As for an append (above): should the stream already hold the block's first seq (it is
    ahead of the version key), the write-out is a conflict and writes nothing."""
    from tests.contracts.eventstore_contract import renumbered

    match = new_match_id()
    store.append(match, 0, batch(match, 0, 1))
    store.stage(match, 1, batch(match, 1, 1, "answer"), command_id="answer")
    (staged,) = store.read_staged(match)
    intruder = envelope(match, 2, "intruder")
    store.client.xadd(store.keys.match_stream(match), {"e": intruder.SerializeToString()}, id="2-0")
    with pytest.raises(ConcurrencyConflict):
        store.write_out(match, 2, [renumbered(staged, 2)], [2], [envelope(match, 3, command_id="chat")], "chat")
    assert [(e.seq, e.type) for e in store.read(match)] == [(1, "tick"), (2, "intruder")]
    assert len(store.read_staged(match)) == 1
    assert not store.client.exists(store.keys.command(match, "chat"))


def test_a_write_out_refused_by_redis_itself_is_redis_error_not_a_bad_block(store: RedisEventStore) -> None:
    """Only write_out.lua's own refusals of the block are ValueErrors: any other error reply
    (here WRONGTYPE) stays redis-py's ResponseError, a server fault and not the writer's."""
    match = new_match_id()
    store.append(match, 0, batch(match, 0, 1))
    stream = store.keys.match_stream(match)
    store.client.rename(stream, stream + ":aside")
    store.client.set(stream, "not a stream")
    with pytest.raises(redis.ResponseError) as refused:
        store.write_out(match, 1, [], [], [envelope(match, 2, command_id="chat")], "chat")
    assert not isinstance(refused.value, ValueError)


def test_error_replies_do_not_leave_connections_behind(store: RedisEventStore) -> None:
    """An append refused with an error reply keeps its connection for the next one: a run of
    refusals (an OOM Redis, say) does not open a connection each."""
    match = new_match_id()
    store.append(match, 0, batch(match, 0, 1))
    stream = store.keys.match_stream(match)
    store.client.rename(stream, stream + ":aside")
    store.client.set(stream, "not a stream")
    before = len(store.client.client_list())
    for _ in range(5):
        with pytest.raises(redis.ResponseError):
            store.append(match, 1, batch(match, 1, 1))
    assert len(store.client.client_list()) - before <= 1


def test_the_key_names_an_append_remembers_are_bounded(store: RedisEventStore, monkeypatch) -> None:
    """The append's cache of key names is bounded (a server lives through many matches)."""
    from famiglia.eventstore import redis_store

    monkeypatch.setattr(redis_store, "_KEY_CACHE", 3)
    for _ in range(10):
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 1))
        assert len(store._append_keys) <= 3
        assert store.append(match, 1, batch(match, 1, 1)).version == 2


def test_partition_tops_are_each_partitions_newest_entry(store: RedisEventStore) -> None:
    matches = [new_match_id() for _ in range(40)]
    for match in matches:
        store.append(match, 0, batch(match, 0, 2))
    tops = store.partition_tops()
    for partition in {store.partition_of(match) for match in matches}:
        newest = store.read_partition(partition, count=100_000)[-1]
        assert tops[partition] == newest
    assert set(tops) <= set(range(store.partitions))
