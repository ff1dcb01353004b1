"""A refused submit's one log line names who was refused: the match, the seat, the command id
and the stable code, as a rule's `command_refused` line does."""

from __future__ import annotations

from typing import Any

import pytest
import structlog
from google.protobuf import any_pb2

from famiglia import telemetry
from famiglia.config import Settings
from famiglia.engine.registry import default_registry
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.v1 import game_service_pb2 as pb
from services.command.bootstrap import bootstrap
from services.command.entrypoints.grpc_server import GameServicer

REGISTRY = default_registry()


class _Refused(Exception):
    pass


class _Call:
    def __init__(self, token: str = "") -> None:
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self.status: Any = None

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.metadata

    def abort_with_status(self, status: Any) -> None:
        self.status = status
        raise _Refused


@pytest.fixture()
def captured(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(telemetry, "_json_out", None)
    with structlog.testing.capture_logs() as lines:
        yield lines


def _first_move():
    app = bootstrap(store=InMemoryEventStore(), settings=Settings(secret="unit-test-secret"))
    game_id = next(iter(REGISTRY))
    created = app.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=3)
    seat = app.get_view(created.match_id, app.viewer(created.match_id, None)).to_act[0].seat
    token = created.seat_tokens[seat]
    (command, *_rest) = app.legal_commands(created.match_id, app.viewer(created.match_id, token)).commands
    packed = any_pb2.Any()
    packed.Pack(command)
    return GameServicer(app), created, seat, token, packed


def test_a_refused_submit_names_its_seat(captured) -> None:
    servicer, created, seat, token, packed = _first_move()
    stale = pb.SubmitCommandRequest(match_id=created.match_id, command_id="late-1", command=packed,
                                    expected_version=created.version + 5)
    with pytest.raises(_Refused):
        servicer.SubmitCommand(stale, _Call(token))
    (line,) = [line for line in captured if line["event"] == "rpc_refused"]
    assert (line["match_id"], line["seat"], line["command_id"], line["code"]) == (
        created.match_id, seat, "late-1", "stale_version")


def test_a_refused_chain_entry_names_its_seat(captured) -> None:
    servicer, created, seat, token, packed = _first_move()
    chain = pb.SubmitCommandsRequest(match_id=created.match_id, expected_version=created.version + 5, commands=[
        pb.SeatCommand(seat_token=token, command_id="late-2", command=packed)])
    reply = servicer.SubmitCommands(chain, _Call())
    assert reply.refusal.code == "stale_version"
    (line,) = [line for line in captured if line["event"] == "rpc_refused"]
    assert (line["match_id"], line["seat"], line["command_id"], line["index"]) == (
        created.match_id, seat, "late-2", 0)
