"""Turns (GR-R01..GR-R15)."""

from __future__ import annotations

import pytest

from famiglia.engine import RuleViolation
from famiglia.rules.grifters import ENGINE

from ._helpers import CON, FIXER, MIDDLE, THUG, WHEEL, act, caper, kinds, new_game, of_kind, sp, table


def test_gr_r01_turns_go_clockwise_from_the_first_player() -> None:
    """GR-R01: turns go clockwise from the first player."""
    s = table(3, active=1)
    seen = []
    for _ in range(6):
        seen.append(s.active)
        s, _ = act(s, ENGINE.timeout_command(s, s.active))
    assert seen == [1, 2, 0, 1, 2, 0]
    assert s.round == 3


def test_gr_r02_r03_advance_time_moves_only_the_active_hideout_one_night() -> None:
    """GR-R02, GR-R03: advance time moves only the active hideout one night."""
    s = table(2, hands={0: ["R0-TH"]}, nights={1: [["R1-MM"], ["R1-TH"], ["R1-PP"]]},
              stash={0: 3, 1: 3})
    s, events = act(s, caper("R0-TH"))
    assert s.active == 1
    began = of_kind(events, "turn_began")[0]
    assert began.seat == 1 and not began.advance_skipped
    p1 = s.players[1]
    # Night Three went to the Refresh area and came back to hand in Phase 3? No: it is seat 1's turn now.
    assert p1.nights == ((), ("R1-MM",), ("R1-TH",)) and p1.refresh == ("R1-PP",)
    assert s.players[0].nights == (("R0-TH",), (), ())


def test_gr_r04_phase_one_is_skipped_on_a_first_turn() -> None:
    """GR-R04: phase one is skipped on a first turn."""
    s = new_game(2, first_player_seat="0")
    s, events = act(s, caper("R0-TH"))
    began = of_kind(events, "turn_began")[0]
    assert began.seat == 1 and began.advance_skipped
    s, events = act(s, caper("R1-TH"))
    assert not of_kind(events, "turn_began")[0].advance_skipped
    assert s.players[0].nights == ((), ("R0-TH",), ())


def test_gr_r05_extra_advance_time_happens_even_on_the_first_turn() -> None:
    """GR-R05: extra advance time happens even on the first turn."""
    s = table(2, hands={0: [WHEEL, "R0-TH"]}, nights={0: [[CON], [], []]}, had_turn=False)
    s, events = act(s, caper(WHEEL))
    assert "time_advanced" in kinds(events)
    assert s.players[0].nights == ((WHEEL,), (CON,), ())


def test_gr_r06_a_player_with_cards_must_caper_or_complete_a_job_no_pass() -> None:
    """GR-R06: a player with cards must caper or complete a job no pass."""
    s = table(2)
    cmds = ENGINE.legal_commands(s, 0)
    assert cmds and {c.WhichOneof("kind") for c in cmds} <= {"pull_caper", "complete_job"}
    assert [p.seat for p in ENGINE.pending(s)] == [0]


def test_gr_r07_empty_hand_puts_a_token_that_returns_to_the_coffers() -> None:
    """GR-R07: empty hand puts a token that returns to the coffers."""
    plays = [CON, sp(6, 2), sp(6, 3), "R0-TH", sp(9, 1)]
    s = table(2, hands={0: plays, 1: []}, stash={0: 0, 1: 2}, coffers=40)
    seen = []
    for card in plays[:4]:
        before = s.coffers
        s, events = act(s, caper(card))
        stolen = sum(e.amount for e in of_kind(events, "isk_stolen"))
        seen.append((s.players[1].tokens, s.players[1].stash, s.coffers - before + stolen))
    assert seen == [
        ((True, False, False), 1, 0),
        ((True, True, False), 0, 0),
        ((False, True, True), 0, 0),
        ((False, False, True), 0, 1),  # the token that left Night Three went back to the Coffers
    ]


def test_gr_r07_token_moves_with_advance_and_goes_back_to_coffers() -> None:
    """GR-R07: token moves with advance and goes back to coffers."""
    s = table(2, hands={0: ["R0-PP"], 1: ["R1-PP"]}, tokens={1: [False, False, True]}, coffers=20)
    s, _ = act(s, caper("R0-PP"))
    assert s.players[1].tokens == (False, False, False) and s.coffers == 21


def test_gr_r08_empty_hand_and_empty_stash_places_nothing() -> None:
    """GR-R08: empty hand and empty stash places nothing."""
    s = table(2, hands={0: ["R0-PP"], 1: []}, stash={0: 3, 1: 0})
    s, events = act(s, caper("R0-PP"))
    # Pickpocket took from seat 1's empty stash; seat 1 then had nothing to place
    placed = of_kind(events, "isk_token_placed")
    assert placed and not placed[0].placed
    assert s.players[1].tokens == (False, False, False)
    assert s.active == 0


def test_gr_r09_a_token_is_not_stash_and_its_night_cannot_be_fixed() -> None:
    """GR-R09: a token is not stash and its night cannot be fixed."""
    s = table(2, hands={0: [FIXER, "R0-TH"]}, nights={0: [[], [CON], []]}, tokens={0: [False, False, True]})
    s, events = act(s, caper(FIXER))
    # only Night Two holds cards: the Fixer returns it without asking (GR-D04)
    assert of_kind(events, "night_returned")[0].night == 2
    assert s.players[0].tokens == (False, False, True)


def test_gr_r10_refresh_takes_the_refresh_area_back_into_hand_and_passes_the_turn() -> None:
    """GR-R10: refresh takes the refresh area back into hand and passes the turn."""
    s = table(2, hands={0: ["R0-TH", "R0-PP"], 1: ["R1-TH"]}, nights={1: [[], [], [CON, MIDDLE]]})
    s, _ = act(s, caper("R0-TH"))
    assert s.players[1].refresh == (CON, MIDDLE)
    s, events = act(s, caper("R1-TH"))
    refreshed = of_kind(events, "cards_refreshed")[0]
    assert refreshed.seat == 1 and list(refreshed.cards) == [CON, MIDDLE]
    assert CON in s.players[1].hand and s.players[1].refresh == () and s.active == 0


def test_gr_r11_a_card_played_on_turn_t_is_back_in_hand_at_the_end_of_turn_t_plus_3() -> None:
    """GR-R11: a card played on turn t is back in hand at the end of turn t plus 3."""
    mine = [MIDDLE, CON, sp(6, 2), sp(6, 3)]
    theirs = ["R1-TH", sp(9, 1), sp(9, 2), sp(9, 3)]
    s = table(2, hands={0: mine, 1: theirs}, coffers=40)
    s, _ = act(s, caper(MIDDLE))  # seat 0, turn t
    back = []
    for k in range(3):
        s, _ = act(s, caper(theirs[k]))
        s, _ = act(s, caper(mine[k + 1]))  # seat 0, turns t+1, t+2, t+3
        back.append(MIDDLE in s.players[0].hand)
    assert back == [False, False, True]


def test_gr_r12_cards_in_the_refresh_area_cannot_be_played() -> None:
    """GR-R12: cards in the refresh area cannot be played."""
    s = table(2, hands={0: ["R0-TH"], 1: ["R1-TH"]}, nights={1: [[], [], [CON]]})
    s, _ = act(s, caper("R0-TH"))
    assert s.players[1].refresh == (CON,)
    with pytest.raises(RuleViolation) as exc:
        act(s, caper(CON))
    assert exc.value.code == "GR-C01"


def test_gr_r13_outside_its_owners_turn_a_refresh_area_is_empty() -> None:
    """GR-R13: outside its owners turn a refresh area is empty."""
    s = table(2, hands={0: ["R0-TH"], 1: ["R1-TH"]}, nights={0: [[], [], [CON]], 1: [[], [], [MIDDLE]]})
    s, _ = act(s, caper("R0-TH"))
    assert s.players[0].refresh == ()


def test_gr_r14_there_is_no_hand_limit() -> None:
    """GR-R14: there is no hand limit."""
    big = [sp(n, c) for n in (2, 3, 6, 9, 12) for c in (1, 2, 3)]
    s = table(2, hands={0: big + ["R0-TH"]})
    assert len(s.players[0].hand) == 16
    assert len([c for c in ENGINE.legal_commands(s, 0) if c.WhichOneof("kind") == "pull_caper"]) == 16


def test_gr_r15_every_play_lands_on_an_empty_night_one() -> None:
    """GR-R15: every play lands on an empty night one."""
    s = table(2, hands={0: [THUG, "R0-TH"]}, nights={0: [[], [CON], []]})
    s, events = act(s, caper(THUG))
    assert s.players[0].nights == ((THUG, "R0-TH"), (CON,), ())  # one group per Night, never merged
