"""Players' live matches (ListMyTurns' index) on a real redis-server, and the in-memory one held
to the same rules; and the command service keeping it over Redis: written once a match naming
people is stored, cleaned once it ends, each player under a hash tag of its own; and the
operator's backfill of the matches created before the index (`famiglia match reindex-players`)."""

from __future__ import annotations

from typing import Any

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


# -- the backfill (`famiglia match reindex-players`) ---------------------------------------------
SECRET = "integration-secret"


def _seating(*people: str) -> list[envelope_pb2.SeatInfo]:
    """People in the first seats, a bot in the last."""
    return [*(envelope_pb2.SeatInfo(seat=i, player_id=p) for i, p in enumerate(people)),
            envelope_pb2.SeatInfo(seat=len(people), player_id="bot:random", bot=True, policy="random")]


def _lists(events: RedisEventStore) -> dict[str, Any]:
    """Every player's entries, with their scores: what a backfill may change."""
    client: redis.Redis = events.client
    return {k.decode(): client.zrange(k, 0, -1, withscores=True) for k in client.scan_iter(match="famiglia:{pl:*")}


def _before_the_index(events: RedisEventStore, redis_url: str):  # type: ignore[no-untyped-def]
    """A command service of before the players' index: its creations write none."""
    old = bootstrap(store=events, settings=Settings(redis_url=redis_url, secret=SECRET))
    old.players = InMemoryPlayerMatches()
    return old


def test_a_backfill_lists_the_live_matches_created_before_the_index_and_a_second_run_changes_nothing(
        events: RedisEventStore, redis_url: str) -> None:
    from services.command.player_index import reindex_players

    old = _before_the_index(events, redis_url)
    live = old.create_match("grifters", 3, seed=3, seat_info=_seating("ann", "bob"), request_id="r-live-0123456789ab")
    ended = old.create_match("grifters", 2, seed=4, seat_info=_seating("ann"), request_id="r-ended-0123456789a")
    old.cancel_match(ended.match_id, "ops", "stuck")
    anonymous = old.create_match("grifters", 2, seed=5).match_id
    app = bootstrap(store=events, settings=Settings(redis_url=redis_url, secret=SECRET))
    indexed = app.create_match("grifters", 2, seed=6, seat_info=_seating("ann"), request_id="r-new-01234567890ab")
    before = _lists(events)
    assert app.players.newest("ann", 10) == [indexed.match_id] and app.players.newest("bob", 10) == []

    dry = reindex_players(app, dry_run=True)
    assert (dry.looked_at, dry.indexed, dry.entries, dry.over, dry.nobody, dry.cursor) == (4, 2, 3, 1, 1, 0)
    assert _lists(events) == before  # a dry run writes nothing

    done = reindex_players(app)
    assert (done.looked_at, done.indexed, done.entries, done.over, done.nobody, done.unwritten) == (4, 2, 3, 1, 1, 0)
    assert set(app.players.newest("ann", 10)) == {live.match_id, indexed.match_id}
    assert app.players.newest("bob", 10) == [live.match_id]
    assert {t.match_id for t in app.my_turns("bob")} == {live.match_id}
    assert ended.match_id not in app.players.newest("ann", 10) and anonymous not in app.players.newest("ann", 10)
    created = events.read(live.match_id, limit=1)[0].timestamp.ToMilliseconds()
    assert events.client.zscore(events.keys.player_matches("bob"), live.match_id) == created  # its creation's time
    assert not events.client.exists(events.keys.player_matches("bot:random"))
    after, ann = _lists(events), events.keys.player_matches("ann")
    assert dict(after[ann])[indexed.match_id.encode()] == dict(before[ann])[indexed.match_id.encode()]  # kept

    again = reindex_players(app)
    assert _lists(events) == after  # run twice: nothing changes
    assert (again.indexed, again.over, again.nobody) == (2, 1, 1)


def test_an_interrupted_backfill_resumed_from_its_cursor_ends_as_one_run(events: RedisEventStore,
                                                                         redis_url: str) -> None:
    from services.command.player_index import Reindexed, reindex_players

    old = _before_the_index(events, redis_url)
    made = [old.create_match("grifters", 2, seed=i, seat_info=_seating(f"p{i}"), request_id=f"r-{i:02d}-0123456789abc")
            for i in range(12)]
    app = bootstrap(store=events, settings=Settings(redis_url=redis_url, secret=SECRET))

    class Stop(Exception):
        pass

    seen: list[int] = []

    def stop_after_two_pages(done: Reindexed) -> None:
        seen.append(done.cursor)
        if len(seen) == 2 and done.cursor:
            raise Stop

    with pytest.raises(Stop):
        reindex_players(app, page=2, on_page=stop_after_two_pages)
    assert len({m for p in (f"p{i}" for i in range(12)) for m in app.players.newest(p, 10)}) < 12  # part done
    rest = reindex_players(app, page=2, cursor=seen[-1])
    assert rest.cursor == 0
    assert {p: app.players.newest(p, 10) for p in (f"p{i}" for i in range(12))} == \
        {f"p{i}": [m.match_id] for i, m in enumerate(made)}


def test_an_imported_live_match_names_no_player_so_no_list_has_it(events: RedisEventStore, redis_url: str) -> None:
    """ImportMatch writes no index entry, and the backfill none: admission clears the seats'
    player ids (a file's claims), so no player's list could hold the copy."""
    from famiglia.auth import TokenSigner
    from famiglia.replay.export import build_export, dump
    from famiglia.replay.sources import MemorySource
    from services.command.player_index import reindex_players
    from services.replay.bootstrap import ReplaySettings
    from services.replay.bootstrap import bootstrap as replay_bootstrap

    app = bootstrap(store=events, settings=Settings(redis_url=redis_url, secret=SECRET))
    live = app.create_match("grifters", 3, seed=3, seat_info=_seating("ann", "bob"), request_id="r-live-0123456789ab")
    replay = replay_bootstrap(store=events, cold=MemorySource(), registry=app.registry,
                              settings=Settings(secret=SECRET), replay_settings=ReplaySettings(), use_archive=False)
    data = dump(build_export(app.registry, events.read(live.match_id)), binary=True)
    copy, _version, _report = replay.import_file(data, token=TokenSigner(SECRET).operator_token(),
                                                 new_match_id="m-imported-copy")
    assert not any(info.player_id for info in app.matches.get(copy).match.created.seat_info)
    done = reindex_players(app)
    assert (done.looked_at, done.indexed, done.nobody) == (2, 1, 1)
    assert app.players.newest("ann", 10) == [live.match_id] and app.players.newest("bob", 10) == [live.match_id]


def test_the_operator_runs_the_backfill_from_the_command_line(events: RedisEventStore, redis_url: str,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from famiglia.cli.main import main

    live = _before_the_index(events, redis_url).create_match("grifters", 2, seed=3, seat_info=_seating("ann"),
                                                             request_id="r-live-0123456789ab")
    monkeypatch.setenv("FAMIGLIA_REDIS_URL", redis_url)
    monkeypatch.setenv("FAMIGLIA_SECRET", SECRET)
    assert main(["match", "reindex-players", "--dry-run"]) == 0
    assert "1 live ones would be put" in capsys.readouterr().out and not _lists(events)
    assert main(["match", "reindex-players"]) == 0
    assert "1 matches looked at: 1 live ones put in their players' lists (1 entries" in capsys.readouterr().out
    assert RedisPlayerMatches(events.client, events.keys).newest("ann", 10) == [live.match_id]
    assert main(["match", "reindex-players", "--cursor", "-1"]) == 2


def test_a_backfill_reads_a_pages_creations_together_not_one_round_trip_a_match(
        events: RedisEventStore, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each match cost the walk an XRANGE of its own, most of them (trimmed, or naming nobody)
    nothing more: a store of a million matches, a million round trips. Now a pipeline of
    FIRSTS_BATCH a page, and a fold only for the matches naming people."""
    import threading

    from famiglia.eventstore import redis_store
    from services.command.player_index import reindex_players

    old = _before_the_index(events, redis_url)
    anonymous = [old.create_match("grifters", 2, seed=i).match_id for i in range(18)]
    trimmed = old.create_match("grifters", 2, seed=30).match_id
    old.cancel_match(trimmed, "ops", "stuck")
    events.trim(trimmed)  # archived: its stream gone
    live = old.create_match("grifters", 2, seed=31, seat_info=_seating("ann"),
                            request_id="r-live-0123456789ab").match_id
    app = bootstrap(store=events, settings=Settings(redis_url=redis_url, secret=SECRET))

    sent: list[bytes] = []
    send = redis.connection.AbstractConnection.send_packed_command
    caller = threading.current_thread()

    def noted(self: Any, command: Any, *args: Any, **kwargs: Any) -> None:
        if threading.current_thread() is caller:
            sent.append(command if isinstance(command, bytes) else b"".join(command))
        send(self, command, *args, **kwargs)

    monkeypatch.setattr(redis_store, "FIRSTS_BATCH", 8)
    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", noted)
    done = reindex_players(app, dry_run=True)
    assert (done.looked_at, done.indexed, done.over, done.nobody) == (len(anonymous) + 2, 1, 1, len(anonymous))
    batched = [c for c in sent if c.count(b"XRANGE") > 1]
    alone = [c for c in sent if c.count(b"XRANGE") == 1 and live.encode() not in c]  # (the live one is folded)
    assert (len(batched), len(alone)) == (3, 0)  # 20 matches, 8 a pipeline: not 20 round trips
    assert set(app.store.firsts([live, trimmed, anonymous[0]])) == {live, anonymous[0]}  # a stream gone: left out
