"""What one seat may know (NC-H01..H17): view(), visibility() and redacted events.

The view is an allow-list: it adds, piece by piece, what the viewer may see, so a new
secret field stays hidden by default. Once the match is over everything but deck orders
is public (NC-H16).
"""

from __future__ import annotations

from functools import lru_cache

from famiglia.engine.protocol import PUBLIC, SERVER_ONLY, Visibility, played_options, private_to
from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

from .config import OPTIONS
from .queries import seat_respect
from .state import Phase, State

_PRIVATE_SEAT = {
    "bank_dealt": "seat",
    "notes_drawn": "seat",
    "notes_banked": "seat",
    "vendetta_card_dealt": "seat",
    "bid_content": "seat",
    "notes_kept": "seat",
    "pile_notes_peeked": "seat",
    "note_smashed": "seat",
}


def visibility(event: pb.Event) -> Visibility:
    kind = event.WhichOneof("kind") or ""
    msg = getattr(event, kind)
    if kind in _PRIVATE_SEAT:
        return private_to(msg.seat)
    if kind == "notes_given":
        return private_to(msg.from_seat, msg.to_seat)  # NC-H03
    if kind == "notes_stolen":
        return private_to(msg.thief, msg.victim)  # NC-H14
    if kind == "notes_corrupted":
        return SERVER_ONLY if msg.from_deck else private_to(msg.seat)  # NC-W112, NC-H17
    if kind == "deck_shuffled":
        return SERVER_ONLY  # NC-H13
    return PUBLIC


def redact(event: pb.Event, viewer: int | None) -> pb.Event | None:
    """The event itself, its public form (counts without faces), or None."""
    if visibility(event).allows(viewer):
        return event
    kind = event.WhichOneof("kind")
    if kind in ("notes_drawn", "notes_banked", "notes_given", "notes_stolen"):
        out = pb.Event()
        out.CopyFrom(event)
        del getattr(out, kind).notes[:]
        return out
    if kind == "notes_kept":
        out = pb.Event()
        out.CopyFrom(event)
        del out.notes_kept.kept[:]
        del out.notes_kept.discarded[:]
        return out
    if kind == "note_smashed":
        return pb.Event(note_smashed=pb.NoteSmashed(seat=event.note_smashed.seat, note=-1))
    if kind == "deck_shuffled":
        return pb.Event(deck_shuffled=pb.DeckShuffled(deck=event.deck_shuffled.deck))
    return None


@lru_cache(maxsize=256)
def _options(options: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Every NC-K90 option with the value the match is played by: the one it was created with,
    else the default (`played_options`); once per match's options (read only: the View copies it)."""
    return played_options(OPTIONS, dict(options))


def view(state: State, viewer: int | None) -> pb.View:
    over = state.phase is Phase.OVER
    v = pb.View(
        viewer=-1 if viewer is None else viewer,
        seats=state.seats,
        options=_options(state.options),
        month=state.month,
        phase=state.phase.value,
        order=state.order,
        turn=state.turn,
        turn_acted=state.turn_acted,
        first_player=state.first_player,
        first_player_moved=state.first_player_moved,
        verdict=state.verdict,
        street=state.street,
        street_deck_size=len(state.street_deck),
        note_deck_size=len(state.note_deck),
        note_discard_size=len(state.note_discard),
        vendetta_deck_size=len(state.vendetta_deck),
        vendetta_discard=state.vendetta_discard,
        corruption_pile_size=len(state.pile),
        underboss=state.underboss,
        zealous_left=len(state.zealous_left),
        resolution=state.resolution,
        meeting_winners=sorted(state.meeting_winners),
        w13_spent=state.w13_spent,
        verdict_result=state.verdict_result,
        set_aside_size=len(state.set_aside),
        locations_revealed=state.locations_revealed,
        removed=state.removed,
        meeting_bidders=sorted(state.meeting_bidders),
        vendetta_reshuffled=state.vendetta_reshuffled,
    )
    for i, p in enumerate(state.players):
        mine = over or viewer == i
        sv = v.players.add(
            seat=i, wiseguys=p.wiseguys, turfs=p.turfs, busy=sorted(p.busy), trophies=p.trophies,
            respect=seat_respect(state, i), bank_size=len(p.bank), hand_size=len(p.hand),
            vendetta_drawn=p.vendetta_drawn, corruption_count=p.corruption_count,
            locations_left=len(p.locations), cashins=p.cashins, corruption_actions=p.corruption_actions,
        )
        if mine:
            sv.bank.extend(p.bank)
            sv.hand.extend(p.hand)
            sv.locations.extend(p.locations)
            sv.corrupted.extend(p.corrupted)
            sv.peeked.extend(p.peeked)
        elif viewer is not None:  # NC-H03, NC-H14: what the viewer saw go there
            if p.known_by:
                sv.known_bank.extend(sorted(n for knower, n in p.known_by if knower == viewer))
            if p.known_before_bids:  # NC-H04: in the Bank or a sealed bid, which is not told
                sv.known_before_bids.extend(sorted(n for knower, n in p.known_before_bids if knower == viewer))
        if over:
            sv.snitch = i in state.snitches
    for b in state.bids:
        bv = v.bids.add(seat=b.seat, wiseguy=b.wiseguy, count=b.count)
        if over or viewer == b.seat or state.locations_revealed:
            bv.location = b.location  # NC-M05
        if over or viewer == b.seat:
            bv.notes.extend(b.notes)  # NC-H04, NC-X01
    c = state.choice
    if c is not None:
        cv = v.choice
        cv.kind, cv.seat, cv.card, cv.cause, cv.wiseguy = c.kind, c.seat, c.card, c.cause, c.wiseguy
        cv.shares.extend(c.shares)
        cv.note_count = len(c.notes)
        cv.declared = c.declared
        cv.keep = c.keep
        if over or viewer == c.seat:
            cv.notes.extend(c.notes)  # NC-H03 drawn faces / NC-H06 a single winner's Notes
    for d in state.draws:
        v.draws.add(seat=d.seat, count=d.count, cause=d.cause)
    for space, seat, wiseguy, shown, value in state.shown_bids:  # NC-H06: shown to all
        if not v.revealed_bids or v.revealed_bids[-1].space != space:
            v.revealed_bids.add(space=space)
        v.revealed_bids[-1].bids.add(seat=seat, wiseguy=wiseguy, notes=shown, value=value)
    if over:
        v.corruption_pile.extend(n for n, _ in state.pile)  # NC-H16
    return v
