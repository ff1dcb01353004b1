"""What a tournament runner's step costs in Redis: round trips and entries read follow the
matches in play and the running tournaments, never a tournament's size. A step used to read
every started match and every result of each running tournament (and walk its whole plan), four
times a second, and to ask each running tournament's status in a round trip of its own.

Counted on a real Redis, at the connection: each round trip sent, each entry of each reply."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
from redis.connection import AbstractConnection

from famiglia.bots.tournament import plan
from services.bots.tournaments import FINISHED, TournamentRepo, TournamentRunner

from .test_tournament_rules import Game, Store, _result, _spec


@pytest.fixture
def repo(redis_url: str) -> TournamentRepo:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    return TournamentRepo(client)


def _entries(reply: Any) -> int:
    if isinstance(reply, (list, tuple)):
        return sum(_entries(r) for r in reply)
    if isinstance(reply, dict):
        return sum(1 + _entries(v) for v in reply.values())
    return 1


@contextmanager
def redis_work(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Round trips sent and reply entries read inside the block, by every Redis connection."""
    counts = {"round_trips": 0, "entries": 0}
    send, read = AbstractConnection.send_packed_command, AbstractConnection.read_response

    def counted_send(self: AbstractConnection, command: Any, *args: Any, **kwargs: Any) -> None:
        counts["round_trips"] += 1
        send(self, command, *args, **kwargs)

    def counted_read(self: AbstractConnection, *args: Any, **kwargs: Any) -> Any:
        reply = read(self, *args, **kwargs)
        counts["entries"] += _entries(reply)
        return reply

    with monkeypatch.context() as patch:
        patch.setattr(AbstractConnection, "send_packed_command", counted_send)
        patch.setattr(AbstractConnection, "read_response", counted_read)
        yield counts


def test_a_step_costs_the_matches_in_play_not_the_matches_played(repo: TournamentRepo,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _spec(matches_per_game=150, concurrency=2)
    planned = len(plan(spec))
    tid = repo.create(spec)
    game = Game()
    runner = TournamentRunner(repo, game, Store(), resync_seconds=1e9)  # type: ignore[arg-type]
    recorded: set[str] = set()
    costs: list[dict[str, int]] = []
    for _ in range(planned // 2 + 5):
        with redis_work(monkeypatch) as counts:
            runner.step()
        costs.append(counts)
        if repo.status(tid) == FINISHED:
            break
        for n in range(1, len(game.created) + 1):  # the dispatcher: every match made finishes by the next step
            if f"m{n}" not in recorded:
                repo.record(tid, f"m{n}", _result())
                recorded.add(f"m{n}")
    assert repo.status(tid) == FINISHED and len(recorded) == planned  # played through to the end
    early, late = costs[5], costs[planned // 2 - 5]  # 10 matches played, against ~140
    assert late == early, (early, late)


def test_the_running_tournaments_status_is_read_in_one_round_trip(repo: TournamentRepo,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    made = [repo.create(_spec(name=f"t{n}")) for n in range(30)]
    repo.ids(running_only=True)  # indexes them once (an upgrade's records)
    with redis_work(monkeypatch) as counts:
        running = repo.ids(limit=50, running_only=True)
    assert sorted(running) == sorted(made)
    assert counts["round_trips"] == 2  # the running index, then every status at once (not 1 + 30)
