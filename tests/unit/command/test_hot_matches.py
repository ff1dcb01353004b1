"""The command service's LRU of hot matches (services/command/hot_matches.py)."""

from __future__ import annotations

from famiglia.config import Settings
from famiglia.engine.registry import default_registry
from famiglia.eventstore.memory_store import InMemoryEventStore
from services.command.bootstrap import bootstrap
from services.command.hot_matches import HotMatches

REGISTRY = default_registry()


def test_the_lru_keeps_a_match_a_command_holds_and_drops_the_oldest_free_one() -> None:
    store = InMemoryEventStore()
    app = bootstrap(store=store, settings=Settings(secret="unit-test-secret"))
    game = next(iter(REGISTRY))
    seats = REGISTRY.get(game).info.min_players
    ids = [app.create_match(game, seats, seed=i).match_id for i in range(4)]
    hot = HotMatches(store, REGISTRY, capacity=2)
    held = hot.get(ids[0])
    with held.lock:  # a command is deciding on the oldest match
        hot.get(ids[1])
        hot.get(ids[2])  # over capacity: the oldest free one goes, not the held one
        assert hot.get(ids[0]) is held  # the same entry, the same lock
    hot.get(ids[3])
    assert hot.get(ids[3]) is not None and len(hot._entries) == 2
