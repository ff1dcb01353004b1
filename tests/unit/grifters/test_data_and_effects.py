"""Data tables and effect codes (STYLE.md "Data over code"; GR-K07, GR-J02, GR-F01)."""

from __future__ import annotations

import inspect

from famiglia.rules.grifters import effects
from famiglia.rules.grifters.data import CARDS, JOBS, SPECIALIST_TYPES


def test_every_caper_effect_code_has_a_function_and_every_function_is_used() -> None:
    codes = {c.effect for c in CARDS.values()}
    assert codes == set(effects.EFFECTS)
    for name, fn in effects.EFFECTS.items():
        assert fn.__name__ == name and fn.__doc__, name


def test_every_reward_code_has_a_function_and_every_function_is_used() -> None:
    codes = {part.code for j in JOBS for part in j.reward}
    assert codes == set(effects.REWARDS)


def test_effect_functions_are_all_registered() -> None:
    public = {n for n, f in inspect.getmembers(effects, inspect.isfunction)
              if f.__module__ == effects.__name__ and not n.startswith("_")}
    assert public == set(effects.EFFECTS) | {f.__name__ for f in effects.REWARDS.values()} | {"reward"}


def test_every_card_row_names_its_rule() -> None:
    """GR-K07: the rule id of each Specialist row is its card rule."""
    assert [rule for *_, rule in SPECIALIST_TYPES] == [f"GR-K{n:02d}" for n in range(8, 24)]
    assert all(j.rule == "GR-J02" for j in JOBS)
