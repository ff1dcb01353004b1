"""Players' live matches (ListMyTurns' index) on a real redis-server, and the in-memory one held
to the same rules; and the command service keeping it over Redis: written once a match naming
people is stored, cleaned once it ends, each player under a hash tag of its own."""

from __future__ import annotations

import pytest
import redis

from famiglia.config import Settings
from famiglia.eventstore.player_matches import InMemoryPlayerMatches, PlayerMatches, RedisPlayerMatches
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.v1 import envelope_pb2
from services.command.bootstrap import bootstrap

ODD_PLAYER = "{p07}:x}*é"
"""A player id with hash-tag braces, a glob and non-ASCII: its key is a digest all the same."""


@pytest.fixture(params=["redis", "memory"])
def index(request: pytest.FixtureRequest, events: RedisEventStore) -> PlayerMatches:
    if request.param == "memory":
        return InMemoryPlayerMatches()
    return RedisPlayerMatches(events.client, events.keys)


def test_matches_are_listed_newest_first_once_each_and_removed_per_player(index: PlayerMatches) -> None:
    index.add("m-a", ["ann", "bob"], 1000)
    index.add("m-b", ["ann"], 3000)
    index.add("m-c", ["ann", ODD_PLAYER], 2000)
    index.add("m-a", ["ann"], 9000)  # a creation retried: kept at its first time
    assert index.newest("ann", 10) == ["m-b", "m-c", "m-a"]
    assert index.newest("ann", 2) == ["m-b", "m-c"]
    assert index.newest("ann", 0) == []
    assert index.newest(ODD_PLAYER, 10) == ["m-c"]
    index.remove("m-a", ["ann", "bob"])
    index.remove("m-a", ["ann"])  # twice: nothing
    assert index.newest("ann", 10) == ["m-b", "m-c"] and index.newest("bob", 10) == []
    index.drop("ann", ["m-c", "m-zz"])
    assert index.newest("ann", 10) == ["m-b"]
    index.add("m-d", [], 1)
    index.remove("m-d", [])
    index.drop("nobody", [])


def test_each_player_has_a_key_of_its_own_tag_and_no_expiry(events: RedisEventStore) -> None:
    index = RedisPlayerMatches(events.client, events.keys)
    index.add("m-a", ["ann", ODD_PLAYER], 1000)
    client: redis.Redis = events.client
    keys = sorted(k.decode() for k in client.keys("famiglia:{pl:*"))
    assert keys == sorted([events.keys.player_matches("ann"), events.keys.player_matches(ODD_PLAYER)])
    for key in keys:
        tag = key[key.index("{"):key.index("}") + 1]
        assert len(tag) == len("{pl:}") + 32 and "{p07}" not in key  # the digest, never the id
        assert client.pttl(key) == -1  # cleaned by the command service, not by time
    index.remove("m-a", ["ann", ODD_PLAYER])
    assert not client.keys("famiglia:{pl:*")  # an empty sorted set is no key


def test_the_command_service_keeps_the_index_over_redis(events: RedisEventStore, redis_url: str) -> None:
    app = bootstrap(store=events, settings=Settings(redis_url=redis_url, secret="integration-secret"))
    assert isinstance(app.players, RedisPlayerMatches)
    seating = [envelope_pb2.SeatInfo(seat=0, player_id="ann"),
               envelope_pb2.SeatInfo(seat=1, player_id="bot:random", bot=True, policy="random")]
    created = app.create_match("grifters", 2, seed=3, seat_info=seating, request_id="r-0123456789abcdef")
    app.create_match("grifters", 2, seed=3, seat_info=seating, request_id="r-0123456789abcdef")
    assert app.players.newest("ann", 10) == [created.match_id]
    assert not events.client.exists(events.keys.player_matches("bot:random"))
    (turn,) = app.my_turns("ann")
    assert (turn.match_id, turn.seat, turn.version) == (created.match_id, 0, created.version)
    app.cancel_match(created.match_id, "ops", "stuck")
    assert app.players.newest("ann", 10) == [] and app.my_turns("ann") == []
    # a lost removal (a crash after the cancel was stored) is cleaned by the next reading
    app.players.add(created.match_id, ["ann"], 1)
    assert app.my_turns("ann") == [] and app.players.newest("ann", 10) == []
