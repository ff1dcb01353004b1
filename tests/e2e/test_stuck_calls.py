"""A command service process whose engine loops for ever (tests.support.stalling_command), with a
low FAMIGLIA_COMMAND_STUCK_CALL_S: what the operator and the probes see.

Before the watchdog, the process said nothing and its health answered SERVING, readiness and
liveness alike, while the call held one of its three call threads and its match's lock for good:
no probe took it out of service nor restarted it."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from famiglia.client import GameClient
from famiglia.grpcutil.readiness import LIVENESS
from famiglia.localstack.redis_server import free_port
from famiglia.testgames.stalling import GAME_ID
from famiglia.v1 import game_service_pb2 as pb
from famiglia.v1 import game_service_pb2_grpc as pb_grpc

from .conftest import CommandProcess

GS = "famiglia.v1.GameService"
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def _lines(log: Path, event: str) -> list[dict[str, Any]]:
    found = []
    for raw in log.read_text().splitlines():
        if raw.startswith("{") and f'"{event}"' in raw:
            line = json.loads(raw)
            if line.get("event") == event:
                found.append(line)
    return found


def _into_the_engine(channel: grpc.Channel, client: GameClient, command_id: str) -> tuple[Any, int, str, Any]:
    """A 2-seat match of the stalling game and its first legal command submitted, the call left
    running in the engine: (match, seat, token, the call's future)."""
    match = client.create_match(GAME_ID, 2, seed=5)
    seat = client.spectator(match.match_id).view().to_act[0].seat
    token = match.seat_tokens[seat]
    command = client.seat(match.match_id, token).legal_commands().commands[0]
    request = pb.SubmitCommandRequest(match_id=match.match_id, command_id=command_id, command=command)
    running = pb_grpc.GameServiceStub(channel).SubmitCommand.future(
        request, metadata=[("authorization", f"Bearer {token}")], timeout=120)
    return match, seat, token, running


def test_a_command_service_whose_engine_loops_says_so_and_asks_to_be_restarted(redis_url: str,
                                                                               tmp_path: Path) -> None:
    process = CommandProcess(redis_url, free_port(), tmp_path / "command.log", module="tests.support.stalling_command",
                             env={"FAMIGLIA_COMMAND_STUCK_CALL_S": "0.5"}).start()
    channel = grpc.insecure_channel(process.address)
    health = health_pb2_grpc.HealthStub(channel)
    client = GameClient(channel=channel, timeout=30)
    try:
        match, seat, token, stuck = _into_the_engine(channel, client, "loops-1")

        def status(name: str) -> int:
            return health.Check(health_pb2.HealthCheckRequest(service=name), timeout=10).status

        deadline = time.monotonic() + 60  # a wait for the watchdog's round, not a measure of it
        while not all(status(name) == NOT_SERVING for name in ("", GS, LIVENESS)):
            assert time.monotonic() < deadline, process.log.read_text()[-3000:]
            time.sleep(0.05)
        # Alive and saying so: the other call threads still answer.
        assert GAME_ID in [g.game_id for g in client.list_games()]
        assert not stuck.done()
        # A bound of 0.5 s may also catch another call a starved host is slow to answer (its own
        # line); the command in the engine is told once.
        (line,) = [ln for ln in _lines(process.log, "call_stuck") if ln.get("command_id") == "loops-1"]
        assert line["level"] == "error" and line["service"] == "command" and line["rpc"] == "SubmitCommand"
        assert (line["match_id"], line["seat"], line["command_id"], line["game_id"]) == \
            (match.match_id, seat, "loops-1", GAME_ID), line
        assert any("testgames/stalling.py" in f and "decide" in f for f in line["where"]), line
        assert token not in json.dumps(line)
        assert process.proc is not None
        # SIGTERM, as Kubernetes sends once liveness fails: the process leaves, the loop with it.
        process.proc.send_signal(signal.SIGTERM)
        assert process.proc.wait(timeout=60) != 0
        assert _lines(process.log, "command_service_stopped_stuck"), process.log.read_text()[-3000:]
        stuck.cancel()
    finally:
        channel.close()
        process.kill()


def test_a_slow_call_still_running_at_the_end_of_the_drain_is_a_stop_not_a_stuck_call(redis_url: str,
                                                                                      tmp_path: Path) -> None:
    """A call that outlives the SIGTERM drain's grace but has not run FAMIGLIA_COMMAND_STUCK_CALL_S
    is slow, not stuck: the process says so (`calls_cut_at_stop`, warning), stops as asked
    (`command_service_stopped`) and leaves with status 0. Before, any call still running was
    `command_service_stopped_stuck` and status 1: a stop that failed, for an orchestrator."""
    marks = tmp_path / "marks"
    marks.mkdir()
    process = CommandProcess(redis_url, free_port(), tmp_path / "command.log", module="tests.support.stalling_command",
                             env={"FAMIGLIA_COMMAND_STUCK_CALL_S": "600", "STALLING_CARD_S": "600",
                                  "STALLING_MARKS": str(marks)}).start()
    channel = grpc.insecure_channel(process.address)
    client = GameClient(channel=channel, timeout=30)
    try:
        match, _seat, _token, slow = _into_the_engine(channel, client, "slow-1")
        # The command in the engine, holding its match's lock; then a view of the match, which waits
        # for that lock: a second call under way at the stop. Each waited for by the process's own
        # mark, not a deadline's: on a loaded host a short one passed before the command was in the
        # engine, or before a handler took the view (never run, so not under way).
        _until(marks / "decide", slow, process)
        (marks / "view").unlink()  # `_into_the_engine`'s own view's, which has returned
        view = pb_grpc.GameServiceStub(channel).GetView.future(pb.GetViewRequest(match_id=match.match_id),
                                                                timeout=120)
        _until(marks / "view", view, process)
        assert not slow.done() and not view.done()
        assert process.proc is not None
        process.proc.send_signal(signal.SIGTERM)
        assert process.proc.wait(timeout=60) == 0, process.log.read_text()[-3000:]
        assert not _lines(process.log, "command_service_stopped_stuck"), process.log.read_text()[-3000:]
        (cut,) = _lines(process.log, "calls_cut_at_stop")
        assert cut["level"] == "warning" and cut["calls"] == 2, process.log.read_text()[-3000:]
        assert _lines(process.log, "command_service_stopped"), process.log.read_text()[-3000:]
        slow.cancel()
        view.cancel()
    finally:
        channel.close()
        process.kill()


def _until(mark: Path, call: Any, process: CommandProcess) -> None:
    """Wait for the stalling process's `mark` (tests.support.stalling_command), `call` still running."""
    deadline = time.monotonic() + 60  # a wait for the process, not a measure of it
    while not mark.exists():
        assert time.monotonic() < deadline and not call.done(), (mark.name, process.log.read_text()[-3000:])
        time.sleep(0.02)
