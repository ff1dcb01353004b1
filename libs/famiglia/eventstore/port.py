"""The event store port: one stream per match, versions counting up from 1.

Adapters: `memory_store.InMemoryEventStore` (unit tests) and
`redis_store.RedisEventStore` (Redis Streams + one Lua append). Both pass
tests/contracts/eventstore_contract.py.

Events travel as `famiglia.v1.EventEnvelope`. The writer builds the envelopes
with `seq` = expected_version + 1, + 2, ...; the store checks the expected
version, refuses a duplicate command id (returning the first answer) and
writes the match stream and the match's partition stream atomically.

Staged events (NP-H9): a command whose events only their own seat may see, and whose
very existence would tell the other seats something (an answer to a card window), is
`stage`d instead: its events take their seqs but wait outside the match stream, seen
by no reader, until the match's next `append` writes them to the streams, in order,
ahead of its own events. So the match's version (what every reader sees) moves only
with events the table may know of; the *position* (version + staged events) is what
writers check, and what `ConcurrencyConflict.actual` reports. A writer may instead
`write_out` the staged events itself, renumbered into a block of its making (a slot per
seat), ahead of a command's events: where an answer lands then tells nothing of when it
came in, nor of how many came before it.
"""

from __future__ import annotations

import zlib
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from famiglia.v1.envelope_pb2 import EventEnvelope

from .unreadable import UnreadableEntry

DEFAULT_PARTITIONS = 16


class ConcurrencyConflict(Exception):
    """The match moved on: `expected` is stale, `actual` is the position now (the version
    and the staged events)."""

    def __init__(self, match_id: str, expected: int, actual: int) -> None:
        super().__init__(f"match {match_id}: expected version {expected}, stream is at {actual}")
        self.match_id = match_id
        self.expected = expected
        self.actual = actual


class MatchExists(Exception):
    """A match id was created twice."""


@dataclass(frozen=True, slots=True)
class AppendResult:
    """`first_seq..last_seq` are the versions the command's events got.

    For a duplicate command id these are the versions of the first answer and
    `duplicate` is True; nothing was appended.
    """

    version: int
    first_seq: int
    last_seq: int
    duplicate: bool = False


_new_result = object.__new__
_set_version, _set_first, _set_last, _set_duplicate = (
    AppendResult.__dict__[name].__set__ for name in ("version", "first_seq", "last_seq", "duplicate"))


def appended(version: int, first_seq: int, last_seq: int) -> AppendResult:
    """`AppendResult(version, first_seq, last_seq)` through its slots: the frozen `__init__`
    sets each field with `object.__setattr__`, twice the cost, on every command's append."""
    result = _new_result(AppendResult)
    _set_version(result, version)
    _set_first(result, first_seq)
    _set_last(result, last_seq)
    _set_duplicate(result, False)
    return result


@dataclass(frozen=True, slots=True)
class PartitionEntry:
    """One entry of a partition stream, as consumers (projection, bots) read it."""

    partition: int
    entry_id: str
    envelope: EventEnvelope


@dataclass(frozen=True, slots=True)
class PartitionPage:
    """One page of a partition stream (`EventStore.read_partition_page`): the entries an event can
    be read from, and those none can (`famiglia.eventstore.unreadable`: only a foreign XADD writes
    one), left out of `entries`. A caller pages on from `last_entry_id`, the last entry read,
    readable or not, while `more`: the page came back full (it is short of `count` only where
    the stream ends, never for an entry left out)."""

    entries: list[PartitionEntry]
    unreadable: list[UnreadableEntry]
    last_entry_id: str
    """The last entry read, readable or not (the one asked after, when none was)."""
    more: bool
    """Whether the page read a full `count`, so more entries may follow."""


def entry_key(entry_id: str) -> tuple[int, int]:
    """Stream entry ids compare as (milliseconds, sequence), not as text."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


class PartitionRead(list[PartitionEntry]):
    """A consumer group read's entries (`PartitionConsumer.read`, `read_pending`), and `full`: the
    partitions Redis gave the `asked` count of entries, each with the last entry id it gave,
    readable or not. An entry left out (no event can be read from it, or deleted) makes the
    entries short of what Redis gave, yet there may be more (`full_partitions` asks this)."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.asked = count
        self.full: dict[int, str] = {}


def full_partitions(entries: Sequence[PartitionEntry], count: int) -> dict[int, str]:
    """The partitions that gave a full `count` in a read of at most that many each (so may have
    more), each with the last entry id it gave: where a read of pending entries goes on. For a
    consumer's read (`PartitionRead`), by what Redis gave, entries left out counted: before session
    34 a read short for an unreadable entry it left out looked like a partition's end, and a
    restarted consumer left the rest of its pending entries to an XAUTOCLAIM."""
    if isinstance(entries, PartitionRead) and entries.asked == count:
        return dict(entries.full)
    if len(entries) < count:
        return {}
    given: Counter[int] = Counter()
    last: dict[int, str] = {}
    for entry in entries:
        given[entry.partition] += 1
        last[entry.partition] = entry.entry_id
    return {partition: last[partition] for partition, n in given.items() if n >= count}


def partition_of(match_id: str, partitions: int = DEFAULT_PARTITIONS) -> int:
    """The fixed partition of a match: a stable hash, so every process agrees."""
    return zlib.crc32(match_id.encode()) % partitions


class EventStore(ABC):
    partitions: int = DEFAULT_PARTITIONS

    @abstractmethod
    def append(
        self,
        match_id: str,
        expected_version: int,
        events: Sequence[EventEnvelope],
        command_id: str = "",
    ) -> AppendResult:
        """Append atomically, or raise ConcurrencyConflict and write nothing.

        `expected_version` is the match's position: its version and its staged events,
        which this append writes to the streams first (their seqs come before `events`').
        A non-empty `command_id` already seen for this match returns the first
        answer with duplicate=True and appends nothing (even if the expected
        version is stale by now).
        """

    @abstractmethod
    def stage(
        self,
        match_id: str,
        expected_version: int,
        events: Sequence[EventEnvelope],
        command_id: str = "",
    ) -> AppendResult:
        """Keep events back from the streams until the match's next `append`, atomically.

        As `append` (the expected position, seqs continuing it, a command id's first
        answer), but nothing reaches the match or partition stream and the version does
        not move: `read`, `wait_for`, `version` and consumers see nothing of it. The
        result's `version` is the position after it. A match must exist to stage on.
        """

    @abstractmethod
    def write_out(
        self,
        match_id: str,
        expected_version: int,
        block: Sequence[EventEnvelope],
        placed: Sequence[int],
        events: Sequence[EventEnvelope],
        command_id: str = "",
    ) -> AppendResult:
        """Write the staged events out in `block`, at the seqs the writer gave them, then
        `events`, and drop the staged list, atomically; or raise ConcurrencyConflict and write
        nothing.

        `expected_version` is the position, as for `append`. `block` continues the version
        (seq = version + 1, ...) and holds every staged event, renumbered (only its `seq`
        changed), and whatever the writer puts between them; `placed` names each staged
        event's new seq, in the order they were staged (a command's events one after another).
        The staged commands' records move with their events, so a duplicate of one answers
        with its own events at their new seqs; `command_id` is recorded for `events` alone,
        and the result names them. A `placed` that does not match what is staged is a
        ValueError, nothing written. NP-H9: the command service's slots, one a seat.
        """

    @abstractmethod
    def read_staged(self, match_id: str, after: int = 0) -> list[EventEnvelope]:
        """The staged events with seq > after, in order (for writers catching up)."""

    @abstractmethod
    def read(self, match_id: str, after: int = 0, limit: int | None = None) -> list[EventEnvelope]:
        """Events with seq > after, in order (at most `limit`)."""

    @abstractmethod
    def version(self, match_id: str) -> int:
        """The match's current version (0 when it has no events); staged events not counted."""

    @abstractmethod
    def wait_for(self, match_id: str, after: int, timeout_ms: int) -> list[EventEnvelope]:
        """Block until there are events with seq > after, or the timeout passes ([] then)."""

    @abstractmethod
    def read_partition(self, partition: int, after_entry_id: str = "0-0", count: int = 100) -> list[PartitionEntry]:
        """Entries of one partition stream after an entry id, in order; one no event can be read
        from is left out (a page may then come back short of `count` with more to follow: a caller
        that pages uses `read_partition_page`)."""

    def read_partition_page(self, partition: int, after_entry_id: str = "0-0", count: int = 100) -> PartitionPage:
        """`count` entries of one partition stream after an entry id, in order, those no event can
        be read from apart (`PartitionPage`). A store that only ever holds its own entries (the
        in-memory one) has none."""
        entries = self.read_partition(partition, after_entry_id, count)
        return PartitionPage(entries, [], entries[-1].entry_id if entries else after_entry_id, len(entries) >= count)

    def exists(self, match_id: str) -> bool:
        return self.version(match_id) > 0

    def match_ids(self, cursor: int = 0, count: int = 500) -> tuple[int, list[str]]:
        """A page of the ids of the matches ever created here (trimmed ones too) from `cursor` (0:
        the start), and the next page's cursor (0: the walk is over). A walk of the whole store,
        for an operator's backfill, never on a call's path: a match may come twice, and one
        created during the walk may not come."""
        raise NotImplementedError(f"{type(self).__name__} cannot list its matches")

    def firsts(self, match_ids: Sequence[str]) -> dict[str, EventEnvelope]:
        """The first event (the creation) of each match, for an operator's backfill walking
        `match_ids`' pages; a match whose stream is gone (trimmed once archived) is left out. A
        store over the network reads a page's in a few round trips, not one a match."""
        found = {}
        for match_id in match_ids:
            first = self.read(match_id, limit=1)
            if first:
                found[match_id] = first[0]
        return found

    def partition_of(self, match_id: str) -> int:
        return partition_of(match_id, self.partitions)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""
