"""famiglia.ratings: OpenSkill Plackett-Luce in a canonical order."""

from __future__ import annotations

import itertools

from famiglia.ratings import (
    DEFAULT_RATING,
    MatchOutcome,
    Placement,
    Rating,
    distinct_placements,
    leaderboard,
    ranks_with_leavers,
    rate_in_order,
    rate_match,
)


def outcome(match_id: str, at: int, *ranks: tuple[str, int]) -> MatchOutcome:
    return MatchOutcome(match_id, at, tuple(Placement(p, r) for p, r in ranks))


def test_the_winner_gains_and_the_loser_drops() -> None:
    new = rate_match({}, [Placement("ann", 1), Placement("bob", 2)])
    assert new["ann"].mu > DEFAULT_RATING.mu > new["bob"].mu
    assert new["ann"].sigma < DEFAULT_RATING.sigma


def test_tied_players_move_together() -> None:
    new = rate_match({}, [Placement("ann", 1), Placement("bob", 2), Placement("cy", 2)])
    assert new["bob"] == new["cy"]


def test_a_player_in_several_seats_counts_once_at_their_best_rank() -> None:
    assert distinct_placements([Placement("bot", 3), Placement("ann", 2), Placement("bot", 1), Placement("", 1)]) \
        == [Placement("ann", 2), Placement("bot", 1)]


def test_fewer_than_two_rated_players_change_nothing() -> None:
    assert rate_match({}, [Placement("bot", 1), Placement("bot", 2), Placement("", 3)]) == {}


def test_rating_in_order_does_not_depend_on_arrival_order() -> None:
    outcomes = [
        outcome("m1", 1000, ("ann", 1), ("bob", 2)),
        outcome("m2", 2000, ("bob", 1), ("cy", 2), ("ann", 3)),
        outcome("m3", 2000, ("cy", 1), ("ann", 1)),
        outcome("m4", 3000, ("dee", 1), ("ann", 2)),
    ]
    results = {tuple(sorted(rate_in_order(p).items())) for p in itertools.permutations(outcomes)}
    assert len(results) == 1


def test_the_leaderboard_sorts_by_ordinal_then_player() -> None:
    board = leaderboard({"b": Rating(30, 2), "a": Rating(30, 2), "c": Rating(40, 8)})
    assert [pid for pid, _ in board] == ["a", "b", "c"]
    assert Rating(30, 2).ordinal == 24


def test_seats_away_at_the_end_are_rated_last_tied_and_never_first() -> None:
    """Whatever the bot made of a seat its player left, the player is rated below everyone who
    stayed; those who stayed keep their order (ties too); a match everyone left has no winner."""
    assert ranks_with_leavers([(1, True), (2, False), (3, False)]) == [3, 1, 2]
    assert ranks_with_leavers([(1, False), (1, False), (2, True), (3, True)]) == [1, 1, 3, 3]
    assert ranks_with_leavers([(2, False), (1, True), (3, False), (1, True)]) == [1, 3, 2, 3]
    assert ranks_with_leavers([(1, True), (2, True)]) == [2, 2]
    assert ranks_with_leavers([(2, False), (1, False)]) == [2, 1]  # nobody away: the game's ranks
