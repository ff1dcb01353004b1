"""The Commission: NP-C1..C33, NP-X20, NP-D4."""

from __future__ import annotations

from famiglia.rules.nothing_personal.legal import legal_commands

from .support import (
    ENGINE,
    PASS,
    Phase,
    cmd,
    hand,
    kinds,
    mark,
    markers_of,
    of,
    pfi,
    play,
    por,
    ref,
    refused,
    replace,
    std,
)


def test_np_c1_ring_holder_first_then_clockwise_skipping_passed_seats() -> None:
    """NP-C1."""
    s = std(4, ring=2)
    assert [p.seat for p in ENGINE.pending(s)] == [2]
    _, s = play(s, 2, PASS)
    assert s.turn == 3
    _, s = play(s, 3, PASS)
    _, s = play(s, 0, PASS)
    assert s.turn == 1
    _, s = play(s, 1, PASS)
    assert s.phase == Phase.CREW, "the phase ends when every seat has passed"


def test_np_c2_a_turn_is_one_of_four_kinds() -> None:
    """NP-C2."""
    s = hand(std(4), 0, "I01", "I82")
    got = {c.WhichOneof("kind") for c in legal_commands(s, 0)}
    assert {"play_for_influence", "play_or_effect", "discard_for_marker", "pass"} <= got


def test_np_c3_a_pass_is_final_for_the_round() -> None:
    """NP-C3."""
    s = hand(std(3), 0, "I01")
    _, s = play(s, 0, PASS)
    _, s = play(s, 1, PASS)
    assert s.turn == 2
    _, s = play(s, 2, pfi("I01", "T01") if "I01" in s.hands[2] else PASS)
    assert 0 not in [p.seat for p in ENGINE.pending(s)] or s.phase != Phase.COMMISSION


def test_np_c4_np_d4_a_seat_without_cards_can_only_pass_and_is_still_asked() -> None:
    """NP-C4, NP-D4."""
    s = hand(std(4), 0)
    assert [p.seat for p in ENGINE.pending(s)] == [0]
    required = [c for c in legal_commands(s, 0) if c.WhichOneof("kind") not in ENGINE.info.optional_commands]
    assert kinds_of(required) == ["pass"]


def kinds_of(commands) -> list[str]:
    return [c.WhichOneof("kind") for c in commands]


def test_np_c5_type_icons_reach_associates_position_icons_only_their_position() -> None:
    """NP-C5."""
    s = hand(std(4), 0, "I01", "I52")
    _, after = play(s, 0, pfi("I01", "T07"))                     # thug icon on the Associate T07
    assert markers_of(after, "T07").markers[0] == 2
    assert refused(s, 0, pfi("I01", "H02")) == "NP-C5"           # a hitman is no thug
    _, after = play(s, 0, pfi("I52", "T03"))                     # pos5 reaches whoever is at 5
    assert markers_of(after, "T03").markers[0] == 2
    assert refused(s, 0, pfi("I52", "T01")) == "NP-C5"


def test_np_c6_the_grey_any_icon_reaches_the_typeless_capo() -> None:
    """NP-C6."""
    s = hand(std(4), 0, "I41")
    _, after = play(s, 0, pfi("I41", "M00"))
    assert markers_of(after, "M00").markers[0] == 1


def test_np_c7_groups_of_one_card_may_share_a_gangster_or_not() -> None:
    """NP-C7."""
    s = hand(std(4), 0, "I29")   # thug:2, hitman:1
    _, after = play(s, 0, pfi("I29", "T01", "H02"))
    assert markers_of(after, "T01").markers[0] == 2 and markers_of(after, "H02").markers[0] == 1


def test_np_c8_a_group_is_placed_whole_or_not_at_all() -> None:
    """NP-C8."""
    s = hand(std(4), 0, "I29")
    s = replace(s, supply=(2, 25, 25, 25))   # only the thug:2 group fits
    _, after = play(s, 0, pfi("I29", "T01"))
    assert markers_of(after, "T01").markers[0] == 2
    assert refused(s, 0, pfi("I29", "T01", "H02")) == "NP-C8"


def test_np_c9_the_chosen_groups_must_be_maximal_and_nonempty() -> None:
    """NP-C9."""
    s = hand(std(4), 0, "I29")
    assert refused(s, 0, pfi("I29", "T01")) == "NP-C9"           # the hitman group could also be placed
    assert refused(s, 0, pfi("I29")) == "NP-C9"
    s2 = replace(hand(std(4), 0, "I05"), supply=(3, 25, 25, 25))  # thug:4 with 3 markers: unplayable
    assert not [c for c in legal_commands(s2, 0) if c.WhichOneof("kind") == "play_for_influence"]


def test_np_c10_keywords_blank_is_optional_and_none_has_no_effect() -> None:
    """NP-C10."""
    s = hand(std(4), 0, "I21", "I01")
    _, without = play(s, 0, pfi("I21", "T01"))
    assert markers_of(without, "T01").markers[0] == 2
    _, with_ = play(s, 0, pfi("I21", "T01", use_effect=True, gangster="T01"))
    assert markers_of(with_, "T01").markers[0] == 3
    assert refused(s, 0, pfi("I01", "T01", use_effect=True)) == "NP-C10"


def test_np_c11_np_c25_a_compulsory_blackmail_coin_is_skipped_when_none_is_free() -> None:
    """NP-C11, NP-C25."""
    s = replace(hand(std(4), 0, "I57"), bm_free=0)
    events, after = play(s, 0, pfi("I57", "T01"))
    assert markers_of(after, "T01").coin == -1 and "card_played" in kinds(events)


def test_np_c12_an_or_card_is_played_for_influence_or_for_its_effect_never_both() -> None:
    """NP-C12."""
    s = hand(std(4), 0, "I82")   # conman:2 OR TAKE_6
    _, infl = play(s, 0, pfi("I82", "C01"))
    assert infl.money[0] == 50 and markers_of(infl, "C01").markers[0] == 2
    _, eff = play(s, 0, por("I82"))
    assert eff.money[0] == 56 and markers_of(eff, "C01").markers[0] == 0
    assert refused(s, 0, por("I01")) == "NP-H1"   # not in the hand
    s2 = hand(std(4), 0, "I01")
    assert refused(s2, 0, por("I01")) == "NP-C12"


def test_np_c12_only_an_or_card_is_played_for_its_effect_alone() -> None:
    """NP-C12, NP-C2 (b): a blank or AND card brings its effect only after its groups are placed."""
    s = hand(std(4), 0, "I21", "I93")   # thug:2 blank EXTRA_5; any:2 AND INVITE_1
    assert refused(s, 0, por("I21", gangster="T01")) == "NP-C12"
    assert refused(s, 0, por("I93", seat=2)) == "NP-C12"
    assert not [c for c in legal_commands(s, 0) if c.WhichOneof("kind") == "play_or_effect"]


def test_np_c13_an_or_effect_needs_a_legal_resolution() -> None:
    """NP-C13."""
    s = hand(std(4), 0, "I65")   # Snitch: nobody has 10 markers
    assert refused(s, 0, por("I65", gangster="T01")) == "NP-C29"
    assert not [c for c in legal_commands(s, 0) if c.WhichOneof("kind") == "play_or_effect"]


def test_np_c14_discard_for_one_places_one_marker_on_an_active_gangster() -> None:
    """NP-C14."""
    s = hand(std(4), 0, "I05")
    _, after = play(s, 0, cmd("discard_for_marker", card="I05", gangster="G05"))
    assert markers_of(after, "G05").markers[0] == 1 and "I05" in after.discard
    assert refused(s, 0, cmd("discard_for_marker", card="I05", gangster="T07")) == "NP-C14"
    assert refused(replace(s, supply=(0, 25, 25, 25)), 0,
                   cmd("discard_for_marker", card="I05", gangster="G05")) == "NP-C14"


def test_np_c15_played_cards_go_face_up_to_the_discard_pile() -> None:
    """NP-C15."""
    s = hand(std(4), 0, "I01")
    _, after = play(s, 0, pfi("I01", "T01"))
    assert after.discard[-1] == "I01" and "I01" not in after.hands[0]


def test_np_c15_np_x4_a_card_reaches_the_discard_pile_only_once_resolved() -> None:
    """NP-C15, NP-X4."""
    s = hand(std(4), 0, "I80")   # conman:2 OR DRAW_2
    s = replace(s, discard=s.deck[:1], deck=())
    only = s.discard[0]
    events, after = play(s, 0, por("I80"))
    assert of(events, "cards_received")[0].cards == [only]     # the played card was not reshuffled
    assert after.discard == ("I80",) and after.table == ()
    assert kinds(events).index("card_resolved") > kinds(events).index("cards_received")


def test_np_c16_np_c17_np_c18_the_ante() -> None:
    """NP-C16, NP-C17, NP-C18."""
    s = std(3)
    for seat, cards in enumerate((("I01", "I06"), ("I02", "I07"), ("I03", "I08"))):
        s = hand(s, seat, *cards)
    assert refused(s, 0, pfi("I01", "T01", ante=1)) == "NP-C17"       # before every seat had a turn
    _, s = play(s, 0, pfi("I01", "T01"))
    _, s = play(s, 1, pfi("I02", "T01"))
    assert s.ante == 0 and len(s.had_turn) == 2
    _, s = play(s, 2, pfi("I03", "T01"))
    assert len(s.had_turn) == 3                                           # NP-C16: the Ante is available
    _, s = play(s, 0, pfi("I06", "H02", ante=3))                          # a payment above the Ante raises it
    assert s.ante == 3 and s.money[0] == 47
    assert refused(s, 1, pfi("I07", "H02", ante=2)) == "NP-C17"
    _, s = play(s, 1, pfi("I07", "H02", ante=3))
    assert s.money[1] == 47
    # NP-C18: the next Commission begins at $0
    from .support import step

    s2 = replace(s, phase=Phase.FAMILY, stage="assoc", pos=0)
    _, s2 = step(s2)
    assert s2.round == 2 and s2.ante == 0 and s2.passed == frozenset()   # NP-K2


def test_np_c16_the_ante_waits_for_the_last_seats_first_turn() -> None:
    """NP-C16: with all but one seat through their first turn, that last seat still pays no Ante
    (a check on n - 1 turns instead of n would let it raise the Ante before everyone had a turn)."""
    s = std(3)
    for seat, cards in enumerate((("I01",), ("I02",), ("I03",))):
        s = hand(s, seat, *cards)
    _, s = play(s, 0, pfi("I01", "T01"))
    _, s = play(s, 1, pfi("I02", "T01"))
    assert s.turn == 2 and s.had_turn == frozenset({0, 1})
    assert refused(s, 2, pfi("I03", "T01", ante=1)) == "NP-C17"
    _, s = play(s, 2, pfi("I03", "T01"))
    assert s.ante == 0 and s.money == (50, 50, 50)

def test_np_c19_np_c20_extra_influence_costs_5_and_goes_on_a_gangster_of_this_play() -> None:
    """NP-C19, NP-C20."""
    s = hand(std(4), 0, "I21")
    _, after = play(s, 0, pfi("I21", "T01", use_effect=True, gangster="T01"))
    assert after.money[0] == 45 and markers_of(after, "T01").markers[0] == 3
    assert refused(s, 0, pfi("I21", "T01", use_effect=True, gangster="T03")) == "NP-C19"
    assert refused(replace(s, money=(4, 50, 50, 50)), 0, pfi("I21", "T01", use_effect=True,
                                                             gangster="T01")) == "NP-C20"


def test_np_c24_np_c25_a_blackmail_coin_goes_under_a_marker_of_this_play() -> None:
    """NP-C24, NP-C25."""
    s = hand(std(4), 0, "I57")
    _, after = play(s, 0, pfi("I57", "T01", gangster="T01"))
    assert markers_of(after, "T01").coin == 0 and after.bm_free == 7
    taken = mark(s, "T01", {1: 1}, coin=1)
    events, after = play(taken, 0, pfi("I57", "T01"))   # NP-C25: the only target already carries a coin
    assert markers_of(after, "T01").coin == 1


def test_np_c26_a_coin_returns_when_its_marker_leaves_but_stays_when_the_card_moves() -> None:
    """NP-C26."""
    from .support import at_stage, step

    s = mark(std(4), "H04", {1: 2}, coin=1)
    s = hand(s, 0, "I84")   # REMOVE_2 OR
    _, after = play(s, 0, por("I84", markers=[ref("H04", 1, coin=True)]))
    assert markers_of(after, "H04").coin == -1 and after.bm_free == 8
    _, kept = play(s, 0, por("I84", markers=[ref("H04", 1, coin=False)]))   # NP-C31: the plain marker
    assert markers_of(kept, "H04").coin == 1
    # the card is promoted: the coin travels with it
    moved = at_stage(mark(std(4), "H04", {1: 1}, coin=1), Phase.FAMILY, "fill", pos=8)
    moved = replace(moved, board=moved.board[:7] + ("",) + moved.board[8:], gdeck=moved.gdeck + ("G05",))
    _, moved = step(moved)
    assert markers_of(moved, "H04").coin == 1 or markers_of(moved, "H04").markers[1] == 1


def test_np_c27_np_c28_a_swapped_coin_marker_hands_the_coin_over_or_returns_it() -> None:
    """NP-C27, NP-C28."""
    from famiglia.engine import Rng
    from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb
    from famiglia.rules.nothing_personal.effects import EFFECTS, Ctx
    from famiglia.rules.nothing_personal.tx import Tx

    s = mark(mark(std(4), "H04", {1: 1}, coin=1), "T01", {2: 1}, neutral=1)
    tx = Tx(s, Rng(0))
    EFFECTS["SWAP_2"].apply(tx, Ctx(0), pb.Targets(markers=[ref("H04", 1, True), ref("T01", 2)]))
    assert markers_of(tx.s, "H04").coin == 2 and markers_of(tx.s, "H04").markers[2] == 1
    tx = Tx(s, Rng(0))
    EFFECTS["SWAP_2"].apply(tx, Ctx(0), pb.Targets(markers=[ref("H04", 1, True), ref("T01", -1)]))
    assert markers_of(tx.s, "H04").coin == -1 and tx.s.bm_free == 8


def test_np_c29_np_c30_snitch_sends_a_10_marker_gangster_to_prison_12_with_prison_resist() -> None:
    """NP-C29, NP-C30."""
    s = mark(hand(std(4), 0, "I65"), "H04", {1: 6, 2: 4}, coin=1)
    _, after = play(s, 0, por("I65", gangster="H04"))
    assert "H04" in after.prison and after.supply[1] == 25 and after.supply[2] == 25 and after.bm_free == 8
    resist = mark(hand(std(4), 0, "I65"), "T09", {1: 11})
    from .support import place

    resist = place(resist, {6: "T09"})
    assert refused(resist, 0, por("I65", gangster="T09")) == "NP-C29"
    assoc = mark(place(hand(std(4), 0, "I65"), {10: "T09"}), "T09", {1: 10})   # an Associate's passive is off
    _, after = play(assoc, 0, por("I65", gangster="T09"))
    assert "T09" in after.prison


def test_np_c31_markers_name_the_coin_marker_apart() -> None:
    """NP-C31."""
    s = mark(hand(std(4), 0, "I84"), "H04", {1: 1}, coin=1)
    assert refused(s, 0, por("I84", markers=[ref("H04", 1, coin=False)])) == "NP-C31"


def test_np_c33_non_pass_turns_are_capped() -> None:
    """NP-C33."""
    s = replace(hand(std(4), 0, "I01", "I02"), nonpass=(30, 0, 0, 0))
    assert refused(s, 0, pfi("I01", "T01")) == "NP-C33"
    assert kinds_of([c for c in legal_commands(s, 0) if c.WhichOneof("kind") not in
                     ENGINE.info.optional_commands]) == ["pass"]


def test_np_x20_the_last_seat_keeps_taking_turns_until_it_passes() -> None:
    """NP-X20."""
    s = hand(std(3), 2, "I01", "I02")
    s = replace(s, turn=2, passed=frozenset({0, 1}), had_turn=frozenset({0, 1}))
    _, s = play(s, 2, pfi("I01", "T01"))
    assert s.turn == 2 and s.phase == Phase.COMMISSION
    _, s = play(s, 2, PASS)
    assert s.phase == Phase.CREW


def test_np_c21_np_c22_np_c23_window_plays() -> None:
    """NP-C21, NP-C22, NP-C23."""
    from famiglia.rules.nothing_personal.state import Window

    s = replace(hand(std(4), 1, "I68", "I76", "I01", "I57"), phase=Phase.CREW, stage="score_window", pos=9,
                passed=frozenset({1}))
    s = replace(s, window=Window("card", (0, 1, 2, 3), (None,) * 4))
    events, after = play(s, 1, pfi("I68", "T01"))       # crew card in a Crew window: answer accepted
    assert kinds(events) == ["window_answered"]
    assert ENGINE.visibility(events[0]).kind.name == "PRIVATE"
    assert refused(s, 1, pfi("I01", "T01")) == "NP-C23"   # a commission card cannot
    assert refused(s, 1, cmd("discard_for_marker", card="I01", gangster="T01")) == "NP-D5"
    assert refused(s, 1, pfi("I76", "T01", ante=1)) == "NP-C23"
    # resolve: everybody else passes, the crew card costs $5 (NP-C21), the anytime card nothing (NP-C22)
    for seat in (2, 3, 0):
        _, after = play(after, seat, PASS)
    assert markers_of(after, "T01").markers[1] == 2 and after.money[1] == 45
    fence = replace(s, phase=Phase.FENCE, stage="window")
    assert refused(fence, 1, pfi("I68", "T01")) == "NP-C23"
    _, ok = play(fence, 1, pfi("I76", "M00"))
    for seat in (2, 3, 0):
        _, ok = play(ok, seat, PASS)
    assert markers_of(ok, "M00").markers[1] == 1 and ok.money[1] == 50
