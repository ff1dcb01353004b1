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


def test_entrants_tied_in_rating_and_mean_rank_stand_in_one_order_whatever_order_results_are_listed_in() -> None:
    """Nostra City matches nobody won (NC-V10: every seat at the last rank) leave the entrants
    tied on rating and mean rank: the table must not follow the order Redis lists results in."""
    records = [MatchRecord("m1", "nostra_city", (SeatRecord(0, "random", 3), SeatRecord(1, "heuristic", 3),
                                                 SeatRecord(2, "ismcts", 3)), finished_ms=100),
               MatchRecord("m2", "nostra_city", (SeatRecord(0, "ismcts", 3), SeatRecord(1, "random", 3),
                                                 SeatRecord(2, "heuristic", 3)), finished_ms=200)]
    tables = [standings(records), standings(records[::-1]), RunningStandings()(records),
              RunningStandings()(records[::-1])]
    assert len({r.ordinal for r in tables[0]}) == 1
    assert all(table == tables[0] for table in tables)
