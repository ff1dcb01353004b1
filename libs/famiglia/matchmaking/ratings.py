"""The rating provider port: how strong is a player at a game, for the rating window.

The projection rates finished matches (OpenSkill); matchmaking only reads. Until a
player has a rating, or when no projection runs, everyone has the OpenSkill default
(mu 25, sigma 25/3), so matchmaking works from the first minute.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

DEFAULT_MU = 25.0
DEFAULT_SIGMA = 25.0 / 3.0


@dataclass(frozen=True, slots=True)
class Rating:
    mu: float = DEFAULT_MU
    sigma: float = DEFAULT_SIGMA


DEFAULT_RATING = Rating()


class RatingProvider(Protocol):
    def ratings(self, game_id: str, player_ids: Sequence[str], *, strict: bool = False) -> dict[str, Rating]:
        """A rating for every asked player (the default for unrated ones). A store out of reach
        gives everyone the default too (a ticket's rating window: a leaderboard away must never
        stop players from getting a table), unless `strict`: then its error is raised (a profile
        shows the ratings, and the default shown for a player who has one would be a lie)."""
        ...


class FixedRatings:
    """Ratings from a table, the default for everyone else (no projection, and tests)."""

    def __init__(self, table: Mapping[str, Rating] | None = None) -> None:
        """`table`: player id -> rating in every game; `set` adds per-game ones."""
        self._table: dict[object, Rating] = {}
        self._table.update(table or {})

    def set(self, player_id: str, rating: Rating, game_id: str = "") -> None:
        self._table[(game_id, player_id) if game_id else player_id] = rating

    def ratings(self, game_id: str, player_ids: Sequence[str], *, strict: bool = False) -> dict[str, Rating]:
        return {p: self._table.get((game_id, p), self._table.get(p, DEFAULT_RATING)) for p in player_ids}


def party_rating(ratings: Mapping[str, Rating], players: Iterable[str]) -> float:
    """A party's strength for the window: the mean mu of its members."""
    mus = [ratings.get(p, DEFAULT_RATING).mu for p in players]
    return sum(mus) / len(mus) if mus else DEFAULT_MU
