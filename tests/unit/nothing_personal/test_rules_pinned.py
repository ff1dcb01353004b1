"""Nothing Personal rules a mutation of the engine once changed without any other test noticing,
and NP-W39: no tie ruling asked where nobody's Respect changes."""

from __future__ import annotations

import pytest

from famiglia.engine import Rng
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb
from famiglia.rules.nothing_personal.board import leaders
from famiglia.rules.nothing_personal.crew import free_means
from famiglia.rules.nothing_personal.effects import EFFECTS, Ctx
from famiglia.rules.nothing_personal.state import Act, Roll
from famiglia.rules.nothing_personal.tx import Tx
from tests.unit.nothing_personal.support import (
    Phase,
    at_stage,
    bare,
    cmd,
    empty,
    hand,
    kinds,
    mark,
    markers_of,
    of,
    pfi,
    place,
    play,
    por,
    refused,
    replace,
    std,
    step,
)


def rolled(s, pos: int, seat: int, die: str, face: str, purpose: str, target: str = "", q: int = 0):
    """The Crew, an action turn at `pos` whose die is `face` and whose reroll window has closed."""
    s = at_stage(s, Phase.CREW, "roll_result", pos=pos, sweep=1)
    g = s.board[pos - 1]
    return replace(s, act=Act(pos, g, seat, stage=2), roll=Roll(die, face, purpose, seat, g, target, q))


def acting(s, pos: int, gid: str, seat: int):
    s = mark(place(s, {pos: gid}), gid, {seat: 1})
    s = at_stage(s, Phase.CREW, "action", pos=pos, sweep=1)
    return replace(s, act=Act(pos, gid, seat))


# -- NP-W39 with NP-W4 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("die,face,purpose", [("whack", "pistol", "whack"), ("move", "ring", "move")])
def test_np_w39_np_w4_no_loser_ruling_when_the_target_has_no_printed_respect(die, face, purpose) -> None:
    """NP-W39: "When the target's printed Respect is 0 or less, a successful Move or Whack changes
    nobody's Respect". NP-W4 asks the ring holder for a ruling only "when a rule needs the controller
    of a tied gangster"; with no Respect to lose, no rule needs the loser, so the ring holder must not
    be asked (a needless 30 s decision, NP-D9; the engine asked before)."""
    s = place(bare(ring=0), {5: "C01"})                      # C01: printed Respect 0, at position 5
    s = mark(mark(s, "T01", {1: 1}), "C01", {2: 1, 3: 1})    # C01 tied between seats 2 and 3
    s = replace(s, respect=(5, 5, 5, 5))
    events, after = step(rolled(s, 1, 1, die, face, purpose, target="C01", q=5))
    assert "tie_ruling_asked" not in kinds(events), "no ruling is needed: nobody's Respect changes"
    assert after.respect == (5, 5, 5, 5)


# -- surviving mutants ----------------------------------------------------------------------------------------
def test_np_w35_move_bonus_decides_a_borderline_move() -> None:
    """NP-W35: n + printed Respect (+1 with MOVE_BONUS) > q. T02 (Respect 4, MOVE_BONUS) at 2 moves
    against 6 and rolls a 2: 2 + 4 + 1 = 7 > 6 succeeds; without the bonus 6 > 6 would fail.
    (Kills: bonus dropped.)"""
    s = place(bare(), {2: "T02"})
    s = mark(mark(s, "T02", {1: 1}), "H04", {2: 1})          # H04 at 6 (support.STD)
    events, _ = step(rolled(s, 2, 1, "move", "2", "move", q=6))
    assert of(events, "move_resolved")[0].outcome == "success"
    plain = place(bare(), {2: "T01"})                         # T01: Respect 4, no bonus: 6 > 6 fails
    plain = mark(mark(plain, "T01", {1: 1}), "H04", {2: 1})
    events, _ = step(rolled(plain, 2, 1, "move", "2", "move", q=6))
    assert of(events, "move_resolved")[0].outcome == "failure"


@pytest.mark.parametrize("face,respect", [("2", 0), ("4", 0), ("5", 3), ("6", 3), ("1", 0)])
def test_table_f_dice_respect_5_or_6_gains_3_and_2_to_4_nothing(face: str, respect: int) -> None:
    """Table F DICE_RESPECT: "5 or 6 gains 3 Respect, 1 loses 2 Respect, 2-4 nothing". (Kills: 4 gains.)"""
    s = acting(bare(), 3, "G04", 1)
    events, s = play(s, 1, cmd("use_ability", gangster_ability=True, targets=pb.Targets()))
    s = replace(s, window=None, stage="roll_result", roll=replace(s.roll, face=face))
    _, s = step(s)
    assert s.respect[1] == respect


@pytest.mark.parametrize("face,money", [("3", 45), ("4", 57), ("6", 57)])
def test_table_f_double_or_nothing_4_to_6_gains_12(face: str, money: int) -> None:
    """Table F DOUBLE_OR_NOTHING: "Pay $5, then roll the Number die: 4-6 gains $12". (Kills: 4 loses.)"""
    s = acting(bare(), 3, "G09", 1)
    _, s = play(s, 1, cmd("use_ability", gangster_ability=True, targets=pb.Targets()))
    s = replace(s, window=None, stage="roll_result", roll=replace(s.roll, face=face))
    _, s = step(s)
    assert s.money[1] == money


def test_table_f_whack_free_reroll_belongs_to_the_acting_seat_only() -> None:
    """Table F WHACK_FREE_REROLL: "the acting seat may reroll for free once per whack"; NP-D7: a seat
    is asked in a reroll window only with $10 or a free reroll right. Seat 2, broke and not the
    acting seat, has no right and is not asked. (Kills: the right given to every seat.)"""
    w = mark(mark(place(bare(), {1: "H08"}), "H08", {1: 1}), "T03", {2: 1})
    w = replace(w, money=(0,) * 4, roll=Roll("whack", "X", "whack", 1, "H08", "T03"))
    assert pb.REROLL_FREE_WHACK in free_means(w, 1)
    assert pb.REROLL_FREE_WHACK not in free_means(w, 2)
    w = replace(at_stage(w, Phase.CREW, "roll", pos=1, sweep=1), roll=w.roll, act=Act(1, "H08", 1, stage=2))
    events, w = step(w)
    assert list(of(events, "window_opened")[0].seats) == [1]


def test_np_f5_purchases_count_the_discard_pile_too() -> None:
    """NP-F5: n may not exceed floor(money / 10), "nor the number of cards in the influence deck plus
    the discard pile" (NP-X4 reshuffles the discards). With 1 card in the deck and 5 discarded, a
    seat with $50 may buy 5. (Kills: the deck alone counted.)"""
    s = at_stage(replace(bare(), money=(50,) * 4), Phase.FENCE, "buy", order=(0, 1, 2, 3), idx=0)
    rest = s.deck[6:]
    s = replace(s, deck=s.deck[:1], discard=s.deck[1:6], hands=(rest,) + s.hands[1:])
    events, after = play(s, 0, cmd("buy", count=5))
    assert len(after.hands[0]) == len(rest) + 5 and after.money[0] == 0


def test_np_y4_tier_2_includes_the_position_just_below() -> None:
    """NP-Y4 tier 2: "any gangster at a position lower than p". Position 7 empty, its tier-1 sources
    5 and 4 empty, only 6 occupied below it: H04 at 6 is the single candidate and moves up
    (NP-Y6: nobody asked) rather than an Associate. (Kills: tier 2 starting at p - 2.)"""
    s = empty(bare(), 7, 5, 4, 3, 2, 1)
    events, s = step(at_stage(s, Phase.FAMILY, "fill", pos=7))
    assert s.board[6] == "H04"


def test_np_w2_np_w7_a_neutral_tie_on_the_capo_does_not_move_the_ring() -> None:
    """NP-W2: "If M = 0 or N >= M, nobody controls it (neutral markers win a tie)"; NP-W7: the ring
    moves only to a seat that strictly controls position 9. Seat 2's marker on M00 tied by a neutral
    marker leaves the ring with seat 0. (Kills: the ring moving when N = M.)"""
    tx = Tx(mark(bare(ring=0), "M00", {2: 0}, neutral=1), Rng(0))
    tx.emit_values("markers_placed", "M00", 2, 1)               # seat 2: 1 marker vs 1 neutral
    assert leaders(tx.s, "M00") == () and tx.s.ring == 0
    tx.emit_values("markers_placed", "M00", 2, 1)               # 2 vs 1: strict control
    assert tx.s.ring == 2


def test_table_f_blackmail_own_needs_an_own_marker() -> None:
    """Table F BLACKMAIL_OWN: "Put a free blackmail coin under one of the acting seat's markers on an
    active gangster that carries no coin". A gangster with no marker of the seat is no target.
    (Kills: the own-marker test dropped.)"""
    s = mark(acting(bare(), 3, "C08", 1), "G05", {2: 1})
    assert refused(s, 1, cmd("use_ability", gangster_ability=True, targets=pb.Targets(gangster="G05"))) == "NP-C25"
    ctx = Ctx(1, "C08", 3)
    assert {t.gangster for t in EFFECTS["BLACKMAIL_OWN"].options(s, ctx, 99)} == {"C08"}


def test_np_c6_np_c5_the_any_icon_reaches_associates() -> None:
    """NP-C6: the grey icon `any` "may target any gangster on the board" (NP Terms: a position or an
    Associate slot), like a type icon (NP-C5). (Kills: `any` limited to active gangsters.)"""
    s = replace(hand(bare(), 0, "I41"), turn=0)                # I41: any:1
    _, after = play(s, 0, pfi("I41", "T07"))                   # T07 in A1 (support.STD)
    assert markers_of(after, "T07").markers[0] == 1


def test_table_f_invite_1_does_nothing_when_the_invited_supply_is_empty() -> None:
    """Table F INVITE_1: "it places 1 of its family markers ... nothing if its supply is empty" (NP-C11).
    The invited seat with no marker left is not asked (its supply would go negative).
    (Kills: the invitation asked regardless of the supply.)"""
    s = replace(hand(bare(), 0, "I93"), turn=0)                # I93: any:2 AND INVITE_1
    s = replace(s, supply=(25, 25, 0, 25))
    events, after = play(s, 0, pfi("I93", "T01", seat=2))
    assert "invite_asked" not in kinds(events) and after.invite is None
    assert after.supply[2] == 0 and after.turn == 1


def test_table_f_associate_swap_leaves_both_upright() -> None:
    """Table F ASSOCIATE_SWAP: "each keeps its markers and coins; both end upright", so both can act
    in the coming Crew (NP-W15). (Kills: the exchange turning them sideways.)"""
    s = replace(hand(bare(), 0, "I90"), turn=0)
    _, after = play(s, 0, por("I90", slot=1, position=2))
    assert after.board[1] == "T07" and after.board[9] == "H02"
    assert not markers_of(after, "T07").sideways and not markers_of(after, "H02").sideways


def test_np_m1_np_m8_a_card_held_once_cannot_be_sold_or_offered_twice() -> None:
    """NP-M1: a shakedown discards cards "from its hand"; NP-M8: an offer of what one does not hold is
    refused. Naming the one I01 twice is refused (it would crash the fold: the second copy is not in
    the hand). (Kills: `holds` ignoring how many times a card is named.)"""
    s = hand(std(4), 0, "I01", "I02")
    assert refused(s, 0, cmd("shakedown", cards=["I01", "I01"])) == "NP-M1"
    offer = pb.Command(offer_deal=pb.OfferDeal(to=1, give_cards=["I01", "I01"]))
    assert refused(s, 0, offer) == "NP-M8"


def test_np_v2_a_contract_deadline_never_lies_before_the_current_round() -> None:
    """NP-V2: the deadline is "the end of the current round unless a later round is stated". In
    round 3 a deadline of round 1 is refused. (Kills: only the upper bound checked.)"""
    s = std(4)
    s = replace(s, cfg=replace(s.cfg, keep_your_word=True), round=3)
    c = pb.Contract(payer=0, payee=1, amount=1, condition="GANGSTER_GONE", gangster="M00", deadline=1)
    assert refused(s, 0, pb.Command(offer_deal=pb.OfferDeal(to=1, contract=c))) == "NP-V2"
    c.deadline = 4
    events, _ = play(s, 0, pb.Command(offer_deal=pb.OfferDeal(to=1, contract=c)))
    assert kinds(events) == ["offer_made"]


def test_np_w17_np_c29_an_omerta_coin_returns_when_its_card_leaves_the_board() -> None:
    """NP-W17: an Omerta coin "returns to the supply when the card leaves the board" (here: Snitch,
    NP-C29, which also returns coins). (Kills: the Omerta coin lost with the card.)"""
    s = mark(hand(std(4), 0, "I65"), "H04", {1: 6, 2: 4}, omerta=True)
    assert s.om_free == 1
    _, after = play(s, 0, por("I65", gangster="H04"))
    assert "H04" in after.prison and after.om_free == 2


def test_table_f_whack_free_reroll_is_once_per_whack_not_per_window() -> None:
    """Table F WHACK_FREE_REROLL: "may reroll for free once per whack (not once per window)". After the
    free reroll the new window offers no second free one. (Kills: the right renewed by each roll.)"""
    w = mark(mark(place(bare(), {1: "H08"}), "H08", {1: 1}), "T03", {2: 1})
    w = replace(at_stage(w, Phase.CREW, "roll", pos=1, sweep=1), money=(0,) * 4,
                roll=Roll("whack", "X", "whack", 1, "H08", "T03"), act=Act(1, "H08", 1, stage=2))
    events, w = step(w)
    assert list(of(events, "window_opened")[0].seats) == [1]
    events, w = play(w, 1, cmd("buy_reroll", means=pb.REROLL_FREE_WHACK))
    assert of(events, "reroll_bought")[0].means == pb.REROLL_FREE_WHACK
    assert of(events, "die_rolled"), "the whack die is rolled again"
    assert pb.REROLL_FREE_WHACK not in free_means(w, 1)
    assert w.window is None or 1 not in w.window.seats, "no second free reroll, and no $10"


def test_np_w18_np_x22_legal_commands_offer_acceptance_only_of_a_still_legal_proposal() -> None:
    """NP-W18, NP-W20, NP-X22: a proposal that is no longer legal (its cost can no longer be paid)
    can only be refused: the coin owner's listing has no acceptance. (Kills: acceptance always listed.)"""
    from famiglia.rules.nothing_personal.legal import legal_commands

    s = mark(mark(bare(), "T01", {1: 2, 2: 1}, coin=2), "G05", {3: 1})
    s = replace(at_stage(s, Phase.CREW, "action", pos=1, sweep=1), act=Act(1, "T01", 1))
    events, s = play(s, 1, cmd("whack", target="G05"))       # under seat 2's coin: a proposal
    assert kinds(events) == ["blackmail_proposed"]
    grants = [c for c in legal_commands(s, 2) if c.WhichOneof("kind") == "grant_blackmail"]
    assert sorted(c.grant_blackmail.accept for c in grants) == [False, True]
    broke = replace(s, money=(50, 5, 50, 50))                 # the $10 whack can no longer be paid
    grants = [c for c in legal_commands(broke, 2) if c.WhichOneof("kind") == "grant_blackmail"]
    assert [c.grant_blackmail.accept for c in grants] == [False]


@pytest.mark.parametrize("face,respect", [("1", 3), ("2", 5), ("4", 5), ("5", 8)])
def test_table_f_dice_respect_only_a_1_loses_2(face: str, respect: int) -> None:
    """Table F DICE_RESPECT: "1 loses 2 Respect, 2-4 nothing", seen from 5 Respect so that the floor
    of NP-X7 hides nothing. (Kills: a 2 losing too.)"""
    s = acting(replace(bare(), respect=(0, 5, 0, 0)), 3, "G04", 1)
    _, s = play(s, 1, cmd("use_ability", gangster_ability=True, targets=pb.Targets()))
    s = replace(s, window=None, stage="roll_result", roll=replace(s.roll, face=face))
    _, s = step(s)
    assert s.respect[1] == respect


def test_np_y2_np_y6_a_single_associate_becomes_capo_without_asking() -> None:
    """NP-Y2 with NP-Y6: "With a single candidate nobody is asked". Positions 1-9 and two Associate
    slots empty: the one Associate left (T07 in A1) goes to position 9 at once. (Kills: the ring
    holder asked to choose among one candidate.)"""
    s = empty(bare(ring=3), *range(1, 10), 11, 12)
    events, s = step(at_stage(s, Phase.FAMILY, "capo"))
    assert "vacancy_choice_asked" not in kinds(events)
    assert s.vacancy is None and s.board[8] == "T07"
