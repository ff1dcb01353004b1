"""Event constructors over the generated messages, one per kind, in the game's words.

Constructors of recurring events with a few small arguments (seats, cards, counts) are cached:
`decide` hands out shared, prebuilt events, as the engine contract allows (events are facts,
never changed after `decide` returned them). Treat every event as read-only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import cache as _cache
from operator import getitem
from typing import Any, TypeVar, cast

from famiglia.goodcritters.v1 import goodcritters_pb2 as pb

from .data import MAX_PLAYERS

Event = pb.Event
_pb: Any = pb
"""The same module, untyped: enum fields take the plain ints the engine keeps (the stubs want
their NewType). Events are built from field dicts or set in place, which is about twice as
cheap as building a sub-message and copying it into the Event."""

SHARED: dict[int, list[Any]] = {}
"""Every prebuilt (shared) event by its id: `[event, visibility, text, seen by]`, the last
three filled by `view.visibility`, `render.render_event` and `view.redact` the first time
they are asked. The command
service asks both of every event it stores and answers, and a shared event's answer never
changes (events are read-only), so it is worked out once. The entry holds the event, so its
id stays its own; events built afresh (thefts, splits, redacted or parsed copies) are not here."""

SPLITS_MADE: dict[int, tuple[Event, str, Sequence[str], Sequence[int]]] = {}
"""The last splits `decide` made (`loot_assigned`, `loot_handed_out`) by the event's id: (event,
text prefix, table, seats). Rendering a split from the message reads a dozen sub-messages
(~40k instructions); from the values it is one join. Bounded; the entry holds the event."""


def remember_split(event: Event, prefix: str, table: Sequence[str], seats: Sequence[int]) -> Event:
    if len(SPLITS_MADE) >= 64:
        SPLITS_MADE.clear()
    SPLITS_MADE[id(event)] = (event, prefix, table, seats)
    return event


_F = TypeVar("_F", bound=Callable[..., Event])


def cache(constructor: _F) -> _F:
    """`functools.cache` for event constructors that also registers each new event in SHARED."""

    def register(*args: Any, **kwargs: Any) -> Event:
        event = constructor(*args, **kwargs)
        SHARED[id(event)] = [event, None, None, None]
        return event

    cached: Any = _cache(register)
    cached.__doc__, cached.__name__ = constructor.__doc__, constructor.__name__
    return cast(_F, cached)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def length_delimited(tag: bytes, body: bytes) -> bytes:
    """One message field in the protobuf wire format: its tag, the body's length, the body."""
    return tag + _varint(len(body)) + body


_PAIR_WIRE: dict[tuple[str, int], bytes] = {}


def pairs_wire(pairs: Iterable[tuple[str, int]]) -> bytes:
    """(card, seat) pairs as the wire form of `repeated LootAssignment ... = 1`. A split of the
    table is a dozen small messages; parsing their bytes once (upb, in C) is several times
    cheaper than adding and setting each from Python, and each pair's bytes are made once."""
    pairs = pairs if isinstance(pairs, list) else list(pairs)
    try:
        return b"".join(map(_PAIR_WIRE.__getitem__, pairs))
    except KeyError:
        if len(_PAIR_WIRE) >= 4096:
            _PAIR_WIRE.clear()
        for card, seat in pairs:
            item = _pb.LootAssignment(card=card, seat=seat).SerializeToString()
            _PAIR_WIRE[card, seat] = length_delimited(b"\x0a", item)
        return b"".join(map(_PAIR_WIRE.__getitem__, pairs))


@_cache
def card_row(card: str) -> tuple[bytes, ...]:
    """The wire form of `LootAssignment(card, seat)` for every seat, as `pairs_wire` makes it."""
    out = []
    for seat in range(MAX_PLAYERS):
        item = _pb.LootAssignment(card=card, seat=seat).SerializeToString()
        out.append(length_delimited(b"\x0a", item))
    return tuple(out)


def split_wire(table: Sequence[str], seats: Sequence[int]) -> bytes:
    """`pairs_wire(zip(table, seats))` for engine-made splits (every seat below MAX_PLAYERS):
    one look-up per card and one per seat, in C."""
    return b"".join(map(getitem, map(card_row, table), seats))


def body_length(body: bytes) -> bytes:
    """The length prefix of a message field's body (one byte below 128)."""
    n = len(body)
    return _ONE_BYTE[n] if n < 128 else _varint(n)


_ONE_BYTE = tuple(bytes((n,)) for n in range(128))


# -- events ---------------------------------------------------------------------------------


def game_set_up(seats: int, options: Sequence[tuple[str, str]], first_boss: int) -> Event:
    opts = [_pb.OptionValue(key=k, value=v) for k, v in options]
    return _pb.Event(game_set_up={"seats": seats, "options": opts, "first_boss": first_boss})


def stash_dealt(seat: int, cards: Sequence[str]) -> Event:
    return _pb.Event(stash_dealt={"seat": seat, "cards": cards, "count": len(cards)})


def pile_stacked(cards: Sequence[str], fuzz_position: int) -> Event:
    return _pb.Event(pile_stacked={"cards": cards, "fuzz_position": fuzz_position})


@cache
def round_started(round_: int, boss: int, step: int) -> Event:
    return _pb.Event(round_started={"round": round_, "boss": boss, "step": step})


@cache
def step_started(step: int, turn: int = -1) -> Event:
    return _pb.Event(step_started={"step": step, "turn": turn})


@cache
def loot_revealed(card: str) -> Event:
    e = Event()
    e.loot_revealed.card = card
    return e


@cache
def fuzz_revealed(cause: int) -> Event:
    return _pb.Event(fuzz_revealed={"cause": cause})


def loot_assigned(pairs: Iterable[tuple[str, int]]) -> Event:
    return loot_assigned_wire(pairs_wire(pairs))


def loot_assigned_wire(body: bytes) -> Event:
    """`loot_assigned` from its pairs' wire form (`pairs_wire`, `split_wire`)."""
    return Event.FromString(b"\x42" + body_length(body) + body)  # Event field 8


@cache
def threat_placed(seat: int, target: int) -> Event:
    e = Event()
    body = e.threat_placed
    body.seat = seat
    body.target = target
    return e


@cache
def threat_withdrawn(seat: int) -> Event:
    return _pb.Event(threat_withdrawn={"seat": seat})


@cache
def action_card_chosen(seat: int, card: int, choices: int) -> Event:
    e = Event()
    body: Any = e.action_card_chosen
    body.seat = seat
    body.card = card
    body.choices = choices
    return e


@cache
def committed(seat: int) -> Event:
    e = Event()
    e.committed.seat = seat
    return e


@cache
def turn_ended(seat: int) -> Event:
    return _pb.Event(turn_ended={"seat": seat})


@cache
def actions_locked() -> Event:
    return _pb.Event(actions_locked={})


@cache
def action_revealed(seat: int, card: int, out_of_turn: bool = False) -> Event:
    e = Event()
    body: Any = e.action_revealed
    body.seat = seat
    body.card = card
    body.out_of_turn = out_of_turn
    return e


def loot_skimmed(seat: int, card: str) -> Event:
    return _pb.Event(loot_skimmed={"seat": seat, "card": card})


@cache
def skim_came_up_empty(seat: int) -> Event:
    return _pb.Event(skim_came_up_empty={"seat": seat})


def loot_stolen(thief: int, victim: int, card: str, cause: int) -> Event:
    return _pb.Event(
        loot_stolen=_pb.LootStolen(thief=thief, victim=victim, card=card, cause=cause, nothing=not card)
    )


@cache
def vote_counted(yes: int, no: int, outcome: int) -> Event:
    return _pb.Event(vote_counted={"yes": yes, "no": no, "outcome": outcome})


def loot_handed_out(pairs: Iterable[tuple[str, int]]) -> Event:
    return loot_handed_out_wire(pairs_wire(pairs))


def loot_handed_out_wire(body: bytes) -> Event:
    return Event.FromString(b"\xa2\x01" + body_length(body) + body)  # Event field 20


@cache
def loot_returned() -> Event:
    return _pb.Event(loot_returned={})


@cache
def boss_changed(boss: int, reason: int) -> Event:
    return _pb.Event(boss_changed={"boss": boss, "reason": reason})


@cache
def round_ended(round_: int) -> Event:
    return _pb.Event(round_ended={"round": round_})


def loot_confiscated(cards: Sequence[str]) -> Event:
    return _pb.Event(loot_confiscated={"cards": cards})


@cache
def game_ended(reason: int) -> Event:
    return _pb.Event(game_ended={"reason": reason})


def stashes_revealed(stashes: Sequence[Sequence[str]], pile: Sequence[str]) -> Event:
    return _pb.Event(
        stashes_revealed=_pb.StashesRevealed(
            stashes=[_pb.SeatStash(seat=i, cards=cards) for i, cards in enumerate(stashes)], pile=pile
        )
    )


def gift_given(giver: int, receiver: int, loot: Sequence[str], payoff_cards: int, open_: bool) -> Event:
    return _pb.Event(
        gift_given=_pb.GiftGiven(
            giver=giver,
            receiver=receiver,
            loot=loot,
            loot_count=len(loot),
            payoff_cards=payoff_cards,
            open=open_,
        )
    )


def offer_made(
    briber: int, target: int, side: int, loot: Sequence[str], payoff_cards: int, visibility: int
) -> Event:
    return _pb.Event(
        offer_made=_pb.OfferMade(
            briber=briber,
            target=target,
            side=side,
            loot=loot,
            loot_count=len(loot),
            payoff_cards=payoff_cards,
            visibility=visibility,
        )
    )


@cache
def offer_withdrawn(briber: int, target: int) -> Event:
    return _pb.Event(offer_withdrawn={"briber": briber, "target": target})


def offer_resolved(
    briber: int, target: int, receiver: int, loot: Sequence[str], payoff_cards: int, visibility: int
) -> Event:
    return _pb.Event(
        offer_resolved=_pb.OfferResolved(
            briber=briber,
            target=target,
            receiver=receiver,
            loot=loot,
            loot_count=len(loot),
            payoff_cards=payoff_cards,
            visibility=visibility,
            paid=receiver == target,
        )
    )
