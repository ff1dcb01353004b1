"""What each Action card does when it is revealed in Step 4 (GC-A08, GC-A11 to GC-A21).

One function per card, keyed by the card in EFFECTS. Votes do nothing until the count
(GC-A11); a Guard revealed on its owner's turn does nothing (GC-A17).
"""

from __future__ import annotations

from collections.abc import Callable

from . import events as ev
from . import evolve as fold
from .data import FUZZ, GUARD, NOBODY, ROB, SKIM, VOTE_NO, VOTE_YES
from .emitter import Emitter

FUZZ_CAUSE_SKIM = 3
STEAL_ROB, STEAL_COUNTER = 1, 2

Effect = Callable[[Emitter, int], None]


def no_effect(em: Emitter, seat: int) -> None:
    """GC-A11 (votes count at the end), GC-A17 (an untargeted Guard)."""


def skim(em: Emitter, seat: int) -> None:
    """GC-A12, GC-A13, GC-E05, GC-X07, GC-X15: only the first Skim(s) take the pile's top card."""
    s = em.state
    if s.skims > s.config.skims_per_round:
        return
    if s.pile and s.pile[0] == FUZZ:
        em.emit(ev.fuzz_revealed(FUZZ_CAUSE_SKIM))
        s = em.state
    if s.pile:
        card = s.pile[0]
        em.emit_folded(ev.loot_skimmed(seat, card), fold.loot_skimmed(s, seat, card))
    else:
        em.emit_folded(ev.skim_came_up_empty(seat), s)  # nothing changes


def rob(em: Emitter, seat: int) -> None:
    """GC-A14 to GC-A16, GC-A19 to GC-A21, GC-X02 to GC-X04."""
    s = em.state
    target = s.threats[seat]
    if target == NOBODY:
        return  # GC-A14: no marker out, nothing happens
    if s.cards[target] == GUARD:
        first = not s.revealed[target]
        if first:
            # GC-A10, GC-A15: the Guard turns up out of turn
            em.emit(ev.action_revealed(target, GUARD, out_of_turn=True))
        steal(em, thief=target, victim=seat, cause=STEAL_COUNTER)  # GC-A15, GC-A18
        if first:
            # GC-P11: its offers resolve once the Guard is revealed and resolved, so Loot going
            # back to a robbing briber is out of reach of this counter-steal (GC-P09, GC-P12)
            resolve_offers(em, target)
    else:
        steal(em, thief=seat, victim=target, cause=STEAL_ROB)


def steal(em: Emitter, thief: int, victim: int, cause: int) -> None:
    """GC-A19, GC-A21: a uniform pick from the Stash as it is now; nothing from an empty one."""
    s = em.state
    stash = s.stashes[victim]
    card = stash[em.rng.randrange(len(stash))] if stash else ""
    em.emit_folded(ev.loot_stolen(thief, victim, card, cause), fold.loot_stolen(s, thief, victim, card))


def resolve_offers(em: Emitter, target: int) -> None:
    """GC-P11, GC-P12, GC-X20: right after the target's card is revealed and resolved, each offer
    in front of it pays out if the token's side matches the card, else goes back to the briber;
    bribers in seat order clockwise from the target's left."""
    s = em.state
    if not s.offers:
        return  # most rounds (every round without the Payoff variant): no list built per seat
    mine = [o for o in s.offers if o.target == target]
    if not mine:
        return
    mine.sort(key=lambda o: (o.briber - target - 1) % s.seats)
    card = s.revealed[target]
    for o in mine:
        paid = (o.side == 1 and card == VOTE_YES) or (o.side == 2 and card == VOTE_NO)
        receiver = target if paid else o.briber
        em.emit(ev.offer_resolved(o.briber, target, receiver, o.loot, o.payoff_cards, o.visibility))


EFFECTS: dict[int, Effect] = {
    VOTE_YES: no_effect,
    VOTE_NO: no_effect,
    SKIM: skim,
    ROB: rob,
    GUARD: no_effect,
}
