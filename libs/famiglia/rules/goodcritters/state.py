"""The whole table as frozen data (GC-S, GC-R): the step enum, offers and the State.

Per-seat fields are tuples indexed by seat. The pile is top first and holds The Fuzz! as
`FUZZ` until it turns up. Assigned loot stays on the table (in `table`, with the seat for
each card in `assignment`) until the vote hands it out (GC-A02), so it is in nobody's Stash.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from .config import Config
from .data import MAX_PLAYERS, NOBODY

T = TypeVar("T")


class Step(enum.IntEnum):
    """The steps of a round (GC-R01), numbered as the proto enum Step."""

    SHOW_LOOT = 1  # Step 1, no decision
    DISTRIBUTE = 2  # Step 2, the Boss
    ACTIONS = 3  # Step 3, open mode
    THREAT_TURNS = 4  # Step 3a, turn mode
    CARD_CHOICE = 5  # Step 3b, turn mode
    RESOLVE = 6  # Step 4, no decision
    OVER = 7


# The members as plain module constants for the hot paths: `Step.X` is a look-up through the enum
# class, several times slower than a global, and every command compares steps a few times.
SHOW_LOOT, DISTRIBUTE, ACTIONS, THREAT_TURNS, CARD_CHOICE, RESOLVE, OVER = tuple(Step)

STEP3 = frozenset({Step.ACTIONS, Step.THREAT_TURNS, Step.CARD_CHOICE})


@dataclass(frozen=True, slots=True)
class Offer:
    """A binding Payoff lying in front of `target` (GC-P07 to GC-P10)."""

    briber: int
    target: int
    side: int  # VoteSide: 1 yes, 2 no
    loot: tuple[str, ...]
    payoff_cards: int
    visibility: int  # LootVisibility: 1 open, 2 peek, 3 hidden


@dataclass(frozen=True, slots=True)
class Vote:
    """The latest vote counted (GC-V01) with what its round's Step 4 showed everyone: every Action
    card revealed (GC-H05) and the Threat markers locked for it (GC-A06). Step 4 and the clean-up
    (GC-R07) run inside the command that closes Step 3, so this is the only place where a later
    View still holds them."""

    round: int
    boss: int  # who revealed first (GC-A09): the reveal order, which a tie or a failed vote may change
    cards: tuple[int, ...]  # the revealed Action card per seat
    threats: tuple[int, ...]  # the locked Threat marker per seat, NOBODY for a marker kept
    yes: int
    no: int
    outcome: int  # VoteOutcome: 1 passed, 2 tied, 3 failed


Known = tuple[int, int, str]
"""(knower, holder, card): the knower saw `card` go into the holder's Stash by an event private
to it (GC-H10, GC-P06, GC-P15) and nothing since has made that stale. The knower is never the holder."""


@dataclass(frozen=True)
class State:
    """No slots on purpose: `replace` copies a State with one copy of its instance dict, several
    times cheaper than setting 28 slots one by one (evolve makes a State per event)."""

    config: Config
    options: tuple[tuple[str, str], ...]
    seats: int
    boss: int
    stashes: tuple[tuple[str, ...], ...]
    payoff_cards: tuple[int, ...]
    pile: tuple[str, ...] = ()
    pile_start: int = 0  # pile size with The Fuzz! after setup (GC-S11)
    round: int = 0
    # a factory, so the class keeps no `step` attribute: a class attribute whose type is mutable
    # (an enum member) stops CPython from specialising every `state.step` read (~4x slower)
    step: Step = field(default_factory=lambda: Step.SHOW_LOOT)
    turn: int = NOBODY  # Step 3a
    table: tuple[str, ...] = ()
    assignment: tuple[int, ...] = ()  # seat per table card, () before Step 2 is done
    threats: tuple[int, ...] = ()
    cards: tuple[int, ...] = ()  # chosen Action card per seat, 0 = none
    choices: tuple[int, ...] = ()
    committed: tuple[bool, ...] = ()
    changes: tuple[int, ...] = ()  # public changes this round (GC-D09)
    revealed: tuple[int, ...] = ()  # revealed Action card per seat in Step 4, 0 = face down
    offers: tuple[Offer, ...] = ()
    skims: int = 0  # Skims revealed this round
    fuzz_skimmed: bool = False  # GC-A13 in this round
    fuzz_out: bool = False  # The Fuzz! has left the pile
    fuzz_cause: int = 0
    confiscated: tuple[str, ...] = ()
    end_reason: int = 0
    last_vote: Vote | None = None  # the latest vote counted, kept until the next one
    known: tuple[Known, ...] = ()
    """What a seat saw go into another's Stash by an event private to it and knows to be there
    still (View `SeatView.known_loot`); kept across rounds, dropped once stale (evolve.py)."""

    def __post_init__(self) -> None:
        # The __init__ fills a split (key-sharing) dict, whose attribute reads CPython cannot
        # specialise (~3x slower); a State made here (setup's fold, a sampled world the bots
        # decide on many times) gets a combined copy, as every `replace` makes (see there).
        _set_state_dict(self, dict(self.__dict__))

    @property
    def over(self) -> bool:
        return self.step is OVER

    def left_of(self, seat: int) -> int:
        """GC-S02: the next seat clockwise."""
        return (seat + 1) % self.seats

    def clockwise_from(self, seat: int) -> list[int]:
        """Every seat, starting with `seat`, clockwise."""
        return [(seat + i) % self.seats for i in range(self.seats)]

    def offers_out(self, seat: int) -> int:
        return sum(1 for o in self.offers if o.briber == seat)

    def offer(self, briber: int, target: int) -> Offer | None:
        for o in self.offers:
            if o.briber == briber and o.target == target:
                return o
        return None


def put(items: tuple[T, ...], index: int, value: T) -> tuple[T, ...]:
    """The tuple with one item replaced."""
    out = list(items)
    out[index] = value
    return tuple(out)


Commitments = tuple[bool, ...]


def _commitments() -> tuple[tuple[Commitments, ...], dict[Commitments, tuple[Commitments, ...]], dict[Commitments, tuple[Commitments, ...]]]:
    """Every commitments tuple of every seat count, once, and what committing or releasing
    each seat makes of it (see COMMITTING)."""
    every = [[tuple(bool(mask >> i & 1) for i in range(n)) for mask in range(2**n)] for n in range(MAX_PLAYERS + 1)]
    on, off = {}, {}
    for n, tuples in enumerate(every):
        for mask, t in enumerate(tuples):
            on[t] = tuple(tuples[mask | 1 << i] for i in range(n))
            off[t] = tuple(tuples[mask & ~(1 << i)] for i in range(n))
    return tuple(tuples[0] for tuples in every), on, off


NONE_COMMITTED, COMMITTING, RELEASING = _commitments()
"""`NONE_COMMITTED[n]`: nobody committed at n seats; `COMMITTING[t][seat]` is the commitments
`t` with `seat` committed, `RELEASING[t][seat]` with it released, for every tuple of every
seat count. Commitments change with most commands: a look-up (one tuple hash) is cheaper than
a tuple rebuilt, and as every State's commitments then come from these same tuples (setup, a
round's clean-up, a public change, a commit), look-ups by them (`pending`) match by identity."""


def fresh_round_fields(seats: int) -> dict[str, object]:
    """GC-R07, GC-P13: what the clean-up resets for every seat."""
    return {
        "threats": (NOBODY,) * seats,
        "cards": (0,) * seats,
        "choices": (0,) * seats,
        "committed": NONE_COMMITTED[seats],
        "changes": (0,) * seats,
        "revealed": (0,) * seats,
        "offers": (),
        "skims": 0,
        "turn": NOBODY,
    }


_FIELDS = frozenset(f.name for f in fields(State))
_COUNT = len(_FIELDS)
_new = object.__new__


def replace(state: State, **changes: Any) -> State:
    """`dataclasses.replace(state, **changes)`, several times faster: evolve runs once per event,
    and the generic one walks the field list and calls the checking __init__ each time. A State
    keeps its fields in its instance dict (no slots), so a copy is one dict copy.

    `dict(...)`, not `.copy()`: a State made by its __init__ keeps its fields in a split
    (key-sharing) dict, whose copies are split too, and CPython reads an attribute of an object
    with a split dict several times slower (it cannot specialise the read: ~300 instructions
    instead of ~40). `dict` builds a combined one, and the hot evolvers' `.copy()` of a
    combined dict stays combined, so every State after the first event reads fast."""
    values = dict(state.__dict__)
    values.update(changes)
    if len(values) != _COUNT:  # a name that is no field was added
        raise TypeError(f"State has no field {sorted(set(changes) - _FIELDS)}")
    return made(values)


def made(values: dict[str, Any]) -> State:
    """A State from a copied and changed instance dict (bypassing the frozen __init__): how
    `replace` and the hot evolvers that set fields on the copy themselves end."""
    new: State = _new(State)
    _set_dict(new, values)
    return new


_set_dict = State.__dict__["__dict__"].__set__
_set_state_dict = _set_dict
"""State's own `__dict__` descriptor's setter: `object.__setattr__(new, "__dict__", ...)` looks it
up first (~450 instructions more a State)."""
