"""Fixtures of the projection suite: every test runs on SQLite and on a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from famiglia.config import Settings
from famiglia.eventstore.redis_store import RedisEventStore
from services.projection.app import ProjectionApp
from services.projection.bootstrap import bootstrap
from services.projection.runner import RunnerConfig
from services.projection.settings import ProjectionSettings
from tests.support.postgres import postgres_database, postgres_server, postgres_url  # noqa: F401 - fixtures

from .support import games_registry


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path) -> str:  # type: ignore[no-untyped-def]
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'readmodels.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture()
def store(redis_url: str) -> Iterator[RedisEventStore]:
    store = RedisEventStore.connect(redis_url, partitions=4)
    yield store
    store.close()


@pytest.fixture()
def app(store: RedisEventStore, database_url: str, redis_url: str) -> Iterator[ProjectionApp]:
    settings = Settings(redis_url=redis_url, database_url=database_url, secret="test", partitions=4)
    projection = ProjectionSettings(RunnerConfig(batch=7, block_ms=0, claim_idle_ms=60_000, claim_every_s=0.0,
                                                 lag_every_s=3600))
    app = bootstrap(store=store, registry=games_registry(), settings=settings, projection=projection)
    yield app
    app.sql.dispose()
