"""Field reads on every State and player record specialise (a combined instance dict)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

GAMES = [("grifters", 3), ("nostra_city", 4)]  # Good Critters: tests/unit/goodcritters/test_fast_paths.py


def _split(d: dict) -> bool:  # type: ignore[type-arg]
    """Whether CPython keeps `d` as a split (key-sharing) dict: its values pointer is set."""
    import ctypes

    return ctypes.c_void_p.from_address(id(d) + 40).value is not None


@pytest.mark.parametrize(("game", "seats"), GAMES)
def test_every_state_and_record_keeps_a_combined_dict(game: str, seats: int) -> None:
    """A split instance dict (what a dataclass __init__ fills) makes every field read ~3x
    slower, and each copy of it stays split: records are made with combined dicts."""
    import sys

    class Probe:
        def __init__(self) -> None:
            self.x = 1

    probe = Probe()
    if sys.implementation.name != "cpython" or not _split(probe.__dict__) or _split(dict(probe.__dict__)):
        pytest.skip("not a CPython with split dicts at this layout")
    from famiglia.engine import Rng
    from famiglia.testing.random_play import play_random

    ENGINE = importlib.import_module(f"famiglia.rules.{game}").ENGINE  # noqa: N806 - the game's engine

    states: list[Any] = []
    play = play_random(ENGINE, seats, 3, on_step=lambda b, st, a, keep=states.append: keep(a))
    states.append(ENGINE.determinize(ENGINE.view(states[len(states) // 2], 0), 0, Rng(1)))
    assert play.rows and states
    for state in states:
        assert not _split(state.__dict__)
        for record in state.players:
            assert not _split(record.__dict__)
