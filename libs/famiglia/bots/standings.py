"""Tournament standings: per game and entrant, seats played, wins, mean rank and an
OpenSkill rating (Plackett-Luce, every seat its own team). Ratings are folded in
match order, so the same finished matches always give the same table."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SeatRecord:
    seat: int
    entrant: str
    rank: int
    score: float = 0.0


@dataclass(frozen=True)
class MatchRecord:
    match_id: str
    game_id: str
    seats: tuple[SeatRecord, ...]
    commands: int = 0
    finished_ms: int = 0


@dataclass
class Standing:
    game_id: str
    entrant: str
    matches: int = 0
    wins: int = 0
    rank_total: float = 0.0
    mu: float = 25.0
    sigma: float = 25.0 / 3

    @property
    def mean_rank(self) -> float:
        return self.rank_total / self.matches if self.matches else 0.0

    @property
    def ordinal(self) -> float:
        return self.mu - 3 * self.sigma


def standings(records: Iterable[MatchRecord]) -> list[Standing]:
    """Sorted by game, then conservative rating (ordinal), best first."""
    from openskill.models import PlackettLuce

    model = PlackettLuce()
    table: dict[tuple[str, str], Standing] = {}
    ratings: dict[tuple[str, str], object] = {}
    for record in sorted(records, key=lambda r: (r.finished_ms, r.match_id)):
        seats: Sequence[SeatRecord] = sorted(record.seats, key=lambda s: s.seat)
        if not seats:
            continue
        for s in seats:
            row = table.setdefault((record.game_id, s.entrant), Standing(record.game_id, s.entrant))
            row.matches += 1
            row.wins += int(s.rank == 1)
            row.rank_total += s.rank
        if len(seats) < 2:
            continue
        teams = []
        for s in seats:
            key = (record.game_id, s.entrant)
            current = ratings.get(key) or model.rating(name=s.entrant)
            ratings[key] = current
            teams.append([model.rating(mu=current.mu, sigma=current.sigma, name=s.entrant)])  # type: ignore[attr-defined]
        rated = model.rate(teams, ranks=[s.rank for s in seats])
        # An entrant holding several seats gets the mean of its seats' updates.
        updates: dict[str, list] = {}
        for s, team in zip(seats, rated, strict=True):
            updates.setdefault(s.entrant, []).append(team[0])
        for entrant, new in updates.items():
            mu = sum(r.mu for r in new) / len(new)
            sigma = sum(r.sigma for r in new) / len(new)
            ratings[(record.game_id, entrant)] = model.rating(mu=mu, sigma=sigma, name=entrant)
    for key, row in table.items():
        rating = ratings.get(key)
        if rating is not None:
            row.mu, row.sigma = rating.mu, rating.sigma  # type: ignore[attr-defined]
    return sorted(table.values(), key=lambda r: (r.game_id, -r.ordinal, r.mean_rank))
