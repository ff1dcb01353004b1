"""The Crew: NP-W1..W46 and the edge cases NP-X1..X22 that belong to it."""

from __future__ import annotations

import pytest

from famiglia.engine import RuleViolation
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb
from famiglia.rules.nothing_personal.board import leaders, strict
from famiglia.rules.nothing_personal.crew import action_options, free_means
from famiglia.rules.nothing_personal.data import POSITIONS, Modifier
from famiglia.rules.nothing_personal.legal import legal_commands
from famiglia.rules.nothing_personal.state import Act, Roll, Window

from .support import (
    ENGINE,
    PASS,
    Phase,
    at_stage,
    cmd,
    hand,
    kinds,
    mark,
    markers_of,
    of,
    place,
    play,
    ref,
    refused,
    replace,
    std,
    step,
)


def crew(n: int = 4, ring: int = 0) -> object:
    s = std(n, ring)
    return replace(s, hands=((),) * n, deck=s.deck + tuple(c for h in s.hands for c in h))


def acting(s, pos: int, seat: int):
    s = at_stage(s, Phase.CREW, "action", pos=pos, sweep=1)
    return replace(s, act=Act(pos, s.board[pos - 1], seat))


def rolled(s, pos: int, seat: int, die: str, face: str, purpose: str, target: str = "", q: int = 0):
    s = at_stage(s, Phase.CREW, "roll_result", pos=pos, sweep=1)
    g = s.board[pos - 1]
    return replace(s, act=Act(pos, g, seat, stage=2), roll=Roll(die, face, purpose, seat, g, target, q))


def test_np_w1_np_w11_scoring_runs_9_down_to_1_then_actions_1_up_to_9() -> None:
    """NP-W1, NP-W11."""
    s = crew()
    for gid in ("T01", "G02", "M00"):
        s = mark(s, gid, {1: 1})
    s = at_stage(s, Phase.CREW, "score_window", pos=9)
    events, s = step(s)
    scored = [e.position for e in of(events, "position_scored")]
    assert scored == [9, 4, 1]
    assert s.act is not None and s.act.position == 1, "the action sweep starts at position 1"


def test_np_w2_control_neutral_wins_ties_and_leaders_tie() -> None:
    """NP-W2."""
    s = crew()
    s = mark(s, "T01", {0: 2}, neutral=2)
    assert leaders(s, "T01") == ()
    s = mark(s, "T01", {0: 3, 1: 3}, neutral=1)
    assert leaders(s, "T01") == (0, 1) and strict(s, "T01") == -1
    s = mark(s, "T01", {2: 1})
    assert strict(s, "T01") == 2


def test_np_w3_np_x16_associates_and_cards_off_the_board_are_never_controlled() -> None:
    """NP-W3, NP-X16."""
    s = mark(crew(), "T07", {1: 5})
    assert leaders(s, "T07") == () and leaders(s, "") == ()
    from famiglia.rules.nothing_personal.board import markers_on_board

    assert markers_on_board(s, 1) == 5   # NP-X16: they count for NP-T5


def test_np_w4_np_w9_np_x19_the_ring_holder_rules_each_use_of_a_tie_separately() -> None:
    """NP-W4, NP-W9, NP-X19."""
    s = mark(crew(ring=2), "G05", {0: 2, 2: 2})
    s = at_stage(s, Phase.CREW, "score", pos=8)
    events, s = step(s)
    assert of(events, "tie_ruling_asked")[0].use == "score"
    assert [p.seat for p in ENGINE.pending(s)] == [2] and ENGINE.pending(s)[0].kind.name == "TIE_BREAK"
    assert refused(s, 2, cmd("rule_on_tie", seat=1)) == "NP-W4"
    events, s = play(s, 2, cmd("rule_on_tie", seat=2))   # in its own favour (NP-X19)
    assert of(events, "position_scored")[0].seat == 2
    assert s.ruling is None or s.ruling.use != "score"


def test_np_w5_np_f1_the_fence_counts_strict_control_only() -> None:
    """NP-W5, NP-F1."""
    from famiglia.rules.nothing_personal.family import fence_counts

    s = mark(mark(mark(crew(), "T01", {0: 1}), "H02", {0: 1, 1: 1}), "C01", {1: 2}, neutral=2)
    assert fence_counts(s) == [1, 0, 0, 0]


def test_np_w6_free_reroll_only_for_the_strict_controller() -> None:
    """NP-W6."""
    s = place(crew(), {6: "G07"})
    s = replace(mark(s, "G07", {1: 2, 2: 2}), roll=Roll("number", "1", "dice_money", 0, "G01"))
    assert not free_means(s, 1) and not free_means(s, 2)
    s = mark(s, "G07", {1: 3, 2: 2})
    assert pb.REROLL_FREE_RING in free_means(s, 1)


def test_np_w7_np_w8_np_x18_the_ring_follows_strict_control_of_the_capo_at_once() -> None:
    """NP-W7, NP-W8, NP-X18."""
    s = replace(hand(std(4, ring=1), 0, "I41"), turn=0)
    # a tie on the Capo never moves the ring (NP-W8)
    events, after = play(mark(s, "M00", {3: 1}), 0, cmd("discard_for_marker", card="I41", gangster="M00"))
    assert after.ring == 1 and not of(events, "ring_moved")
    # strict control of the Capo takes the ring at once (NP-W7)
    events, after = play(s, 0, cmd("discard_for_marker", card="I41", gangster="M00"))
    assert after.ring == 0 and of(events, "ring_moved")[0].seat == 0
    # seat 3 alone on the Capo: any board event hands it the ring
    s4 = mark(s, "M00", {3: 2})
    events, after = play(s4, 0, cmd("discard_for_marker", card="I41", gangster="T01"))
    assert after.ring == 3 and of(events, "ring_moved")[0].seat == 3
    # NP-X18: a successful Move into 9 hands the ring to the strict controller of the new Capo
    m = mark(mark(crew(ring=1), "G05", {2: 3}), "M00", {1: 1})
    m = rolled(m, 8, 2, "move", "ring", "move", q=9)
    events, m = step(m)
    assert m.board[8] == "G05" and m.ring == 2


def test_np_w10_np_w12_np_w13_position_modifiers_add_or_multiply_and_can_lose() -> None:
    """NP-W10, NP-W12, NP-W13."""
    assert Modifier("+", 1).apply(-1) == 0 and Modifier("x", 2).apply(3) == 6   # the rules' example
    assert POSITIONS[7].respect == Modifier("x", 2)                             # NP-W12
    s = mark(respect_money(crew(), 1, 5), "C06", {1: 1})                         # C06: respect 2 at 7 -> 4
    s = at_stage(s, Phase.CREW, "score", pos=7)
    _, after = step(s)
    assert after.respect[1] == 5 + 4 and after.money[1] == 5 + 2 + 3
    neg = place(crew(), {8: "C07"})                                              # respect -2, money 6
    neg = mark(respect_money(neg, 1, 5), "C07", {1: 1})
    _, after = step(at_stage(neg, Phase.CREW, "score", pos=8))
    assert after.respect[1] == 5 - 2 + 3 and after.money[1] == 5 + 6 + 3


def respect_money(s, seat: int, value: int):
    return replace(s, respect=tuple(value if i == seat else r for i, r in enumerate(s.respect)),
                   money=tuple(value if i == seat else m for i, m in enumerate(s.money)))


def test_np_w14_np_w21_the_four_choices_of_an_action_turn() -> None:
    """NP-W14, NP-W21."""
    s = acting(mark(place(crew(), {5: "T04"}), "T04", {1: 1}), 5, 1)   # Racketeer SWAP_2, T04 PLACE_OWN_2
    s = mark(s, "H02", {2: 1})
    got = [c.WhichOneof("kind") + (":g" if c.WhichOneof("kind") == "use_ability" and
                                   c.use_ability.gangster_ability else "") for c in action_options(s)]
    assert {"pass", "use_ability", "use_ability:g", "make_a_move"} <= set(got)


def test_np_w15_no_action_turn_for_sideways_or_uncontrolled_gangsters() -> None:
    """NP-W15."""
    s = mark(mark(crew(), "T01", {0: 1}, sideways=True), "H02", {})
    s = at_stage(s, Phase.CREW, "act_window", pos=1, sweep=1)
    events, s = step(s)
    assert not of(events, "action_turn_began") or of(events, "action_turn_began")[0].position > 2


def test_np_w16_np_w17_omerta_forces_a_pass_and_unused_coins_return_after_the_crew() -> None:
    """NP-W16, NP-W17."""
    s = mark(mark(crew(), "T03", {1: 1}, omerta=True), "G05", {2: 1}, omerta=True)
    s = at_stage(s, Phase.CREW, "act", pos=5, sweep=1)
    events, s = step(s)
    assert of(events, "omerta_observed")[0].position == 5 and not markers_of(s, "T03").omerta
    later = at_stage(mark(crew(), "G05", {}, omerta=True), Phase.CREW, "act_done", pos=9, sweep=1)
    events, later = step(later)
    assert "omerta_coin_returned" in kinds(events) and later.om_free == 2


def test_np_w16_a_tied_gangster_under_omerta_passes_with_no_ruling_asked() -> None:
    """NP-W16: the Omerta coin forces the pass before control is asked for, so a tied gangster
    costs the ring holder no ruling (and gives it no say over the coin)."""
    s = mark(crew(), "T03", {1: 2, 2: 2}, omerta=True)   # the Racketeer at 5, seats 1 and 2 tied
    s = at_stage(s, Phase.CREW, "act", pos=5, sweep=1)
    events, s = step(s)
    assert "tie_ruling_asked" not in kinds(events) and s.ruling is None
    assert of(events, "omerta_observed")[0].position == 5 and not markers_of(s, "T03").omerta

def test_np_w18_np_w19_np_d10_np_d11_np_h8_blackmail_proposals() -> None:
    """NP-W18, NP-W19, NP-D10, NP-D11, NP-H8."""
    s = acting(mark(crew(), "T03", {1: 2, 2: 1}, coin=2), 5, 1)   # seat 2's coin on the Racketeer
    s = mark(s, "H02", {3: 1})
    swap = cmd("use_ability", gangster_ability=False,
               targets=pb.Targets(markers=[ref("T03", 1), ref("H02", 3)]))
    events, s = play(s, 1, swap)
    assert kinds(events) == ["blackmail_proposed"] and ENGINE.visibility(events[0]).kind.name == "PUBLIC"
    assert [p.seat for p in ENGINE.pending(s)] == [2]
    assert ENGINE.view(s, 0).proposal == swap
    for _ in range(2):
        _, s = play(s, 2, cmd("grant_blackmail", accept=False))
        assert s.act is not None and s.act.stage == 0
        _, s = play(s, 1, swap)
    events, s = play(s, 2, cmd("grant_blackmail", accept=False))   # third refusal: forced pass
    assert of(events, "action_turn_ended")[0].outcome == "forced pass"
    own = acting(mark(crew(), "T03", {1: 2}, coin=1), 5, 1)         # one's own coin has no effect
    events, _ = play(own, 1, PASS)
    assert "blackmail_proposed" not in kinds(events)


def test_np_x22_an_accepted_proposal_that_is_no_longer_legal_counts_as_a_refusal() -> None:
    """NP-X22."""
    s = acting(mark(crew(), "T03", {1: 2, 2: 1}, coin=2), 5, 1)
    s = replace(s, act=replace(s.act, stage=1, proposal=cmd("whack", target="T01").SerializeToString()))
    events, s = play(s, 2, cmd("grant_blackmail", accept=True))
    assert of(events, "blackmail_answered")[0].accept is False and s.act.refusals == 1


def test_np_w20_an_action_needs_a_legal_target_and_a_payable_cost() -> None:
    """NP-W20."""
    s = acting(mark(replace(crew(), money=(0, 9, 0, 0)), "T01", {1: 1}), 1, 1)
    assert refused(s, 1, cmd("whack", target="H02")) == "NP-W20"
    assert not [c for c in action_options(s) if c.WhichOneof("kind") == "whack"]
    om = replace(acting(mark(crew(), "H02", {1: 1}), 2, 1), om_free=0)
    assert refused(om, 1, cmd("use_ability", targets=pb.Targets(gangster="T03"))) == "NP-X3"


def test_np_w22_passives_work_only_while_active() -> None:
    """NP-W22."""
    from famiglia.rules.nothing_personal.board import arrest_limit, passive

    s = place(crew(), {10: "T09"})
    assert not passive(s, "T09", "PRISON_RESIST")
    s = place(s, {6: "T09"})
    assert passive(s, "T09", "PRISON_RESIST") and arrest_limit(s, "T09") == 12   # NP-P2


def test_np_w23_np_w31_np_x17_the_third_guy_whacks_for_10_plus_10_for_the_capo() -> None:
    """NP-W23, NP-W31, NP-X17."""
    s = acting(mark(crew(), "T01", {1: 1}), 1, 1)
    events, s2 = play(s, 1, cmd("whack", target="M00"), seed=3)
    assert s2.money[1] == 30 and of(events, "die_rolled")[0].die == "whack"
    events, s3 = play(s, 1, cmd("whack", target="H02"), seed=3)
    assert s3.money[1] == 40
    assert refused(s, 1, cmd("whack", target="T01")) == "NP-W43"
    from famiglia.rules.nothing_personal.effects import _omerta_ok

    assert not _omerta_ok(s, "T01"), "NP-X17: no Omerta coin on the Third Guy"


def test_np_w24_omerta_not_on_position_1_twice_or_omerta_immune() -> None:
    """NP-W24."""
    s = acting(mark(place(crew(), {4: "H10"}), "H02", {1: 1}), 2, 1)
    targets = {c.use_ability.targets.gangster for c in action_options(s) if c.WhichOneof("kind") == "use_ability"}
    assert "T01" not in targets and "H10" not in targets and "C01" in targets
    events, after = play(s, 1, cmd("use_ability", targets=pb.Targets(gangster="C01")))
    assert of(events, "omerta_coin_placed")[0].gangster == "C01"


def test_np_w25_remove_one_marker_of_any_colour_from_an_active_gangster() -> None:
    """NP-W25."""
    s = acting(mark(mark(crew(), "C01", {1: 1}), "G05", {3: 1}, neutral=1), 3, 1)
    _, after = play(s, 1, cmd("use_ability", targets=pb.Targets(markers=[ref("G05", -1)])))
    assert markers_of(after, "G05").neutral == 0 and after.neutral == 25
    assert refused(s, 1, cmd("use_ability", targets=pb.Targets(markers=[ref("T07", 1)]))) == "NP-X9"


def test_np_w26_np_x6_steal_takes_3_or_what_there_is() -> None:
    """NP-W26, NP-X6."""
    s = acting(mark(replace(crew(), money=(50, 50, 2, 0)), "G02", {1: 1}), 4, 1)
    _, after = play(s, 1, cmd("use_ability", targets=pb.Targets(seat=0)))
    assert after.money[1] == 53 and after.money[0] == 47   # $3 from a seat that has more
    _, after = play(s, 1, cmd("use_ability", targets=pb.Targets(seat=2)))
    assert after.money[1] == 52 and after.money[2] == 0
    _, after = play(s, 1, cmd("use_ability", targets=pb.Targets(seat=3)))   # $0 is a legal target
    assert after.money[1] == 50 and after.money[3] == 0
    assert refused(s, 1, cmd("use_ability", targets=pb.Targets(seat=1))) == "NP-W20"


def test_np_w27_swap_any_two_markers_including_a_coin_marker() -> None:
    """NP-W27."""
    s = acting(mark(mark(crew(), "T03", {1: 1}), "G05", {2: 1}, coin=2), 5, 1)
    _, after = play(s, 1, cmd("use_ability", targets=pb.Targets(markers=[ref("T03", 1), ref("G05", 2, True)])))
    assert markers_of(after, "G05").markers[1] == 1 and markers_of(after, "G05").coin == 1
    assert refused(s, 1, cmd("use_ability", targets=pb.Targets(markers=[ref("T03", 1), ref("T03", 1)]))) \
        == "NP-W27"


def test_np_w27_two_plain_markers_on_one_gangster_are_no_swap() -> None:
    """NP-W27, Table F SWAP_2: two markers "on different gangsters or on the same gangster when one of
    them is its coin marker". Seat 1's and seat 2's plain markers on T03 would swap into the same
    places, a Racketeer turn that changes nothing; only the coin marker makes a same-gangster swap.
    (Kills: any two owners on one gangster accepted.)"""
    s = acting(mark(mark(crew(), "T03", {1: 1, 2: 1}), "G05", {1: 1, 2: 1}, coin=2), 5, 1)
    plain = pb.Targets(markers=[ref("T03", 1), ref("T03", 2)])
    assert refused(s, 1, cmd("use_ability", targets=plain)) == "NP-W27"
    _, after = play(s, 1, cmd("use_ability", targets=pb.Targets(markers=[ref("G05", 2, True), ref("G05", 1)])))
    assert markers_of(after, "G05").coin == 1 and markers_of(after, "G05").markers[1:3] == (1, 1)


def test_np_w28_np_x2_place_one_own_marker() -> None:
    """NP-W28, NP-X2."""
    s = acting(mark(crew(), "H04", {1: 1}), 6, 1)
    _, after = play(s, 1, cmd("use_ability", targets=pb.Targets(gangster="M00")))
    assert markers_of(after, "M00").markers[1] == 1
    empty = replace(s, supply=(25, 0, 25, 25))
    assert refused(empty, 1, cmd("use_ability", targets=pb.Targets(gangster="M00"))) == "NP-X2"


def test_np_w29_np_x1_three_neutral_markers_as_the_seat_likes_as_many_as_remain() -> None:
    """NP-W29, NP-X1."""
    s = acting(mark(crew(), "C06", {1: 1}), 7, 1)
    _, after = play(s, 1, cmd("use_ability", targets=pb.Targets(gangsters=["T01", "T01", "M00"])))
    assert markers_of(after, "T01").neutral == 2 and markers_of(after, "M00").neutral == 1
    short = replace(s, neutral=1)
    assert refused(short, 1, cmd("use_ability", targets=pb.Targets(gangsters=["T01", "T01"]))) == "NP-W29"
    none = replace(s, neutral=0)
    assert refused(none, 1, cmd("use_ability", targets=pb.Targets())) == "NP-X1"


def test_np_w30_np_x4_draw_one_and_an_empty_deck_reshuffles_the_discards() -> None:
    """NP-W30, NP-X4."""
    s = acting(mark(crew(), "G05", {1: 1}), 8, 1)
    s = replace(s, deck=(), discard=s.deck)
    events, after = play(s, 1, cmd("use_ability", targets=pb.Targets()))
    assert "discard_reshuffled" in kinds(events) and len(after.hands[1]) == 1
    nothing = replace(s, deck=(), discard=())
    assert refused(nothing, 1, cmd("use_ability", targets=pb.Targets())) == "NP-X4"


def test_np_w31_np_w32_take_the_ring_unless_already_held() -> None:
    """NP-W31, NP-W32."""
    s = acting(mark(crew(ring=0), "M00", {1: 1, 2: 1}), 9, 1)
    _, after = play(s, 1, cmd("use_ability", targets=pb.Targets()))
    assert after.ring == 1
    held = replace(s, ring=1)
    assert refused(held, 1, cmd("use_ability", targets=pb.Targets())) == "NP-W32"


def test_np_w33_np_w34_moves_follow_the_arrows_to_occupied_positions() -> None:
    """NP-W33, NP-W34."""
    assert POSITIONS[7].arrows == (8, 9) and POSITIONS[8].arrows == (9,) and POSITIONS[9].arrows == ()
    s = acting(mark(crew(), "T01", {1: 1}), 1, 1)
    targets = {c.make_a_move.target_position for c in action_options(s) if c.WhichOneof("kind") == "make_a_move"}
    assert targets == {2, 5}
    assert refused(s, 1, cmd("make_a_move", target_position=3)) == "NP-W33"
    gap = place(s, {5: "T03"})
    gap = replace(gap, board=gap.board[:4] + ("",) + gap.board[5:])
    assert refused(gap, 1, cmd("make_a_move", target_position=5)) == "NP-X9"


@pytest.mark.parametrize("face,ok", [("ring", "success"), ("2", "failure"), ("4", "failure"), ("5", "success"),
                                     ("knife", "death")])
def test_np_w35_np_w36_np_w37_np_w38_move_results(face: str, ok: str) -> None:
    """NP-W35, NP-W36, NP-W37, NP-W38."""
    # T01 here is T10 (printed Respect 1) at 1 moving against 5 (T03, seat 2's): n + 1 > 5 succeeds.
    s = place(crew(), {1: "T10"})
    s = mark(mark(respect_money(s, 1, 6), "T10", {1: 2}, coin=1), "T03", {2: 1})
    s = replace(s, respect=(0, 6, 6, 0))
    s = rolled(s, 1, 1, "move", face, "move", q=5)
    events, after = step(s)
    assert of(events, "move_resolved")[0].outcome == ok
    if ok == "success":
        assert after.board[4] == "T10" and after.board[0] == "T03"
        assert markers_of(after, "T10").sideways and markers_of(after, "T03").sideways
        assert after.respect[1] == 10 and after.respect[2] == 2 and markers_of(after, "T10").neutral == 1
        assert markers_of(after, "T10").coin == 1
    elif ok == "failure":
        assert after.respect[1] == 2 and markers_of(after, "T10").neutral == 1 and after.board[0] == "T10"
    else:
        assert "T10" in after.fishes and after.respect[1] == 2 and after.supply[1] == 25 and after.bm_free == 8


def test_np_w35_move_bonus_adds_one_to_a_number() -> None:
    """NP-W35."""
    s = place(crew(), {1: "T02"})                 # T02: Respect 4, MOVE_BONUS
    s = mark(mark(s, "T02", {1: 1}), "T03", {2: 1})
    s = rolled(s, 1, 1, "move", "2", "move", q=5)
    events, _ = step(s)
    assert of(events, "move_resolved")[0].outcome == "success"   # 2 + 4 + 1 > 5


def test_np_w39_a_target_with_no_printed_respect_changes_nobodys_respect() -> None:
    """NP-W39."""
    s = place(crew(), {5: "C01"})                 # C01 printed Respect 0
    s = replace(mark(mark(s, "T01", {1: 1}), "C01", {2: 1}), respect=(0, 5, 5, 0))
    events, after = step(rolled(s, 1, 1, "move", "ring", "move", q=5))
    assert after.respect == (0, 5, 5, 0)
    events, after = step(rolled(s, 1, 1, "whack", "pistol", "whack", target="C01"))
    assert after.respect == (0, 5, 5, 0) and "C01" in after.fishes


@pytest.mark.parametrize("face,outcome", [("ring", "success"), ("two_pistols", "success"), ("long_gun", "success"),
                                          ("X", "failure"), ("knife", "death")])
def test_np_w40_np_w41_np_w42_whack_results(face: str, outcome: str) -> None:
    """NP-W40, NP-W41, NP-W42."""
    s = replace(mark(mark(crew(), "T01", {1: 1}), "G05", {2: 2}, neutral=1, coin=2), respect=(0, 6, 6, 0))
    events, after = step(rolled(s, 1, 1, "whack", face, "whack", target="G05"))
    assert of(events, "whack_resolved")[0].outcome == outcome
    if outcome == "success":
        assert "G05" in after.fishes and after.respect[1:3] == (10, 2) and after.supply[2] == 25
        assert after.neutral == 25 and after.bm_free == 8
    elif outcome == "failure":
        assert after.respect[1] == 2 and after.board[7] == "G05"
    else:
        assert "T01" in after.fishes and after.respect[1] == 2


def test_np_w43_np_x14_whacks_place_no_neutral_and_sideways_gangsters_can_be_whacked() -> None:
    """NP-W43, NP-X14."""
    s = mark(mark(crew(), "T01", {1: 1}), "G05", {2: 1}, sideways=True)
    events, after = step(rolled(s, 1, 1, "whack", "pistol", "whack", target="G05"))
    assert after.neutral == 25 and "G05" in after.fishes


def test_np_d7_card_windows_ask_card_holders_and_reroll_windows_ask_seats_with_10_dollars() -> None:
    """NP-D7: who is asked uses public facts only; exactly $10 pays a reroll, so it is enough."""
    from famiglia.rules.nothing_personal.crew import eligible

    s = replace(hand(crew(ring=1), 3, "I01"), money=(10, 9, 0, 50))
    assert eligible(s, "card") == (3,)
    assert eligible(s, "reroll") == (3, 0)   # in ring order from the ring holder, seat 1


def test_np_w44_np_w45_np_d6_rerolls_cost_10_and_reopen_the_window() -> None:
    """NP-W44, NP-W45, NP-D6."""
    s = replace(mark(crew(), "G01", {1: 1}), money=(50, 50, 5, 50))
    s = place(s, {4: "G01"})
    s = acting(mark(s, "G01", {1: 1}), 4, 1)
    events, s = play(s, 1, cmd("use_ability", gangster_ability=True, targets=pb.Targets()), seed=2)
    assert of(events, "die_rolled")[0].die == "number"                 # NP-W45: the Number die too
    opened = of(events, "window_opened")[0]
    assert list(opened.seats) == [0, 1, 3], "NP-D7: seat 2 has no $10"
    assert ENGINE.redact(next(e for e in events if e.WhichOneof("kind") == "window_opened"), 0) \
        .window_opened.seats == []                                       # NP-H9
    assert all(p.private for p in ENGINE.pending(s))
    _, s = play(s, 0, cmd("buy_reroll", means=pb.REROLL_PAY))
    _, s = play(s, 1, PASS)
    events, s = play(s, 3, cmd("buy_reroll", means=pb.REROLL_PAY), seed=5)
    assert of(events, "claim_resolved")[0].seat == 0 and of(events, "claim_resolved")[0].lapsed == [3]
    assert s.money[0] == 40 and s.money[3] == 50 and s.window is not None     # a fresh answer round
    for seat in s.window.seats:
        _, s = play(s, seat, PASS)
    assert s.act is None or s.act.position != 4


def test_np_w46_the_acting_seat_stays_even_if_control_changes() -> None:
    """NP-W46."""
    s = replace(mark(mark(crew(), "T01", {1: 1}), "G05", {1: 1, 2: 1}), respect=(0, 5, 5, 0))
    s = rolled(s, 1, 1, "whack", "pistol", "whack", target="G05")
    s = mark(s, "T01", {2: 3})   # control of the whacker changed meanwhile
    events, after = step(s)
    # tie on the target: the loser is ruled; the gain still goes to seat 1
    _, after = play(after, 0, cmd("rule_on_tie", seat=2))
    assert after.respect[1] == 9 and after.respect[2] == 1


def test_np_d8_the_loser_of_a_successful_move_is_ruled_after_the_last_reroll() -> None:
    """NP-D8."""
    s = replace(mark(mark(crew(ring=3), "T01", {1: 1}), "T03", {0: 1, 2: 1}), respect=(5, 5, 5, 5))
    events, s = step(rolled(s, 1, 1, "move", "ring", "move", q=5))
    assert of(events, "tie_ruling_asked")[0].use == "loser" and [p.seat for p in ENGINE.pending(s)] == [3]
    events, s = play(s, 3, cmd("rule_on_tie", seat=0))
    assert s.respect == (1, 9, 5, 5)


def test_np_x8_np_x13_respect_changes_of_one_step_are_summed_before_the_floor() -> None:
    """NP-X8, NP-X13."""
    s = place(crew(), {1: "T10"})
    s = replace(mark(mark(s, "T10", {1: 1}), "T03", {1: 1}), respect=(0, 2, 0, 0))
    _, after = step(rolled(s, 1, 1, "move", "ring", "move", q=5))   # own gangster: +4 - 4
    assert after.respect[1] == 2
    _, after = step(rolled(s, 1, 1, "move", "2", "move", q=5))      # failure from 2 goes to 0 (NP-X7)
    assert after.respect[1] == 0


def test_np_x9_np_x10_empty_positions_are_skipped_and_gone_gangsters_take_no_further_part() -> None:
    """NP-X9, NP-X10."""
    s = empty_at(mark(crew(), "T01", {1: 1}), 5)
    s = at_stage(s, Phase.CREW, "score_window", pos=5)
    events, after = step(s)
    assert all(e.position != 5 for e in of(events, "position_scored"))
    gone = at_stage(mark(crew(), "T01", {1: 1}), Phase.CREW, "act", pos=1, sweep=1)
    gone = empty_at(gone, 1)
    events, after = step(gone)
    assert not of(events, "action_turn_began") or of(events, "action_turn_began")[0].position != 1


def empty_at(s, pos: int):
    from .support import empty

    return empty(s, pos)


def test_np_x11_a_capo_whacked_in_the_crew_leaves_9_empty_and_the_ring_stays() -> None:
    """NP-X11."""
    s = replace(mark(mark(crew(ring=2), "T01", {1: 1}), "M00", {2: 1}), respect=(5, 5, 5, 5))
    _, after = step(rolled(s, 1, 1, "whack", "pistol", "whack", target="M00"))
    assert after.board[8] == "" and after.ring == 2


def test_np_x12_seats_without_anything_still_take_turns() -> None:
    """NP-X12."""
    s = replace(std(4), money=(0, 0, 0, 0))
    s = replace(s, hands=((),) * 4, deck=s.deck + tuple(c for h in s.hands for c in h))
    assert [p.seat for p in ENGINE.pending(s)] == [0]
    assert legal_commands(s, 0)[0].WhichOneof("kind") == "pass"


def test_np_r4_card_windows_open_before_scoring_and_upright_action_turns_only() -> None:
    """NP-R4."""
    s = hand(crew(), 2, "I76")
    s = mark(mark(s, "T01", {1: 1}), "H02", {1: 1}, sideways=True)
    s = at_stage(s, Phase.CREW, "act_window", pos=2, sweep=1)
    events, s2 = step(s)
    assert kinds(events)[:2] == ["crew_position_reached", "window_opened"]   # 2 is sideways: no window there
    assert of(events, "crew_position_reached")[0].position == 3 and s2.pos == 3
    s = at_stage(hand(crew(), 2, "I76"), Phase.CREW, "score_window", pos=9)
    events, s = step(s)
    assert of(events, "window_opened")[0].kind == "card" and [p.seat for p in ENGINE.pending(s)] == [2]


def test_np_r5_a_reroll_window_follows_every_roll() -> None:
    """NP-R5."""
    s = acting(mark(crew(), "T01", {1: 1}), 1, 1)
    events, s = play(s, 1, cmd("whack", target="H02"))
    assert kinds(events)[-2:] == ["die_rolled", "window_opened"]


def test_np_d5_window_answers_cannot_be_changed_and_the_first_claimant_in_ring_order_wins() -> None:
    """NP-D5."""
    s = hand(hand(crew(ring=2), 1, "I76"), 3, "I77")
    s = replace(s, window=Window("card", (2, 3, 1), (None,) * 4), phase=Phase.FEDS, stage="window")
    s = hand(s, 2, "I78")
    _, s = play(s, 1, pfi_any("I76", "T01"))
    assert refused(s, 1, PASS) == "NP-X21"
    _, s = play(s, 3, pfi_any("I77", "H02"))
    events, s = play(s, 2, PASS)
    assert of(events, "claim_resolved")[0].seat == 3   # ring order from seat 2: 2, 3, 0, 1
    resolved = next(e for e in events if e.WhichOneof("kind") == "claim_resolved")
    assert list(resolved.claim_resolved.lapsed) == [1] and not of(events, "claim_lapsed")
    # NP-H9: a lapsed claim is told only to its own seat
    assert ENGINE.redact(resolved, 1).claim_resolved.lapsed == [1]
    assert all(ENGINE.redact(resolved, v).claim_resolved.lapsed == [] for v in (0, 2, 3, None))


def pfi_any(card: str, target: str):
    from .support import pfi

    return pfi(card, target)


def _moves_on(s, steps: int = 40) -> None:
    """The match is not wedged: every pending seat's documented default is accepted, for a while."""
    for n in range(steps):
        pendings = ENGINE.pending(s)
        if not pendings:
            return
        seat = pendings[0].seat
        _, s = play(s, seat, ENGINE.timeout_command(s, seat), seed=n)


@pytest.mark.parametrize("target", ["", "ZZZ"])
@pytest.mark.parametrize("gangster_ability", [False, True])
def test_np_w43_np_x9_a_whack_at_an_empty_spot_or_unknown_id_is_refused_and_play_goes_on(
        target: str, gangster_ability: bool) -> None:
    """NP-W43, NP-X9, NP-X21: "" is what an empty spot holds, never a gangster; refused, nothing wedged."""
    s = empty_at(crew(), 5)
    if gangster_ability:   # H01 (WHACK_5) at position 1
        s = place(s, {1: "H01"})
    s = acting(mark(s, s.board[0], {1: 1}), 1, 1)
    assert refused(s, 1, cmd("whack", target=target, gangster_ability=gangster_ability)) == "NP-W43"
    assert all(c.whack.target for c in action_options(s) if c.WhichOneof("kind") == "whack")
    _moves_on(s)


def test_np_w18_np_x22_a_blackmail_proposal_naming_an_empty_spot_is_refused_or_lapses() -> None:
    """NP-W18, NP-X9, NP-X22: no proposal may name "" (an empty spot); one that does lapses on acceptance."""
    s = empty_at(acting(mark(place(crew(), {6: "H04"}), "H04", {1: 2, 2: 1}, coin=2), 6, 1), 5)  # Enforcer
    place_on_empty = cmd("use_ability", targets=pb.Targets(gangster=""))
    assert refused(s, 1, place_on_empty) == "NP-X9"
    assert refused(s, 1, cmd("use_ability", targets=pb.Targets(gangster="ZZZ"))) == "NP-X9"
    stale = replace(s, act=replace(s.act, stage=1, proposal=place_on_empty.SerializeToString()))
    events, after = play(stale, 2, cmd("grant_blackmail", accept=True))
    assert of(events, "blackmail_answered")[0].accept is False and after.act.refusals == 1
    assert "markers_placed" not in kinds(events)
    _moves_on(after)


def test_np_x9_np_c31_no_command_may_name_an_empty_spot_as_a_gangster() -> None:
    """NP-X9, NP-C31, NP-X21: the empty spot's "" is refused with a rule id wherever a gangster is named."""
    s = empty_at(mark(mark(crew(), "C01", {1: 1}), "G05", {2: 1}), 5)
    from famiglia.rules.nothing_personal.effects import EFFECTS, Ctx

    ctx = Ctx(1, rule="NP-W20")
    for code, t in (
        ("SWAP_2", pb.Targets(markers=[ref("", 1), ref("G05", 2)])),
        ("MOVE_OWN_1", pb.Targets(markers=[ref("", 1)], destination="G05")),
        ("MOVE_OWN_2", pb.Targets(markers=[ref("C01", 1)], destination="", count=1)),
        ("REMOVE_1", pb.Targets(markers=[ref("", -1)])),
        ("NEUTRAL_3", pb.Targets(gangsters=["", "G05", "C01"])),
        ("PLACE_OWN_1", pb.Targets(gangster="")),
        ("OMERTA", pb.Targets(gangster="")),
        ("BLACKMAIL_OWN", pb.Targets(gangster="")),
        ("JOINT_2", pb.Targets(gangster="", seat=2)),
        ("SNITCH", pb.Targets(gangster="")),
    ):
        with pytest.raises(RuleViolation):
            EFFECTS[code].check(s, ctx, t)
    commission = hand(std(4), 0, "I01")
    commission = empty_at(commission, 5)
    assert refused(commission, 0, cmd("discard_for_marker", card="I01", gangster="")) == "NP-C14"
