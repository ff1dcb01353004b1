"""The Payoff variant (GC-P01 to GC-P15)."""

from __future__ import annotations

from dataclasses import replace as dc_replace

import pytest

from famiglia.engine import Rng, RuleViolation
from famiglia.rules.goodcritters.legal import all_gifts, all_offers
from famiglia.rules.goodcritters.result import scores
from famiglia.rules.goodcritters.state import Step

from ._helpers import (
    ENGINE,
    GUARD,
    ROB,
    SKIM,
    VOTE_NO,
    VOTE_YES,
    C,
    act,
    assign,
    kinds,
    loot,
    of_kind,
    play_step3,
    table_state,
)

PAYOFF = {"payoff.enabled": "true"}
YES, NO = 1, 2
OPEN, PEEK, HIDDEN = 1, 2, 3


def step3(**options: str):  # type: ignore[no-untyped-def]
    state, _ = assign(table_state(options={**PAYOFF, **options}))
    return state


def test_gc_p01_the_variant_is_off_by_default() -> None:
    """GC-P01: The variant is off by default."""
    state, _ = assign(table_state())
    with pytest.raises(RuleViolation) as exc:
        act(state, 0, C.make_offer(1, YES, [], 1, OPEN))
    assert exc.value.code == "GC-P01"
    with pytest.raises(RuleViolation) as exc:
        act(state, 0, C.give_gift(1, loot(1)))
    assert exc.value.code == "GC-P01"
    assert not any(
        c.WhichOneof("kind") in ("make_offer", "give_gift") for c in ENGINE.legal_commands(state, 0)
    )


def test_gc_p02_each_player_has_2_tokens_and_5_payoff_cards() -> None:
    """GC-P02: Each player has 2 tokens and 5 payoff cards."""
    state = step3()
    assert state.payoff_cards == (5, 5, 5, 5)
    view = ENGINE.view(state, 1)
    assert [sv.tokens_left for sv in view.seat_views] == [2, 2, 2, 2]


def test_gc_p03_payoff_cards_are_never_robbed() -> None:
    """GC-P03: Payoff cards are never robbed."""
    state = dc_replace(step3(), stashes=(loot(1), (), loot(3), loot(4)))
    state, _ = play_step3(state, [VOTE_YES, GUARD, ROB, VOTE_YES], threats={0: 1, 2: 1})
    # seat 1 has an empty Stash but 5 Payoff cards: Robs take nothing from it
    assert state.payoff_cards == (5, 5, 5, 5)


def test_gc_p04_bribes_are_not_enforced_nothing_is_recorded() -> None:
    """GC-P04: Bribes are not enforced nothing is recorded."""
    command_fields = set(ENGINE.info.command_type.DESCRIPTOR.fields_by_name)
    assert "promise" not in command_fields and "bribe" not in command_fields


def test_gc_p05_gc_p10_offered_loot_lies_open_peek_or_hidden() -> None:
    """GC-P05, GC-P10: Offered loot lies open peek or hidden."""
    state = step3()
    for target, vis in ((1, OPEN), (2, PEEK)):
        state, events = act(state, 0, C.make_offer(target, YES, [state.stashes[0][0]], 0, vis))
        (event,) = events
        seen = {v for v in (None, 0, 1, 2, 3) if ENGINE.redact(event, v).offer_made.loot}
        assert seen == ({None, 0, 1, 2, 3} if vis == OPEN else {0, 2})
    state = step3()
    state, (event,) = act(state, 0, C.make_offer(3, NO, [state.stashes[0][1]], 0, HIDDEN))
    assert {v for v in (None, 0, 1, 2, 3) if ENGINE.redact(event, v).offer_made.loot} == {0}
    assert ENGINE.redact(event, 3).offer_made.loot_count == 1
    restricted = step3(**{"payoff.offer_loot_visibility": "hidden"})
    with pytest.raises(RuleViolation) as exc:
        act(restricted, 0, C.make_offer(1, YES, [restricted.stashes[0][0]], 0, OPEN))
    assert exc.value.code == "GC-P10"


def test_gc_p06_gifts_move_at_once_in_steps_2_and_3() -> None:
    """GC-P06: Gifts move at once in steps 2 and 3."""
    state = table_state(options=PAYOFF)
    card = state.stashes[2][0]
    state, (event,) = act(state, 2, C.give_gift(3, [card], 2, False))  # Step 2, not the Boss
    assert card in state.stashes[3] and card not in state.stashes[2]
    assert state.payoff_cards == (5, 5, 3, 7)
    assert ENGINE.visibility(event).seats == frozenset({2, 3})
    assert not ENGINE.redact(event, 0).gift_given.loot and ENGINE.redact(event, 0).gift_given.loot_count == 1
    state, _ = assign(state)
    state, (event,) = act(state, 1, C.give_gift(0, [state.stashes[1][0]], 0, True))
    assert ENGINE.visibility(event).kind.name == "PUBLIC"
    with pytest.raises(RuleViolation) as exc:
        act(state, 1, C.give_gift(0, [], 0, True))  # at least one item
    assert exc.value.code == "GC-P06"
    with pytest.raises(RuleViolation) as exc:
        act(state, 1, C.give_gift(1, [], 1, True))  # not to oneself
    assert exc.value.code == "GC-P06"
    with pytest.raises(RuleViolation) as exc:
        act(state, 1, C.give_gift(2, loot(140), 0, True))  # not one's own card
    assert exc.value.code == "GC-P06"


def test_gc_p06_gifts_only_in_the_configured_steps_and_own_turn() -> None:
    """GC-P06: Gifts only in the configured steps and own turn."""
    state = table_state(options={**PAYOFF, "payoff.gift_steps": "3"})
    with pytest.raises(RuleViolation) as exc:
        act(state, 1, C.give_gift(2, [], 1))
    assert exc.value.code == "GC-P06"
    turns, _ = assign(table_state(options={**PAYOFF, "step3_mode": "turns"}))
    with pytest.raises(RuleViolation) as exc:
        act(turns, 2, C.give_gift(1, [], 1))
    assert exc.value.code == "GC-D06"
    turns, _ = act(turns, 0, C.give_gift(1, [], 1))
    assert turns.payoff_cards[1] == 6


def test_gc_p07_a_payoff_is_a_token_with_items_and_a_side() -> None:
    """GC-P07: A payoff is a token with items and a side."""
    state = step3()
    card = state.stashes[1][0]
    state, _ = act(state, 1, C.make_offer(2, NO, [card], 2, OPEN))
    (offer,) = state.offers
    assert (offer.briber, offer.target, offer.side, offer.loot, offer.payoff_cards) == (1, 2, NO, (card,), 2)
    with pytest.raises(RuleViolation) as exc:
        act(state, 1, C.make_offer(3, 0, [], 1, OPEN))
    assert exc.value.code == "GC-P07"
    with pytest.raises(RuleViolation) as exc:
        act(state, 1, C.make_offer(1, YES, [], 1, OPEN))
    assert exc.value.code == "GC-P07"


def test_gc_p08_offer_limits() -> None:
    """GC-P08: Offer limits."""
    state = step3(step3_public_change_limit="5")
    state, _ = act(state, 0, C.make_offer(1, YES, [], 1, OPEN))
    with pytest.raises(RuleViolation) as exc:
        act(state, 0, C.make_offer(1, NO, [], 1, OPEN))  # one offer per target
    assert exc.value.code == "GC-P08"
    state, _ = act(state, 0, C.make_offer(2, YES, [], 1, OPEN))
    with pytest.raises(RuleViolation) as exc:
        act(state, 0, C.make_offer(3, YES, [], 1, OPEN))  # two tokens only
    assert exc.value.code == "GC-P08"
    with pytest.raises(RuleViolation) as exc:
        act(state, 0, C.make_offer(3, YES, [], 0, OPEN))
    assert exc.value.code == "GC-P08"
    state, (event,) = act(state, 0, C.withdraw_offer(1))
    assert state.payoff_cards[0] == 4 and state.offers_out(0) == 1
    assert kinds([event]) == ["offer_withdrawn"]
    with pytest.raises(RuleViolation) as exc:
        act(state, 0, C.withdraw_offer(1))
    assert exc.value.code == "GC-P08"
    with pytest.raises(RuleViolation) as exc:
        act(table_state(options=PAYOFF), 0, C.make_offer(1, YES, [], 1, OPEN))  # Step 2
    assert exc.value.code == "GC-P08"


def test_gc_p09_offered_items_belong_to_nobody_and_cannot_be_robbed() -> None:
    """GC-P09: Offered items belong to nobody and cannot be robbed."""
    state = dc_replace(step3(), stashes=(loot(1), loot(2), loot(3), loot(4)))
    state, _ = act(state, 1, C.make_offer(3, YES, loot(2), 0, HIDDEN))
    assert state.stashes[1] == ()
    assert scores(state)[1] == 5 * 1000
    state, events = play_step3(state, [ROB, VOTE_NO, VOTE_YES, VOTE_YES], threats={0: 1})
    assert of_kind(events, "loot_stolen")[0].nothing  # the robbed Stash was empty


def test_gc_p11_a_matching_vote_earns_the_offer_else_it_goes_back() -> None:
    """GC-P11: A matching vote earns the offer else it goes back."""
    state = dc_replace(step3(), stashes=(loot(1), loot(2), loot(3), loot(4)))
    state, _ = act(state, 0, C.make_offer(1, YES, loot(1), 1, OPEN))
    state, _ = act(state, 2, C.make_offer(1, NO, [], 2, OPEN))
    state, _ = act(state, 3, C.make_offer(2, YES, loot(4), 0, OPEN))
    state, events = play_step3(state, [VOTE_YES, VOTE_YES, VOTE_NO, VOTE_YES])
    resolved = of_kind(events, "offer_resolved")
    # in front of seat 1: bribers clockwise from seat 1's left: 2 then 0
    assert [(r.briber, r.target, r.receiver, r.paid) for r in resolved] == [
        (2, 1, 2, False),
        (0, 1, 1, True),
        (3, 2, 3, False),
    ]
    assert "L001" in state.stashes[1] and "L004" in state.stashes[3]
    assert state.payoff_cards == (4, 6, 5, 5)
    k = kinds(events)
    reveal_1 = [i for i, e in enumerate(events) if e.WhichOneof("kind") == "action_revealed"][1]
    assert k[reveal_1 + 1] == "offer_resolved"


def test_gc_p12_loot_handed_out_by_an_offer_can_be_robbed_later_in_the_round() -> None:
    """GC-P12: Loot handed out by an offer can be robbed later in the round."""
    state = dc_replace(step3(), stashes=(loot(1), (), loot(3), loot(4)))
    state, _ = act(state, 0, C.make_offer(1, YES, loot(1), 0, OPEN))
    state, events = play_step3(state, [VOTE_YES, VOTE_YES, ROB, VOTE_YES], threats={2: 1})
    assert of_kind(events, "loot_stolen")[0].card == "L001"


def test_gc_p11_an_out_of_turn_guard_resolves_before_its_offers() -> None:
    """GC-P11: An out-of-turn Guard is revealed and resolved before the offers in front of it, so
    its counter-steal cannot take Loot that lay with the robber's token (GC-P09, GC-P12)."""
    state = dc_replace(step3(), stashes=(loot(1), loot(2), loot(3), loot(4)))
    state, _ = act(state, 1, C.make_offer(3, YES, loot(2), 0, OPEN))  # seat 1's only card
    state, events = play_step3(state, [VOTE_YES, ROB, VOTE_YES, GUARD], threats={1: 3})
    k = kinds(events)
    guard_at = next(
        i
        for i, e in enumerate(events)
        if e.WhichOneof("kind") == "action_revealed" and e.action_revealed.seat == 3
    )
    assert k[guard_at + 1 : guard_at + 3] == ["loot_stolen", "offer_resolved"]
    (counter,) = of_kind(events, "loot_stolen")
    assert (counter.thief, counter.victim) == (3, 1) and counter.nothing  # GC-A21: nothing to take yet
    assert state.stashes[1] == ("L002",) and "L002" not in state.stashes[3]


def test_gc_p13_tokens_come_back_at_the_end_of_the_round() -> None:
    """GC-P13: Tokens come back at the end of the round."""
    state = step3()
    state, _ = act(state, 0, C.make_offer(1, YES, [], 1, OPEN))
    state, _ = act(state, 0, C.make_offer(2, YES, [], 1, OPEN))
    state, _ = play_step3(state, [VOTE_YES] * 4)
    assert state.offers == () and state.offers_out(0) == 0
    assert ENGINE.view(state, 0).seat_views[0].tokens_left == 2


def test_gc_p14_payoff_cards_score_1000_each() -> None:
    """GC-P14: Payoff cards score 1000 each."""
    state = dc_replace(step3(), step=Step.OVER, stashes=(loot(1), (), (), ()), payoff_cards=(0, 7, 3, 5))
    assert scores(state) == [2000, 7000, 3000, 5000]
    assert ENGINE.result(state).winners() == [1]


def test_gc_p15_counts_are_public_faces_follow_the_visibility() -> None:
    """GC-P15: Counts are public faces follow the visibility."""
    state = dc_replace(step3(), stashes=(loot(1, 2), loot(3), loot(5), loot(6)))
    state, (made,) = act(state, 0, C.make_offer(2, YES, loot(1), 1, HIDDEN))
    for viewer in (None, 1, 2, 3):
        view = ENGINE.view(state, viewer)
        (ov,) = view.offers
        assert (ov.briber, ov.target, ov.side, ov.loot_count, ov.payoff_cards) == (0, 2, YES, 1, 1)
        assert not ov.loot
    assert list(ENGINE.view(state, 0).offers[0].loot) == ["L001"]
    state, events = play_step3(state, [VOTE_YES, VOTE_YES, VOTE_YES, VOTE_YES])
    (event,) = [e for e in events if e.WhichOneof("kind") == "offer_resolved"]
    assert ENGINE.visibility(event).seats == frozenset({0, 2})
    redacted = ENGINE.redact(event, 1).offer_resolved
    assert (redacted.receiver, redacted.loot_count, list(redacted.loot)) == (2, 1, [])


def test_gc_p06_gc_p08_every_listed_gift_and_offer_is_accepted() -> None:
    """GC-P06, GC-P08: Every listed gift and offer is accepted."""
    state = dc_replace(step3(), stashes=(loot(1, 2), loot(3), loot(5), loot(6)), payoff_cards=(1, 0, 0, 0))
    gifts = list(all_gifts(state, 0))
    offers = list(all_offers(state, 0))
    assert len(gifts) == 3 * 7 * 2  # 3 receivers, 7 non-empty bundles, open or private
    assert len(offers) == 3 * 7 * 2 * 3  # sides and visibilities
    for command in gifts[:10] + offers[:10]:
        ENGINE.decide(state, 0, command, Rng(0))
    for command in ENGINE.legal_commands(state, 0):
        ENGINE.decide(state, 0, command, Rng(0))


def test_gc_p11_a_guard_target_and_skim_fail_the_offer() -> None:
    """GC-P11: A guard target and skim fail the offer."""
    state = dc_replace(step3(), stashes=(loot(1), loot(2), loot(3), loot(4)))
    state, _ = act(state, 0, C.make_offer(1, YES, [], 1, OPEN))
    state, _ = act(state, 0, C.make_offer(2, NO, [], 1, OPEN))
    state, events = play_step3(state, [VOTE_YES, GUARD, SKIM, VOTE_YES])
    assert [r.paid for r in of_kind(events, "offer_resolved")] == [False, False]
    assert state.payoff_cards[0] == 5
