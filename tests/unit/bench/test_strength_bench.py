"""The strength benchmark: a pool plays the same seeded matches as one after another; `--losses`
and `--matches-out` sort and record them without changing them."""

from __future__ import annotations

import json
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


def _without_time(records: list[strength.MatchRecord]) -> list[tuple]:
    """A record less its CPU seconds, which differ from run to run."""
    return [(r.game_id, r.policy, r.seed, r.match, r.seat, r.won, r.cause, r.outcome, r.seats, r.decisions)
            for r in records]


def test_recording_the_matches_plays_the_same_matches_and_costs_nothing_unasked() -> None:
    plain = strength.measure(HIGHCARD, "random", 12)
    recorded = strength.measure(HIGHCARD, "random", 12, record=True)
    assert plain.records == []
    assert recorded.wins == plain.wins
    assert [r.match for r in recorded.records] == list(range(12))
    assert [r.seat for r in recorded.records] == [i % 3 for i in range(12)]


def test_the_loss_tally_counts_each_nostra_city_loss_once_by_its_verdict() -> None:
    from famiglia.bots.games import playable_registry

    s = strength.measure(playable_registry().get("nostra_city"), "random", 24, seed=3, record=True)
    tally = strength.loss_tally(s.records)
    assert sum(tally.values()) == s.matches - s.wins > 0
    assert len(tally) >= 2  # random seats lose in several ways: a wrong cause would show
    for r in s.records:
        assert (r.cause is None) == r.won
        assert r.outcome["verdict"] in ("innocent", "guilty")
        if r.cause is not None:  # the verdict and the seat's own Snitch flag, as the result gives them
            snitch = r.seats[r.seat]["snitch"] == "true"
            assert r.cause.startswith("Snitch, " if snitch else "loyal, ")
            assert r.outcome["verdict"].upper() in r.cause


def test_a_pool_records_the_matches_played_one_after_another() -> None:
    serial = strength.measure(HIGHCARD, "random", 12, record=True)
    with ProcessPoolExecutor(2) as pool:
        pooled = strength.measure(HIGHCARD, "random", 12, pool=pool, record=True)
    assert _without_time(pooled.records) == _without_time(serial.records)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_losses_and_matches_out_name_every_match_played(jobs: str, tmp_path, capsys) -> None:  # noqa: ANN001
    out = tmp_path / "matches.jsonl"
    args = ["--game", "highcard", "--quick", "--matches", "6", "--losses", "--matches-out", str(out), "--jobs", jobs]
    assert strength.main(args) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((r["policy"].partition("?")[0], r["match"]) for r in rows) == sorted(
        (p, i) for p in ("ismcts", "heuristic", "random") for i in range(6))
    assert {r["seed"] for r in rows} == {1}
    for r in rows:
        assert (r["cause"] is None) == r["won"] == any(s["seat"] == r["seat"] and s["rank"] == 1 for s in r["seats"])
    printed = capsys.readouterr().out
    assert "highcard: the candidate's losses by cause" in printed
    lost = {p: sum(1 for r in rows if r["policy"].startswith(p) and not r["won"]) for p in ("ismcts", "random")}
    assert f"{lost['random']} of 6" in printed and f"{lost['ismcts']} of 6" in printed
