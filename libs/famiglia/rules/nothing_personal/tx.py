"""A decision in progress: events are applied as they are emitted, so later rules see their effect.

NP-W1 (control is evaluated whenever needed) and NP-W7 (the ring moves at once, in any phase,
even in the middle of a step) both follow from applying every event immediately.
"""

from __future__ import annotations

from typing import Any

from famiglia.engine import Rng
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb

from .data import GIDX
from .events import PASS
from .evolve import EVOLVERS
from .state import Phase, State

RING_SENSITIVE = frozenset({
    "setup_marker_placed", "markers_placed", "markers_removed", "marker_moved", "markers_swapped",
    "gangster_removed", "gangsters_exchanged", "gangster_promoted", "invited_marker_placed",
})


# decide already computed the state after each event it emits; folding those very events (the
# caller's next step) reuses them. The state before an event keeps `(event, state after)` in its
# `__dict__` under NEXT (not a field: equality is untouched; `state.replace` drops it); `folded`
# returns it only for that very event after that very state, so a hit is exactly what evolve would
# compute. A hit consumes the link, so folded chains never keep old states alive.
NEXT = "_next"


def folded(state: State | None, event: Any) -> State | None:
    """The state decide computed for `event` after `state`, or None."""
    if state is None:
        return None
    d = state.__dict__
    link = d.get(NEXT)
    if link is not None and link[0] is event:
        d.pop(NEXT, None)   # (not `del`: another thread may have taken it meanwhile)
        return link[1]   # type: ignore[no-any-return]
    return None


# Events are immutable once returned (engine contract), so an event whose fields are all scalars (or
# tuples of them) is built once per content and shared, with its payload message: most events repeat
# (`step_advanced`, `commission_turn_began`, ...). Keyed by content, so dropping the cache is always safe.
# A shared event may appear at several places: the links are per state, so each fold finds its own.
# One table per kind (so the key is the values alone: a tuple of them is built in one call).
SHARED: dict[str, dict[Any, tuple[Any, Any]]] = {}
SHARED_MAX = 10_000   # per kind
_KINDS: Any = pb.Event.DESCRIPTOR.oneofs_by_name["kind"].fields
_UNSHARED = frozenset(   # kinds with a message field: never hashable
    f.name for f in _KINDS if any(g.message_type is not None for g in f.message_type.fields))
_Event: Any = pb.Event
_PASS_FIELD = {"window_answered": "answer", "action_chosen": "action"}   # (seat, this command) events
# Always built: kinds with a message field, and kinds emitted with lists or with one-off contents.
_BUILT = _UNSHARED | {
    "influence_deck_ordered", "gangster_deck_ordered", "board_dealt",
    "fence_counted", "trade_cards_moved", "chat_sent", "roll_off", "final_scored",
    "game_ended",
}


# What the evolver of a shared event is handed: its payload read once into plain attributes (a
# protobuf field read costs several times a Python attribute's, and a shared event repeats). Every
# field of the message, repeated ones as tuples and messages as the message's own field, so an
# evolver reads exactly what it would read on the message.
_PAYLOADS: dict[str, tuple[type, tuple[tuple[str, bool], ...]]] = {}
"""Per kind: the payload class and the message's fields as (name, repeated), read from the
descriptor once (each `DESCRIPTOR.fields`, `f.name` and `f.is_repeated` asks upb afresh, and
~500 shared events a 5-seat game are new)."""


def _payload(kind: str, m: Any) -> Any:
    """The plain-attribute copy of `m`, the `kind` payload of a shared event."""
    known = _PAYLOADS.get(kind)
    if known is None:
        fields = tuple((f.name, f.is_repeated) for f in m.DESCRIPTOR.fields)
        cls = type(f"{kind}_payload", (), {"__slots__": tuple(name for name, _ in fields)})
        known = _PAYLOADS[kind] = (cls, fields)
    cls, fields = known
    p = cls()
    for name, repeated in fields:  # the builtin `setattr`: a cheaper call than object.__setattr__
        value = getattr(m, name)
        setattr(p, name, tuple(value) if repeated else value)
    return p


def _shared_event(kind: str, fields: dict[str, Any]) -> tuple[Any, Any]:
    """A new shared event and its payload, as the shared tables keep them."""
    e = _Event(**{kind: fields})
    return e, _payload(kind, getattr(e, kind))


# The kinds that make most events are emitted with their values in this order (`Tx.emit_values`):
# no keyword dictionary, and the values are already the key of the kind's shared events. (The rarer
# kinds keep `emit` with named fields, whose one order per kind test_fast_paths.py checks.)
VALUES: dict[str, tuple[str, ...]] = {
    "step_advanced": ("stage", "position", "order"),
    "money_changed": ("seat", "delta", "money", "reason"),
    "respect_changed": ("seat", "delta", "respect", "reason"),
    "crew_position_reached": ("sweep", "position"),
    "markers_placed": ("gangster", "owner", "count"),
    "commission_turn_began": ("seat",),
    "card_played": ("seat", "card", "mode", "window"),
    "card_resolved": ("card",),
    "window_opened": ("kind", "seats"),
    "window_closed": ("kind", "lapsed"),
    "position_scored": ("position", "gangster", "seat"),
    "action_turn_began": ("position", "gangster", "seat"),
    "action_turn_ended": ("position", "outcome"),
    "cards_drawn": ("seat", "count", "reason"),
    "cards_received": ("seat", "cards"),
    "offer_closed": ("id", "how", "to", "from"),
    "auto_pass_set": ("seat", "cards", "rerolls"),
    "cards_discarded": ("seat", "cards", "reason"),
    "die_rolled": ("die", "face", "purpose", "actor", "gangster", "target", "target_position"),
    "phase_began": ("phase", "order"),
    "commission_passed": ("seat",),
    "cards_bought": ("seat", "count"),
    "tie_ruling_asked": ("gangster", "seats", "use"),
    "tie_ruled": ("gangster", "seat", "use"),
    "gangster_promoted": ("gangster", "from_spot", "to_spot"),
}

# Per kind, one look-up: (evolver, how its event is built, whether the Capo ring is re-checked after
# it). How: None = shared by content; "" = always built; a field name = always built, except a pass
# made with the engine's one PASS in that field (shared per seat).
# Last, the kind's table of shared events (keyed by the seat alone for the shared passes), and the
# one of `emit_values` (keyed by the values in `VALUES` order: apart, so no key means two things).
_KIND: dict[str, tuple[Any, str | None, bool, dict[Any, tuple[Any, Any]], dict[Any, tuple[Any, Any]]]] = {
    k: (f, (_PASS_FIELD.get(k, "") if k in _BUILT else None), k in RING_SENSITIVE, SHARED.setdefault(k, {}), {})
    for k, f in EVOLVERS.items()}
assert not set(VALUES) & _BUILT


def _named(kind: str, values: tuple[Any, ...]) -> dict[str, Any]:
    """`emit_values`' values as the message's fields (trailing fields left out keep their defaults)."""
    names = VALUES[kind]
    if len(values) > len(names):
        raise TypeError(f"{kind} has the fields {names}, not {len(values)} values")
    return dict(zip(names, values, strict=False))


class Tx:
    __slots__ = ("s", "events", "rng")

    def __init__(self, state: State, rng: Rng) -> None:
        self.s = state
        self.events: list[Any] = []
        self.rng = rng

    def emit(self, event_kind: str, /, **fields: Any) -> None:
        evolver, built, ring, shared, _ = _KIND[event_kind]
        if built is None:
            # Keyed by the values: every call site of a kind names its fields in one order
            # (tests/unit/nothing_personal/test_fast_paths.py checks the source). A subscript, not
            # `.get`: a miss is rare once warm, and the exception costs nothing when none is raised.
            key = tuple(fields.values())
            try:
                e, m = shared[key]
            except KeyError:
                if len(shared) >= SHARED_MAX:
                    shared.clear()
                e, m = shared[key] = _shared_event(event_kind, fields)
            except TypeError:   # an unhashable value after all: not shared
                e = _Event(**{event_kind: fields})
                m = getattr(e, event_kind)
        elif built and len(fields) == 2 and fields.get(built) is PASS:
            seat = fields["seat"]   # a pass by the engine's own PASS: shared too, per seat
            hit = shared.get(seat)
            if hit is None:
                hit = shared[seat] = _shared_event(event_kind, fields)
            e, m = hit
        else:
            e = _Event(**{event_kind: fields})   # the message is built in place from the dict
            m = getattr(e, event_kind)
        self.events.append(e)
        before = self.s
        after = self.s = evolver(before, m)
        before.__dict__[NEXT] = (e, after)
        if ring:
            self._ring()

    def emit_values(self, event_kind: str, /, *values: Any) -> None:
        """`emit` for the kinds of `VALUES`, their fields given in that order (trailing ones may be
        left out, as defaults): the shared event is found by the values as they came."""
        evolver, _, ring, _, shared = _KIND[event_kind]
        try:
            e, m = shared[values]
        except KeyError:
            if len(shared) >= SHARED_MAX:
                shared.clear()
            e, m = shared[values] = _shared_event(event_kind, _named(event_kind, values))
        except TypeError:   # an unhashable value after all: not shared
            e = _Event(**{event_kind: _named(event_kind, values)})
            m = getattr(e, event_kind)
        self.events.append(e)
        before = self.s
        after = self.s = evolver(before, m)
        before.__dict__[NEXT] = (e, after)
        if ring:
            self._ring()

    def _ring(self) -> None:
        """NP-W7, NP-W8: strict control of position 9 takes the ring; a tie never moves it.

        `board.strict` inlined (this runs after every board event): the Capo is active by definition."""
        s = self.s
        capo = s.board[8]
        if capo:
            st = s.gs[GIDX[capo]]
            markers = st.markers
            m = max(markers)
            if m and st.neutral < m and markers.count(m) == 1:
                holder = markers.index(m)
                if holder != s.ring:
                    self.emit("ring_moved", seat=holder, reason="capo")

    # -- common bookkeeping ----------------------------------------------------------------------
    def respect(self, deltas: dict[int, int], reason: str) -> None:
        """NP-X7, NP-X8: changes of one rule step are summed, then floored at 0."""
        for seat in sorted(deltas):
            d = deltas[seat]
            if d == 0:
                continue
            new = max(0, self.s.respect[seat] + d)
            if new != self.s.respect[seat]:
                self.emit_values("respect_changed", seat, new - self.s.respect[seat], new, reason)

    def money(self, seat: int, delta: int, reason: str) -> int:
        """NP-X6: money never goes below 0; returns what actually moved."""
        new = max(0, self.s.money[seat] + delta)
        moved = new - self.s.money[seat]
        if moved:
            self.emit_values("money_changed", seat, moved, new, reason)
        return moved

    def take(self, frm: int, to: int, amount: int, reason: str) -> None:
        """NP-X6: an involuntary payment takes what the payer has; the receiver gets only that."""
        got = -self.money(frm, -amount, reason)
        if got:
            self.money(to, got, reason)

    def draw(self, seat: int, count: int, reason: str) -> int:
        """NP-X4: an empty deck is rebuilt from the shuffled discard pile; then the draw stops short."""
        drawn: list[str] = []
        while len(drawn) < count:
            if not self.s.deck:
                if not self.s.discard:
                    break
                order = self.rng.shuffled(sorted(self.s.discard))
                self.emit("discard_reshuffled", count=len(order))
                self.emit("influence_deck_ordered", cards=order)
            k = min(count - len(drawn), len(self.s.deck))
            cards = self.s.deck[:k]   # a tuple: the event is shared by content
            self.emit_values("cards_drawn", seat, k, reason)
            self.emit_values("cards_received", seat, cards)
            drawn.extend(cards)
        return len(drawn)

    def gone(self, gid: str, to: str, reason: str) -> None:
        """A gangster leaves the board (NP-C29, NP-W38, NP-W41, NP-P3); NP-V4 GANGSTER_GONE pays."""
        self.emit("gangster_removed", gangster=gid, to=to, reason=reason)
        for c in self.s.contracts:
            if c.condition == "GANGSTER_GONE" and c.gangster == gid:
                self.emit("contract_settled", id=c.id, to=c.payee, how="paid")

    @property
    def over(self) -> bool:
        return self.s.phase == Phase.OVER
