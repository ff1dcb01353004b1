"""Event sources: the hot store finds any event id, the layered source falls back whole to the archive."""

from __future__ import annotations

import random
from collections import OrderedDict

from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.replay.sources import EventIndex, EventLocation, LayeredSource, MemorySource, StoreSource
from famiglia.v1.envelope_pb2 import EventEnvelope

from .games import copy, game_ids, recorded


def _two_matches() -> tuple[InMemoryEventStore, list, list]:
    store = InMemoryEventStore(partitions=4)
    a, b = copy(recorded(game_ids()[-1], 3)), copy(recorded(game_ids()[-1], 11))
    for envelopes in (a, b):
        store.append(envelopes[0].match_id, 0, envelopes)
    return store, a, b


def test_the_store_source_finds_event_ids_of_matches_it_never_read() -> None:
    store, a, b = _two_matches()
    source = StoreSource(store, chunk=7)
    assert source.find(b[-1].event_id) == EventLocation(b[0].match_id, len(b))
    assert source.find(a[3].event_id) == EventLocation(a[0].match_id, 4)
    assert source.find("01NOSUCHEVENT") is None
    late = copy(recorded(game_ids()[-1], 5))
    store.append(late[0].match_id, 0, late)
    assert source.find(late[2].event_id) == EventLocation(late[0].match_id, 3)


def test_the_index_forgets_the_oldest_beyond_its_capacity() -> None:
    index = EventIndex(capacity=3)
    envelopes = copy(recorded(game_ids()[-1]))[:5]
    index.note(envelopes)
    assert index.get(envelopes[0].event_id) is None
    assert index.get(envelopes[4].event_id) == EventLocation(envelopes[0].match_id, 5)


def test_the_index_finds_and_forgets_exactly_what_an_lru_of_locations_would() -> None:
    """The index packs each entry in one int under a number per match (session 35: ~300 bytes
    an entry down to ~150) and keeps its order in a deque where a look-up appends the id again.
    Checked against the OrderedDict of EventLocations it replaced, over notes mixing three
    matches (as a partition page does), ids noted again (they keep their place) and enough
    look-ups that the deque is compacted a few times."""
    rng = random.Random(35)
    matches = [copy(recorded(game_ids()[-1], seed)) for seed in (3, 5, 11)]
    assert len({m[0].match_id for m in matches}) == 3
    envelopes = [env for match in matches for env in match]
    capacity = 40
    index = EventIndex(capacity=capacity)
    model: OrderedDict[str, EventLocation] = OrderedDict()
    for _ in range(8000):
        if rng.random() < 0.3:
            batch = [rng.choice(envelopes) for _ in range(rng.randint(1, 9))]
            index.note(batch)
            for env in batch:
                model[env.event_id] = EventLocation(env.match_id, env.seq)
            while len(model) > capacity:
                model.popitem(last=False)
        else:
            env = rng.choice(envelopes)
            expected = model.get(env.event_id)
            if expected is not None:
                model.move_to_end(env.event_id)
            assert index.get(env.event_id) == expected
        assert len(index) == len(model)
    assert index._order and len(index._order) <= 2 * capacity + 1024  # compacted, not grown for ever
    for event_id, location in list(model.items()):
        assert index.get(event_id) == location
    # A match whose entries are all gone leaves nothing behind (its id, its number).
    assert set(index._match_ids.values()) == {location.match_id for location in model.values()}
    index.note([])
    gone = copy(recorded(game_ids()[-1], 17))
    index.note(gone)
    assert set(index._match_ids.values()) == {gone[0].match_id}
    assert all(index.get(env.event_id) == EventLocation(gone[0].match_id, env.seq) for env in gone[-capacity:])


def test_the_index_keeps_the_place_of_an_id_noted_again_and_refreshes_one_looked_up() -> None:
    index = EventIndex(capacity=3)
    a, b, c, d, e = copy(recorded(game_ids()[-1]))[:5]
    index.note([a, b, c])
    index.note([a])  # noted again (a replay read of its match): still the oldest
    index.note([d])
    assert index.get(a.event_id) is None
    assert index.get(c.event_id) == EventLocation(c.match_id, c.seq)  # used: now the most recent
    index.note([e])
    assert [index.get(x.event_id) is not None for x in (b, c, d, e)] == [False, True, True, True]


def test_an_id_noted_again_in_a_match_it_alone_holds_stays_found() -> None:
    """A match whose one entry left is noted again (a replay read of the match after the rest
    was evicted; here simply twice) counted its entries down to none first, dropping the match's
    number, then up on the number gone: a KeyError out of `note`, and the entry left pointing at
    no match, so every later look-up of it (and its eviction) raised too."""
    index = EventIndex(capacity=3)
    a, b, c = copy(recorded(game_ids()[-1], 3))[:3]
    other = copy(recorded(game_ids()[-1], 11))[:2]
    index.note([a, b, c])
    assert index.get(a.event_id) is not None  # used: the last of its match to go
    index.note(other)  # b and c evicted: the match holds a alone
    index.note([a])
    assert index.get(a.event_id) == EventLocation(a.match_id, a.seq)
    index.note([a])
    assert index.get(a.event_id) == EventLocation(a.match_id, a.seq)
    index.note([b])  # the oldest (other[0]) goes
    assert [index.get(x.event_id) is not None for x in (other[0], other[1], a, b)] == [False, True, True, True]
    index.note(copy(recorded(game_ids()[-1], 17))[:3])  # all of the first match evicted
    assert index.get(a.event_id) is None and len(index) == 3
    assert a.match_id not in index._match_ids.values()


def _envelope(match_id: str, seq: int, event_id: str) -> EventEnvelope:
    return EventEnvelope(match_id=match_id, seq=seq, event_id=event_id)


def test_the_index_matches_an_lru_of_locations_over_small_matches_and_ids_moved() -> None:
    """Against the OrderedDict of EventLocations, over matches of one to three events (so a
    match often holds one entry when it is noted again) and ids noted under another match or
    seq (a foreign record stored by hand under an id taken)."""
    rng = random.Random(3500)
    matches = [f"m{n}" for n in range(12)]
    ids = [f"01ID{n:04d}" for n in range(30)]
    index = EventIndex(capacity=7)
    model: OrderedDict[str, EventLocation] = OrderedDict()
    for _ in range(20000):
        if rng.random() < 0.4:
            match_id = rng.choice(matches)
            batch = [_envelope(rng.choice((match_id, rng.choice(matches))), rng.randint(0, 3), rng.choice(ids))
                     for _ in range(rng.randint(1, 4))]
            index.note(batch)
            for env in batch:
                model[env.event_id] = EventLocation(env.match_id, env.seq)
            while len(model) > index.capacity:
                model.popitem(last=False)
        else:
            event_id = rng.choice(ids)
            expected = model.get(event_id)
            if expected is not None:
                model.move_to_end(event_id)
            assert index.get(event_id) == expected
        assert len(index) == len(model)
        assert set(index._match_ids.values()) == {location.match_id for location in model.values()}


def test_a_look_up_drops_a_few_stale_records_not_the_whole_order_at_once() -> None:
    """Each look-up leaves a record stale. A one-pass compaction, when they had doubled the order,
    held the lock (every find and read of the replay service) for 3-11 s at 2M entries: each
    look-up past that passes a few records, and the order stays under ~2.4 times the entries."""
    rng = random.Random(35)
    size = 3000
    index = EventIndex(capacity=size)
    ids = [f"01ID{n:06d}" for n in range(size)]
    index.note(_envelope(f"m{n // 50}", n % 50 + 1, event_id) for n, event_id in enumerate(ids))

    def records() -> int:
        return len(index._order) + len(getattr(index, "_swept", ()))

    most = before = records()
    for looked_up in (*(rng.sample(ids, len(ids)) for _ in range(4)), ids, ids, ids):  # at random; round
        for event_id in looked_up:
            assert index.get(event_id) is not None
            after = records()
            assert after >= before - 8, f"a look-up dropped {before - after} records"
            most, before = max(most, after), after
    assert 2 * size < most <= 2.4 * size
    index.note(_envelope("m-new", n + 1, f"01NEW{n:06d}") for n in range(size))  # all the old evicted
    assert records() == size and not any(index.get(event_id) for event_id in ids)


def test_an_envelope_of_a_negative_seq_is_left_out_of_the_index() -> None:
    """A foreign record stored by hand in a match's stream may say any seq, -1 too (`read` does
    not check it, as the partition readers do): packed as is, `number << 32 | -1` is -1, whose
    look-up raised KeyError (INTERNAL), as did the `note` that came to evict it (its match then
    counted an entry for ever). Like a seq past 32 bits, it is found through its match only (no
    timeline holds it anyway)."""
    index = EventIndex(capacity=2)
    good = copy(recorded(game_ids()[-1], 3))[:4]
    index.note([good[0], _envelope(good[0].match_id, -1, "01FOREIGN"), good[1]])
    assert index.get("01FOREIGN") is None
    assert index.get(good[1].event_id) == EventLocation(good[1].match_id, good[1].seq)
    index.note(good[2:])
    assert index.get(good[3].event_id) == EventLocation(good[3].match_id, good[3].seq) and len(index) == 2


def test_the_layered_source_reads_a_trimmed_match_whole_from_the_archive() -> None:
    store, a, _ = _two_matches()
    cold = MemorySource()
    cold.add(a)
    layered = LayeredSource(StoreSource(store), cold)
    assert layered.read(a[0].match_id) == a
    store.trim(a[0].match_id)
    assert layered.read(a[0].match_id) == a
    # Catching up a match seen at version 10: it went on and was trimmed since (its version,
    # kept by the trim, says so), so the rest comes from the archive; caught up, nothing new.
    assert layered.read(a[0].match_id, after=10) == a[10:]
    assert layered.read(a[0].match_id, after=len(a)) == []
    assert layered.find(a[5].event_id) == EventLocation(a[0].match_id, 6)
    assert LayeredSource(MemorySource(), cold).find(a[5].event_id) == EventLocation(a[0].match_id, 6)
    assert layered.read("no-such-match") == []


def test_the_memory_archive_keeps_bytes_so_readers_cannot_change_it() -> None:
    cold = MemorySource()
    envelopes = copy(recorded(game_ids()[-1]))
    cold.add(envelopes)
    cold.read(envelopes[0].match_id)[3].payload = b"changed"
    assert cold.read(envelopes[0].match_id) == envelopes
    assert cold.read(envelopes[0].match_id, after=5) == envelopes[5:]


def test_an_archive_that_fails_to_answer_is_no_empty_archive(tmp_path) -> None:
    """Only a database the projection never created (no archive table) reads as empty. An archive
    table the query fails on (here: a schema without the columns read; in production a statement
    timeout, a lock, a corrupt file) read as empty too, so a trimmed match was answered NOT_FOUND
    `unknown_match` and its events `unknown_event`, which a client believes: now the failure
    reaches the caller (INTERNAL, logged; UNAVAILABLE when the database is away)."""
    import sqlite3

    import pytest

    pytest.importorskip("famiglia.readmodels")
    from sqlalchemy.exc import OperationalError

    from famiglia.replay.sources import sql_archive_source

    path = tmp_path / "archive.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE event_archive (match_id TEXT, seq INTEGER)")
    cold = sql_archive_source(f"sqlite:///{path}")
    assert cold is not None
    with pytest.raises(OperationalError):
        cold.read("m-trimmed")
    with pytest.raises(OperationalError):
        cold.find("01TRIMMEDEVENT")
    empty = sql_archive_source(f"sqlite:///{tmp_path / 'empty.db'}")
    assert empty is not None and empty.read("m-none") == [] and empty.find("01NOSUCHEVENT") is None
