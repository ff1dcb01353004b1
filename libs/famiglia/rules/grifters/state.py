"""The whole Grifters table as frozen data (GR-S13, GR-R03, GR-C03, GR-D03).

Hands are kept in canonical card order (GR-K02), so two states holding the same cards compare
equal. A Night space holds one group: a card, a Team (2 or more cards) or a token (GR-R15).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from .config import Config
from .data import CARD_ORDER

# -- phases of a turn (GR-R02) and the end: Phase 1 and Phase 3 happen inside single events
# (TurnBegan, CardsRefreshed), so at rest a running game is always in Phase 2 ----------------------
PLAY = "play"
OVER = "over"

# -- open decisions (GR-D02, GR-D03) ---------------------------------------------------------------------
NONE = ""
OPPONENT = "opponent"  # Pickpocket, Enforcer, a reward "from one opponent"
KEEP = "keep"  # Mastermind
ABDUCT = "abduct"  # Inside Man
KIDNAP = "kidnap"  # Kidnapper
HIT = "hit"  # Hitman
JOB_SWAP = "job_swap"  # Forger
NIGHT = "night"  # Fixer
PARTNER = "partner"  # Thug
COPY = "copy"  # Fall Guy
SECOND = "second_caper"  # Femme Fatale
CHOICES = (OPPONENT, KEEP, ABDUCT, KIDNAP, HIT, JOB_SWAP, NIGHT, PARTNER, COPY, SECOND)
OPTIONAL_CHOICES = frozenset({JOB_SWAP, SECOND})  # GR-D04: declining is an option
HIDDEN_OPTION_CHOICES = frozenset({KEEP, PARTNER, COPY, SECOND})  # GR-H09: options name hand cards

EMPTY_NIGHTS: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] = ((), (), ())
NO_TOKENS = (False, False, False)


def in_hand_order(cards: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Canonical card order (GR-K02, GR-D05)."""
    return tuple(sorted(cards, key=CARD_ORDER.__getitem__))


@dataclass(frozen=True)
class Player:
    """No slots, like State: `replace_player` copies the instance dict with two C calls, where a
    slotted copy called a slot setter (a tuple-args C call) for each of the eight fields."""

    hand: tuple[str, ...] = ()
    nights: tuple[tuple[str, ...], ...] = EMPTY_NIGHTS  # Night One, Two, Three
    tokens: tuple[bool, ...] = NO_TOKENS  # an ISK token on that Night (GR-R07)
    refresh: tuple[str, ...] = ()
    in_play: tuple[str, ...] = ()  # GR-C03
    stash: int = 0
    jobs: tuple[str, ...] = ()  # Job area
    had_turn: bool = False

    def owned_cards(self) -> tuple[str, ...]:
        """Every card this player owns (GR-C13)."""
        out = list(self.hand) + list(self.refresh) + list(self.in_play)
        for group in self.nights:
            out.extend(group)
        return tuple(out)


@dataclass(frozen=True)
class Caper:
    """The caper text being resolved (GR-C05). Nesting is always the last part of a text
    (GR-C12: the Inside Man's abducted card, the Femme Fatale's second caper, a copied caper),
    so a nested caper replaces its parent here. No slots, for the reason Player has none."""

    card: str  # "this card" (GR-C11); "" while a Job's reward is paid
    code: str  # effect code, or "reward"
    job: str = ""
    step: int = 0  # the reward part to resume at (GR-J06 step 3)
    drawn: tuple[str, ...] = ()  # cards drawn by this caper (GR-K04)


@dataclass(frozen=True)
class State:
    """No slots on purpose: `replace_state` copies a State with one copy of its instance dict,
    several times cheaper than setting 22 slots one by one (evolve makes a State per event)."""

    config: Config
    options: tuple[tuple[str, str], ...]
    seats: int
    first_player: int
    players: tuple[Player, ...]
    coffers: int
    out_of_play: int
    stacks: tuple[tuple[str, tuple[str, ...]], ...]  # (colour, jobs top first)
    deck: tuple[str, ...] = ()  # top first
    discard: tuple[str, ...] = ()  # bottom first
    active: int = 0
    round: int = 0
    turn: int = 0
    phase: str = PLAY
    played: bool = False  # Phase 2's play happened (caper, Job, token)
    caper: Caper | None = None
    choice: str = NONE
    use_defaults: bool = False  # GR-D06: this caper's follow-ups take their defaults
    swapped_in: frozenset[str] = field(default_factory=frozenset)  # GR-X21
    locked: frozenset[str] = field(default_factory=frozenset)  # copied cards stay in hand (GR-K20)
    over: bool = False
    end_reason: str = ""

    def opponents(self, seat: int) -> tuple[int, ...]:
        """Seat order from `seat`'s left (GR-S02)."""
        return tuple((seat + k) % self.seats for k in range(1, self.seats))

    def available_jobs(self) -> tuple[str, ...]:
        """The top card of every stack in play (GR-J01)."""
        return tuple(jobs[0] for _, jobs in self.stacks if jobs)


# -- a fast `dataclasses.replace` for these classes ---------------------------------------------------------
T = TypeVar("T")


def _dict_setter(cls: type) -> Callable[[Any, dict[str, Any]], None]:
    """The class's own `__dict__` setter: called straight, it skips the attribute look-up that
    `object.__setattr__(obj, "__dict__", d)` makes on every copy."""
    for klass in cls.__mro__:
        if "__dict__" in klass.__dict__:
            return klass.__dict__["__dict__"].__set__  # type: ignore[no-any-return]
    raise TypeError(f"{cls.__name__} instances have no __dict__")


def _make_copiers(cls: type) -> tuple[Callable[[Any, dict[str, Any]], Any], Callable[..., Any]]:
    """`dataclasses.replace` without its generic checks (evolve runs one for every event, twice per
    event in random play): one copy of the instance dict, updated, given to a bare instance. The
    classes have no slots for this: a slotted copy sets every field through its own C call.
    Two forms: the changes in a dict (evolve's: no keyword arguments to bind) or as keywords."""
    if "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__} has slots: its fields are not in an instance dict")
    known = frozenset(f.name for f in fields(cls))
    count = len(known)
    new = object.__new__
    set_dict = _dict_setter(cls)

    def copy_with(o: Any, changes: dict[str, Any]) -> Any:
        values = o.__dict__.copy()
        values.update(changes)
        if len(values) != count:  # a name that is no field was added
            raise TypeError(f"{cls.__name__} has no field {sorted(set(changes) - known)}")
        n: Any = new(cls)
        set_dict(n, values)
        return n

    def replace_dict(o: Any, **changes: Any) -> Any:
        values = o.__dict__.copy()
        values.update(changes)
        if len(values) != count:
            raise TypeError(f"{cls.__name__} has no field {sorted(set(changes) - known)}")
        n: Any = new(cls)
        set_dict(n, values)
        return n

    return copy_with, replace_dict


_COPIERS: dict[type, tuple[Callable[[Any, dict[str, Any]], Any], Callable[..., Any]]] = {
    cls: _make_copiers(cls) for cls in (Player, Caper, State)}
player_with: Callable[[Player, dict[str, Any]], Player] = _COPIERS[Player][0]
caper_with: Callable[[Caper, dict[str, Any]], Caper] = _COPIERS[Caper][0]
state_with: Callable[[State, dict[str, Any]], State] = _COPIERS[State][0]


def _player_placer() -> Callable[[tuple[Player, ...], int, dict[str, Any]], tuple[Player, ...]]:
    """`player_with` and the new players tuple in one call (most events change one player)."""
    names = frozenset(f.name for f in fields(Player))
    count = len(names)
    new, set_dict = object.__new__, _dict_setter(Player)

    def player_in(players: tuple[Player, ...], seat: int, changes: dict[str, Any]) -> tuple[Player, ...]:
        values = players[seat].__dict__.copy()
        values.update(changes)
        if len(values) != count:
            raise TypeError(f"Player has no field {sorted(set(changes) - names)}")
        player: Player = new(Player)
        set_dict(player, values)
        out = list(players)
        out[seat] = player
        return tuple(out)

    return player_in


player_in = _player_placer()
"""The players with one player's fields changed."""
replace_player: Callable[..., Player] = _COPIERS[Player][1]
replace_caper: Callable[..., Caper] = _COPIERS[Caper][1]
replace_state: Callable[..., State] = _COPIERS[State][1]


def evolved(obj: T, **changes: Any) -> T:
    """`obj` with `changes`: like `dataclasses.replace`, for Player, Caper and State."""
    return _COPIERS[type(obj)][0](obj, changes)  # type: ignore[no-any-return]
