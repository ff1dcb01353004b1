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
    last = _play_to_the_end(client, match.match_id, match.seat_tokens)
    reader.join(60)
    assert not reader.is_alive(), "follow did not end with the match"
    assert not failed, failed
    everything = [r.event.event_id for r in seat0.stream(0, until_now=True) if r.HasField("event")]
    assert followed == everything
    assert last == client.spectator(match.match_id).view().version
    client.close()
