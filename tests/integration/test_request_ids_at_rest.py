"""A creation's request id is a secret: sent again, a CreateMatch gets every seat's token and a
RegisterGuest the guest's. What Redis keeps of a request id must not spell it (a key's name, a
stream's fields), or whoever can read Redis could act for every seat: a hash of it does."""

from __future__ import annotations

import pytest
import redis

from famiglia.eventstore.redis_store import RedisEventStore
from services.command.bootstrap import bootstrap
from services.matchmaking.players import RedisPlayers
from tests.unit.command.test_app import SETTINGS, _game

pytestmark = pytest.mark.redis


def _everything(client: redis.Redis) -> str:
    """Every key of the database with what it holds, as one text."""
    out = []
    for key in client.scan_iter(count=1000):
        kind = client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "string":
            held: object = client.get(key)
        elif kind == "hash":
            held = client.hgetall(key)
        elif kind == "stream":
            held = client.xrange(key)
        elif kind == "list":
            held = client.lrange(key, 0, -1)
        elif kind == "set":
            held = client.smembers(key)
        else:
            held = client.zrange(key, 0, -1, withscores=True)
        out.append(f"{key!r} {held!r}")
    return "\n".join(out)


def test_redis_keeps_no_creation_request_id_and_a_retry_still_gets_the_same_match(redis_url: str) -> None:
    """Fails if the creation's command record (`cmd:<match>:create:<request id>`, and the
    stream's `c`) names the request id."""
    store = RedisEventStore.connect(redis_url)
    client = redis.Redis.from_url(redis_url)
    try:
        app = bootstrap(store=store, settings=SETTINGS)
        engine, seats = _game()
        request_id = "creation-secret-0123456789abcdef"
        created = app.create_match(engine.info.game_id, seats, seed=7, request_id=request_id)
        again = app.create_match(engine.info.game_id, seats, seed=7, request_id=request_id)
        assert (again.match_id, again.seat_tokens) == (created.match_id, created.seat_tokens)
        kept = _everything(client)
        assert created.match_id in kept and request_id not in kept
    finally:
        client.close()
        store.close()


def test_redis_keeps_no_guest_request_id_and_a_retry_still_gets_the_same_guest(redis_url: str) -> None:
    """Fails if the RegisterGuest idempotency key (`mm:guest:{<request id>}`) names the request id."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        players = RedisPlayers(client)
        request_id = "guest-secret-0123456789abcdef"
        first = players.register_guest("Vito", 1, request_id=request_id)
        again = players.register_guest("Vito", 2, request_id=request_id)
        assert again.player_id == first.player_id
        kept = _everything(client)
        assert first.player_id in kept and request_id not in kept
    finally:
        client.close()
