"""The composition root of the projection service: nothing connects at import time."""

from __future__ import annotations

from sqlalchemy.engine import Engine

from famiglia.config import Settings
from famiglia.engine.registry import Registry, default_registry
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.readmodels.db import make_engine

from .app import ProjectionApp
from .settings import ProjectionSettings


def bootstrap(*, store: RedisEventStore | None = None, sql: Engine | None = None,
              registry: Registry | None = None, settings: Settings | None = None,
              projection: ProjectionSettings | None = None, migrate: bool = True) -> ProjectionApp:
    """Build the app; with `migrate` (the default) the schema is brought to head first."""
    settings = settings or Settings.from_env()
    if sql is None and not settings.database_url:
        # blank means no read models to the services that only read them; this one writes them
        raise SystemExit("FAMIGLIA_DATABASE_URL is blank: the projection writes the read models and needs "
                         "a database (unset it for the embedded stack's SQLite file)")
    if store is None:
        store = RedisEventStore.connect(settings.redis_url, partitions=settings.partitions)
    if sql is None:
        sql = make_engine(settings.database_url)
    app = ProjectionApp(store=store, sql=sql, registry=registry or default_registry(),
                        settings=projection or ProjectionSettings.from_env())
    if migrate:
        app.migrate()
    return app
