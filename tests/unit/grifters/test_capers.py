"""Capers (GR-C01..GR-C13)."""

from __future__ import annotations

import pytest

from famiglia.engine import RuleViolation
from famiglia.rules.grifters.state import COPY, KEEP, OPPONENT

from ._helpers import (
    CON,
    ENFORCER,
    FALL,
    HITMAN,
    IM,
    INFORMANT,
    MIDDLE,
    act,
    answer,
    caper,
    kinds,
    of_kind,
    sp,
    table,
)
from ._helpers import (
    KIDNAP as KIDNAPPER,
)


def test_gr_c01_a_caper_places_the_card_alone_on_night_one() -> None:
    """GR-C01: a caper places the card alone on night one."""
    s = table(2, hands={0: [CON, "R0-TH"]}, coffers=30)
    s, events = act(s, caper(CON))
    assert s.players[0].nights[0] == (CON,) and CON not in s.players[0].hand
    assert of_kind(events, "isk_stolen")[0].amount == 3 and s.coffers == 27


def test_gr_c01_a_card_not_in_hand_cannot_be_played() -> None:
    """GR-C01: a card not in hand cannot be played."""
    s = table(2, hands={0: ["R0-TH"]})
    with pytest.raises(RuleViolation) as exc:
        act(s, caper(CON))
    assert exc.value.code == "GR-C01"


def test_gr_c02_one_caper_per_turn_then_the_turn_passes() -> None:
    """GR-C02: one caper per turn then the turn passes."""
    s = table(2, hands={0: [CON, "R0-TH"], 1: ["R1-TH"]})
    s, _ = act(s, caper(CON))
    assert s.active == 1
    with pytest.raises(RuleViolation):
        act(s, caper("R0-TH"), seat=0)


def test_gr_c03_a_played_card_is_in_play_while_its_text_resolves() -> None:
    """GR-C03: a played card is in play while its text resolves."""
    s = table(2, hands={0: ["R0-MM", "R0-TH"]})
    s, _ = act(s, caper("R0-MM"))
    assert s.choice == KEEP
    assert s.players[0].in_play == ("R0-MM",) and "R0-MM" not in s.players[0].hand


def test_gr_c04_a_caper_that_can_do_nothing_is_still_legal_and_placed() -> None:
    """GR-C04: a caper that can do nothing is still legal and placed."""
    s = table(2, hands={0: [KIDNAPPER, ENFORCER]}, stash={1: 0})
    s, events = act(s, caper(KIDNAPPER))
    assert s.players[0].nights[0] == (KIDNAPPER,) and "specialist_kidnapped" not in kinds(events)
    s2 = table(2, hands={0: [ENFORCER, CON]}, stash={1: 0})
    s2, events = act(s2, caper(ENFORCER))
    assert "isk_stolen" not in kinds(events) and s2.players[0].nights[0] == (ENFORCER,)


def test_gr_c05_parts_resolve_in_the_order_written() -> None:
    """GR-C05: parts resolve in the order written."""
    s = table(2, hands={0: [INFORMANT, CON]})
    _, events = act(s, caper(INFORMANT))
    k = kinds(events)
    assert k.index("card_drawn") < k.index("isk_stolen") < k.index("caper_completed")


def test_gr_c06_stealing_from_a_player_takes_at_most_their_stash() -> None:
    """GR-C06: stealing from a player takes at most their stash."""
    s = table(3, hands={0: [ENFORCER, CON]}, stash={0: 0, 1: 2, 2: 5})
    s, _ = act(s, caper(ENFORCER))
    assert s.choice == OPPONENT
    s, events = act(s, answer(OPPONENT, 1))
    assert of_kind(events, "isk_stolen")[0].amount == 2
    assert s.players[0].stash == 2 and s.players[1].stash == 0


def test_gr_c06_stealing_from_the_coffers_takes_what_is_left_and_ends_the_game() -> None:
    """GR-C06: stealing from the coffers takes what is left and ends the game."""
    s = table(2, hands={0: [CON, "R0-TH"]}, coffers=2)
    s, events = act(s, caper(CON))
    assert of_kind(events, "isk_stolen")[0].amount == 2 and s.coffers == 0
    assert s.over and s.end_reason == "coffers_empty"


def test_gr_c07_drawing_reshuffles_the_discard_pile_into_an_empty_deck() -> None:
    """GR-C07: drawing reshuffles the discard pile into an empty deck."""
    s = table(2, hands={0: ["R0-TH", sp(2, 1)]}, deck=[], discard=[sp(6, 1), sp(6, 2), sp(6, 3)])
    s, events = act(s, caper(sp(2, 1)))  # Recruiter: draw 2
    k = kinds(events)
    assert k[:4] == ["caper_pulled", "discard_reshuffled", "deck_shuffled", "card_drawn"]
    assert len(of_kind(events, "card_drawn")) == 2
    assert len(s.deck) == 1 and s.discard == ()


def test_gr_c07_gr_x01_the_reshuffle_shuffles_the_discard_pile_with_the_match_rng() -> None:
    """GR-C07, GR-X01: the discard pile is shuffled into the new deck, not turned over as it lies:
    the new deck holds the same cards, in an order the match's generator picks."""
    discard = [sp(nn, 1) for nn in range(2, 12)]
    s = table(2, hands={0: ["R0-TH", sp(2, 2)]}, deck=[], discard=discard)
    orders = set()
    for seed in range(6):
        _, events = act(s, caper(sp(2, 2)), seed=seed)  # Recruiter: draw 2
        (shuffled,) = of_kind(events, "deck_shuffled")
        assert sorted(shuffled.cards) == sorted(discard)
        orders.add(tuple(shuffled.cards))
    assert len(orders) > 1


def test_gr_c08_an_opponent_is_never_yourself() -> None:
    """GR-C08: an opponent is never yourself."""
    s = table(3, hands={0: ["R0-PP", CON]})
    s, _ = act(s, caper("R0-PP"))
    from famiglia.rules.grifters import ENGINE
    targets = {c.rob_opponent.opponent for c in ENGINE.legal_commands(s, 0)}
    assert targets == {1, 2}
    with pytest.raises(RuleViolation) as exc:
        act(s, answer(OPPONENT, 0))
    assert exc.value.code == "GR-C08"


def test_gr_c08_c09_hideout_targets_only_opponents_with_eligible_cards_in_nights() -> None:
    """GR-C08, GR-C09: hideout targets only opponents with eligible cards in nights."""
    s = table(3, hands={0: [KIDNAPPER, CON], 2: [sp(6, 2)]},
              nights={1: [[], ["R1-TH"], []], 2: [[sp(9, 1)], [], []]}, refresh={1: [sp(9, 2)]})
    s, events = act(s, caper(KIDNAPPER))
    # only seat 2's Night One holds a Specialist: chosen without asking (GR-D04)
    assert of_kind(events, "specialist_kidnapped")[0].card == sp(9, 1)
    assert sp(9, 1) in s.players[0].hand


def test_gr_c10_ringleaders_cannot_be_abducted_kidnapped_or_hit() -> None:
    """GR-C10: ringleaders cannot be abducted kidnapped or hit."""
    for card in (IM, KIDNAPPER, HITMAN):
        s = table(2, hands={0: [card, CON]}, nights={1: [["R1-TH"], ["R1-MM", "R1-PP"], []]})
        s, events = act(s, caper(card))
        assert s.players[1].nights == ((), ("R1-TH",), ("R1-MM", "R1-PP")), card  # advanced, untouched
        assert s.players[0].nights[0] == (card,)


def test_gr_c11_a_copied_caper_acts_as_the_copying_card() -> None:
    """GR-C11: a copied caper acts as the copying card."""
    s = table(2, hands={0: [FALL, CON, "R0-TH"]}, coffers=30)
    s, _ = act(s, caper(FALL))
    assert s.choice == COPY
    s, events = act(s, answer(COPY, CON))
    copied = of_kind(events, "caper_copied")[0]
    assert copied.card == CON and copied.copier == FALL
    assert of_kind(events, "isk_stolen")[0].amount == 3
    assert s.players[0].nights[0] == (FALL,) and CON in s.players[0].hand


def test_gr_c12_a_nested_caper_resolves_completely_first() -> None:
    """GR-C12: a nested caper resolves completely first."""
    s = table(2, hands={0: [IM, "R0-TH"]}, nights={1: [[], [CON], []]}, coffers=30)
    s, events = act(s, caper(IM))
    k = kinds(events)
    assert k.index("specialist_abducted") < k.index("isk_stolen") < k.index("caper_completed")
    assert s.players[0].nights[0] == (CON,) and s.players[1].nights[2] == (IM,)  # seat 1's turn advanced it


def test_gr_c13_taken_cards_change_owner_for_good() -> None:
    """GR-C13: taken cards change owner for good."""
    s = table(2, hands={0: [IM, "R0-TH"]}, nights={1: [[], [MIDDLE], []]})
    s, _ = act(s, caper(IM))
    assert IM in s.players[1].owned_cards() and MIDDLE in s.players[0].owned_cards()
