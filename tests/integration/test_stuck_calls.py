"""A command whose engine does not return, against the command service's real server and a real
redis-server: the watchdog says so (`call_stuck`, naming the match, seat and command, and what
the thread runs), counts it, and turns health NOT_SERVING, liveness too; the match is not
touched until the engine returns, and then exactly once.

Before the watchdog, the call held its thread and its match's lock without a word, and health
answered SERVING throughout (a few such calls and the replica answered nothing)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
import structlog
from google.protobuf import any_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from famiglia.bots.toy import Command, View
from famiglia.client import GameClient
from famiglia.config import Settings
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil.errors import error_code
from famiglia.grpcutil.readiness import LIVENESS
from famiglia.testgames.stalling import GAME_ID, StallingCard, stalling_registry
from famiglia.v1 import game_service_pb2 as pb
from famiglia.v1 import game_service_pb2_grpc as pb_grpc
from services.command.bootstrap import bootstrap
from services.command.entrypoints.grpc_server import serve
from services.command.quarantine import Quarantine
from tests.support.metrics import recorded

GS = "famiglia.v1.GameService"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def _status(channel: grpc.Channel, service: str) -> int:
    return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status


def _until(channel: grpc.Channel, status: int) -> None:
    """Wait (a minute at most: a wait, not a measure) for every name health answers to say `status`."""
    _until_names(channel, status, ("", GS, LIVENESS))


def _until_names(channel: grpc.Channel, status: int, names: tuple[str, ...]) -> None:
    deadline = time.monotonic() + 60
    while any(_status(channel, s) != status for s in names):
        assert time.monotonic() < deadline, f"health never answered {status}"
        time.sleep(0.02)


class _Served:
    def __init__(self, redis_url: str, engine: StallingCard) -> None:
        self.store = RedisEventStore.connect(redis_url)
        self.app = app = bootstrap(store=self.store, registry=stalling_registry(engine),
                                   settings=Settings(redis_url=redis_url, secret="s"))
        self.server, port = serve(app, "127.0.0.1:0", workers=4, stuck_call_s=0.3)
        self.server.start()
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.client = GameClient(channel=self.channel, timeout=60)

    def close(self) -> None:
        self.server.stop(grace=None)
        self.channel.close()
        self.app.close()


@pytest.fixture(params=[False, True], ids=["asleep", "spinning"])
def engine(request: pytest.FixtureRequest) -> Iterator[StallingCard]:
    made = StallingCard(60.0, spin=request.param)
    yield made
    made.release.set()  # whatever the test did: no thread left stalling


def test_a_command_whose_engine_does_not_return_is_told_and_takes_the_replica_out(
        redis_url: str, engine: StallingCard) -> None:
    with recorded() as metrics:
        served = _Served(redis_url, engine)
        try:
            _until(served.channel, SERVING)
            match = served.client.create_match(GAME_ID, 2, seed=3)
            seat = served.client.spectator(match.match_id).view().to_act[0].seat
            me = served.client.seat(match.match_id, match.seat_tokens[seat])
            command = me.legal_commands().commands[0]
            with structlog.testing.capture_logs() as captured:
                request = pb.SubmitCommandRequest(match_id=match.match_id, command_id="stuck-1")
                request.command.CopyFrom(command)
                answer = pb_grpc.GameServiceStub(served.channel).SubmitCommand.future(
                    request, metadata=[("authorization", f"Bearer {match.seat_tokens[seat]}")], timeout=60)
                assert engine.entered.wait(30)
                _until(served.channel, NOT_SERVING)
                # Nothing of the command is stored while its engine has not answered.
                assert served.store.version(match.match_id) == match.version
                # A call of the same match waits for the lock the stuck one holds: stuck in its turn.
                viewed = pb_grpc.GameServiceStub(served.channel).GetView.future(
                    pb.GetViewRequest(match_id=match.match_id), timeout=60)
                deadline = time.monotonic() + 60
                while len([line for line in captured if line["event"] == "call_stuck"]) < 2:
                    assert time.monotonic() < deadline, captured
                    time.sleep(0.02)
                engine.release.set()
                done = answer.result()
                assert viewed.result().version == done.version
                _until(served.channel, SERVING)
            assert done.version > match.version and not done.duplicate
            assert served.store.version(match.match_id) == done.version
            stuck = [line for line in captured if line["event"] == "call_stuck"]
            assert [line["rpc"] for line in stuck] == ["SubmitCommand", "GetView"], captured
            # The command is set aside; the call waiting for its match's lock decides nothing.
            assert [line["rpc"] for line in captured if line["event"] == "command_quarantined"] == ["SubmitCommand"]
            line, waiting = stuck
            assert waiting["match_id"] == match.match_id and "seat" not in waiting  # a spectator
            assert "services/command/app.py" in waiting["where"][-1] and "get_view" in waiting["where"][-1], waiting
            assert line["log_level"] == "error" and line["rpc"] == "SubmitCommand"
            assert (line["match_id"], line["seat"], line["command_id"], line["game_id"]) == \
                (match.match_id, seat, "stuck-1", GAME_ID), line
            assert line["bound_s"] == 0.3 and line["seconds"] >= 0.3
            assert any("testgames/stalling.py" in f and "decide" in f for f in line["where"]), line["where"]
            assert "seat_token" not in str(line) and match.seat_tokens[seat] not in str(line)
            ended = [line for line in captured if line["event"] == "stuck_call_ended"]
            assert sorted(e["rpc"] for e in ended) == ["GetView", "SubmitCommand"], captured
            for method in ("SubmitCommand", "GetView"):
                assert metrics.value("famiglia.rpc.stuck", **{"rpc.service": GS, "rpc.method": method}) == 1
        finally:
            served.close()


def _line_of(captured: list[dict[str, Any]], event: str) -> dict[str, Any]:
    return next(line for line in captured if line["event"] == event)


def test_a_chain_names_each_of_its_seats_and_commands(redis_url: str) -> None:
    engine = StallingCard(60.0)
    served = _Served(redis_url, engine)
    try:
        match = served.client.create_match(GAME_ID, 2, seed=3)
        seat = served.client.spectator(match.match_id).view().to_act[0].seat
        me = served.client.seat(match.match_id, match.seat_tokens[seat])
        command = me.legal_commands().commands[0]
        request = pb.SubmitCommandsRequest(match_id=match.match_id)
        entry = request.commands.add(seat_token=match.seat_tokens[seat], command_id="chain-1")
        entry.command.CopyFrom(command)
        with structlog.testing.capture_logs() as captured:
            answer = pb_grpc.GameServiceStub(served.channel).SubmitCommands.future(request, timeout=60)
            assert engine.entered.wait(30)
            _until(served.channel, NOT_SERVING)
            engine.release.set()
            answer.result()
            _until(served.channel, SERVING)
        line = _line_of(captured, "call_stuck")
        assert (line["rpc"], line["match_id"], line["seats"], line["command_ids"]) == \
            ("SubmitCommands", match.match_id, [seat], ["chain-1"]), line
    finally:
        engine.release.set()
        served.close()


def _code(call: Any) -> tuple[grpc.StatusCode, str]:
    """(status, famiglia code) of a call that failed; what a test expects when it was refused."""
    with pytest.raises(grpc.RpcError) as failed:
        call()
    return failed.value.code(), error_code(failed.value)


def _replicas(redis_url: str, engine_a: Any, engine_b: Any) -> tuple[_Served, _Served]:
    """Replicas A and B on one Redis, B reading what A set aside at each call."""
    a, b = _Served(redis_url, engine_a), _Served(redis_url, engine_b)
    b.app.quarantine.close()
    b.app.quarantine = Quarantine(b.store.client, refresh_s=0.0)
    return a, b


def _logged(captured: list[dict[str, Any]], event: str, timeout: float = 30) -> dict[str, Any]:
    """The one line `event`, once it is logged."""
    deadline = time.monotonic() + timeout
    while not any(line["event"] == event for line in captured):
        assert time.monotonic() < deadline, captured
        time.sleep(0.02)
    (line,) = [line for line in captured if line["event"] == event]
    return line


def _submit(served: _Served, match_id: str, token: str, command: Any, command_id: str,
            timeout: float = 60) -> Any:
    request = pb.SubmitCommandRequest(match_id=match_id, command_id=command_id)
    request.command.CopyFrom(command)
    return pb_grpc.GameServiceStub(served.channel).SubmitCommand.future(
        request, metadata=[("authorization", f"Bearer {token}")], timeout=timeout)


def test_a_stuck_command_is_set_aside_for_every_replica_and_another_command_still_plays(redis_url: str) -> None:
    """A command whose engine loops, retried on the next replica (the SDK retries UNAVAILABLE),
    would stall that replica too, and the next: every replica restarted in turn by one command.
    Found stuck, it is set aside in Redis: another replica refuses it at once, under its own id
    and under a new one (`command_quarantined`), without deciding it, while another command of
    the seat is decided as ever; the stuck call ending after all lifts it."""
    stalling, other = StallingCard(60.0), StallingCard(60.0)  # replicas A and B, one Redis
    a, b = _replicas(redis_url, stalling, other)
    try:
        match = a.client.create_match(GAME_ID, 2, seed=3)
        seat = a.client.spectator(match.match_id).view().to_act[0].seat
        token = match.seat_tokens[seat]
        poisoned, fine = a.client.seat(match.match_id, token).legal_commands().commands[:2]
        played = Command()
        assert poisoned.Unpack(played)
        stalling.poisoned = other.poisoned = played.play.card
        with structlog.testing.capture_logs() as captured:
            stuck = _submit(a, match.match_id, token, poisoned, "loops-1")
            assert stalling.entered.wait(30)
            _until(a.channel, NOT_SERVING)
            line = _logged(captured, "command_quarantined")  # by the watchdog's hooks, as health is told
            assert (line["match_id"], line["seat"], line["command_id"], line["version"]) == \
                (match.match_id, seat, "loops-1", match.version), line
            # The client's retry on replica B, and the same command sent again under a new id.
            for command_id in ("loops-1", "loops-2"):
                refused = _submit(b, match.match_id, token, poisoned, command_id, timeout=20)
                assert _code(refused.result) == (grpc.StatusCode.FAILED_PRECONDITION, "command_quarantined")
            assert not other.entered.is_set()  # B never decided it: it would be stalled now
            message = [line for line in captured if line["event"] == "rpc_refused"][-1]["reason"]
            assert "loops-2" in message and "cancel the match" in message, message
            # Another command of the seat goes in.
            done = _submit(b, match.match_id, token, fine, "fine-1").result()
            assert done.version > match.version and not done.duplicate
            stalling.release.set()  # A's call ends after all (slow, not endless): lifted
            with pytest.raises(grpc.RpcError):
                stuck.result()  # decided on a match that moved on: refused
            deadline = time.monotonic() + 60
            while b.app.quarantine.of(match.match_id) is not None:
                assert time.monotonic() < deadline, captured
                time.sleep(0.02)
        assert [line["event"] for line in captured if line["event"].startswith("command_quarantine")] == \
            ["command_quarantined", "command_quarantine_lifted"]
    finally:
        stalling.release.set()
        other.release.set()
        a.close()
        b.close()


def test_a_replay_call_whose_engine_does_not_return_is_told_and_takes_the_replica_out(redis_url: str) -> None:
    """VerifyMatch decides every command again through the game's engine: one that loops held a
    replay thread for good while health answered SERVING. The replay service runs the same
    watchdog now (FAMIGLIA_REPLAY_STUCK_CALL_S)."""
    from famiglia.v1 import replay_service_pb2 as rpb
    from famiglia.v1 import replay_service_pb2_grpc as rpb_grpc
    from services.replay.bootstrap import bootstrap as replay_bootstrap
    from services.replay.entrypoints.grpc_server import serve as serve_replay

    played = StallingCard(60.0)
    played.release.set()  # the match is played without a stall; its verification stalls
    commands = _Served(redis_url, played)
    engine = StallingCard(60.0)
    app = replay_bootstrap(store=commands.store, registry=stalling_registry(engine),
                           settings=Settings(redis_url=redis_url, secret="s"), use_archive=False)
    server, port = serve_replay(app, "127.0.0.1:0", workers=4, stuck_call_s=0.3)
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        match = commands.client.create_match(GAME_ID, 2, seed=3)
        for _ in range(200):  # played to its end: a finished match is verified for anyone
            to_act = commands.client.spectator(match.match_id).view().to_act
            if not to_act:
                break
            me = commands.client.seat(match.match_id, match.seat_tokens[to_act[0].seat])
            me.submit(me.legal_commands().commands[0])
        _until_names(channel, SERVING, ("", "famiglia.v1.ReplayService", LIVENESS))
        with structlog.testing.capture_logs() as captured:
            verified = rpb_grpc.ReplayServiceStub(channel).VerifyMatch.future(
                rpb.VerifyMatchRequest(match_id=match.match_id), timeout=60)
            assert engine.entered.wait(30), verified.exception() if verified.done() else "not entered"
            _until_names(channel, NOT_SERVING, ("", "famiglia.v1.ReplayService", LIVENESS))
            engine.release.set()
            assert verified.result().ok
            _until_names(channel, SERVING, ("", "famiglia.v1.ReplayService", LIVENESS))
        line = _line_of(captured, "call_stuck")
        assert (line["rpc"], line["match_id"]) == ("VerifyMatch", match.match_id), line
        assert any("testgames/stalling.py" in f and "decide" in f for f in line["where"]), line["where"]
        assert not [line for line in captured if line["event"] == "command_quarantined"]  # the command service's
    finally:
        engine.release.set()
        server.stop(grace=None)
        channel.close()
        commands.close()


@pytest.mark.parametrize("asked", ["view", "legal_commands"])
def test_a_seats_view_or_legal_commands_whose_engine_loops_is_set_aside_for_every_replica(
        redis_url: str, asked: str) -> None:
    """A pure engine that loops in a seat's view (or legal commands) at one point of the match: the
    seat's client retries its GetView (ListLegalCommands) on the next replica (the SDK retries
    UNAVAILABLE and DEADLINE_EXCEEDED), where the engine loops again, and the next: every replica's
    watchdog took its replica out in turn, as a poisoned command did before it was set aside.
    Found stuck there, the call sets aside that seat's ask where the match stands: another replica
    refuses it at once (`call_quarantined`) without asking the engine, answers the other seat, and
    the seat again once the match moves on; the stuck call ending after all lifts it."""
    stalling = StallingCard(60.0, stalls_in=asked, poisoned_seat=-1, poisoned_at=0)  # no seat's yet
    other = StallingCard(60.0, stalls_in=asked, poisoned_seat=-1, poisoned_at=0)  # replicas A and B, one Redis
    a, b = _replicas(redis_url, stalling, other)
    try:
        match = a.client.create_match(GAME_ID, 2, seed=3)
        seat = a.client.spectator(match.match_id).view().to_act[0].seat
        stalling.poisoned_seat = other.poisoned_seat = seat  # the seat to play, before any card is played
        token = match.seat_tokens[seat]

        def ask(served: _Served, timeout: float = 60) -> Any:
            stub = pb_grpc.GameServiceStub(served.channel)
            metadata = [("authorization", f"Bearer {token}")]
            if asked == "view":
                return stub.GetView.future(pb.GetViewRequest(match_id=match.match_id), metadata=metadata,
                                           timeout=timeout)
            return stub.ListLegalCommands.future(pb.ListLegalCommandsRequest(match_id=match.match_id),
                                                 metadata=metadata, timeout=timeout)

        with structlog.testing.capture_logs() as captured:
            stuck = ask(a)
            assert stalling.entered.wait(30)
            _until(a.channel, NOT_SERVING)
            line = _logged(captured, "call_quarantined")  # by the watchdog's hooks, as health is told
            assert (line["match_id"], line["seat"], line["version"], line["asked"]) == \
                (match.match_id, seat, match.version, "view" if asked == "view" else "legal"), line
            # The client's retry on replica B: refused at once, the engine not asked.
            assert _code(ask(b, timeout=20).result) == (grpc.StatusCode.FAILED_PRECONDITION, "call_quarantined")
            assert not other.entered.is_set()  # B never asked it: it would be stalled now
            message = [line for line in captured if line["event"] == "rpc_refused"][-1]["reason"]
            assert f"seat {seat}" in message and "cancel the match" in message, message
            # The other seat, a spectator, and the seat's other ask are answered on B.
            b.client.seat(match.match_id, match.seat_tokens[1 - seat]).view()
            b.client.spectator(match.match_id).view()
            mine = b.client.seat(match.match_id, token)
            if asked == "view":
                card = mine.legal_commands().commands[0]
            else:  # its legal commands loop: it plays a card of the hand its view shows
                shown = View()
                assert mine.view().view.Unpack(shown)
                card = any_pb2.Any()
                card.Pack(Command(play={"card": shown.hand[0]}))
            done = _submit(b, match.match_id, token, card, "fine-1").result()  # the match moves on
            assert done.version > match.version
            assert ask(b).result().version == done.version  # another version: asked, and answered
            stalling.release.set()  # A's call ends after all (slow, not endless): lifted
            stuck.result()
            deadline = time.monotonic() + 60
            while b.app.quarantine.of(match.match_id) is not None:
                assert time.monotonic() < deadline, captured
                time.sleep(0.02)
        assert [line["event"] for line in captured if "quarantine" in line["event"]] == \
            ["call_quarantined", "call_quarantine_lifted"]
    finally:
        stalling.release.set()
        other.release.set()
        a.close()
        b.close()
