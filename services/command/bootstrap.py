"""The composition root of the command service: nothing connects at import time."""

from __future__ import annotations

from famiglia.config import Settings
from famiglia.engine.registry import Registry, default_registry
from famiglia.eventstore import EventStore

from .app import CommandApp


def bootstrap(*, store: EventStore | None = None, registry: Registry | None = None,
              settings: Settings | None = None) -> CommandApp:
    settings = settings or Settings.from_env()
    if store is None:
        from famiglia.eventstore.redis_store import RedisEventStore

        store = RedisEventStore.connect(settings.redis_url, partitions=settings.partitions)
    return CommandApp(store=store, registry=registry or default_registry(),
                      signer=settings.signer())
