"""The command quarantine on a real Redis (services.command.quarantine): what it opens, it closes.

Each CommandApp's Quarantine reads and writes the set on a connection pool of its own (bounded
timeouts, unlike the store's), which nothing closed: every app made and dropped (a service's stop,
each `famiglia match` run, every test) left its connections open on the server."""

from __future__ import annotations

import time
import uuid

import redis

from famiglia.bots.toy import toy_registry
from famiglia.config import Settings
from famiglia.eventstore.redis_store import RedisEventStore
from services.command.bootstrap import bootstrap


def _named(probe: redis.Redis, name: str) -> int:
    return sum(1 for client in probe.client_list() if client.get("name") == name)


def test_the_quarantine_closes_its_connections_with_the_app(redis_url: str) -> None:
    name = f"quarantine-{uuid.uuid4().hex[:8]}"  # this test's connections, whoever else uses the server
    probe = redis.Redis.from_url(redis_url)
    store = RedisEventStore(redis.Redis.from_url(redis_url, client_name=name))
    app = bootstrap(store=store, registry=toy_registry(), settings=Settings(redis_url=redis_url, secret="s"))
    try:
        match_id = app.create_match("highcard", 2, seed=3, options={"hand": "3"}).match_id
        app.quarantine.set_aside(match_id, ["id:0/loops-1"])
        assert app.quarantine.of(match_id) == frozenset({"id:0/loops-1"})
        assert _named(probe, name) >= 2  # the store's, and the quarantine's own
    finally:
        app.close()
    deadline = time.monotonic() + 30  # the server reads each close in its own time: a wait, not a measure
    while (left := _named(probe, name)) != 0:
        assert time.monotonic() < deadline, f"{left} connections still open"
        time.sleep(0.02)
    probe.close()
