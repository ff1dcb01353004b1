"""What each seat may know (GC-H01 to GC-H13, GC-P15): view(), visibility(), redact().

The view is an allow-list: it adds, piece by piece, what the viewer may know. Others' Stash
cards, others' face-down Action cards, the pile's order and The Fuzz!'s place never enter it
while the game runs; once it is over everything does (GC-E07, GC-H13). What a round's Step 4
showed everyone (the revealed cards, the locked threats, the vote) stays in it until the next
vote: Step 4 and the clean-up run inside one command, so no later View could show it otherwise.
What a seat saw go into another's Stash by an event private to it (a theft from it, its private
gift, a hidden or peek Payoff) stays in its own view as `known_loot` while nothing makes it stale.

Events with secret content are private to the seats that may see it; everybody else gets a
redacted copy with the content (card ids, the chosen card) cleared and the public fact kept.
"""

from __future__ import annotations

from functools import cache
from operator import getitem
from typing import Any, cast

from famiglia.engine import PUBLIC, SERVER_ONLY, Visibility, played_options, private_to
from famiglia.goodcritters.v1 import goodcritters_pb2 as pb

from .config import OPTIONS
from .data import FUZZ, MAX_PLAYERS, NOBODY, fuzz_gap_range
from .events import SHARED, Event, length_delimited
from .state import State, Vote

OPEN, PEEK, HIDDEN = 1, 2, 3
_pb: Any = pb  # enum fields take plain ints (see events.py)


def offer_loot_seen(visibility: int, briber: int, target: int, viewer: int | None) -> bool:
    """GC-P10: open for all, peek for briber and target, hidden for the briber only."""
    if visibility == OPEN:
        return True
    if viewer is None:
        return False
    return viewer == briber or (visibility == PEEK and viewer == target)


_SEAT_VIEWS: dict[tuple[Any, ...], bytes] = {}
"""A SeatView's wire form (View field 11) by its values. Most seats look the same from one
command to the next, and parsing a row's bytes (upb, in C) is several times cheaper than
adding the message and setting its ten fields from Python. Bounded."""


def _seat_view_wire(row: tuple[Any, ...]) -> bytes:
    wire = _SEAT_VIEWS.get(row)
    if wire is None:
        seat, stash_count, threat, card, choices, committed, changes, revealed, payoff, tokens, stash, shown, known = row
        sv: Any = _pb.SeatView(
            seat=seat,
            stash_count=stash_count,
            threat_target=threat,
            has_card=bool(card),
            choices=choices,
            committed=committed,
            public_changes=changes,
            revealed_card=revealed,
            payoff_cards=payoff,
            tokens_left=tokens,
            known_loot=known,
        )
        if shown:
            sv.stash.extend(stash)
            sv.chosen_card = card
        if len(_SEAT_VIEWS) >= 8192:
            _SEAT_VIEWS.clear()
        wire = _SEAT_VIEWS[row] = length_delimited(b"\x5a", sv.SerializeToString())  # field 11
    return wire


_HEADS: dict[tuple[Any, ...], bytes] = {}
"""The View's table-wide fields (everything but the seat rows, the offers and the over-only
pile) in wire form, by the values they come from. Building the message from keywords cost
~17 µs a View; most commands leave these values as they were. Bounded."""

_OPTIONS: list[tuple[Any, bytes]] = [((), b"")]
"""(the last options tuple, its wire form), in one slot so threads never pair one's options
with another's bytes (a Config's options tuple is shared by every State of a match)."""
_OPTIONS_WIRE: dict[tuple[tuple[str, str], ...], bytes] = {}
"""The options' wire form by their values, for a server that shows many matches in turn. Bounded."""


def _options_wire(options: tuple[tuple[str, str], ...]) -> bytes:
    """View field 3: every option with the value the match is played by (GameSetUp records
    them all, normalized; `played_options` fills in any an older event left out)."""
    last = _OPTIONS[0]
    if last[0] is not options:
        wire = _OPTIONS_WIRE.get(options)
        if wire is None:
            shown = played_options(OPTIONS, dict(options))
            wire = _pb.View(options=[pb.OptionValue(key=k, value=val) for k, val in shown.items()]).SerializeToString()
            if len(_OPTIONS_WIRE) >= 256:
                _OPTIONS_WIRE.clear()
            _OPTIONS_WIRE[options] = wire
        last = _OPTIONS[0] = (options, wire)
    return last[1]


def _head_wire(s: State, viewer: int) -> bytes:
    key = (viewer, s.seats, s.round, s.step, s.boss, s.turn, len(s.pile), s.table, s.revealed, s.skims,
           s.fuzz_out, s.fuzz_cause, s.confiscated, s.pile_start, s.end_reason)
    wire = _HEADS.get(key)
    if wire is None:
        low, high = fuzz_gap_range(s.seats, s.pile_start - 1) if s.pile_start else (0, 0)
        head: Any = _pb.View(
            viewer=viewer,
            seats=s.seats,
            round=s.round,
            step=s.step,
            boss=s.boss,
            turn=s.turn,
            pile_count=len(s.pile),
            table=s.table,
            yes_votes=sum(1 for c in s.revealed if c == 1),
            no_votes=sum(1 for c in s.revealed if c == 2),
            skims_revealed=s.skims,
            fuzz_revealed=s.fuzz_out,
            fuzz_cause=s.fuzz_cause,
            confiscated=s.confiscated,
            pile_start=s.pile_start,
            end_reason=s.end_reason,
            fuzz_position=NOBODY,
            fuzz_min_above=low,
            fuzz_max_above=high,
        )
        if len(_HEADS) >= 4096:
            _HEADS.clear()
        wire = _HEADS[key] = head.SerializeToString()
    return wire


_VOTES: dict[Vote, bytes] = {}
"""View field 25 (the latest vote) in wire form, by the Vote: a match keeps one for a whole round. Bounded."""


def _vote_wire(vote: Vote) -> bytes:
    wire = _VOTES.get(vote)
    if wire is None:
        cv: Any = _pb.CountedVote(
            round=vote.round,
            boss=vote.boss,
            cards=vote.cards,
            threats=vote.threats,
            yes=vote.yes,
            no=vote.no,
            outcome=vote.outcome,
        )
        if len(_VOTES) >= 1024:
            _VOTES.clear()
        wire = _VOTES[vote] = length_delimited(b"\xca\x01", cv.SerializeToString())  # field 25
    return wire


@cache
def _assignment_row(card: str) -> tuple[bytes, ...]:
    """`LootAssignment(card, seat)` as View field 10, for every seat."""
    return tuple(
        length_delimited(b"\x52", pb.LootAssignment(card=card, seat=seat).SerializeToString())
        for seat in range(MAX_PLAYERS)
    )


def view(state: State, viewer: int | None) -> pb.View:
    """Built as wire bytes and parsed once (upb, in C): the table-wide part, the assignments
    and each seat's row come from memos of their wire form; offers and the over-only fields
    are added to the message."""
    over = state.over
    s = state
    parts = [_head_wire(s, NOBODY if viewer is None else viewer), _options_wire(s.options)]
    if s.assignment:
        parts.extend(map(getitem, map(_assignment_row, s.table), s.assignment))
    counts_public = s.config.stash_counts_public or over
    payoff = s.config.payoff
    stashes, cards = s.stashes, s.cards
    known = known_by(s, viewer) if s.known and viewer is not None and not over else _NOTHING_KNOWN
    rows: list[bytes] = []
    for seat in range(s.seats):
        own = seat == viewer
        shown = own or over
        stash = stashes[seat]
        rows.append(_seat_view_wire((
            seat,
            len(stash) if (counts_public or own) else 0,
            s.threats[seat],
            cards[seat] if shown else bool(cards[seat]),  # another's card: only whether one lies
            s.choices[seat],
            s.committed[seat],
            s.changes[seat],
            s.revealed[seat],
            s.payoff_cards[seat],
            (s.config.tokens_per_player - s.offers_out(seat)) if payoff else 0,
            stash if shown else (),
            shown,
            known[seat],
        )))
    parts += rows
    if s.last_vote is not None:  # GC-H05: the round just played, whose Step 4 no View between commands shows
        parts.append(_vote_wire(s.last_vote))
    v: Any = _pb.View.FromString(b"".join(parts))
    for o in s.offers:
        ov = v.offers.add(
            briber=o.briber,
            target=o.target,
            side=o.side,
            loot_count=len(o.loot),
            payoff_cards=o.payoff_cards,
            visibility=o.visibility,
        )
        if over or offer_loot_seen(o.visibility, o.briber, o.target, viewer):
            ov.loot.extend(o.loot)
    if over:  # GC-H13: the rest of the pile, and where The Fuzz! lay in it at setup
        v.pile.extend(s.pile)
        v.fuzz_position = fuzz_had_above(s)
    return v


_NOTHING_KNOWN: tuple[tuple[str, ...], ...] = ((),) * MAX_PLAYERS


_KNOWN_BY: dict[tuple[Any, ...], tuple[tuple[str, ...], ...]] = {}
"""`known_by` by (State.known, viewer): the knowledge changes with a theft, a gift or an offer
only, so most Views of a match ask for the same. Bounded."""


def known_by(s: State, viewer: int) -> tuple[tuple[str, ...], ...]:
    """Per seat, the cards of its Stash the viewer knows from events private to it (State.known),
    in the order learnt."""
    key = (s.known, viewer)
    per_seat = _KNOWN_BY.get(key)
    if per_seat is None:
        seats: list[tuple[str, ...]] = [()] * MAX_PLAYERS
        for knower, holder, card in s.known:
            if knower == viewer:
                seats[holder] += (card,)
        if len(_KNOWN_BY) >= 4096:
            _KNOWN_BY.clear()
        per_seat = _KNOWN_BY[key] = tuple(seats)
    return per_seat


def fuzz_had_above(s: State) -> int:
    """The Loot cards The Fuzz! had above it at setup, once it has left the pile (-1 before):
    cards leave the pile from its top only, so every card drawn before it lay above it."""
    if FUZZ in s.pile or not s.pile_start:
        return NOBODY
    return s.pile_start - 1 - len(s.pile)


# -- visibility and redaction ---------------------------------------------------------------


_NOT_PUBLIC_KINDS = frozenset(
    {
        "pile_stacked",
        "stash_dealt",
        "action_card_chosen",
        "loot_skimmed",
        "loot_stolen",
        "gift_given",
        "offer_made",
        "offer_resolved",
    }
)
"""The kinds that may be private or server-only; every other event is public (asked per event
and viewer on the command path, so those skip reading the body)."""


def visibility(event: Event) -> Visibility:
    fact = SHARED.get(id(event))
    if fact is None:
        return _visibility(event)
    vis: Visibility | None = fact[1]  # a prebuilt event: worked out the first time it is asked
    if vis is None:
        vis = fact[1] = _visibility(event)
    return vis


_PRIVATE = tuple(private_to(seat) for seat in range(MAX_PLAYERS))
"""One seat's Visibility, made once (a frozen dataclass costs several µs to build)."""


def _private(seat: int) -> Visibility:
    return _PRIVATE[seat] if 0 <= seat < MAX_PLAYERS else private_to(seat)


def _visibility(event: Event) -> Visibility:
    kind = cast(str, event.WhichOneof("kind"))
    if kind not in _NOT_PUBLIC_KINDS:
        return PUBLIC
    e: Any = getattr(event, kind)
    if kind == "pile_stacked":
        return SERVER_ONLY  # GC-H07
    if kind in ("stash_dealt", "action_card_chosen", "loot_skimmed"):
        return _private(e.seat)  # GC-H02, GC-H06, GC-H09
    if kind == "loot_stolen":
        return PUBLIC if e.nothing else private_to(e.thief, e.victim)  # GC-H10
    if kind == "gift_given":
        return PUBLIC if e.open or not e.loot_count else private_to(e.giver, e.receiver)  # GC-P06
    if kind == "offer_made":
        return _offer_visibility(e.visibility, e.loot_count, e.briber, e.target)
    if kind == "offer_resolved":
        # GC-P15: whoever gets hidden or peek Loot sees it; a peek target had seen it already
        if e.visibility == OPEN or not e.loot_count:
            return PUBLIC
        seats = {e.briber, e.receiver}
        if e.visibility == PEEK:
            seats.add(e.target)
        return private_to(*seats)
    return PUBLIC


def _seen_by(vis: Visibility) -> bool | frozenset[int]:
    """True for everybody, else the seats `vis.allows` (none for server-only)."""
    if vis.allows(None):
        return True
    return frozenset(seat for seat in vis.seats if vis.allows(seat))


def _offer_visibility(vis: int, loot_count: int, briber: int, target: int) -> Visibility:
    if vis == OPEN or not loot_count:
        return PUBLIC
    if vis == PEEK:
        return private_to(briber, target)
    return _private(briber)


_SECRET_FIELDS: dict[str, tuple[str, ...]] = {
    "stash_dealt": ("cards",),
    "action_card_chosen": ("card",),
    "loot_skimmed": ("card",),
    "loot_stolen": ("card",),
    "gift_given": ("loot",),
    "offer_made": ("loot",),
    "offer_resolved": ("loot",),
}


def redact(event: Event, viewer: int | None) -> Event | None:
    """The event itself where the viewer may see it; else the public fact with the content
    cleared (GC-H06, GC-H09, GC-H10, GC-P15); server-only events reach nobody."""
    fact = SHARED.get(id(event))
    if fact is not None:  # a prebuilt event: who sees it is worked out once
        seen = fact[3]
        if seen is None:
            seen = fact[3] = _seen_by(visibility(event))
        if seen is True or viewer in seen:
            return event
        kind = cast(str, event.WhichOneof("kind"))
    else:
        kind = cast(str, event.WhichOneof("kind"))
        if kind not in _NOT_PUBLIC_KINDS:
            return event  # public (as `visibility` says), without building its Visibility
        vis = _visibility(event)
        if vis.allows(viewer):
            return event
    fields = _SECRET_FIELDS.get(kind)
    if fields is None:
        return None
    out = Event()
    out.CopyFrom(event)
    payload = getattr(out, kind)
    for name in fields:
        payload.ClearField(name)
    return out
