"""What every phase shares: the event emitter, Note draws with the Police Raid,
Vendetta draws (NC-K43..K55) and the refusal helpers."""

from __future__ import annotations

from typing import Any

from famiglia.engine import Rng, RuleViolation
from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

from ..data import POLICE_RAID, VENDETTA_BY_ID
from ..evolve import evolve, remember
from ..state import State


class Emitter:
    """Collects events and folds each one at once, so later steps see the new table."""

    __slots__ = ("state", "events")

    def __init__(self, state: State) -> None:
        self.state = state
        self.events: list[pb.Event] = []

    def __call__(self, **kind: Any) -> None:
        event = pb.Event(**kind)
        self.events.append(event)
        before = self.state
        self.state = evolve(before, event)
        remember(event, before, self.state)


def refuse(code: str, message: str) -> RuleViolation:
    return RuleViolation(code, message)


def draw_notes(em: Emitter, seat: int, count: int, rng: Rng, *, bonus: bool = False) -> tuple[list[int], bool]:
    """Draw `count` Notes one at a time (NC-B07): a Police Raid stops the draw and is
    shuffled back with the rest of the deck and the discard pile (NC-K33, NC-X03)."""
    if count <= 0:
        return [], False
    notes: list[int] = []
    raided = False
    for card in em.state.note_deck:
        if len(notes) == count:
            break
        if card == POLICE_RAID:
            raided = True
            break
        notes.append(card)
    if notes or not bonus:
        em(notes_drawn=pb.NotesDrawn(seat=seat, notes=notes, count=len(notes), bonus=bonus))
    if raided:
        police_raid(em, seat, rng)
    return notes, raided


def police_raid(em: Emitter, seat: int, rng: Rng) -> None:
    """NC-B07: the Raid is shown; Raid, Note deck and Note discard pile are reshuffled."""
    em(police_raided=pb.PoliceRaided(seat=seat))
    deck = rng.shuffled([*em.state.note_deck, *em.state.note_discard])
    em(deck_shuffled=pb.DeckShuffled(deck="note", notes=deck))


def cheat_draws(state: State, seat: int, shortfall: int, *, softened: bool = False) -> int:
    """NC-B10/M13/M19 draws, less one under W18 (NC-W118), plus one for W19 (NC-W119)."""
    from ..queries import has_power

    draws = max(0, shortfall - 1) if softened else shortfall
    if has_power(state.players[seat], "extra_vendetta"):
        draws += 1
    return draws


def draw_vendetta(em: Emitter, rng: Rng) -> None:
    """One card of the first queued draw (NC-K44), reshuffling the discards if needed (NC-K55)."""
    head = em.state.draws[0]
    if not em.state.vendetta_deck:
        if not em.state.vendetta_discard:
            em(vendetta_draw_skipped=pb.VendettaDrawSkipped(seat=head.seat, count=head.count))  # NC-X10
            return
        em(deck_shuffled=pb.DeckShuffled(deck="vendetta", cards=rng.shuffled(em.state.vendetta_discard)))
    card = em.state.vendetta_deck[0]
    kind = VENDETTA_BY_ID[card].kind
    if kind in ("atlantic", "rage"):  # NC-H08: shown
        em(vendetta_drawn=pb.VendettaDrawn(seat=head.seat, card=card))
    else:
        em(vendetta_drawn=pb.VendettaDrawn(seat=head.seat))
        em(vendetta_card_dealt=pb.VendettaCardDealt(seat=head.seat, card=card))
