"""Partition stream entries no event can be read from, and how every reader tells them.

The store never writes one (`append.lua` writes a whole envelope naming its match and seq); only a
foreign `XADD` does: no `e` field, bytes that do not decode, or bytes that decode to an envelope
naming no match or no seq (an empty `e` decodes to an empty envelope). Every reader of the
partition streams (the consumer groups, `RedisEventStore.read_partition_page`, the rebuild, the
replay's index, the bots dispatcher's recovery) leaves such an entry out, logs it
`partition_entry_unreadable` at error, and goes past it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from famiglia.telemetry import get_logger
from famiglia.v1.envelope_pb2 import EventEnvelope

log = get_logger("famiglia.eventstore.unreadable")

HINT = "not an event envelope: written by something other than the event store"


@dataclass(frozen=True)
class UnreadableEntry:
    """A partition stream entry no envelope can be read from (see the module)."""

    partition: int
    entry_id: str
    reason: str


class NotAnEvent(ValueError):
    """Bytes that decode to an envelope no event store wrote: no match, or no seq."""


def read_envelope(raw: bytes) -> EventEnvelope:
    """A partition entry's envelope; raises (DecodeError, NotAnEvent) for one the store never wrote.
    Before session 34 an empty `e` became an empty envelope, which the projector skipped as a
    redelivery (seq 0) and acked, with no dead letter."""
    envelope = EventEnvelope.FromString(raw)
    if not envelope.match_id or envelope.seq < 1:
        raise NotAnEvent(f"an envelope naming no match or no seq (match {envelope.match_id!r}, seq {envelope.seq})")
    return envelope


def unreadable_reason(exc: BaseException) -> str:
    """Why an entry could not be read, short enough for a log line and a dead letter."""
    reason = "no `e` field" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
    return reason[:300]


def readable(envelope: EventEnvelope) -> bool:
    """Whether a decoded envelope names a match and a seq, as every envelope the store writes does."""
    return bool(envelope.match_id) and envelope.seq >= 1


def split_entries(partition: int, entries: Iterable[tuple[Any, Any]],
                  unreadable: list[UnreadableEntry]) -> list[tuple[str, EventEnvelope]]:
    """(entry id, envelope) of each stream entry (`fields` a dict, or the raw flat list); one none can
    be read from goes to `unreadable` instead. Entries without fields (deleted: MAXLEN) are skipped."""
    got: list[tuple[str, EventEnvelope]] = []
    for entry_id, fields in entries:
        if entry_id is None or not fields:
            continue
        entry_text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
        try:
            raw = fields[b"e"] if isinstance(fields, Mapping) else _field(fields, b"e")
            got.append((entry_text, read_envelope(raw)))
        except Exception as exc:  # noqa: BLE001 - whatever a foreign XADD wrote
            unreadable.append(UnreadableEntry(partition, entry_text, unreadable_reason(exc)))
    return got


def tell_unreadable(found: Iterable[UnreadableEntry], **where: Any) -> int:
    """Log each entry `partition_entry_unreadable` at error, with who met it (`where`); how many."""
    told = 0
    for entry in found:
        log.error("partition_entry_unreadable", **where, partition=entry.partition, entry_id=entry.entry_id,
                  reason=entry.reason, hint=HINT)
        told += 1
    return told


def _field(fields: list[bytes], name: bytes) -> bytes:
    """A field of a raw stream entry ([name, value, name, value, ...])."""
    for i in range(0, len(fields) - 1, 2):
        if fields[i] == name:
            return fields[i + 1]
    raise KeyError(name)
