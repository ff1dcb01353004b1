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
from grpc_health.v1 import health_pb2, health_pb2_grpc

from famiglia.client import GameClient
from famiglia.config import Settings
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil.readiness import LIVENESS
from famiglia.testgames.stalling import GAME_ID, StallingCard, stalling_registry
from famiglia.v1 import game_service_pb2 as pb
from famiglia.v1 import game_service_pb2_grpc as pb_grpc
from services.command.bootstrap import bootstrap
from services.command.entrypoints.grpc_server import serve
from tests.support.metrics import recorded

GS = "famiglia.v1.GameService"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def _status(channel: grpc.Channel, service: str) -> int:
    return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status


def _until(channel: grpc.Channel, status: int) -> None:
    """Wait (a minute at most: a wait, not a measure) for every name health answers to say `status`."""
    deadline = time.monotonic() + 60
    while any(_status(channel, s) != status for s in ("", GS, LIVENESS)):
        assert time.monotonic() < deadline, f"health never answered {status}"
        time.sleep(0.02)


class _Served:
    def __init__(self, redis_url: str, engine: StallingCard) -> None:
        self.store = RedisEventStore.connect(redis_url)
        app = bootstrap(store=self.store, registry=stalling_registry(engine), settings=Settings(redis_url=redis_url,
                                                                                                 secret="s"))
        self.server, port = serve(app, "127.0.0.1:0", workers=4, stuck_call_s=0.3)
        self.server.start()
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.client = GameClient(channel=self.channel, timeout=60)

    def close(self) -> None:
        self.server.stop(grace=None)
        self.channel.close()
        self.store.close()


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
