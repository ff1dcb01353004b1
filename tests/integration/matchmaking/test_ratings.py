"""The projection's ratings bound to the rating window (SQLite read models), and the default
when the projection has not written anything yet."""

from __future__ import annotations

from pathlib import Path

import pytest

from famiglia.matchmaking import DEFAULT_RATING, FixedRatings, Rating
from services.matchmaking.ratings import ReadModelRatings, projection_ratings

readmodels = pytest.importorskip("famiglia.readmodels")


def test_rated_players_get_their_projection_rating(tmp_path: Path) -> None:
    from famiglia.readmodels.tables import PlayerRating

    engine = readmodels.make_engine(f"sqlite:///{tmp_path / 'read.db'}")
    readmodels.metadata.create_all(engine)
    with readmodels.write_session(engine) as session:
        session.add(PlayerRating(scope=readmodels.game_scope("grifters"), player_id="strong", mu=38.0,
                                 sigma=2.5, ordinal=30.5))
        session.add(PlayerRating(scope=readmodels.game_scope("nostra_city"), player_id="weak", mu=12.0,
                                 sigma=3.0, ordinal=3.0))
    ratings = ReadModelRatings(engine)
    got = ratings.ratings("grifters", ["strong", "weak", "new"])
    assert got == {"strong": Rating(38.0, 2.5), "weak": DEFAULT_RATING, "new": DEFAULT_RATING}


def test_without_read_models_everyone_has_the_default(tmp_path: Path) -> None:
    ratings = projection_ratings(f"sqlite:///{tmp_path / 'empty.db'}")  # no tables yet
    assert isinstance(ratings, ReadModelRatings)
    assert ratings.ratings("grifters", ["a"]) == {"a": DEFAULT_RATING}
    assert isinstance(projection_ratings(""), FixedRatings)
