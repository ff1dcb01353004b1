"""The games' named clocks (engine `clock_key`, docs/engines.md "Clocks"): a key names one
clock, so it must come back only where the rules let that clock stand still and go on."""

from __future__ import annotations

import random

import pytest

from famiglia.engine import MatchConfig, Rng, clock_key, fold
from famiglia.engine.registry import default_registry


def _walk(game: str, seats: int, seed: int, options: dict[str, str] | None = None):
    """(state, pending) of every asking of a random game, in order."""
    engine = default_registry().get(game)
    state = fold(engine, engine.setup(MatchConfig(seats, options or {}), seed))
    pick, rng = random.Random(seed), Rng(seed)
    for _ in range(engine.info.max_steps):
        pendings = engine.pending(state)
        if not pendings:
            return
        yield from ((state, p) for p in pendings)
        seat = pick.choice(pendings).seat
        command = pick.choice(engine.legal_commands(state, seat))
        for event in engine.decide(state, seat, command, rng):
            state = engine.evolve(state, event)


@pytest.mark.parametrize("options", [{}, {"step3_mode": "turns"}, {"payoff.enabled": "true"}])
def test_a_goodcritters_clock_once_left_is_never_asked_again_GC_D05(options: dict[str, str]) -> None:
    """GC-D05 (Step 3, one deadline from its start), GC-D06 (a Step 3a turn, Step 3b), GC-D02
    (the Boss's Step 2): each key is one stretch of the game, never a later one's too."""
    engine = default_registry().get("goodcritters")
    for seed in range(6):
        done: set[str] = set()
        last = ""
        named = 0
        for state, pending in _walk("goodcritters", 4 + seed % 3, seed, options):
            key = clock_key(engine, state, pending)
            assert key, (state.step, pending)  # every GoodCritters decision is on a named clock
            if key != last:
                assert key not in done, (key, state.round, state.step)
                done.add(last)
                last = key
            named += 1
        assert len(done) > 10 and named > len(done)


def test_a_nostra_city_turn_clock_stands_still_only_for_choices_inside_the_turn_NC_D02() -> None:
    """NC-D02: a phase turn's key is asked of its seat alone, and between two askings of it
    only choices (each on its own clock, key "") come; once another turn's key is asked, the
    old one never comes back."""
    engine = default_registry().get("nostra_city")
    for seed in range(4):
        done: set[str] = set()
        current, turns = "", 0
        for state, pending in _walk("nostra_city", 3 + seed % 3, seed):
            key = clock_key(engine, state, pending)
            if not key:
                assert state.choice is not None and state.choice.seat == pending.seat
                continue
            assert pending.seat == state.turn_seat
            if key != current:
                assert key not in done, key
                done.add(current)
                current, turns = key, turns + 1
        assert turns >= 3 * 6  # a turn at least in every phase of the six months


@pytest.mark.parametrize("game", ["nothing_personal", "grifters"])
def test_games_without_named_clocks_time_each_decision_afresh(game: str) -> None:
    engine = default_registry().get(game)
    seats = engine.info.min_players
    assert all(clock_key(engine, state, p) == "" for state, p in _walk(game, seats, 1))
