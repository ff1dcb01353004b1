"""Ratings for the rating window: the projection's read models when present, else the default.

The projection rates finished matches into SQL (`famiglia.readmodels`, one scope per
game). Matchmaking only reads, and degrades to the OpenSkill default when the
projection's tables are absent or unreadable: a missing leaderboard must never stop
players from getting a table. A profile reads them `strict`: a database out of reach
(`database_away`) is raised there (UNAVAILABLE `store_unavailable`, which a client retries),
not shown as the default, which a player who has a rating would take for a reset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from famiglia.grpcutil.errors import database_away
from famiglia.matchmaking import DEFAULT_RATING, FixedRatings, Rating, RatingProvider
from famiglia.telemetry import get_logger

log = get_logger("famiglia.matchmaking")


class ReadModelRatings:
    """PlayerRating rows of the scope `game_scope(game_id)`; the default for unrated players."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self._warned = False

    def ratings(self, game_id: str, player_ids: Sequence[str], *, strict: bool = False) -> dict[str, Rating]:
        out = {p: DEFAULT_RATING for p in player_ids}
        try:
            from sqlmodel import col, select

            from famiglia.readmodels import game_scope, read_session
            from famiglia.readmodels.tables import PlayerRating

            with read_session(self.engine) as session:
                rows = session.exec(select(PlayerRating).where(
                    PlayerRating.scope == game_scope(game_id), col(PlayerRating.player_id).in_(list(player_ids)))).all()
            for row in rows:
                out[row.player_id] = Rating(row.mu, row.sigma)
        except Exception as exc:  # noqa: BLE001 - no projection yet: everyone has the default
            if strict and database_away(exc):
                raise
            if not self._warned:
                log.warning("ratings_unavailable", error=repr(exc))
                self._warned = True
        return out


def projection_ratings(database_url: str) -> RatingProvider:
    """Bind the projection's ratings when its read models are installed and a database is set."""
    if database_url:
        try:
            from famiglia.readmodels import make_engine
        except ImportError:
            log.info("ratings_default", reason="famiglia.readmodels is not installed")
        else:
            return ReadModelRatings(make_engine(database_url))
    return FixedRatings()
