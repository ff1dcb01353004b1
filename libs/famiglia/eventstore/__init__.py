"""Event store: the port and its adapters (in-memory, Redis Streams)."""

from .port import (
    DEFAULT_PARTITIONS,
    AppendResult,
    ConcurrencyConflict,
    EventStore,
    MatchExists,
    PartitionEntry,
    partition_of,
)

__all__ = [
    "DEFAULT_PARTITIONS",
    "AppendResult",
    "ConcurrencyConflict",
    "EventStore",
    "MatchExists",
    "PartitionEntry",
    "partition_of",
]
