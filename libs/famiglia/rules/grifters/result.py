"""Scores, ranks and tie-breakers (GR-E04..GR-E06, GR-T01..GR-T04)."""

from __future__ import annotations

from collections import Counter

from famiglia.engine import Result, SeatOutcome

from .data import IS_RINGLEADER, JOBS_BY_ID
from .state import State


def colour_bonus(state: State, seat: int) -> int:
    """GR-E05: for each colour with 2 or more Jobs, its bonus; bonuses add up."""
    counts = Counter(JOBS_BY_ID[j].colour for j in state.players[seat].jobs)
    return sum(state.config.bonus(n) for n in counts.values())


def score(state: State, seat: int) -> int:
    """GR-E04, GR-E06: Stash plus colour bonus; Hideout tokens only when the option says so."""
    p = state.players[seat]
    tokens = sum(p.tokens) if state.config.hideout_tokens_score else 0
    return p.stash + colour_bonus(state, seat) + tokens


def specialists_owned(state: State, seat: int) -> int:
    """GR-T02: hand, Hideout, Refresh area and in play; Ringleaders only when the option says so."""
    cards = state.players[seat].owned_cards()
    if state.config.count_ringleaders_in_tiebreak:
        return len(cards)
    return sum(1 for c in cards if not IS_RINGLEADER[c])


def _key(state: State, seat: int) -> tuple[int, ...]:
    key = [-score(state, seat)]
    for tb in state.config.tiebreak:
        if tb == "most_jobs":
            key.append(-len(state.players[seat].jobs))
        else:
            key.append(specialists_owned(state, seat))
    return tuple(key)


def result(state: State) -> Result | None:
    if not state.over:
        return None
    keys = {seat: _key(state, seat) for seat in range(state.seats)}
    outcomes = []
    for seat in range(state.seats):
        rank = 1 + sum(1 for other in range(state.seats) if keys[other] < keys[seat])  # GR-T04
        p = state.players[seat]
        outcomes.append(SeatOutcome(seat, float(score(state, seat)), rank, {
            "stash": str(p.stash),
            "colour_bonus": str(colour_bonus(state, seat)),
            "jobs": str(len(p.jobs)),
            "specialists": str(specialists_owned(state, seat)),
        }))
    winners = [o.seat for o in outcomes if o.rank == 1]
    return Result(tuple(outcomes), {"end": state.end_reason, "winners": ",".join(map(str, winners)),
                                     "rounds": str(state.round)})
