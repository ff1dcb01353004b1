"""The decision table (GR-D01..GR-D07): who acts, which choice is open, its options and defaults.

Only the active player decides, and only in Phase 2 (GR-D01): the play decision (GR-D02) or one
follow-up choice at a time (GR-D03). `pending`, `legal_commands`, `decide` and `timeout_command`
all read the options from here, so they can never disagree.
"""

from __future__ import annotations

from typing import Any

from .data import CARD_ORDER, EFFECT_OF, FALL_GUY, IS_RINGLEADER
from .state import (
    ABDUCT,
    COPY,
    HIT,
    JOB_SWAP,
    KEEP,
    KIDNAP,
    NIGHT,
    OPPONENT,
    PARTNER,
    PLAY,
    SECOND,
    State,
)

PLAY_DECISION = "play"

#: GR-D03, the rule each follow-up choice comes from (used as the code of its refusals)
CHOICE_RULE: dict[str, str] = {
    OPPONENT: "GR-C08",
    KEEP: "GR-K04",
    ABDUCT: "GR-K08",
    KIDNAP: "GR-K21",
    HIT: "GR-K23",
    JOB_SWAP: "GR-K11",
    NIGHT: "GR-K12",
    PARTNER: "GR-K18",
    COPY: "GR-K20",
    SECOND: "GR-K15",
}


def awaiting_play(state: State) -> bool:
    """GR-D02: Phase 2 has begun, nothing is played yet and the hand is not empty."""
    return (not state.over and state.phase == PLAY and not state.played and state.caper is None
            and not state.choice and bool(state.players[state.active].hand))


def open_decision(state: State) -> str:
    """The open decision of the active player: "play", a GR-D03 choice, or "" (none)."""
    if state.over:
        return ""
    if state.choice:
        return state.choice
    return PLAY_DECISION if awaiting_play(state) else ""


def timeout_seconds(state: State, decision: str) -> float:
    """GR-D06."""
    return state.config.play_timeout if decision == PLAY_DECISION else state.config.choice_timeout


# -- options of each follow-up choice (GR-D03, GR-D05) ----------------------------------------------------
def hideout_targets(state: State, seat: int, exclude_swapped: bool) -> list[tuple[int, int, str]]:
    """(opponent, night, card) for every Specialist in an opponent's Hideout, in Hideout order
    (GR-C09, GR-C10, GR-D05); the Inside Man skips cards swapped in this turn (GR-X21)."""
    out = []
    for opp in state.opponents(seat):
        for night, group in enumerate(state.players[opp].nights, start=1):
            for card in sorted(group, key=CARD_ORDER.__getitem__):
                if IS_RINGLEADER[card] or (exclude_swapped and card in state.swapped_in):
                    continue
                out.append((opp, night, card))
    return out


def job_swaps(state: State, seat: int) -> list[tuple[str, int, str]]:
    """GR-K11: (own job, opponent, their job)."""
    own = state.players[seat].jobs
    return [(mine, opp, theirs) for mine in own for opp in state.opponents(seat)
            for theirs in state.players[opp].jobs]


def hand_options(state: State, seat: int) -> list[str]:
    """Cards in hand that may leave it now: not a card a Fall Guy is copying (GR-K20)."""
    return [c for c in state.players[seat].hand if c not in state.locked]


def choice_options(state: State, choice: str) -> list[Any]:
    """Every legal answer of an open choice (declining not included)."""
    seat = state.active
    if choice == OPPONENT:
        return list(state.opponents(seat))
    if choice == KEEP:
        return list(state.caper.drawn) if state.caper else []
    if choice == ABDUCT:
        return hideout_targets(state, seat, exclude_swapped=True)
    if choice in (KIDNAP, HIT):
        return hideout_targets(state, seat, exclude_swapped=False)
    if choice == JOB_SWAP:
        return job_swaps(state, seat)
    if choice == NIGHT:
        return [n for n, group in enumerate(state.players[seat].nights, start=1) if group]
    if choice in (PARTNER, SECOND):
        return hand_options(state, seat)
    if choice == COPY:
        cards = hand_options(state, seat)
        if state.config.fall_guy_may_copy_fall_guy:
            return cards
        return [c for c in cards if EFFECT_OF[c] != FALL_GUY]
    raise ValueError(choice)


def default_answer(state: State, choice: str, options: list[Any]) -> Any:
    """GR-D03's timeout defaults: the first legal option in the order named; decline when optional."""
    if choice == OPPONENT:
        best = max(state.players[o].stash for o in options)
        return next(o for o in options if state.players[o].stash == best)
    if choice in (JOB_SWAP, SECOND):
        return None
    if choice == COPY:  # the first non-Fall Guy, also where GR-K20's option lets a Fall Guy be copied
        return next((c for c in options if EFFECT_OF[c] != FALL_GUY), options[0])
    return options[0]
