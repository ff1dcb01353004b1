"""A long run leaves nothing behind that grows with it: after a hundred matches (1,500 under soak)
played through the command service over gRPC (created, played to their end by random seats, some cancelled mid-way,
followed and left mid-stream), the command service's hot matches, remembered seat tokens, stream
slots and threads, the Redis connections, and the bots dispatcher's followed matches all stay
within their bounds; and once the projection's retention sweep has trimmed the finished matches,
Redis keeps one small key per match (its version) and nothing else of them. Counts, not times."""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
import redis

from famiglia.auth import TokenSigner
from famiglia.bots.toy import toy_registry
from famiglia.client import GameClient
from famiglia.config import Settings
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil.errors import error_code
from famiglia.grpcutil.server import STREAM_SPARE
from famiglia.v1 import envelope_pb2
from services.bots import dispatcher as dispatching
from services.bots.dispatcher import Dispatcher
from services.command import app as command_app
from services.command.bootstrap import bootstrap
from services.command.entrypoints.grpc_server import serve
from services.command.hot_matches import HotMatches
from services.projection.bootstrap import bootstrap as projection_bootstrap
from services.projection.retention import RetentionSweep
from tests.integration.projection.support import drain
from tests.profile import examples

from .conftest import wait_until

SECRET = "long-run"
MATCHES = examples(quick=100, soak=1500)
HOT = 32  # hot matches the command service keeps here (10,000 in production)
TOKENS = 64  # seat tokens it remembers here (50,000)
DONE = 40  # finished matches the dispatcher remembers here (10,000)
STREAMS = 8  # streams the server follows at once
CALLS = 2  # threads for unary calls
IDLE_FOLLOWERS = examples(quick=200, soak=1000)


@dataclass
class Tasks:
    """The dispatcher's task sender, counting what it was asked to send."""

    sent: list[tuple] = field(default_factory=list)

    def decide(self, match_id, game_id, seat, version, policy, trace=None, payload=None, then=()) -> None:
        self.sent.append((match_id, seat, version))

    def clock(self, match_id, seat, version, countdown, trace=None) -> None:
        self.sent.append((match_id, seat, version))

    @contextmanager
    def batch(self) -> Iterator[None]:
        yield


@dataclass
class Server:
    app: command_app.CommandApp
    server: grpc.Server
    client: GameClient
    store: RedisEventStore
    redis: redis.Redis
    url: str

    @property
    def gate(self):  # type: ignore[no-untyped-def]
        return self.server._gate  # the stream slots (`famiglia.grpcutil.server._StreamGate`)

    def free_slots(self) -> int:
        return self.gate._free._value

    def redis_clients(self) -> int:
        return int(self.redis.info("clients")["connected_clients"])


@pytest.fixture()
def command(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    monkeypatch.setattr(command_app, "_TOKEN_CACHE", TOKENS)
    registry = toy_registry()
    store = RedisEventStore.connect(redis_url)
    app = bootstrap(store=store, registry=registry, settings=Settings(redis_url=redis_url, secret=SECRET))
    app.matches = HotMatches(store, registry, capacity=HOT)
    server, port = serve(app, "127.0.0.1:0", workers=STREAMS, call_workers=CALLS)
    server.start()
    client = GameClient(f"127.0.0.1:{port}", timeout=30)
    watcher = redis.Redis.from_url(redis_url)
    try:
        yield Server(app, server, client, store, watcher, redis_url)
    finally:
        client.close()
        server.stop(grace=None)
        watcher.close()
        store.close()


@dataclass
class Feed:
    """The bots dispatcher, handed every new partition entry (in order) when `pump`ed, as its
    consumer would as a match goes on."""

    dispatcher: Dispatcher
    after: dict[int, str] = field(default_factory=dict)

    def pump(self) -> None:
        store = self.dispatcher.store
        for partition in range(store.partitions):
            while entries := store.read_partition(partition, self.after.get(partition, "0-0"), count=200):
                self.dispatcher.handle([e.envelope for e in entries])
                self.after[partition] = entries[-1].entry_id


def play(s: Server, rng: random.Random, i: int, operator: str, feed: Feed) -> None:
    """One match of High Card, seat 0 a bot in every other one: played to its end by random
    seats, or (one in five) cancelled mid-way; one in four is followed by a spectator who leaves
    after the first event, and each is streamed to its end once it is over."""
    info = [envelope_pb2.SeatInfo(seat=0, bot=True, policy="random")] if i % 2 else []
    match = s.client.create_match("highcard", rng.choice((2, 3)), seed=i, options={"hand": "3"},
                                  seat_info=info, token=operator if info else None)
    left = None
    if i % 4 == 0:
        left = s.client.spectator(match.match_id).stream(from_version=0, timeout=60)
        next(left)
    cancel_at = rng.randrange(2, 6) if i % 5 == 0 else -1
    seats = [s.client.seat(match.match_id, token) for token in match.seat_tokens]
    for move in range(100):
        feed.pump()
        view = seats[0].view()
        if view.finished:
            break
        if move == cancel_at:
            s.client.cancel_match(match.match_id, "a long run", token=operator, request_id=f"cancel-{i}")
            break
        seat = seats[view.to_act[0].seat]
        legal = seat.legal_commands()
        seat.submit(rng.choice(list(legal.commands)), command_id=f"m{move}", expected_version=legal.version)
    else:
        raise AssertionError(f"match {i} never ended")
    if left is not None:
        left.cancel()  # a client gone mid-stream, its follower waiting for the next event
    feed.pump()
    finished = list(s.client.spectator(match.match_id).stream(from_version=0))
    assert finished[-1].finished


def keys_by_kind(client: redis.Redis) -> Counter[str]:
    """Redis's keys counted by kind: `famiglia:{p07}:match:<id>` is a `match` key. Each key once:
    SCAN may return a key twice when Redis resizes its table meanwhile (as after a sweep that
    deleted thousands of keys), which once counted 1,501 version keys of 1,500 matches."""
    kinds: Counter[str] = Counter()
    for key in set(client.scan_iter(count=1000)):
        parts = key.decode().split(":")
        kinds[parts[2] if len(parts) > 2 and parts[1].startswith("{p") else ":".join(parts[:2])] += 1
    return kinds


def test_a_long_run_leaves_every_per_match_resource_within_its_bound(
        command: Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    s = command
    monkeypatch.setattr(dispatching, "DONE_KEPT", DONE)
    operator = TokenSigner(SECRET).operator_token()
    rng = random.Random(7)
    tasks = Tasks()
    feed = Feed(Dispatcher(s.store, s.app.registry, tasks))
    before = threading.active_count()
    for i in range(MATCHES):
        play(s, rng, i, operator, feed)

    # The command service: its LRUs at their bounds, every stream slot free again (the streams
    # left mid-way included), no thread or Redis connection beyond its pools.
    assert wait_until(lambda: s.free_slots() == STREAMS), "a stream left mid-way kept its slot"
    assert len(s.app.matches) == HOT
    assert len(s.app._seat_claims) <= TOKENS
    threads = CALLS + STREAMS + STREAM_SPARE + 1  # the pools, and gRPC's serving thread
    assert threading.active_count() <= before + threads
    assert s.redis_clients() <= threads + 1  # + this test's own

    # The dispatcher: every match ended, so none is followed nor live; the ends it remembers
    # are at their bound.
    dispatcher = feed.dispatcher
    assert tasks.sent, "no bot was ever asked: the dispatcher saw nothing"
    assert dispatcher.matches == {}
    assert dispatcher.live.members() == []
    assert len(dispatcher._done) == DONE

    # Redis: each match's stream, version and command records, nothing staged; once archived
    # and past the retention period, only its version key is left, and the partition streams
    # are trimmed to what the projection has not acked (nothing: one entry each stays).
    kinds = keys_by_kind(s.redis)
    assert (kinds["match"], kinds["version"], kinds["staged"]) == (MATCHES, MATCHES, 0)
    assert kinds["cmd"] > MATCHES
    settings = Settings(redis_url=s.url, secret=SECRET,
                        database_url=f"sqlite:///{tmp_path / 'read.db'}")
    projection = projection_bootstrap(store=s.store, registry=s.app.registry, settings=settings)
    try:
        drain([projection.runner("c0")])
        sweep = RetentionSweep(s.store, projection.sql, 1, most=MATCHES, clock=lambda: 4_000_000_000)
        report = sweep.sweep()
        assert (report.trimmed, report.skipped) == (MATCHES, 0)
        assert report.entries > 0  # the partition streams' entries the projection acked
    finally:
        projection.sql.dispose()
    kinds = keys_by_kind(s.redis)
    assert (kinds["match"], kinds["cmd"], kinds["staged"], kinds["version"]) == (0, 0, 0, MATCHES)
    for stream in s.store.partitions_keys():
        assert s.redis.xlen(stream) <= 1


def test_hundreds_of_idle_followers_take_no_more_than_the_stream_slots(command: Server) -> None:
    """Followers of a quiet match each hold a thread for as long as their clients stay: past
    the server's limit each one more is refused at once (RESOURCE_EXHAUSTED, `too_many_streams`)
    and holds nothing; once they leave, their slots are free."""
    s = command
    match = s.client.create_match("highcard", 2, seed=1, options={"hand": "3"})
    before = threading.active_count()
    admitted, refused = [], Counter()
    for _ in range(IDLE_FOLLOWERS):
        stream = s.client.spectator(match.match_id).stream(from_version=0, timeout=60)
        try:
            next(stream)  # the match's first event: then it waits for the next, which never comes
            admitted.append(stream)
        except grpc.RpcError as exc:
            refused[(exc.code(), error_code(exc))] += 1
    assert len(admitted) == STREAMS
    assert refused == {(grpc.StatusCode.RESOURCE_EXHAUSTED, "too_many_streams"): IDLE_FOLLOWERS - STREAMS}
    assert threading.active_count() <= before + STREAMS + STREAM_SPARE
    assert s.free_slots() == 0
    for stream in admitted:
        stream.cancel()
    assert wait_until(lambda: s.free_slots() == STREAMS), "a follower that left kept its slot"
    again = s.client.spectator(match.match_id).stream(from_version=0, timeout=60)
    assert next(again).event.type
    again.cancel()
