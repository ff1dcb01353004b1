"""determinize (GR-H01..GR-H11 from one seat's side) and timeout play (GR-D06)."""

from __future__ import annotations

import pytest

from famiglia.engine import MatchConfig, Rng, fold
from famiglia.rules.grifters import ENGINE
from famiglia.rules.grifters.data import SPECIALISTS
from famiglia.rules.grifters.state import OPPONENT
from famiglia.testing.random_play import Step, play_random
from tests.profile import examples

from ._helpers import CON, ENFORCER, FALL, act, caper, kinds, of_kind, sp, table


def test_gr_h02_determinize_agrees_with_the_seats_view_and_decisions() -> None:
    """GR-H02, GR-H05: a sampled state looks the same to the seat and offers the same commands."""
    checked = 0

    def check(before, step: Step, after) -> None:  # type: ignore[no-untyped-def]
        nonlocal checked
        for seat in range(after.seats):
            v = ENGINE.view(after, seat)
            d = ENGINE.determinize(v, seat, Rng(checked))
            assert ENGINE.view(d, seat) == v
            assert ENGINE.pending(d) == ENGINE.pending(after)
            assert ENGINE.legal_commands(d, seat) == ENGINE.legal_commands(after, seat)
            for cmd in ENGINE.legal_commands(d, seat)[:3]:
                ENGINE.decide(d, seat, cmd, Rng(1))
            checked += 1

    for seed in range(examples(quick=3, soak=100)):
        play_random(ENGINE, 2 + seed % 3, seed, on_step=check)
    assert checked


@pytest.mark.parametrize("seats", [2, 3, 4])
def test_gr_d06_a_game_of_timeouts_only_is_legal_and_ends(seats: int) -> None:
    """GR-D06: the timeout command is always legal; a match of timeouts ends."""
    for seed in range(examples(quick=2, soak=50)):
        state = fold(ENGINE, ENGINE.setup(MatchConfig(seats, {}), seed))
        steps = 0
        while ENGINE.result(state) is None:
            (p,) = ENGINE.pending(state)
            cmd = ENGINE.timeout_command(state, p.seat)
            assert cmd is not None
            state = fold(ENGINE, ENGINE.decide(state, p.seat, cmd, Rng(steps)), state)
            steps += 1
            assert steps <= ENGINE.info.max_steps
        assert all(ENGINE.timeout_command(state, s) is None for s in range(seats))


def test_gr_d04_determinize_keeps_a_card_the_open_fall_guy_choice_can_copy() -> None:
    """GR-D04, GR-K20: a Fall Guy's choice is asked only when the hand holds a card it may copy,
    so another seat's open copy choice tells everyone there is one; every sampled world keeps
    one there, and the chooser is never left pending without a legal answer."""
    from famiglia.rules.grifters.data import SPECIALISTS
    from famiglia.rules.grifters.state import COPY

    from ._helpers import CON, FALL, act, caper, sp, table

    rings = ("R1-MM", "R1-TH", "R1-PP")
    deck = (sp(13, 2), sp(13, 3))  # the other Fall Guys: unseen, as is the card left in hand
    kept = {FALL, CON, *deck}
    s = table(2, active=1, hands={0: ("R0-MM", "R0-TH", "R0-PP"), 1: (FALL, CON)},
              nights={1: ((rings[0],), (rings[1],), (rings[2],))}, deck=deck,
              discard=[c.id for c in SPECIALISTS if c.id not in kept])
    s, _ = act(s, caper(FALL))
    assert s.choice == COPY and s.players[1].hand == (CON,)
    view = ENGINE.view(s, 0)
    for seed in range(40):
        d = ENGINE.determinize(view, 0, Rng(seed))
        assert ENGINE.view(d, 0) == view
        assert ENGINE.legal_commands(d, 1), f"seed {seed}: seat 1 holds {d.players[1].hand}, nothing to copy"


def test_gr_h05_determinize_deals_the_deck_from_the_reshuffled_cards_only() -> None:
    """GR-H05: after a reshuffle every seat knows the deck holds only cards of the old discard
    pile (View.reshuffled); a world that put another card there would be one the seat can rule out."""
    reshuffled = [sp(9, 1), sp(6, 3), sp(6, 2)]
    rest = [c.id for c in SPECIALISTS if c.id not in {*reshuffled, CON, sp(2, 1)}]
    s = table(2, hands={0: [sp(2, 1), CON], 1: rest}, deck=[], discard=reshuffled)
    s, _ = act(s, caper(sp(2, 1)))  # Recruiter: draw 2 of the 3, one stays in the deck
    assert len(s.deck) == 1
    for seat in (0, 1):
        view = ENGINE.view(s, seat)
        for k in range(8):
            world = ENGINE.determinize(view, seat, Rng(k))
            assert ENGINE.view(world, seat) == view
            assert len(world.deck) == 1 and set(world.deck) <= set(reshuffled)


@pytest.mark.parametrize(("active", "expected"), [(0, 1), (1, 2), (2, 0)])
def test_gr_d03_the_default_opponent_on_a_stash_tie_is_the_first_from_the_active_players_left(
    active: int, expected: int
) -> None:
    """GR-D03: the timeout default for "opponent to steal from" is the largest Stash; on a tie,
    the first in seat order from the active player's left (not the lowest seat, not the last)."""
    stash = {seat: 4 for seat in range(3)}
    s = table(3, hands={active: [f"R{active}-PP", CON]}, stash=stash, active=active)
    _, events = act(s, caper(f"R{active}-PP", use_defaults=True))
    assert [e.opponent for e in of_kind(events, "opponent_chosen")] == [expected]
    opened = table(3, hands={active: [f"R{active}-PP", CON]}, stash=stash, active=active)
    opened, _ = act(opened, caper(f"R{active}-PP"))
    assert opened.choice == OPPONENT  # the timeout of the open choice takes the same default
    after, _ = act(opened, ENGINE.timeout_command(opened, active))
    assert after.players[expected].stash == 2


def test_gr_d06_the_copy_default_skips_fall_guys_when_a_fall_guy_may_be_copied() -> None:
    """GR-D03, GR-D06: the Fall Guy's default is "the first non-Fall Guy in hand order", also
    where GR-F01 `fall_guy_may_copy_fall_guy` makes another Fall Guy a legal option that comes
    first in hand order (SP13 before SP15)."""
    s = table(2, hands={0: [FALL, sp(13, 2), ENFORCER]}, options={"fall_guy_may_copy_fall_guy": "true"})
    _, events = act(s, caper(FALL, use_defaults=True))
    assert [e.card for e in of_kind(events, "caper_copied")] == [ENFORCER]
    assert "choice_opened" not in kinds(events)
