"""Random play's written-out loop plays exactly what the plain loop plays, on every game."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any

import pytest

from famiglia.engine import MatchConfig, Rng, derive_seed, fold
from famiglia.engine.registry import default_registry
from famiglia.testing.random_play import Step, choose_actor, play_random

GAMES = [engine.info.game_id for engine in default_registry().engines()]


def keeper_of(steps: list[Step]) -> Callable[[Any, Step, Any], None]:
    """An `on_step` that keeps every Step it is shown."""
    return lambda before, step, after: steps.append(step)


@pytest.mark.parametrize("game", GAMES)
def test_random_play_makes_the_draws_of_the_plain_loop(game: str) -> None:
    """Same seat, command, events and version for every step as choose_actor + decide with an
    Rng seeded by derive_seed + fold; and on_step sees the steps play.steps lists."""
    engine = default_registry().get(game)
    for seats, seed in [(engine.info.min_players, 4), (engine.info.max_players, 9)]:
        seen: list[Step] = []
        play = play_random(engine, seats, seed, on_step=keeper_of(seen))
        state = fold(engine, engine.setup(MatchConfig(seats=seats, options={}), seed))
        chooser = random.Random(seed)
        version = len(play.setup_events) + 1
        plain = []
        while engine.result(state) is None:
            picked = choose_actor(engine, state, chooser)
            assert picked is not None
            seat, command = picked
            events = engine.decide(state, seat, command, Rng(derive_seed(seed, version)))
            plain.append((seat, command, events, version))
            state = fold(engine, events, state)
            version += len(events)
        assert [(s.seat, s.command, s.events, s.version_before) for s in play.steps] == plain
        assert seen == play.steps and play.state == state and len(plain) > 5
        assert play.events == play.setup_events + [e for row in plain for e in row[2]]


def test_a_generator_an_engine_keeps_is_never_reused() -> None:
    """play_random re-aims one generator while nobody else holds it: an engine that keeps the
    ones it is given must still draw each command's own numbers, later."""
    engine = default_registry().get("goodcritters")
    kept: list[tuple[int, Rng]] = []
    calls = [0]

    def keeping_decide(state, seat, command, rng):  # type: ignore[no-untyped-def]
        events = engine.decide(state, seat, command, rng)
        if calls[0] % 3 == 0 and rng._rand is None:  # kept undrawn: its first draws are known
            kept.append((calls[0], rng))
        calls[0] += 1
        return events

    keeper = dataclasses.replace(engine, decide=keeping_decide)  # type: ignore[type-var]
    play = play_random(keeper, 4, 2)
    assert play.steps == play_random(engine, 4, 2).steps and len(kept) > 10
    for index, rng in kept:
        fresh = Rng.derive(2, play.steps[index].version_before)
        assert [rng.randrange(1000) for _ in range(3)] == [fresh.randrange(1000) for _ in range(3)]
