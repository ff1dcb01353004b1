"""Random complete games with invariants after every event (GR-S14, GR-R13, GR-R15, GR-J01, GR-H02,
GR-E08). Quick profile: a few games per player count; soak (FAMIGLIA_PROFILE=soak): thousands."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from famiglia.engine import fold
from famiglia.rules.grifters import ENGINE
from famiglia.rules.grifters.data import RINGLEADERS, SPECIALISTS
from famiglia.rules.grifters.state import State
from famiglia.testing.random_play import Step, play_random
from tests.profile import examples

ALL_SPECIALISTS = Counter(c.id for c in SPECIALISTS)
PROPERTY_SETTINGS = settings(max_examples=examples(quick=10, soak=1000), deadline=None,
                             suppress_health_check=[HealthCheck.too_slow])
OPTIONS = st.fixed_dictionaries({}, optional={
    "fall_guy_may_copy_fall_guy": st.sampled_from(["true", "false"]),
    "auto_single_option": st.sampled_from(["true", "false"]),
    "skip_first_advance": st.sampled_from(["true", "false"]),
    "empty_hand_token": st.sampled_from(["true", "false"]),
    "job_card_moves_before_reward": st.sampled_from(["true", "false"]),
})


def check_invariants(s: State) -> None:
    # GR-S14: every card in exactly one place, Ringleaders with their owner (GR-C10)
    places: list[str] = [*s.deck, *s.discard]
    for seat, p in enumerate(s.players):
        owned = p.owned_cards()
        places.extend(owned)
        assert all(c.startswith(f"R{seat}-") for c in owned if c.startswith("R")), (seat, owned)
    counts = Counter(places)
    assert all(n == 1 for n in counts.values()), [c for c, n in counts.items() if n > 1]
    assert Counter(c for c in places if c.startswith("SP")) == ALL_SPECIALISTS
    rings = {c.id for c in RINGLEADERS if int(c.id[1]) < s.seats and c.id[3:] in s.config.ringleaders}
    assert {c for c in places if c.startswith("R")} == rings
    # GR-S14: ISK conserved
    tokens = sum(sum(p.tokens) for p in s.players)
    total = s.coffers + sum(p.stash for p in s.players) + tokens + s.out_of_play
    assert total == s.config.isk_tokens and s.coffers >= 0 and all(p.stash >= 0 for p in s.players)
    for seat, p in enumerate(s.players):
        # GR-R15: one group per Night; GR-R13: Refresh areas empty outside their owner's turn
        assert all(not (t and g) for g, t in zip(p.nights, p.tokens, strict=True))
        if seat != s.active:
            assert p.refresh == () and p.in_play == ()
    # GR-E08: the round limit binds
    assert s.round <= s.config.max_rounds


def check_step(before: State, step: Step, after: State) -> None:
    state = before
    for event in step.events:
        kind = event.WhichOneof("kind")
        if kind == "job_completed":  # GR-J01: only from the top of its stack
            assert event.job_completed.job in state.available_jobs()
        state = ENGINE.evolve(state, event)
        check_invariants(state)
    assert state == after
    # GR-H02: no view shows another seat's hand while the game runs
    if not after.over:
        for viewer in [None, *range(after.seats)]:
            v = ENGINE.view(after, viewer)
            assert all(not pv.hand for pv in v.players if pv.seat != viewer)


def play(seats: int, seed: int, options: dict[str, str]) -> Any:
    play = play_random(ENGINE, seats, seed, options, on_step=check_step)
    assert fold(ENGINE, play.events) == play.state  # folding rebuilds the same state
    assert ENGINE.result(play.state) is not None and len(play.steps) <= ENGINE.info.max_steps
    return play


@pytest.mark.timeout(examples(quick=300, soak=7200))
@pytest.mark.parametrize("seats", [2, 3, 4])
@PROPERTY_SETTINGS
@given(seed=st.integers(0, 2**32 - 1), options=OPTIONS)
def test_gr_s14_random_games_keep_every_invariant_and_terminate(seats: int, seed: int,
                                                                 options: dict[str, str]) -> None:
    """GR-S14, GR-R13, GR-R15, GR-J01, GR-H02, GR-E08: invariants after every event."""
    play(seats, seed, options)


@pytest.mark.parametrize("seats", [2, 3, 4])
def test_gr_e08_short_round_limits_end_games_too(seats: int) -> None:
    """GR-E08: with max_rounds=3, random games end by round 3."""
    for seed in range(examples(quick=3, soak=200)):
        p = play(seats, seed, {"max_rounds": "3"})
        assert p.state.round <= 3
