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


def test_when_a_match_was_first_seen_still_outlives_its_runner_for_a_while(redis_url: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The stuck-match check's count, written down in the tournament's slot with an expiry, so
    a new runner (a restart) goes on counting; an outage of every runner longer than
    `stuck_seconds` lets it expire (the dispatcher, in the same process, was away too)."""
    client = redis.Redis.from_url(redis_url)
    repo = TournamentRepo(client)
    tid = repo.create(_spec("still"))
    assert repo.still_since(tid, "m1", 5) is None
    repo.mark_still(tid, "m1", 5, 1_700_000_000_000, ttl_s=180.0)
    assert repo.still_since(tid, "m1", 5) == 1_700_000_000_000
    assert repo.still_since(tid, "m1", 6) is None  # it moved since: another version's count
    assert repo.still_since(tid, "m2", 5) is None
    key = TournamentRepo._key(tid, "still:m1")
    assert 0 < client.pttl(key) <= 180_000

    class Store:
        def version(self, match_id: str) -> int:
            return 5

    clock = [1000.0]
    monkeypatch.setattr(tournaments.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(tournaments, "_ms", lambda: 1_700_000_000_000 + 41_000)  # 41 s after it was first seen
    record = tournaments.TournamentRecord(tid, _spec("still"), RUNNING, 0, started={0: "m1"})
    cancelled: list[str] = []

    class Game:
        def cancel_match(self, match_id: str, reason: str, *, token: str, request_id: str = "") -> None:
            cancelled.append(match_id)

    runner = tournaments.TournamentRunner(repo, Game(), Store(), stuck_seconds=40.0)  # type: ignore[arg-type]
    runner._plans[tid] = []
    runner._check_stuck(record, "m1")  # a new runner's first look: still for 41 s already
    assert cancelled == ["m1"] and record.results == {"m1": {"abandoned": True}}
    client.close()
