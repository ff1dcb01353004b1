"""What the command service's log lines leave out: what the table may not see, and seat tokens.

Logs go where the table's secrets must not: a Nothing Personal window's answer (a pass, a play or
a reroll) is never told to the other seats (NP-H9), so no line may name it either."""

from __future__ import annotations

import random

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


def _refused_in_hand(app) -> tuple[str, str, str]:
    """Random legal play of Nothing Personal until a card of the acting seat's own hand is
    refused by a rule whose text names it ("I39 cannot be played in this window"): (match id,
    the card, the refusal's code). Its command is the last thing the app was asked."""
    from famiglia.grpcutil.errors import AppError

    for seed in range(1, 10):
        created = app.create_match("nothing_personal", 3, seed=seed)
        match_id, tokens, rng = created.match_id, created.seat_tokens, random.Random(seed)
        for step in range(300):
            match = app.matches.get(match_id).match
            pending = match.engine.pending(match.state)
            if not pending:
                break
            viewer = app.viewer(match_id, tokens[pending[0].seat])
            for card in list(match.state.hands[pending[0].seat]):
                try:
                    app.submit(match_id, viewer, f"probe-{step}",
                               pb.Command(play_or_effect=pb.PlayOrEffect(card=card)),
                               expected_version=match.public_version)
                except AppError as exc:
                    if card in exc.message:
                        return match_id, card, exc.code
                break  # one probe a step: an accepted one moved the match on
            legal = app.legal_commands(match_id, viewer).commands
            app.submit(match_id, viewer, f"walk-{step}", rng.choice(legal))
    raise AssertionError("no refusal named a card of the hand")


def test_a_rules_refusal_names_no_card_of_the_hand_in_a_line_at_info_or_in_a_trace(captured, monkeypatch) -> None:
    """A rule tells its refusal from what the seat knows, its own hand too: the seat gets that
    text, but a log line at INFO or above, or the `engine.decide` span (its exception event and
    status), went where the table's secrets must not. Fails if `command_refused` carries the
    refusal's text, or the span records the exception."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider, exporter = TracerProvider(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)  # the global provider, for this test
    monkeypatch.setattr(telemetry, "_tracers", {})
    app = bootstrap(store=InMemoryEventStore(), settings=SETTINGS)
    match_id, card, code = _refused_in_hand(app)
    refused = [line for line in captured if line["event"] == "command_refused" and line["match_id"] == match_id]
    assert refused and refused[-1]["code"] == code
    shown = [line for line in captured if line["log_level"] != "debug"]
    assert not [line for line in shown if any(card in str(value) for value in line.values())]
    (reason,) = [line for line in captured if line["event"] == "command_refused_reason" and card in line["reason"]]
    assert reason["code"] == code  # the text at DEBUG (README, "Logs and traces")
    decided = [span for span in exporter.get_finished_spans() if span.name == "engine.decide"]
    assert decided
    for span in decided:
        assert not span.events and span.status.status_code is not trace.StatusCode.ERROR
        assert card not in repr(span.attributes)
