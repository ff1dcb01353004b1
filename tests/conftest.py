"""Shared fixtures: a real redis-server on a free port, started once per test process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from famiglia.localstack.redis_server import RedisServer


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(data_dir=tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture()
def redis_url(redis_server: RedisServer) -> Iterator[str]:
    """A clean database on the session's server for each test."""
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    yield redis_server.url


@pytest.fixture()
def events(redis_url: str) -> Iterator[object]:
    """A Redis event store on the test's clean database (its client and key layout are what the
    stores beside it, match chat and the players' index, build on)."""
    from famiglia.eventstore.redis_store import RedisEventStore

    store = RedisEventStore.connect(redis_url)
    yield store
    store.close()
