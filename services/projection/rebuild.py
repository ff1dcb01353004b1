"""Rebuild every read model from the partition streams, from nothing.

The streams are read with XRANGE (no consumer group is touched), merged across
partitions by entry id, and fed to the same `Projector` as live consumption, so
a rebuild and an incremental build give equal tables. What the bots' runner
recorded about tournaments (name, status, configuration) does not come from the
streams and is kept.

The archive is the cold copy of events whose match streams were trimmed; the
partition streams keep every entry unless a MAXLEN was set. The rebuild refuses
to start when the archive holds more events than the streams (it would lose
them) unless forced.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sqlalchemy import delete, func
from sqlalchemy.engine import Engine
from sqlmodel import select

from famiglia.eventstore import PartitionEntry
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.readmodels.db import read_session, write_session
from famiglia.readmodels.tables import TABLES, ArchivedEvent, Tournament
from famiglia.telemetry import get_logger

from .projector import Projector, entry_key

log = get_logger("famiglia.projection.rebuild")


class RebuildRefused(RuntimeError):
    """Rebuilding would drop archived events the streams no longer hold."""


@dataclass(frozen=True)
class RebuildReport:
    entries: int
    applied: int
    matches_finished: int
    left_deferred: int
    """Entries whose earlier events were missing from the streams (trimmed): not projected."""


def stream_entries(store: RedisEventStore, chunk: int = 1000) -> Iterator[PartitionEntry]:
    """Every partition's entries, merged into one sequence by entry id (append time)."""

    def one(partition: int) -> Iterator[tuple[tuple[int, int], int, PartitionEntry]]:
        after = "0-0"
        while True:
            entries = store.read_partition(partition, after_entry_id=after, count=chunk)
            for entry in entries:
                yield entry_key(entry.entry_id), partition, entry
            if len(entries) < chunk:
                return
            after = entries[-1].entry_id

    for _key, _partition, entry in heapq.merge(*(one(p) for p in range(store.partitions))):
        yield entry


def rebuild(store: RedisEventStore, engine: Engine, projector: Projector, *, force: bool = False,
            batch: int = 500, progress: Callable[[int], None] | None = None) -> RebuildReport:
    stream_total = sum(int(store.client.xlen(store.keys.partition_stream(p))) for p in range(store.partitions))
    with read_session(engine) as session:
        archived = int(session.exec(select(func.count()).select_from(ArchivedEvent)).one())
        recorded = [Tournament.model_validate(t.model_dump()) for t in session.exec(select(Tournament)).all()]
    if archived > stream_total and not force:
        raise RebuildRefused(
            f"the archive holds {archived} events but the partition streams only {stream_total}: "
            "a rebuild would lose the difference (use --force to rebuild anyway)")
    log.info("projection_rebuild_started", stream_entries=stream_total, archived=archived)
    with write_session(engine) as session:
        for table in reversed(TABLES):
            session.execute(delete(table))
    projector.cache.clear()
    entries = applied = finished = 0
    pending: list[PartitionEntry] = []
    deferred: list[PartitionEntry] = []
    for entry in stream_entries(store):
        pending.append(entry)
        if len(pending) >= batch:
            outcome = projector.project(deferred + pending)
            entries += len(pending)
            applied += len(outcome.applied)
            finished += len(outcome.finished_matches)
            deferred, pending = outcome.deferred, []
            if progress is not None:
                progress(entries)
    if pending or deferred:
        outcome = projector.project(deferred + pending)
        entries += len(pending)
        applied += len(outcome.applied)
        finished += len(outcome.finished_matches)
        deferred = outcome.deferred
    _restore_tournaments(engine, recorded)
    report = RebuildReport(entries, applied, finished, len(deferred))
    log.info("projection_rebuild_done", entries=entries, applied=applied, finished=finished,
             left_deferred=len(deferred))
    return report


def _restore_tournaments(engine: Engine, recorded: list[Tournament]) -> None:
    """Put back what the runner recorded; the derived fields stay as rebuilt."""
    with write_session(engine) as session:
        for old in recorded:
            row = session.get(Tournament, old.tournament_id)
            if row is None:
                row = Tournament(tournament_id=old.tournament_id, created_ms=old.created_ms, games=list(old.games),
                                 matches_finished=0)
            row.name, row.status, row.config, row.finished_ms = old.name, old.status, dict(old.config), old.finished_ms
            row.games = sorted(set(row.games) | set(old.games))
            row.created_ms = min(row.created_ms, old.created_ms)
            session.add(row)
