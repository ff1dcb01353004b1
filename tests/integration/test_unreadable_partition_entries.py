"""Partition stream entries no event can be read from (only a foreign XADD writes one: no `e` field,
bytes that do not decode, or bytes that decode to an envelope naming no match or seq) among good
ones, on a real Redis: every reader of the partition streams outside the consumer groups goes past
them. Before session 34 `read_partition` failed on them, and with it the rebuild, the replay's event
index and the bots dispatcher's recovery, every time."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from famiglia.bots.toy import toy_registry
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.replay.sources import StoreSource
from famiglia.v1.envelope_pb2 import EventEnvelope
from services.bots.dispatcher import Dispatcher
from tests.contracts.eventstore_contract import batch, new_match_id

pytestmark = pytest.mark.redis

GARBAGE = [
    {"e": b"\xff\xff not an envelope"},  # does not decode
    {"something": "else"},  # no `e` field
    {"e": b""},  # decodes: an empty envelope
    {"e": EventEnvelope(seq=3, type="x").SerializeToString()},  # decodes: names no match
]


@pytest.fixture()
def store(redis_url: str) -> Iterator[RedisEventStore]:
    store = RedisEventStore.connect(redis_url, partitions=2)
    yield store
    store.close()


def _matches_of(store: RedisEventStore, partition: int, n: int) -> list[str]:
    found: list[str] = []
    while len(found) < n:
        match = new_match_id()
        if store.partition_of(match) == partition:
            found.append(match)
    return found


def _good_and_garbage(store: RedisEventStore, partition: int = 0) -> tuple[list[tuple[str, int]], list[str]]:
    """Good entries, each kind of garbage, good entries again: (match, seq) of the good, the garbage ids."""
    good: list[tuple[str, int]] = []
    garbage: list[str] = []
    stream = store.keys.partition_stream(partition)
    for match in _matches_of(store, partition, 3):
        store.append(match, 0, batch(match, 0, 2))
        good += [(match, 1), (match, 2)]
    for fields in GARBAGE:
        garbage.append(store.client.xadd(stream, fields).decode())
    for match in _matches_of(store, partition, 3):
        store.append(match, 0, batch(match, 0, 2))
        good += [(match, 1), (match, 2)]
    return good, garbage


@pytest.mark.parametrize("count", [1, 2, 3, 100])
def test_a_page_leaves_them_out_and_ends_at_the_last_entry_read(store: RedisEventStore, count: int) -> None:
    """Paged from the last entry read, readable or not, a caller meets every good entry and every
    garbage one once, whatever the page size (a page of garbage alone included)."""
    good, garbage = _good_and_garbage(store)
    seen, unreadable, after = [], [], "0-0"
    while True:
        page = store.read_partition_page(0, after, count)
        seen += [(e.envelope.match_id, e.envelope.seq) for e in page.entries]
        unreadable += page.unreadable
        if not page.more:
            break
        after = page.last_entry_id
    assert seen == good
    assert [u.entry_id for u in unreadable] == garbage
    assert [u.reason.split(":")[0] for u in unreadable] == ["DecodeError", "no `e` field", "NotAnEvent", "NotAnEvent"]
    assert [(e.envelope.match_id, e.envelope.seq) for e in store.read_partition(0, count=100)] == good


def test_the_replay_index_finds_the_events_after_them(store: RedisEventStore) -> None:
    good, _ = _good_and_garbage(store)
    last_match = good[-1][0]
    last = store.read(last_match)[-1]
    source = StoreSource(store, chunk=2)
    found = source.find(last.event_id)
    assert found is not None and (found.match_id, found.seq) == (last_match, last.seq)
    first = store.read(good[0][0])[0]
    assert source.find(first.event_id) is not None


def test_the_dispatcher_recovery_goes_on_past_them(store: RedisEventStore) -> None:
    good, _ = _good_and_garbage(store)
    dispatcher = Dispatcher(store, toy_registry(), None, stall_seconds=600)  # type: ignore[arg-type]
    loaded: list[str] = []
    dispatcher._load = lambda match_id: loaded.append(match_id)  # type: ignore[method-assign]
    dispatcher.tell_owed = lambda: None  # type: ignore[method-assign]
    dispatcher.recover()
    assert sorted(loaded) == sorted({match for match, _ in good})


def test_a_stream_top_that_decodes_to_no_event_is_at_its_entry_ids_time(store: RedisEventStore) -> None:
    """An empty `e` once gave an empty envelope, of time 0: a lag of some 56 years."""
    match = _matches_of(store, 0, 1)[0]
    store.append(match, 0, batch(match, 0, 1))
    top = store.client.xadd(store.keys.partition_stream(0), {"e": b""}).decode()
    assert store.partition_tops()[0].envelope.timestamp.ToMilliseconds() == int(top.split("-")[0])
