"""In-memory event store for unit tests and single-process tools.

It mirrors `RedisEventStore` rule for rule (the contract suite binds both):
events are kept as serialized bytes, so a caller mutating an envelope after
appending (or after reading) cannot change what the store holds, exactly as
with Redis. One lock guards everything; a Condition on it wakes `wait_for`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NoReturn, TypeVar

from famiglia.v1.envelope_pb2 import EventEnvelope

from .port import DEFAULT_PARTITIONS, AppendResult, ConcurrencyConflict, EventStore, PartitionEntry, entry_key
from .rematch_asks import FinishedMatchArchived, RematchPending

_T = TypeVar("_T")


def validate_batch(match_id: str, expected_version: int, events: Sequence[EventEnvelope]) -> None:
    """Refuse a malformed batch before anything is written (shared by both adapters).

    The stream entry id *is* the envelope's seq, so a batch whose seqs do not
    continue `expected_version` one by one, or whose envelopes name another
    match, is a writer bug; it is refused with ValueError rather than stored
    under ids that disagree with the envelopes. An empty batch is refused too:
    there is no version to give it. Every append pays for this check, so the
    pass only compares; `_refuse` finds the reason once something is wrong.
    """
    seq = expected_version
    for envelope in events:
        seq += 1
        if envelope.seq != seq or envelope.match_id != match_id:
            break
    else:
        if seq > expected_version >= 0:
            return
    _refuse(match_id, expected_version, events)


def validate_write_out(match_id: str, expected_version: int, block: Sequence[EventEnvelope],
                       placed: Sequence[int], events: Sequence[EventEnvelope]) -> int:
    """Refuse a malformed `write_out` before anything is written (shared by both adapters);
    returns the version the block continues (the position less the staged events).

    The block and the events continue that version seq by seq, as a batch does; each staged
    event is placed once, inside the block; and the command has events of its own."""
    version = expected_version - len(placed)
    if not events:
        raise ValueError(f"match {match_id}: a write-out needs a command's events")
    validate_batch(match_id, version, [*block, *events])
    if len(set(placed)) != len(placed) or not all(version < seq <= version + len(block) for seq in placed):
        raise ValueError(f"match {match_id}: staged events placed at {list(placed)}, "
                         f"not once each in the block {version + 1}..{version + len(block)}")
    return version


def _refuse(match_id: str, expected_version: int, events: Sequence[EventEnvelope]) -> NoReturn:
    """The ValueError for a batch validate_batch found malformed, checks in order."""
    if expected_version < 0:
        raise ValueError(f"match {match_id}: expected version must be >= 0, got {expected_version}")
    if not events:
        raise ValueError(f"match {match_id}: nothing to append")
    for offset, envelope in enumerate(events, start=1):
        if envelope.match_id != match_id:
            raise ValueError(f"match {match_id}: envelope {offset} names match {envelope.match_id!r}")
        if envelope.seq != expected_version + offset:
            raise ValueError(
                f"match {match_id}: envelope {offset} has seq {envelope.seq}, "
                f"expected {expected_version + offset}"
            )
    raise AssertionError(f"match {match_id}: batch refused without a reason")


@dataclass
class _Match:
    events: list[bytes] = field(default_factory=list)
    #: kept when the events are trimmed, so stale appends are still refused
    version: int = 0
    #: events[0] has seq `base + 1` (base > 0 once trimmed)
    base: int = 0
    #: staged events (seqs version + 1, ...) and their command ids, for the next append
    staged: list[tuple[bytes, str]] = field(default_factory=list)

    @property
    def position(self) -> int:
        return self.version + len(self.staged)


class InMemoryEventStore(EventStore):
    """Thread-safe store with the same semantics as the Redis adapter."""

    def __init__(self, partitions: int = DEFAULT_PARTITIONS) -> None:
        if partitions < 1:
            raise ValueError("partitions must be >= 1")
        self.partitions = partitions
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._matches: dict[str, _Match] = {}
        self._commands: dict[tuple[str, str], tuple[int, int]] = {}
        self._partition_streams: list[list[tuple[str, str, int, bytes]]] = [[] for _ in range(partitions)]
        self._rematch_pending: Callable[[str], bool] = lambda _match_id: False
        self._trimmed_with: list[Callable[[str], None]] = []

    def append(
        self,
        match_id: str,
        expected_version: int,
        events: Sequence[EventEnvelope],
        command_id: str = "",
    ) -> AppendResult:
        validate_batch(match_id, expected_version, events)
        # Serialize outside the lock: it is the slow part and touches no shared state.
        blobs = [event.SerializeToString() for event in events]
        with self._changed:
            match = self._at(match_id, command_id, expected_version)
            if isinstance(match, AppendResult):
                return match
            partition = self._partition_streams[self.partition_of(match_id)]
            staged = [blob for blob, _command in match.staged]
            for seq, blob in enumerate(staged + blobs, start=match.version + 1):
                match.events.append(blob)
                partition.append((f"{len(partition) + 1}-0", match_id, seq, blob))
            match.staged.clear()
            first, last = expected_version + 1, expected_version + len(blobs)
            match.version = last
            if command_id:
                self._commands[(match_id, command_id)] = (first, last)
            self._changed.notify_all()
        return AppendResult(version=last, first_seq=first, last_seq=last)

    def stage(
        self,
        match_id: str,
        expected_version: int,
        events: Sequence[EventEnvelope],
        command_id: str = "",
    ) -> AppendResult:
        validate_batch(match_id, expected_version, events)
        if expected_version == 0:
            raise ValueError(f"match {match_id}: nothing to stage on before its first event")
        blobs = [event.SerializeToString() for event in events]
        with self._lock:
            seen = self._first_answer(match_id, command_id)
            if seen is not None:
                return seen
            match = self._matches.get(match_id)
            position = match.position if match else 0
            if position != expected_version:
                raise ConcurrencyConflict(match_id, expected_version, position)
            assert match is not None  # position == expected_version > 0
            match.staged.extend((blob, command_id) for blob in blobs)
            first, last = expected_version + 1, expected_version + len(blobs)
            if command_id:
                self._commands[(match_id, command_id)] = (first, last)
        return AppendResult(version=last, first_seq=first, last_seq=last)

    def write_out(
        self,
        match_id: str,
        expected_version: int,
        block: Sequence[EventEnvelope],
        placed: Sequence[int],
        events: Sequence[EventEnvelope],
        command_id: str = "",
    ) -> AppendResult:
        version = validate_write_out(match_id, expected_version, block, placed, events)
        blobs = [event.SerializeToString() for event in [*block, *events]]
        with self._changed:
            match = self._at(match_id, command_id, expected_version)
            if isinstance(match, AppendResult):
                return match
            if match.version != version:
                raise ValueError(f"match {match_id}: {len(match.staged)} events staged, "
                                 f"the block places {len(placed)}")
            moved = self._moved_records(match_id, match, placed)
            partition = self._partition_streams[self.partition_of(match_id)]
            for seq, blob in enumerate(blobs, start=version + 1):
                match.events.append(blob)
                partition.append((f"{len(partition) + 1}-0", match_id, seq, blob))
            match.staged.clear()
            first, last = version + len(block) + 1, version + len(blobs)
            match.version = last
            for staged_command, staged_first, staged_last in moved:
                self._commands[(match_id, staged_command)] = (staged_first, staged_last)
            if command_id:
                self._commands[(match_id, command_id)] = (first, last)
            self._changed.notify_all()
        return AppendResult(version=last, first_seq=first, last_seq=last)

    def _moved_records(self, match_id: str, match: _Match, placed: Sequence[int]) -> list[tuple[str, int, int]]:
        """(command id, first, last) of each staged command where `placed` puts its events: its
        record says how many it has, and they must stay one after another (call with the lock
        held). A command id rides on a staged command's first event, its record naming it."""
        moved = []
        for k, (_blob, command_id) in enumerate(match.staged):
            record = self._commands.get((match_id, command_id)) if command_id else None
            if record is None or record[0] != match.version + k + 1:
                continue
            seqs = list(placed[k:k + record[1] - record[0] + 1])
            if seqs != list(range(seqs[0], seqs[0] + len(seqs))):
                raise ValueError(f"match {match_id}: staged command {command_id!r} placed apart, at {seqs}")
            moved.append((command_id, seqs[0], seqs[-1]))
        return moved

    def _at(self, match_id: str, command_id: str, expected_version: int) -> _Match | AppendResult:
        """A known command id's first answer, else the match, at `expected_version` or a
        ConcurrencyConflict (call with the lock held)."""
        seen = self._first_answer(match_id, command_id)
        if seen is not None:
            return seen
        match = self._matches.setdefault(match_id, _Match())
        if match.position != expected_version:
            raise ConcurrencyConflict(match_id, expected_version, match.position)
        return match

    def _first_answer(self, match_id: str, command_id: str) -> AppendResult | None:
        """A command id's first answer, if it has one (call with the lock held)."""
        seen = self._commands.get((match_id, command_id)) if command_id else None
        if seen is None:
            return None
        return AppendResult(version=seen[1], first_seq=seen[0], last_seq=seen[1], duplicate=True)

    def read_staged(self, match_id: str, after: int = 0) -> list[EventEnvelope]:
        with self._lock:
            match = self._matches.get(match_id)
            if match is None:
                return []
            blobs = [blob for blob, _command in match.staged[max(after - match.version, 0):]]
        return [EventEnvelope.FromString(blob) for blob in blobs]

    def read(self, match_id: str, after: int = 0, limit: int | None = None) -> list[EventEnvelope]:
        if limit is not None and limit < 0:
            raise ValueError("limit must be >= 0")
        with self._lock:
            blobs = self._tail(match_id, after, limit)
        return [EventEnvelope.FromString(blob) for blob in blobs]

    def version(self, match_id: str) -> int:
        with self._lock:
            match = self._matches.get(match_id)
            return match.version if match else 0

    def match_ids(self, cursor: int = 0, count: int = 500) -> tuple[int, list[str]]:
        with self._lock:
            known = sorted(self._matches)
        page = known[cursor:cursor + max(count, 1)]
        after = cursor + len(page)
        return (after if after < len(known) else 0), page

    def wait_for(self, match_id: str, after: int, timeout_ms: int) -> list[EventEnvelope]:
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        with self._changed:
            while True:
                blobs = self._tail(match_id, after, None)
                remaining = deadline - time.monotonic()
                if blobs or remaining <= 0:
                    break
                self._changed.wait(remaining)
        return [EventEnvelope.FromString(blob) for blob in blobs]

    def read_partition(
        self, partition: int, after_entry_id: str = "0-0", count: int = 100
    ) -> list[PartitionEntry]:
        if not 0 <= partition < self.partitions:
            raise ValueError(f"partition {partition} out of range 0..{self.partitions - 1}")
        after = entry_key(after_entry_id)
        with self._lock:
            stream = list(self._partition_streams[partition])
        entries = [entry for entry in stream if entry_key(entry[0]) > after][:count]
        return [
            PartitionEntry(partition=partition, entry_id=entry_id, envelope=EventEnvelope.FromString(blob))
            for entry_id, _match_id, _seq, blob in entries
        ]

    def trim(self, match_id: str) -> int:
        """Drop a finished match's events but keep its version (as the Redis adapter does).

        Returns how many events were dropped. Command ids are forgotten with
        the events; a retried command then meets ConcurrencyConflict instead.
        A match whose rematch's creation is pending (the rematch asks bound to
        this store, `keep_rematches`) is kept: RematchPending, nothing dropped.
        """
        with self._lock:
            match = self._matches.get(match_id)
            if match is None:
                return 0
            if self._rematch_pending(match_id):
                raise RematchPending(match_id)
            dropped = len(match.events)
            match.base += dropped
            match.events.clear()
            for key in [key for key in self._commands if key[0] == match_id]:
                del self._commands[key]
            for drop in self._trimmed_with:
                drop(match_id)
            return dropped

    def keep_rematches(self, pending: Callable[[str], bool]) -> None:
        """Bind the rematch asks (`InMemoryRematchAsks(store=self)`): `pending(match_id)`, asked
        by `trim` under the lock, keeps a match whose rematch is made from it, as trim.lua does."""
        self._rematch_pending = pending

    def also_trim(self, drop: Callable[[str], None]) -> None:
        """Bind a store of the match's other keys (`InMemoryChatStore(store=self)`): `trim` calls
        `drop(match_id)` under the lock, as trim.lua deletes the chat stream in its own write."""
        self._trimmed_with.append(drop)

    def unless_archived(self, match_id: str, write: Callable[[], _T]) -> _T:
        """`write()` under the lock unless the match is archived (trimmed: its events dropped, its
        version kept), which raises FinishedMatchArchived, nothing written: of a write and a trim,
        whichever takes the lock first wins, as with the Redis scripts."""
        with self._lock:
            match = self._matches.get(match_id)
            if match is not None and match.version > 0 and not match.events:
                raise FinishedMatchArchived(match_id)
            return write()

    def _tail(self, match_id: str, after: int, limit: int | None) -> list[bytes]:
        """Blobs with seq > after; the caller holds the lock."""
        match = self._matches.get(match_id)
        if match is None:
            return []
        start = max(after - match.base, 0)
        end = None if limit is None else start + limit
        return match.events[start:end]
