"""The composition root of the replay service: nothing connects at import time.

Hot matches are read from the event store (Redis Streams), cold ones from the
projection's SQL event archive when that module is installed; both sit behind
`LayeredSource`, so a trimmed match reads the same from the archive.
"""

from __future__ import annotations

from dataclasses import dataclass

from famiglia.config import Settings, flag, whole
from famiglia.engine.registry import Registry, default_registry
from famiglia.eventstore import EventStore
from famiglia.replay.access import ReplayPolicy
from famiglia.replay.sources import EventSource, LayeredSource, StoreSource
from famiglia.replay.timeline import CACHED_MB, DEFAULT_EVERY

from .app import ReplayApp


@dataclass(frozen=True)
class ReplaySettings:
    """The replay service's own knobs (FAMIGLIA_REPLAY_*), beside the shared Settings."""

    full_after_finish: bool = True
    full_while_running: bool = False
    snapshot_every: int = DEFAULT_EVERY
    cached_matches: int = 256
    cached_mb: int = CACHED_MB
    imports: bool = True

    @classmethod
    def from_env(cls) -> ReplaySettings:
        return cls(
            full_after_finish=flag("FAMIGLIA_REPLAY_FULL_AFTER_FINISH", True),
            full_while_running=flag("FAMIGLIA_REPLAY_FULL_WHILE_RUNNING", False),
            snapshot_every=whole("FAMIGLIA_REPLAY_SNAPSHOT_EVERY", DEFAULT_EVERY),
            cached_matches=whole("FAMIGLIA_REPLAY_CACHED_MATCHES", 256),
            cached_mb=whole("FAMIGLIA_REPLAY_CACHED_MB", CACHED_MB),
            imports=flag("FAMIGLIA_REPLAY_IMPORTS", True),
        )


def archive_source(database_url: str) -> EventSource | None:
    """The SQL event archive as a cold source, or None while famiglia.readmodels has none."""
    from famiglia.replay.sources import sql_archive_source

    return sql_archive_source(database_url) if database_url else None


def bootstrap(
    *,
    store: EventStore | None = None,
    cold: EventSource | None = None,
    registry: Registry | None = None,
    settings: Settings | None = None,
    replay_settings: ReplaySettings | None = None,
    use_archive: bool = True,
) -> ReplayApp:
    settings = settings or Settings.from_env()
    replay_settings = replay_settings or ReplaySettings.from_env()
    if store is None:
        from famiglia.eventstore.redis_store import RedisEventStore

        store = RedisEventStore.connect(settings.redis_url, partitions=settings.partitions)
    if cold is None and use_archive:
        cold = archive_source(settings.database_url)
    policy = ReplayPolicy(full_after_finish=replay_settings.full_after_finish,
                          full_while_running=replay_settings.full_while_running)
    return ReplayApp(
        source=LayeredSource(StoreSource(store), cold),
        registry=registry or default_registry(),
        signer=settings.signer(),
        policy=policy,
        store=store if replay_settings.imports else None,
        every=replay_settings.snapshot_every,
        capacity=replay_settings.cached_matches,
        cached_bytes=replay_settings.cached_mb << 20,
        on_close=store.close,
    )
