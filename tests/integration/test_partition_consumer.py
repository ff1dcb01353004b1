"""The partition consumer's own read path: XACKs and the next XREADGROUP in one write on a
kept connection, the replies taken from its hiredis reader — the same bytes redis-py would
send and the same entries and acks its client path gives."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.eventstore.port import PartitionEntry
from famiglia.eventstore.redis_store import RedisEventStore
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
