"""What each seat may know (GC-H01 to GC-H13, GC-P15): view(), visibility(), redact().

The view is an allow-list: it adds, piece by piece, what the viewer may know. Others' Stash
cards, others' face-down Action cards, the pile's order and The Fuzz!'s place never enter it
while the game runs; once it is over everything does (GC-E07, GC-H13).

Events with secret content are private to the seats that may see it; everybody else gets a
redacted copy with the content (card ids, the chosen card) cleared and the public fact kept.
"""

from __future__ import annotations

from typing import Any, cast

from famiglia.engine import PUBLIC, SERVER_ONLY, Visibility, private_to
from famiglia.goodcritters.v1 import goodcritters_pb2 as pb

from .config import OPTIONS
from .data import FUZZ, MAX_PLAYERS, NOBODY, fuzz_gap_range
from .events import SHARED, Event
from .state import State

OPEN, PEEK, HIDDEN = 1, 2, 3
_pb: Any = pb  # enum fields take plain ints (see events.py)
DEFAULTS = {o.key: o.default for o in OPTIONS}


def offer_loot_seen(visibility: int, briber: int, target: int, viewer: int | None) -> bool:
    """GC-P10: open for all, peek for briber and target, hidden for the briber only."""
    if visibility == OPEN:
        return True
    if viewer is None:
        return False
    return viewer == briber or (visibility == PEEK and viewer == target)


def view(state: State, viewer: int | None) -> pb.View:
    over = state.over
    s = state
    v: Any = _pb.View(
        viewer=NOBODY if viewer is None else viewer,
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
    )
    # only the options that differ from their defaults (INFO.options has the rest)
    v.options.extend(pb.OptionValue(key=k, value=val) for k, val in s.options if DEFAULTS.get(k) != val)
    low, high = fuzz_gap_range(s.seats, s.pile_start - 1) if s.pile_start else (0, 0)
    v.fuzz_min_above, v.fuzz_max_above = low, high
    if s.assignment:
        v.assignments.extend(
            pb.LootAssignment(card=c, seat=seat) for c, seat in zip(s.table, s.assignment, strict=True)
        )
    counts_public = s.config.stash_counts_public or over
    for seat in range(s.seats):
        own = seat == viewer
        sv = v.seat_views.add(
            seat=seat,
            stash_count=len(s.stashes[seat]) if (counts_public or own) else 0,
            threat_target=s.threats[seat],
            has_card=bool(s.cards[seat]),
            choices=s.choices[seat],
            committed=s.committed[seat],
            public_changes=s.changes[seat],
            revealed_card=s.revealed[seat],
            payoff_cards=s.payoff_cards[seat],
            tokens_left=(s.config.tokens_per_player - s.offers_out(seat)) if s.config.payoff else 0,
        )
        if own or over:
            sv.stash.extend(s.stashes[seat])
            sv.chosen_card = s.cards[seat]
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
    if over:
        v.pile.extend(s.pile)
        if FUZZ in s.pile:
            v.fuzz_position = s.pile.index(FUZZ)
    return v


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
