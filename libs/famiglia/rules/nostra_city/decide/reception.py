"""Phase changes and THE RECEPTION (NC-C01..C11): upkeep without player input."""

from __future__ import annotations

from famiglia.engine import Rng
from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

from ..data import INVESTIGATION_BY_ID, MONTHS, UNDERBOSS
from ..flow import phase_order
from ..state import Phase
from .common import Emitter
from .trial import zealous_corruptor
from .verdict import final_verdict


def start_phase(em: Emitter, phase: Phase, month: int) -> None:
    """NC-R02/R03: the phase's order is fixed from the First Player card's holder now."""
    order = phase_order(em.state, phase) if phase in (Phase.BUSINESS, Phase.MEETING, Phase.TRIAL) else ()
    em(phase_started=pb.PhaseStarted(month=month, phase=phase.value, order=order))


def end_trial(em: Emitter, rng: Rng) -> None:
    """NC-T03 then the Reception (NC-C01): steps 1..6 run at once."""
    zealous_corruptor(em)
    s = em.state
    em(reception_held=pb.ReceptionHeld(month=s.month))  # NC-C02, C03, C09
    guilt = sum(INVESTIGATION_BY_ID[c].guilt for c in em.state.street if c in INVESTIGATION_BY_ID)  # NC-C04
    if guilt:
        em(verdict_moved=pb.VerdictMoved(delta=-guilt, position=em.state.verdict - guilt, reason="guilt"))  # NC-C05
    if s.month >= MONTHS:  # NC-C11
        final_verdict(em)
        return
    if (s.month == 2 and em.state.underboss == "later") or em.state.underboss == "waiting":
        _place_underboss(em)
    for space in range(1, 5):  # NC-C08
        if not em.state.street[space - 1] and em.state.street_deck:
            em(street_card_revealed=pb.StreetCardRevealed(space=space, card=em.state.street_deck[0]))
    start_phase(em, Phase.BUSINESS, s.month + 1)  # NC-C10


def _place_underboss(em: Emitter) -> None:
    """NC-C06/C07: lowest empty space, else replace the highest non-Investigation, else wait."""
    street = em.state.street
    for space in range(1, 5):
        if not street[space - 1]:
            em(underboss=pb.Underboss(space=space))
            return
    for space in range(4, 0, -1):
        if street[space - 1] not in INVESTIGATION_BY_ID and street[space - 1] != UNDERBOSS:
            em(underboss=pb.Underboss(space=space, removed=street[space - 1]))
            return
    em(underboss=pb.Underboss(space=0))
