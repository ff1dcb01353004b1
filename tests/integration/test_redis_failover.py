"""A failover as a service's Redis clients see it, on real redis-servers: the Redis URL's address
served by a replica (every write refused READONLY) and then, as after a failover, by the
primary. A pooled connection stays on the node it was opened to, so the clients answered
READONLY (UNAVAILABLE) to every retry until the process restarted; at the first READONLY they
now drop their pool's connections, once, and the next call connects afresh.

The address is a small TCP proxy whose upstream is switched: connections made after the switch
go to the primary, those open stay on the replica, as with a host name that resolves anew
(tests.support.failover)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from famiglia.config import Settings
from famiglia.engine.registry import default_registry
from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil.errors import store_away
from famiglia.localstack.redis_server import RedisServer
from services.command.app import CommandApp
from services.command.bootstrap import bootstrap
from services.matchmaking.store import RedisTicketStore
from tests.support.failover import SwitchingProxy, fail_over_by_hand, primary_and_replica

pytestmark = pytest.mark.redis

REGISTRY = default_registry()


@pytest.fixture()
def servers(tmp_path: Path) -> Iterator[tuple[RedisServer, RedisServer]]:
    """A primary and its replica, this test's alone."""
    with primary_and_replica(tmp_path) as pair:
        yield pair


@pytest.fixture()
def demoted(servers: tuple[RedisServer, RedisServer]) -> Iterator[SwitchingProxy]:
    """The services' Redis address, served by the replica until the test fails over."""
    proxy = SwitchingProxy(servers[1].port)
    yield proxy
    proxy.close()


def _fail_over(proxy: SwitchingProxy, servers: tuple[RedisServer, RedisServer]) -> None:
    proxy.upstream = servers[0].port


@contextmanager
def _command_app(primary: RedisServer) -> Iterator[tuple[SwitchingProxy, RedisEventStore, CommandApp]]:
    """The command service on an address leading to `primary` (switch it to fail over): the
    address, the app's store and the app, closed at the end."""
    address = SwitchingProxy(primary.port)
    store = RedisEventStore.connect(address.url)
    try:
        yield address, store, bootstrap(store=store, settings=Settings(redis_url=address.url, secret="s"))
    finally:
        store.close()
        address.close()


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
    consumers on it), the quarantine's bounded one (its own pool), matchmaking's, and the bots'
    broker's (its channels' pools and the dispatcher's pushes, a demoted node's answer raised as
    a lost connection: tests/integration/bots/test_broker_failover.py). Nothing connects."""
    from famiglia.matchmaking import FixedRatings
    from famiglia.redis_clients import failover_of, plain_connection_class
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
    from services.bots.bootstrap import bootstrap as bots
    from services.bots.entrypoints.broker import Channel
    from services.bots.entrypoints.celery_app import CeleryTasks

    pushes = failover_of(CeleryTasks(bots(settings=Settings(redis_url=url, secret="s")).celery)._broker())
    assert pushes is not None and pushes.as_connection_error
    assert plain_connection_class(Channel.connection_class) is not Channel.connection_class  # (its pools: `_get_pool`)


def test_a_bots_service_started_on_a_demoted_node_makes_its_group_after_the_failover(
        servers: tuple[RedisServer, RedisServer], demoted: SwitchingProxy) -> None:
    """The dispatcher's group, made at start: a replica's READONLY raised out of
    `start_background` and the bots service exited in a traceback; it is told
    (`dispatcher_group_refused`) and made once Redis takes it."""
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


def test_readiness_is_not_serving_while_the_address_leads_to_a_demoted_node(
        servers: tuple[RedisServer, RedisServer]) -> None:
    """The readiness PING passed on a replica: health said SERVING while every write was refused
    READONLY, and a load balancer kept sending calls to a replica of the service that could only
    fail them. The role is checked with the PING (`redis_primary`): NOT_SERVING, the line saying
    why, until the address leads to the primary; then the service's pools are made again before
    it is SERVING, so its first write goes to the primary, not to the node it left."""
    import grpc
    from structlog.testing import capture_logs

    from famiglia.grpcutil.readiness import redis_primary
    from famiglia.grpcutil.server import build_server
    from famiglia.redis_clients import failover_of
    from famiglia.v1 import game_service_pb2_grpc as pb_grpc
    from services.command.entrypoints.grpc_server import GameServicer
    from tests.integration.test_readiness import GS, NOT_SERVING, SERVING, _until

    primary, replica = servers
    address = SwitchingProxy(primary.port)
    store = RedisEventStore.connect(address.url)
    app = bootstrap(store=store, settings=Settings(redis_url=address.url, secret="s"))
    server, port = build_server("127.0.0.1:0", [(pb_grpc.add_GameServiceServicer_to_server, GameServicer(app), GS)],
                                workers=4, call_workers=1, dependencies=[redis_primary(address.url)],
                                check_every=0.05)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    game_id = next(iter(REGISTRY))
    players = REGISTRY.get(game_id).info.min_players
    try:
        with capture_logs() as logs:
            server.start()
            _until(channel, SERVING)
            app.create_match(game_id, players, seed=11)
            _in_use(store.client, 3)  # pooled connections to the primary, about to be demoted
            fail_over_by_hand(primary, replica)  # the address still leads to the demoted node
            _until(channel, NOT_SERVING)
            with pytest.raises(redis.RedisError) as refused:
                app.create_match(game_id, players, seed=12)
            assert store_away(refused.value), refused.value
            _in_use(store.client, 3)  # made again (the READONLY dropped them), to the demoted node again
            demoted = failover_of(store.client).drops  # type: ignore[union-attr]
            demoted_at = len(logs)
            address.upstream = replica.port  # the address leads to the new primary
            _until(channel, SERVING)
            for seed in (13, 14, 15):  # no READONLY first: made again before SERVING
                app.create_match(game_id, players, seed=seed)
        down = [line for line in logs if line["event"] == "dependency_down"]
        assert len(down) == 1 and down[0]["dependency"] == "redis", down
        assert "RedisReplica" in down[0]["error"] and "READONLY" in down[0]["error"], down[0]
        again = [line for line in logs if line["event"] == "redis_primary_again"]
        assert len(again) == 1 and again[0]["pools_reconnected"] >= 1, again
        assert not [line for line in logs[demoted_at:] if line["event"] == "redis_demoted"]
        assert failover_of(store.client).drops > demoted  # type: ignore[union-attr]
    finally:
        channel.close()
        server.stop(0)
        store.close()
        address.close()


def test_the_role_is_read_on_a_resp2_connection_too(servers: tuple[RedisServer, RedisServer]) -> None:
    """HELLO's reply is a flat list there, not a map."""
    from famiglia.grpcutil.readiness import RedisReplica, redis_primary

    primary, replica = servers
    on_primary, on_replica = redis_primary(primary.url + "?protocol=2"), redis_primary(replica.url + "?protocol=2")
    try:
        on_primary.check()
        with pytest.raises(RedisReplica, match="answers as a replica"):
            on_replica.check()
    finally:
        on_primary.close()
        on_replica.close()


def test_an_append_whose_script_was_loaded_on_the_demoted_node_goes_through_on_the_new_primary(
        servers: tuple[RedisServer, RedisServer]) -> None:
    """The new primary never had the append script (scripts are not replicated): its first
    EVALSHA answers NOSCRIPT, and the store loads the script through its pool, whose idle
    connections may still be on the demoted node, where the load succeeds (no READONLY to drop
    them). Its EVALSHA then answered NOSCRIPT again, raised as NoScriptError (INTERNAL), at every
    append for as long as those connections stayed, then UNAVAILABLE once. Now, as every other script (`famiglia.redis_clients.load_script`),
    every connection is made again and the script loaded and run once more: the append goes
    through on the new primary, no refusal for the failover."""
    from structlog.testing import capture_logs

    from famiglia.redis_clients import failover_of

    primary, replica = servers
    with _command_app(primary) as (address, store, app):
        game_id = next(iter(REGISTRY))
        players = REGISTRY.get(game_id).info.min_players
        app.create_match(game_id, players, seed=11)  # the script loaded on the primary, not on its replica
        _in_use(store.client, 3)  # the pool's idle connections, on the node about to be demoted
        fail_over_by_hand(primary, replica)
        address.upstream = replica.port
        for kept in store._idle:  # the appends' kept connections, made again (a socket error, say): to the new primary
            kept.disconnect()
        drops = failover_of(store.client).drops  # type: ignore[union-attr]
        with capture_logs() as logs:
            created = app.create_match(game_id, players, seed=12)
        assert [line["event"] for line in logs if line["event"].startswith("redis_")] == \
            ["redis_script_loaded_elsewhere"], logs
        assert failover_of(store.client).drops == drops + 1  # type: ignore[union-attr]
        on_new = redis.Redis(port=replica.port)
        assert on_new.exists(store.keys.version(created.match_id))
        for seed in (13, 14, 15):  # on every kept and pooled connection
            assert on_new.exists(store.keys.version(app.create_match(game_id, players, seed=seed).match_id))
        on_new.close()


def test_an_append_whose_script_is_missing_after_two_loads_is_unavailable(redis_url: str) -> None:
    """Loaded twice, the second time with every connection made again, and still NOSCRIPT: the
    address leads to another node at each connection (a failover under way). UNAVAILABLE, for
    its caller to retry (`script_lost`), as every other script; nothing written."""
    from structlog.testing import capture_logs

    from famiglia.redis_clients import failover_of

    store = RedisEventStore.connect(redis_url)
    try:
        app = bootstrap(store=store, settings=Settings(redis_url=redis_url, secret="s"))
        game_id = next(iter(REGISTRY))
        players = REGISTRY.get(game_id).info.min_players
        app.create_match(game_id, players, seed=11)
        store.client.script_flush()
        loads: list[str] = []

        def loaded_elsewhere(text: str) -> str:  # each load lands on a node the EVALSHA never reaches
            loads.append(text)
            return store._append_script.sha

        store.client.script_load = loaded_elsewhere  # type: ignore[method-assign]
        drops = failover_of(store.client).drops  # type: ignore[union-attr]
        with capture_logs() as logs, pytest.raises(redis.RedisError) as refused:
            app.create_match(game_id, players, seed=12)
        assert store_away(refused.value), refused.value
        assert "loaded 2 times" in str(refused.value), refused.value
        assert len(loads) == 2 and failover_of(store.client).drops == drops + 1  # type: ignore[union-attr]
        assert [line["event"] for line in logs if line["event"].startswith("redis_")] == \
            ["redis_script_loaded_elsewhere"], logs
        del store.client.script_load  # (redis-py's own again)
        app.create_match(game_id, players, seed=13)  # loaded for real: the next append goes through
    finally:
        store.close()


def _split_pool(pool: redis.ConnectionPool, fail_over: Callable[[], None]) -> Callable[[], None]:
    """Two other calls' connections, one taken before `fail_over` (on the node it demotes), one
    after (on the new primary), given back as the next two commands' connections are: each
    command then takes the connection freed last (redis-py's pool), as with three threads.
    Returns how to end it; every release is the pool's own."""
    on_demoted = pool.get_connection()
    fail_over()
    finishing = [on_demoted, pool.get_connection()]
    release = pool.release

    def released(conn: object) -> None:
        release(conn)  # type: ignore[arg-type]
        if finishing:
            release(finishing.pop(0))

    pool.release = released  # type: ignore[method-assign]

    def end() -> None:
        pool.release = release  # type: ignore[method-assign]
        assert not finishing  # (the commands interleaved as meant)

    return end


@pytest.mark.parametrize("way", ["Script", "pipelined"])
def test_a_script_loaded_on_the_demoted_node_by_a_pooled_connection_runs_on_the_new_primary(
        servers: tuple[RedisServer, RedisServer], way: str) -> None:
    """Every script but the append loads and retries through the pool: redis-py's Script (chat,
    matchmaking, rematch asks, the players' index, the store's stage, write-out and trim...) and
    the pipelined EVALSHAs (turn notices, matchmaking's holds, the consumers' holds): EVALSHA,
    then at NOSCRIPT SCRIPT LOAD and EVALSHA again, each on whichever pooled connection is free
    then. After a failover those may be on two nodes: the new primary, which never had the script,
    and the demoted one, where the load succeeds (nothing answers READONLY to drop them). The
    second EVALSHA answered NOSCRIPT again, raised as NoScriptError (INTERNAL); now every
    connection of the pool is made again and the script loaded and run where the address leads."""
    from redis.exceptions import NoScriptError

    from famiglia.eventstore.chat import RedisChatStore
    from famiglia.eventstore.turn_notices import YOUR_TURN, RedisTurnNotices, TurnNotice, notify_key

    primary, replica = servers
    with _command_app(primary) as (address, store, app):
        game_id = next(iter(REGISTRY))
        match_id = app.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=11).match_id
        chat, notices = RedisChatStore(store.client, store.keys), RedisTurnNotices(store.client, store.keys.prefix)

        def run(n: int) -> None:
            if way == "Script":
                chat.send(match_id, n, f"m{n}", (), "ciao")
            else:
                notices.tell([TurnNotice("p1", match_id, game_id, n, YOUR_TURN, n, asked_at=n)])

        run(0)  # the script loaded on the primary, not on its replica

        def fail_over() -> None:
            fail_over_by_hand(primary, replica)
            address.upstream = replica.port

        end = _split_pool(store.client.connection_pool, fail_over)
        try:
            run(1)
        except NoScriptError as exc:
            pytest.fail(f"the script's second EVALSHA met NOSCRIPT again: {exc!r}")
        finally:
            end()
        on_new = redis.Redis(port=replica.port)
        key = store.keys.chat(match_id) if way == "Script" else notify_key(store.keys.prefix, "p1")
        assert on_new.xlen(key) == 2
        on_new.close()


def test_a_call_blocked_on_the_node_a_failover_demotes_is_unavailable(
        servers: tuple[RedisServer, RedisServer]) -> None:
    """A watch's XREAD BLOCK (the store's `wait_for`; chat's and turn notices' alike) on the primary
    as it turns replica is cut short, `UNBLOCKED ... instance state changed (master -> replica?)`:
    the store away for now, UNAVAILABLE for the caller to retry, and the pool's connections made
    again. It was no `store_away`: a plain reply error, INTERNAL to every watching client."""
    from famiglia.grpcutil.errors import store_demoted, unavailable
    from famiglia.redis_clients import failover_of

    primary, replica = servers
    with _command_app(primary) as (address, store, app):
        game_id = next(iter(REGISTRY))
        created = app.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=11)
        version = store.version(created.match_id)
        raised: list[BaseException] = []

        def watch() -> None:
            try:
                store.wait_for(created.match_id, version, 60_000)
            except BaseException as exc:  # noqa: BLE001 - what the call raised, for the test
                raised.append(exc)

        watching = threading.Thread(target=watch)
        watching.start()
        on_primary = redis.Redis(port=primary.port)
        deadline = time.monotonic() + 30
        while on_primary.info("clients")["blocked_clients"] < 1:
            assert time.monotonic() < deadline, "the watch never blocked"
            time.sleep(0.01)
        on_primary.close()
        fail_over_by_hand(primary, replica)
        watching.join(30)
        assert not watching.is_alive() and raised, "the watch was not cut short"
        error = raised[0]
        assert "UNBLOCKED" in str(error), error
        assert store_demoted(error) and unavailable(error) is not None, error
        assert failover_of(store.client).drops == 1  # type: ignore[union-attr]


def test_a_server_that_refuses_hello_leaves_the_ping_to_decide(tmp_path: Path) -> None:
    """A proxy in front of Redis that does not know HELLO (Envoy's answers `unsupported command`,
    as a Redis with HELLO renamed away answers `unknown command`): its role unknown, the PING
    decides, as with a HELLO that names no role. The refusal failed every check: NOT_SERVING for
    good, behind such a proxy, from the first round."""
    from famiglia.grpcutil.readiness import redis_primary

    server = RedisServer(data_dir=tmp_path / "hello", extra_args=("--rename-command", "HELLO", "")).start()
    check = redis_primary(server.url)
    try:
        check.check()
    finally:
        check.close()
        server.stop()


def test_a_transaction_watching_keys_when_its_pool_is_dropped_is_retried_not_run_unwatched(
        servers: tuple[RedisServer, RedisServer]) -> None:
    """A connection open when its pool dropped its connections (another call's READONLY, or
    readiness's `reconnect_all` once the primary is back) is made again at its next send, silently:
    in the middle of a WATCH transaction (kombu's restore of an unacked task, on the broker's
    pools) the WATCH went with the old connection and the EXEC ran on the new one unwatched, over
    a write made meanwhile. A lost connection while watching is a WatchError in redis-py, for the
    transaction to be run again: so is this one."""
    from famiglia.redis_clients import connect, failover_of

    primary, _ = servers
    client, other = connect(primary.url), redis.Redis(port=primary.port)
    try:
        client.set("famiglia:watched", "1")
        with client.pipeline() as pipe:
            pipe.watch("famiglia:watched")
            seen = int(pipe.get("famiglia:watched"))
            failover_of(client).drop()  # type: ignore[union-attr]  # as another thread's READONLY would
            other.set("famiglia:watched", "5")  # a write the WATCH is there to see
            pipe.multi()
            pipe.set("famiglia:watched", seen + 1)
            with pytest.raises(redis.WatchError):
                pipe.execute()
        assert other.get("famiglia:watched") == b"5"
        assert client.set("famiglia:probe", "1")  # (the pool goes on)
    finally:
        client.close()
        other.close()
