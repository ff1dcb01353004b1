"""RunningStandings folds only new results and must always equal `standings` of them all."""

from __future__ import annotations

import random

from famiglia.bots.standings import MatchRecord, RunningStandings, SeatRecord, standings

GAMES = ("goodcritters", "grifters", "nostra_city")
ENTRANTS = ("random", "heuristic", "ismcts")


def _record(rng: random.Random, i: int, finished_ms: int) -> MatchRecord:
    seats = rng.randint(2, 5)
    ranks = [rng.randint(1, seats) for _ in range(seats)]  # ties allowed
    return MatchRecord(f"m{i:04d}", rng.choice(GAMES),
                       tuple(SeatRecord(s, rng.choice(ENTRANTS), ranks[s]) for s in range(seats)),
                       commands=100, finished_ms=finished_ms)


def test_results_folded_as_they_come_rate_exactly_like_all_of_them_at_once() -> None:
    rng = random.Random(7)
    running = RunningStandings()
    records: list[MatchRecord] = []
    for i in range(120):
        records.append(_record(rng, i, 1_000 + 10 * i))
        if rng.random() < 0.4:  # a poll now and then, several results in between
            assert running(records) == standings(records)
    assert running(records) == standings(records)
    assert running(reversed(records)) == standings(records)  # the order they are listed in does not matter


def test_a_result_that_sorts_before_one_already_rated_rates_everything_again() -> None:
    rng = random.Random(3)
    records = [_record(rng, i, 1_000 + 10 * i) for i in range(30)]
    running = RunningStandings()
    assert running(records) == standings(records)
    late = [_record(rng, 900 + i, 1_005 + 10 * i) for i in range(5)]  # finished among the early ones
    assert running(records + late) == standings(records + late)
    assert running(records[:10]) == standings(records[:10])  # results gone (a new tournament record)
