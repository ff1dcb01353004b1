"""THE FINAL VERDICT (NC-V01..V07, NC-V13, NC-V14): bonuses, the pile, the verdict, the Snitches."""

from __future__ import annotations

from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

from ..data import BONUS_CARDS, NOTE_MARK, NOTE_VALUE, VALUE_WEIGHTS, VENDETTA_BY_ID
from ..state import Seat
from .common import Emitter

_COUNTS = {
    "most_vendetta_drawn": lambda p: p.vendetta_drawn,  # NC-K23
    "most_wiseguys": lambda p: len(p.wiseguys),
    "most_turfs": lambda p: len(p.turfs),  # Atlantic City counts as a Turf
}


def pile_delta(notes: list[int], value_weighted: bool) -> int:
    """NC-V05: Innocent +1, Guilty -1, unmarked 0 (or weighted by value)."""
    delta = 0
    for n in notes:
        sign = {"I": 1, "G": -1}.get(NOTE_MARK[n], 0)
        delta += sign * (VALUE_WEIGHTS.get(NOTE_VALUE[n], 0) if value_weighted else 1)
    return delta


def is_snitch(p: Seat) -> bool:
    """NC-V07/K46/X16."""
    return any(VENDETTA_BY_ID[c].kind == "snitch" for c in p.hand)


def final_verdict(em: Emitter) -> None:
    """NC-V01 order: bonuses (V14), Corruption Pile (V05), verdict (V06), Snitches (V07)."""
    s = em.state
    for card, measure in BONUS_CARDS.items():
        counts = [_COUNTS[measure](p) for p in s.players]
        top = max(counts)
        leaders = [i for i, c in enumerate(counts) if c == top]
        em(bonus_awarded=pb.BonusAwarded(card=card, seat=leaders[0] if len(leaders) == 1 else -1))
    notes = [n for n, _ in s.pile]
    delta = pile_delta(notes, s.config.value_weighted)
    em(corruption_revealed=pb.CorruptionRevealed(notes=notes, delta=delta))
    v = em.state.verdict
    innocent = v > 0 or (v == 0 and s.config.tie_innocent)  # NC-V06
    snitches = [i for i, p in enumerate(s.players) if is_snitch(p)]
    em(verdict_reached=pb.VerdictReached(verdict="innocent" if innocent else "guilty", position=v,
                                         snitches=snitches))
