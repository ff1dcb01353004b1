"""Event sources: the hot store finds any event id, the layered source falls back whole to the archive."""

from __future__ import annotations

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
