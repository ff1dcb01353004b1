"""Pure parts of the read side: page tokens, seeds, entry ids, the match cache."""

from __future__ import annotations

import pytest

from famiglia.readmodels.queries import BadPageToken, decode_token, encode_token, seed_from_db, seed_to_db
from services.projection.projector import MatchCache, entry_key


def test_page_tokens_round_trip_and_refuse_garbage() -> None:
    assert decode_token(encode_token(1_700_000_000_123, "m42")) == (1_700_000_000_123, "m42")
    with pytest.raises(BadPageToken):
        decode_token("not a token")


@pytest.mark.parametrize("seed", [0, 1, 2**63 - 1, 2**63, 2**64 - 1])
def test_unsigned_seeds_survive_a_signed_bigint(seed: int) -> None:
    stored = seed_to_db(seed)
    assert -(2**63) <= stored < 2**63
    assert seed_from_db(stored) == seed


def test_entry_ids_compare_as_numbers_not_text() -> None:
    assert entry_key("999-0") < entry_key("1000-0") < entry_key("1000-10")
    assert entry_key("1000-2") < entry_key("1000-10")


def test_the_cache_evicts_the_least_recently_used() -> None:
    cache = MatchCache(capacity=2)

    class Fake:
        def __init__(self, match_id: str) -> None:
            self.match_id = match_id

    for m in ("a", "b"):
        cache.put(Fake(m))  # type: ignore[arg-type]
    cache.get("a")
    cache.put(Fake("c"))  # type: ignore[arg-type]
    assert cache.get("b") is None and cache.get("a") is not None and len(cache) == 2


def test_a_players_rank_in_its_history_is_its_place_on_the_leaderboard(tmp_path) -> None:
    """Two players tied on their rating: the leaderboard orders them (ordinal, then mu, then
    player id), and each one's history names the same place, not a shared one."""
    from famiglia import readmodels
    from famiglia.readmodels.queries import player_ratings, scope_leaderboard
    from famiglia.readmodels.tables import PlayerRating

    engine = readmodels.make_engine(f"sqlite:///{tmp_path / 'read.db'}")
    readmodels.metadata.create_all(engine)
    scope = readmodels.game_scope("grifters")
    rows = [("dan", 30.0, 3.4), ("bob", 26.0, 0.8), ("ann", 26.0, 0.8), ("eve", 27.0, 0.8), ("cat", 20.0, -1.8)]
    with readmodels.write_session(engine) as session:
        for player_id, mu, ordinal in rows:
            session.add(PlayerRating(scope=scope, player_id=player_id, mu=mu, sigma=8.0, ordinal=ordinal))
    with readmodels.read_session(engine) as session:
        board = [(e.rank, e.player_id) for e in scope_leaderboard(session, scope)]
        assert board == [(1, "dan"), (2, "eve"), (3, "ann"), (4, "bob"), (5, "cat")]
        for rank, player_id in board:
            assert player_ratings(session, player_id)["grifters"].rank == rank
