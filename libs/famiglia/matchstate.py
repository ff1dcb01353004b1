"""A match rebuilt from its envelopes: the fold every reader shares (command service,
replay, projection, bots). Pure apart from the envelopes it is given, and the store
`catch_up` is given to read them from."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from google.protobuf.message import Message

from famiglia.clocks import CLOCK_DEFAULT_PREFIX, TurnClocks, timed_out
from famiglia.engine import Engine, Result
from famiglia.engine.registry import Registry
from famiglia.eventstore.envelopes import (
    MATCH_CANCELLED,
    MATCH_CREATED,
    SEAT_CHANGES,
    SEAT_LEFT,
    event_decoder,
    open_match_cancelled,
    open_match_created,
    open_seat_change,
)
from famiglia.v1 import envelope_pb2

if TYPE_CHECKING:
    from famiglia.eventstore import EventStore


class NotAMatch(ValueError):
    """The envelopes do not start with match_created."""


class UnknownEventKind(ValueError):
    """A stored event that sets nothing this server's engine knows: a kind added by a newer
    server (a deploy under way, or rolled back). Folding on without it would give a state the
    match never had, and decisions on it would be stored for good: the match is unreadable
    here until a server that knows the kind reads it (docs/schema.md)."""

    def __init__(self, match_id: str, env: envelope_pb2.EventEnvelope, *, staged: bool = False) -> None:
        super().__init__(f"{match_id}: {'staged ' if staged else ''}event {env.seq} is a {env.type[:80]!r}, an "
                         f"event kind this server's {env.game_id or 'game'} engine does not know (written by a "
                         "newer server?)")
        self.seq = env.seq
        self.staged = staged
        """A held answer's (NP-H9): its seq, past the version, counts the answers held before it."""


class StoreWentBack(Exception):
    """The store no longer holds the event this fold last took from the stream, at its seq: it
    lost acknowledged writes (a Redis restored from an older AOF, `appendfsync everysec` on a
    host crash), and perhaps was written on since. Events read past it would not follow this
    fold: the match is to be folded anew from the store."""


def command_key(seat: int, command_id: str) -> str:
    """A command id is an idempotency key of its seat, not of the match: one seat can
    neither answer for another's id nor learn from a duplicate whether another has acted."""
    return f"{seat}/{command_id}"


@dataclass
class MatchState:
    match_id: str
    created: envelope_pb2.MatchCreated
    engine: Engine
    state: Any = None
    version: int = 1
    """The position: every event folded, staged ones included (what a writer checks)."""
    staged: list[envelope_pb2.EventEnvelope] = field(default_factory=list)
    """The folded events the store holds back (NP-H9, `GameInfo.held_events`): the last
    `len(staged)` of the fold, seen by their own seat only until the next append."""
    unstaged: tuple[Any, int] | None = None
    """The state and the latest time before the staged events were folded: the staged events
    reach the stream at other seqs than they were staged at (`EventStore.write_out`'s slots),
    so they are folded again from there (`unstage`)."""
    commands: dict[str, tuple[int, int]] = field(default_factory=dict)
    """`command_key(seat, command id)` -> (first seq, last seq) of the events it caused."""
    padded: dict[int, int] = field(default_factory=dict)
    """The newest blocks a command went in behind (NP-H9): the version before a block of
    slots (one a seat: its held answer or padding, `GameInfo.held_padding`), or before a run
    of padding as matches wrote them before slots, -> the version after it. A command made
    at version v went in at `past_padding(v)`."""
    slotlike: list[tuple[int, int, str]] = field(default_factory=list)
    """The newest events that may fill a slot (NP-H9), at most a block's worth: (seq, the
    slot they fit: a seat's answer its seat's, padding -1 for any; its command's key)."""
    written_out: set[str] = field(default_factory=set)
    """The `command_key`s of the held answers written out in a block's slots (NP-H9): held
    when they were made, whatever `padded` (the newest blocks only) still knows."""
    last_timestamp_ms: int = 0
    last_stream: tuple[int, str] = (0, "")
    """(seq, event id) of the newest event folded from the stream (not staged): what the store
    must still hold for what it holds past it to follow this fold (`_read_on`)."""
    cancelled: envelope_pb2.MatchCancelled | None = None
    """An operator ended the match (`match_cancelled`, GameService.CancelMatch): it is over with
    no result. The envelope is no game event: the engine's state stays as it was before it."""
    away: dict[int, tuple[envelope_pb2.SeatLeft, int]] = field(default_factory=dict)
    """seat -> (its `seat_left`, that event's seq), for each seat whose player left and the bots
    play now (GameService.LeaveMatch; `timeouts`); a `seat_returned` takes its seat out. Like
    a cancel, no game event: the engine never sees who plays a seat."""
    timeouts: dict[int, int] = field(default_factory=dict)
    """seat -> how many of its turn clocks ran out in a row on its player: clock defaults
    (`famiglia.clocks.is_clock_default`) of a person's length (`timed_out`), with no command of
    the seat's own between them; a seat change of the seat starts it over. From the events
    alone, so every replica, and one restarted, counts alike (`FAMIGLIA_TIMEOUTS_TO_BOT`)."""
    _unstaged_timeouts: dict[int, int] | None = field(default=None, repr=False, compare=False)
    """`timeouts` before the staged events were folded: `unstage` puts them back."""
    clocks: TurnClocks | None = None
    """The people's turn clocks wound over the stream's events (`start(..., clocks=True)`, in a
    match with a seat no bot plays): `deadlines`."""
    _ended: tuple[Any, bool] = field(default=(None, False), repr=False, compare=False)
    """(state, whether it has a result): `finished` asked again of the same state (engine states
    are never changed, only replaced) is an identity check, not the engine's `result` again."""

    @property
    def game_id(self) -> str:
        return self.created.game_id

    @property
    def seed(self) -> int:
        return int(self.created.seed)

    @property
    def seats(self) -> int:
        return int(self.created.seats)

    @functools.cached_property
    def may_hold(self) -> bool:
        """Whether answers of this match may be held back from the table (NP-H9): its game
        holds some (`GameInfo.held_events`) and a person sits at it (a seat without seat info,
        or not a bot's). A match of bots only has nobody to hide them from."""
        bots = sum(1 for info in self.created.seat_info if info.bot)
        return bool(self.engine.info.held_events) and bots < self.seats

    def bot_policies(self) -> dict[int, str]:
        """seat -> bot policy, for every seat the bots play now: created as a bot's
        (`MatchCreated.seat_info`) or left by its player (`away`)."""
        bots = {info.seat: info.policy or "random" for info in self.created.seat_info if info.bot}
        for seat, (left, _) in self.away.items():
            bots[seat] = left.policy or "random"
        return bots

    def past_padding(self, version: int) -> int:
        """`version`, or the version after the padding written right after it."""
        return self.padded.get(version, version)

    @property
    def public_version(self) -> int:
        """The version every reader sees: the position less the staged events."""
        return self.version - len(self.staged)

    @classmethod
    def start(cls, registry: Registry, first: envelope_pb2.EventEnvelope, *, clocks: bool = False) -> MatchState:
        """A match from its first event; `clocks`: wind its people's turn clocks (`deadlines`),
        as the servers that enforce or show them do."""
        if first.type != MATCH_CREATED or first.seq != 1:
            raise NotAMatch(f"{first.match_id}: first event is {first.type}@{first.seq}")
        created = open_match_created(first)
        engine = registry.get(created.game_id)
        match = cls(first.match_id, created, engine, None, 1, last_timestamp_ms=first.timestamp.ToMilliseconds())
        if clocks:
            bots = {info.seat for info in created.seat_info if info.bot}
            people = frozenset(range(created.seats)) - bots
            if people:  # a match of bots alone has no clock to run
                match.clocks = TurnClocks(people)
        return match

    @classmethod
    def from_envelopes(cls, registry: Registry, envelopes: Iterable[envelope_pb2.EventEnvelope], *,
                       clocks: bool = False) -> MatchState:
        it = iter(envelopes)
        try:
            first = next(it)
        except StopIteration:
            raise NotAMatch("no events") from None
        match = cls.start(registry, first, clocks=clocks)
        match.apply(it)
        return match

    def deadlines(self) -> Mapping[int, float]:
        """person -> when its turn clock runs out (seconds since the epoch), for each person
        the match asks with a clock, as the stream's events make it (docs/bots.md, "Turn
        clocks"): answers held back from the table (NP-H9) count for nothing until written
        out, so a seat's clock never tells it another seat answered. Empty without clocks, and
        once cancelled: the engine, which never sees the cancel, would still ask its seats. A
        seat the bots play since its player left (`away`) has none: no clock runs on a bot."""
        if self.clocks is None or self.state is None or self.cancelled is not None:
            return {}
        public = self.unstaged[0] if self.staged and self.unstaged is not None else self.state
        runs_out = self.clocks.deadlines(self.engine, public)
        if self.away:  # the bots play those seats: no clock runs on them
            return {seat: at for seat, at in runs_out.items() if seat not in self.away}
        return runs_out

    def apply(self, envelopes: Iterable[envelope_pb2.EventEnvelope],
              events: Sequence[Message] | None = None, *, staged: bool = False) -> None:
        """Fold envelopes that follow the current version (older ones are skipped).

        `events`: the envelopes' events already decoded, one per envelope (the command
        service has them from `decide`): folding them spares parsing each payload again.
        `staged`: the envelopes are staged (`EventStore.stage`). Any other envelope folded
        means the staged ones are in the stream now, at the seqs they were staged at: the
        store's `append` writes them first (a writer that placed them elsewhere, in slots,
        `unstage`s them first)."""
        engine = self.engine
        decode = event_decoder(engine)
        commands = self.commands
        padding = engine.info.held_padding
        # Blocks of slots only where answers are held: a match of bots only pays nothing for them.
        slots = engine.info.held_events if padding and not staged and self.may_hold else None
        clocks = None if staged else self.clocks  # wound over the stream's events alone (`deadlines`)
        last = None
        try:
            for i, env in enumerate(envelopes):
                seq = env.seq
                if seq <= self.version:
                    continue
                if seq != self.version + 1:
                    raise ValueError(f"{self.match_id}: gap, at {self.version}, got {seq}")
                if staged and not self.staged:
                    self.unstaged = (self.state, self.last_timestamp_ms)
                    self._unstaged_timeouts = dict(self.timeouts)
                kind = env.type
                if kind == MATCH_CANCELLED:  # the server's, not the game's: no engine sees it
                    self.cancelled = open_match_cancelled(env)
                elif kind in SEAT_CHANGES:  # the server's too: who plays a seat
                    change = open_seat_change(env)
                    self.timeouts.pop(change.seat, None)
                    if kind == SEAT_LEFT:
                        self.away[change.seat] = (change, seq)  # type: ignore[assignment]
                    else:
                        self.away.pop(change.seat, None)
                        if clocks is not None:
                            stamp = env.timestamp
                            clocks.returned(engine, self.state, change.seat,
                                            stamp.seconds * 1000 + stamp.nanos // 1_000_000)
                else:
                    acting = env.command_id
                    if acting and env.seat >= 0:
                        self._count_timeout(env.seat, acting)
                    if clocks is not None:
                        if self.staged and self.unstaged is not None:  # the staged events are the stream's now
                            for held in self.staged:
                                clocks.note(engine, self.unstaged[0], held.seat, held.command_id,
                                            held.timestamp.seconds * 1000 + held.timestamp.nanos // 1_000_000,
                                            held.command)
                        stamp = env.timestamp
                        clocks.note(engine, self.state, env.seat, env.command_id,
                                    stamp.seconds * 1000 + stamp.nanos // 1_000_000, env.command)
                    event = decode(env.payload) if events is None else events[i]
                    try:
                        self.state = engine.evolve(self.state, event)
                    except Exception as exc:
                        if not event.ListFields():  # (asked only on failure: the fold's hot path)
                            raise UnknownEventKind(self.match_id, env, staged=staged) from exc
                        raise
                self.version = seq
                if staged:
                    self.staged.append(env)
                elif self.staged:
                    self.staged.clear()
                    self.unstaged = None
                    self._unstaged_timeouts = None
                last = env
                command_id = env.command_id
                if padding and not command_id and env.type == padding:
                    self._padded(seq)
                elif command_id:
                    key = command_key(env.seat, command_id)
                    first = commands.get(key)
                    commands[key] = (seq if first is None else first[0], seq)
                if slots is not None:
                    kind = env.type
                    if kind == padding or kind in slots:
                        self._slot(env, seq, kind == padding)
        finally:
            if last is not None:  # the last envelope folded: its time is the match's latest
                stamp = last.timestamp  # Timestamp.ToMilliseconds without its Python-level range check
                self.last_timestamp_ms = stamp.seconds * 1000 + stamp.nanos // 1_000_000
                if not staged:
                    self.last_stream = (last.seq, last.event_id)

    def _count_timeout(self, seat: int, command_id: str) -> None:
        """Count a seat's command (its first event, on the state before it) in `timeouts`: a
        clock default of a person's length counts one more; NP-D7's auto-pass default, which
        the seat chose, neither counts nor starts it over; any other command starts it over."""
        if command_id.startswith(CLOCK_DEFAULT_PREFIX):
            if command_key(seat, command_id) not in self.commands and timed_out(self.engine, self.state, seat):
                self.timeouts[seat] = self.timeouts.get(seat, 0) + 1
        elif self.timeouts:
            self.timeouts.pop(seat, None)

    def timeouts_in_a_row(self, seat: int, command_id: str) -> int:
        """How many clocks ran out on `seat` in a row with a command under `command_id`, about
        to be decided on this state, counted as the fold will count it (`_count_timeout`)."""
        count = self.timeouts.get(seat, 0)
        if command_id.startswith(CLOCK_DEFAULT_PREFIX) and timed_out(self.engine, self.state, seat):
            return count + 1
        return count

    def _padded(self, seq: int) -> None:
        padded = self.padded
        start = seq - 1
        for before, after in reversed(padded.items()):  # the newest run: does this one extend it?
            if after == seq - 1:
                start = before
            break
        self._ran(start, seq)

    def _ran(self, start: int, end: int) -> None:
        padded = self.padded
        padded[start] = end
        if len(padded) > 64:  # readers ask about recent versions only
            del padded[next(iter(padded))]

    def _slot(self, env: envelope_pb2.EventEnvelope, seq: int, padding: bool) -> None:
        """Fold an event that may fill a slot of a block (NP-H9): slot s holds seat s's
        written-out answer (a held kind, with its command id) or padding, and `seats` of them
        in a row make a block, which the command after it went in behind. Any run of `seats`
        such events in slot order ending here is one, wherever it starts: a seat's answer
        right before a block (made public, not held) does not hide the block."""
        fits = -1 if padding else (env.seat if env.command_id else -2)
        recent = self.slotlike
        recent.append((seq, fits, "" if fits < 0 else command_key(env.seat, env.command_id)))
        seats = self.seats
        if len(recent) > seats:
            del recent[0]
        if len(recent) < seats or recent[0][0] != seq - seats + 1:
            return
        if all(fit == slot or fit == -1 for slot, (_seq, fit, _key) in enumerate(recent)):
            self._ran(seq - seats, seq)
            self.written_out.update(key for _seq, _fit, key in recent if key)

    def unstage(self) -> None:
        """Take the staged events out of the fold, back to the public version, as they were
        before them: they are in the stream now where a writer placed them (`EventStore.write_out`:
        seat order, at other seqs), to be folded from there."""
        if not self.staged:
            return
        assert self.unstaged is not None  # kept when the first staged event was folded
        commands = self.commands
        for env in self.staged:
            if env.command_id:
                commands.pop(command_key(env.seat, env.command_id), None)
        self.version = self.public_version
        self.state, self.last_timestamp_ms = self.unstaged
        if self._unstaged_timeouts is not None:
            self.timeouts = self._unstaged_timeouts
        self.staged.clear()
        self.unstaged = None
        self._unstaged_timeouts = None

    def catch_up(self, store: EventStore, attempts: int = 5) -> None:
        """Fold what the store has after this match's position: the stream's new events and,
        where answers may be held (`may_hold`), the staged ones after them (NP-H9). Those are
        two reads: should the stream move between them (the staged answers written out, new
        ones staged), the staged events no longer follow, and the stream is read again."""
        match_id = self.match_id
        if not self.may_hold:
            self.apply(self._read_on(store, self.version))
            return
        for _ in range(attempts):
            self._fold_stream(store)
            tail = store.read_staged(match_id, after=self.version)
            if not tail or tail[0].seq == self.version + 1:
                self.apply(tail, staged=True)
                return
        self._fold_stream(store)  # the stream alone; the staged events next time

    def _fold_stream(self, store: EventStore) -> None:
        """The stream's new events. Staged events this fold holds that another writer has
        written out since are folded again where the stream has them: the stream moved past
        the public version, and a writer may have placed them at other seqs (slots)."""
        if not self.staged:
            self.apply(self._read_on(store, self.version))
            return
        written = self._read_on(store, self.public_version)
        if written:
            self.unstage()
            self.apply(written)

    def _read_on(self, store: EventStore, after: int) -> list[envelope_pb2.EventEnvelope]:
        """The stream's events past `after`, read with the one at `after` when this fold took it
        from the stream: the store must still hold it there (else StoreWentBack)."""
        seq, event_id = self.last_stream
        if not event_id or seq != after:
            return store.read(self.match_id, after=after)
        read = store.read(self.match_id, after=after - 1)
        if not read or read[0].seq != after or read[0].event_id != event_id:
            raise StoreWentBack(f"{self.match_id}: the store's event {after} is not the one folded")
        return read[1:]

    def result(self) -> Result | None:
        if self.state is None:
            return None
        return self.engine.result(self.state)

    @property
    def finished(self) -> bool:
        """Over: played to its end (a result) or cancelled by an operator (none). Asked once per
        command by the command service and again by its hot matches (finished ones are dropped
        first), so the answer is kept for the state it was asked of."""
        if self.cancelled is not None:
            return True
        state = self.state
        seen, ended = self._ended
        if seen is not state:
            ended = state is not None and self.engine.result(state) is not None
            self._ended = (state, ended)
        return ended
