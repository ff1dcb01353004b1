"""Edge cases (GR-X01..GR-X21)."""

from __future__ import annotations

import pytest

from famiglia.rules.grifters import ENGINE
from famiglia.rules.grifters.state import ABDUCT, COPY, OPPONENT, SECOND

from ._helpers import (
    CAT,
    CON,
    ENFORCER,
    FALL,
    FEMME,
    FORGER,
    HITMAN,
    IM,
    KIDNAP,
    MIDDLE,
    SMUGGLER,
    THUG,
    WHEEL,
    act,
    answer,
    caper,
    job,
    kinds,
    of_kind,
    sp,
    table,
)


def test_gr_x01_a_draw_from_an_empty_deck_reshuffles_then_the_discard_pile_is_empty() -> None:
    """GR-X01: a draw from an empty deck reshuffles then the discard pile is empty."""
    s = table(2, hands={0: [SMUGGLER, CON]}, deck=[], discard=[sp(6, 2), sp(6, 3)])
    s, _ = act(s, caper(SMUGGLER))
    assert s.discard == () and len(s.deck) == 1


def test_gr_x02_a_mastermind_reshuffle_takes_only_the_discard_pile() -> None:
    """GR-X02: a mastermind reshuffle takes only the discard pile."""
    s = table(2, hands={0: ["R0-MM", CON]}, deck=[sp(6, 2)], discard=[sp(9, 1), sp(9, 2), sp(9, 3)])
    s, events = act(s, caper("R0-MM"))
    assert kinds(events).count("discard_reshuffled") == 1
    assert sp(6, 2) in s.caper.drawn and sp(6, 2) not in s.deck


def test_gr_x03_stealing_from_an_empty_stash_takes_nothing_and_the_card_is_played() -> None:
    """GR-X03: stealing from an empty stash takes nothing and the card is played."""
    s = table(2, hands={0: [MIDDLE, CON]}, stash={1: 0})
    s, events = act(s, caper(MIDDLE))
    assert "isk_stolen" not in kinds(events) and s.players[0].nights[0] == (MIDDLE,)


def test_gr_x04_a_caper_worth_more_than_the_coffers_takes_the_rest_and_ends_before_later_parts() -> None:
    """GR-X04: a caper worth more than the coffers takes the rest and ends before later parts."""
    s = table(2, hands={0: [SMUGGLER, CON]}, coffers=1)
    s, events = act(s, caper(SMUGGLER))
    assert of_kind(events, "isk_stolen")[0].amount == 1 and s.over and "card_drawn" not in kinds(events)


def test_gr_x05_no_card_and_no_isk_the_turn_goes_on_to_phase_three() -> None:
    """GR-X05: no card and no isk the turn goes on to phase three."""
    s = table(2, hands={0: [CON], 1: []}, stash={1: 0}, nights={1: [[], [], [MIDDLE]]})
    s, events = act(s, caper(CON))
    assert of_kind(events, "isk_token_placed")[0].placed is False
    assert [e.cards for e in of_kind(events, "cards_refreshed") if e.seat == 1] == [[MIDDLE]]


def test_gr_x06_a_token_is_placed_even_when_phase_one_filled_the_refresh_area() -> None:
    """GR-X06: a token is placed even when phase one filled the refresh area."""
    s = table(2, hands={0: [CON, "R0-TH"], 1: []}, nights={1: [[], [], [MIDDLE]]})
    s, events = act(s, caper(CON))
    assert of_kind(events, "isk_token_placed")[0].placed and MIDDLE in s.players[1].hand


def test_gr_x07_without_a_matching_team_the_player_must_caper() -> None:
    """GR-X07: without a matching team the player must caper."""
    s = table(2, hands={0: [CON, MIDDLE]})
    assert {c.WhichOneof("kind") for c in ENGINE.legal_commands(s, 0)} == {"pull_caper"}


def test_gr_x08_an_inside_man_swapped_into_a_team_becomes_a_member() -> None:
    """GR-X08: an inside man swapped into a team becomes a member."""
    s = table(2, hands={0: [IM, CON]}, nights={1: [[sp(9, 1), "R1-TH", "R1-PP"], [], []]})
    s, _ = act(s, caper(IM))
    assert s.players[1].nights[1] == (IM, "R1-TH", "R1-PP")


def _thug_steals(nights) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    t = table(2, hands={0: [THUG, "R0-PP"]}, nights={1: nights}, stash={1: 5})
    _, events = act(t, caper(THUG))  # the only partner, the BRAWN Pickpocket, is chosen without asking
    return [(e.victim, e.amount) for e in of_kind(events, "isk_stolen")]


def test_gr_x09_a_card_left_alone_by_the_kidnapper_or_hitman_counts_for_a_thug() -> None:
    """GR-X09: a card left alone by the kidnapper or hitman counts for a thug."""
    assert _thug_steals([[], [CON, "R1-PP"], []]) == []
    for card in (KIDNAP, HITMAN):
        s = table(2, hands={0: [card, CON]}, nights={1: [[], [sp(6, 2), "R1-PP"], []]})
        s, _ = act(s, caper(card))
        assert s.players[1].nights[2] == ("R1-PP",)  # alone now (advanced at seat 1's turn)
        assert _thug_steals(s.players[1].nights) == [(1, 1)]


def test_gr_x10_an_inside_man_may_abduct_an_inside_man_but_not_take_back_the_one_that_swapped_in() -> None:
    """GR-X10: an inside man may abduct an inside man but not take back the one that swapped in."""
    im2 = sp(1, 2)
    s = table(3, hands={0: [IM, CON]}, nights={1: [[im2], [], []], 2: [[MIDDLE], [THUG], []]})
    s, _ = act(s, caper(IM))
    assert s.choice == ABDUCT
    s, events = act(s, answer(ABDUCT, (1, 1, im2)))
    # the abducted Inside Man performs its caper for seat 0: seat 1's swapped-in IM is not a target
    targets = [(c.abduct_specialist.opponent, c.abduct_specialist.card) for c in ENGINE.legal_commands(s, 0)]
    assert (1, IM) not in targets and (2, MIDDLE) in targets
    s, events = act(s, answer(ABDUCT, (2, 1, MIDDLE)))
    assert s.players[2].nights[0] == (im2,)  # seat 1's turn came next: seat 2's Hideout did not move
    assert s.players[0].nights[0] == (MIDDLE,)


def test_gr_x11_a_femme_fatale_on_a_first_turn_still_advances() -> None:
    """GR-X11: a femme fatale on a first turn still advances."""
    s = table(2, hands={0: [FEMME, CON]}, had_turn=False)
    s, _ = act(s, caper(FEMME))
    s, _ = act(s, answer(SECOND, CON))
    assert s.players[0].nights[:2] == ((CON,), (FEMME,))


def test_gr_x12_an_extra_advance_moves_a_token_back_to_the_coffers() -> None:
    """GR-X12: an extra advance moves a token back to the coffers."""
    s = table(2, hands={0: [WHEEL, CON]}, tokens={0: [False, False, True]}, coffers=20)
    s, _ = act(s, caper(WHEEL))
    assert s.players[0].tokens == (False, False, False) and s.coffers == 21


def test_gr_x13_cat_burglar_steals_at_least_one() -> None:
    """GR-X13: cat burglar steals at least one."""
    s = table(2, hands={0: [CAT, CON]}, coffers=20)
    s, events = act(s, caper(CAT))
    assert of_kind(events, "isk_stolen")[0].amount == 1


def test_gr_x14_fall_guy_copying_mastermind_femme_and_inside_man() -> None:
    """GR-X14: fall guy copying mastermind femme and inside man."""
    s = table(2, hands={0: [FALL, "R0-MM", CON]}, deck=[sp(6, 2), sp(6, 3), sp(9, 1), sp(9, 2)])
    s, _ = act(s, caper(FALL))
    s, events = act(s, answer(COPY, "R0-MM"))
    assert len(of_kind(events, "card_drawn")) == 3 and s.caper.card == FALL
    s = table(2, hands={0: [FALL, FEMME, CON]})
    s, _ = act(s, caper(FALL))
    s, _ = act(s, answer(COPY, FEMME))
    assert s.choice == SECOND and s.players[0].nights[0] == (FALL,)
    assert [c.pull_second_caper.card for c in ENGINE.legal_commands(s, 0)[1:]] == [CON]  # not the Femme
    s = table(2, hands={0: [FALL, IM, CON]}, nights={1: [[MIDDLE], [], []]})
    s, _ = act(s, caper(FALL))
    s, _ = act(s, answer(COPY, IM))
    assert (FALL,) in s.players[1].nights and s.players[0].nights[0] == (MIDDLE,) and IM in s.players[0].hand


def test_gr_x15_a_forger_without_jobs_does_nothing() -> None:
    """GR-X15: a forger without jobs does nothing."""
    s = table(2, hands={0: [FORGER, CON]}, jobs={0: ["J-R1"]})
    s, events = act(s, caper(FORGER))
    assert "jobs_swapped" not in kinds(events) and "choice_opened" not in kinds(events)


def test_gr_x16_the_last_job_pays_its_reward_then_the_game_ends() -> None:
    """GR-X16: the last job pays its reward then the game ends."""
    s = table(2, hands={0: ["R0-TH", sp(6, 1), "R0-PP", CON]}, stacks=[("Green", ["J-G1"])], stash={1: 5})
    s, events = act(s, job("J-G1", "R0-TH", sp(6, 1), "R0-PP"))
    assert kinds(events)[-3:] == ["isk_stolen", "caper_completed", "game_ended"]
    assert s.players[0].stash == 5


def test_gr_x17_each_opponent_pays_what_they_can() -> None:
    """GR-X17: each opponent pays what they can."""
    stacks = [("Green", ["J-G3"])]
    s = table(3, hands={0: ["R0-MM", sp(2, 1), sp(3, 1), "R0-TH", sp(6, 1)]}, stacks=stacks, stash={1: 0, 2: 1})
    s, events = act(s, job("J-G3", "R0-MM", sp(2, 1), sp(3, 1), "R0-TH", sp(6, 1)))
    assert [(e.victim, e.amount) for e in of_kind(events, "isk_stolen")] == [(2, 1)]


def test_gr_x18_an_empty_stash_player_can_be_targeted_complete_jobs_and_win() -> None:
    """GR-X18: an empty stash player can be targeted complete jobs and win."""
    s = table(3, hands={0: [ENFORCER, CON]}, stash={1: 0, 2: 0})
    s, _ = act(s, caper(ENFORCER))
    assert s.choice == OPPONENT
    from famiglia.rules.grifters.state import replace_state
    done = replace_state(table(2, stash={0: 0, 1: 1}, jobs={0: ["J-R1", "J-R2"]}), over=True)
    assert ENGINE.result(done).winners() == [0]


def test_gr_x19_refresh_cards_cannot_join_a_team() -> None:
    """GR-X19: refresh cards cannot join a team."""
    s = table(2, hands={0: ["R0-MM", sp(2, 1), CON]}, refresh={0: ["R0-TH"]})
    assert not [c for c in ENGINE.legal_commands(s, 0) if c.WhichOneof("kind") == "complete_job"
                and "R0-TH" in c.complete_job.team]


def test_gr_x20_an_abducted_card_restarts_on_night_one() -> None:
    """GR-X20: an abducted card restarts on night one."""
    s = table(2, hands={0: [IM, "R0-TH"]}, nights={1: [[], [], [CON]]})
    s, _ = act(s, caper(IM))
    assert s.players[0].nights[0] == (CON,)


@pytest.fixture
def capped_emit(monkeypatch: pytest.MonkeyPatch) -> None:
    """GR-X21 exists so that every chain of nested capers ends: without it two Inside Men swap
    each other back and forth for ever inside one command. A cap on the events a test may emit
    turns that regression into a failure instead of a hang that eats memory."""
    from famiglia.rules.grifters import resolve

    emit = resolve.Ctx.emit
    emitted = 0

    def capped(self: resolve.Ctx, event: object) -> None:
        nonlocal emitted
        emitted += 1
        assert emitted < 500, "GR-X21: the Inside Men keep swapping"
        emit(self, event)  # type: ignore[arg-type]

    monkeypatch.setattr(resolve.Ctx, "emit", capped)


@pytest.mark.usefixtures("capped_emit")
def test_gr_x21_an_inside_man_cannot_choose_a_card_swapped_in_this_turn() -> None:
    """GR-X21: an inside man cannot choose a card swapped in this turn."""
    im2 = sp(1, 2)
    s = table(2, hands={0: [IM, CON]}, nights={1: [[im2], [], []]})
    s, events = act(s, caper(IM))
    # abducts the only target, im2; im2 then finds only IM, which was swapped in: nothing to abduct
    assert kinds(events).count("specialist_abducted") == 1
    assert s.players[0].nights[0] == (im2,) and (IM,) in s.players[1].nights


@pytest.mark.usefixtures("capped_emit")
def test_gr_x21_a_chain_of_inside_men_ends_within_the_command() -> None:
    """GR-X21: the abducted Inside Man may go on to a third Hideout, but none swaps back: the
    chain ends after two swaps (the timeout defaults choose every target)."""
    s = table(3, hands={0: [IM, CON]}, nights={1: [[sp(1, 2)], [], []], 2: [[sp(1, 3)], [], []]})
    s, events = act(s, caper(IM, use_defaults=True))
    assert [e.card for e in of_kind(events, "specialist_abducted")] == [sp(1, 2), sp(1, 3)]
    assert s.active == 1
