"""Turn clocks wound over a match's fold: when each person's clock runs out.

One pure function of the events and their timestamps (no I/O, no wall clock), so that the
bots' dispatcher, which queues the clock task that plays a seat's default, and the command
service, which shows the seat its `deadline_ms`, agree on the moment (docs/bots.md, "Turn
clocks"). The rules (docs/engines.md, "Clocks"): a decision with `timeout_seconds` is timed
from the command that asked it, and neither another seat's command nor the seat's own optional
one (`GameInfo.optional_commands`: a chat, an offer, which answer no decision, NP-D1's "one
timeout a decision") stretches it; the seat's own answer starts its next decision afresh,
unless the game names the clock (`clock_key`): a named clock runs for as long as its key is
asked of anyone, from the key's first asking, and stands still while it is not (GC-D05's Step 3
deadline, never extended; NC-D02's turn, through the choices inside it). The clocks are wound
once per command (a step: the consecutive events of one seat's command id, or of the server),
at the state that command left.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError

from famiglia.engine import Engine, clock_keyer

KEPT_STILL_CLOCKS = 32
"""Named clocks kept while they stand still (a turn's, while a choice inside it is asked)."""

Decision = tuple[int, Any, str, float, str]
"""A decision asked with a clock: (seat, kind, label, length in seconds, clock key; "" unnamed)."""

CLOCK_DEFAULT_PREFIX = "clock:"
"""How the command id of a clock's default begins (the bots' `run_clock`: "clock:<match>:<version>:<seat>"):
the fold tells a seat's run-out clock from its own command by it (`timed_out`)."""

STANDING_ANSWER_S = 1.0
"""A decision asked on a clock shorter than this is answered by a standing choice of its seat's,
not by a player gone: NP-D7's auto-pass runs the seat's window clock out at once
(TIMEOUTS["auto_pass"]), and a match's own clocks are whole seconds. Its default is no timeout."""


def is_clock_default(command_id: str) -> bool:
    """Whether a command id is the one a turn clock's default goes in under."""
    return command_id.startswith(CLOCK_DEFAULT_PREFIX)


def timed_out(engine: Engine, state: Any, seat: int) -> bool:
    """Whether a clock default for `seat` at `state` (the state it is decided on) is a timeout
    of its player's: the seat is asked on a clock of a person's length (`STANDING_ANSWER_S`),
    not NP-D7's standing auto-pass, which the seat chose itself."""
    for p in engine.pending(state):
        if p.seat == seat:
            return p.timeout_seconds >= STANDING_ANSWER_S
    return False


@dataclass
class KeyedClock:
    """One named clock of a match (engine `clock_key`): the seconds it ran before, and since
    when it runs now (None while nobody is asked under its key)."""

    used: float = 0.0
    since: float | None = None

    def spent(self, now: float) -> float:
        return self.used + (max(0.0, now - self.since) if self.since is not None else 0.0)


def wind_keyed(clocks: dict[str, KeyedClock], running: Set[str], asked: Set[str], at: float) -> None:
    """Start the named clocks first asked at `at`, stop those no longer asked and go on with
    those asked again; the stopped beyond the newest KEPT_STILL_CLOCKS are forgotten.
    `running`: the keys asked at the last wind, the clocks running now. The same keys asked
    again (most commands) change nothing, and only the clocks that change are touched."""
    if asked == running:
        return
    stopped = running - asked
    if stopped:  # in the clocks' order (one at a time in every game), the newest stopped last
        for key in stopped if len(stopped) == 1 else [key for key in clocks if key in stopped]:
            clock = clocks.pop(key)
            clock.used, clock.since = clock.spent(at), None
            clocks[key] = clock
    for key in asked:
        if key not in running:
            known = clocks.get(key)
            if known is None:
                clocks[key] = KeyedClock(since=at)
            else:
                known.since = at
    excess = len(clocks) - len(asked) - KEPT_STILL_CLOCKS  # every clock asked runs, the others stand still
    if excess > 0:  # the oldest stopped go
        forgotten = []
        for key, clock in clocks.items():
            if clock.since is None:
                forgotten.append(key)
                if len(forgotten) == excess:
                    break
        for key in forgotten:
            del clocks[key]


def timed_decisions(engine: Engine, state: Any) -> list[Decision]:
    """The decisions `state` asks with a clock, in the engine's order: (seat, kind, label,
    length, clock key)."""
    keyed = clock_keyer(engine)  # None: every decision on its own clock, no key to ask
    asked = []
    for p in engine.pending(state):  # (a loop: a comprehension is a call more, at every command)
        if p.timeout_seconds > 0:
            asked.append((p.seat, p.kind, p.label, p.timeout_seconds, "" if keyed is None else keyed(state, p)))
    return asked


@dataclass
class TurnClocks:
    """The turn clocks of one match's people (seats no bot plays), wound over its fold.

    The fold tells it each event before folding it (`note`, with the state before it): the
    first event of a new step winds the clocks at that state, the one the step before left.
    The last step is wound when asked (`deadlines`). Times are seconds since the epoch, from
    the events' stamps, and never go back (a held answer written out later keeps the stamp
    it was made at, NP-H9: it asks nobody, so no clock starts at it)."""

    people: frozenset[int]
    keyed: dict[str, KeyedClock] = field(default_factory=dict)
    """the game's named clocks (`clock_key`), running or stood still; asked of any seat"""
    own: dict[int, tuple[tuple[Any, ...], float]] = field(default_factory=dict)
    """person -> (its unnamed decision, when it began)"""
    runs_out: dict[int, float] = field(default_factory=dict)
    """person -> when its clock runs out, as of the last wind"""
    at: float = 0.0
    """the newest event's time"""
    acted: dict[int, bytes] = field(default_factory=dict)
    """the seats whose commands were noted since the last wind -> the command (serialized, as
    the first envelope of its events carries it; b"" where unknown)"""
    step: tuple[int, str] | None = None
    """(seat, command id) of the step being noted; None once wound"""
    last: tuple[tuple[int, str], bytes] = ((-1, ""), b"")
    """the newest step noted and its command: a step read in two pieces (wound between them)
    carries its command on its first envelope only"""
    asked: list[Decision] = field(default_factory=list)
    """the decisions asked with a clock at the last wind (`timed_decisions`)"""
    running: Set[str] = frozenset()
    """the named clocks running: the keys asked at the last wind"""
    fresh: dict[int, tuple[float, str]] = field(default_factory=dict)
    """person back at the table (`returned`) -> (when, the named clock it is asked under since:
    "" until a wind finds it): its clock runs from its return, not from before it"""

    def note(self, engine: Engine, before: Any, seat: int, command_id: str, stamp_ms: int,
             command: bytes = b"") -> None:
        """One event about to be folded on `before` (the state so far, as the stream has it);
        `command`: the serialized command that caused it, on its command's first event."""
        step = (seat, command_id)
        noted = self.step
        if noted != step:
            if noted is not None:
                self.wind(engine, before)
            self.step = step
        elif not command:  # the step's next event: only its time is new
            at = stamp_ms / 1000
            if at > self.at:
                self.at = at
            return
        if command_id:
            last = self.last
            if command:
                self.last = (step, command)
            elif last[0] == step:
                command = last[1]
            self.acted[seat] = command
        at = stamp_ms / 1000
        if at > self.at:  # never back
            self.at = at

    def returned(self, engine: Engine, state: Any, seat: int, stamp_ms: int) -> None:
        """`seat`'s player took it back from the bots (`seat_returned`) at `stamp_ms`: whatever
        it is asked now, its clock starts afresh there (a clock run down while the bots played
        the seat would give its player no time at all). `state`: the state so far."""
        if self.step is not None:
            self.wind(engine, state)
        at = stamp_ms / 1000
        if at > self.at:
            self.at = at
        self.fresh[seat] = (at, "")
        self.asked = []  # the next wind winds in full: a deadline moves with nothing else changed
        self.wind(engine, state)

    def deadlines(self, engine: Engine, state: Any) -> Mapping[int, float]:
        """person -> when its clock runs out (seconds since the epoch), for the people `state`
        asks with a clock; `state` is the one the events noted so far made."""
        if self.step is not None:
            self.wind(engine, state)
        return self.runs_out

    def wind(self, engine: Engine, state: Any) -> None:
        """Wind the clocks to `state`, which the steps noted since the last wind made. Once a
        command: a wind that finds the timed decisions of the last one, under the same keys,
        and no person's answer to one timed on its own, changes nothing and stops there
        (`tests/unit/test_turn_clocks_wound_in_full.py` holds it to winding in full)."""
        asked = timed_decisions(engine, state) if state is not None else []
        if asked == self.asked and not self._answered(engine):
            # Nothing a clock depends on changed (another seat's move, an optional one, a
            # chat): every deadline stands, and so do the clocks.
            if self.acted:
                self.acted = {}
            self.step = None
            return
        at, people = self.at, self.people
        keys = {decision[4] for decision in asked if decision[4]}
        wind_keyed(self.keyed, self.running, keys, at)
        own: dict[int, tuple[tuple[Any, ...], float]] = {}
        runs_out: dict[int, float] = {}
        fresh = self.fresh
        kept: dict[int, tuple[float, str]] = {}
        for seat, kind, label, length, key in asked:
            if seat not in people or seat in runs_out:
                continue
            if key:
                clock = self.keyed[key]
                began = (clock.since if clock.since is not None else at) - clock.used
            else:
                decision = (kind, label, length)
                known = self.own.get(seat)
                goes_on = known is not None and known[0] == decision and (
                    seat not in self.acted or not answers(engine, self.acted[seat]))
                began = known[1] if known is not None and goes_on else at
            if fresh and seat in fresh:  # back from the bots: from its return, while it is asked the same
                since, under = fresh[seat]
                if under in ("", key):
                    began = max(began, since)
                    if key:  # a named clock goes on past the seat's answers: the return stands with it
                        kept[seat] = (since, key)
            if not key:
                own[seat] = (decision, began)
            runs_out[seat] = began + length
        if fresh:
            self.fresh = kept
        self.asked, self.running = asked, keys
        self.own, self.runs_out, self.acted, self.step = own, runs_out, {}, None

    def _answered(self, engine: Engine) -> bool:
        """Whether a person asked a decision timed on its own answered it since the last wind
        (its next one, the same again, starts afresh)."""
        own = self.own
        for seat, command in self.acted.items():
            if seat in own and answers(engine, command):
                return True
        return False


def answers(engine: Engine, command: bytes) -> bool:
    """Whether a seat's command answered its decision (one timed on its own): any command but
    one of the game's optional kinds (`GameInfo.optional_commands`: a chat, an offer, an
    auto-pass change), which end no such decision (the engine contract holds every game to it).
    One not known (an event stored without its command) counts as an answer, as every command
    did before."""
    optional = engine.info.optional_commands
    command_type = engine.info.command_type
    if not command or not optional or command_type is None:
        return True
    try:
        kind = command_type.FromString(command).WhichOneof("kind")
    except DecodeError:
        return True
    return kind not in optional
