"""StreamEvents stays open for new events, resumes from any version, and redacts per seat."""

from __future__ import annotations

import threading
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
    assert ready.wait(10), "the open stream got no event"
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


def test_followers_hold_threads_of_their_own_so_unary_calls_still_run(redis_url: str) -> None:
    """Unary calls have a small pool; streams that wait for events must not take it."""
    from famiglia.config import Settings
    from famiglia.eventstore.redis_store import RedisEventStore
    from services.command.bootstrap import bootstrap
    from services.command.entrypoints.grpc_server import serve

    store = RedisEventStore.connect(redis_url)
    server, port = serve(bootstrap(store=store, settings=Settings(redis_url=redis_url, secret="s")),
                         "127.0.0.1:0", workers=8, call_workers=1)
    server.start()
    client = GameClient(f"127.0.0.1:{port}", timeout=10)
    try:
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
    finally:
        client.close()
        server.stop(grace=None)
        store.close()


def test_omit_events_answers_with_the_version_only(command_address: str) -> None:
    game_id = next(iter(REGISTRY))
    client = GameClient(command_address)
    match = client.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=4)
    seat = client.spectator(match.match_id).view().to_act[0].seat
    me = client.seat(match.match_id, match.seat_tokens[seat])
    command = me.legal_commands().commands[0]
    bare = me.submit(command, command_id="c-omit", omit_events=True)
    assert bare.version > match.version and len(bare.events) == 0
    full = me.submit(command, command_id="c-omit")  # the same command again: its events
    assert full.duplicate and full.version == bare.version and len(full.events) > 0
    client.close()
