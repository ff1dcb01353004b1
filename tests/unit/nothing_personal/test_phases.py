"""The Fence (NP-F), the Feds (NP-P), the Family (NP-Y), Bookkeeping (NP-K), final scoring (NP-E, NP-T)."""

from __future__ import annotations

from famiglia.rules.nothing_personal.family import default_candidate
from famiglia.rules.nothing_personal.legal import legal_commands
from famiglia.rules.nothing_personal.result import tiebreak_key
from famiglia.rules.nothing_personal.state import Window

from .support import (
    ENGINE,
    PASS,
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
    place,
    play,
    refused,
    replace,
    step,
)


# -- the Fence --------------------------------------------------------------------------------------------
def test_np_f2_np_f3_draws_4_3_2_in_ring_order_counted_once() -> None:
    """NP-F2, NP-F3."""
    s = mark(mark(mark(bare(ring=1), "T01", {1: 1}), "H02", {2: 1}), "C01", {2: 1})
    events, s = step(at_stage(s, Phase.FENCE, "draws"))
    assert list(of(events, "fence_counted")[0].counts) == [0, 1, 2, 0]
    draws = [(e.seat, e.count) for e in of(events, "cards_drawn")]
    assert draws == [(1, 3), (2, 2), (3, 4), (0, 4)]


def test_np_f4_np_f5_np_d13_purchases_in_ring_order_capped_by_money_and_cards() -> None:
    """NP-F4, NP-F5, NP-D13."""
    s = replace(bare(ring=1), money=(25, 9, 30, 0))
    events, s = step(at_stage(s, Phase.FENCE, "draws"))
    assert [p.seat for p in ENGINE.pending(s)] == [1] and s.order[0] == 1
    assert [c.buy.count for c in legal_commands(s, 1) if c.WhichOneof("kind") == "buy"] == [0]
    assert ENGINE.timeout_command(s, 1).buy.count == 0
    _, s = play(s, 1, cmd("buy", count=0))
    assert [c.buy.count for c in legal_commands(s, 2) if c.WhichOneof("kind") == "buy"] == [0, 1, 2, 3]
    assert refused(s, 2, cmd("buy", count=4)) == "NP-F5"
    events, s = play(s, 2, cmd("buy", count=3))
    assert s.money[2] == 0 and of(events, "cards_drawn")[0].count == 3
    _, s = play(s, 3, cmd("buy", count=0))
    short = at_stage(replace(s, money=(50,) * 4), Phase.FENCE, "buy", order=(0, 1, 2, 3), idx=0)
    short = replace(short, deck=short.deck[:1], discard=(), hands=(short.hands[0] + short.deck[1:],)
                    + short.hands[1:])
    assert refused(short, 0, cmd("buy", count=2)) == "NP-F5"

def test_np_f6_there_is_no_hand_limit() -> None:
    """NP-F6."""
    s = replace(bare(), money=(500, 0, 0, 0))
    s = at_stage(s, Phase.FENCE, "buy", order=(0, 1, 2, 3))
    _, s = play(s, 0, cmd("buy", count=40))
    assert len(s.hands[0]) == 40


def test_np_r3_a_sequential_step_keeps_its_order_when_the_ring_moves() -> None:
    """NP-R3."""
    s = at_stage(replace(bare(ring=1), money=(50,) * 4), Phase.FENCE, "buy", order=(1, 2, 3, 0))
    s = replace(s, ring=3)
    assert [p.seat for p in ENGINE.pending(s)] == [1]


# -- the Feds -----------------------------------------------------------------------------------------------
def test_np_p1_np_p3_np_p5_arrests_at_the_limit_markers_go_home_sideways_turn_upright() -> None:
    """NP-P1, NP-P3, NP-P5."""
    s = mark(mark(bare(5), "T01", {0: 6, 1: 4}, neutral=1, coin=0), "H02", {0: 10})
    s = mark(s, "C01", {2: 1}, sideways=True)
    events, s = step(at_stage(s, Phase.FEDS, "arrest"))
    assert "T01" in s.prison and "H02" not in s.prison                       # 11 with 5 seats; 10 is not
    assert s.supply[1] == 25 and s.bm_free == 8 and s.neutral == 25
    assert not markers_of(s, "C01").sideways and "gangsters_turned_upright" in kinds(events)


def test_np_p2_prison_resist_raises_the_limit_to_12() -> None:
    """NP-P2."""
    s = mark(place(bare(3), {6: "T09"}), "T09", {0: 11})
    _, s = step(at_stage(s, Phase.FEDS, "arrest"))
    assert "T09" not in s.prison


def test_np_p4_associates_are_checked_only_with_the_switch() -> None:
    """NP-P4."""
    s = mark(bare(3), "T07", {0: 9})
    _, off = step(at_stage(s, Phase.FEDS, "arrest"))
    assert "T07" not in off.prison
    on = replace(s, cfg=replace(s.cfg, arrest_associates=True))
    _, on = step(at_stage(on, Phase.FEDS, "arrest"))
    assert "T07" in on.prison


def test_np_p6_prison_and_the_fishes_are_permanent() -> None:
    """NP-P6."""
    s = replace(bare(), prison=("T05",), fishes=("T06",), gdeck=tuple(g for g in bare().gdeck
                                                                    if g not in ("T05", "T06")))
    s = empty(s, 8)
    _, s = step(at_stage(s, Phase.FAMILY, "capo"))
    assert "T05" not in s.board and "T06" not in s.board


# -- the Family ---------------------------------------------------------------------------------------------------
def test_np_y1_np_y3_np_y8_the_highest_gangster_becomes_capo_and_counts_as_promoted() -> None:
    """NP-Y1, NP-Y3, NP-Y8."""
    s = mark(empty(bare(ring=0), 9, 8), "C06", {2: 2})
    events, s = step(at_stage(s, Phase.FAMILY, "capo"))
    assert s.board[8] == "C06" and "C06" in s.promoted and s.ring == 2


def test_np_y2_an_empty_board_capo_comes_from_the_associates_chosen_by_the_ring_holder() -> None:
    """NP-Y2."""
    s = empty(bare(ring=3), *range(1, 10))
    events, s = step(at_stage(s, Phase.FAMILY, "capo"))
    assert [p.seat for p in ENGINE.pending(s)] == [3] and set(s.vacancy.candidates) == {"T07", "H05", "C09"}
    _, s = play(s, 3, cmd("fill_vacancy", gangster="H05"))
    assert s.board[8] == "H05"
    none = replace(empty(bare(), *range(1, 13)), phase=Phase.FAMILY)
    top = none.gdeck[0]
    _, none = step(at_stage(none, Phase.FAMILY, "capo"))
    assert none.board[8] == top


def test_np_y4_np_y5_np_y7_vacancies_fill_from_sources_decided_by_the_decider_position() -> None:
    """NP-Y4, NP-Y5, NP-Y7."""
    # 6 empty: sources 5, 3, 2; decider position 8 (G05), controlled by seat 1.
    s = mark(empty(bare(), 6), "G05", {1: 1})
    events, s = step(at_stage(s, Phase.FAMILY, "fill", pos=8))
    assert s.vacancy.spot == 5 and s.vacancy.decider == 1
    assert set(s.vacancy.candidates) == {"T03", "C01", "H02"}
    assert refused(s, 1, cmd("fill_vacancy", gangster="T01")) == "NP-Y5"
    _, s = play(s, 1, cmd("fill_vacancy", gangster="C01"))
    assert s.board[5] == "C01" and s.board[2] != "C01"   # its old spot emptied, filled later in the sweep


def test_np_y6_np_d14_an_empty_decider_position_leaves_it_to_the_ring_holder() -> None:
    """NP-Y6, NP-D14."""
    s = empty(bare(ring=2), 6, 8)
    events, s = step(at_stage(s, Phase.FAMILY, "fill", pos=7))
    assert s.vacancy.decider == 2
    assert default_candidate(s, s.vacancy.candidates) == max(s.vacancy.candidates, key=s.board.index)
    assert ENGINE.timeout_command(s, 2).fill_vacancy.gangster == default_candidate(s, s.vacancy.candidates)


def test_np_y6_a_single_candidate_is_promoted_without_asking() -> None:
    """NP-Y6."""
    s = empty(bare(), 4, 11, 12)   # 4: sources A1..A3 -> only T07
    events, s = step(at_stage(s, Phase.FAMILY, "fill", pos=4))
    assert s.board[3] == "T07" or s.vacancy is None


def test_np_y9_np_y10_associate_slots_refill_from_the_deck_or_stay_empty() -> None:
    """NP-Y9, NP-Y10."""
    s = empty(bare(), 10, 11)
    top = s.gdeck[:2]
    events, s = step(at_stage(s, Phase.FAMILY, "assoc"))
    assert s.board[9:11] == top
    dry = replace(empty(bare(), 10), gdeck=())
    _, dry = step(at_stage(dry, Phase.FAMILY, "assoc"))
    assert dry.board[9] == ""


def test_np_k1_np_k2_bookkeeping_ends_the_round_and_resets_round_state() -> None:
    """NP-K1, NP-K2."""
    s = replace(bare(), round=2, passed=frozenset({0, 1}), ante=7, free_used=frozenset({"G07"}))
    events, s = step(at_stage(s, Phase.FAMILY, "assoc"))
    assert s.round == 3 and s.phase == Phase.COMMISSION and s.ante == 0 and s.free_used == frozenset()


def test_np_k1_after_round_5_bookkeeping_ends_the_game() -> None:
    """NP-K1: round 5 is the last; its Bookkeeping leads to final scoring, not to a sixth Commission."""
    s = mark(replace(bare(), round=5), "M00", {0: 1})
    events, s = step(at_stage(s, Phase.FAMILY, "assoc"))
    assert s.round == 5 and s.phase in (Phase.FINAL, Phase.OVER)
    assert Phase.COMMISSION not in [e.phase for e in of(events, "phase_began")]


# -- final scoring and tie-breakers -------------------------------------------------------------------------
def final(s):
    return at_stage(replace(s, round=5), Phase.FINAL, "score", pos=9)


def test_np_e1_np_e2_np_e3_final_scoring_sells_cards_and_converts_money() -> None:
    """NP-E1, NP-E2, NP-E3."""
    s = mark(mark(bare(), "M00", {0: 1}), "T01", {1: 1})
    s = hand(replace(s, money=(15, 0, 3, 9)), 2, "I01", "I02")
    events, s = step(final(s))
    assert s.phase == Phase.OVER
    # seat 0: M00 respect 2 + 4 = 6, $15 -> +1 respect, $5; seat 1: T01 4 + 1 = 5
    assert s.respect[0] == 7 and s.money[0] == 5 and s.respect[1] == 5
    assert s.money[2] == (3 + 16) % 10 and s.respect[2] == 1 and s.hands[2] == ()   # NP-E2
    assert not of(events, "money_changed") or all(e.reason != "scoring" for e in of(events, "money_changed"))


def test_np_e1_a_tied_gangster_is_ruled_and_np_k3_only_rulings_are_accepted_then() -> None:
    """NP-E1, NP-K3."""
    s = mark(bare(ring=1), "M00", {0: 1, 2: 1})
    events, s = step(final(s))
    assert s.ruling is not None and [p.seat for p in ENGINE.pending(s)] == [1]
    assert refused(hand(s, 1, "I01"), 1, cmd("shakedown", cards=["I01"])) == "NP-K3"
    _, s = play(s, 1, cmd("rule_on_tie", seat=2))
    assert s.phase == Phase.OVER and s.respect[2] >= 6


def test_np_e4_np_e5_np_t1_to_t6_the_ranking_orders_every_seat() -> None:
    """NP-E4, NP-E5, NP-T1."""
    s = replace(bare(ring=2), respect=(5, 5, 5, 9))
    s = mark(s, "G05", {0: 1})          # seat 0 controls 8; seat 1 nothing; seat 2 holds the ring
    key = {i: tiebreak_key(s, i) for i in range(4)}
    order = sorted(range(4), key=key.__getitem__)
    assert order[0] == 3 and order[1] == 2 and order[2] == 0 and order[3] == 1
    money = replace(bare(ring=3), respect=(5, 5, 5, 0), money=(1, 7, 3, 0))       # NP-T4
    assert sorted(range(3), key=lambda i: tiebreak_key(money, i)) == [1, 2, 0]
    marks = mark(mark(replace(bare(ring=3), respect=(5, 5, 0, 0), money=(0,) * 4), "T07", {0: 2}), "H05", {1: 3})
    assert tiebreak_key(marks, 1) < tiebreak_key(marks, 0)                           # NP-T5
    cards = hand(replace(bare(ring=3), respect=(5, 5, 0, 0), money=(0,) * 4), 1, "I01")
    assert tiebreak_key(cards, 1) < tiebreak_key(cards, 0)                           # NP-T6


def test_np_t2_np_t3_only_strict_control_counts_and_none_ranks_below() -> None:
    """NP-T2, NP-T3."""
    s = mark(mark(replace(bare(ring=3), respect=(5, 5, 5, 0), money=(0,) * 4), "G05", {0: 1, 1: 1}), "T01", {1: 2})
    assert tiebreak_key(s, 1)[2] == -1 and tiebreak_key(s, 0)[2] == tiebreak_key(s, 2)[2] == 0
    assert tiebreak_key(s, 1) < tiebreak_key(s, 2)


def test_np_t7_remaining_ties_roll_off_and_the_result_ranks_everyone() -> None:
    """NP-T7."""
    s = replace(bare(ring=3), respect=(5, 5, 5, 0), money=(0,) * 4)
    events, s = step(final(s))
    rolls = of(events, "roll_off")
    assert rolls and set(rolls[0].seats) == {0, 1, 2}
    result = ENGINE.result(s)
    assert sorted(o.rank for o in result.seats) == [1, 2, 3, 4]
    assert next(o for o in result.seats if o.seat == 3).rank == 4


def test_np_t7_higher_rolls_rank_first() -> None:
    """NP-T7: among tied seats, a higher roll ranks first (re-rolls only order equal rolls)."""
    s = replace(bare(ring=3), respect=(5, 5, 5, 5), money=(0,) * 4)
    compared = 0
    for seed in range(4):
        events, over = step(final(s), seed=seed)
        for r in of(events, "roll_off"):
            for a, ra in zip(r.seats, r.rolls, strict=True):
                for b, rb in zip(r.seats, r.rolls, strict=True):
                    if ra > rb:
                        compared += 1
                        assert over.ranking.index(a) < over.ranking.index(b)
    assert compared, "no roll-off had two different rolls"


def test_np_t7_np_h6_the_roll_offs_stay_in_every_finished_view() -> None:
    """NP-T7, NP-H6 (every die result is public), NP-H10: a client that opens the finished match
    later can tell why tied seats rank as they do."""
    s = replace(bare(ring=3), respect=(5, 5, 5, 0), money=(0,) * 4)
    events, s = step(final(s))
    rolls = [(list(r.seats), list(r.rolls)) for r in of(events, "roll_off")]
    assert s.phase == Phase.OVER and rolls
    for viewer in (None, 0, 3):
        assert [(list(r.seats), list(r.rolls)) for r in ENGINE.view(s, viewer).roll_offs] == rolls


def test_result_is_none_while_the_game_runs() -> None:
    assert ENGINE.result(bare()) is None


def test_np_r1_np_k1_a_whole_round_runs_through_the_six_phases_in_order() -> None:
    """NP-R1, NP-K1."""
    s = bare()
    seen = []
    n = 0
    while s.round < 2:
        seat = ENGINE.pending(s)[0].seat
        events, s = play(s, seat, ENGINE.timeout_command(s, seat), seed=n)
        seen += [e.phase for e in of(events, "phase_began")]
        n += 1
    assert seen == [Phase.CREW, Phase.FENCE, Phase.FEDS, Phase.FAMILY, Phase.COMMISSION]


def test_fence_feds_and_family_open_a_card_window_first() -> None:
    for phase in (Phase.FENCE, Phase.FEDS, Phase.FAMILY):
        s = at_stage(hand(bare(), 1, "I76"), phase, "window")
        events, s = step(s)
        assert of(events, "window_opened")[0].kind == "card"
        assert isinstance(s.window, Window)
        events, s = play(s, 1, PASS)
        assert "window_closed" in kinds(events)
