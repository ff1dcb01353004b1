"""The search's worlds (`determinize`) against what a seat can know from its View: the Vendetta
deck after a reshuffle (NC-K55) and the Street spaces a hidden bid can name (NC-X07)."""

from __future__ import annotations

from famiglia.engine import Rng
from famiglia.nostra_city.v1 import nostra_city_pb2 as pb
from famiglia.rules.nostra_city import ENGINE
from famiglia.rules.nostra_city.data import ATLANTIC_CARD, VENDETTA, VENDETTA_BY_ID
from famiglia.rules.nostra_city.decide import Emitter, draw_vendetta
from famiglia.rules.nostra_city.state import Draw, State

from .helpers import END, bid, business_table, meeting_table, notes, run, seat, table

WORLDS = 200

HANDS = {1: ("V01",), 2: ("V02", "V04"), 3: ("V07",), 0: ("V08",)}
"""Vendetta hands before the reshuffle: both Snitches with other seats, one Revenge card in the viewer's."""


def _alike(a: pb.View, b: pb.View) -> bool:
    """The same View but for the Street deck's size (the test tables' Street decks are not full)."""
    return all(getattr(a, f.name) == getattr(b, f.name) for f in pb.View.DESCRIPTOR.fields
               if f.name != "street_deck_size")


def _reshuffled(dice: int = 0) -> State:
    """The Vendetta deck ran out: everything not in a hand, nor Atlantic City (in seat 3's
    Territory), is on the discard pile when seat 1 is Cheated of one card (NC-K55)."""
    s = business_table()
    for i, hand in HANDS.items():
        s = seat(s, i, hand=hand)
    s = seat(s, 3, turfs=(*s.players[3].turfs, "AC"))
    held = {c for hand in HANDS.values() for c in hand} | {ATLANTIC_CARD}
    discard = tuple(v.id for v in VENDETTA if v.id not in held)
    em = Emitter(table(s, vendetta_deck=(), vendetta_discard=discard, draws=(Draw(1, 1, 0),)))
    draw_vendetta(em, Rng(dice))
    return em.state


def _drawn_revenge() -> State:
    """`_reshuffled` with a dice that hands seat 1 a Revenge card (no Rage choice open)."""
    for dice in range(50):
        s = _reshuffled(dice)
        if s.choice is None:
            return s
    raise AssertionError("no dice draws a Revenge card")


def test_nc_k55_the_view_names_the_cards_a_vendetta_reshuffle_put_into_the_deck() -> None:
    """NC-K55, NC-H01: the discard pile was public, so every seat and the spectator see which
    cards the reshuffle made the deck; before any reshuffle, none."""
    s = _drawn_revenge()
    before = business_table()
    want = sorted(v.id for v in VENDETTA
                  if v.id not in {c for hand in HANDS.values() for c in hand} | {ATLANTIC_CARD})
    for viewer in (0, 1, 2, 3, None):
        assert list(ENGINE.view(s, viewer).vendetta_reshuffled) == want, viewer
        assert not ENGINE.view(before, viewer).vendetta_reshuffled, viewer


def test_nc_k55_worlds_deal_the_vendetta_deck_from_the_reshuffled_cards_only() -> None:
    """NC-K55, NC-K46: after a reshuffle the deck holds only the old discard pile, so in every
    world seat 0 is dealt no Snitch (and no card outside the reshuffle) is in the deck: both
    Snitches are in other seats' hands, and so is each unseen card that was not reshuffled."""
    s = _drawn_revenge()
    view = ENGINE.view(s, 0)
    reshuffled = set(view.vendetta_reshuffled)
    unseen_outside = {"V01", "V02", "V04", "V07"}  # held before the reshuffle, never shown
    dealt_to_hands: set[str] = set()
    for dice in range(WORLDS):
        world = ENGINE.determinize(view, 0, Rng(dice))
        assert set(world.vendetta_deck) <= reshuffled, (dice, world.vendetta_deck)
        hands = [c for i, p in enumerate(world.players) if i != 0 for c in p.hand]
        assert unseen_outside <= set(hands), (dice, hands)
        assert all(VENDETTA_BY_ID[c].kind in ("snitch", "revenge") for c in hands), dice
        assert _alike(ENGINE.view(world, 0), view), dice
        dealt_to_hands.update(c for c in hands if c in reshuffled)
    assert dealt_to_hands, "seat 1's new card, a reshuffled Revenge card, comes up in a hand"


def _empty_spaces_meeting() -> State:
    """March's Meeting after the Street deck ran out: only spaces 1 and 3 hold a card (NC-X07).
    Seats 1 and 2 each placed a sealed bid; seat 0 is to act."""
    s = table(meeting_table(), street=("R1", "", "R3", ""), street_deck=(), month=3, order=(1, 2, 0, 3))
    s, _ = run(s, 1, bid("W03", 3, notes(10000, "I", 1, skip=2)))
    s, _ = run(s, 1, END)
    s, _ = run(s, 2, bid("W06", 1, notes(10000, "G", 1, skip=4)))
    s, _ = run(s, 2, END)
    assert s.turn_seat == 0, s.turn_seat
    return s


def test_nc_x07_worlds_put_hidden_bids_only_on_street_spaces_holding_a_card() -> None:
    """NC-X07, NC-H05: a hidden bid's Location card names a space with a card, never an empty
    one, in every world dealt to seat 0; its unused Location cards are the others."""
    s = _empty_spaces_meeting()
    view = ENGINE.view(s, 0)
    named: set[int] = set()
    for dice in range(WORLDS):
        world = ENGINE.determinize(view, 0, Rng(dice))
        for b in world.bids:
            assert b.location in (1, 3), (dice, b)
            assert b.location not in world.players[b.seat].locations, (dice, b)
            named.add(b.location)
        assert _alike(ENGINE.view(world, 0), view), dice
        assert ENGINE.legal_commands(world, 0, limit=64) == ENGINE.legal_commands(s, 0, limit=64), dice
    assert named == {1, 3}
    s, _ = run(s, 0, END)  # (the table plays on)


def test_nc_h08_the_no_leak_check_moves_a_snitch_between_hidden_hands_after_a_reshuffle() -> None:
    """NC-H08, NC-H09, NC-K55: after a reshuffle the deck holds only reshuffled cards, but who
    holds a Snitch is still hidden, so the contract's perturbation (`perturb_hidden`, the no-leak
    check) must move one between other seats' hands: pinned to its holder, a View telling who
    holds it after a reshuffle would pass. The deck it deals stays reshuffled cards only, and no
    Rage card lands in a hand."""
    import random

    from tests.contracts.test_nostra_city_contract import perturb_hidden

    s = _drawn_revenge()
    holder = {c: i for i, p in enumerate(s.players) for c in p.hand if c in ("V01", "V02")}
    reshuffled = set(s.vendetta_reshuffled)
    moved = False
    for seed in range(WORLDS):
        other = perturb_hidden(s, 0, random.Random(seed))
        assert ENGINE.view(other, 0) == ENGINE.view(s, 0), seed
        assert set(other.vendetta_deck) <= reshuffled, (seed, other.vendetta_deck)
        assert all(VENDETTA_BY_ID[c].kind in ("snitch", "revenge") for p in other.players for c in p.hand), seed
        assert other.players[0].hand == s.players[0].hand, seed
        moved = moved or any(c in p.hand and holder[c] != i for i, p in enumerate(other.players) for c in holder)
    assert moved, "a Snitch never left the hand that holds it"
