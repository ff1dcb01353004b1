"""The projection's use cases, free of gRPC and of process management."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.engine import Engine

from famiglia.engine.registry import Registry
from famiglia.eventstore import PartitionEntry
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.v1.envelope_pb2 import EventEnvelope

from . import schema
from .divergence import DivergedMatch, diverged_matches
from .lag import LagMonitor
from .parking import DeadLetters
from .projector import BatchOutcome, Projector
from .rebuild import RebuildReport, rebuild
from .retention import RetentionSweep
from .runner import ProjectionRunner
from .settings import ProjectionSettings


@dataclass
class ProjectionApp:
    store: RedisEventStore
    sql: Engine
    registry: Registry
    settings: ProjectionSettings

    def __post_init__(self) -> None:
        self.projector = Projector(self.sql, self.registry, cache_size=self.settings.cache_size,
                                   store_events=self.store_events)

    def store_events(self, match_id: str, after: int) -> list[EventEnvelope]:
        """A match's events past `after`, from the event store (a projector's `store_events`)."""
        return self.store.read(match_id, after=after)

    def migrate(self) -> None:
        schema.upgrade(self.sql)

    def lag_monitor(self) -> LagMonitor:
        return LagMonitor(self.store, self.sql)

    def runner(self, consumer: str = "", *, projector: Projector | None = None) -> ProjectionRunner:
        """A consumer of the group; each runner needs its own thread (or process)."""
        config = self.settings.runner_config(consumer)
        return ProjectionRunner(self.store, projector or Projector(self.sql, self.registry,
                                                                   cache_size=self.settings.cache_size,
                                                                   store_events=self.store_events),
                                config, lag=self.lag_monitor(),
                                retention=self.retention(config.retain_finished_ms, config.group))

    def retention(self, retain_ms: int, group: str = "projection") -> RetentionSweep | None:
        """The sweep that trims archived finished matches from Redis (None when `retain_ms` is 0)."""
        return RetentionSweep(self.store, self.sql, retain_ms, group) if retain_ms > 0 else None

    def rebuild(self, *, progress: Callable[[int], None] | None = None) -> RebuildReport:
        return rebuild(self.store, self.sql, self.projector, progress=progress)

    def diverged(self) -> list[DivergedMatch]:
        """The matches whose store and archive tell different histories (left for a rebuild)."""
        return diverged_matches(self.sql)

    def dead_letters(self) -> DeadLetters:
        return DeadLetters(self.store)

    def unpark(self, match_id: str) -> BatchOutcome:
        """Forget a parked match's record and project it from its own stream (once its cause is
        fixed). Running consumers stop parking its later entries at their next refresh. A
        projection that fails (the database away, the cause not fixed after all) puts the record
        back: the match stays named, not projected by nobody."""
        letters = self.dead_letters()
        record = letters.forget(match_id)
        projector = Projector(self.sql, self.registry, cache_size=self.settings.cache_size, park_after=1,
                              store_events=self.store_events)
        try:
            partition = self.store.partition_of(match_id)
            entries = [PartitionEntry(partition, "0-0", env) for env in self.store.read(match_id)]
            outcome = projector.project(entries)
        except BaseException:
            if record is not None:
                letters.restore(match_id, record)
            raise
        finally:
            projector.release()
        if outcome.parked:
            DeadLetters(self.store).record(outcome.parked, "unpark")
        return outcome

    def close(self) -> None:
        self.projector.release()
        self.store.close()
        self.sql.dispose()
