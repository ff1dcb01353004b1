"""Round and phase boundaries (NP-R1, NP-K1, NP-K2, NP-M4)."""

from __future__ import annotations

from .board import ring_order
from .state import Phase
from .tx import Tx


def begin_phase(tx: Tx, phase: str) -> None:
    """NP-R3: the order is fixed now. NP-M4: open offers lapse at the end of the phase in which
    they were made: the public `phase_began` ends them (evolve), with no event of their own,
    which each of their two seats alone would see and the others count by its version (NP-H7:
    how many offers were still open between other seats)."""
    tx.emit_values("phase_began", phase, ring_order(tx.s))


def next_commission_turn(tx: Tx) -> None:
    """NP-C1, NP-X20: turns go clockwise, skipping seats that passed; the phase ends when all passed."""
    s = tx.s
    if len(s.passed) == s.n:
        begin_phase(tx, Phase.CREW)
        return
    for k in range(1, s.n + 1):
        seat = (s.turn + k) % s.n
        if seat not in s.passed:
            tx.emit_values("commission_turn_began", seat)
            return


def begin_round(tx: Tx, r: int) -> None:
    """NP-K2: passes, the Ante and once-per-round uses are cleared; the round opens with the Commission."""
    tx.emit("round_began", round=r)
    begin_phase(tx, Phase.COMMISSION)
