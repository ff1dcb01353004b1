"""The engine's fast paths give exactly what the plain definitions give: the dict-backed
`replace_state`, the fold memo (setup's run included), the cached Config, prebuilt events and
listed commands, memoised pending and the Team check."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter

import pytest

from famiglia.engine import MatchConfig, Rng, fold
from famiglia.engine.protocol import DecisionKind, Pending
from famiglia.rules.grifters import ENGINE
from famiglia.rules.grifters import commands as C
from famiglia.rules.grifters import config as config_mod
from famiglia.rules.grifters import events as ev
from famiglia.rules.grifters import evolve as evolve_mod
from famiglia.rules.grifters.data import JOBS_BY_ID, SKILL_OF
from famiglia.rules.grifters.decide import team_matches
from famiglia.rules.grifters.flow import open_decision, timeout_seconds
from famiglia.rules.grifters.state import State, player_in, replace_state, state_with
from famiglia.testing.random_play import play_random

from ._helpers import new_game

OPTIONS = [{}, {"job_card_moves_before_reward": "false", "auto_single_option": "false"}]


def test_replace_state_is_dataclasses_replace_and_refuses_unknown_fields() -> None:
    state = new_game(3)
    fast = replace_state(state, round=4, coffers=9, played=True)
    slow = dataclasses.replace(state, round=4, coffers=9, played=True)
    assert fast == slow and hash(fast) == hash(slow) and type(fast) is State
    with pytest.raises(TypeError):
        replace_state(state, no_such_field=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.round = 3  # type: ignore[misc]


@pytest.mark.parametrize("options", OPTIONS)
def test_folding_afresh_gives_the_states_decide_folded(options: dict[str, str]) -> None:
    def check(before: State, step: object, after: State) -> None:
        state = before
        for event in step.events:  # type: ignore[attr-defined]
            state = evolve_mod.apply(state, event)
        assert state == after

    play = play_random(ENGINE, 3, 4, options, on_step=check)
    setup = ENGINE.setup(MatchConfig(3, options), 4)
    state = evolve_mod.apply_first(setup[0])
    for event in setup[1:]:
        state = evolve_mod.apply(state, event)
    assert state == fold(ENGINE, setup)  # the memo of setup's own run
    assert fold(ENGINE, play.events) == play.state


def test_cached_config_is_the_parsed_one() -> None:
    options = {"max_rounds": "20", "tiebreak": "fewest_specialists"}
    cached = config_mod.parse_items(3, tuple(sorted(options.items())))
    assert cached == config_mod.parse(3, options)
    assert cached is config_mod.parse_items(3, tuple(sorted(options.items())))


def test_prebuilt_events_and_listed_commands_equal_fresh_ones() -> None:
    assert ev.turn_began(1, 2, 3, False) is ev.turn_began(1, 2, 3, False)
    fresh = ev.Event()
    fresh.turn_began.seat, fresh.turn_began.round, fresh.turn_began.turn = 1, 2, 3
    assert ev.turn_began(1, 2, 3, False) == fresh
    assert ev.cards_refreshed(0, ["SP01-1"]) is ev.cards_refreshed(0, ("SP01-1",))
    state = new_game(2)
    listed = ENGINE.legal_commands(state, state.active)
    assert listed and all(c == C.pull_caper(c.pull_caper.card) for c in listed if c.HasField("pull_caper"))


@pytest.mark.parametrize("options", OPTIONS)
def test_memoised_pending_matches_the_decision_table(options: dict[str, str]) -> None:
    def expected(state: State) -> list[Pending]:
        decision = open_decision(state)
        if not decision:
            return []
        return [Pending(state.active, DecisionKind.TURN, decision, False, timeout_seconds(state, decision))]

    def check(before: State, step: object, after: State) -> None:
        assert ENGINE.pending(before) == expected(before)
        assert ENGINE.pending(after) == expected(after)

    play_random(ENGINE, 4, 8, options, on_step=check)


def test_team_matches_is_multiset_equality_of_skills() -> None:
    def by_counter(job: str, team: list[str]) -> bool:
        need = {skill: n for skill, n in JOBS_BY_ID[job].skills if n}
        return Counter(SKILL_OF[c] for c in team) == Counter(need)

    rng = random.Random(3)
    cards = sorted(SKILL_OF)
    matched = 0
    for job in JOBS_BY_ID:
        for _ in range(400):
            team = rng.sample(cards, rng.randint(0, 5))
            assert team_matches(job, team) == by_counter(job, team), (job, team)
            matched += by_counter(job, team)
    assert matched > 0


@pytest.mark.parametrize("options", OPTIONS)
def test_every_listed_command_is_accepted(options: dict[str, str]) -> None:
    rng = random.Random(5)

    def check(before: State, step: object, after: State) -> None:
        listed = ENGINE.legal_commands(before, before.active, limit=64)
        assert listed is not ENGINE.legal_commands(before, before.active, limit=64)
        for command in rng.sample(listed, min(3, len(listed))):
            ENGINE.decide(before, before.active, command, Rng(1))

    play_random(ENGINE, 3, 2, options, on_step=check)


@pytest.mark.parametrize("options", OPTIONS)
def test_evolve_on_fresh_events_is_apply(options: dict[str, str]) -> None:
    """The replay path: events decoded anew (no fold memo) go through evolve's own dispatch."""
    play = play_random(ENGINE, 4, 6, options)
    by_evolve = by_apply = None
    closed = 0
    for event in play.events:
        fresh = type(event).FromString(event.SerializeToString())
        if by_apply is None:
            by_apply = evolve_mod.apply_first(event)
        else:
            closed += bool(by_apply.choice) and event.WhichOneof("kind") != "choice_opened"
            by_apply = evolve_mod.apply(by_apply, event)
        by_evolve = ENGINE.evolve(by_evolve, fresh)
        assert by_evolve == by_apply
    assert by_evolve == play.state and closed > 0   # open choices were closed on the way


def test_player_in_and_state_with_are_dataclasses_replace() -> None:
    state = new_game(3)
    players = player_in(state.players, 1, {"stash": 7, "had_turn": True})
    assert players[1] == dataclasses.replace(state.players[1], stash=7, had_turn=True)
    assert players[0] is state.players[0] and players[2] is state.players[2] and state.players[1].stash != 7
    assert state_with(state, {"round": 5}) == dataclasses.replace(state, round=5)
    with pytest.raises(TypeError):
        player_in(state.players, 1, {"no_such_field": 1})
    with pytest.raises(TypeError):
        state_with(state, {"no_such_field": 1})
