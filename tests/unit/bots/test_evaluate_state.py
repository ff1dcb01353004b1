"""State evaluators give exactly the number the View evaluators give, so the one-ply
player that uses them chooses exactly as before."""

from __future__ import annotations

import random
from typing import Any

import pytest

from famiglia.bots import evaluate
from famiglia.bots.arena import play_match
from famiglia.bots.evaluate import STATE_EVALUATORS, evaluate_view
from famiglia.bots.games import playable_registry
from famiglia.bots.heuristic import OnePlyHeuristic
from famiglia.bots.policy import Decision
from famiglia.bots.search import sample_world, step
from famiglia.engine import Engine, MatchConfig, Rng, RuleViolation, fold

GAMES = sorted(STATE_EVALUATORS)


def engine(game_id: str) -> Engine:
    return playable_registry().get(game_id)


def random_states(rules: Engine, seats: int, seed: int, most: int = 120) -> list[Any]:
    """The true states of a random game, and worlds a seat samples from its view of them."""
    chooser = random.Random(seed)
    state = fold(rules, rules.setup(MatchConfig(seats, {}), seed))
    states = [state]
    for n in range(most):
        if rules.result(state) is not None:
            break
        pendings = rules.pending(state)
        seat = pendings[chooser.randrange(len(pendings))].seat
        legal = rules.legal_commands(state, seat, limit=64)
        command = legal[chooser.randrange(len(legal))]
        try:
            state = fold(rules, rules.decide(state, seat, command, Rng.derive(seed, n)), state)
        except RuleViolation:
            continue
        states.append(state)
        world = sample_world(rules, rules.view(state, seat), seat, Rng.derive(seed + 1, n))
        if world is not None:
            states.append(world)
            after = step(rules, world, seat, command, Rng.derive(seed + 2, n))
            if after is not None:
                states.append(after)
    return states


@pytest.mark.parametrize("game_id", GAMES)
def test_a_state_evaluator_equals_the_view_evaluator_on_every_state(game_id: str) -> None:
    rules = engine(game_id)
    fast = STATE_EVALUATORS[game_id]
    compared, nonzero = 0, 0
    for seats in range(rules.info.min_players, rules.info.max_players + 1):
        for state in random_states(rules, seats, seed=seats * 101):
            for seat in range(seats):
                expected = evaluate_view(game_id, rules.view(state, seat), seat)
                assert fast(state, seat) == expected, (game_id, seats, seat)
                compared += 1
                nonzero += expected != 0.0
    assert compared > 100 and nonzero > compared // 4  # the comparison saw real positions


def test_goodcritters_remembers_a_stash_by_identity_not_by_equal_contents() -> None:
    values = {"a": 1000, "b": 2000}
    first = ("a", "b")
    assert evaluate._stash_value(first, values) == 3000
    assert evaluate._stash_value(("b",), values) == 2000
    assert evaluate._stash_value(first, values) == 3000


class Enough(Exception):
    pass


def choices(rules: Engine, seats: int, seed: int, most: int = 150) -> list[bytes]:
    """The first `most` commands the heuristic chose in a match where it holds every seat."""
    chosen: list[bytes] = []
    policy = OnePlyHeuristic()

    class Recorded:
        def choose(self, rules: Engine, decision: Decision) -> Any:
            command = policy.choose(rules, decision)
            chosen.append(command.SerializeToString())
            if len(chosen) >= most:
                raise Enough
            return command

    try:
        play_match(rules, [Recorded() for _ in range(seats)], seed)  # type: ignore[list-item]
    except Enough:
        pass
    return chosen


@pytest.mark.parametrize("game_id", GAMES)
def test_the_heuristic_chooses_the_same_with_and_without_state_evaluators(
        game_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rules = engine(game_id)
    seats = rules.info.min_players
    with_states = choices(rules, seats, seed=5)
    monkeypatch.setattr(evaluate, "STATE_EVALUATORS", {})
    with_views = choices(rules, seats, seed=5)
    assert len(with_states) > 10
    assert with_states == with_views
