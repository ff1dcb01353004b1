"""StreamEvents stays open for new events, resumes from any version, and redacts per seat."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from famiglia.client import GameClient
from famiglia.engine.registry import default_registry

REGISTRY = default_registry()
pytestmark = pytest.mark.skipif(not list(REGISTRY), reason="no game engine registered yet")


def _move(client: GameClient, match_id: str, tokens: list[str]) -> int:
    view = client.spectator(match_id).view()
    seat = view.to_act[0].seat
    me = client.seat(match_id, tokens[seat])
    return me.submit(me.legal_commands().commands[0]).version


def test_a_following_stream_receives_events_appended_after_it_opened(command_address: str) -> None:
    game_id = next(iter(REGISTRY))
    client = GameClient(command_address)
    match = client.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=2)
    stream = client.spectator(match.match_id).stream(from_version=match.version, timeout=20)
    seen: list[int] = []
    ready = threading.Event()

    def follow() -> None:
        try:
            for reply in stream:
                if reply.HasField("event"):
                    seen.append(reply.event.seq)
                    ready.set()
        except grpc.RpcError:
            pass

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    version = _move(client, match.match_id, match.seat_tokens)
    assert ready.wait(30), "the open stream got no event"
    stream.cancel()
    reader.join(5)
    assert seen and seen[0] > match.version and max(seen) <= version
    client.close()


def test_a_stream_resumes_from_any_version(command_address: str) -> None:
    game_id = next(iter(REGISTRY))
    client = GameClient(command_address)
    match = client.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=3)
    for _ in range(3):
        _move(client, match.match_id, match.seat_tokens)
    seat0 = client.seat(match.match_id, match.seat_tokens[0])
    everything = [r.event.seq for r in seat0.stream(0, until_now=True) if r.HasField("event")]
    later = [r.event.seq for r in seat0.stream(everything[2], until_now=True) if r.HasField("event")]
    assert later == everything[3:]
    assert everything == sorted(everything)
    client.close()


def _first_or_cancelled(stream: Any) -> None:
    """Wait for a stream's first event; the test cancels the streams it is done with."""
    try:
        next(iter(stream), None)
    except grpc.RpcError as exc:
        if exc.code() is not grpc.StatusCode.CANCELLED:
            raise


@contextlib.contextmanager
def _server(redis_url: str, workers: int, call_workers: int) -> Iterator[GameClient]:
    """A GameService of its own, with these pools, and a client of it."""
    from famiglia.config import Settings
    from famiglia.eventstore.redis_store import RedisEventStore
    from services.command.bootstrap import bootstrap
    from services.command.entrypoints.grpc_server import serve

    store = RedisEventStore.connect(redis_url)
    server, port = serve(bootstrap(store=store, settings=Settings(redis_url=redis_url, secret="s")),
                         "127.0.0.1:0", workers=workers, call_workers=call_workers)
    server.start()
    client = GameClient(f"127.0.0.1:{port}", timeout=10)
    try:
        yield client
    finally:
        client.close()
        server.stop(grace=None)
        store.close()


def test_followers_hold_threads_of_their_own_so_unary_calls_still_run(redis_url: str) -> None:
    """Unary calls have a small pool; streams that wait for events must not take it."""
    with _server(redis_url, workers=8, call_workers=1) as client:
        game_id = next(iter(REGISTRY))
        match = client.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=4)
        streams = [client.spectator(match.match_id).stream(from_version=match.version, timeout=30)
                   for _ in range(3)]
        opened = [threading.Thread(target=_first_or_cancelled, args=(s,), daemon=True) for s in streams]
        for t in opened:
            t.start()  # each follower now waits for an event on the server
        assert _move(client, match.match_id, match.seat_tokens) > match.version
        for s in streams:
            s.cancel()


def test_one_stream_past_the_limit_is_refused_at_once_not_queued(redis_url: str) -> None:
    """Followers hold their threads for as long as their clients stay: one more stream than
    the server follows gets RESOURCE_EXHAUSTED (too_many_streams) at once, instead of waiting
    without a word behind them; when a follower leaves, streams are admitted again."""
    from famiglia.grpcutil.errors import error_code

    with _server(redis_url, workers=2, call_workers=1) as client:
        game_id = next(iter(REGISTRY))
        match = client.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=4)
        spectator = client.spectator(match.match_id)
        followers: list[Any] = [None, None]  # each follower's stream now
        stop = threading.Event()

        def follow(i: int) -> None:
            """Hold a stream open; one refused because a probe below held the slot a moment
            (a loaded machine interleaves them) tries again, until it is in or the test is done."""
            while not stop.is_set():
                followers[i] = stream = spectator.stream(from_version=match.version, timeout=30)
                try:
                    next(iter(stream), None)
                    return
                except grpc.RpcError as exc:
                    if exc.code() is not grpc.StatusCode.RESOURCE_EXHAUSTED:
                        return
                time.sleep(0.05)

        for i in range(2):
            threading.Thread(target=follow, args=(i,), daemon=True).start()

        def one_more() -> grpc.RpcError | None:
            try:
                list(spectator.stream(from_version=match.version, until_now=True, timeout=5))
            except grpc.RpcError as exc:
                return exc
            return None

        deadline = time.monotonic() + 30
        refused = one_more()
        while refused is None and time.monotonic() < deadline:  # until both followers are in
            time.sleep(0.05)
            refused = one_more()
        stop.set()
        assert refused is not None, "a third stream was never refused"
        assert (refused.code(), error_code(refused)) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "too_many_streams")
        followers[0].cancel()
        deadline = time.monotonic() + 30
        while one_more() is not None:
            assert time.monotonic() < deadline, "no stream admitted after a follower left"
            time.sleep(0.05)
        followers[1].cancel()


def test_a_stream_from_past_the_match_version_is_refused(command_address: str) -> None:
    """Every event up to a cursor past the match's version would be skipped without a word."""
    from famiglia.grpcutil.errors import error_code

    game_id = next(iter(REGISTRY))
    client = GameClient(command_address)
    match = client.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=5)
    for from_version in (match.version + 1, 2**63 - 1):
        with pytest.raises(grpc.RpcError) as exc:
            list(client.spectator(match.match_id).stream(from_version=from_version, until_now=True, timeout=5))
        assert (exc.value.code(), error_code(exc.value)) == (grpc.StatusCode.OUT_OF_RANGE, "version_ahead")
    at_end = [r for r in client.spectator(match.match_id).stream(from_version=match.version, until_now=True)]
    assert not any(r.HasField("event") for r in at_end)  # its own version is where it is: nothing after
    client.close()


def test_omit_events_answers_with_the_version_only(command_address: str) -> None:
    from .conftest import match_and_first_move

    client = GameClient(command_address)
    match, me, command = match_and_first_move(client, seed=4)
    bare = me.submit(command, command_id="c-omit", omit_events=True)
    assert bare.version > match.version and len(bare.events) == 0
    full = me.submit(command, command_id="c-omit")  # the same command again: its events
    assert full.duplicate and full.version == bare.version and len(full.events) > 0
    client.close()


def _play_to_the_end(client: GameClient, match_id: str, tokens: list[str]) -> int:
    while not (view := client.spectator(match_id).view()).finished:
        me = client.seat(match_id, tokens[view.to_act[0].seat])
        legal = me.legal_commands()
        if legal.version == view.version and legal.commands:
            me.submit(legal.commands[0], command_id=f"{view.version}", omit_events=True)
    return view.version


def test_follow_resumes_across_a_restarted_server_and_ends_with_the_match(command_process) -> None:
    """SeatClient.follow: what a mobile client needs, a stream that survives its connection."""
    game_id = next(iter(REGISTRY))
    client = GameClient(command_process.address, timeout=10)
    match = client.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=5)
    for _ in range(3):
        _move(client, match.match_id, match.seat_tokens)
    seat0 = client.seat(match.match_id, match.seat_tokens[0])
    followed: list[str] = []
    failed: list[BaseException] = []
    first = threading.Event()

    def follow() -> None:
        try:
            for event in seat0.follow(from_version=0, retry_for=60):
                followed.append(event.event_id)
                first.set()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            failed.append(exc)

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    assert first.wait(10)
    command_process.kill()  # the open stream breaks: UNAVAILABLE
    command_process.start()
    # The SDK's channel (keepalive options) shares no subchannel with the start's probe: it
    # may be in its reconnect backoff, where a unary call is UNAVAILABLE at once.
    client.wait_ready(30)
    last = _play_to_the_end(client, match.match_id, match.seat_tokens)
    reader.join(60)
    assert not reader.is_alive(), "follow did not end with the match"
    assert not failed, failed
    everything = [r.event.event_id for r in seat0.stream(0, until_now=True) if r.HasField("event")]
    assert followed == everything
    assert last == client.spectator(match.match_id).view().version
    client.close()


class _Follower:
    """Reads a stream on its own thread until it ends: its events' seqs, then how it ended."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.seqs: list[int] = []
        self.first = threading.Event()
        self.ended = threading.Event()
        self.error: grpc.RpcError | None = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for reply in self.stream:
                if reply.HasField("event"):
                    self.seqs.append(reply.event.seq)
                self.first.set()
        except grpc.RpcError as exc:
            self.error = exc
        finally:
            self.first.set()
            self.ended.set()


def test_a_server_stopping_ends_its_open_streams_with_unavailable_not_after_the_grace() -> None:
    """A server stopped with a grace (every service's shutdown: `server.stop(grace=5)`) kept its
    followers open for the whole grace, since they wait for events that no longer come, and only
    then were they cut: the shutdown always took the full grace, and clients learnt nothing until
    it ran out. Followers now end at once with UNAVAILABLE (`server_stopping`), the status a client
    reconnects on (to another replica, from the version it has), and the server stops without
    waiting out the grace. (The grace here is far longer than anything this test waits for.)"""
    from famiglia.config import Settings
    from famiglia.eventstore.memory_store import InMemoryEventStore
    from famiglia.grpcutil.errors import error_code
    from services.command.bootstrap import bootstrap
    from services.command.entrypoints.grpc_server import serve

    server, port = serve(bootstrap(store=InMemoryEventStore(), settings=Settings(secret="s")),
                         "127.0.0.1:0", workers=4, call_workers=1)
    server.start()
    client = GameClient(f"127.0.0.1:{port}", timeout=10)
    try:
        game_id = next(iter(REGISTRY))
        match = client.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=6)
        _move(client, match.match_id, match.seat_tokens)
        follower = _Follower(client.spectator(match.match_id).stream(from_version=0, timeout=600))
        assert follower.first.wait(30) and follower.seqs, "the follower got no event"
        stopped = server.stop(grace=600)
        assert follower.ended.wait(60), "the follower was kept open through the grace"
        assert follower.error is not None, "a stream cut short ended as if it were whole"
        assert (follower.error.code(), error_code(follower.error)) == (grpc.StatusCode.UNAVAILABLE, "server_stopping")
        assert stopped.wait(60), "the server waited out its grace"
    finally:
        client.close()
        server.stop(grace=None)


def test_a_redis_restart_ends_open_streams_with_unavailable_and_they_resume_where_they_were(tmp_path) -> None:
    """Redis restarting (a crash, a failover) under an open follower ended it with INTERNAL
    ("internal error in StreamEvents", a traceback in the log): a client cannot tell that from a
    bug and does not retry it. It is UNAVAILABLE (`store_unavailable`), and a stream opened again
    from the last version the client had gets every later event once, in order."""
    from famiglia.config import Settings
    from famiglia.eventstore.redis_store import RedisEventStore
    from famiglia.grpcutil.errors import error_code
    from famiglia.localstack.redis_server import RedisServer
    from services.command.bootstrap import bootstrap
    from services.command.entrypoints.grpc_server import serve

    redis_server = RedisServer(data_dir=tmp_path, appendfsync="always").start()
    store = RedisEventStore.connect(redis_server.url)
    server, port = serve(bootstrap(store=store, settings=Settings(redis_url=redis_server.url, secret="s")),
                         "127.0.0.1:0", workers=4, call_workers=1)
    server.start()
    client = GameClient(f"127.0.0.1:{port}", timeout=10)
    try:
        game_id = next(iter(REGISTRY))
        match = client.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=7)
        _move(client, match.match_id, match.seat_tokens)
        spectator = client.spectator(match.match_id)
        follower = _Follower(spectator.stream(from_version=0, timeout=600))
        assert follower.first.wait(30) and follower.seqs, "the follower got no event"
        redis_server.restart(kill=True)
        # Either the follower's read fails with Redis gone, and it ends with UNAVAILABLE
        # store_unavailable, or redis-py's own retry reconnects it to the Redis that came back
        # (on a loaded machine the restart can be that quick) and it follows on. Either way it
        # never ends with INTERNAL, and every event reaches the client once, in order.
        version = 0
        deadline = time.monotonic() + 60
        while not version:  # the service's own connections come back with Redis
            try:
                version = _move(client, match.match_id, match.seat_tokens)
            except grpc.RpcError:
                assert time.monotonic() < deadline, "the service never came back with Redis"
                time.sleep(0.2)
        deadline = time.monotonic() + 120
        while not follower.ended.is_set() and not (follower.seqs and follower.seqs[-1] >= version):
            assert time.monotonic() < deadline, "the follower neither ended nor followed on"
            time.sleep(0.05)
        everything = [r.event.seq for r in spectator.stream(from_version=0, until_now=True, timeout=30)
                      if r.HasField("event")]
        if follower.ended.is_set():
            assert follower.error is not None
            assert (follower.error.code(), error_code(follower.error)) == (
                grpc.StatusCode.UNAVAILABLE, "store_unavailable")
            again = [r.event.seq for r in spectator.stream(from_version=follower.seqs[-1], until_now=True,
                                                           timeout=30) if r.HasField("event")]
            assert follower.seqs + again == everything and again and again[-1] == version
        else:
            assert follower.seqs == everything and follower.seqs[-1] == version
    finally:
        client.close()
        server.stop(grace=None)
        store.close()
        redis_server.stop()


class _Link:
    """A TCP relay between a client and a server whose network can be lost: `lose()` stops
    carrying bytes either way but leaves both connections open, as a phone that drops off the
    network does (no FIN, no RST: the server hears nothing more, not even a goodbye)."""

    def __init__(self, target_port: int) -> None:
        import socket

        self.target = ("127.0.0.1", target_port)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.port = self.listener.getsockname()[1]
        self.lost = threading.Event()
        self.sockets: list[Any] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket

        while True:
            try:
                near, _ = self.listener.accept()
            except OSError:
                return
            far = socket.create_connection(self.target)
            self.sockets += [near, far]
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self._carry, args=(a, b), daemon=True).start()

    def _carry(self, source: Any, sink: Any) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                return
            if self.lost.is_set():
                continue  # swallowed: the bytes never arrive
            try:
                sink.sendall(data)
            except OSError:
                return

    def lose(self) -> None:
        self.lost.set()

    def close(self) -> None:
        self.listener.close()
        for s in self.sockets:
            s.close()


def test_a_follower_whose_network_vanished_gives_its_slot_back() -> None:
    """A phone that loses its network sends no FIN: its connection stays open on the server,
    and a follower on a quiet match (nothing to write) never learns that its client is gone.
    gRPC's server pings such connections only after 2 hours by default, so every vanished
    client held a stream slot and a thread that long, and enough of them made the server refuse
    every new stream (`too_many_streams`). The server pings idle connections (`keepalive_s`;
    short here) and drops those that do not answer, which frees the slot."""
    from famiglia.config import Settings
    from famiglia.eventstore.memory_store import InMemoryEventStore
    from famiglia.grpcutil.errors import error_code
    from services.command.bootstrap import bootstrap
    from services.command.entrypoints.grpc_server import serve

    server, port = serve(bootstrap(store=InMemoryEventStore(), settings=Settings(secret="s")),
                         "127.0.0.1:0", workers=1, call_workers=1, keepalive_s=1.0)
    server.start()
    link = _Link(port)
    phone = GameClient(f"127.0.0.1:{link.port}", timeout=10)
    client = GameClient(f"127.0.0.1:{port}", timeout=10)
    try:
        game_id = next(iter(REGISTRY))
        match = client.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=8)
        _move(client, match.match_id, match.seat_tokens)
        follower = _Follower(phone.spectator(match.match_id).stream(from_version=0, timeout=600))
        assert follower.first.wait(30) and follower.seqs, "the follower got no event"
        spectator = client.spectator(match.match_id)

        def admitted() -> bool:
            try:
                list(spectator.stream(from_version=0, until_now=True, timeout=10))
            except grpc.RpcError as exc:
                assert (exc.code(), error_code(exc)) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "too_many_streams")
                return False
            return True

        assert not admitted()  # the one slot is the follower's
        link.lose()
        deadline = time.monotonic() + 90
        while not admitted():
            assert time.monotonic() < deadline, "the vanished follower kept its slot"
            time.sleep(0.2)
    finally:
        phone.close()
        client.close()
        link.close()
        server.stop(grace=None)
