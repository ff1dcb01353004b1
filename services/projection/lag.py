"""Projection lag: how far the read models trail the event streams.

Per partition, lag = time of the newest event in the stream minus time of the
newest event projected from it (the shared SQL checkpoint, so every consumer
reports the group's lag, not only its own); 0 when the checkpoint is at the
stream's top. The largest is the service's lag. Reported as the OpenTelemetry
gauge `famiglia.projection.lag` (milliseconds, attribute `partition`, plus one
without it for the maximum) and in a `projection_lag` log line.

With the database away the checkpoints cannot be read: the lag is then measured against the
checkpoints last read, from the streams' tops (Redis), and no less than the age of the oldest
entry the consumer keeps of the partition (now minus its event time), so it grows through an
outage. Before, the gauge kept its value from before the outage (often 0): an alert on it never fired.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from opentelemetry.metrics import Meter
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import select

from famiglia.eventstore import PartitionEntry
from famiglia.eventstore.redis_store import RedisEventStore, envelope_or_time
from famiglia.readmodels.db import read_session
from famiglia.readmodels.tables import Checkpoint
from famiglia.telemetry import get_logger
from famiglia.telemetry.metrics import meter as service_meter
from famiglia.telemetry.metrics import tally

from .projector import entry_key

log = get_logger("famiglia.projection.lag")


@dataclass(frozen=True)
class LagReport:
    max_lag_ms: int
    by_partition: dict[int, int]
    backlog_partitions: int
    checkpoints_read: bool = True
    """False: the database was away, and the lag is the streams' against the checkpoints last read
    and the age of the entries kept (module docstring)."""


class LagMonitor:
    """Measures the lag (`measure`, logged each time) and counts the events projected; its
    instruments are `meter`'s, else the service's (`famiglia.telemetry.metrics.meter`): none at
    all when metrics are off, as every service's, not OpenTelemetry's no-op ones, whose every
    call still costs a call and an attributes dict."""

    def __init__(self, store: RedisEventStore, engine: Engine, meter: Meter | None = None,
                 on_report: Callable[[LagReport], None] | None = None,
                 clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.store = store
        self.engine = engine
        self.clock_ms = clock_ms
        """Wall-clock milliseconds, as events' timestamps: the age of a kept entry."""
        self._checkpoints: dict[int, tuple[str, int]] | None = None
        """Each partition's checkpoint (last entry id, its event time) as last read (None: never)."""
        meter = meter or service_meter("famiglia.projection")
        self._gauge = None if meter is None else meter.create_gauge(
            "famiglia.projection.lag", unit="ms", description="newest event time minus newest projected event time")
        self._events = None if meter is None else meter.create_counter(
            "famiglia.projection.events", unit="{event}", description="events applied to the read models")
        self._held_back = None if meter is None else meter.create_gauge(
            "famiglia.projection.held_back", unit="{consumer}",
            description="1 while this consumer reads nothing new because the read models refuse batches")
        self._unreadable = None if meter is None else tally(
            meter, "famiglia.projection.unreadable_entries", unit="{entry}",
            description="partition entries no event could be read from, recorded as dead letters and acked")
        self.on_report = on_report
        self.last: LagReport | None = None

    def projected(self, newest_event_ms: int, count: int = 1) -> None:
        if self._events is not None:
            self._events.add(count)

    def unreadable(self, count: int) -> None:
        """`count` partition entries no event could be read from were recorded and acked."""
        if self._unreadable is not None:
            self._unreadable.add((), count)

    def held_back(self, held: bool) -> None:
        """This consumer stopped (True) or started again (False) reading new entries (the runner's
        back-pressure while the database refuses its batches)."""
        if self._held_back is not None:
            self._held_back.set(int(held))

    def measure(self, kept: Iterable[PartitionEntry] = ()) -> LagReport:
        """The lag now; `kept`, the entries the consumer holds unprojected, count only while the
        database is away (module docstring): otherwise the checkpoints say."""
        tops = self.store.partition_tops()
        try:
            with read_session(self.engine) as session:
                read = {c.partition: (c.last_entry_id, c.last_event_ms or 0)
                        for c in session.exec(select(Checkpoint)).all()}
        except SQLAlchemyError as exc:
            return self._report(self._outage_lag(tops, kept), checkpoints_read=False, reason=exc)
        self._checkpoints = read
        return self._report(self._against(tops, read))

    def _against(self, tops: dict[int, PartitionEntry], checkpoints: dict[int, tuple[str, int]]) -> dict[int, int]:
        """Each partition's lag: its top against its checkpoint; none (or no event time), the span
        of what waits in its stream, from the oldest event."""
        keys = self.store.keys
        by_partition: dict[int, int] = {}
        needs_first = []
        for p in range(self.store.partitions):
            top = tops.get(p)
            if top is None:
                by_partition[p] = 0
                continue
            top_id = top.entry_id
            newest_ms = top.envelope.timestamp.ToMilliseconds()
            checkpoint = checkpoints.get(p)
            if checkpoint is not None and entry_key(checkpoint[0]) >= entry_key(top_id):
                by_partition[p] = 0
            elif checkpoint is not None and checkpoint[1]:
                by_partition[p] = max(0, newest_ms - checkpoint[1])
            else:
                by_partition[p] = newest_ms
                needs_first.append(p)
        if needs_first:  # nothing projected yet: measure from the oldest event waiting
            with self.store.client.pipeline(transaction=False) as pipe:
                for p in needs_first:
                    pipe.xrange(keys.partition_stream(p), count=1)
                for p, first in zip(needs_first, pipe.execute(), strict=True):
                    if first:
                        first_ms = envelope_or_time(*first[0]).timestamp.ToMilliseconds()
                        by_partition[p] = max(0, by_partition[p] - first_ms)
        return by_partition

    def _outage_lag(self, tops: dict[int, PartitionEntry], kept: Iterable[PartitionEntry]) -> dict[int, int]:
        """Each partition's lag without the checkpoints: its top against the checkpoints last read,
        by the same rules (a partition without one: its stream's span; none read yet: 0), and at
        least the age of the oldest entry kept of it. Before, a partition without a checkpoint
        read 0 here, so the gauge fell to 0 at an outage for the partitions furthest behind."""
        if self._checkpoints is None:
            by_partition = dict.fromkeys(range(self.store.partitions), 0)
        else:
            by_partition = self._against(tops, self._checkpoints)
        now = self.clock_ms()
        for entry in kept:
            p = entry.partition
            by_partition[p] = max(by_partition.get(p, 0), now - entry.envelope.timestamp.ToMilliseconds())
        return by_partition

    def _report(self, by_partition: dict[int, int], checkpoints_read: bool = True,
                reason: BaseException | None = None) -> LagReport:
        report = LagReport(max(by_partition.values(), default=0), by_partition,
                           sum(1 for v in by_partition.values() if v > 0), checkpoints_read)
        if self._gauge is not None:
            for p, lag in by_partition.items():
                self._gauge.set(lag, {"partition": p})
            self._gauge.set(report.max_lag_ms)
        if checkpoints_read:
            log.info("projection_lag", lag_ms=report.max_lag_ms, partitions_behind=report.backlog_partitions)
        else:  # at warning: for a consumer with nothing to project, the only line telling the outage
            log.warning("projection_lag", lag_ms=report.max_lag_ms, partitions_behind=report.backlog_partitions,
                        checkpoints="unread", reason=f"{type(reason).__name__}: {reason}".replace("\n", " ")[:300])
        self.last = report
        if self.on_report is not None:
            self.on_report(report)
        return report
