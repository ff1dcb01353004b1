"""result(state): Respect as the score, ranks from the final ordering (NP-E4, NP-E5, NP-T1..T7).

The ordering, roll-offs included, is decided when the game ends and recorded in GameEnded,
so `result` is a pure read.
"""

from __future__ import annotations

from famiglia.engine import Result, SeatOutcome

from .board import markers_on_board
from .state import Phase, State


def result(s: State) -> Result | None:
    if s.phase != Phase.OVER:
        return None
    rank = {seat: i + 1 for i, seat in enumerate(s.ranking)}
    seats = tuple(
        SeatOutcome(seat, float(s.respect[seat]), rank[seat],
                    {"money": str(s.money[seat]), "ring": str(s.ring == seat).lower(),
                     "markers_on_board": str(markers_on_board(s, seat))})
        for seat in range(s.n)
    )
    return Result(seats, {"winner": str(s.ranking[0]), "ring": str(s.ring)})
