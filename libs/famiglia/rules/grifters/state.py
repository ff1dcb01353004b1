"""The whole Grifters table as frozen data (GR-S13, GR-R03, GR-C03, GR-D03).

Hands are kept in canonical card order (GR-K02), so two states holding the same cards compare
equal. A Night space holds one group: a card, a Team (2 or more cards) or a token (GR-R15).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from famiglia.engine.records import dict_copier, dict_setter, tuple_placer

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
    several times cheaper than setting 23 slots one by one (evolve makes a State per event)."""

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
    reshuffled: tuple[str, ...] = ()  # the cards the last reshuffle put into the deck, canonical order (GR-H05)
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


# A record made by its generated __init__ keeps its fields in a split (key-sharing) instance dict, and
# every copy (`dict.copy`, below) stays split: CPython cannot specialise attribute reads on those (~3x
# slower for every `s.x` in every engine call). Each class's __init__ hands it one combined dict instead.
def _combined_init(cls: type) -> None:
    generated, set_dict = cls.__init__, dict_setter(cls)  # type: ignore[misc]

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        generated(self, *args, **kwargs)
        set_dict(self, dict(self.__dict__))

    __init__.__doc__ = generated.__doc__
    cls.__init__ = __init__  # type: ignore[misc]


for _cls in (Player, Caper, State):
    _combined_init(_cls)


# -- a fast `dataclasses.replace` for these classes ---------------------------------------------------------
T = TypeVar("T")


def _keywords(copy_with: Callable[[Any, dict[str, Any]], Any]) -> Callable[..., Any]:
    """The keyword form of a copier (`dataclasses.replace`'s), for code off evolve's hot path."""
    def replace(o: Any, **changes: Any) -> Any:
        return copy_with(o, changes)
    return replace


# evolve copies one of these for every event (twice per event in random play): no generic checks.
_COPIERS: dict[type, Callable[[Any, dict[str, Any]], Any]] = {cls: dict_copier(cls) for cls in (Player, Caper, State)}
player_with: Callable[[Player, dict[str, Any]], Player] = _COPIERS[Player]
caper_with: Callable[[Caper, dict[str, Any]], Caper] = _COPIERS[Caper]
state_with: Callable[[State, dict[str, Any]], State] = _COPIERS[State]
player_in: Callable[[tuple[Player, ...], int, dict[str, Any]], tuple[Player, ...]] = tuple_placer(Player)
"""The players with one player's fields changed."""
replace_player: Callable[..., Player] = _keywords(player_with)
replace_caper: Callable[..., Caper] = _keywords(caper_with)
replace_state: Callable[..., State] = _keywords(state_with)


def evolved(obj: T, **changes: Any) -> T:
    """`obj` with `changes`: like `dataclasses.replace`, for Player, Caper and State."""
    return _COPIERS[type(obj)](obj, changes)  # type: ignore[no-any-return]
