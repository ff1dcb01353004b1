"""A command parsed from the wire (as the command service and the bot workers get them) is not
a listed one, yet the quick deciders take the Step 3 kinds: `decide` must give exactly what the
general path gives — the same events and states, or the same refusal — for any field values."""

from __future__ import annotations

from typing import Any

import pytest

import famiglia.rules.goodcritters.decide as decide_mod
from famiglia.engine import MalformedCommand, Rng, RuleViolation, fold
from famiglia.rules.goodcritters import ENGINE
from famiglia.rules.goodcritters import commands as cmd_mod
from famiglia.rules.goodcritters.decide import DECIDERS
from famiglia.rules.goodcritters.emitter import Emitter
from famiglia.rules.goodcritters.state import OVER, State
from famiglia.testing.random_play import play_random

OPTIONS = [{}, {"step3_mode": "turns"}, {"payoff.enabled": "true", "step3_card_choice_limit": "2"}]


def general(state: State, seat: int, command: Any) -> list[Any] | str:
    """The general way written out: the window checks, an Emitter, the kind's decider."""
    kind = command.WhichOneof("kind")
    if state.step is OVER:
        return "GC-E06"
    if not 0 <= seat < state.seats:
        return "GC-S02"
    if kind not in decide_mod._ALLOWED.get(state.step, frozenset()):
        return decide_mod.WINDOW_RULE[kind]
    em = Emitter(state, Rng(3))
    try:
        DECIDERS[kind](em, seat, getattr(command, kind))
    except RuleViolation as exc:
        return exc.code
    return em.done()


def commands() -> list[Any]:
    out = []
    for card in (-1, 0, 1, 2, 3, 4, 5, 6, 99):
        for commit in (False, True):
            out.append(cmd_mod.Command(choose_action_card={"card": card, "commit": commit}))
        out.append(cmd_mod.Command(change_action_card={"card": card}))
    for target in (-1, 0, 1, 2, 3, 4, 7, 8, 100):
        out.append(cmd_mod.Command(place_threat={"target": target}))
    out.append(cmd_mod.Command(withdraw_threat={}))
    out.append(cmd_mod.Command(commit={}))
    return [type(c).FromString(c.SerializeToString()) for c in out]


@pytest.mark.parametrize("options", OPTIONS)
def test_parsed_commands_decide_as_the_general_path(options: dict[str, str]) -> None:
    seen = {"accepted": 0, "refused": 0}
    parsed = commands()
    states: list[State] = []
    play_random(ENGINE, 5, 4, options, on_step=lambda b, st, a, keep=states.append: keep(b))
    for state in states[:: max(1, len(states) // 60)]:
        for seat in range(-1, state.seats + 1):
            for command in parsed:
                want = general(state, seat, command)
                try:
                    got: list[Any] | str = ENGINE.decide(state, seat, command, Rng(3))
                except (RuleViolation, MalformedCommand) as exc:
                    got = exc.code
                assert got == want, (command, seat)
                if isinstance(want, str):
                    seen["refused"] += 1
                else:
                    seen["accepted"] += 1
                    assert fold(ENGINE, got, state) == fold(ENGINE, want, state)  # type: ignore[arg-type]
    assert seen["accepted"] > 200 and seen["refused"] > 200
