"""evolve(state, event): one small function per event kind, never random.

Content events (Notes drawn, bids, cards dealt) carry their contents, so folding the
server's stream rebuilds the table exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

from .config import Config
from .data import (
    CONSIGLIERE,
    PRIMO_CAPO,
    TRAFFIC_ICONS,
    UNDERBOSS,
    VENDETTA_BY_ID,
    WISEGUY_BY_ID,
    ZEALOUS_CARDS,
    card_kind,
)
from .state import NEXT, Bid, Choice, Draw, Phase, Seat, State, changed, replace, seat_changed, seat_in


def evolve(state: State | None, event: pb.Event) -> State:
    if state is None:
        if event.WhichOneof("kind") != "match_set_up":
            raise ValueError("the first event must be match_set_up")
        return _match_set_up(event.match_set_up)
    d = state.__dict__
    if NEXT in d:   # (a replayed state has no link: one test, no look-up)
        link = d.get(NEXT)
        if link is not None and link[0] is event:
            d.pop(NEXT, None)   # (not `del`: another thread may have taken it meanwhile)
            return link[1]   # type: ignore[no-any-return]
    kind: str = event.WhichOneof("kind")  # type: ignore[assignment]
    return _EVOLVERS[kind](state, getattr(event, kind))


# `decide` folds every event it emits to see the table it leaves; whoever applies those
# events next folds the very same objects again. The state before each event keeps
# `(event, state after)` in its `__dict__` under NEXT (not a field: equality is untouched;
# a copy drops it); `evolve` returns it only for that very event after that very
# state, and a hit consumes the link, so folded chains never keep old states alive. (A global
# table of recent folds kept up to a thousand states alive for the garbage collector to walk.)


def remember(event: pb.Event, before: State, after: State) -> None:
    """Record a fold made by `decide` (see NEXT)."""
    before.__dict__[NEXT] = (event, after)


# -- helpers ---------------------------------------------------------------------------------
# Each evolver gathers the changes its event makes in one dict and copies the table once
# (`changed`): the table has 34 fields, and a copy per change was most of the fold's cost.
def _seat(state: State, seat: int, **changes: Any) -> State:
    return changed(state, {"players": seat_in(state.players, seat, changes)})


def _add(items: tuple[int, ...], more: Any) -> tuple[int, ...]:
    return tuple(sorted((*items, *more)))


def _remove(items: tuple, gone: Any) -> tuple:
    out = list(items)
    for x in gone:
        out.remove(x)
    return tuple(out)


# -- setup -----------------------------------------------------------------------------------
def _match_set_up(e: pb.MatchSetUp) -> State:
    options = dict(e.options)
    config = Config.parse(e.seats, options)
    return State(config=config, options=tuple(sorted(options.items())), seats=e.seats,
                 players=tuple(Seat() for _ in range(e.seats)), verdict=config.verdict_start,
                 zealous_left=ZEALOUS_CARDS[:config.zealous_cards])


def _cards_dealt(s: State, e: pb.CardsDealt) -> State:
    p = s.players[e.seat]
    return _seat(s, e.seat, wiseguys=(*p.wiseguys, *e.wiseguys), turfs=(*p.turfs, *e.turfs))


def _bank_dealt(s: State, e: pb.BankDealt) -> State:
    return _seat(s, e.seat, bank=_add(s.players[e.seat].bank, e.notes))


def _deck_shuffled(s: State, e: pb.DeckShuffled) -> State:
    if e.deck == "street":
        return changed(s, {"street_deck": tuple(e.cards), "set_aside": ()})
    if e.deck == "note":
        return changed(s, {"note_deck": tuple(e.notes), "note_discard": ()})
    # NC-K55: a reshuffle's cards are the discard pile everyone saw (the setup's shuffle has none)
    return changed(s, {"vendetta_deck": tuple(e.cards), "vendetta_discard": (),
                       "vendetta_reshuffled": tuple(sorted(s.vendetta_discard))})


def _street_card_revealed(s: State, e: pb.StreetCardRevealed) -> State:
    street = list(s.street)
    street[e.space - 1] = e.card
    return changed(s, {"street": tuple(street), "street_deck": s.street_deck[1:]})


def _street_card_set_aside(s: State, e: pb.StreetCardSetAside) -> State:
    return changed(s, {"set_aside": (*s.set_aside, e.card), "street_deck": s.street_deck[1:]})


def _first_player_chosen(s: State, e: pb.FirstPlayerChosen) -> State:
    return changed(s, {"first_player": e.seat})


# -- flow ------------------------------------------------------------------------------------
_PHASE_OF = {p.value: p for p in Phase}


def _phase_started(s: State, e: pb.PhaseStarted) -> State:
    phase = _PHASE_OF[e.phase]
    changes: dict[str, Any] = {"phase": phase, "month": e.month, "order": tuple(e.order), "turn": 0,
                               "turn_acted": False}
    if phase is Phase.BUSINESS:
        changes["players"] = tuple(seat_changed(p, {"cashins": ()}) for p in s.players)
    elif phase is Phase.MEETING:
        changes.update(meeting_winners=frozenset(), meeting_bidders=frozenset(), resolution=0,
                       locations_revealed=False, shown_bids=())
    elif phase is Phase.RESOLUTION:
        changes["resolution"] = 1
    elif phase is Phase.TRIAL:
        changes["players"] = tuple(seat_changed(p, {"corruption_actions": 0, "locations": (1, 2, 3, 4)})
                                   for p in s.players)
    return changed(s, changes)


def _turn_ended(s: State, e: pb.TurnEnded) -> State:
    return changed(s, {"turn": s.turn + 1, "turn_acted": False})


# -- business --------------------------------------------------------------------------------
def _cashed_in(s: State, e: pb.CashedIn) -> State:
    seat, wiseguy, declared = e.seat, e.wiseguy, e.declared   # (each read of a message field costs)
    p = s.players[seat]
    busy = p.busy | {wiseguy} if e.use_power else p.busy | {wiseguy, e.turf}
    key = declared if declared in TRAFFIC_ICONS else "racket"
    players = seat_in(s.players, seat, {"busy": busy, "cashins": tuple(sorted((*p.cashins, key)))})
    choice = Choice("distribute", seat, shares=tuple(e.shares), wiseguy=wiseguy, declared=declared)
    return changed(s, {"players": players, "turn_acted": True, "choice": choice})


def _notes_drawn(s: State, e: pb.NotesDrawn) -> State:
    notes = tuple(e.notes)
    deck = s.note_deck[len(notes):]
    if e.bonus:
        seat = e.seat
        players = seat_in(s.players, seat, {"bank": _add(s.players[seat].bank, notes)})
        return changed(s, {"note_deck": deck, "players": players})
    assert s.choice is not None
    return changed(s, {"note_deck": deck, "choice": replace(s.choice, notes=(*s.choice.notes, *notes))})


def _police_raided(s: State, e: pb.PoliceRaided) -> State:
    return s  # the reshuffle follows as its own DeckShuffled event (NC-B07)


def _notes_given(s: State, e: pb.NotesGiven) -> State:
    """NC-H03: the giver saw these faces go into the receiver's Bank, and knows them there."""
    assert s.choice is not None
    to, notes, giver = e.to_seat, e.notes, e.from_seat
    p = s.players[to]
    players = seat_in(s.players, to, {"bank": _add(p.bank, notes),
                                      "known_by": (*p.known_by, *((giver, n) for n in notes))})
    return changed(s, {"players": players, "choice": replace(s.choice, notes=_remove(s.choice.notes, e.notes))})


def _notes_banked(s: State, e: pb.NotesBanked) -> State:
    seat = e.seat
    players = seat_in(s.players, seat, {"bank": _add(s.players[seat].bank, e.notes)})
    return changed(s, {"players": players, "choice": None})


def _first_player_given(s: State, e: pb.FirstPlayerGiven) -> State:
    return changed(s, {"first_player": e.to_seat, "first_player_moved": True})


def _players_cheated(s: State, e: pb.PlayersCheated) -> State:
    cause = e.cause
    draws = tuple(Draw(c.seat, n, cause) for c in e.cheats if (n := c.draws) > 0)
    if e.reason == "meeting":
        return changed(s, {"draws": (*s.draws, *draws), "resolution": 6})  # NC-M13 settled: the Meeting is over
    return changed(s, {"draws": (*s.draws, *draws)})


# -- vendetta --------------------------------------------------------------------------------
def _vendetta_drawn(s: State, e: pb.VendettaDrawn) -> State:
    card = s.vendetta_deck[0]
    head = s.draws[0]
    rest = s.draws[1:] if head.count <= 1 else (replace(head, count=head.count - 1), *s.draws[1:])
    changes: dict[str, Any] = {"vendetta_deck": s.vendetta_deck[1:], "draws": rest}
    seat = e.seat
    p = s.players[seat]
    mine: dict[str, Any] = {"vendetta_drawn": p.vendetta_drawn + 1}
    kind = VENDETTA_BY_ID[card].kind
    if kind == "atlantic":
        mine["turfs"] = (*p.turfs, "AC")
    elif kind == "rage":
        changes["choice"] = Choice("rage", seat, card=card, cause=head.cause)
    else:
        mine["hand"] = tuple(sorted((*p.hand, card)))
    changes["players"] = seat_in(s.players, seat, mine)
    return changed(s, changes)


def _vendetta_card_dealt(s: State, e: pb.VendettaCardDealt) -> State:
    return s  # the private face of the card VendettaDrawn already moved


def _vendetta_draw_skipped(s: State, e: pb.VendettaDrawSkipped) -> State:
    return changed(s, {"draws": s.draws[1:]})


def _rage_played(s: State, e: pb.RagePlayed) -> State:
    changes: dict[str, Any] = {"choice": None, "vendetta_discard": (*s.vendetta_discard, e.card)}
    wiseguy = e.wiseguy
    if wiseguy:
        target = e.target
        changes["players"] = seat_in(s.players, target, {"busy": s.players[target].busy | {wiseguy}})
    return changed(s, changes)


def _revenge_played(s: State, e: pb.RevengePlayed) -> State:
    p = s.players[e.seat]
    s = _seat(s, e.seat, hand=_remove(p.hand, [e.card]))
    s = replace(s, vendetta_discard=(*s.vendetta_discard, e.card))
    t = s.players[e.target]
    if e.wiseguy:  # Hit (NC-K50, NC-X11)
        s = _seat(s, e.target, wiseguys=_remove(t.wiseguys, [e.wiseguy]), busy=t.busy - {e.wiseguy})
        s = replace(s, removed=(*s.removed, e.wiseguy))
    if e.turf:  # Tip-off (NC-K52)
        s = _seat(s, e.target, busy=t.busy | {e.turf})
    return s


def _notes_stolen(s: State, e: pb.NotesStolen) -> State:
    """NC-H14: the victim now knows these Notes are in the thief's Bank; the thief saw which
    left the victim's, the other seats only how many, so only the thief still knows any there."""
    thief, victim, notes = e.thief, e.victim, tuple(e.notes)
    v, t = s.players[victim], s.players[thief]
    players = seat_in(s.players, victim, {
        "bank": _remove(v.bank, notes),
        "known_by": tuple(k for k in v.known_by if k[0] == thief and k[1] not in notes),
        "known_before_bids": tuple(k for k in v.known_before_bids if k[0] == thief and k[1] not in notes)})
    players = seat_in(players, thief, {"bank": _add(t.bank, notes),
                                       "known_by": (*t.known_by, *((victim, n) for n in notes))})
    return changed(s, {"players": players})


def _note_smashed(s: State, e: pb.NoteSmashed) -> State:
    """NC-H15: nobody else sees which Note went, so nobody else knows this Bank's Notes any more."""
    players = seat_in(s.players, e.seat, {"bank": _remove(s.players[e.seat].bank, [e.note]), **_UNKNOWN})
    return changed(s, {"players": players, "note_discard": (*s.note_discard, e.note)})


# -- meeting ---------------------------------------------------------------------------------
def _bid_committed(s: State, e: pb.BidCommitted) -> State:
    """NC-H04: the others see only how many Notes left the Bank, so none they knew there is sure
    to be there any more; they keep it aside until the bid is shown or not (`_space_resolved`)."""
    seat, wiseguy = e.seat, e.wiseguy
    p = s.players[seat]
    players = seat_in(s.players, seat, {"busy": p.busy | {wiseguy}, "known_by": (),
                                        "known_before_bids": (*p.known_before_bids, *p.known_by)})
    return changed(s, {"players": players, "turn_acted": True, "bids": (*s.bids, Bid(seat, wiseguy, e.count)),
                       "meeting_bidders": s.meeting_bidders | {seat}})


def _bid_content(s: State, e: pb.BidContent) -> State:
    seat, wiseguy, location, notes = e.seat, e.wiseguy, e.location, tuple(e.notes)
    bids = list(s.bids)
    for i in range(len(bids) - 1, -1, -1):
        if bids[i].seat == seat and bids[i].wiseguy == wiseguy:
            bids[i] = replace(bids[i], location=location, notes=notes)
            break
    p = s.players[seat]
    players = seat_in(s.players, seat, {"bank": _remove(p.bank, notes), "locations": _remove(p.locations, [location])})
    return changed(s, {"players": players, "bids": tuple(bids)})


def _locations_revealed(s: State, e: pb.LocationsRevealed) -> State:
    return changed(s, {"locations_revealed": True})


def _space_resolved(s: State, e: pb.SpaceResolved) -> State:
    space, outcome = e.space, e.outcome
    on_space = [b for b in s.bids if b.location == space]
    left = tuple(b for b in s.bids if b.location != space)
    changes: dict[str, Any] = {"bids": left, "resolution": space + 1}
    if on_space:
        changes["players"] = _known_after_bids(s.players, on_space, left, shown=outcome not in _UNSHOWN)
    street = list(s.street)
    if outcome in ("single", "investigation_removed"):  # won cards leave with CardWon
        street[space - 1] = ""
    if outcome == "investigation_removed":
        changes["removed"] = (*s.removed, e.card)
    changes["street"] = tuple(street)
    if outcome == "single":
        # NC-M07: the card waits with the bid until the winner has kept a Note (NC-D09)
        bid = on_space[0]
        w = WISEGUY_BY_ID[bid.wiseguy]
        keep = int(w.param) if w.effect == "keep_two" else 1  # NC-W108
        changes["choice"] = Choice("keep", bid.seat, notes=bid.notes, keep=keep, card=e.card)
    else:
        changes["note_discard"] = (*s.note_discard, *(n for b in on_space for n in b.notes))
    return changed(s, changes)


def _bids_revealed(s: State, e: pb.BidsRevealed) -> State:
    """NC-H06: what everyone saw stays on the table's record until the next Meeting (the
    Notes themselves go to the discard pile with SpaceResolved). A Note known in a Bank before
    its bids that is shown in one has left that Bank, so it is no longer kept there."""
    shown = tuple((e.space, b.seat, b.wiseguy, tuple(b.notes), b.value) for b in e.bids)
    players = s.players
    for b in e.bids:
        p = players[b.seat]
        if p.known_before_bids:
            gone = set(b.notes)
            players = seat_in(players, b.seat, {"known_before_bids": tuple(
                k for k in p.known_before_bids if k[1] not in gone)})
    return changed(s, {"shown_bids": (*s.shown_bids, *shown), "players": players})


_UNSHOWN = frozenset({"single", "empty"})
"""SpaceResolved outcomes whose bids nobody else saw (NC-M07, NC-H06); every other one follows
a BidsRevealed."""

_UNKNOWN: dict[str, Any] = {"known_by": (), "known_before_bids": ()}
"""A Bank lost Notes no other seat saw: none of it is known any more."""


def _known_after_bids(players: tuple[Seat, ...], resolved: list[Bid], left: tuple[Bid, ...],
                      shown: bool) -> tuple[Seat, ...]:
    """NC-H04, NC-H06: the bids of one space are resolved. A bid nobody else saw makes its
    bidder's Bank unknown; once a bidder has no bid left unresolved, every Note known there
    before its bids and shown in none of them is still there."""
    for seat in {b.seat for b in resolved}:
        p = players[seat]
        if not shown:
            players = seat_in(players, seat, {"known_before_bids": ()})
        elif p.known_before_bids and not any(b.seat == seat for b in left):
            players = seat_in(players, seat, {"known_by": (*p.known_by, *p.known_before_bids),
                                              "known_before_bids": ()})
    return players


def _card_won(s: State, e: pb.CardWon) -> State:
    changes: dict[str, Any] = {}
    mine: dict[str, Any] = {}
    _won(s, e.seat, e.card, e.space, changes, mine)
    changes["players"] = seat_in(s.players, e.seat, mine)
    return changed(s, changes)


def _won(s: State, seat: int, card: str, space: int, changes: dict[str, Any], mine: dict[str, Any]) -> None:
    """NC-M10: `seat` wins `card` from Street space `space`; adds to the table's and the seat's changes."""
    if 1 <= space <= 4 and s.street[space - 1] == card:
        street = list(s.street)
        street[space - 1] = ""
        changes["street"] = tuple(street)
    p = s.players[seat]
    kind = card_kind(card)
    if kind == "wiseguy":
        mine["wiseguys"] = (*p.wiseguys, card)
    elif kind == "turf":
        mine["turfs"] = (*p.turfs, card)
    else:
        mine["trophies"] = (*p.trophies, card)
    changes["meeting_winners"] = s.meeting_winners | {seat}
    if card == UNDERBOSS:
        changes.update(underboss="won", titles=(*s.titles, (UNDERBOSS, seat)), choice=Choice("consigliere", seat))


def _notes_kept(s: State, e: pb.NotesKept) -> State:
    """NC-M07: the Notes are settled and the waiting card goes to the single winner (NC-M10);
    SpaceResolved already told everyone who won what."""
    assert s.choice is not None
    card, space, seat = s.choice.card, s.resolution - 1, e.seat
    changes: dict[str, Any] = {"choice": None, "note_discard": (*s.note_discard, *e.discarded)}
    mine: dict[str, Any] = {"bank": _add(s.players[seat].bank, e.kept)}
    _won(s, seat, card, space, changes, mine)
    changes["players"] = seat_in(s.players, seat, mine)
    return changed(s, changes)


def _title_assigned(s: State, e: pb.TitleAssigned) -> State:
    title = CONSIGLIERE if e.title == "consigliere" else PRIMO_CAPO
    changes: dict[str, Any] = {
        "players": seat_in(s.players, e.to_seat, {"trophies": (*s.players[e.to_seat].trophies, title)}),
        "titles": (*s.titles, (title, e.to_seat)),
        "choice": Choice("primo_capo", e.to_seat) if title == CONSIGLIERE else None,
    }
    if s.config.title_counts_as_win:
        changes["meeting_winners"] = s.meeting_winners | {e.to_seat}
    return changed(s, changes)


# -- trial -----------------------------------------------------------------------------------
def _corrupted(s: State, e: pb.Corrupted) -> State:
    seat = e.seat
    p = s.players[seat]
    mine: dict[str, Any] = {"busy": p.busy | {e.wiseguy}, "corruption_actions": p.corruption_actions + 1}
    if e.mode == "bank":  # NC-H10: the others see how many Notes left the Bank, not which
        mine.update(_UNKNOWN)
    changes: dict[str, Any] = {"players": seat_in(s.players, seat, mine), "turn_acted": True}
    if e.mode == "token":
        changes["w13_spent"] = True
    return changed(s, changes)


def _notes_corrupted(s: State, e: pb.NotesCorrupted) -> State:
    seat, notes = e.seat, tuple(e.notes)
    p = s.players[seat]
    count = p.corruption_count + len(notes)
    if e.from_deck:
        # W12 (NC-W112): the seat placed it, unseen; its W14 does not pick it (NC-W114).
        return changed(s, {"note_deck": s.note_deck[len(notes):], "pile": (*s.pile, *((n, seat) for n in notes)),
                           "players": seat_in(s.players, seat, {"corruption_count": count})})
    mine = {"bank": _remove(p.bank, notes), "corrupted": (*p.corrupted, *notes), "corruption_count": count}
    return changed(s, {"pile": (*s.pile, *((n, seat) for n in notes)), "players": seat_in(s.players, seat, mine)})


def _pile_notes_peeked(s: State, e: pb.PileNotesPeeked) -> State:
    p = s.players[e.seat]
    return _seat(s, e.seat, peeked=tuple(sorted({*p.peeked, *e.notes})))


def _verdict_moved(s: State, e: pb.VerdictMoved) -> State:
    return changed(s, {"verdict": e.position})


def _zealous_corruptor_taken(s: State, e: pb.ZealousCorruptorTaken) -> State:
    players = seat_in(s.players, e.seat, {"trophies": (*s.players[e.seat].trophies, e.card)})
    return changed(s, {"players": players, "zealous_left": _remove(s.zealous_left, [e.card])})


# -- reception and verdict -------------------------------------------------------------------
def _reception_held(s: State, e: pb.ReceptionHeld) -> State:
    free_turfs = s.config.turfs_free_in_reception  # NC-C03
    players = tuple(seat_changed(p, {"busy": frozenset() if free_turfs else p.busy - set(p.wiseguys)})
                    for p in s.players)
    return changed(s, {"phase": Phase.RECEPTION, "players": players, "first_player_moved": False,
                       "order": (), "turn": 0})


def _underboss(s: State, e: pb.Underboss) -> State:
    if e.space == 0:
        return changed(s, {"underboss": "waiting"})
    street = list(s.street)
    street[e.space - 1] = UNDERBOSS
    removed = (*s.removed, e.removed) if e.removed else s.removed
    return changed(s, {"street": tuple(street), "underboss": "street", "removed": removed})


def _bonus_awarded(s: State, e: pb.BonusAwarded) -> State:
    if e.seat < 0:
        return s
    p = s.players[e.seat]
    return _seat(s, e.seat, trophies=(*p.trophies, e.card))


def _corruption_revealed(s: State, e: pb.CorruptionRevealed) -> State:
    return changed(s, {"verdict": s.verdict + e.delta, "phase": Phase.VERDICT})


def _verdict_reached(s: State, e: pb.VerdictReached) -> State:
    return changed(s, {"verdict_result": e.verdict, "snitches": tuple(e.snitches), "phase": Phase.OVER,
                       "order": (), "turn": 0})


_EVOLVERS: dict[str, Callable[[State, Any], State]] = {
    "cards_dealt": _cards_dealt,
    "bank_dealt": _bank_dealt,
    "deck_shuffled": _deck_shuffled,
    "street_card_revealed": _street_card_revealed,
    "street_card_set_aside": _street_card_set_aside,
    "first_player_chosen": _first_player_chosen,
    "phase_started": _phase_started,
    "turn_ended": _turn_ended,
    "cashed_in": _cashed_in,
    "notes_drawn": _notes_drawn,
    "police_raided": _police_raided,
    "notes_given": _notes_given,
    "notes_banked": _notes_banked,
    "first_player_given": _first_player_given,
    "players_cheated": _players_cheated,
    "vendetta_drawn": _vendetta_drawn,
    "vendetta_card_dealt": _vendetta_card_dealt,
    "vendetta_draw_skipped": _vendetta_draw_skipped,
    "rage_played": _rage_played,
    "revenge_played": _revenge_played,
    "notes_stolen": _notes_stolen,
    "note_smashed": _note_smashed,
    "bid_committed": _bid_committed,
    "bid_content": _bid_content,
    "locations_revealed": _locations_revealed,
    "space_resolved": _space_resolved,
    "bids_revealed": _bids_revealed,
    "card_won": _card_won,
    "notes_kept": _notes_kept,
    "title_assigned": _title_assigned,
    "corrupted": _corrupted,
    "notes_corrupted": _notes_corrupted,
    "pile_notes_peeked": _pile_notes_peeked,
    "verdict_moved": _verdict_moved,
    "zealous_corruptor_taken": _zealous_corruptor_taken,
    "reception_held": _reception_held,
    "underboss": _underboss,
    "bonus_awarded": _bonus_awarded,
    "corruption_revealed": _corruption_revealed,
    "verdict_reached": _verdict_reached,
}
