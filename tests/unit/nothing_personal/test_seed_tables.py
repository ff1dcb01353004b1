"""Known answers from the seed documents: seed 001's board tables (Tables B, C, D, E) value by value,
and seed 000's worked examples of the Family phase (NP-Y5). Transcribed from the seeds, not from data.py."""

from __future__ import annotations

import pytest

from famiglia.rules.nothing_personal.data import A1, A2, A3, DICE, POSITIONS, WHACK_SUCCESS, Modifier

from .support import Phase, at_stage, bare, empty, mark, step

# Seed 001, "有關遊戲圖板上各幫派成員所印製的尊敬值與收入值": position -> (Respect, money). Position 7's
# Respect reads "×" with its digit lost; NP-W12 [default] makes it x2.
SEED_POSITION_TABLE = {
    9: ("+4", "+4"), 8: ("+3", "+3"), 7: ("x2", "+3"), 6: ("+2", "+2"), 5: ("+2", "+1"),
    4: ("+1", "x2"), 3: ("+1", "+1"), 2: ("+0", "+2"), 1: ("+1", "+0"),
}
# Seed 001, "可遞補的來源編號" (A = the Associate area) and "具有決定遞補來源的玩家".
SEED_SOURCES = {8: (7, 6, 5), 7: (5, 4), 6: (5, 3, 2), 5: (4, 2, 1), 4: (A1, A2, A3), 3: (2, A1, A2, A3),
                2: (1, A1, A2, A3), 1: (A1, A2, A3)}
SEED_DECIDERS = {8: 9, 7: 9, 6: 8, 5: 8, 4: 7, 3: 6, 2: 6, 1: 5}
# Seed 001, "總影響力標記數量上限" per number of players: 9個以上 / 10個以上 / 11個以上 (seed 000 likewise:
# "3 jugadores: 9 o más", "4 jugadores: 10 o más", "5 jugadores: 11 o más"), neutral markers included.
SEED_ARREST = {3: 9, 4: 10, 5: 11}
# Seed 001, the position abilities table (編號 1..9).
SEED_ABILITIES = {1: "WHACK_10", 2: "OMERTA", 3: "REMOVE_1", 4: "STEAL_3", 5: "SWAP_2", 6: "PLACE_OWN_1",
                  7: "NEUTRAL_3", 8: "DRAW_1", 9: "TAKE_RING"}


def _modifier(text: str) -> Modifier:
    return Modifier("x", int(text[1:])) if text[0] == "x" else Modifier("+", int(text))


@pytest.mark.parametrize("p", range(1, 10))
def test_table_b_np_w10_np_w12_position_modifiers_and_abilities_are_seed_001s(p: int) -> None:
    """Table B, NP-W10, NP-W12, NP-W23..NP-W31: seed 001's position table, one position per case."""
    respect, money = SEED_POSITION_TABLE[p]
    assert (POSITIONS[p].respect, POSITIONS[p].money) == (_modifier(respect), _modifier(money))
    assert POSITIONS[p].ability == SEED_ABILITIES[p]


@pytest.mark.parametrize("p", range(1, 9))
def test_table_d_np_y4_np_y5_vacancy_sources_and_deciders_are_seed_001s(p: int) -> None:
    """Table D, NP-Y4, NP-Y5: seed 001's fill-vacancy tables (the row for 9 is NP-Y1, nobody chooses)."""
    assert POSITIONS[p].sources == SEED_SOURCES[p]
    assert POSITIONS[p].decider == SEED_DECIDERS[p]


@pytest.mark.parametrize("p", range(1, 9))
def test_table_c_np_w33_np_w34_move_arrows_are_the_vacancy_arrows_read_upward(p: int) -> None:
    """Table C, NP-W33, NP-W34: a Move follows the board's arrows, the very arrows seed 001's vacancy
    table lists (source -> empty position), read upward; only the arrows into 9 are [default]."""
    upward = {q for q, sources in SEED_SOURCES.items() if p in sources}
    assert set(POSITIONS[p].arrows) - {9} == upward
    assert (9 in POSITIONS[p].arrows) == (p in (7, 8))


def test_table_e_np_w35_np_w40_dice_faces_are_seed_001s() -> None:
    """Table E: 爭奪骰 ring 2 3 4 5 knife; 消滅骰 ring pistol two pistols long gun X knife, four of
    them succeed (NP-W40); 數字骰 1..6."""
    assert DICE["move"] == ("ring", "2", "3", "4", "5", "knife")
    assert DICE["whack"] == ("ring", "pistol", "two_pistols", "long_gun", "X", "knife")
    assert WHACK_SUCCESS == {"ring", "pistol", "two_pistols", "long_gun"}
    assert DICE["number"] == tuple(str(i) for i in range(1, 7))


def test_np_y5_seed_000_examples_the_capo_decides_the_underboss_the_enforcer_the_first_guy() -> None:
    """NP-Y5, seed 000: "Si el subjefe está vacío, el jugador que controla al capo decide quién ocupa
    el puesto. Si el primer hombre está vacío, el ejecutor decide." (Underboss 8 / Capo 9; First Guy 3 /
    Enforcer 6.) The ring holder (seat 0) controls neither, so the answers cannot come from NP-Y6."""
    s = mark(empty(bare(ring=0), 8), "M00", {2: 1})
    _, s = step(at_stage(s, Phase.FAMILY, "fill", pos=8))
    assert s.vacancy is not None and s.vacancy.spot == 7 and s.vacancy.decider == 2
    s = mark(empty(bare(ring=0), 3), "H04", {3: 2, 1: 1})   # H04 is the Enforcer (STD board)
    _, s = step(at_stage(s, Phase.FAMILY, "fill", pos=8))
    assert s.vacancy is not None and s.vacancy.spot == 2 and s.vacancy.decider == 3


@pytest.mark.parametrize("n", sorted(SEED_ARREST))
def test_np_p1_arrests_follow_the_seeds_limit_per_number_of_players(n: int) -> None:
    """NP-P1, NP-P3: with n seats a gangster carrying the seeds' limit in total markers (a neutral one
    counted, seed 001 "包括中立影響力標記") goes to Prison; one marker fewer stays on the board."""
    limit = SEED_ARREST[n]
    s = mark(bare(n), "T01", {0: limit - 1}, neutral=1)      # at position 1 (STD board): at the limit
    s = mark(s, "H02", {1: limit - 1})                          # at position 2: one below it
    _, s = step(at_stage(s, Phase.FEDS, "arrest"))
    assert "T01" in s.prison and s.supply[0] == 25
    assert "H02" not in s.prison and s.board[1] == "H02"
