"""Scores, ranks and tie-breakers (GC-E06, GC-P14, GC-T01 to GC-T03)."""

from __future__ import annotations

from famiglia.engine import Result, SeatOutcome

from .data import card_values
from .state import State

END_NAMES = {1: "fuzz_shown", 2: "fuzz_after_failed_vote", 3: "fuzz_skimmed", 4: "pile_empty"}


def scores(state: State) -> list[int]:
    """GC-E06, GC-P14: Stash face value, plus the Payoff cards with the variant."""
    values = card_values(state.config.copies)
    per_card = state.config.payoff_card_value if state.config.payoff else 0
    return [
        sum(values[c] for c in stash) + per_card * cards
        for stash, cards in zip(state.stashes, state.payoff_cards, strict=True)
    ]


def result(state: State) -> Result | None:
    """GC-T01, GC-T02: shared ranks (1, 1, 3); GC-T03: optionally more Loot cards among the
    players tied for the highest score."""
    if not state.over:
        return None
    score = scores(state)
    best = max(score)
    tiebreak = state.config.tiebreak_more_loot
    keys = [
        (score[i], len(state.stashes[i]) if tiebreak and score[i] == best else 0) for i in range(state.seats)
    ]
    outcomes = tuple(
        SeatOutcome(
            seat=i,
            score=float(score[i]),
            rank=1 + sum(1 for k in keys if k > keys[i]),
            details={"loot_cards": str(len(state.stashes[i])), "payoff_cards": str(state.payoff_cards[i])},
        )
        for i in range(state.seats)
    )
    winners = ",".join(str(o.seat) for o in outcomes if o.rank == 1)
    return Result(
        seats=outcomes,
        outcome={"winners": winners, "end": END_NAMES.get(state.end_reason, ""), "rounds": str(state.round)},
    )
