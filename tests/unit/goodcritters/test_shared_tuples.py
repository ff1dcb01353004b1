"""Session 8's shortcuts give what the plain definitions give: the shared commitments tuples
(state.COMMITTING, RELEASING) and the open Step 3 listing by small-int code."""

from __future__ import annotations

import itertools

import pytest

from famiglia.rules.goodcritters import ENGINE, legal
from famiglia.rules.goodcritters import evolve as fold
from famiglia.rules.goodcritters.data import MAX_PLAYERS, MIN_PLAYERS
from famiglia.rules.goodcritters.state import ACTIONS, COMMITTING, NONE_COMMITTED, RELEASING, State, replace
from famiglia.testing.random_play import play_random

from ._helpers import new_game


def _put(items: tuple[bool, ...], seat: int, value: bool) -> tuple[bool, ...]:
    out = list(items)
    out[seat] = value
    return tuple(out)


@pytest.mark.parametrize("seats", range(MAX_PLAYERS + 1))
def test_every_commitments_tuple_commits_and_releases_as_a_rebuilt_tuple(seats: int) -> None:
    assert NONE_COMMITTED[seats] == (False,) * seats
    for t in itertools.product((False, True), repeat=seats):
        for seat in range(seats):
            on, off = COMMITTING[t][seat], RELEASING[t][seat]
            assert on == _put(t, seat, True) and off == _put(t, seat, False)
            assert all(type(x) is bool for x in on + off)
            # the results are the shared tuples themselves, so every later look-up is one too
            assert COMMITTING[on][seat] is on and RELEASING[off][seat] is off


def test_a_tuple_made_elsewhere_commits_the_same() -> None:
    state = new_game(5)
    state = replace(state, committed=(False, True, False, False, True), cards=(1, 2, 0, 0, 3))
    after = fold.committed(state, 0)
    assert after.committed == (True, True, False, False, True)
    assert after.committed is COMMITTING[after.committed][0]
    released = fold.action_card_chosen(state, 1, 4, 1)
    assert released.committed == (False, False, False, False, True) and released.cards[1] == 4


@pytest.mark.parametrize("options", [{}, {"payoff.enabled": "true"}, {"step3_public_change_limit": "0"}])
def test_every_state_of_random_play_keeps_shared_commitments_and_lists_as_the_plain_shape(
    options: dict[str, str],
) -> None:
    seen = 0

    def check(before: State, step: object, after: State) -> None:
        nonlocal seen
        for s in (before, after):
            assert COMMITTING[s.committed] is not None
            assert s.committed is NONE_COMMITTED[s.seats] or any(
                s.committed is COMMITTING[_put(s.committed, i, False)][i]
                for i in range(s.seats)
            )
            if s.step is not ACTIONS:
                continue
            conf = s.config
            for seat in range(s.seats):
                can_change = s.changes[seat] < conf.public_change_limit
                plain = list(
                    legal._simple_commands(
                        True,
                        s.committed[seat],
                        s.choices[seat] < conf.card_choice_limit,
                        s.cards[seat] != 0,
                        False,
                        can_change,
                        seat,
                        s.seats,
                        s.threats[seat],
                    )
                )
                listing = ENGINE.legal_commands(s, seat)
                assert listing[: len(plain)] == plain and all(
                    a is b for a, b in zip(listing, plain, strict=False)
                )
                if not (can_change and conf.payoff):
                    assert len(listing) == len(plain)
                seen += 1

    for seats in range(MIN_PLAYERS, MAX_PLAYERS + 1):
        play_random(ENGINE, seats, seats, options, on_step=check)
    assert seen > 1000
