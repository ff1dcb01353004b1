"""The in-memory rematch asks, bound to an in-memory store, keep the contract with the trim that the
Redis scripts keep (tests/integration/test_rematch.py binds it on Redis); unbound, they know of no
trim, as before."""

from __future__ import annotations

from typing import Any

from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.eventstore.rematch_asks import InMemoryRematchAsks, RematchAsksStore
from tests.contracts.eventstore_contract import batch, new_match_id
from tests.contracts.rematch_asks_contract import RematchAsksContract


class TestInMemoryRematchAsks(RematchAsksContract):
    def make(self) -> tuple[Any, RematchAsksStore]:
        store = InMemoryEventStore()
        return store, InMemoryRematchAsks(store=store)


def test_asks_bound_to_no_store_know_of_no_trim() -> None:
    store, asks = InMemoryEventStore(), InMemoryRematchAsks()
    match_id = new_match_id()
    store.append(match_id, 0, batch(match_id, 0, 1))
    asks.fix_request_id(match_id, "first")
    assert store.trim(match_id) == 1
    assert asks.allow(match_id, "ops").allowed_by == "ops"
