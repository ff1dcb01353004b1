"""Table F codes not covered elsewhere: gangster abilities and card effects, one sentence each."""

from __future__ import annotations

import pytest

from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb
from famiglia.rules.nothing_personal.crew import action_options, free_means
from famiglia.rules.nothing_personal.state import Act, Roll

from .support import (
    ENGINE,
    Phase,
    at_stage,
    bare,
    cmd,
    hand,
    mark,
    markers_of,
    of,
    place,
    play,
    por,
    ref,
    refused,
    replace,
    std,
    step,
)


def acting(s, pos: int, gid: str, seat: int):
    s = mark(place(s, {pos: gid}), gid, {seat: 1})
    s = at_stage(s, Phase.CREW, "action", pos=pos, sweep=1)
    return replace(s, act=Act(pos, gid, seat))


def ability(**targets) -> pb.Command:
    return cmd("use_ability", gangster_ability=True, targets=pb.Targets(**targets))


def test_place_own_2_places_two_or_what_the_supply_holds() -> None:
    s = acting(bare(), 3, "T04", 1)
    _, after = play(s, 1, ability(gangster="M00"))
    assert markers_of(after, "M00").markers[1] == 2
    one = replace(s, supply=(25, 1, 25, 25))
    _, after = play(one, 1, ability(gangster="M00"))
    assert markers_of(after, "M00").markers[1] == 1


def test_remove_2_takes_one_or_two_markers_from_one_gangster() -> None:
    s = mark(acting(bare(), 3, "T05", 1), "G05", {2: 2}, neutral=1)
    _, after = play(s, 1, ability(markers=[ref("G05", 2), ref("G05", -1)]))
    assert markers_of(after, "G05").markers[2] == 1 and markers_of(after, "G05").neutral == 0
    assert refused(s, 1, ability(markers=[ref("G05", 2), ref("M00", 2)])) == "NP-W25"


def test_squeeze_4_tax_each_2_and_skim_5() -> None:
    s = replace(acting(bare(), 3, "T08", 1), money=(10, 0, 3, 10))
    _, after = play(s, 1, ability(seat=2))
    assert after.money[1:3] == (3, 0)
    tax = replace(acting(bare(), 3, "C10", 1), money=(10, 0, 1, 10))
    _, after = play(tax, 1, ability())
    assert after.money == (8, 5, 0, 8)
    skim = replace(acting(bare(), 3, "C02", 1), money=(0, 0, 0, 0))
    _, after = play(skim, 1, ability())
    assert after.money[1] == 5


def test_move_any_higher_ignores_the_arrows() -> None:
    s = acting(bare(), 2, "T11", 1)
    moves = {c.make_a_move.target_position for c in action_options(s)
             if c.WhichOneof("kind") == "make_a_move" and c.make_a_move.gangster_ability}
    assert moves == {3, 4, 5, 6, 7, 8, 9}
    assert refused(s, 1, cmd("make_a_move", target_position=1, gangster_ability=True)) == "NP-W21"


def test_whack_5_and_whack_lower_free() -> None:
    s = acting(bare(), 4, "H01", 1)
    _, after = play(s, 1, cmd("whack", target="T01", gangster_ability=True))
    assert after.money[1] == 45
    _, after = play(s, 1, cmd("whack", target="M00", gangster_ability=True))
    assert after.money[1] == 35                                        # +$10 for the Capo (NP-W31)
    free = acting(bare(), 4, "H03", 1)
    _, after = play(free, 1, cmd("whack", target="T01", gangster_ability=True))
    assert after.money[1] == 50
    assert refused(free, 1, cmd("whack", target="T03", gangster_ability=True)) == "NP-W21"


def test_draw_2_blackmail_own_and_move_own_2() -> None:
    s = acting(bare(), 3, "C05", 1)
    _, after = play(s, 1, ability())
    assert len(after.hands[1]) == 2
    bm = mark(acting(bare(), 3, "C08", 1), "G05", {1: 1})
    _, after = play(bm, 1, ability(gangster="G05"))
    assert markers_of(after, "G05").coin == 1
    mv = mark(acting(bare(), 3, "C12", 1), "G05", {1: 3}, coin=1)
    _, after = play(mv, 1, ability(markers=[ref("G05", 1, True)], destination="M00", count=2))
    assert markers_of(after, "M00").markers[1] == 2 and markers_of(after, "G05").coin == -1   # NP-C26


@pytest.mark.parametrize("code,gid,face,expect", [
    ("DICE_MONEY", "G01", "4", (54, 0)), ("DICE_RESPECT", "G04", "6", (50, 3)),
    ("DICE_RESPECT", "G04", "1", (50, 0)), ("DOUBLE_OR_NOTHING", "G09", "5", (57, 0)),
    ("DOUBLE_OR_NOTHING", "G09", "3", (45, 0)),
])
def test_dice_abilities_roll_the_number_die(code: str, gid: str, face: str, expect: tuple[int, int]) -> None:
    s = acting(bare(), 3, gid, 1)
    events, s = play(s, 1, ability(), seed=0)
    assert of(events, "die_rolled")[0].die == "number"
    s = replace(s, window=None, stage="roll_result", roll=replace(s.roll, face=face))
    _, s = step(s)
    assert (s.money[1], s.respect[1]) == expect


def test_free_reroll_once_per_round_and_whack_free_reroll_once_per_whack() -> None:
    s = mark(place(bare(), {6: "G07"}), "G07", {2: 1})
    s = replace(s, roll=Roll("number", "1", "dice_money", 0, "G01"), money=(0,) * 4)
    assert free_means(s, 2) == [pb.REROLL_FREE_RING]
    assert free_means(replace(s, free_used=frozenset({"G07"})), 2) == []
    w = mark(place(bare(), {1: "H08"}), "H08", {1: 1})
    w = replace(w, money=(0,) * 4, roll=Roll("whack", "X", "whack", 1, "H08", "T03"))
    assert pb.REROLL_FREE_WHACK in free_means(w, 1)
    assert pb.REROLL_FREE_WHACK not in free_means(replace(w, roll=replace(w.roll, free_whack_used=True)), 1)


def test_associate_swap_joint_2_move_own_1_and_neutral_3_cards() -> None:
    s = hand(bare(), 0, "I90", "I91", "I88", "I86")
    s = replace(s, turn=0)
    _, after = play(s, 0, por("I90", slot=1, position=2))
    assert after.board[1] == "T07" and after.board[9] == "H02"
    _, after = play(s, 0, por("I91", gangster="G05", seat=2))
    assert markers_of(after, "G05").markers[0] == 2 and markers_of(after, "G05").markers[2] == 2
    moved = mark(s, "T01", {0: 1})
    _, after = play(moved, 0, por("I88", markers=[ref("T01", 0)], destination="M00"))
    assert markers_of(after, "M00").markers[0] == 1 and markers_of(after, "T01").markers[0] == 0
    _, after = play(s, 0, por("I86", gangsters=["T01", "H02", "C01"]))
    assert after.neutral == 22


def test_move_own_1_moves_one_marker_whatever_count_the_command_names() -> None:
    """Table F MOVE_OWN_1, NP-X21: a count above 1 is refused and changes nothing (it was
    checked as 1 and applied as named: 5 markers moved from a gangster that had 1)."""
    s = mark(replace(hand(bare(), 0, "I88"), turn=0), "T01", {0: 1})
    assert refused(s, 0, por("I88", markers=[ref("T01", 0)], destination="C01", count=5)) == "NP-C31"
    for count in (0, 1):
        _, after = play(s, 0, por("I88", markers=[ref("T01", 0)], destination="C01", count=count))
        assert markers_of(after, "T01").markers[0] == 0 and markers_of(after, "C01").markers[0] == 1


@pytest.mark.parametrize("junk", [
    {"destination": "x" * 100_000},                   # a field REMOVE_1 does not read, any text
    {"gangster": "not a gangster"},
    {"gangsters": ["C01"] * 1000},                    # more entries than any ability reads (NEUTRAL_3)
])
def test_np_x21_ability_targets_name_gangsters_only_so_the_public_event_carries_nothing_else(junk) -> None:
    """NP-X21: the chosen action is repeated in a public event (action_chosen, blackmail_proposed),
    so a Targets that names anything but gangster ids, or more of them than an ability reads, is
    refused rather than carried to every seat (it would bypass NP-M7's and NP-M10's chat limits)."""
    s = replace(at_stage(mark(std(4), "C01", {1: 1}), Phase.CREW, "action", pos=3, sweep=1), act=Act(3, "C01", 1))
    legal = next(c for c in ENGINE.legal_commands(s, 1, 32) if c.WhichOneof("kind") == "use_ability")
    play(s, 1, legal)   # the listed command itself is accepted
    padded = pb.Command()
    padded.CopyFrom(legal)
    for name, value in junk.items():
        if isinstance(value, list):
            getattr(padded.use_ability.targets, name).extend(value)
        else:
            setattr(padded.use_ability.targets, name, value)
    assert refused(s, 1, padded) == "NP-X21"
