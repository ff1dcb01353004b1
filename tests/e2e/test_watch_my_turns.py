"""WatchMyTurns over real gRPC (every service in this process, one real redis-server, the bots'
dispatcher running beside them as it writes the notifications): a guest's player token opens the
stream, gets ListMyTurns' answer, then a notification when its seat is asked, and resumes from
a cursor; a cursor no notification has is refused, and so is any token but a player's."""

from __future__ import annotations

import threading

import grpc
import pytest

from famiglia.client import GameClient
from famiglia.engine.registry import default_registry
from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.eventstore.turn_notices import YOUR_TURN, RedisTurnNotices
from famiglia.grpcutil.errors import error_code
from famiglia.v1 import game_service_pb2 as game_pb
from services.bots.dispatcher import GROUP, Dispatcher
from tests.e2e.conftest import Services, Stack
from tests.e2e.test_my_turns import SIGNER, _md, asked, guest, seated
from tests.support.tasks import NoTasks


@pytest.fixture()
def dispatcher(redis_url: str):
    """The bots' dispatcher, writing turn notifications (its tasks go nowhere: people play here)."""
    store = RedisEventStore.connect(redis_url)
    consumer = PartitionConsumer.for_store(store, GROUP, "e2e")
    consumer.ensure_groups(start_id="$")
    stop = threading.Event()
    running = Dispatcher(store, default_registry(), NoTasks(), notices=RedisTurnNotices(store.client, store.keys.prefix))
    thread = threading.Thread(target=running.run, args=(consumer, stop), kwargs={"block_ms": 50}, daemon=True)
    thread.start()
    yield running
    stop.set()
    thread.join(10)
    store.close()


def _refusal(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as refused:
        next(iter(call))
    return refused.value.code(), error_code(refused.value)


def _move(s: Services, match: game_pb.CreateMatchResponse, seat: int, command_id: str) -> None:
    token = match.seat_tokens[seat]
    legal = s.game.ListLegalCommands(game_pb.ListLegalCommandsRequest(match_id=match.match_id), metadata=_md(token))
    s.game.SubmitCommand(game_pb.SubmitCommandRequest(match_id=match.match_id, command_id=command_id,
                                                      command=legal.commands[0]), metadata=_md(token))


def test_a_guest_watches_its_turns_and_resumes_from_its_cursor(stubs: Services, stack: Stack, dispatcher) -> None:
    s = stubs
    ann, bob = guest(s, "Ann"), guest(s, "Bob")
    probe = s.game.CreateMatch(game_pb.CreateMatchRequest(game_id="grifters", seats=2, seed=5))
    first = min(asked(s, probe))
    # Bob is asked first; Ann's turn comes once he has moved.
    match = seated(s, "grifters", 2, 5, **{f"s{first}": bob.player_id, f"s{1 - first}": ann.player_id})
    watched = s.game.WatchMyTurns(game_pb.WatchMyTurnsRequest(), metadata=_md(ann.player_token), timeout=60)
    snapshot = next(watched)
    assert snapshot.WhichOneof("update") == "snapshot" and snapshot.cursor
    listed = s.game.ListMyTurns(game_pb.ListMyTurnsRequest(), metadata=_md(ann.player_token))
    assert snapshot.snapshot == listed
    for i in range(50):  # Bob's turn, to its end
        if (1 - first) in asked(s, match):
            break
        _move(s, match, first, f"bob-{i}")
    for reply in watched:
        if reply.WhichOneof("update") == "notification" and reply.notification.kind == YOUR_TURN:
            break
    note = reply.notification
    assert (note.match_id, note.seat, note.game_id) == (match.match_id, 1 - first, "grifters")
    assert (1 - first) in asked(s, match) and reply.cursor == note.id
    watched.cancel()

    resumed = s.game.WatchMyTurns(game_pb.WatchMyTurnsRequest(after_id=snapshot.cursor),
                                  metadata=_md(ann.player_token), timeout=60)
    again = next(resumed)
    assert again.WhichOneof("update") == "snapshot" and again.snapshot.matches[0].to_act
    assert next(resumed).notification == note  # what was written after the cursor
    resumed.cancel()

    sdk = GameClient(stack.addresses["GameService"])
    try:
        replies = sdk.watch_my_turns(ann.player_token, snapshot.cursor)
        assert next(replies).WhichOneof("update") == "snapshot"
        assert next(replies).notification == note
        replies.close()
    finally:
        sdk.close()


def test_a_bad_cursor_and_any_token_but_a_players_are_refused(stubs: Services) -> None:
    s = stubs
    ann = guest(s, "Ann")
    match = seated(s, "grifters", 2, 5, s0=ann.player_id)
    for after_id in ("nope", "99999999999999-0"):
        call = s.game.WatchMyTurns(game_pb.WatchMyTurnsRequest(after_id=after_id), metadata=_md(ann.player_token),
                                   timeout=30)
        assert _refusal(call) == (grpc.StatusCode.INVALID_ARGUMENT, "bad_after_id")
    assert _refusal(s.game.WatchMyTurns(game_pb.WatchMyTurnsRequest(), timeout=30)) == (
        grpc.StatusCode.UNAUTHENTICATED, "no_token")
    for token in (match.seat_tokens[0], SIGNER.operator_token("e2e")):
        call = s.game.WatchMyTurns(game_pb.WatchMyTurnsRequest(), metadata=_md(token), timeout=30)
        assert _refusal(call) == (grpc.StatusCode.UNAUTHENTICATED, "bad_token")
