"""What the command service's log lines leave out: what the table may not see, and seat tokens.

Logs go where the table's secrets must not: a Nothing Personal window's answer (a pass, a play or
a reroll) is never told to the other seats (NP-H9), so no line may name it either."""

from __future__ import annotations

import pytest
import structlog

from famiglia import telemetry
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb
from famiglia.v1 import envelope_pb2
from services.command.app import HIDDEN_KIND, _logged_kind
from services.command.bootstrap import bootstrap
from tests.unit.command.test_held_answers import SETTINGS, _pass, _window_match


@pytest.fixture()
def captured(monkeypatch: pytest.MonkeyPatch):
    """Every line the service writes, as structlog's key/values (the JSON fast path off)."""
    monkeypatch.setattr(telemetry, "_json_out", None)
    with structlog.testing.capture_logs() as lines:
        yield lines


def test_np_h9_no_line_names_a_windows_answer_held_or_public(captured) -> None:
    app = bootstrap(store=InMemoryEventStore(), settings=SETTINGS)
    created, window = _window_match(app)
    match_id, tokens = created.match_id, created.seat_tokens
    captured.clear()  # the walk to the window
    answers = {}
    for seat in window.seats:  # all but the last held; the last one closes the window, in public
        answers[f"answer-{seat}"] = _pass(app, match_id, tokens[seat], f"answer-{seat}")
    assert [done.held for done in answers.values()] == [True] * (len(answers) - 1) + [False]
    accepted = {line["command_id"]: line for line in captured if line["event"] == "command_accepted"}
    assert set(accepted) == set(answers)
    for command_id, line in accepted.items():
        assert line["kind"] == HIDDEN_KIND, f"{command_id}'s line names its answer: {line}"
    said = [value for line in captured for value in line.values()]
    assert "pass" not in said
    assert not any(isinstance(value, str) and token in value for value in said for token in tokens)


def _envelope(kind: int) -> envelope_pb2.EventEnvelope:
    env = envelope_pb2.EventEnvelope()
    env.visibility.kind = kind  # type: ignore[assignment]
    return env


def test_a_command_whose_events_are_all_public_is_logged_with_its_kind() -> None:
    command = pb.Command(shakedown=pb.Shakedown())
    public, private = _envelope(envelope_pb2.VISIBILITY_PUBLIC), _envelope(envelope_pb2.VISIBILITY_PRIVATE)
    assert _logged_kind(command, [public, public]) == "shakedown"
    assert _logged_kind(command, [public, private]) == HIDDEN_KIND  # a seat cannot see all it did
    assert _logged_kind(command, [_envelope(envelope_pb2.VISIBILITY_SERVER)]) == HIDDEN_KIND
