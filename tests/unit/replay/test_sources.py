"""Event sources: the hot store finds any event id, the layered source falls back whole to the archive."""

from __future__ import annotations

import random
from collections import OrderedDict

from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.replay.sources import EventIndex, EventLocation, LayeredSource, MemorySource, StoreSource

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
