"""The projection's use cases, free of gRPC and of process management."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.engine import Engine

from famiglia.engine.registry import Registry
from famiglia.eventstore.redis_store import RedisEventStore

from . import schema
from .lag import LagMonitor
from .projector import Projector
from .rebuild import RebuildReport, rebuild
from .runner import ProjectionRunner
from .settings import ProjectionSettings


@dataclass
class ProjectionApp:
    store: RedisEventStore
    sql: Engine
    registry: Registry
    settings: ProjectionSettings

    def __post_init__(self) -> None:
        self.projector = Projector(self.sql, self.registry, cache_size=self.settings.cache_size)

    def migrate(self) -> None:
        schema.upgrade(self.sql)

    def lag_monitor(self) -> LagMonitor:
        return LagMonitor(self.store, self.sql)

    def runner(self, consumer: str = "", *, projector: Projector | None = None) -> ProjectionRunner:
        """A consumer of the group; each runner needs its own thread (or process)."""
        return ProjectionRunner(self.store, projector or Projector(self.sql, self.registry,
                                                                   cache_size=self.settings.cache_size),
                                self.settings.runner_config(consumer), lag=self.lag_monitor())

    def rebuild(self, *, force: bool = False, progress: Callable[[int], None] | None = None) -> RebuildReport:
        return rebuild(self.store, self.sql, self.projector, force=force, progress=progress)

    def close(self) -> None:
        self.projector.release()
        self.store.close()
        self.sql.dispose()
