"""The command quarantine on a real Redis (services.command.quarantine): what it opens, it closes;
what one replica sets aside, no other replica's write cuts short; a lift Redis refused is made later.

Each CommandApp's Quarantine reads and writes the set on a connection pool of its own (bounded
timeouts, unlike the store's), which nothing closed: every app made and dropped (a service's stop,
each `famiglia match` run, every test) left its connections open on the server."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from famiglia.bots.toy import toy_registry
from famiglia.config import Settings
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.localstack.redis_server import RedisServer
from services.command.bootstrap import bootstrap
from services.command.quarantine import Quarantine

pytestmark = pytest.mark.redis


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


def test_no_replica_cuts_short_what_another_set_aside(redis_url: str) -> None:
    """Each write set the whole set's expiry, and its member's, to its own `now + ttl_s`: a replica
    with a shorter FAMIGLIA_COMMAND_QUARANTINE_S (a rollout, a typo), setting anything aside, or
    the same command again, made Redis drop every command set aside sooner, for every replica. Now
    the set lives as long as its longest-lived member, and a member's expiry only grows."""
    client = redis.Redis.from_url(redis_url)
    prefix = f"q-{uuid.uuid4().hex[:8]}"
    long = Quarantine(client, prefix=prefix, ttl_s=6 * 3600.0)
    short = Quarantine(client, prefix=prefix, ttl_s=60.0)
    try:
        long.set_aside("m1", ["id:0/loops-1"])
        kept_ms = client.zscore(long.key, long.member("m1", "id:0/loops-1"))
        assert kept_ms is not None and client.pexpiretime(long.key) >= kept_ms  # the set outlives it
        short.set_aside("m2", ["id:1/loops-2"])
        short.set_aside("m1", ["id:0/loops-1"])  # the same command, set aside again by a shorter quarantine
        assert client.zscore(long.key, long.member("m1", "id:0/loops-1")) == kept_ms
        assert client.pexpiretime(long.key) >= kept_ms
        assert short.of("m1") == frozenset({"id:0/loops-1"}) and short.of("m2") == frozenset({"id:1/loops-2"})
    finally:
        for q in (long, short):
            q.close()
        client.delete(long.key)
        client.close()


def test_no_replicas_clock_expires_what_is_set_aside(redis_url: str) -> None:
    """The set-aside trimmed the set with its replica's own clock (`ZREMRANGEBYSCORE -inf now`),
    wrote expiries from it, and each replica read the set with it: one whose clock ran ahead past
    the others' expiries took their members out of Redis at its next write and read none of them
    (their commands decided, and stalled, there and then everywhere); one behind wrote members
    already expired for the others. Redis's clock (`TIME`) dates and expires them now."""
    client = redis.Redis.from_url(redis_url)
    prefix = f"q-{uuid.uuid4().hex[:8]}"
    now = time.time()
    fine = Quarantine(client, prefix=prefix, ttl_s=3600.0, refresh_s=0.0)
    ahead = Quarantine(client, prefix=prefix, ttl_s=3600.0, refresh_s=0.0, wall=lambda: now + 2 * 3600)
    behind = Quarantine(client, prefix=prefix, ttl_s=3600.0, refresh_s=0.0, wall=lambda: now - 2 * 3600)
    try:
        fine.set_aside("m1", ["id:0/loops-1"])
        ahead.set_aside("m2", ["id:1/loops-2"])
        behind.set_aside("m3", ["id:0/loops-3"])
        assert client.zscore(fine.key, fine.member("m1", "id:0/loops-1")) is not None  # not trimmed by `ahead`
        for q in (fine, ahead, behind):
            assert q.of("m1") == frozenset({"id:0/loops-1"}), q
            assert q.of("m2") == frozenset({"id:1/loops-2"}), q
            assert q.of("m3") == frozenset({"id:0/loops-3"}), q
    finally:
        for q in (fine, ahead, behind):
            q.close()
        client.delete(fine.key)
        client.close()


def _redis_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


def test_a_set_aside_made_again_past_half_its_life_lives_on_in_redis(redis_url: str) -> None:
    """A call stuck longer than the quarantine has its members written again (`due`, half their
    life on, by the replica's clock): the member's score and the set's expiry move on with them,
    by Redis's, for every replica."""
    client = redis.Redis.from_url(redis_url)
    wall = [float(int(time.time()))]
    q = Quarantine(client, prefix=f"q-{uuid.uuid4().hex[:8]}", ttl_s=100.0, wall=lambda: wall[0])
    member = q.member("m1", "id:0/loops-1", "7")
    try:
        renew_at = q.set_aside("m1", ["id:0/loops-1"], "7")
        first = client.zscore(q.key, member)
        assert renew_at == wall[0] + 50 and not q.due(renew_at)
        wall[0] += 50
        assert q.due(renew_at)
        before = _redis_ms(client)
        q.set_aside("m1", ["id:0/loops-1"], "7")
        after = _redis_ms(client)
        score = client.zscore(q.key, member)
        assert first is not None and score is not None and score >= first
        assert before + 100_000 <= score <= after + 100_000
        assert client.pexpiretime(q.key) >= score
    finally:
        q.close()
        client.delete(q.key)
        client.close()


def test_a_lift_leaves_what_another_replicas_stuck_call_set_aside(redis_url: str) -> None:
    """Two replicas stuck on the same command (a client whose deadline is under the bound retried
    on the second before the first had set it aside) set aside the same names. The first call
    ended after all (slow) and its lift took the names out of Redis, for every replica, while the
    second was still stuck on them: the next retry was decided, and stalled, a third replica.
    Each stuck call holds its own members; a lift takes out only its own."""
    client = redis.Redis.from_url(redis_url)
    prefix = f"q-{uuid.uuid4().hex[:8]}"
    first = Quarantine(client, prefix=prefix, refresh_s=0.0)
    second = Quarantine(client, prefix=prefix, refresh_s=0.0)
    third = Quarantine(client, prefix=prefix, refresh_s=0.0)
    names = ["id:0/slow-1", "at:4/0/0123"]
    try:
        first.set_aside("m1", names)
        second.set_aside("m1", names)
        assert first.lift("m1", names)  # the first call ended after all
        assert first.of("m1") == second.of("m1") == third.of("m1") == frozenset(names)
        assert second.lift("m1", names)  # the second too: nothing left set aside
        assert first.of("m1") is None and third.of("m1") is None
        assert client.zcard(first.key) == 0
    finally:
        for q in (first, second, third):
            q.close()
        client.delete(first.key)
        client.close()


def test_what_a_replica_of_the_release_before_set_aside_is_refused_here_too(redis_url: str) -> None:
    """Members were `<match id> <name>` before each named its hold. Read as `<match id> <hold>
    <name>`, the name of such a member, still in the set for hours across a rolling deploy (and
    written by the old replicas while it lasts), was taken for "" (or the tail of a command id
    with a space in it): the command an old replica set aside was decided again, and stalled, the
    new replicas. A member with no hold is read as the old ones wrote it."""
    client = redis.Redis.from_url(redis_url)
    prefix = f"q-{uuid.uuid4().hex[:8]}"
    new = Quarantine(client, prefix=prefix, refresh_s=0.0)
    expiry_ms = (time.time() + 3600) * 1000
    try:
        client.zadd(new.key, {"m1 id:0/loops-1": expiry_ms, "m1 at:4/0/0123": expiry_ms,
                              "m2 id:1/play card 3": expiry_ms})  # as the release before writes them
        new.set_aside("m2", ["id:1/slow-2"], "7f")
        assert new.of("m1") == frozenset({"id:0/loops-1", "at:4/0/0123"})
        assert new.of("m2") == frozenset({"id:1/play card 3", "id:1/slow-2"})
    finally:
        new.close()
        client.delete(new.key)
        client.close()


def test_a_lift_redis_refused_is_made_at_the_next_read(tmp_path: Path) -> None:
    """A slow call found stuck that ends after all lifts what it set aside. The lift was one ZREM:
    with Redis away just then (a failover, a restart), it was lost, and the command stayed refused
    on every replica for the whole quarantine (6 hours). Now it is kept, lifted on this replica at
    once, and made in Redis at the replica's next read of the set."""
    server = RedisServer(data_dir=tmp_path / "redis", appendfsync="always").start()
    client = redis.Redis.from_url(server.url)
    rounds = [0.0]  # the stuck call's replica reads the set when this moves on
    here = Quarantine(client, refresh_s=1.0, clock=lambda: rounds[0])
    elsewhere = Quarantine(client, refresh_s=0.0)
    names = ["id:0/slow-1", "at:4/0/0123"]
    try:
        here.set_aside("m1", names)
        assert here.of("m1") == frozenset(names) and elsewhere.of("m1") == frozenset(names)
        server.stop()  # Redis away as the slow call ends
        with contextlib.suppress(redis.ConnectionError):  # the watchdog's hook logs what a lift raises
            here.lift("m1", names)
        assert here.of("m1") is None  # lifted here at once
        server.start()  # the same port and data: the set as it was
        assert elsewhere.of("m1") == frozenset(names)  # not yet lifted in Redis
        rounds[0] += 1.0
        assert here.of("m1") is None  # the next read: the lift made first
        assert elsewhere.of("m1") is None
        assert client.zcard(here.key) == 0
    finally:
        here.close()
        elsewhere.close()
        client.close()
        server.stop()


def test_a_lift_made_late_does_not_undo_the_same_command_set_aside_again(tmp_path: Path) -> None:
    """The lift kept for later is of what was set aside then: the same command set aside again
    meanwhile (stuck again, Redis back) stays set aside once the late lift is made."""
    server = RedisServer(data_dir=tmp_path / "redis", appendfsync="always").start()
    client = redis.Redis.from_url(server.url)
    rounds = [0.0]
    here = Quarantine(client, refresh_s=1.0, clock=lambda: rounds[0])
    names = ["id:0/slow-1"]
    try:
        here.set_aside("m1", names)
        server.stop()
        assert not here.lift("m1", names)  # kept for later
        server.start()
        here.set_aside("m1", names)  # stuck again
        rounds[0] += 1.0
        assert here.of("m1") == frozenset(names)
        assert client.zscore(here.key, here.member("m1", "id:0/slow-1")) is not None
    finally:
        here.close()
        client.close()
        server.stop()


class _Watched:
    """The quarantine's write lock, telling `moved` when a thread has to wait for it."""

    def __init__(self, moved: threading.Event) -> None:
        self._lock = threading.Lock()
        self._moved = moved

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lock.acquire(blocking=False):
            return True
        if not blocking:
            return False
        self._moved.set()
        return self._lock.acquire(timeout=timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *_exc: object) -> None:
        self.release()


def _while_reading(q: Quarantine, meanwhile: Callable[[], object]) -> threading.Thread:
    """Has `meanwhile` run on another thread as soon as `q`'s next read round has Redis's answer,
    until it ends or waits for the round to end; the thread, to join."""
    moved = threading.Event()
    q._writing = _Watched(moved)  # type: ignore[assignment]
    read = q._read_script
    worker = threading.Thread(target=lambda: (meanwhile(), moved.set()))

    def answered(*args: object, **kwargs: object) -> object:
        raw = read(*args, **kwargs)
        worker.start()
        assert moved.wait(30)  # a guard against a hang, not a measure
        return raw

    q._read_script = answered
    return worker


def _quarantine(client: redis.Redis, rounds: list[float]) -> Quarantine:
    return Quarantine(client, prefix=f"q-{uuid.uuid4().hex[:8]}", refresh_s=1.0, clock=lambda: rounds[0])


def test_a_read_round_does_not_undo_a_lift_made_while_redis_answered(redis_url: str) -> None:
    """A command thread's read round replaced the replica's view with what Redis answered, however
    old: a stuck call's lift made by the watchdog's thread between that answer and its use was
    undone on the replica until the next round, the command refused again there
    (FAILED_PRECONDITION command_quarantined, which no client retries)."""
    client = redis.Redis.from_url(redis_url)
    rounds = [0.0]
    q = _quarantine(client, rounds)
    names = ["id:0/slow-1", "at:4/0/0123"]
    try:
        q.set_aside("m1", names)
        rounds[0] += 1.0
        worker = _while_reading(q, lambda: q.lift("m1", names))
        q.of("m1")  # the read round; the lift made on the watchdog's thread as Redis answers it
        worker.join()
        assert q.of("m1") is None  # the same round: lifted on this replica
        assert client.zcard(q.key) == 0
    finally:
        q.close()
        client.delete(q.key)
        client.close()


def test_a_read_round_does_not_undo_a_set_aside_made_while_redis_answered(redis_url: str) -> None:
    """The same, for a command set aside by the watchdog's thread as a read round had Redis's
    answer: it was decided again on this replica until the next round."""
    client = redis.Redis.from_url(redis_url)
    rounds = [0.0]
    q = _quarantine(client, rounds)
    try:
        rounds[0] += 1.0
        worker = _while_reading(q, lambda: q.set_aside("m2", ["id:1/loops-2"]))
        q.of("m2")
        worker.join()
        assert q.of("m2") == frozenset({"id:1/loops-2"})  # the same round: set aside on this replica
    finally:
        q.close()
        client.delete(q.key)
        client.close()


def test_a_read_round_waits_once_on_a_redis_that_does_not_answer(tmp_path: Path) -> None:
    """A read round with a lift still to make asked a Redis that did not answer twice, the lift
    then the read, each up to `REDIS_TIMEOUT_S` (2 s) on a command's thread: 4 s on a Redis that
    hangs. Redis away for the lift is away for the read: the round gives up at once."""
    server = RedisServer(data_dir=tmp_path / "redis", appendfsync="always").start()
    client = redis.Redis.from_url(server.url)
    rounds = [0.0]
    here = Quarantine(client, refresh_s=1.0, clock=lambda: rounds[0])
    reads: list[object] = []
    read = here._writer.zrangebyscore

    def counted(*args: object, **kwargs: object) -> object:
        reads.append(args)
        return read(*args, **kwargs)

    here._writer.zrangebyscore = counted  # type: ignore[method-assign]
    try:
        here.set_aside("m1", ["id:0/slow-1"])
        server.stop()
        assert not here.lift("m1", ["id:0/slow-1"])  # kept for later
        rounds[0] += 1.0
        with pytest.raises(redis.ConnectionError):  # the command is told store_unavailable
            here.of("m1")
        assert reads == []  # the lift's attempt only
    finally:
        here._lifting.clear()
        here.close()
        client.close()
        server.stop()
