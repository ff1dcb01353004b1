"""result(state): Respect as the score, ranks from the final ordering (NP-E4, NP-E5, NP-T1..T7).

The ordering, roll-offs included, is decided when the game ends and recorded in GameEnded,
so `result` is a pure read.
"""

from __future__ import annotations

from famiglia.engine import Result, SeatOutcome

from .board import at, markers_on_board, strict
from .state import Phase, State
from .tx import Tx


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


def tiebreak_key(s: State, seat: int) -> tuple[int, ...]:
    """NP-E4, NP-E5, NP-T1..T6 (NP-T3: strict control only for NP-T2)."""
    top = max((p for p in range(1, 10) if at(s, p) and strict(s, at(s, p)) == seat), default=0)
    return (-s.respect[seat], 0 if s.ring == seat else 1, -top, -s.money[seat],
            -markers_on_board(s, seat), -len(s.hands[seat]))


def ranking(tx: Tx) -> list[int]:
    """Seats best first; NP-T7 roll-offs among seats still tied (rolled through the rng, in events)."""
    s = tx.s
    seats = sorted(range(s.n), key=lambda i: tiebreak_key(s, i))
    out: list[int] = []
    i = 0
    while i < len(seats):
        j = i
        while j + 1 < len(seats) and tiebreak_key(s, seats[j + 1]) == tiebreak_key(s, seats[i]):
            j += 1
        out.extend(_roll_off(tx, seats[i:j + 1]))
        i = j + 1
    return out


def _roll_off(tx: Tx, group: list[int]) -> list[int]:
    if len(group) == 1:
        return group
    rolls = [tx.rng.die(6) for _ in group]
    tx.emit("roll_off", seats=group, rolls=rolls)
    out: list[int] = []
    for value in sorted(set(rolls), reverse=True):
        out.extend(_roll_off(tx, [seat for seat, r in zip(group, rolls, strict=True) if r == value]))
    return out
