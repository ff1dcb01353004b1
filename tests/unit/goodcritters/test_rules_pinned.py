"""GoodCritters rules a mutation of the engine once changed without any other test noticing."""

from __future__ import annotations

from dataclasses import replace as dc_replace

import pytest

from famiglia.engine import RuleViolation
from famiglia.rules.goodcritters.result import result
from famiglia.rules.goodcritters.state import Step
from tests.unit.goodcritters._helpers import (
    ENGINE,
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
HIDDEN = 3


def _step3(**options: str):  # type: ignore[no-untyped-def]
    state, _ = assign(table_state(options={**PAYOFF, **options}))
    return state


def test_gc_t02_gc_t03_tiebreak_only_splits_the_players_tied_for_the_highest_score() -> None:
    """GC-T03: `more_loot_cards` applies "among the players tied for the highest score";
    GC-T02: otherwise "Equal scores share a rank". Seats 1 and 2 tie below the winner with
    different card counts: they must share rank 2 (mutant: tie-break applied to every score)."""
    state = table_state(options={"winner_tiebreak": "more_loot_cards"})
    state = dc_replace(
        state,
        stashes=(loot(106, 107, 108), loot(71, 72), loot(1, 2, 3, 4), ()),  # 15k, 8k, 8k, 0
        step=Step.OVER,
    )
    ranks = {o.seat: o.rank for o in result(state).seats}
    assert ranks == {0: 1, 1: 2, 2: 2, 3: 4}


def test_gc_p15_a_failed_hidden_offer_stays_hidden_from_its_target() -> None:
    """GC-P10/GC-P15: hidden Loot is seen by the briber only; "whoever gets hidden or peek
    Loot sees its faces, and nobody else learns more than they already saw". A hidden offer
    that goes back to its briber must not show its Loot to the target (mutant: the target
    always sees the resolved Loot)."""
    state = _step3()
    secret = state.stashes[0][0]
    state, _ = act(state, 0, C.make_offer(1, YES, [secret], 0, HIDDEN))
    # the target votes No: the offer fails and the hidden Loot goes back to seat 0
    state, events = play_step3(state, [VOTE_YES, VOTE_NO, VOTE_YES, VOTE_YES])
    resolved = [e for e in events if e.WhichOneof("kind") == "offer_resolved"]
    assert len(resolved) == 1 and resolved[0].offer_resolved.receiver == 0
    event = resolved[0]
    for viewer in (None, 1, 2, 3):
        assert not ENGINE.visibility(event).allows(viewer)
        seen = ENGINE.redact(event, viewer)
        assert seen is None or secret not in seen.offer_resolved.loot
    assert secret in ENGINE.redact(event, 0).offer_resolved.loot


def test_gc_p06_a_gift_cannot_name_one_loot_card_twice() -> None:
    """GC-P06: a gift moves "Loot cards from their Stash"; naming one card twice must be refused
    (mutant: accepted, and the receiver gets two copies of one card)."""
    state = _step3()
    card = state.stashes[0][0]
    with pytest.raises(RuleViolation):
        act(state, 0, C.give_gift(1, [card, card], 0, True))
    with pytest.raises(RuleViolation):
        act(state, 0, C.make_offer(1, YES, [card, card], 0, 1))


def test_gc_p06_a_gift_of_a_negative_number_of_payoff_cards_is_refused() -> None:
    """GC-P06: a gift is "any of their Payoff cards, at least one item in all"; -1 Payoff cards
    is no item and would take a card from the receiver (mutant: accepted)."""
    state = _step3()
    with pytest.raises(RuleViolation):
        act(state, 0, C.give_gift(1, [], -1, True))
    with pytest.raises(RuleViolation):
        act(state, 0, C.make_offer(1, YES, [], -1, 1))
    assert state.payoff_cards == (5, 5, 5, 5)


def test_gc_v06_gc_k01_reveal_after_failed_vote_is_read_from_the_configuration() -> None:
    """GC-V06 reveals 2 more cards after a failed vote; GC-K01 keeps the number in
    `reveal_after_failed_vote`. With 3 configured, 3 cards join the table (mutant: always 2)."""
    state = table_state(options={"reveal_after_failed_vote": "3"})
    before = len(state.table)
    state, _ = assign(state)
    state, events = play_step3(state, [VOTE_NO, VOTE_NO, VOTE_NO, VOTE_NO])
    assert of_kind(events, "vote_counted")[0].outcome == 3  # failed
    assert state.step is Step.DISTRIBUTE
    assert len(state.table) == before + 3
    assert kinds(events).count("loot_revealed") == 3


def test_gc_d09_gifts_count_as_public_changes_step_2_gifts_included() -> None:
    """GC-D09: "at most 3 public changes per round (...; giving a gift, Step 2 gifts included).
    After that, only choosing a card ... and committing remain open". Seat 1 gives three gifts
    in Step 2: a fourth is refused there, and so is a Threat marker in Step 3 (mutants: a gift
    not counted, or Step 2 gifts not capped)."""
    state = table_state(options=PAYOFF)
    for _ in range(3):
        state, _ = act(state, 1, C.give_gift(2, [], 1, True))
    assert state.changes[1] == 3 and state.payoff_cards[1] == 2
    with pytest.raises(RuleViolation) as refused:
        act(state, 1, C.give_gift(2, [], 1, True))
    assert refused.value.code == "GC-D09"
    state, _ = assign(state)
    assert state.changes[1] == 3  # the round's count goes on into Step 3
    with pytest.raises(RuleViolation) as refused:
        act(state, 1, C.place_threat(0))
    assert refused.value.code == "GC-D09"
    state, _ = act(state, 1, C.choose_action_card(VOTE_YES, commit=True))  # a card is still open
    assert state.committed[1]


def test_gc_p15_a_peek_offer_sent_back_stays_seen_by_its_target() -> None:
    """GC-P10, GC-P15: a peek offer's Loot is seen by the briber and the target; when it goes
    back to the briber "nobody else learns more than they already saw", so its target still gets
    the faces (it saw them) and the other seats get the event without them (mutant: the target
    dropped from the resolved event's seats)."""
    state = _step3()
    state, _ = act(state, 0, C.make_offer(1, YES, loot(1), 0, 2))  # peek, in front of seat 1
    state, events = play_step3(state, [VOTE_YES, VOTE_NO, VOTE_YES, VOTE_YES])
    (event,) = [e for e in events if e.WhichOneof("kind") == "offer_resolved"]
    assert event.offer_resolved.receiver == 0 and not event.offer_resolved.paid
    for seat, sees in ((0, True), (1, True), (2, False), (3, False), (None, False)):
        shown = ENGINE.redact(event, seat)
        assert shown is not None and list(shown.offer_resolved.loot) == (["L001"] if sees else [])
        assert shown.offer_resolved.loot_count == 1
