"""The Decider contract every game implements (DESIGN.md, "Engine contract").

The command service, bots, replays and tests use only this protocol. An engine is
pure: standard library and generated protos only. States are frozen dataclasses;
commands, events and views are the game's own proto messages (`Command`,
`Event`, `View` in `famiglia.<game>.v1`), each a `oneof kind`.

Lifecycle of a match::

    events = engine.setup(MatchConfig(seats, options), seed)
    state  = fold(engine, events)                # evolve(None, first) creates the state
    while engine.result(state) is None:
        for p in engine.pending(state): ...      # who must act, what kind of decision
        cmds   = engine.legal_commands(state, seat)
        events = engine.decide(state, seat, cmd, Rng.derive(seed, version))
        state  = fold(engine, events, state)

`decide` raises `RuleViolation(code, message)` with a rule id for every refusal.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, TypeVar, runtime_checkable

from google.protobuf.message import Message

from .errors import RuleViolation
from .rng import Rng

State: TypeAlias = Any
Command: TypeAlias = Message
Event: TypeAlias = Message
View: TypeAlias = Message
T = TypeVar("T")

SPECTATOR: None = None
"""The viewer that is no seat: sees public information only."""


Draws: TypeAlias = random.Random
"""The generator a compound choice is drawn with (`legal_commands`'s `rng`): one the caller
seeds, never the `random` module's shared one, which rules modules do not touch."""


def draw_in_order(items: Sequence[T], k: int, rng: Draws) -> list[T]:
    """`k` of `items` drawn uniformly, kept in their order: how a listing longer than its limit
    is cut when drawing (`legal_commands`'s `rng`), so that any item can come up."""
    if k >= len(items):
        return list(items)
    return [items[i] for i in sorted(rng.sample(range(len(items)), max(k, 0)))]


class Sampled(list):  # type: ignore[type-arg]
    """A `legal_commands` answer that is a sample of a compound choice, not every legal
    command: `decide` accepts the others too, and a client may compose them from its view."""

    __slots__ = ()


class DecisionKind(enum.IntEnum):
    """Mirrors famiglia.v1.DecisionKind."""

    TURN = 1
    RESPONSE = 2
    SECRET_CHOICE = 3
    TIE_BREAK = 4
    DISTRIBUTION = 5


@dataclass(frozen=True, slots=True)
class Pending:
    """One seat that must act now.

    `private`: whether this seat is asked depends on its hidden cards (a "play
    anytime" window); only that seat may learn that it is being asked.
    `timeout_seconds` is the human turn clock for this decision (0 = none).
    """

    seat: int
    kind: DecisionKind
    label: str = ""
    private: bool = False
    timeout_seconds: float = 0.0


class VisibilityKind(enum.IntEnum):
    """Mirrors famiglia.v1.VisibilityKind."""

    PUBLIC = 1
    PRIVATE = 2
    SERVER = 3


@dataclass(frozen=True, slots=True)
class Visibility:
    kind: VisibilityKind
    seats: frozenset[int] = frozenset()

    def allows(self, viewer: int | None) -> bool:
        if self.kind is VisibilityKind.PUBLIC:
            return True
        if self.kind is VisibilityKind.PRIVATE:
            return viewer is not None and viewer in self.seats
        return False


PUBLIC = Visibility(VisibilityKind.PUBLIC)
SERVER_ONLY = Visibility(VisibilityKind.SERVER)


def private_to(*seats: int) -> Visibility:
    return Visibility(VisibilityKind.PRIVATE, frozenset(seats))


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One match option: key, default, what it means, allowed values, rule id."""

    key: str
    default: str
    description: str
    choices: tuple[str, ...] = ()
    rule: str = ""


@dataclass(frozen=True, slots=True)
class GameInfo:
    """A game's properties as data (OpenSpiel's _GAME_TYPE/_GAME_INFO)."""

    game_id: str
    title: str
    min_players: int
    max_players: int
    options: tuple[OptionSpec, ...] = ()
    simultaneous: bool = False
    chance: bool = True
    max_steps: int = 100_000
    """Upper bound on accepted commands in one match under random legal play (termination)."""
    optional_commands: frozenset[str] = frozenset()
    """Command kinds that do not advance the game (offers, withdrawals...): capped, never
    pending-only, and ending no decision timed on its own (`clock_key` "": every seat asked so
    before one is asked the same after it), so its turn clock runs on through them
    (`famiglia.clocks`, NP-D1)."""
    held_events: frozenset[str] = frozenset()
    """Event kinds, each seen by its own seat only, whose mere arrival would tell the other
    seats something (an answer to a window that must not show whom it waits for): a
    command whose events are all of these kinds is staged by the store, out of the match's
    version, until the next other command writes it first (NP-H9, docs/eventstore.md)."""
    held_padding: str = ""
    """With `held_events`: an event kind with no effect and seen by nobody, which fills the
    slots of a command made while the game asks any seat privately (`Pending.private`, an
    open window) or events are held: it goes in behind one slot a seat, in seat order, each
    the seat's held event or this. Otherwise how many were written out, and in what order,
    would tell the table how many had answered, and a seat how many before it."""
    engine_chat: str = ""
    """The Command kind by which the game's own rules carry the table's talk (Nothing Personal's
    `send_chat`, NP-M7, capped by NP-M10), or "" when talk is outside the engine (GC-D08,
    GR-D08): the command service's match chat serves only games without one, so a table has one
    channel to talk on (GameDescription.match_chat)."""
    command_type: type[Message] | None = None
    event_type: type[Message] | None = None
    view_type: type[Message] | None = None

    def defaults(self) -> dict[str, str]:
        return {o.key: o.default for o in self.options}

    def padding_event(self) -> Message | None:
        """The event `held_padding` names, as the server writes it (and a replay expects it),
        or None for a game that pads nothing."""
        if not self.held_padding or self.event_type is None:
            return None
        event = self.event_type()
        getattr(event, self.held_padding).SetInParent()
        return event


@dataclass(frozen=True, slots=True)
class MatchConfig:
    seats: int
    options: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SeatOutcome:
    seat: int
    score: float
    rank: int  # 1 = best; equal for unbroken ties
    details: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Result:
    """How a game ended. Someone ranks 1 (a win to every reader: standings, ratings, the read
    models), unless nobody won (`outcome["no_winner"] == "true"`, Nostra City's NC-V10): then
    every seat shares the last rank, a draw that counts no win."""

    seats: tuple[SeatOutcome, ...]
    outcome: Mapping[str, str] = field(default_factory=dict)

    def winners(self) -> list[int]:
        return [s.seat for s in self.seats if s.rank == 1]

    @property
    def no_winner(self) -> bool:
        return self.outcome.get("no_winner") == "true"


@runtime_checkable
class Engine(Protocol):
    """The Decider. All methods are pure; none does I/O or reads a clock."""

    info: GameInfo

    def setup(self, config: MatchConfig, seed: int) -> list[Event]:
        """The opening events (deals, boards). Refuses bad seat counts/options with RuleViolation."""
        ...

    def evolve(self, state: State | None, event: Event) -> State:
        """Apply one event. `state` is None only for the first setup event. Never random."""
        ...

    def decide(self, state: State, seat: int, command: Command, rng: Rng) -> list[Event]:
        """The events a command causes, or raise RuleViolation. All chance happens here.
        The returned events are never changed afterwards (engines may memoise their folds)."""
        ...

    def pending(self, state: State) -> list[Pending]:
        """Every seat that must act now (server truth; filter with `pending_for`)."""
        ...

    def legal_commands(self, state: State, seat: int, limit: int | None = None, *,
                       rng: Draws | None = None) -> list[Command]:
        """Every legal command for `seat` now, at most `limit`. A compound choice (a team, a
        split, a set of targets, an amount) too large to list is sampled, and the list is then
        a `Sampled`: without `rng`, the same representative members every time (what bots
        choose among); with `rng`, members drawn so that every legal command of the choice can
        come up (DESIGN.md: "a complete generator/sampler that covers them all"). Everything
        listed is accepted by `decide`. The returned messages may be shared, prebuilt
        instances: callers treat them as read-only (copy before changing)."""
        ...

    def view(self, state: State, viewer: int | None) -> View:
        """What `viewer` (a seat, or None for a spectator) may know. An allow-list."""
        ...

    def visibility(self, event: Event) -> Visibility:
        """Who may see an event."""
        ...

    def redact(self, event: Event, viewer: int | None) -> Event | None:
        """The form of `event` that `viewer` may see: itself, a redacted copy, or None."""
        ...

    def result(self, state: State) -> Result | None:
        """Final scores and ranks with the game's tie-breakers; None while the game runs."""
        ...

    def timeout_command(self, state: State, seat: int) -> Command | None:
        """The documented default a turn clock submits for `seat` when it expires."""
        ...

    def render_state(self, state: State) -> str:
        """Short text form of the full state (logs, playthroughs)."""
        ...

    def render_command(self, command: Command) -> str: ...

    def render_event(self, event: Event) -> str: ...

    def determinize(self, view: View, seat: int, rng: Rng) -> State:
        """A full state consistent with what `seat` sees in `view` (hidden information
        sampled), for information-set search bots. Must never read the true state."""
        ...


def fold(engine: Engine, events: Iterable[Event], state: State | None = None) -> State:
    for event in events:
        state = engine.evolve(state, event)
    return state


def pending_for(engine: Engine, state: State, viewer: int | None) -> list[Pending]:
    """`pending` as `viewer` may know it: private asks only reach their own seat."""
    return [p for p in engine.pending(state) if not p.private or p.seat == viewer]


def clock_key(engine: Engine, state: State, pending: Pending) -> str:
    """Which running clock times `pending` (docs/engines.md, "Clocks"). Decisions that share a
    key share one clock: it runs while the key is asked of anyone, from the key's first asking,
    and neither the seat's own commands nor another seat asked again restart it (a
    GoodCritters Step 3 deadline, GC-D05; a Nostra City turn, NC-D02). "" times the decision
    on its own, afresh whenever the seat is asked anew (another decision, or the same after its
    answer; its `GameInfo.optional_commands` answer nothing): what an engine without the
    optional `clock_key(state, pending)` gets."""
    keyed = getattr(engine, "clock_key", None)
    return keyed(state, pending) if keyed is not None else ""


def unnamed_clock(state: State, pending: Pending) -> str:
    """The `clock_key` of a game that names no clock (`Decider`'s default): "" for every decision."""
    return ""


def clock_keyer(engine: Engine) -> Callable[[State, Pending], str] | None:
    """The engine's `clock_key(state, pending)`, or None when it names no clock (every key ""):
    the turn clocks, which ask the key of every timed decision at every command, then spare
    the calls."""
    keyed = getattr(engine, "clock_key", None)
    return None if keyed is None or keyed is unnamed_clock else keyed


def is_over(engine: Engine, state: State) -> bool:
    return engine.result(state) is not None


def spelling_refusal(specs: Iterable[OptionSpec], options: Mapping[str, str]) -> tuple[str, str] | None:
    """Why option values are not spelled as the game lists them — (code, message) — or None: a
    value with blanks around it, or, for an option with listed choices, any other spelling than
    one of them (" 5", "True"). A game's reader may take those, but the match would show them as
    typed and matchmaking would pool them apart from the listed value."""
    listed = {o.key: o.choices for o in specs}
    for key in sorted(options):
        value = options[key]
        if value != value.strip():
            return "bad_option", f"option {key[:40]!r}: {value[:40]!r} has blanks around it"
        choices = listed.get(key, ())
        if choices and value not in choices:
            shown = ", ".join(repr(c) for c in choices[:12]) + (", ..." if len(choices) > 12 else "")
            return "bad_option", f"option {key[:40]!r} is one of {shown}, not {value[:40]!r}"
    return None


def options_refusal(engine: Engine, seats: int, options: Mapping[str, str]) -> tuple[str, str] | None:
    """Why the game would refuse a table of `seats` with `options` — (code, message): an
    option it does not have, or its own `setup`'s verdict (pure; the seed does not matter)
    — or None. Matchmaking and the tournament service ask it before they queue what will
    become a CreateMatch."""
    unknown = sorted(set(options) - {o.key for o in engine.info.options})
    if unknown:
        return "unknown_option", f"{engine.info.game_id} has no option(s) {', '.join(repr(k[:40]) for k in unknown)}"
    spelled = spelling_refusal(engine.info.options, options)
    if spelled:
        return spelled
    try:
        engine.setup(MatchConfig(seats, dict(options)), 0)
    except RuleViolation as exc:
        return exc.code, exc.message
    except Exception as exc:  # noqa: BLE001 - a value the game cannot even read: CreateMatch refuses it too
        return "bad_option", f"{engine.info.game_id} cannot set up a table with these options: {exc}"[:300]
    return None


def played_options(specs: Iterable[OptionSpec], chosen: Mapping[str, str]) -> dict[str, str]:
    """The options a View shows (docs/engines.md, "The options in a View"): every option of the
    game, each with the value the match is played by — `chosen` (as the game's config reads
    it) where set, else the default — sorted by key. One meaning in every game, so a client
    draws one options screen for all and a bot's world is dealt under the same rules."""
    return {o.key: str(chosen.get(o.key, o.default)) for o in sorted(specs, key=lambda o: o.key)}


def command_kind(command: Message) -> str:
    kind = command.WhichOneof("kind")
    return kind or ""


def default_redact(engine: Engine, event: Event, viewer: int | None) -> Event | None:
    """Redaction by visibility alone: the whole event or nothing."""
    return event if engine.visibility(event).allows(viewer) else None


def sorted_seats(pendings: Sequence[Pending]) -> list[int]:
    return sorted({p.seat for p in pendings})
