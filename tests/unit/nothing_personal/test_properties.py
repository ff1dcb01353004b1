"""Property tests: random complete games keep the table's invariants after every event.

NP-S1, NP-S3 (25 markers per family, 25 neutral, 8 blackmail and 2 Omerta coins), Tables G and H
(50 gangsters and 94 influence cards, each in exactly one place), NP-X6 (money never negative),
NP-X7 (Respect never below 0), NP-R1 (exactly 5 rounds), NP-W7 (the Capo Ring), fold determinism,
NP-H1 (no seat's view contains another hand).
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from famiglia.engine import MatchConfig, Rng, fold
from famiglia.rules.nothing_personal import ENGINE
from famiglia.rules.nothing_personal.board import strict
from famiglia.rules.nothing_personal.data import GANGSTERS, INFLUENCE
from famiglia.rules.nothing_personal.state import Phase, State
from famiglia.testing.random_play import choose_actor
from tests.profile import examples

ALL_GANGSTERS = Counter(g.id for g in GANGSTERS)
ALL_CARDS = Counter(c.id for c in INFLUENCE)

OPTIONS = st.fixed_dictionaries({}, optional={
    "random_setup": st.sampled_from(["false", "true"]),
    "reroll_tokens": st.sampled_from(["false", "true"]),
    "keep_your_word": st.sampled_from(["false", "true"]),
    "arrest_associates": st.sampled_from(["false", "true"]),
})


def check_table(s: State) -> None:
    n = s.n
    for seat in range(n):   # NP-S1: 25 family markers, each in exactly one place
        assert s.supply[seat] + sum(g.markers[seat] for g in s.gs) == 25
        assert s.supply[seat] >= 0
    assert s.neutral + sum(g.neutral for g in s.gs) == 25   # NP-S3
    assert s.bm_free + sum(1 for g in s.gs if g.coin >= 0) == 8
    assert s.om_free + sum(1 for g in s.gs if g.omerta) == 2
    if not s.order:   # still dealing the opening events (NP-S5..S8)
        return
    zones = [g for g in s.board if g] + list(s.gdeck) + list(s.prison) + list(s.fishes)
    assert Counter(zones) == ALL_GANGSTERS, "every gangster in exactly one zone"
    on_board = set(s.board)
    for g, st_ in zip(GANGSTERS, s.gs, strict=True):
        if g.id not in on_board:
            assert st_.total == 0 and st_.coin == -1 and not st_.omerta, f"markers off the board on {g.id}"
    cards = [c for h in s.hands for c in h] + list(s.deck) + list(s.discard) + list(s.table)
    assert Counter(cards) == ALL_CARDS, "every influence card in exactly one place"
    assert all(m >= 0 for m in s.money), "NP-X6"
    assert all(r >= 0 for r in s.respect), "NP-X7"
    assert 0 <= s.round <= 5


def check_ring(s: State) -> None:
    """NP-W7: whoever strictly controls position 9 holds the ring (checked between commands)."""
    capo = s.board[8]
    if capo and s.phase != Phase.SETUP or (capo and s.round == 0 and s.idx > 0):
        holder = strict(s, capo)
        if holder >= 0:
            assert s.ring == holder, f"ring {s.ring} but seat {holder} strictly controls the Capo"


def check_views(s: State) -> None:
    for seat in range(s.n):
        v = ENGINE.view(s, seat)
        assert sorted(v.hand) == sorted(s.hands[seat])
        if s.phase != Phase.OVER:
            others = {c for i, h in enumerate(s.hands) if i != seat for c in h}
            assert not v.hands_all and not v.influence_deck and not v.gangster_deck
            assert not others & set(v.hand)
            assert list(v.hand_sizes) == [len(h) for h in s.hands]


def play_checked(seats: int, seed: int, options: dict[str, str]) -> State:
    import random

    events = ENGINE.setup(MatchConfig(seats, options), seed)
    state = None
    for e in events:
        state = ENGINE.evolve(state, e)
        check_table(state)
    chooser = random.Random(seed)
    rounds = set()
    version = len(events) + 1
    steps = 0
    while ENGINE.result(state) is None:
        picked = choose_actor(ENGINE, state, chooser)
        assert picked is not None
        seat, command = picked
        new = ENGINE.decide(state, seat, command, Rng.derive(seed, version))
        version += len(new)
        for e in new:
            state = ENGINE.evolve(state, e)
            check_table(state)
            rounds.add(state.round)
        events.extend(new)
        check_ring(state)
        steps += 1
        if steps % 25 == 0:
            check_views(state)
        assert steps <= ENGINE.info.max_steps
    assert rounds - {0} == {1, 2, 3, 4, 5}, "NP-R1: exactly 5 rounds"
    assert fold(ENGINE, events) == state, "folding rebuilds the same state"
    check_views(state)
    return state


@pytest.mark.parametrize("seats", [3, 4, 5])
@settings(max_examples=examples(quick=2, soak=700), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), options=OPTIONS)
def test_np_r1_random_games_keep_every_invariant(seats: int, seed: int, options: dict[str, str]) -> None:
    """NP-R1."""
    final = play_checked(seats, seed, options)
    result = ENGINE.result(final)
    assert result is not None
    assert sorted(s.rank for s in result.seats) == list(range(1, seats + 1)), "NP-T7 orders every seat"


def test_folding_decides_own_events_gives_the_states_decide_computed() -> None:
    """Fold determinism (DESIGN): the reuse of decide's states is exact and keyed by identity."""
    import dataclasses

    from tests.unit.nothing_personal.support import round1

    s = round1(4)
    seat = ENGINE.pending(s)[0].seat
    events = ENGINE.decide(s, seat, ENGINE.timeout_command(s, seat), Rng(1))
    fast = fold(ENGINE, events, s)
    copy = dataclasses.replace(s)           # equal, but another object: no reuse
    slow = fold(ENGINE, [type(e).FromString(e.SerializeToString()) for e in events], copy)
    assert fast == slow
