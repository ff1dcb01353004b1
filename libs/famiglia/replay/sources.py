"""Where replays read events: the EventSource port and its bindings.

A match lives in Redis Streams while it is hot and in the SQL event archive once
the projection archived it; finished matches may then be trimmed from Redis.
Replay must give the same answer from either, so both sit behind one small port:

- `read(match_id, after)` — the match's envelopes with seq > after, in order;
- `find(event_id)`        — which match and seq an event id belongs to.

Event ids are ULIDs and carry no match id, and Redis keeps no index from event
id to match, so `StoreSource` builds one itself from the partition streams
(every event of every match passes through one), catching up only on a miss.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from famiglia.eventstore import EventStore
from famiglia.eventstore.unreadable import tell_unreadable
from famiglia.grpcutil.errors import pg_sqlstate
from famiglia.v1.envelope_pb2 import EventEnvelope


@dataclass(frozen=True, slots=True)
class EventLocation:
    match_id: str
    seq: int


class EventSource(Protocol):
    """Read-only access to stored matches."""

    def read(self, match_id: str, after: int = 0) -> list[EventEnvelope]:
        """Envelopes with seq > after, in order; [] for an unknown (or trimmed) match."""
        ...

    def find(self, event_id: str) -> EventLocation | None:
        """The match and seq of an event id, or None when this source does not hold it."""
        ...


class EventIndex:
    """event id -> location, bounded: the least recently added or looked up go first.

    It holds up to `capacity` entries (2M by default), so each is kept small: the event id
    (the one object an entry needs) mapped to one int, the match's number and the seq, with the
    match ids held once per match. An `EventLocation` per entry, with its own copy of the match
    id and a seq object, in an OrderedDict cost ~290 bytes an entry (574 MB full); this holds
    ~146 filled, up to ~216 while look-ups' stale records wait to be dropped (292-432 MB full;
    docs/performance-replay.md, "Event index memory").

    The order is a deque of event ids, oldest first. A look-up does not move an id in it: it
    appends the id again and counts the record it leaves stale, which eviction skips and, once
    the stale records outnumber the entries, `_sweep` drops, a few records a look-up, round the
    order and round again (the order stays under ~2.4 times the entries). A compaction of the
    whole order at once held the lock, and so every find and read of the replay service, for
    3-11 s at 2M entries. The sweep keeps what it passed in `_swept`, the order being
    `_swept + _order`; an entry's `_SWEPT` bit says which of the two holds its last record (equal
    to `_parity`: `_swept`), so a record met is known stale or not, wherever its id's others are."""

    def __init__(self, capacity: int = 2_000_000) -> None:
        self.capacity = capacity
        self._entries: dict[str, int] = {}
        """event id -> match number << _NUMBER_SHIFT | its _SWEPT bit | seq."""
        self._order: deque[str] = deque()
        """The records this round of the sweep has not passed, then those appended since (the
        newest last): empty only when the index is."""
        self._swept: deque[str] = deque()
        """The records this round passed (the oldest), stale ones dropped."""
        self._stale: dict[str, int] = {}
        """event id -> its records in `_order` before its last one (looked up since)."""
        self._stale_swept: dict[str, int] = {}
        """event id -> its records in `_swept` that were its last when the sweep passed them."""
        self._parity = 0
        """`_SWEPT` or 0, flipped each round: an entry whose bit equals it has its last record in `_swept`."""
        self._match_ids: dict[int, str] = {}
        self._numbers: dict[str, int] = {}
        self._held: dict[int, int] = {}
        """match number -> its entries: the number (and the match id) goes with the last one."""
        self._next_number = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def note(self, envelopes: Iterable[EventEnvelope]) -> None:
        with self._lock:
            entries, order, numbers, held = self._entries, self._order, self._numbers, self._held
            unswept = self._parity ^ _SWEPT
            match_id, number = None, 0
            for env in envelopes:
                seq = env.seq
                if not 0 <= seq <= _SEQ_MASK:  # no match comes near 4G events; below 0 only a foreign
                    continue  # record by hand (packed, it would name no match): found through its match only
                event_id = env.event_id
                if env.match_id != match_id:  # a call's envelopes are mostly one match's
                    match_id = env.match_id
                    number = numbers.get(match_id, -1)
                    if number < 0:
                        number = numbers[match_id] = self._next_number
                        self._match_ids[number] = match_id
                        held[number] = 0
                        self._next_number += 1
                old = entries.get(event_id)
                if old is None:
                    entries[event_id] = number << _NUMBER_SHIFT | unswept | seq
                    order.append(event_id)
                    held[number] += 1
                    continue
                # noted again: it keeps its place, as in an OrderedDict (and its record's bit)
                entries[event_id] = number << _NUMBER_SHIFT | old & _SWEPT | seq
                if old >> _NUMBER_SHIFT != number:  # moved to another match (again in its own: no count
                    held[number] += 1  # changes; released, its last entry took the number along)
                    self._release(old >> _NUMBER_SHIFT)
            while len(entries) > self.capacity:
                self._evict()

    def _evict(self) -> None:
        """Drop the least recently added or looked up entry (under the lock)."""
        while True:
            if self._swept:
                event_id, stale = self._swept.popleft(), self._stale_swept
            else:
                event_id, stale = self._order.popleft(), self._stale
            count = stale.get(event_id)
            if not count:  # its last record
                break
            if count == 1:
                del stale[event_id]
            else:
                stale[event_id] = count - 1
        self._release(self._entries.pop(event_id) >> _NUMBER_SHIFT)

    def _release(self, number: int) -> None:
        left = self._held[number] - 1
        if left:
            self._held[number] = left
        else:
            del self._held[number], self._numbers[self._match_ids.pop(number)]

    def get(self, event_id: str) -> EventLocation | None:
        with self._lock:
            packed = self._entries.get(event_id)
            if packed is None:
                return None
            order = self._order
            if order[-1] != event_id:  # (the last one used, again: already the most recent)
                if packed & _SWEPT == self._parity:  # its last record is in `_swept`: stale there now
                    stale = self._stale_swept
                    self._entries[event_id] = packed ^ _SWEPT
                else:
                    stale = self._stale
                stale[event_id] = stale.get(event_id, 0) + 1
                order.append(event_id)  # its most recent use
                if len(order) + len(self._swept) > 2 * len(self._entries) + _SWEEP:  # stale past live
                    self._sweep()
            return EventLocation(self._match_ids[packed >> _NUMBER_SHIFT], packed & _SEQ_MASK)

    def _sweep(self) -> None:
        """Pass the next `_SWEEP` records of `_order` (under the lock): a stale one is dropped, an
        id's last one moved to `_swept`, its place in the order kept. When `_order` is passed
        whole, a round is done: `_swept` is the order, to be swept again."""
        order, swept, stale, entries, parity = self._order, self._swept, self._stale, self._entries, self._parity
        for _ in range(_SWEEP):
            event_id = order.popleft()
            count = stale.get(event_id)
            if count:
                if count == 1:
                    del stale[event_id]
                else:
                    stale[event_id] = count - 1
            else:
                swept.append(event_id)
                entries[event_id] = entries[event_id] & ~_SWEPT | parity
            if not order:  # every record is in `_swept` (no stale one left in `_order`)
                self._order, self._swept = swept, order
                self._stale, self._stale_swept = self._stale_swept, stale
                self._parity = parity ^ _SWEPT  # every entry's bit is now the other's
                return


_SEQ_BITS = 32
_SEQ_MASK = (1 << _SEQ_BITS) - 1
_SWEPT = 1 << _SEQ_BITS
"""The bit of an index entry saying which of the order's two deques holds its last record."""
_NUMBER_SHIFT = _SEQ_BITS + 1
"""An index entry's match number, above its bit and its seq: one int of 32 bytes while all fit in
60 bits (numbers are not reused: 2^27 matches noted in one process; past that, 36 bytes)."""
_SWEEP = 4
"""Records `EventIndex._sweep` passes a look-up, while the stale ones outnumber the entries: a
round of the order passes every stale record, and takes a third of its length in look-ups, each
adding one (measured worst, looking every id up in turn: the order 2.33 times the entries)."""


class StoreSource:
    """The hot source: an EventStore (Redis Streams in production).

    `find` looks in its index, and on a miss reads the partition streams from
    where it stopped last time, indexing what it passes; so the cost of finding
    an event id is paid once per event, not once per question.
    """

    def __init__(self, store: EventStore, index: EventIndex | None = None, chunk: int = 1000) -> None:
        self.store = store
        self.index = index or EventIndex()
        self._chunk = chunk
        self._cursors = ["0-0"] * store.partitions
        self._scan = threading.Lock()

    def read(self, match_id: str, after: int = 0) -> list[EventEnvelope]:
        envelopes = self.store.read(match_id, after=after)
        self.index.note(envelopes)
        return envelopes

    def version(self, match_id: str) -> int:
        """The match's version: kept when its events are trimmed."""
        return self.store.version(match_id)

    def find(self, event_id: str) -> EventLocation | None:
        found = self.index.get(event_id)
        if found is None:
            self._catch_up()
            found = self.index.get(event_id)
        return found

    def _catch_up(self) -> None:
        with self._scan:
            for partition in range(self.store.partitions):
                while True:
                    page = self.store.read_partition_page(partition, self._cursors[partition], self._chunk)
                    # one no event can be read from (a foreign XADD's) is told once and gone past:
                    # the cursor moves to the last entry read (before session 34 it failed every find)
                    tell_unreadable(page.unreadable, reader="replay_event_index")
                    self.index.note(e.envelope for e in page.entries)
                    self._cursors[partition] = page.last_entry_id
                    if not page.more:
                        break


class MemorySource:
    """An in-memory archive: the cold source in unit tests and for imported files.

    Holds serialized bytes, like the real stores, so callers cannot change it by
    mutating what they read.
    """

    def __init__(self) -> None:
        self._matches: dict[str, list[bytes]] = {}
        self._index = EventIndex()
        self._lock = threading.Lock()

    def add(self, envelopes: Iterable[EventEnvelope]) -> None:
        envelopes = sorted(envelopes, key=lambda e: e.seq)
        with self._lock:
            for env in envelopes:
                stored = self._matches.setdefault(env.match_id, [])
                if env.seq == len(stored) + 1:
                    stored.append(env.SerializeToString())
        self._index.note(envelopes)

    def read(self, match_id: str, after: int = 0) -> list[EventEnvelope]:
        with self._lock:
            blobs = list(self._matches.get(match_id, [])[max(after, 0):])
        return [EventEnvelope.FromString(b) for b in blobs]

    def find(self, event_id: str) -> EventLocation | None:
        return self._index.get(event_id)


class ArchiveSource:
    """The cold source: the projection's SQL event archive.

    `read_archive(session, match_id, after)` and `find_archived(session, event_id)`
    query the archive; `session_factory` opens a (read) session per call, so
    nothing connects before the first question.
    """

    def __init__(
        self,
        session_factory: Callable[[], Any],
        read_archive: Callable[[Any, str, int], Iterable[EventEnvelope]],
        find_archived: Callable[[Any, str], EventLocation | None] | None = None,
    ) -> None:
        self._sessions = session_factory
        self._read = read_archive
        self._find = find_archived
        self._index = EventIndex(capacity=200_000)

    def read(self, match_id: str, after: int = 0) -> list[EventEnvelope]:
        with self._sessions() as session:
            envelopes = sorted(self._read(session, match_id, after), key=lambda e: e.seq)
        self._index.note(envelopes)
        return envelopes

    def find(self, event_id: str) -> EventLocation | None:
        found = self._index.get(event_id)
        if found is not None or self._find is None:
            return found
        with self._sessions() as session:
            return self._find(session, event_id)


class LayeredSource:
    """Hot first, then cold: a trimmed (or never hot) match is read from the archive.

    A match whose hot stream does not start where asked (trimmed since) is read
    whole from the cold source, never stitched from two halves.
    """

    def __init__(self, hot: EventSource, cold: EventSource | None = None) -> None:
        self.hot = hot
        self.cold = cold

    def read(self, match_id: str, after: int = 0) -> list[EventEnvelope]:
        envelopes = self.hot.read(match_id, after)
        if envelopes and envelopes[0].seq == after + 1:
            return envelopes
        if self.cold is None:
            return envelopes
        if after > 0 and not envelopes:
            # Catching up a match seen running: nothing new in the hot stream means nothing new
            # at all (and no SQL query per question), unless it went on, ended and was trimmed
            # since: its version outlives the trim.
            version = getattr(self.hot, "version", None)
            if version is None or version(match_id) <= after:
                return envelopes
        cold = self.cold.read(match_id, after)
        return cold if cold else envelopes

    def version(self, match_id: str) -> int:
        """The hot store's version of the match (kept by a trim), 0 when it has none or no versions."""
        version = getattr(self.hot, "version", None)
        return 0 if version is None else int(version(match_id))

    def find(self, event_id: str) -> EventLocation | None:
        found = self.hot.find(event_id)
        if found is None and self.cold is not None:
            found = self.cold.find(event_id)
        return found


def sql_archive_source(database_url: str) -> ArchiveSource | None:
    """`ArchiveSource` bound to the projection's event archive (famiglia.readmodels).

    None when that package is not installed. A database the projection has not
    created yet (no archive table) reads as an empty archive, with a warning,
    so the replay service still serves hot matches. Any other failure is raised, not
    read as empty: an archived match would be answered NOT_FOUND, which a client
    believes. A database out of reach (`database_away`) is then UNAVAILABLE, which it
    retries (a statement timeout too); a query it fails on (a schema it lacks) INTERNAL, logged. An id
    holding a NUL is in no archive (PostgreSQL's text holds none; the match ids admitted
    neither) and is not asked about: the driver would refuse it, INTERNAL for a mere typo.
    """
    try:
        from famiglia.readmodels import archived_envelopes, make_engine, read_session
        from famiglia.readmodels.tables import ArchivedEvent
    except ImportError:
        return None
    from sqlalchemy.exc import OperationalError, ProgrammingError
    from sqlmodel import select

    engine = make_engine(database_url)

    def read(session: Any, match_id: str, after: int) -> list[EventEnvelope]:
        if "\x00" in match_id:  # no archived id holds one (PostgreSQL's text cannot): not sent
            return []
        try:
            return archived_envelopes(session, match_id, after=after)
        except (OperationalError, ProgrammingError) as exc:
            if not _no_archive_table(exc):
                raise
            _log().warning("event_archive_unreadable", error=str(exc).splitlines()[0])
            return []

    def find(session: Any, event_id: str) -> EventLocation | None:
        if "\x00" in event_id:
            return None
        try:
            row = session.exec(select(ArchivedEvent.match_id, ArchivedEvent.seq)
                               .where(ArchivedEvent.event_id == event_id)).first()
        except (OperationalError, ProgrammingError) as exc:
            if not _no_archive_table(exc):
                raise
            _log().warning("event_archive_unreadable", error=str(exc).splitlines()[0])
            return None
        return None if row is None else EventLocation(str(row[0]), int(row[1]))

    return ArchiveSource(lambda: read_session(engine), read, find)


def _no_archive_table(exc: BaseException) -> bool:
    """Whether a failed archive query says the table is not there (the projection has not run
    yet): PostgreSQL's `undefined_table` (42P01), SQLite's "no such table". A database away
    says otherwise (a refused connection names no table)."""
    orig = getattr(exc, "orig", None)
    sqlstate = pg_sqlstate(orig)
    if sqlstate:
        return bool(sqlstate == "42P01")
    return str(orig if orig is not None else exc).startswith("no such table")


def _log() -> Any:
    from famiglia.telemetry import get_logger

    return get_logger("famiglia.replay")
