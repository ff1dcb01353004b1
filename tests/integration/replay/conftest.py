"""A real redis-server, a command service writing matches into it, and a replay
service over gRPC in process on a free port."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest

from famiglia.config import Settings
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.replay.client import ReplayClient
from famiglia.replay.sources import EventSource, MemorySource
from services.command.app import CommandApp
from services.command.bootstrap import bootstrap as command_bootstrap
from services.replay.bootstrap import ReplaySettings
from services.replay.bootstrap import bootstrap as replay_bootstrap
from services.replay.entrypoints.grpc_server import serve

from ...unit.replay.games import registry

SECRET = "replay-integration-secret"
_ids = itertools.count()


@dataclass
class Played:
    match_id: str
    tokens: list[str]
    version: int


def play(app: CommandApp, game_id: str, seats: int, seed: int, *, options: dict[str, str] | None = None,
         stop_after: int | None = None) -> Played:
    """Random legal commands through the command service's use cases (which record each command)."""
    created = app.create_match(game_id, seats, seed=seed, options=options or {})
    chooser = random.Random(seed)
    commands = 0
    while stop_after is None or commands < stop_after:
        hot = app.matches.get(created.match_id)
        m = hot.match
        if m.finished:
            break
        seat = chooser.choice(sorted({p.seat for p in m.engine.pending(m.state)}))
        viewer = app.viewer(created.match_id, created.seat_tokens[seat])
        legal = app.legal_commands(created.match_id, viewer).commands
        app.submit(created.match_id, viewer, f"cmd-{next(_ids)}", chooser.choice(legal))
        commands += 1
    return Played(created.match_id, created.seat_tokens, app.store.version(created.match_id))


@dataclass
class Stack:
    redis_url: str
    store: RedisEventStore
    commands: CommandApp
    cold: MemorySource
    address: str
    client: ReplayClient


def start_replay(store: RedisEventStore, cold: EventSource | None, **knobs) -> tuple[grpc.Server, str]:
    app = replay_bootstrap(store=store, cold=cold, registry=registry(), settings=Settings(secret=SECRET),
                           replay_settings=ReplaySettings(**knobs), use_archive=False)
    server, port = serve(app, "127.0.0.1:0", workers=8)
    server.start()
    return server, f"127.0.0.1:{port}"


@pytest.fixture()
def stack(redis_url: str) -> Iterator[Stack]:
    store = RedisEventStore.connect(redis_url)
    commands = command_bootstrap(store=store, registry=registry(), settings=Settings(secret=SECRET))
    cold = MemorySource()
    server, address = start_replay(store, cold)
    client = ReplayClient(address)
    client.wait_ready()
    yield Stack(redis_url, store, commands, cold, address, client)
    client.close()
    server.stop(grace=None)
    store.close()
