"""One match's history and its state as of any event, without refolding it all.

Folding a 10,000-event match for every question would make GetStateAt grow
with the match. A timeline keeps the folded state every `every` events (K); the
state at seq s is the snapshot at the largest multiple of K not above s, plus at
most K-1 events folded on top. Engine states are frozen dataclasses, so a
snapshot is just a reference and sharing it is safe.

The LRU is over matches (`TimelineCache`): a match's snapshots live and die
with its timeline, so one long match cannot evict another's every K-th state.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter
from typing import Any

from google.protobuf.message import DecodeError

from famiglia.engine import Engine
from famiglia.engine.registry import Registry
from famiglia.eventstore.envelopes import (
    MATCH_CANCELLED,
    MATCH_CREATED,
    SEAT_CHANGES,
    event_decoder,
    open_match_created,
)
from famiglia.matchstate import NotAMatch, UnknownEventKind
from famiglia.v1.envelope_pb2 import EventEnvelope, MatchCreated

from .seat_changes import fold_away

DEFAULT_EVERY = 64
_EVENT_ID = attrgetter("event_id")

CACHED_MB = 512
"""MiB of timelines a `TimelineCache` keeps at most, by `held_bytes` (FAMIGLIA_REPLAY_CACHED_MB)."""

TIMELINE_BYTES = 32 * 1024
"""What a timeline holds whatever its length: its head state and its match's setup."""

EVENT_BYTES = 1536
"""What each event adds: its envelope as Python holds it (0.9-1.2 KiB in every game, for ~150
bytes stored), its event id index entry and its share of a snapshot every 64 events (14-22 KiB
each), measured by RSS over folded timelines of every game (docs/performance-replay.md)."""


def held_bytes(timeline: MatchTimeline) -> int:
    """The memory a timeline holds, estimated from its length alone (no walk of its states)."""
    return TIMELINE_BYTES + EVENT_BYTES * timeline.last_seq


class UnreadableEvent(ValueError):
    """A stored event today's engine cannot decode or fold (a corrupt or foreign record).

    `str()` is what any asker is told, a spectator too, so it names the match and the seq
    (ListMatchEvents shows every event's) and nothing of the event: not its id (a ULID, whose
    first part is the millisecond it was made: hidden events are listed without it), not its
    stored type, not the engine's exception (which may quote the event's contents). `detail`
    has those, for the log."""

    def __init__(self, match_id: str, seq: int, event_id: str, cause: BaseException) -> None:
        newer = isinstance(cause, UnknownEventKind)
        super().__init__(f"match {match_id[:80]} event {seq} cannot be read by this server: "
                         + ("an event kind this server's engine does not know (written by a newer server?)" if newer
                            else "a record its engine cannot decode or fold")
                         + "; the server's log (replay_unreadable_event) has the details")
        self.match_id, self.seq, self.event_id = match_id, seq, event_id
        self.detail = f"{type(cause).__name__}: {cause}"[:500]


class MatchTimeline:
    """The envelopes of one match (seq 1..last_seq) and snapshots of its states.

    The state at seq 1 (match_created) is None: the engine's state begins with
    the first setup event.
    """

    def __init__(self, registry: Registry, envelopes: Sequence[EventEnvelope], every: int = DEFAULT_EVERY) -> None:
        if every < 1:
            raise ValueError("snapshot interval must be >= 1")
        if not envelopes or envelopes[0].type != MATCH_CREATED or envelopes[0].seq != 1:
            raise NotAMatch("a match starts with match_created at seq 1")
        first = envelopes[0]
        self.match_id: str = first.match_id
        try:
            self.created: MatchCreated = open_match_created(first)
        except DecodeError as exc:
            raise UnreadableEvent(first.match_id, 1, first.event_id, exc) from None
        self.engine: Engine = registry.get(self.created.game_id)
        self._decode: Callable[[bytes], Any] = event_decoder(self.engine)
        """`open_event` without its per-call look-ups (the fold decodes every event)."""
        self.every = every
        self.envelopes: list[EventEnvelope] = [first]
        self._by_event_id: dict[str, int] = {first.event_id: 1}
        self._snapshots: dict[int, Any] = {}
        self._head: Any = None
        self.cancelled = False
        """An operator ended the match (`match_cancelled`, its last event): over, with no result.
        That envelope is no game event: the state after it is the state before it."""
        self.away: dict[int, str] = {}
        """seat -> why its player left it ("left", "timeouts"), for the seats the bots play after
        the last event (`seat_left`, until a `seat_returned`): no game events either."""
        self.lock = threading.RLock()
        self.folded_last = 0
        """How many events the last `state_at` folded (tests check it stays below K)."""
        self.extend(envelopes[1:])

    # -- growing ---------------------------------------------------------------------------
    def extend(self, envelopes: Iterable[EventEnvelope]) -> int:
        """Append the envelopes that follow `last_seq` (older ones are skipped); fold them once.

        Readers that do not take the lock (`last_seq`, `envelope`, `cancelled`, `away`) see the
        envelopes kept all at once, when the fold is done: never the first events of a command
        without the rest (a replay would show a public event attributed whose command's hidden
        one it did not see yet).

        The loop is the replay fold's hot path (every event of every loaded match passes here),
        so what does not change per event is looked up once: the decoder, evolve, the lists."""
        with self.lock:
            decode = self._decode
            evolve = self.engine.evolve
            new: list[EventEnvelope] = []
            keep, by_event_id, snapshots = new.append, self._by_event_id, self._snapshots
            match_id, every = self.match_id, self.every
            first = last = len(self.envelopes)
            head = self._head
            cancelled, away = self.cancelled, dict(self.away)
            try:
                for env in envelopes:
                    seq = env.seq
                    if seq != last + 1:
                        if seq <= last:
                            continue
                        raise ValueError(f"{match_id}: gap, at {last}, got {seq}")
                    if env.match_id != match_id:
                        raise ValueError(f"{match_id}: envelope {seq} names match {env.match_id}")
                    if env.type == MATCH_CANCELLED:
                        cancelled = True
                    elif env.type in SEAT_CHANGES:  # who plays a seat: the server's, no engine's
                        try:
                            fold_away(away, env)
                        except Exception as exc:  # noqa: BLE001 - a payload that does not parse
                            raise UnreadableEvent(match_id, seq, env.event_id, exc) from exc
                    else:
                        event = None
                        try:
                            event = decode(env.payload)
                            head = evolve(head, event)
                        except Exception as exc:  # noqa: BLE001 - garbage stored by someone: say which event
                            cause: Exception = exc
                            if event is not None and not event.ListFields():  # a kind a newer server wrote
                                cause = UnknownEventKind(match_id, env)
                            raise UnreadableEvent(match_id, seq, env.event_id, cause) from exc
                    keep(env)
                    last = seq
                    if not seq % every:
                        snapshots[seq] = head
            finally:
                # The state and index after the last envelope kept, even if a later one failed;
                # the index in one C-level pass (a dict store per event in the loop cost more).
                # The envelopes last: one list extend, which a reader sees whole or not at all.
                self._head = head
                self.cancelled, self.away = cancelled, away
                by_event_id.update(zip(map(_EVENT_ID, new), range(first + 1, last + 1), strict=True))
                self.envelopes.extend(new)
        return last - first

    # -- questions -------------------------------------------------------------------------
    @property
    def last_seq(self) -> int:
        return len(self.envelopes)

    @property
    def game_id(self) -> str:
        return self.created.game_id

    @property
    def seats(self) -> int:
        return int(self.created.seats)

    @property
    def head(self) -> Any:
        """The state after the last event."""
        return self._head

    @property
    def finished(self) -> bool:
        """Over: played to a result, or cancelled by an operator."""
        return self.cancelled or (self._head is not None and self.engine.result(self._head) is not None)

    def envelope(self, seq: int) -> EventEnvelope:
        self._check(seq)
        return self.envelopes[seq - 1]

    def seq_of(self, event_id: str) -> int | None:
        with self.lock:  # an extend in flight indexes its envelopes when it ends
            return self._by_event_id.get(event_id)

    def state_at(self, seq: int) -> Any:
        """The state after event `seq`: the nearest snapshot plus at most K-1 events."""
        self._check(seq)
        with self.lock:
            if seq == self.last_seq:
                self.folded_last = 0
                return self._head
            base = seq - seq % self.every
            state = self._snapshots.get(base) if base >= self.every else None
            if state is None:
                # No snapshot below (K > seq, or the match was loaded some other way): fold from the start.
                base = 1
            self.folded_last = seq - base
            for env in self.envelopes[base:seq]:
                state = self._evolve(state, env)
            return state

    def _evolve(self, state: Any, env: EventEnvelope) -> Any:
        """The state after `env`: a `match_cancelled`, a `seat_left` or a `seat_returned`
        changes nothing of the game's."""
        if env.type == MATCH_CANCELLED or env.type in SEAT_CHANGES:
            return state
        return self.engine.evolve(state, self._decode(env.payload))

    def states(self, first: int = 1, last: int | None = None) -> Iterable[tuple[EventEnvelope, Any]]:
        """(envelope, state after it) for seq first..last, folding forward once."""
        last = self.last_seq if last is None else last
        if first > last:
            return
        state = self.state_at(first)
        yield self.envelopes[first - 1], state
        for env in self.envelopes[first:last]:
            state = self._evolve(state, env)
            yield env, state

    def snapshot_count(self) -> int:
        return len(self._snapshots)

    def _check(self, seq: int) -> None:
        if not 1 <= seq <= self.last_seq:
            raise IndexError(f"{self.match_id} has events 1..{self.last_seq}, not {seq}")


class TimelineCache:
    """An LRU of match timelines, loaded and caught up through `load(match_id, after)`.

    Bounded by matches (`capacity`) and by memory (`max_bytes`, `held_bytes` estimated): a
    timeline holds every event of its match, so 256 long matches could take gigabytes. The
    match asked about is kept even alone past `max_bytes` (it is being answered from)."""

    def __init__(
        self,
        registry: Registry,
        load: Callable[[str, int], list[EventEnvelope]],
        *,
        every: int = DEFAULT_EVERY,
        capacity: int = 256,
        max_bytes: int = CACHED_MB << 20,
        version: Callable[[str], int] | None = None,
    ) -> None:
        self.registry = registry
        self._load = load
        self._version = version
        """The store's version of a match (0: it knows none), which a finished match's timeline is
        checked against: None, never."""
        self.every = every
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, MatchTimeline] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self.held = 0
        """`held_bytes` of the timelines kept, as each was last counted (loaded or caught up)."""
        self._lock = threading.Lock()

    def get(self, match_id: str, *, fresh: bool = True) -> MatchTimeline | None:
        """The match's timeline, caught up with the source unless it is over (then checked
        against the store's version), or as cached when `fresh` is off."""
        with self._lock:
            timeline = self._entries.get(match_id)
            if timeline is not None:
                self._entries.move_to_end(match_id)
        if timeline is None:
            envelopes = self._load(match_id, 0)
            if not envelopes:
                return None
            timeline = MatchTimeline(self.registry, envelopes, self.every)
            with self._lock:
                timeline = self._entries.setdefault(match_id, timeline)
                self._entries.move_to_end(match_id)
                self._count(match_id, timeline)
            return timeline
        if fresh and not timeline.finished:
            last = timeline.last_seq
            seen = timeline.envelope(last).event_id
            envelopes = self._load(match_id, last - 1)  # with the event folded last: still there?
            # Checked against the event at `last` as it was before the read: another question may
            # have caught the timeline up past it meanwhile (extend skips what it already holds).
            if not envelopes or envelopes[0].seq != last or envelopes[0].event_id != seen:
                # The store lost acknowledged writes (and may have been written on since): what it
                # holds past them does not follow this timeline, which is built anew from it.
                self.forget(match_id)
                return self.get(match_id)
            if timeline.extend(envelopes):
                with self._lock:
                    if self._entries.get(match_id) is timeline:
                        self._count(match_id, timeline)
        elif fresh and self._version is not None:
            # Over here, but the store's version says otherwise: it lost the ending (and may play
            # the match on from there). Shown as over, the lost ending's full view would be
            # granted to anyone while the table plays the same deck on. (A trim keeps the
            # version: an archived match costs no SQL here; 0: the store knows no such match.)
            version = self._version(match_id)
            if version and version != timeline.last_seq:
                self.forget(match_id)
                return self.get(match_id)
        return timeline

    def _count(self, match_id: str, timeline: MatchTimeline) -> None:
        """Count `timeline` (the most recent) at its size now, then drop the least recently used
        while there are more than `capacity` or they hold more than `max_bytes`. Under the lock."""
        size = held_bytes(timeline)
        self.held += size - self._sizes.get(match_id, 0)
        self._sizes[match_id] = size
        entries = self._entries
        while len(entries) > self.capacity or (self.held > self.max_bytes and len(entries) > 1):
            dropped, _ = entries.popitem(last=False)
            self.held -= self._sizes.pop(dropped, 0)

    def forget(self, match_id: str) -> None:
        with self._lock:
            self._entries.pop(match_id, None)
            self.held -= self._sizes.pop(match_id, 0)
