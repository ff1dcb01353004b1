"""The in-memory store passes the event-store contract (and trims like Redis)."""

from __future__ import annotations

import pytest

from famiglia.eventstore import ConcurrencyConflict, EventStore
from famiglia.eventstore.memory_store import InMemoryEventStore
from tests.contracts.eventstore_contract import EventStoreContract, batch, new_match_id


class TestInMemoryEventStore(EventStoreContract):
    def make_store(self) -> EventStore:
        return InMemoryEventStore()


def test_trim_keeps_the_version_and_refuses_stale_appends() -> None:
    store = InMemoryEventStore()
    match = new_match_id()
    store.append(match, 0, batch(match, 0, 3), command_id="c1")
    assert store.trim(match) == 3
    assert store.read(match) == []
    assert store.version(match) == 3
    with pytest.raises(ConcurrencyConflict):
        store.append(match, 0, batch(match, 0, 1), command_id="c1")
    store.append(match, 3, batch(match, 3, 1))
    assert [e.seq for e in store.read(match)] == [4]
    assert [e.seq for e in store.read(match, after=3)] == [4]


def test_a_caller_mutating_an_envelope_cannot_change_the_store() -> None:
    store = InMemoryEventStore()
    match = new_match_id()
    events = batch(match, 0, 1)
    store.append(match, 0, events)
    events[0].type = "changed"
    store.read(match)[0].type = "changed too"
    assert store.read(match)[0].type == "tick"
