"""The pure matching rules: pools, seat counts, rating windows, fairness, parties, backfill."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from famiglia.matchmaking import (
    FixedRatings,
    GameShape,
    InvalidRequest,
    MatchPolicy,
    Proposal,
    Rating,
    Ticket,
    estimate_wait,
    form_matches,
    normalize_request,
    party_rating,
    plan_seats,
    pool_key,
)
from tests.profile import examples

NOW = 1_000_000
POOL = pool_key("parlour", {})
NO_BOTS = MatchPolicy(window_start=3.0, window_growth=1.0, backfill_after=None)


def ticket(name: str, *, players: int = 1, counts: tuple[int, ...] = (4,), rating: float = 25.0,
           waited: float = 0.0, pool: str = POOL) -> Ticket:
    return Ticket(name, "parlour", pool, tuple(f"{name}.{i}" for i in range(players)), frozenset(counts),
                  rating, NOW - int(waited * 1000))


def tables(proposals: list[Proposal]) -> list[tuple[int, list[str]]]:
    return [(p.seats, sorted(t.ticket_id for t in p.tickets)) for p in proposals]


def test_four_singles_wanting_four_seats_make_one_table() -> None:
    found = form_matches([ticket(n) for n in "abcd"], NOW, NO_BOTS)
    assert tables(found) == [(4, ["a", "b", "c", "d"])]
    assert found[0].bots == 0


def test_no_table_while_it_would_not_be_full() -> None:
    assert form_matches([ticket(n) for n in "abc"], NOW, NO_BOTS) == []


def test_different_options_never_share_a_table() -> None:
    other = pool_key("parlour", {"variant": "short"})
    found = form_matches([ticket("a"), ticket("b"), ticket("c", pool=other), ticket("d", pool=other)], NOW,
                         MatchPolicy(backfill_after=None, window_start=100))
    assert found == []


def test_seat_counts_must_overlap() -> None:
    found = form_matches([ticket("a", counts=(2,)), ticket("b", counts=(3,)), ticket("c", counts=(2, 3))], NOW,
                         NO_BOTS)
    assert tables(found) == [(2, ["a", "c"])]


def test_the_largest_full_table_the_oldest_accepts_is_chosen() -> None:
    found = form_matches([ticket(n, counts=(2, 3)) for n in "abc"], NOW, NO_BOTS)
    assert tables(found) == [(3, ["a", "b", "c"])]


def test_the_rating_window_starts_narrow() -> None:
    found = form_matches([ticket("a", counts=(2,), rating=25), ticket("b", counts=(2,), rating=35)], NOW, NO_BOTS)
    assert found == []


def test_the_rating_window_widens_with_the_oldest_tickets_wait() -> None:
    old = ticket("a", counts=(2,), rating=25, waited=8.0)  # window 3 + 8 = 11 mu
    found = form_matches([old, ticket("b", counts=(2,), rating=35)], NOW, NO_BOTS)
    assert tables(found) == [(2, ["a", "b"])]
    assert NO_BOTS.window(1000) == NO_BOTS.window_max


def test_the_oldest_ticket_chooses_first_and_prefers_older_partners() -> None:
    queue = [ticket("new", counts=(2,), waited=1), ticket("old", counts=(2,), waited=9),
             ticket("mid", counts=(2,), waited=5)]
    assert tables(form_matches(queue, NOW, NO_BOTS)) == [(2, ["mid", "old"])]


def test_a_party_sits_together_or_not_at_all() -> None:
    party = ticket("party", players=3, counts=(4,), waited=5)
    pair = ticket("pair", players=2)
    assert form_matches([party, pair], NOW, NO_BOTS) == []  # 3 + 2 is not 4, and a party is not split
    found = form_matches([party, pair, ticket("s1")], NOW, NO_BOTS)
    assert tables(found) == [(4, ["party", "s1"])]
    assert found[0].players[:3] == party.players


def test_an_exact_fill_skips_a_party_that_would_overflow() -> None:
    queue = [ticket("a", waited=9), ticket("pair", players=2, waited=8), ticket("trio", players=3, waited=7)]
    assert tables(form_matches(queue, NOW, NO_BOTS)) == [(4, ["a", "trio"])]


def test_bots_fill_a_table_only_after_the_timeout() -> None:
    policy = MatchPolicy(backfill_after=10.0)
    assert form_matches([ticket("a", counts=(3, 4), waited=9.9)], NOW, policy) == []
    [table] = form_matches([ticket("a", counts=(3, 4), waited=10.0)], NOW, policy)
    assert (table.seats, table.humans, table.bots) == (3, 1, 2)


def test_backfill_takes_the_most_humans_then_the_fewest_bots() -> None:
    policy = MatchPolicy(backfill_after=10.0, window_start=100)
    queue = [ticket("a", counts=(3, 5), waited=20), ticket("b", counts=(5,)), ticket("c", counts=(5,))]
    [table] = form_matches(queue, NOW, policy)
    assert (table.seats, table.humans, table.bots) == (5, 3, 2)


def test_no_ticket_is_proposed_twice() -> None:
    rng = random.Random(4)
    queue = [ticket(f"t{i}", players=rng.choice([1, 1, 2]), counts=(2, 3, 4), rating=rng.gauss(25, 5),
                    waited=rng.random() * 30) for i in range(200)]
    found = form_matches(queue, NOW, MatchPolicy(backfill_after=15))
    ids = [t.ticket_id for p in found for t in p.tickets]
    assert len(ids) == len(set(ids))


@settings(max_examples=examples(150, 3000), deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.sets(st.integers(2, 6), min_size=1), st.floats(0, 50),
                          st.floats(0, 60), st.sampled_from(["x", "y"])), max_size=40),
       st.one_of(st.none(), st.floats(0, 60)))
def test_every_proposal_is_a_valid_table(specs, backfill_after) -> None:
    queue = []
    for i, (size, counts, rating, waited, pool) in enumerate(specs):
        fitting = tuple(c for c in counts if c >= size) or (6,)
        queue.append(ticket(f"t{i}", players=size, counts=fitting, rating=rating, waited=waited, pool=pool))
    policy = MatchPolicy(backfill_after=backfill_after)
    seen: set[str] = set()
    for p in form_matches(queue, NOW, policy):
        anchor = p.tickets[0]
        assert all(p.seats in t.seat_counts for t in p.tickets)
        assert len({t.pool for t in p.tickets}) == 1
        assert all(abs(t.rating - anchor.rating) <= policy.window(anchor.waited(NOW)) for t in p.tickets)
        assert p.humans <= p.seats and (p.bots == 0 or policy.backfill_due(anchor.waited(NOW)))
        assert not seen & {t.ticket_id for t in p.tickets}
        seen |= {t.ticket_id for t in p.tickets}


def test_seats_are_shuffled_deterministically_per_proposal() -> None:
    table = Proposal("parlour", POOL, 5, (ticket("a", players=2), ticket("b")))
    plan = plan_seats(table)
    assert plan == plan_seats(table)
    assert [s.seat for s in plan] == [0, 1, 2, 3, 4]
    assert sorted(s.player_id for s in plan if not s.bot) == ["a.0", "a.1", "b.0"]
    assert sum(s.bot for s in plan) == 2


def test_a_proposals_id_names_its_tickets_and_size() -> None:
    a, b = ticket("a"), ticket("b")
    assert Proposal("parlour", POOL, 2, (a, b)).proposal_id == Proposal("parlour", POOL, 2, (b, a)).proposal_id
    assert Proposal("parlour", POOL, 2, (a, b)).proposal_id != Proposal("parlour", POOL, 3, (a, b)).proposal_id


SHAPE = GameShape("parlour", 2, 5, {"variant": "classic"}, {"variant": ("classic", "short")})


def test_requests_are_made_canonical() -> None:
    plain = normalize_request(SHAPE, [], {}, 1)
    spelled = normalize_request(SHAPE, [], {"variant": "classic"}, 1)
    assert plain.pool == spelled.pool and plain.seat_counts == frozenset({2, 3, 4, 5})
    assert normalize_request(SHAPE, [], {"variant": "short"}, 1).pool != plain.pool
    assert normalize_request(SHAPE, [2, 3, 4], {}, 3).seat_counts == frozenset({3, 4})


@pytest.mark.parametrize(("counts", "options", "party", "code"), [
    ([6], {}, 1, "bad_seat_count"),
    ([], {"speed": "x"}, 1, "unknown_option"),
    ([], {"variant": "long"}, 1, "bad_option"),
    ([2, 3], {}, 4, "party_too_big"),
])
def test_impossible_requests_are_refused(counts, options, party, code) -> None:
    with pytest.raises(InvalidRequest) as info:
        normalize_request(SHAPE, counts, options, party)
    assert info.value.code == code


def test_unrated_players_have_the_openskill_default() -> None:
    ratings = FixedRatings()
    ratings.set("strong", Rating(40.0, 2.0), game_id="parlour")
    got = ratings.ratings("parlour", ["strong", "new"])
    assert got["new"] == Rating(25.0, 25.0 / 3.0)
    assert party_rating(got, ["strong", "new"]) == 32.5
    assert ratings.ratings("other", ["strong"])["strong"].mu == 25.0


def test_the_estimate_never_passes_the_backfill_timeout() -> None:
    policy = MatchPolicy(backfill_after=30)
    assert estimate_wait(policy, 0, None) == 30
    assert estimate_wait(policy, 10, 100) == 20
    assert estimate_wait(policy, 5, 8) == 3
    assert estimate_wait(policy, 50, 8) == 0
    assert estimate_wait(MatchPolicy(backfill_after=None), 0, None) == 60


def test_a_large_queue_is_grouped_within_a_tick() -> None:
    """2000 tickets, spread so far apart by rating that nobody fits: the rating index keeps
    this from scanning the whole queue for every ticket."""
    import time

    rng = random.Random(1)
    far_apart = [ticket(f"t{i}", counts=(2,), rating=i * 100.0) for i in range(2000)]
    mixed = [ticket(f"m{i}", counts=tuple(rng.sample(range(2, 7), k=2)), rating=rng.gauss(25, 10),
                    waited=rng.random() * 5) for i in range(2000)]
    started = time.perf_counter()
    assert form_matches(far_apart, NOW, NO_BOTS) == []
    assert len(form_matches(mixed, NOW, NO_BOTS)) > 300
    assert time.perf_counter() - started < 2.0


def test_backfill_seats_the_most_humans_even_past_an_older_party() -> None:
    """A table of 5 for a lone player: taking the older pair first leaves no room for the trio
    (3 humans, 2 bots), but the trio seats one more person (4 humans, 1 bot)."""
    policy = MatchPolicy(backfill_after=10.0, window_start=100)
    queue = [ticket("a", counts=(5,), waited=20), ticket("pair", players=2, counts=(5,), waited=5),
             ticket("trio", players=3, counts=(5,), waited=3)]
    [table] = form_matches(queue, NOW, policy)
    assert (table.seats, table.humans, table.bots) == (5, 4, 1)
    assert sorted(t.ticket_id for t in table.tickets) == ["a", "trio"]
