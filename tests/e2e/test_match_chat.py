"""Match chat over real gRPC and a real redis-server: SendChat, ListChat and StreamChat through
the SDK and the bare stubs; private messages reach their sender and recipients only, on every
channel a seat or a spectator can reach (chat is no event: views, event streams, the replay
service and exports never carry it); idempotent retries; the rate; Nothing Personal's own chat;
a followed chat across a dropped connection."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

from famiglia.auth import TokenSigner
from famiglia.client import GameClient
from famiglia.config import Settings
from famiglia.eventstore.chat import ChatLimits
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil.errors import error_code
from famiglia.v1 import game_service_pb2 as game_pb
from famiglia.v1 import replay_service_pb2 as replay_pb
from services.command.bootstrap import bootstrap
from services.command.chat import ChatSettings
from services.command.entrypoints.grpc_server import serve
from tests.e2e.conftest import SECRET, Services
from tests.e2e.test_client_resilience import _Proxy

C = grpc.StatusCode
DEADLINE = 60


def _metadata(token: str | None) -> list[tuple[str, str]] | None:
    return None if token is None else [("authorization", f"Bearer {token}")]


def refused(call: Callable[..., Any], request: Message, token: str | None = None, *,
            stream: bool = False) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as caught:
        reply = call(request, metadata=_metadata(token), timeout=DEADLINE)
        if stream:
            list(reply)
    return caught.value.code(), error_code(caught.value)


@pytest.fixture()
def game_address(redis_url: str) -> Iterator[str]:
    """A GameService whose chat rate (5 messages a seat) has a window no slow machine outlasts."""
    store = RedisEventStore.connect(redis_url)
    app = bootstrap(store=store, settings=Settings(redis_url=redis_url, secret=SECRET),
                    chat=ChatSettings(ChatLimits(rate=5, window_ms=3_600_000)))
    server, port = serve(app, "127.0.0.1:0", workers=8)
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(grace=None)
    store.close()


@pytest.fixture()
def client(game_address: str) -> Iterator[GameClient]:
    c = GameClient(game_address, timeout=DEADLINE)
    yield c
    c.close()


def test_a_table_talks_and_each_reader_lists_and_streams_what_it_may_read(client: GameClient) -> None:
    match = client.create_match("goodcritters", 4, seed=3)
    seats = [client.seat(match.match_id, t) for t in match.seat_tokens]
    spectator = client.spectator(match.match_id)
    live: dict[int | None, list[str]] = {}
    opened = []
    for who, reader in [(None, spectator), *enumerate(seats)]:
        stream = reader.chat_stream()
        opened.append(stream)
        live[who] = []

        def follow(stream=stream, got=live[who]) -> None:  # type: ignore[no-untyped-def]
            try:
                for reply in stream:
                    got.append(reply.message.text)
            except grpc.RpcError as exc:
                assert exc.code() is C.CANCELLED

        threading.Thread(target=follow, daemon=True).start()
    sent = seats[0].send_chat("  I'll give the loot to whoever backs me  ").message
    assert (sent.from_seat, list(sent.to_seats), sent.text) == (0, [], "I'll give the loot to whoever backs me")
    assert sent.sent_ms > 0 and sent.id.startswith(str(sent.sent_ms))
    seats[1].send_chat("psst, 2: I bluff", to_seats=[2])
    seats[2].send_chat("1 and 3 only", to_seats=[3, 1])
    seats[3].send_chat("deal")
    expected = {None: ["I'll give the loot to whoever backs me", "deal"],
                0: ["I'll give the loot to whoever backs me", "deal"],
                1: ["I'll give the loot to whoever backs me", "psst, 2: I bluff", "1 and 3 only", "deal"],
                2: ["I'll give the loot to whoever backs me", "psst, 2: I bluff", "1 and 3 only", "deal"],
                3: ["I'll give the loot to whoever backs me", "1 and 3 only", "deal"]}
    for who, reader in [(None, spectator), *enumerate(seats)]:
        assert [m.text for m in reader.chat()] == expected[who], who
        assert [r.message.text for r in reader.chat_stream(until_now=True)] == expected[who], who
    deadline = time.monotonic() + 30
    while any(len(live[w]) < len(expected[w]) for w in expected) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live == expected  # each followed stream got, live, exactly what its reader may read
    listed = seats[1].chat()
    assert [m.text for m in seats[1].chat(after_id=listed[1].id, limit=1)] == ["1 and 3 only"]
    for stream in opened:
        stream.cancel()


def test_a_private_message_reaches_no_other_seat_nor_a_spectator_on_any_channel(stubs: Services) -> None:
    """Every answer a seat or a spectator can get, GameService's and the replay service's, byte
    for byte: a private message's text, id and recipients show only in its sender's and its
    recipients' chat, and in no view, event stream or export, not even once the match is over."""
    s = stubs
    created = s.game.CreateMatch(game_pb.CreateMatchRequest(game_id="grifters", seats=3, seed=8))
    match_id, tokens = created.match_id, list(created.seat_tokens)
    secret = s.game.SendChat(game_pb.SendChatRequest(match_id=match_id, text="SECRET-PLAN-0-to-1", to_seats=[1],
                                                     message_id="m1"), metadata=_metadata(tokens[0])).message
    s.game.SendChat(game_pb.SendChatRequest(match_id=match_id, text="TABLE-TALK", message_id="m2"),
                    metadata=_metadata(tokens[2]))
    marks = (b"SECRET-PLAN", secret.id.encode())

    def everything(token: str | None) -> bytes:
        """What `token`'s holder hears from every reading call, serialized."""
        replies: list[Message] = [
            s.game.GetView(game_pb.GetViewRequest(match_id=match_id), metadata=_metadata(token)),
            s.game.ListChat(game_pb.ListChatRequest(match_id=match_id), metadata=_metadata(token)),
            *s.game.StreamChat(game_pb.StreamChatRequest(match_id=match_id, until_now=True), metadata=_metadata(token)),
            *s.game.StreamEvents(game_pb.StreamEventsRequest(match_id=match_id, until_now=True),
                                 metadata=_metadata(token)),
            s.replay.ListMatchEvents(replay_pb.ListMatchEventsRequest(match_id=match_id, page_size=1000),
                                     metadata=_metadata(token)),
        ]
        return b"".join(r.SerializeToString() for r in replies)

    for token in (None, tokens[2]):
        heard = everything(token)
        assert b"TABLE-TALK" in heard and not any(mark in heard for mark in marks)
    for token in tokens[:2]:
        assert all(mark in everything(token) for mark in marks)
    s.game.CancelMatch(game_pb.CancelMatchRequest(match_id=match_id, reason="over"),
                       metadata=_metadata(TokenSigner(SECRET).operator_token("chat-test")))
    exported = s.replay.ExportMatch(replay_pb.ExportMatchRequest(match_id=match_id)).SerializeToString()
    assert b"SECRET-PLAN" not in exported and b"TABLE-TALK" not in exported  # chat is no event
    assert not any(mark in everything(tokens[2]) for mark in marks)  # post-game, as before


def test_a_retry_under_its_message_id_answers_the_first_message_and_another_message_is_aborted(
        client: GameClient) -> None:
    match = client.create_match("nostra_city", 3, seed=4)
    me = client.seat(match.match_id, match.seat_tokens[1])
    first = me.send_chat("vote with me", to_seats=[0, 2], message_id="retry-1")
    again = me.send_chat("vote with me", to_seats=[2, 0], message_id="retry-1")
    assert again.duplicate and not first.duplicate and again.message == first.message
    with pytest.raises(grpc.RpcError) as reused:
        me.send_chat("vote against me", to_seats=[0, 2], message_id="retry-1")
    assert (reused.value.code(), error_code(reused.value)) == (C.ABORTED, "message_id_reused")
    assert [m.text for m in me.chat()] == ["vote with me"]


def test_a_seat_past_its_rate_is_resource_exhausted_and_the_others_talk_on(client: GameClient) -> None:
    match = client.create_match("grifters", 3, seed=5)
    fast, other = (client.seat(match.match_id, t) for t in match.seat_tokens[:2])
    for i in range(5):
        fast.send_chat(f"message {i}")
    with pytest.raises(grpc.RpcError) as too_fast:
        fast.send_chat("one too many")
    assert (too_fast.value.code(), error_code(too_fast.value)) == (C.RESOURCE_EXHAUSTED, "chat_too_fast")
    assert "retry in" in (too_fast.value.details() or "")
    other.send_chat("calm down")
    assert [m.text for m in other.chat()][-2:] == ["message 4", "calm down"]


def test_a_spectator_cannot_send_and_odd_requests_are_refused_with_their_codes(client: GameClient) -> None:
    match = client.create_match("goodcritters", 4, seed=6)
    stub, me = client.stub, match.seat_tokens[0]

    def send(token: str | None, **fields: Any) -> tuple[grpc.StatusCode, str]:
        request = game_pb.SendChatRequest(**{"match_id": match.match_id, "text": "hi", "message_id": "m", **fields})
        return refused(stub.SendChat, request, token)

    assert send(None) == (C.UNAUTHENTICATED, "no_token")
    assert send(me, text="  ") == (C.INVALID_ARGUMENT, "no_text")
    assert send(me, text="x" * 501) == (C.INVALID_ARGUMENT, "bad_text")
    assert send(me, text="bell\x07") == (C.INVALID_ARGUMENT, "bad_text")
    assert send(me, message_id="") == (C.INVALID_ARGUMENT, "no_message_id")
    assert send(me, message_id="x" * 129) == (C.INVALID_ARGUMENT, "bad_message_id")
    for to_seats in ([0], [4], [1, 1], [-1]):
        assert send(me, to_seats=to_seats) == (C.INVALID_ARGUMENT, "bad_to_seats")
    assert refused(stub.ListChat, game_pb.ListChatRequest(match_id=match.match_id, after_id="nope")) == \
        (C.INVALID_ARGUMENT, "bad_after_id")
    assert refused(stub.StreamChat, game_pb.StreamChatRequest(match_id="m-nobody"), stream=True) == \
        (C.NOT_FOUND, "unknown_match")
    assert refused(stub.ListChat, game_pb.ListChatRequest(match_id="")) == (C.INVALID_ARGUMENT, "no_match_id")
    assert client.seat(match.match_id, me).chat() == []  # nothing refused was stored


def test_nothing_personal_refuses_match_chat_naming_its_own_chat_command(client: GameClient) -> None:
    games = {g.game_id: g.match_chat for g in client.list_games()}
    assert games == {"goodcritters": True, "grifters": True, "nostra_city": True, "nothing_personal": False}
    match = client.create_match("nothing_personal", 3, seed=7)
    me = client.seat(match.match_id, match.seat_tokens[0])
    for call in (lambda: me.send_chat("hello"), me.chat, lambda: list(me.chat_stream(until_now=True))):
        with pytest.raises(grpc.RpcError) as refusal:
            call()
        assert (refusal.value.code(), error_code(refusal.value)) == (C.FAILED_PRECONDITION, "chat_in_engine")
        assert "send_chat" in (refusal.value.details() or "")


def test_follow_chat_resumes_after_a_dropped_connection_without_a_gap_or_a_repeat(
        client: GameClient, game_address: str) -> None:
    relay = _Proxy(game_address)
    phone = GameClient(relay.address, timeout=DEADLINE)
    try:
        match = client.create_match("grifters", 3, seed=9)
        talker = client.seat(match.match_id, match.seat_tokens[0])
        before = talker.send_chat("before").message
        got: list[str] = []
        failed: list[BaseException] = []

        def follow() -> None:
            try:
                for message in phone.seat(match.match_id, match.seat_tokens[1]).follow_chat(before.id, retry_for=20):
                    got.append(message.text)
                    if message.text == "last":
                        return
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                failed.append(exc)

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        talker.send_chat("one")
        deadline = time.monotonic() + 30
        while got != ["one"] and time.monotonic() < deadline and not failed:
            time.sleep(0.05)
        relay.cut()  # the phone's connection drops under its stream
        talker.send_chat("two", to_seats=[1], message_id=str(uuid.uuid4()))
        talker.send_chat("not for seat 1", to_seats=[2])
        talker.send_chat("last")
        reader.join(60)
        assert not failed, failed
        assert got == ["one", "two", "last"]
    finally:
        phone.close()
        relay.close()


def test_a_match_over_keeps_its_table_talking(client: GameClient) -> None:
    match = client.create_match("grifters", 3, seed=10)
    client.cancel_match(match.match_id, "the table left", token=TokenSigner(SECRET).operator_token("chat-test"))
    seat = client.seat(match.match_id, match.seat_tokens[2])
    seat.send_chat("gg")
    assert [m.text for m in client.spectator(match.match_id).chat()] == ["gg"]


def test_an_archived_match_takes_no_more_chat_and_its_followers_are_told(client: GameClient, redis_url: str) -> None:
    """The server still holding the match in memory took chat after the trim (kept 30 days, read
    by nobody), and a follower waited on for ever on a chat that was gone."""
    match = client.create_match("grifters", 3, seed=11)
    client.cancel_match(match.match_id, "the table left", token=TokenSigner(SECRET).operator_token("chat-test"))
    seat = client.seat(match.match_id, match.seat_tokens[0])
    seat.send_chat("gg")
    stream = client.spectator(match.match_id).chat_stream(timeout=DEADLINE)  # unfixed, it never ended
    assert next(stream).message.text == "gg"
    store = RedisEventStore.connect(redis_url)
    try:
        store.trim(match.match_id)
        with pytest.raises(grpc.RpcError) as ended:
            next(stream)
        assert (ended.value.code(), error_code(ended.value)) == (C.NOT_FOUND, "match_archived")
        with pytest.raises(grpc.RpcError) as refused_send:
            seat.send_chat("a private word after it", to_seats=[1])
        assert (refused_send.value.code(), error_code(refused_send.value)) == (C.NOT_FOUND, "match_archived")
        assert not store.client.exists(store.keys.chat(match.match_id))
    finally:
        store.close()
