"""The tournaments' records in Redis (services.bots.tournaments.TournamentRepo), on a real server."""

from __future__ import annotations

import pytest
import redis

from famiglia.bots.tournament import GamePlan, TournamentSpec
from services.bots import tournaments
from services.bots.tournaments import FINISHED, RUNNING, TournamentRepo


def _spec(name: str) -> TournamentSpec:
    return TournamentSpec(name=name, entrants=("random", "heuristic"),
                          games=(GamePlan("goodcritters", (4,)),), seed=1)


def test_a_running_tournament_is_found_however_many_newer_ones_have_finished(redis_url: str) -> None:
    """The runner steps the running tournaments; among the newest 50 of all, an older one
    still running would never be found, so never finish."""
    repo = TournamentRepo(redis.Redis.from_url(redis_url))
    oldest = repo.create(_spec("old"))
    newer = [repo.create(_spec(f"new-{i}")) for i in range(60)]
    for tid in newer:
        repo.set_status(tid, FINISHED)
    assert repo.ids(limit=50, running_only=True) == [oldest]
    assert oldest not in repo.ids(limit=50)  # the newest, as listed to people
    repo.set_status(oldest, FINISHED)
    assert repo.ids(limit=50, running_only=True) == []
    repo.set_status(oldest, RUNNING)  # resumed
    assert repo.ids(limit=50, running_only=True) == [oldest]


def test_a_retried_creation_of_a_tournament_that_ended_leaves_it_out_of_the_runners_list(
        redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """CreateTournament retried under its request id after the tournament ended answers with it
    and does not put it back among the running: retries of ended tournaments older than one still
    running would take the runner's 50 places, and that one would never be stepped again."""
    ms = iter(range(1_700_000_000_000, 1_700_000_100_000))
    monkeypatch.setattr(tournaments, "_ms", lambda: next(ms))
    repo = TournamentRepo(redis.Redis.from_url(redis_url))
    ended = [repo.create(_spec(f"t-{i}"), request_id=f"r-{i}") for i in range(60)]
    for tid in ended:
        repo.set_status(tid, FINISHED)
    running = repo.create(_spec("running"))
    assert [repo.create(_spec(f"t-{i}"), request_id=f"r-{i}") for i in range(60)] == ended
    assert repo.ids(limit=50, running_only=True) == [running]
    # A retry that read the status before the end was written indexes it all the same: listed
    # running, an ended tournament is still passed over.
    repo.client.zadd(tournaments.RUNNING_KEY, {ended[0]: 0})
    assert repo.ids(limit=50, running_only=True) == [running]


def test_a_matchs_first_outcome_stands(redis_url: str) -> None:
    """Abandoned as stuck, then finished after all (the dispatcher plays on): it stays
    abandoned, as the runner counted it; and a late abandonment never hides a result."""
    repo = TournamentRepo(redis.Redis.from_url(redis_url))
    tid = repo.create(_spec("t"))
    assert repo.record(tid, "m1", {"abandoned": True, "game_id": "goodcritters", "error": "stuck"})
    assert not repo.record(tid, "m1", {"game_id": "goodcritters", "seats": []})
    assert not repo.record(tid, "m1", {"abandoned": True})  # a duplicate too
    assert repo.record(tid, "m2", {"game_id": "goodcritters", "seats": []})
    assert not repo.record(tid, "m2", {"abandoned": True, "game_id": "goodcritters", "error": "stuck"})
    record = repo.get(tid)
    assert record is not None
    assert record.results["m1"].get("abandoned") and not record.results["m2"].get("abandoned")


def test_a_finished_tournaments_moves_are_its_matches_own_counts(redis_url: str) -> None:
    """The counter is written every half second and a dispatcher killed in between loses what
    it had not written (a match it folds anew after a restart adds nothing either); the
    results carry each match's exact count, and the total is never below their sum."""
    repo = TournamentRepo(redis.Redis.from_url(redis_url))
    tid = repo.create(_spec("t"))
    repo.add_moves(tid, 150)  # what made it to Redis before a crash
    repo.record(tid, "m1", {"game_id": "goodcritters", "seats": [], "commands": 120})
    repo.record(tid, "m2", {"game_id": "goodcritters", "seats": [], "commands": 110})
    repo.record(tid, "m3", {"abandoned": True, "game_id": "goodcritters", "error": "stuck"})
    record = repo.get(tid)
    assert record is not None and record.total_moves == 230
    repo.add_moves(tid, 100)  # a counter ahead (moves of a match still playing): it stands
    record = repo.get(tid)
    assert record is not None and record.total_moves == 250


def test_running_tournaments_written_before_the_index_are_indexed(redis_url: str) -> None:
    """Tournaments an earlier release left running (no index of running ones then) are still
    found, so stepped, after an upgrade."""
    from services.bots.tournaments import RUNNING_INDEXED, RUNNING_KEY

    client = redis.Redis.from_url(redis_url)
    old = TournamentRepo(client)
    running, done = old.create(_spec("running")), old.create(_spec("done"))
    old.set_status(done, FINISHED)
    client.delete(RUNNING_KEY, RUNNING_INDEXED)  # as the earlier release wrote them
    assert TournamentRepo(client).ids(limit=50, running_only=True) == [running]
