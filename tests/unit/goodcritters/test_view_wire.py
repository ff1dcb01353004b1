"""`view` builds the View from memoised wire pieces (the table-wide part, the options, the
assignments, each seat's row). It must be the very message the plain field-by-field build
gives (`plain_view`, the definition it replaced), for every viewer, in every step, with the
Payoff variant, private Stash counts and after the game is over."""

from __future__ import annotations

from typing import Any

import pytest

from famiglia.goodcritters.v1 import goodcritters_pb2 as pb
from famiglia.rules.goodcritters import ENGINE
from famiglia.rules.goodcritters.config import OPTIONS as SPECS
from famiglia.rules.goodcritters.data import NOBODY, fuzz_gap_range
from famiglia.rules.goodcritters.state import State
from famiglia.rules.goodcritters.view import offer_loot_seen
from famiglia.testing.random_play import play_random

OPTIONS = [
    {},
    {"payoff.enabled": "true", "stash_counts_public": "false"},
    {"step3_mode": "turns", "payoff.enabled": "true", "first_boss_seat": "1"},
]


def plain_view(state: State, viewer: int | None) -> Any:
    """The View built field by field (GC-H01 to GC-H13, GC-P13, GC-P15)."""
    over = state.over
    s = state
    v: Any = pb.View(
        viewer=NOBODY if viewer is None else viewer,
        seats=s.seats,
        round=s.round,
        step=s.step,  # type: ignore[arg-type]
        boss=s.boss,
        turn=s.turn,
        pile_count=len(s.pile),
        table=s.table,
        yes_votes=sum(1 for c in s.revealed if c == 1),
        no_votes=sum(1 for c in s.revealed if c == 2),
        skims_revealed=s.skims,
        fuzz_revealed=s.fuzz_out,
        fuzz_cause=s.fuzz_cause,  # type: ignore[arg-type]
        confiscated=s.confiscated,
        pile_start=s.pile_start,
        end_reason=s.end_reason,  # type: ignore[arg-type]
        fuzz_position=NOBODY,
    )
    played = {**{o.key: o.default for o in SPECS}, **dict(s.options)}   # every option, defaults included
    v.options.extend(pb.OptionValue(key=k, value=val) for k, val in sorted(played.items()))
    low, high = fuzz_gap_range(s.seats, s.pile_start - 1) if s.pile_start else (0, 0)
    v.fuzz_min_above, v.fuzz_max_above = low, high
    if s.assignment:
        v.assignments.extend(pb.LootAssignment(card=c, seat=seat) for c, seat in zip(s.table, s.assignment, strict=True))
    counts_public = s.config.stash_counts_public or over
    for seat in range(s.seats):
        own = seat == viewer
        sv = v.seat_views.add(
            seat=seat,
            stash_count=len(s.stashes[seat]) if (counts_public or own) else 0,
            threat_target=s.threats[seat],
            has_card=bool(s.cards[seat]),
            choices=s.choices[seat],
            committed=s.committed[seat],
            public_changes=s.changes[seat],
            revealed_card=s.revealed[seat],
            payoff_cards=s.payoff_cards[seat],
            tokens_left=(s.config.tokens_per_player - s.offers_out(seat)) if s.config.payoff else 0,
        )
        if own or over:
            sv.stash.extend(s.stashes[seat])
            sv.chosen_card = s.cards[seat]
        elif viewer is not None:
            sv.known_loot.extend(card for knower, holder, card in s.known if (knower, holder) == (viewer, seat))
    for o in s.offers:
        ov = v.offers.add(briber=o.briber, target=o.target, side=o.side, loot_count=len(o.loot),
                          payoff_cards=o.payoff_cards, visibility=o.visibility)
        if over or offer_loot_seen(o.visibility, o.briber, o.target, viewer):
            ov.loot.extend(o.loot)
    if s.last_vote is not None:
        lv = s.last_vote
        v.last_vote.CopyFrom(pb.CountedVote(round=lv.round, boss=lv.boss, cards=lv.cards, threats=lv.threats,  # type: ignore[arg-type]
                                            yes=lv.yes, no=lv.no, outcome=lv.outcome))  # type: ignore[arg-type]
    if over:
        v.pile.extend(s.pile)
        if s.fuzz_out:  # every card drawn before it lay above it
            v.fuzz_position = s.pile_start - 1 - len(s.pile)
    return v


@pytest.mark.parametrize("options", OPTIONS)
def test_the_view_is_the_plain_one_for_every_viewer(options: dict[str, str]) -> None:
    checked = offers = known = 0
    for seats, seed in ((4, 0), (5, 3), (8, 1)):
        states: list[State] = []
        play_random(ENGINE, seats, seed, options, on_step=lambda before, step, after, keep=states.append: keep(after))
        assert states[-1].over
        for state in states[::2] + states[-1:]:
            for viewer in [None, *range(seats)]:
                got, want = ENGINE.view(state, viewer), plain_view(state, viewer)
                assert got == want
                assert got.SerializeToString(deterministic=True) == want.SerializeToString(deterministic=True)
                assert got.SerializeToString() == want.SerializeToString()
                checked += 1
                offers += len(want.offers)
                known += sum(len(sv.known_loot) for sv in want.seat_views)
    assert checked > 500
    assert known > 0, "robs in every game: some views know another Stash's card"
    if options.get("payoff.enabled") == "true":
        assert offers > 0


def test_a_changed_seat_changes_its_row() -> None:
    """The rows are memoised by their values: two states that differ in one seat's field give
    different rows for that seat and the same for the others."""
    states: list[State] = []
    play_random(ENGINE, 4, 2, on_step=lambda before, step, after, keep=states.append: keep(after))
    seen = set()
    for state in states:
        view = ENGINE.view(state, 0)
        seen.add(view.SerializeToString())
        assert view == plain_view(state, 0)
    assert len(seen) > len(states) // 2
