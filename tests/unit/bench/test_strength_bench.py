"""The strength benchmark: a pool plays the same seeded matches as one after another."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

import pytest

from famiglia.bench import strength
from famiglia.bots.toy import ENGINE as HIGHCARD


def test_matches_played_in_a_pool_are_the_matches_played_one_after_another() -> None:
    serial = strength.measure(HIGHCARD, "random", 12)
    with ProcessPoolExecutor(2) as pool:
        pooled = strength.measure(HIGHCARD, "random", 12, pool=pool)
    assert (pooled.game_id, pooled.seats, pooled.matches) == (serial.game_id, serial.seats, 12)
    assert 0 < serial.wins < 12  # the seeds give a mix, so a changed match would show
    assert pooled.wins == serial.wins


def test_another_seed_plays_other_matches() -> None:
    runs = {strength.measure(HIGHCARD, "random", 12, seed=s).wins for s in range(1, 6)}
    assert len(runs) > 1


@pytest.mark.parametrize(("wins", "n"), [(0, 10), (3, 10), (10, 10), (41, 80)])
def test_the_wilson_interval_holds_the_observed_rate_within_0_and_1(wins: int, n: int) -> None:
    low, high = strength.wilson(wins, n)
    assert 0.0 <= low <= wins / n <= high <= 1.0


def test_more_matches_narrow_the_interval() -> None:
    few, many = strength.wilson(3, 10), strength.wilson(30, 100)
    assert many[1] - many[0] < few[1] - few[0]
