"""The command service's LRU of hot matches (services/command/hot_matches.py): bounded by count
and by the bytes its matches hold, finished matches dropped first, never one a command holds."""

from __future__ import annotations

from famiglia.bots.toy import toy_registry
from famiglia.config import Settings
from famiglia.engine.registry import default_registry
from famiglia.eventstore.memory_store import InMemoryEventStore
from services.command.app import CommandApp, Viewer
from services.command.bootstrap import CommandSettings, bootstrap
from services.command.hot_matches import COMMAND_BYTES, MATCH_BYTES, HotMatches, held_bytes

REGISTRY = default_registry()
TOY = toy_registry()
SETTINGS = Settings(secret="unit-test-secret")


def _toy_app(store: InMemoryEventStore) -> CommandApp:
    return bootstrap(store=store, registry=TOY, settings=SETTINGS, command_settings=CommandSettings())


def _matches(app: CommandApp, n: int) -> list[str]:
    return [app.create_match("highcard", 2, seed=i, options={"hand": "2"}).match_id for i in range(n)]


def _move(app: CommandApp, match_id: str, command_id: str) -> None:
    """One command of the seat to act, as another replica of the service would make it."""
    m = app.matches.get(match_id).match
    seat = m.engine.pending(m.state)[0].seat
    app.submit(match_id, Viewer(seat), command_id, m.engine.legal_commands(m.state, seat)[0])


def _play_to_end(app: CommandApp, match_id: str) -> None:
    for i in range(64):
        if app.matches.get(match_id).match.finished:
            return
        _move(app, match_id, f"end-{i}")
    raise AssertionError(f"{match_id} never ended")


def _counted(hot: HotMatches) -> int:
    return sum(entry.size for entries in (hot._running, hot._finished) for entry in entries.values())


def test_the_lru_keeps_a_match_a_command_holds_and_drops_the_oldest_free_one() -> None:
    store = InMemoryEventStore()
    app = bootstrap(store=store, settings=SETTINGS)
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
    assert hot.get(ids[3]) is not None and len(hot) == 2


def test_finished_matches_go_first_then_the_least_recently_used_free_one() -> None:
    """A finished match is only read now (views, streams): it goes before any match still
    played, however recently it was read; among the running ones the least recently used goes,
    but never one a command holds."""
    store = InMemoryEventStore()
    app = _toy_app(store)
    a, b, c, d, e = _matches(app, 5)
    _play_to_end(app, b)
    hot = HotMatches(store, TOY, capacity=3)
    first = hot.get(a)
    hot.get(c)
    hot.get(b)  # the most recently used, but over
    hot.get(d)  # one too many: b goes, not a
    assert (a in hot, b in hot, c in hot, d in hot) == (True, False, True, True)
    with first.lock:  # a command is deciding on a, the oldest
        hot.get(e)
        assert (a in hot, c in hot, d in hot, e in hot) == (True, False, True, True)
        assert hot.get(a) is first


def test_a_match_that_ends_while_hot_goes_first_from_then_on() -> None:
    store = InMemoryEventStore()
    app = _toy_app(store)
    a, b, c = _matches(app, 3)
    hot = HotMatches(store, TOY, capacity=2)
    hot.get(a)
    played = hot.get(b)
    _play_to_end(app, b)  # by another replica: this one learns of it when it catches up
    with played.lock:
        hot.catch_up(played)
    hot.get(a)  # a is the most recently used now, b the least ...
    hot.get(b)  # ... until read again: b is over, so it goes all the same
    hot.get(c)
    assert (a in hot, b in hot, c in hot) == (True, False, True)


def test_the_matches_kept_hold_no_more_bytes_than_the_budget() -> None:
    store = InMemoryEventStore()
    app = _toy_app(store)
    ids = _matches(app, 5)
    one = held_bytes(app.matches.get(ids[0]).match)
    assert one >= MATCH_BYTES
    hot = HotMatches(store, TOY, capacity=100, budget=3 * one)
    for match_id in ids[:4]:
        hot.get(match_id)
    assert len(hot) == 3 and ids[0] not in hot
    assert hot.held_bytes == _counted(hot) == 3 * one


def test_a_match_caught_up_is_counted_anew_and_the_budget_kept() -> None:
    """The estimate follows the commands folded since (one `COMMAND_BYTES` each), learnt from
    another replica by a catch-up: over the budget then, the least recently used match goes."""
    store = InMemoryEventStore()
    app = _toy_app(store)
    ids = _matches(app, 3)
    one = held_bytes(app.matches.get(ids[0]).match)
    hot = HotMatches(store, TOY, capacity=100, budget=3 * one + COMMAND_BYTES)
    entries = [hot.get(match_id) for match_id in ids]
    _move(app, ids[2], "x1")
    _move(app, ids[2], "x2")  # two commands more than the budget allows for
    with entries[2].lock:
        hot.catch_up(entries[2])
    assert hot.get(ids[2]).size == held_bytes(entries[2].match) == one + 2 * COMMAND_BYTES
    assert ids[0] not in hot and ids[1] in hot and ids[2] in hot
    assert hot.held_bytes == _counted(hot) == 2 * one + 2 * COMMAND_BYTES


def test_a_match_folded_anew_after_the_store_went_back_is_counted_anew() -> None:
    store = InMemoryEventStore()
    app = _toy_app(store)
    [match_id] = _matches(app, 1)
    kept = store.version(match_id)
    for i in range(3):
        _move(app, match_id, f"lost-{i}")
    hot = HotMatches(store, TOY)
    entry = hot.get(match_id)
    ahead = entry.size
    stored = store._matches[match_id]  # the store goes back (a Redis restored from an older AOF)
    del stored.events[kept:]
    stored.version = kept
    with entry.lock:
        hot.catch_up(entry)  # the store no longer holds what was folded: folded anew
    assert hot.get(match_id).size == held_bytes(entry.match) == ahead - 3 * COMMAND_BYTES
    assert hot.held_bytes == ahead - 3 * COMMAND_BYTES


def test_a_match_bigger_than_the_budget_is_served_and_not_kept() -> None:
    store = InMemoryEventStore()
    app = _toy_app(store)
    small, big = _matches(app, 2)
    one = held_bytes(app.matches.get(small).match)
    _move(app, big, "b1")  # one command more than the budget allows for
    hot = HotMatches(store, TOY, budget=one + COMMAND_BYTES // 2)
    hot.get(small)
    served = hot.get(big)
    assert served.match.match_id == big and big not in hot and small in hot  # nothing dropped for it
    assert hot.get(big) is not served  # folded anew for the next call
    assert hot.held_bytes == one
    # One that grows past the budget while a command holds it stays until the command is done.
    growing = hot.get(small)
    _move(app, small, "past-the-budget")
    with growing.lock:
        hot.catch_up(growing)
        assert hot.get(small) is growing and hot.held_bytes == 0
    hot.get(small)
    assert small not in hot and len(hot) == 0 and hot.held_bytes == 0


def test_the_service_takes_its_bounds_from_its_settings() -> None:
    store = InMemoryEventStore()
    app = bootstrap(store=store, registry=TOY, settings=SETTINGS,
                    command_settings=CommandSettings(hot_matches=2, hot_matches_mb=1))
    ids = _matches(app, 3)
    for match_id in ids:
        app.matches.get(match_id)
    assert len(app.matches) == 2 and app.matches._budget == 1 << 20


def test_the_lru_holds_at_most_its_capacity() -> None:
    """Found by mutating HotMatches.get (`excess > 1`): one match over capacity is one too many."""
    store = InMemoryEventStore()
    app = bootstrap(store=store, settings=Settings(secret="unit-test-secret"))
    game = next(iter(REGISTRY))
    seats = REGISTRY.get(game).info.min_players
    ids = [app.create_match(game, seats, seed=i).match_id for i in range(3)]
    hot = HotMatches(store, REGISTRY, capacity=2)
    for match_id in ids:
        hot.get(match_id)
    assert [m in hot for m in ids] == [False, True, True]  # the least recently used went
