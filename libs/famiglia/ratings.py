"""OpenSkill ratings (Plackett-Luce), shared by the projection's leaderboards and the
bots' tournaments.

Ratings depend on the order in which matches are rated, so everything that must
agree (an incremental projection, a rebuild, a tournament recomputed later)
rates matches in one canonical order: `MatchOutcome.order_key`, i.e. the
finishing time and then the match id. `rate_in_order` does exactly that.

A player who sat in several seats of one match (a shared bot id) is rated once,
at their best rank: rating a player against themselves means nothing.
Seats without a player id are left out; a match with fewer than two rated
players changes nobody's rating.

A seat whose player left it to the bots and was still away at the end is rated last, below
every seat whose player stayed, whatever the bot made of it (`ranks_with_leavers`): leaving
never lets a bot win a player's rating. The game's own result is not changed.
"""

from __future__ import annotations

import functools
import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass

from openskill.models import PlackettLuce

DEFAULT_MU = 25.0
DEFAULT_SIGMA = 25.0 / 3.0


@dataclass(frozen=True, slots=True)
class Rating:
    mu: float = DEFAULT_MU
    sigma: float = DEFAULT_SIGMA

    @property
    def ordinal(self) -> float:
        """The conservative skill estimate leaderboards sort by (mu - 3 sigma)."""
        return self.mu - 3.0 * self.sigma


DEFAULT_RATING = Rating()


@dataclass(frozen=True, slots=True)
class Placement:
    """One seat's finish: rank 1 is best, equal ranks are ties."""

    player_id: str
    rank: int


@dataclass(frozen=True, slots=True)
class MatchOutcome:
    """A finished match as the rating needs it."""

    match_id: str
    finished_at_ms: int
    placements: tuple[Placement, ...]

    @property
    def order_key(self) -> tuple[int, str]:
        return (self.finished_at_ms, self.match_id)


@functools.cache
def _model() -> PlackettLuce:
    return PlackettLuce(mu=DEFAULT_MU, sigma=DEFAULT_SIGMA)


def distinct_placements(placements: Iterable[Placement]) -> list[Placement]:
    """Each player once, at their best rank; seats without a player id dropped; sorted by player."""
    best: dict[str, int] = {}
    for p in placements:
        if not p.player_id:
            continue
        best[p.player_id] = min(p.rank, best.get(p.player_id, p.rank))
    return [Placement(pid, rank) for pid, rank in sorted(best.items())]


def ranks_with_leavers(seats: Sequence[tuple[int, bool]]) -> list[int]:
    """The ranks a match is rated by, for its seats' (game rank, away at the end): the seats whose
    players stayed keep their order among themselves (1 + how many of them did better, ties
    kept), the seats away are tied below them all, and never first (a match every player left is
    a tie with no winner). Without a seat away, the game's ranks as they are."""
    if not any(away for _, away in seats):
        return [rank for rank, _ in seats]
    stayed = sorted(rank for rank, away in seats if not away)
    last = max(2, len(stayed) + 1)
    return [last if away else 1 + bisect_left(stayed, rank) for rank, away in seats]


def rate_match(ratings: Mapping[str, Rating], placements: Sequence[Placement]) -> dict[str, Rating]:
    """The new ratings of the match's players (others are not in the answer).

    `ratings` holds what is known; unknown players start at DEFAULT_RATING.
    """
    rated = distinct_placements(placements)
    if len(rated) < 2:
        return {}
    model = _model()
    teams = [[model.rating(mu=ratings.get(p.player_id, DEFAULT_RATING).mu,
                           sigma=ratings.get(p.player_id, DEFAULT_RATING).sigma)] for p in rated]
    new = model.rate(teams, ranks=[float(p.rank) for p in rated])
    out: dict[str, Rating] = {}
    for p, team in zip(rated, new, strict=True):
        mu, sigma = float(team[0].mu), float(team[0].sigma)
        if not (math.isfinite(mu) and math.isfinite(sigma)):
            raise ArithmeticError(f"rating of {p.player_id} diverged")
        out[p.player_id] = Rating(mu, sigma)
    return out


def apply_match(ratings: MutableMapping[str, Rating], outcome: MatchOutcome) -> dict[str, Rating]:
    """Rate one match into `ratings` in place; returns the changed entries."""
    changed = rate_match(ratings, outcome.placements)
    ratings.update(changed)
    return changed


def rate_in_order(outcomes: Iterable[MatchOutcome],
                  start: Mapping[str, Rating] | None = None) -> dict[str, Rating]:
    """Ratings after every outcome, rated in canonical order whatever order they come in."""
    ratings: dict[str, Rating] = dict(start or {})
    for outcome in sorted(outcomes, key=lambda o: o.order_key):
        apply_match(ratings, outcome)
    return ratings


def leaderboard(ratings: Mapping[str, Rating]) -> list[tuple[str, Rating]]:
    """Best first: by ordinal, then mu, then player id (stable for ties)."""
    return sorted(ratings.items(), key=lambda kv: (-kv[1].ordinal, -kv[1].mu, kv[0]))


__all__ = [
    "DEFAULT_MU",
    "DEFAULT_RATING",
    "DEFAULT_SIGMA",
    "MatchOutcome",
    "Placement",
    "Rating",
    "apply_match",
    "distinct_placements",
    "leaderboard",
    "rate_in_order",
    "rate_match",
    "ranks_with_leavers",
]
