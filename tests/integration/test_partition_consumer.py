"""The partition consumer's own read path: XACKs and the next XREADGROUP in one write on a
kept connection, the replies taken from its hiredis reader — the same bytes redis-py would
send and the same entries and acks its client path gives."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.eventstore.port import PartitionEntry, full_partitions
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.v1.envelope_pb2 import EventEnvelope
from tests.contracts.eventstore_contract import batch, new_match_id

pytestmark = pytest.mark.redis


@pytest.fixture()
def store(redis_url: str) -> Iterator[RedisEventStore]:
    store = RedisEventStore.connect(redis_url)
    yield store
    store.close()


def _write(store: RedisEventStore, matches: int = 6, each: int = 3) -> list[str]:
    ids = [new_match_id() for _ in range(matches)]
    for match in ids:
        store.append(match, 0, batch(match, 0, each))
    return ids


def _pending(store: RedisEventStore, group: str) -> set[tuple[int, str]]:
    """(partition, entry id): an entry id is the match's seq, the same in many partitions."""
    return {(p, row["message_id"].decode())
            for p in range(store.partitions)
            for row in store.client.xpending_range(store.keys.partition_stream(p), group, "-", "+", 10_000)}


def _keys(entries: list[PartitionEntry]) -> set[tuple[int, str]]:
    return {(e.partition, e.entry_id) for e in entries}


def test_acks_are_packed_as_redis_py_packs_them(store: RedisEventStore) -> None:
    consumer = PartitionConsumer.for_store(store, "g", "c")
    acks = {5: ["1-0", "17-3"], 0: ["1700000000000-12"], 15: ["2-0"]}
    conn = store.client.connection_pool.get_connection()
    try:
        expected = b"".join(conn.pack_commands(
            [("XACK", store.keys.partition_stream(p), "g", *ids) for p, ids in sorted(acks.items())]))
    finally:
        store.client.connection_pool.release(conn)
    assert consumer._packed_acks(acks) == expected


def test_a_connected_consumer_reads_and_acks_without_redis_py_layers(store: RedisEventStore) -> None:
    """Same entries, and the acked ones leave the pending list, with redis-py's send and read
    refused once the kept connection is connected."""
    consumer = PartitionConsumer.for_store(store, "g", "c")
    consumer.ensure_groups(start_id="$")
    assert consumer.read(count=100) == []  # connects the kept connection
    conn = consumer._own
    assert conn is not None

    def refused(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("redis-py's send/read were used on a connected kept connection")

    conn.send_packed_command, conn.read_response = refused, refused
    written = _write(store)
    first = consumer.read(count=2)  # at most 2 a partition: some are left for the next read
    assert first and _pending(store, "g") == _keys(first)
    rest = consumer.read(count=100, ack=first)
    assert _keys(rest).isdisjoint(_keys(first))
    assert _pending(store, "g") == _keys(rest)
    got = first + rest
    assert sorted((e.envelope.match_id, e.envelope.seq) for e in got) == sorted(
        (m, s) for m in written for s in (1, 2, 3))
    assert all(e.partition == store.partition_of(e.envelope.match_id) for e in got)
    assert consumer.read(count=100, ack=rest) == [] and _pending(store, "g") == set()
    assert consumer._own is conn  # still the same connection, in step


def test_an_error_reply_among_the_acks_is_raised_after_every_reply_is_read(store: RedisEventStore) -> None:
    """A vanished group fails the XACK and the read: the groups are made again and the read
    redone; the next read on a new kept connection works."""
    consumer = PartitionConsumer.for_store(store, "g", "c")
    _write(store, matches=2, each=1)
    first = consumer.read(count=100)
    assert len(first) == 2
    for p in range(store.partitions):
        store.client.xgroup_destroy(store.keys.partition_stream(p), "g")
    again = consumer.read(count=100, ack=first)  # new groups from the start: both again
    assert _keys(again) == _keys(first)
    assert consumer.read(count=100, ack=again) == [] and _pending(store, "g") == set()


def _lpush(key: str, *values: str) -> bytes:
    """A packed LPUSH, as the bots' task sender hands it over."""
    parts = [b"LPUSH", key.encode(), *(v.encode() for v in values)]
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


def test_commands_before_the_acks_run_with_them_in_one_transaction_before_the_read(
        store: RedisEventStore) -> None:
    consumer = PartitionConsumer.for_store(store, "g-push", "c")
    consumer.ensure_groups(start_id="$")
    queue = f"q-{new_match_id()}"
    _write(store, matches=3, each=1)
    first = consumer.read(count=100)
    assert len(first) == 3
    _write(store, matches=2, each=1)
    conn = consumer._own
    sent: list[bytes] = []
    sendall = conn._sock.sendall
    conn._sock = _Recording(conn._sock, sent)
    try:
        rest = consumer.read(count=100, ack=first, before_ack=[_lpush(queue, "a", "b")])
    finally:
        conn._sock = conn._sock.inner
    assert len(rest) == 2 and _pending(store, "g-push") == _keys(rest)  # the acks applied, the read done
    assert store.client.lrange(queue, 0, -1) == [b"b", b"a"]
    request = b"".join(sent)  # one write: MULTI, the push, the XACKs, EXEC, then the read
    assert len(sent) == 1 and sendall is not None
    assert request.startswith(b"*1\r\n$5\r\nMULTI\r\n" + _lpush(queue, "a", "b") + b"*")
    assert request.index(b"XACK") < request.index(b"EXEC") < request.index(b"XREADGROUP")
    assert consumer._own is conn  # in step, kept


class _Recording:
    """A socket whose writes are recorded."""

    def __init__(self, inner: object, sent: list[bytes]) -> None:
        self.inner, self.sent = inner, sent

    def sendall(self, data: bytes) -> None:
        self.sent.append(bytes(data))
        self.inner.sendall(data)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_a_command_refused_before_the_acks_aborts_them_and_is_raised(store: RedisEventStore) -> None:
    """Refused when queued (here: no values, as an out-of-memory LPUSH is refused): EXEC
    aborts, nothing is acked; the error is raised after every reply was read."""
    consumer = PartitionConsumer.for_store(store, "g-refused", "c")
    consumer.ensure_groups(start_id="$")
    queue = f"q-{new_match_id()}"
    _write(store, matches=3, each=1)
    first = consumer.read(count=100)
    _write(store, matches=1, each=1)
    with pytest.raises(Exception, match="aborted"):
        consumer.read(count=100, ack=first, before_ack=[_lpush(queue)])
    pending = _pending(store, "g-refused")
    assert _keys(first) < pending and len(pending) == 4  # not acked; the read still delivered its entry
    assert store.client.llen(queue) == 0
    assert consumer.read(count=100) == []  # the connection is in step
    redone = consumer.read_pending(count=100)
    assert _keys(redone) == pending


def test_a_command_failing_inside_the_transaction_is_raised(store: RedisEventStore) -> None:
    """A key of the wrong type: the push fails while EXEC runs it (the acks run regardless,
    which only a misconfigured queue key can cause); the caller hears of it."""
    consumer = PartitionConsumer.for_store(store, "g-wrongtype", "c")
    consumer.ensure_groups(start_id="$")
    queue = f"q-{new_match_id()}"
    store.client.set(queue, "not a list")
    _write(store, matches=2, each=1)
    first = consumer.read(count=100)
    with pytest.raises(Exception, match="WRONGTYPE"):
        consumer.read(count=100, ack=first, before_ack=[_lpush(queue, "a")])
    assert consumer.read(count=100) == []  # in step


def test_a_dropped_connection_with_commands_before_the_acks_is_raised_not_redone(store: RedisEventStore) -> None:
    """Whether the transaction ran is unknown then: raised to the caller (no read through the
    client, which would hide it); nothing ran here, the entries stay pending."""
    consumer = PartitionConsumer.for_store(store, "g-dropped", "c")
    consumer.ensure_groups(start_id="$")
    queue = f"q-{new_match_id()}"
    _write(store, matches=2, each=1)
    first = consumer.read(count=100)
    store.client.client_kill_filter(_type="normal", skipme=True)
    with pytest.raises((redis.exceptions.ConnectionError, OSError)):
        consumer.read(count=100, ack=first, before_ack=[_lpush(queue, "a")])
    assert _pending(store, "g-dropped") == _keys(first) and store.client.llen(queue) == 0
    again = consumer.read(count=100, ack=first, before_ack=[_lpush(queue, "a")])  # a new kept connection
    assert again == [] and _pending(store, "g-dropped") == set() and store.client.lrange(queue, 0, -1) == [b"a"]


def _owners(store: RedisEventStore, group: str) -> dict[tuple[int, str], tuple[str, int]]:
    """(partition, entry id) -> (the consumer holding it, times delivered)."""
    return {(p, row["message_id"].decode()): (row["consumer"].decode(), row["times_delivered"])
            for p in range(store.partitions)
            for row in store.client.xpending_range(store.keys.partition_stream(p), group, "-", "+", 10_000)}


def test_hold_keeps_a_consumers_entries_from_every_claim_and_names_those_taken_over(store: RedisEventStore) -> None:
    """A consumer still working on entries holds them: no XAUTOCLAIM takes them over (its own
    included), one another consumer took over while it stalled stays with that one and is
    named, an acked one is left alone and not named (the group delivers it to no one again: only
    one of a group that went back is gone); delivery counts do not grow."""
    _write(store)
    holder = PartitionConsumer.for_store(store, "g", "holder")
    got = holder.read(count=100)
    done, taken, kept = got[:2], got[2:5], got[5:]
    holder.ack(done)
    time.sleep(0.12)  # every entry idle long enough to be claimed at 100 ms
    for entry in taken:  # another consumer took these over while the holder stalled
        store.client.xclaim(store.keys.partition_stream(entry.partition), "g", "other", 100, [entry.entry_id])

    taken_over, gone = holder.hold(got)
    assert _keys(taken_over) == _keys(taken) and gone == []

    assert PartitionConsumer.for_store(store, "g", "late").claim_stale(min_idle_ms=100) == []
    assert holder.claim_stale(min_idle_ms=100) == []  # nor its own: nothing it holds is stale
    owners = _owners(store, "g")
    assert owners == {**{k: ("holder", 1) for k in _keys(kept)}, **{k: ("other", 2) for k in _keys(taken)}}


def test_hold_with_the_group_gone_holds_nothing_and_names_every_entry_gone(store: RedisEventStore) -> None:
    _write(store, matches=2)
    holder = PartitionConsumer.for_store(store, "g", "holder")
    got = holder.read(count=100)
    for p in range(store.partitions):
        store.client.xgroup_destroy(store.keys.partition_stream(p), "g")
    assert holder.hold(got) == ([], got)
    assert holder.hold([]) == ([], [])


def _idle(store: RedisEventStore, group: str, entries: list[PartitionEntry], ms: int) -> None:
    """Their idle time set to `ms` (XCLAIM to the consumer holding them, with IDLE): as if it had
    been away that long, without waiting."""
    owners = _owners(store, group)
    for e in entries:
        store.client.xclaim(store.keys.partition_stream(e.partition), group, owners[(e.partition, e.entry_id)][0],
                            0, [e.entry_id], idle=ms, justid=True)


def test_hold_pending_holds_every_entry_pending_under_the_consumer_paged_and_no_other(store: RedisEventStore) -> None:
    """What a consumer restarted under its name does before it reads them back: none is then taken
    over by another's claim, however long it was away; one another consumer took over stays with
    that one; delivery counts do not grow."""
    _write(store, matches=8, each=6)
    reader = PartitionConsumer.for_store(store, "g", "holder")
    got = reader.read(count=100)
    taken = got[:3]
    _idle(store, "g", got, 600_000)
    for entry in taken:  # another consumer took these over meanwhile
        store.client.xclaim(store.keys.partition_stream(entry.partition), "g", "other", 0, [entry.entry_id])
    per_partition = max(sum(1 for e in got if e.partition == p) for p in range(store.partitions))
    assert per_partition > 2 * 2  # paged: more than two pages of 2 in some partition (a match's 6 in one)

    restarted = PartitionConsumer.for_store(store, "g", "holder")  # a new process, the same name
    assert restarted.hold_pending(page=2) == len(got) - len(taken)

    assert PartitionConsumer.for_store(store, "g", "late").claim_stale(min_idle_ms=60_000) == []
    owners = _owners(store, "g")
    assert owners == {**{k: ("holder", 1) for k in _keys(got[3:])}, **{k: ("other", 2) for k in _keys(taken)}}
    assert PartitionConsumer.for_store(store, "g", "none").hold_pending() == 0


def test_hold_pending_holds_a_few_hundred_entries_a_script_however_many_are_pending(
        store: RedisEventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A script runs with Redis blocked for everyone: about 3 us an entry held, so session 33's
    5,000 a script was ~16 ms (on a loaded 2-core host), every partition's in one pipeline, which
    Redis runs back to back; an append waits behind them. `XAUTOCLAIM` takes 400 a call."""
    stream = store.keys.partition_stream(0)
    consumer = PartitionConsumer.for_store(store, "g", "c", partitions=[0])
    consumer.ensure_groups("0")
    pipe = store.client.pipeline(transaction=False)
    for _ in range(1200):
        pipe.xadd(stream, {"e": b""})
    pipe.execute()
    store.client.xreadgroup("g", "c", {stream: ">"}, count=1200)  # left pending: a restart's backlog
    real, held = consumer._scripts, []

    def counting(script, calls):  # type: ignore[no-untyped-def]
        replies = real(script, calls)
        held.extend(int(reply[0]) for reply in replies)
        return replies

    monkeypatch.setattr(consumer, "_scripts", counting)
    assert consumer.hold_pending() == 1200
    assert sum(held) == 1200 and max(held) <= 500, held


def test_hold_sends_a_few_hundred_ids_a_script_however_many_are_kept(
        store: RedisEventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """~4.6 us an id inside the script (an XPENDING each, then the XCLAIM): 5,000 deferred entries of
    a partition were ~23 ms of Redis blocked in one script, every third of CLAIM_IDLE_MS."""
    stream = store.keys.partition_stream(0)
    consumer = PartitionConsumer.for_store(store, "g", "c", partitions=[0])
    consumer.ensure_groups("0")
    pipe = store.client.pipeline(transaction=False)
    for seq in range(1, 1201):
        pipe.xadd(stream, {"e": EventEnvelope(match_id="m", seq=seq).SerializeToString()})
    pipe.execute()
    kept = consumer.read(count=1200)  # waiting, say, for an earlier seq
    assert len(kept) == 1200
    real, sent = consumer._scripts, []

    def counting(script, calls):  # type: ignore[no-untyped-def]
        sent.extend(len(args) - 2 for _, args in calls)
        return real(script, calls)

    monkeypatch.setattr(consumer, "_scripts", counting)
    assert consumer.hold(kept) == ([], [])
    assert sum(sent) == len(kept) and max(sent) <= 500, sent


def test_a_read_from_a_group_another_consumer_recreated_counts_as_a_reconnect(store: RedisEventStore) -> None:
    """The group's position went back (recreated from the start): the entries a caller keeps from
    earlier reads are pending under no one now, to be delivered again (`reconnects` tells it)."""
    _write(store, matches=4, each=3)
    consumer = PartitionConsumer.for_store(store, "g", "c")
    consumer.ensure_groups("0")
    first = consumer.read(count=2)
    assert first and consumer.read(count=2) and consumer.reconnects == 0  # reading on is no reconnect
    _write(store, matches=2, each=1)
    for p in range(store.partitions):
        store.client.xgroup_destroy(store.keys.partition_stream(p), "g")
    PartitionConsumer.for_store(store, "g", "other").ensure_groups("0")
    again = consumer.read(count=100)
    assert _keys(first) <= _keys(again)
    assert consumer.reconnects == 1
    assert consumer.read(count=100) == [] and consumer.reconnects == 1


def test_the_hold_scripts_are_loaded_again_after_a_script_flush(store: RedisEventStore) -> None:
    _write(store, matches=2)
    holder = PartitionConsumer.for_store(store, "g", "holder")
    got = holder.read(count=100)
    store.client.script_flush()
    assert holder.hold(got) == ([], [])
    store.client.script_flush()
    assert holder.hold_pending() == len(got)


@pytest.fixture()
def cluster(tmp_path) -> Iterator[redis.RedisCluster]:  # type: ignore[no-untyped-def]
    """A one-node Redis Cluster (every slot on it): the cluster client and its pipelines."""
    from famiglia.localstack.redis_server import RedisServer, free_port

    server = RedisServer(data_dir=tmp_path, appendfsync="no",
                         extra_args=("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                     # its bus port is its port + 10000 unless told: past 65535
                                     # for a port above 55535, which free_port gives a fifth of the time
                                     "--cluster-port", str(free_port()))).start()
    try:
        plain = redis.Redis(port=server.port)
        plain.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        while plain.cluster("INFO")["cluster_state"] != "ok":  # the slots take effect within moments
            time.sleep(0.01)
        plain.close()
        client = redis.RedisCluster(host="127.0.0.1", port=server.port)
        yield client
        client.close()
    finally:
        server.stop()


def test_hold_on_a_cluster_loads_its_scripts_and_again_after_a_script_flush(cluster: redis.RedisCluster) -> None:
    """A cluster pipeline leaves a NOSCRIPT to its caller (redis-py's Script in one loads nothing):
    before session 33 `hold` failed there every time, the script never loaded."""
    from famiglia.eventstore.redis_store import KeyLayout

    keys = KeyLayout(partitions=4)
    holder = PartitionConsumer(cluster, keys, "g", "holder")
    holder.ensure_groups("0")
    got = []
    for p in range(keys.partitions):  # the partitions' streams are in other slots: a read each
        key = keys.partition_stream(p)
        cluster.xadd(key, {"e": EventEnvelope(match_id=f"m{p}", seq=1).SerializeToString()})
        [[_, entries]] = cluster.xreadgroup("g", "holder", {key: ">"})
        got += [PartitionEntry(p, entry_id.decode(), EventEnvelope.FromString(fields[b"e"]))
                for entry_id, fields in entries]
    assert len(got) == keys.partitions
    assert holder.hold(got) == ([], [])
    assert holder.hold_pending() == len(got)
    cluster.script_flush()
    assert holder.hold(got) == ([], [])
    cluster.script_flush()
    assert holder.hold_pending() == len(got)
    assert PartitionConsumer(cluster, keys, "g", "late").claim_stale(min_idle_ms=60_000) == []


def test_a_consumer_cannot_read_through_a_cluster_client(cluster: redis.RedisCluster) -> None:
    """The limits docs/eventstore.md and docs/projection.md state ("Redis Cluster"), held here so
    that lifting one shows: a read of every partition is one XREADGROUP over keys of several slots,
    which the cluster client refuses; a read of new entries goes through a connection kept from a
    single-node client's pool, which a cluster client has not, whatever the partitions. Only a read
    back of one partition's pending entries (and the hold scripts, above) works there."""
    from redis.exceptions import RedisClusterException

    from famiglia.eventstore.redis_store import KeyLayout

    keys = KeyLayout(partitions=4)
    for p in range(keys.partitions):
        cluster.xadd(keys.partition_stream(p), {"e": EventEnvelope(match_id=f"m{p}", seq=1).SerializeToString()})
    every = PartitionConsumer(cluster, keys, "g", "every")
    every.ensure_groups("0")
    with pytest.raises(RedisClusterException, match="same key slot"):
        every.read_pending(count=10)
    with pytest.raises(AttributeError, match="connection_pool"):
        every.read(count=10)
    one = PartitionConsumer(cluster, keys, "g", "one", partitions=[2])
    with pytest.raises(AttributeError, match="connection_pool"):
        one.read(count=10)
    assert one.read_pending(count=10) == []


def test_a_claim_and_a_cleanup_on_a_group_gone_take_nothing_and_raise_nothing(store: RedisEventStore) -> None:
    """A group gone (XGROUP DESTROY, a Redis that lost it) has no entry to take over and no consumer
    to forget: the next read creates it again. Both raised NOGROUP: the cleanup when the group went
    between the caller's look at its consumers and the script, failing the round."""
    _write(store, matches=2)
    consumer = PartitionConsumer.for_store(store, "g", "a")
    got = consumer.read(count=100)
    assert got
    for p in range(store.partitions):
        store.client.xgroup_destroy(store.keys.partition_stream(p), "g")
    assert consumer.claim_stale(min_idle_ms=0) == []
    assert consumer.forget_idle_consumers(got[0].partition, ["a", "b"], 0) == []


@pytest.mark.parametrize("first_read", ["new", "pending"])
def test_a_group_found_gone_is_made_again_where_its_consumer_started_it(store: RedisEventStore,
                                                                          first_read: str) -> None:
    """The bots dispatcher's group starts at `$` (matches from before it ran are not its business):
    found gone by a read (`XGROUP DESTROY`), it is made again at `$` too, not from `0`, which had the
    dispatcher go through every partition entry still in Redis again (before session 34)."""
    consumer = PartitionConsumer.for_store(store, "g-end", "c")
    consumer.ensure_groups(start_id="$")
    old = _write(store, matches=3, each=2)
    seen = consumer.read(count=100)
    assert {e.envelope.match_id for e in seen} == set(old)
    consumer.ack(seen)
    for p in range(store.partitions):
        store.client.xgroup_destroy(store.keys.partition_stream(p), "g-end")
    if first_read == "new":
        assert consumer.read(count=100) == []  # the kept connection's read finds the group gone
    else:
        assert consumer.read_pending(count=100) == []  # the client's read finds it gone
    assert consumer.reconnects >= 1
    new = _write(store, matches=2, each=1)
    got = consumer.read(count=100)
    assert {e.envelope.match_id for e in got} == set(new)


@pytest.mark.parametrize("how", ["read", "read_pending", "claim_stale"])
def test_an_entry_no_envelope_can_be_read_from_is_told_and_acked_and_the_good_ones_go_through(
        store: RedisEventStore, how: str) -> None:
    """Only a foreign XADD writes one (no `e` field, bytes that do not decode, or that decode to an
    envelope naming no match or seq). Before session
    34 it failed the read or claim that met it, every time: a claim took the good entries beside it
    along every `min_idle_ms`, and none was ever handled."""
    consumer = PartitionConsumer.for_store(store, "g-bad", "c")
    consumer.ensure_groups(start_id="$")
    told: list = []
    consumer.on_unreadable = told.extend
    stream = store.keys.partition_stream(0)
    before = _write(store, matches=4, each=2)
    garbage = store.client.xadd(stream, {"e": b"\xff\xff not an envelope"}).decode()
    foreign = store.client.xadd(stream, {"something": "else"}).decode()
    # bytes that decode, to no event: once an empty envelope, which the projection skipped as a
    # redelivery (seq 0) and acked with no dead letter
    empty = store.client.xadd(stream, {"e": b""}).decode()
    nameless = store.client.xadd(stream, {"e": EventEnvelope(seq=2, type="x").SerializeToString()}).decode()
    after = _write(store, matches=4, each=2)
    if how == "read":
        got = consumer.read(count=100)
    else:
        reader = "c" if how == "read_pending" else "dead"
        store.client.xreadgroup("g-bad", reader, {store.keys.partition_stream(p): ">"
                                                  for p in range(store.partitions)}, count=100)
        if how == "read_pending":
            got = consumer.read_pending(count=100)
        else:
            got = consumer.claim_stale(min_idle_ms=0, count=1000)  # the dead one's, every one
    assert sorted((e.envelope.match_id, e.envelope.seq) for e in got) == sorted(
        (m, s) for m in before + after for s in (1, 2))
    assert sorted((u.partition, u.entry_id) for u in told) == sorted(
        [(0, garbage), (0, foreign), (0, empty), (0, nameless)])
    reasons = {u.entry_id: u.reason for u in told}
    assert reasons[foreign] == "no `e` field" and "DecodeError" in reasons[garbage]
    assert reasons[empty].startswith("NotAnEvent") and reasons[nameless].startswith("NotAnEvent")
    assert consumer.unreadable == 4 and _pending(store, "g-bad") == _keys(got)


@pytest.mark.parametrize("how", ["read", "read_pending"])
def test_a_read_short_for_an_unreadable_entry_it_left_out_is_still_full(store: RedisEventStore, how: str) -> None:
    """Redis gave a full `count`: more may follow, though an entry was left out. Before session 34
    such a read looked like the partition's end (`full_partitions`), and a restarted consumer
    reading its pending entries back left the rest to an XAUTOCLAIM."""
    consumer = PartitionConsumer.for_store(store, "g-short", "c", partitions=[0])
    consumer.ensure_groups(start_id="$")
    stream = store.keys.partition_stream(0)
    ids = [store.client.xadd(stream, {"e": EventEnvelope(match_id="m", seq=1).SerializeToString()}).decode(),
           store.client.xadd(stream, {"e": b""}).decode()]
    ids += [store.client.xadd(stream, {"e": EventEnvelope(match_id="m", seq=s).SerializeToString()}).decode()
            for s in (2, 3, 4)]
    if how == "read_pending":
        store.client.xreadgroup("g-short", "c", {stream: ">"}, count=100)  # read before a restart
    seen: list[str] = []
    after: dict[int, str] | None = None
    for _ in range(5):
        got = consumer.read(count=2) if how == "read" else consumer.read_pending(count=2, after=after)
        seen += [e.entry_id for e in got]
        after = full_partitions(got, 2)
        if not after:
            break
    assert seen == [ids[0], *ids[2:]]
    assert full_partitions(consumer.read(count=2), 2) == {}
