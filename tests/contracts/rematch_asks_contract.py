"""The rematch asks' contract with the trim, which both adapters keep: each binds it in one line,
with the event store its asks are bound to.

    class TestInMemoryRematchAsks(RematchAsksContract):
        def make(self) -> tuple[Any, RematchAsksStore]:
            store = InMemoryEventStore()
            return store, InMemoryRematchAsks(store=store)

Of a trim and a write to a finished match's asks, whichever comes first wins, and neither leaves
the other half done: every write (an ask, `fix_request_id`, `allow`) refuses a match trimmed
(FinishedMatchArchived, nothing stored), and the trim refuses a match whose rematch's creation is
pending (RematchPending, nothing dropped), since the rematch is made from it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from famiglia.eventstore.rematch_asks import (
    FinishedMatchArchived,
    RematchAsks,
    RematchAsksStore,
    RematchPending,
)
from tests.contracts.eventstore_contract import batch, new_match_id


class RematchAsksContract(ABC):
    """Bind with `make()`: an event store with `append`, `read` and `trim`, and the asks bound to it."""

    @abstractmethod
    def make(self) -> tuple[Any, RematchAsksStore]:
        """A fresh store and its asks."""

    @pytest.fixture()
    def bound(self) -> Iterator[tuple[Any, RematchAsksStore]]:
        store, asks = self.make()
        try:
            yield store, asks
        finally:
            store.close()

    @staticmethod
    def _trimmed(store: Any) -> str:
        match_id = new_match_id()
        store.append(match_id, 0, batch(match_id, 0, 3))
        assert store.trim(match_id) == 3
        return match_id

    @pytest.mark.parametrize("write", ["ask", "ask_with_table", "fix_request_id", "allow"])
    def test_no_write_takes_a_match_trimmed_and_none_stores_anything(self, bound, write: str) -> None:
        store, asks = bound
        match_id = self._trimmed(store)
        calls: dict[str, Callable[[], object]] = {
            "ask": lambda: asks.ask(match_id, 0),
            "ask_with_table": lambda: asks.ask(match_id, 0, (0, 1), "a-request-id", at_ms=1_000),
            "fix_request_id": lambda: asks.fix_request_id(match_id, "a-request-id", at_ms=1_000),
            "allow": lambda: asks.allow(match_id, "ops"),
        }
        with pytest.raises(FinishedMatchArchived):
            calls[write]()
        assert asks.look(match_id) == RematchAsks(frozenset())
        assert asks.pending(10**15) == []

    def test_a_match_trimmed_after_its_first_ask_keeps_that_ask_and_takes_no_more(self, bound) -> None:
        store, asks = bound
        match_id = new_match_id()
        store.append(match_id, 0, batch(match_id, 0, 2))
        asks.ask(match_id, 0, (0, 1), "first", at_ms=1_000)
        store.trim(match_id)
        for write in (lambda: asks.ask(match_id, 1, (0, 1), "first", at_ms=1_000),
                      lambda: asks.fix_request_id(match_id, "first", at_ms=1_000),
                      lambda: asks.allow(match_id, "ops")):
            with pytest.raises(FinishedMatchArchived):
                write()
        assert asks.look(match_id) == RematchAsks(frozenset({0}))
        assert asks.pending(10**15) == []

    def test_the_trim_keeps_a_match_whose_rematch_is_pending_until_it_is_made(self, bound) -> None:
        store, asks = bound
        match_id = new_match_id()
        store.append(match_id, 0, batch(match_id, 0, 2))
        asks.ask(match_id, 0, (0, 1), "first", at_ms=1_000)
        assert asks.ask(match_id, 1, (0, 1), "first", at_ms=1_000).request_id == "first"
        with pytest.raises(RematchPending):
            store.trim(match_id)
        assert [e.seq for e in store.read(match_id)] == [1, 2]
        asks.drop_pending(match_id)  # made
        assert store.trim(match_id) == 2

    def test_a_request_id_fixed_keeps_the_match_too(self, bound) -> None:
        store, asks = bound
        match_id = new_match_id()
        store.append(match_id, 0, batch(match_id, 0, 1))
        assert asks.fix_request_id(match_id, "first", at_ms=1_000) == "first"
        with pytest.raises(RematchPending):
            store.trim(match_id)
        assert asks.pending(10**15) == [match_id]

    def test_a_match_not_trimmed_takes_every_write(self, bound) -> None:
        store, asks = bound
        match_id = new_match_id()
        store.append(match_id, 0, batch(match_id, 0, 1))
        assert asks.allow(match_id, "ops").allowed_by == "ops"
        assert asks.ask(match_id, 0).fresh
        assert asks.fix_request_id(match_id, "first", at_ms=1_000) == "first"
        assert asks.look(match_id) == RematchAsks(frozenset({0}), "first", "ops")
