"""The whole Nothing Personal table as frozen data (NP-S, NP-R); equality comes free for fold tests.

Spots: index 0..8 are positions 1..9, index 9..11 the Associate slots A1..A3 (NP Terms).
Per-gangster marker state is a tuple indexed like `data.GANGSTERS`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, NamedTuple

from .config import Config


class Phase:
    """NP-R1: the six phases of a round, plus setup and the end."""

    SETUP = "setup"
    COMMISSION = "commission"
    CREW = "crew"
    FENCE = "fence"
    FEDS = "feds"
    FAMILY = "family"
    FINAL = "final"
    OVER = "over"


SPOTS = 12
A_SLOTS = (9, 10, 11)


@dataclass(frozen=True, slots=True)
class GState:
    """Markers on one gangster: family markers per seat, neutral markers, coins, orientation."""

    markers: tuple[int, ...]
    neutral: int = 0
    coin: int = -1          # owner seat of the blackmail coin (its marker is one of that seat's), -1 none
    omerta: bool = False
    sideways: bool = False

    @property
    def total(self) -> int:
        return sum(self.markers) + self.neutral


class Window(NamedTuple):
    """A card or reroll window answer round (NP-D5, NP-D6): answers per seat, None = not yet.

    Named tuples (this and `Ruling`), not frozen dataclasses: one is made for every answer, and a
    tuple is made in one call."""

    kind: str                            # "card" | "reroll"
    seats: tuple[int, ...]               # asked in this answer round
    answers: tuple[bytes | None, ...]    # per seat: None unanswered, b"" pass, else a serialized Command
    auto: tuple[int, ...] = ()           # of `seats`, those whose standing auto-pass (NP-D7) was on at opening


@dataclass(frozen=True, slots=True)
class Roll:
    """A die whose reroll window is open (NP-R5); resolved once the window closes."""

    die: str
    face: str
    purpose: str          # move | whack | dice_money | dice_respect | double
    actor: int
    gangster: str         # the acting gangster
    target: str = ""      # whack target
    target_pos: int = 0   # move target position
    free_whack_used: bool = False


class Ruling(NamedTuple):
    """A tie ruling asked of the ring holder (NP-W4, NP-D9); `answer` -1 until given."""

    gangster: str
    seats: tuple[int, ...]
    use: str
    answer: int = -1


@dataclass(frozen=True, slots=True)
class Act:
    """A Crew action turn (NP-W14, NP-W18): stage 0 choosing, 1 waiting for blackmail permission."""

    position: int
    gangster: str
    seat: int
    refusals: int = 0
    proposal: bytes = b""
    stage: int = 0


@dataclass(frozen=True, slots=True)
class Invite:
    seat: int
    by: int


@dataclass(frozen=True, slots=True)
class Vacancy:
    spot: int
    decider: int
    candidates: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Offer:
    id: int
    frm: int
    to: int
    deal: bytes           # serialized OfferDeal


class Known(NamedTuple):
    """A card `seat` knows `holder` to hold, from a private event only the two saw (NP-H7, NP-M8).

    `how`: "gave" (`seat` traded it to `holder`) or "offered" (`holder` offered it to `seat`; an
    offer holds only cards its maker holds). Kept only while the game has not made it stale
    (`evolve.forget`): the View must show it after a reconnect, as the event no longer can."""

    seat: int
    holder: int
    card: str
    how: str


@dataclass(frozen=True, slots=True)
class Contract:
    id: int
    payer: int
    payee: int
    amount: int
    condition: str
    gangster: str
    seat: int
    action: str
    target: str
    deadline: int


@dataclass(frozen=True)
class State:
    """The whole table. Frozen; not slotted on purpose: `replace` copies its __dict__ (the hot path)."""

    n: int
    cfg: Config
    round: int = 0
    phase: str = Phase.SETUP
    stage: str = ""
    ring: int = 0
    respect: tuple[int, ...] = ()
    money: tuple[int, ...] = ()
    supply: tuple[int, ...] = ()
    neutral: int = 25
    bm_free: int = 8
    om_free: int = 2
    board: tuple[str, ...] = ("",) * SPOTS
    gs: tuple[GState, ...] = ()
    prison: tuple[str, ...] = ()
    fishes: tuple[str, ...] = ()
    hands: tuple[tuple[str, ...], ...] = ()
    deck: tuple[str, ...] = ()
    discard: tuple[str, ...] = ()
    table: tuple[str, ...] = ()       # played cards until resolved (NP-C15)
    gdeck: tuple[str, ...] = ()
    tokens: tuple[int, ...] = ()
    # flow (NP-R, NP-C, NP-W, NP-F, NP-Y, NP-E)
    order: tuple[int, ...] = ()
    idx: int = 0
    turn: int = -1
    passed: frozenset[int] = frozenset()
    had_turn: frozenset[int] = frozenset()
    ante: int = 0
    nonpass: tuple[int, ...] = ()
    sweep: int = 0
    pos: int = 0
    promoted: frozenset[str] = frozenset()
    free_used: frozenset[str] = frozenset()
    fence_counts: tuple[int, ...] = ()
    window: Window | None = None
    roll: Roll | None = None
    ruling: Ruling | None = None
    act: Act | None = None
    invite: Invite | None = None
    vacancy: Vacancy | None = None
    # negotiation (NP-M)
    offers: tuple[Offer, ...] = ()
    offers_made: tuple[int, ...] = ()
    chats_made: tuple[int, ...] = ()
    ap_changes: tuple[int, ...] = ()
    autopass: tuple[tuple[bool, bool], ...] = ()
    contracts: tuple[Contract, ...] = ()
    broken: frozenset[int] = frozenset()
    ranking: tuple[int, ...] = ()
    roll_offs: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()   # NP-T7: (seats, their rolls)
    known: tuple[Known, ...] = ()   # what each seat knows of other hands (NP-H7, NP-M8), oldest first


_FIELDS: dict[type, tuple[str, ...]] = {}
_NFIELDS = len(fields(State))
_set = object.__setattr__
_new = object.__new__


def replace(obj: Any, **changes: Any) -> Any:
    """`dataclasses.replace` for these frozen slotted classes, without re-running __init__ (hot path)."""
    cls = obj.__class__
    if cls is State:
        d = obj.__dict__.copy()   # a plain dict copy: far cheaper than filling a fresh instance dict
        d.update(changes)
        d.pop("_memo", None)   # flow.decision's memo belongs to the old state
        d.pop("_next", None)   # and so does its fold link (tx.NEXT)
        new = _new(State)
        _set(new, "__dict__", d)
        return new
    if cls is Window or cls is Ruling:   # the named tuples
        return obj._replace(**changes)
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in fields(cls))
    new = object.__new__(cls)
    for name in names:
        _set(new, name, changes[name] if name in changes else getattr(obj, name))
    return new


def draft(s: State) -> tuple[State, dict[str, Any]]:
    """A copy of `s` (memo and fold link dropped) and its field dict, which the hottest evolvers fill
    before anyone sees the state: `replace` without keyword arguments, in one call per event."""
    d = s.__dict__.copy()
    if len(d) > _NFIELDS:   # only then a memo or a fold link to drop (most often the memo alone)
        d.pop("_memo", None)
        if len(d) > _NFIELDS:
            d.pop("_next", None)
    new = _new(State)
    _set(new, "__dict__", d)
    return new, d
