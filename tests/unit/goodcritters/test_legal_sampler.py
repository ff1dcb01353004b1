"""legal_commands with `rng`: draws from the whole of each compound choice, the Boss's split
(GC-A01, GC-X01) and the Payoff variant's gifts and offers (GC-P06 to GC-P10); without `rng`,
the same listing as ever (GC-D01)."""

from __future__ import annotations

import random
from collections.abc import Iterable

from famiglia.engine import Rng, Sampled
from famiglia.rules.goodcritters.commands import Command
from famiglia.rules.goodcritters.flow import OPTIONAL
from famiglia.rules.goodcritters.legal import (
    ASSIGNMENT_SAMPLE,
    COMPOUND,
    all_assignments,
    all_gifts,
    all_offers,
    sample_assignments,
)
from famiglia.rules.goodcritters.state import State, Step

from ._helpers import ENGINE, C, act, assign, loot, table_state

PAYOFF = {"payoff.enabled": "true"}


def _keys(commands: Iterable[Command]) -> set[bytes]:
    return {c.SerializeToString(deterministic=True) for c in commands}


def _compound(commands: Iterable[Command]) -> list[Command]:
    return [c for c in commands if c.WhichOneof("kind") in COMPOUND]


def _bribing_step3(**options: str) -> State:
    """Step 3 of the Payoff variant; seat 0 holds 2 Loot cards and 1 Payoff card, so it has
    7 bundles to give: 42 gifts and 126 offers at 4 seats."""
    stashes = [loot(1, 36)] + [loot(2 + i, 37 + i, 72 + i, 107 + i) for i in range(3)]
    state, _ = assign(table_state(options={**PAYOFF, **options}, stashes=stashes, payoff_cards=[1, 5, 5, 5]))
    assert state.step is Step.ACTIONS
    return state


def test_gc_a01_gc_x01_the_sampler_draws_every_split_and_decide_takes_them() -> None:
    """GC-A01, GC-X01: any split is legal. Of the 64 splits of 3 cards at 4 seats the fixed
    listing names 12; the sampler's draws come up with all 64, and a split only they listed is
    decided as any other."""
    state = table_state(4, table=loot(61, 62, 63))
    fixed = ENGINE.legal_commands(state, 0)
    assert isinstance(fixed, Sampled) and len(fixed) == ASSIGNMENT_SAMPLE
    every = _keys(C.assign_loot(pairs) for pairs in all_assignments(state))
    assert len(every) == 64
    draws = random.Random(1)
    seen: set[bytes] = set()
    for _ in range(100):
        listed = ENGINE.legal_commands(state, 0, 16, rng=draws)
        assert isinstance(listed, Sampled) and len(listed) == 8  # as many as without rng
        seen |= _keys(listed)
    assert seen == every
    drawn = ENGINE.legal_commands(state, 0, rng=random.Random(2))
    new = next(c for c in drawn if c.SerializeToString(deterministic=True) not in _keys(fixed))
    after, _ = act(state, 0, new)
    assert after.step is Step.ACTIONS
    assert after.assignment == tuple(a.seat for a in new.assign_loot.assignments)


def test_gc_a01_a_split_that_fits_is_listed_whole() -> None:
    """GC-A01: one table card at 5 seats is 5 splits; the sampler lists each once."""
    state = table_state(5, table=loot(61))
    listed = ENGINE.legal_commands(state, 0, rng=random.Random(3))
    assert sorted(c.assign_loot.assignments[0].seat for c in listed) == [0, 1, 2, 3, 4]


def test_gc_p06_to_gc_p10_the_sampler_draws_every_gift_and_offer() -> None:
    """GC-P06 to GC-P10: any non-empty bundle of the seat's Loot and Payoff cards, to any other
    seat, as a gift (open or private) or as an offer (either side, any visibility). The fixed
    listing names 2 offers and 2 gifts of the 168; the sampler comes up with all of them, and
    decide takes each it lists."""
    state = _bribing_step3()
    every = _keys(all_gifts(state, 0)) | _keys(all_offers(state, 0))
    assert len(every) == 168
    fixed = ENGINE.legal_commands(state, 0)
    assert isinstance(fixed, Sampled) and len(_compound(fixed)) == 4
    draws = random.Random(4)
    seen: set[bytes] = set()
    for n in range(200):
        listed = ENGINE.legal_commands(state, 0, 32, rng=draws)
        drawn = _compound(listed)
        assert len(drawn) == len(_keys(drawn)) > 0, "distinct draws in every listing"
        seen |= _keys(drawn)
        if n % 10 == 0:
            for command in listed:
                ENGINE.decide(state, 0, command, Rng(n))
    assert seen == every


def test_gc_p06_gc_p08_only_the_offers_and_gifts_the_seat_may_make_are_drawn() -> None:
    """GC-P08: no offer in front of a seat that already has one of this briber's, none once the
    tokens are out; GC-P06: gifts only in the gift steps."""
    state, _ = act(_bribing_step3(), 0, C.make_offer(1, 1, (), 1, 1))
    for n in range(20):
        for command in _compound(ENGINE.legal_commands(state, 0, rng=random.Random(n))):
            assert command.WhichOneof("kind") == "give_gift" or command.make_offer.target != 1
    state = _bribing_step3(**{"payoff.tokens_per_player": "0", "payoff.gift_steps": "2"})
    listed = ENGINE.legal_commands(state, 0, rng=random.Random(5))
    assert not isinstance(listed, Sampled) and not _compound(listed)


def test_gc_a01_gc_p06_the_boss_draws_splits_and_gifts_within_the_limit() -> None:
    """GC-A01, GC-P06: in Step 2 the Boss's listing holds drawn splits (non-optional, first)
    and drawn gifts, both within the limit, all accepted."""
    state = table_state(options=PAYOFF)
    for limit in (1, 2, 5, 16, 40):
        listed = ENGINE.legal_commands(state, 0, limit, rng=random.Random(limit))
        kinds = [c.WhichOneof("kind") for c in listed]
        splits = kinds.count("assign_loot")
        assert len(listed) <= limit and splits == max(1, min(8, limit // 2))
        assert kinds == ["assign_loot"] * splits + ["give_gift"] * (len(kinds) - splits)
        assert len(listed) == limit or limit > 16, "the gifts fill the room the splits leave"
        for command in listed:
            ENGINE.decide(state, 0, command, Rng(limit))


def test_gc_d01_the_sampler_keeps_the_limit_and_the_non_optional_commands_first() -> None:
    """GC-D01: with any limit the drawn listing is at most that long, its non-optional commands
    (the card choices and the commit) come first as without rng, and the drawn offers and gifts
    keep a share of what room is left."""
    state = _bribing_step3()
    state, _ = act(state, 0, C.choose_action_card(1))  # a card chosen: commit is listed too
    required = [c for c in ENGINE.legal_commands(state, 0) if c.WhichOneof("kind") not in OPTIONAL]
    assert len(required) == 11
    for limit in range(0, 40):
        listed = ENGINE.legal_commands(state, 0, limit, rng=random.Random(limit))
        assert isinstance(listed, Sampled) and len(listed) <= limit
        assert listed[: len(required)] == required[:limit]
        if limit > len(required):
            assert _compound(listed)


def test_gc_d01_without_rng_the_listing_is_the_fixed_one() -> None:
    """GC-D01: without rng nothing is drawn: the same commands every time (the Boss's are
    `sample_assignments`), a `Sampled` exactly when a compound choice is listed; with rng the
    small commands are the same, and the same draws come of the same seed."""
    boss = table_state()
    fixed = ENGINE.legal_commands(boss, 0)
    assert fixed == [C.assign_loot(p) for p in sample_assignments(boss, ASSIGNMENT_SAMPLE)]
    assert fixed == ENGINE.legal_commands(boss, 0, rng=None)
    for state, seat in ((boss, 0), (_bribing_step3(), 0), (_bribing_step3(), 1)):
        fixed = ENGINE.legal_commands(state, seat)
        assert isinstance(fixed, Sampled) and _compound(fixed)
        assert fixed == ENGINE.legal_commands(state, seat)
        drawn = ENGINE.legal_commands(state, seat, rng=random.Random(6))
        assert isinstance(drawn, Sampled)
        assert [c for c in drawn if c not in _compound(drawn)] == [c for c in fixed if c not in _compound(fixed)]
        assert drawn == ENGINE.legal_commands(state, seat, rng=random.Random(6))
    plain, _ = assign(table_state())  # no Payoff variant: Step 3 has no compound choice
    for seat in range(4):
        fixed = ENGINE.legal_commands(plain, seat)
        drawn = ENGINE.legal_commands(plain, seat, rng=random.Random(7))
        assert type(fixed) is list and type(drawn) is list and drawn == fixed
