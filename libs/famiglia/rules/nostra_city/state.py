"""The whole Nostra City table as frozen data (STYLE: tuples, frozensets, `replace`).

Decks are tuples with the top card first. Banks and hands are kept sorted so that
equal states iterate equally (decide must not depend on set order).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from typing import Any, TypeVar

from famiglia.engine.records import dict_copier, dict_setter, tuple_placer

from .config import Config


class Phase(enum.StrEnum):
    SETUP = "setup"
    BUSINESS = "business"  # NC-B
    MEETING = "meeting"  # NC-M01..M04
    RESOLUTION = "resolution"  # NC-M05..M16
    TRIAL = "trial"  # NC-T
    RECEPTION = "reception"  # NC-C
    VERDICT = "verdict"  # NC-V
    OVER = "over"


TURN_PHASES = (Phase.BUSINESS, Phase.MEETING, Phase.TRIAL)


@dataclass(frozen=True)
class Seat:
    """One player's holdings. Not slotted on purpose: `replace` copies its __dict__ (hot path)."""

    wiseguys: tuple[str, ...] = ()
    turfs: tuple[str, ...] = ()  # Atlantic City ("AC") included
    busy: frozenset[str] = frozenset()
    bank: tuple[int, ...] = ()  # sorted Note ids (NC-H02)
    hand: tuple[str, ...] = ()  # sorted Vendetta card ids (NC-H08)
    trophies: tuple[str, ...] = ()  # Respect, Investigations, Titles, ZC, Bonus cards
    locations: tuple[int, ...] = (1, 2, 3, 4)  # unused Location cards (NC-K60)
    vendetta_drawn: int = 0  # NC-K23
    corrupted: tuple[int, ...] = ()  # Notes this seat put on the pile from its Bank (NC-H17)
    corruption_count: int = 0  # Notes put on the pile, all months (NC-H01)
    corruption_actions: int = 0  # in this Trial (NC-T02, NC-K15 I6)
    cashins: tuple[str, ...] = ()  # declared types used in this Business (NC-B14)
    peeked: tuple[int, ...] = ()  # NC-W114
    # (another seat, a Note of this Bank) that seat knows is here: it gave it (NC-H03) or had it
    # stolen (NC-H14); dropped when this Bank loses Notes that seat does not see go
    known_by: tuple[tuple[int, int], ...] = ()
    # known_by as it was before this seat's sealed bids of the Meeting: each Note may be in a bid
    # (NC-H04), so it is shown to nobody; a shown bid (NC-H06) rules its own Notes out, a bid never
    # shown (NC-M07) makes all of it unknown, and once every bid is resolved the rest is known again
    known_before_bids: tuple[tuple[int, int], ...] = ()


_C = TypeVar("_C", bound=type)


def _dict_init(cls: _C) -> _C:
    """Give a small frozen dataclass an __init__ that hands it its whole instance dict at once:
    the generated one calls object.__setattr__ per field (a C call with a tuple of arguments
    each), and evolve makes a Bid, Choice or Draw for many events. Same parameters and
    defaults as the dataclass's own."""
    env: dict[str, Any] = {"set_dict": dict_setter(cls)}
    params, values = ["self"], []
    for i, f in enumerate(fields(cls)):
        if f.default_factory is not MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: default factories are not supported")
        if f.default is MISSING:
            params.append(f.name)
        else:
            env[f"d{i}"] = f.default
            params.append(f"{f.name}=d{i}")
        values.append(f"{f.name!r}: {f.name}")
    source = f"def __init__({', '.join(params)}) -> None:\n    set_dict(self, {{{', '.join(values)}}})"
    exec(source, env)  # noqa: S102 - generated from the dataclass fields only
    cls.__init__ = env["__init__"]  # type: ignore[misc]
    return cls


# Seat too, for another reason: the generated __init__ fills a split (key-sharing)
# instance dict, whose copies (`replace`) stay split, and CPython cannot specialise attribute
# reads on those (~3x slower for every `s.x` in every engine call); a dict literal is combined.
_dict_init(Seat)


@_dict_init
@dataclass(frozen=True)
class Bid:
    seat: int
    wiseguy: str
    count: int
    location: int = 0
    notes: tuple[int, ...] = ()  # in placement order (NC-D09)


@_dict_init
@dataclass(frozen=True)
class Choice:
    """A decision inside a phase turn or a resolution (NC-D05, D06, D09..D11)."""

    kind: str  # distribute, keep, consigliere, primo_capo, rage
    seat: int
    shares: tuple[int, ...] = ()
    notes: tuple[int, ...] = ()  # drawn Notes (distribute) or the bid's Notes (keep)
    card: str = ""  # rage card
    cause: int = -1  # rage: the player who caused the draw, -1 = drawer chooses
    wiseguy: str = ""  # the acting Wiseguy of the cash-in (W18)
    declared: str = ""
    keep: int = 1  # keep: how many Notes (W08)


@_dict_init
@dataclass(frozen=True)
class Draw:
    seat: int
    count: int
    cause: int  # NC-K48: the active player of a cash-in, -1 for Meeting draws


@dataclass(frozen=True)
class State:
    """The whole table. Not slotted on purpose: `replace` copies its __dict__ in one call, where a
    slotted copy reads and writes every one of the 34 fields (the hot path of evolve)."""

    config: Config
    options: tuple[tuple[str, str], ...]
    seats: int
    players: tuple[Seat, ...]
    month: int = 1
    phase: Phase = Phase.SETUP
    order: tuple[int, ...] = ()
    turn: int = 0  # index into order
    turn_acted: bool = False  # NC-K47: Revenge only before the first action
    first_player: int = -1
    first_player_moved: bool = False  # NC-B13
    verdict: int = 0  # NC-V03
    street: tuple[str, ...] = ("", "", "", "")
    street_deck: tuple[str, ...] = ()
    set_aside: tuple[str, ...] = ()  # NC-S07/S08
    removed: tuple[str, ...] = ()  # cards out of the game
    note_deck: tuple[int, ...] = ()
    note_discard: tuple[int, ...] = ()
    vendetta_deck: tuple[str, ...] = ()
    vendetta_discard: tuple[str, ...] = ()
    vendetta_reshuffled: tuple[str, ...] = ()  # NC-K55: the discard the last reshuffle made the deck, sorted
    pile: tuple[tuple[int, int], ...] = ()  # Corruption Pile: (note, the seat that placed it, W12's too)
    bids: tuple[Bid, ...] = ()
    locations_revealed: bool = False
    # NC-H06: the bids shown to all in this Meeting's resolution (until the next Meeting):
    # (space, seat, wiseguy, its Notes, its value with W07's bonus), in the order shown
    shown_bids: tuple[tuple[int, int, str, tuple[int, ...], int], ...] = ()
    resolution: int = 0  # next Street space to resolve (1..4), 5 = spaces done
    meeting_winners: frozenset[int] = frozenset()
    meeting_bidders: frozenset[int] = frozenset()
    choice: Choice | None = None
    draws: tuple[Draw, ...] = ()
    underboss: str = "later"  # later, waiting, street, won
    titles: tuple[tuple[str, int], ...] = ()  # (title, seat)
    zealous_left: tuple[str, ...] = ("ZC1", "ZC2", "ZC3")
    w13_spent: bool = False
    verdict_result: str = ""
    snitches: tuple[int, ...] = ()

    @property
    def turn_seat(self) -> int:
        """The seat whose phase turn it is, or -1."""
        if self.phase in TURN_PHASES and self.turn < len(self.order):  # (an enum's members read once)
            return self.order[self.turn]
        return -1

    def title_of(self, seat: int) -> str:
        for title, holder in self.titles:
            if holder == seat:
                return title
        return ""

    def holder(self, title: str) -> int:
        for t, holder in self.titles:
            if t == title:
                return holder
        return -1


NEXT = "_next"
"""The key of `evolve.remember`'s fold link: it belongs to the state it was set on, never to a copy."""


changed: Callable[[State, dict[str, Any]], State] = dict_copier(State, drop=NEXT)
"""`replace(state, **changes)` with the changes already in a dict: evolve gathers every change
an event makes and copies the table once (one copy per event, not one per change)."""

seat_changed: Callable[[Seat, dict[str, Any]], Seat] = dict_copier(Seat)
"""`changed` for one player's holdings."""


seat_in: Callable[[tuple[Seat, ...], int, dict[str, Any]], tuple[Seat, ...]] = tuple_placer(Seat)
"""The players with one seat's holdings changed."""

_COPIERS: dict[type, Callable[..., Any]] = {State: changed, Seat: seat_changed,
                                             **{cls: dict_copier(cls) for cls in (Bid, Choice, Draw)}}


def replace(obj: Any, **changes: Any) -> Any:
    """`dataclasses.replace` for the state classes, several times faster (hot path of evolve)."""
    return _COPIERS[type(obj)](obj, changes)
