"""A failover as a service's Redis clients see it, on real redis-servers: the Redis URL's address
served by a replica (every write refused READONLY) and then, as after a failover, by the
primary. A pooled connection stays on the node it was opened to, so the clients answered
READONLY (UNAVAILABLE) to every retry until the process restarted; at the first READONLY they
now drop their pool's connections, once, and the next call connects afresh.

The address is a small TCP proxy whose upstream is switched: connections made after the switch
go to the primary, those open stay on the replica, as with a host name that resolves anew."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from famiglia.config import Settings
from famiglia.engine.registry import default_registry
from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil.errors import store_away
from famiglia.localstack.redis_server import RedisServer
from services.command.bootstrap import bootstrap
from services.matchmaking.store import RedisTicketStore

pytestmark = pytest.mark.redis

REGISTRY = default_registry()


class SwitchingProxy:
    """Forwards each connection to `upstream` (a port) as it was when the connection came."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self.listener.accept()
            except OSError:
                return
            far = socket.create_connection(("127.0.0.1", self.upstream))
            self.connections += 1
            self._sockets += [near, far]
            for source, sink in ((near, far), (far, near)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        except OSError:
            pass
        self.listener.close()
        for end in self._sockets:
            end.close()


@pytest.fixture()
def servers(tmp_path: Path) -> Iterator[tuple[RedisServer, RedisServer]]:
    """A primary and its replica, this test's alone."""
    primary = RedisServer(data_dir=tmp_path / "primary", extra_args=("--repl-diskless-sync-delay", "0")).start()
    replica = RedisServer(data_dir=tmp_path / "replica",
                          extra_args=("--replicaof", "127.0.0.1", str(primary.port))).start()
    yield primary, replica
    replica.stop()
    primary.stop()


@pytest.fixture()
def demoted(servers: tuple[RedisServer, RedisServer]) -> Iterator[SwitchingProxy]:
    """The services' Redis address, served by the replica until the test fails over."""
    proxy = SwitchingProxy(servers[1].port)
    yield proxy
    proxy.close()


def _fail_over(proxy: SwitchingProxy, servers: tuple[RedisServer, RedisServer]) -> None:
    proxy.upstream = servers[0].port


def _in_use(client: redis.Redis, count: int) -> list[object]:
    """`count` of the client's pooled connections, connected, handed back to its pool."""
    pool = client.connection_pool
    taken = [pool.get_connection() for _ in range(count)]
    for conn in taken:
        pool.release(conn)
    return taken


def test_a_ticket_store_on_a_demoted_node_writes_at_the_next_call_after_the_failover(
        servers: tuple[RedisServer, RedisServer], demoted: SwitchingProxy) -> None:
    client = RedisTicketStore.connect(demoted.url).client  # matchmaking's, redis-py's own calls
    try:
        _in_use(client, 3)  # three pooled connections to the replica
        with pytest.raises(redis.ReadOnlyError):
            client.set("famiglia:probe", "1")
        _fail_over(demoted, servers)
        for n in range(3):  # whichever pooled connection each call takes
            assert client.set("famiglia:probe", str(n))
        pool = client.connection_pool
        together = [pool.get_connection() for _ in range(3)]
        try:
            for conn in together:
                conn.send_command("SET", "famiglia:probe", "x")
                assert conn.read_response() in (b"OK", "OK")
        finally:
            for conn in together:
                pool.release(conn)
        assert redis.Redis(port=servers[0].port).get("famiglia:probe") == b"x"
    finally:
        client.close()


def test_the_event_store_on_a_demoted_node_appends_at_the_next_call_after_the_failover(
        servers: tuple[RedisServer, RedisServer], demoted: SwitchingProxy) -> None:
    """The command service's appends (the store's kept connections, past redis-py) and its other
    writes (the players' index, on redis-py's)."""
    store = RedisEventStore.connect(demoted.url)
    try:
        app = bootstrap(store=store, settings=Settings(redis_url=demoted.url, secret="s"))
        game_id = next(iter(REGISTRY))
        players = REGISTRY.get(game_id).info.min_players
        _in_use(store.client, 2)
        with pytest.raises(redis.RedisError) as refused:
            app.create_match(game_id, players, seed=11)
        assert store_away(refused.value), refused.value
        _fail_over(demoted, servers)
        created = app.create_match(game_id, players, seed=12)
        assert redis.Redis(port=servers[0].port).exists(store.keys.version(created.match_id))
        for seed in (13, 14, 15):  # on every kept and pooled connection
            app.create_match(game_id, players, seed=seed)
    finally:
        store.close()


def test_a_storm_of_readonly_drops_the_connections_once(demoted: SwitchingProxy) -> None:
    from famiglia.redis_clients import failover_of

    client = RedisTicketStore.connect(demoted.url).client
    try:
        pool = client.connection_pool
        together = [pool.get_connection() for _ in range(4)]
        try:
            for conn in together:  # four calls in flight, each refused
                conn.send_command("SET", "famiglia:probe", "1")
            for conn in together:
                with pytest.raises(redis.ReadOnlyError):
                    conn.read_response()
        finally:
            for conn in together:
                pool.release(conn)
        failover = failover_of(client)
        assert failover is not None and failover.drops == 1
        made = demoted.connections
        with pytest.raises(redis.ReadOnlyError):  # still the replica: one connection made again
            client.set("famiglia:probe", "1")
        assert demoted.connections == made + 1 and failover.drops == 2
    finally:
        client.close()


def test_the_partition_consumer_on_a_demoted_node_reads_after_the_failover(
        servers: tuple[RedisServer, RedisServer], demoted: SwitchingProxy) -> None:
    """The projection's and the dispatcher's reads: their kept connection, and the pool's."""
    primary = RedisEventStore.connect(servers[0].url)
    store = RedisEventStore.connect(demoted.url)
    try:
        app = bootstrap(store=primary, settings=Settings(redis_url=servers[0].url, secret="s"))
        game_id = next(iter(REGISTRY))
        on_primary = PartitionConsumer.for_store(primary, "g", "c")
        on_primary.ensure_groups(start_id="0")
        app.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=11)
        replica = redis.Redis(port=servers[1].port)
        deadline = time.monotonic() + 30
        while (replica.info("replication").get("master_link_status") != "up"
               or replica.dbsize() < primary.client.dbsize()):
            assert time.monotonic() < deadline, "the replica never caught up"
            time.sleep(0.05)
        replica.close()
        consumer = PartitionConsumer.for_store(store, "g", "c")
        consumer._groups_ready = True  # made on the primary, replicated
        _in_use(store.client, 2)  # the pool's, beside the consumer's kept one
        with pytest.raises(redis.RedisError) as refused:  # XREADGROUP writes: refused on a replica
            consumer.read(count=10, block_ms=None)
        assert store_away(refused.value), refused.value
        _fail_over(demoted, servers)
        assert consumer.read(count=10, block_ms=None)
        # the consumer's READONLY dropped the pool's connections too: no READONLY of their own first
        assert all(store.client.set("famiglia:probe", "1") for _ in range(2))
    finally:
        store.close()
        primary.close()


def test_every_long_lived_client_of_ours_follows_a_failover() -> None:
    """Made by famiglia.redis_clients: the event store's (the command, replay, projection and
    bots services', with the quarantine, chat, rematches, players' index, tournaments and
    consumers on it), the quarantine's bounded one (its own pool), matchmaking's. (Celery's
    broker is Celery's.) Nothing connects."""
    from famiglia.matchmaking import FixedRatings
    from famiglia.redis_clients import failover_of
    from services.command.quarantine import _bounded
    from services.matchmaking.bootstrap import bootstrap as matchmaking

    url = "redis://127.0.0.1:1/0"
    store = RedisEventStore.connect(url)
    bounded = _bounded(store.client)
    assert failover_of(store.client) is not None
    assert failover_of(bounded) not in (None, failover_of(store.client))
    timeouts = (pool.connection_kwargs["socket_timeout"] for pool in (bounded.connection_pool, store.client.connection_pool))
    assert len(set(timeouts)) == 2  # (its own settings, kept)
    mm = matchmaking(settings=Settings(redis_url=url, secret="s"), games={}, ratings=FixedRatings())
    assert failover_of(mm.app.store.client) is not None


def test_a_bots_service_started_on_a_demoted_node_makes_its_group_after_the_failover(
        servers: tuple[RedisServer, RedisServer], demoted: SwitchingProxy) -> None:
    """The dispatcher's group, made at start: a replica's READONLY raised out of
    `start_background` and the bots service exited in a traceback; it is told
    (`dispatcher_group_refused`, readiness's PING passes) and made once Redis takes it."""
    from structlog.testing import capture_logs

    from services.bots.__main__ import _dispatch, _ensure_groups
    from services.bots.dispatcher import GROUP

    class Dispatcher:
        ran = False

        def run(self, consumer: PartitionConsumer, stop: threading.Event, *, block_ms: int) -> None:
            self.ran = True

    store = RedisEventStore.connect(demoted.url)
    try:
        consumer = PartitionConsumer.for_store(store, GROUP, "dispatcher-test")
        with capture_logs() as logs:
            assert not _ensure_groups(consumer)
        # (and the store's client dropped its connections, to be made again wherever the address leads)
        assert [line["event"] for line in logs] == ["redis_demoted", "dispatcher_group_refused"]
        assert "ReadOnlyError" in logs[1]["error"]
        _fail_over(demoted, servers)
        dispatcher = Dispatcher()
        _dispatch(dispatcher, consumer, threading.Event(), False, 100)  # type: ignore[arg-type]
        assert dispatcher.ran
        primary = redis.Redis(port=servers[0].port)
        assert [g["name"] for g in primary.xinfo_groups(store.keys.partition_stream(0))] == [GROUP.encode()]
        primary.close()
    finally:
        store.close()
