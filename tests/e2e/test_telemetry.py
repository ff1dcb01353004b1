"""Traces cross gRPC into the command service and land in every event's metadata."""

from __future__ import annotations

import pytest
from opentelemetry import baggage, trace
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from famiglia.client import GameClient
from famiglia.engine.registry import default_registry
from famiglia.eventstore.redis_store import RedisEventStore
from tests.support.tracing import export_spans_to

REGISTRY = default_registry()
pytestmark = pytest.mark.skipif(not list(REGISTRY), reason="no game engine registered yet")
EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def tracing() -> None:
    export_spans_to(EXPORTER)


def test_the_trace_of_a_command_reaches_the_server_spans_and_the_stored_events(command_address: str,
                                                                                 redis_url: str) -> None:
    game_id = next(iter(REGISTRY))
    client = GameClient(command_address)
    match = client.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=1)
    view = client.spectator(match.match_id).view()
    seat = view.to_act[0].seat
    me = client.seat(match.match_id, match.seat_tokens[seat])
    command = me.legal_commands().commands[0]
    # the client's baggage goes with the call, but no event keeps it (`stored_context`)
    token = otel_context.attach(baggage.set_baggage("device", "x" * 4000))
    state = ",".join(f"v{i}=" + "y" * 200 for i in range(12))  # a tracestate past W3C's 512 characters
    try:
        parent = trace.NonRecordingSpan(trace.SpanContext(0x1F, 0x2F, False, trace.TraceFlags(1),
                                                          trace.TraceState.from_header([state])))
        with trace.get_tracer("test").start_as_current_span("player-taps-a-card",
                                                           trace.set_span_in_context(parent)) as span:
            trace_id = format(span.get_span_context().trace_id, "032x")
            reply = me.submit(command, command_id="traced-1")
    finally:
        otel_context.detach(token)
    client.close()
    store = RedisEventStore.connect(redis_url)
    stored = [e for e in store.read(match.match_id) if e.command_id == "traced-1"]
    store.close()
    assert stored and len(stored) == reply.version - view.version
    for envelope in stored:
        assert envelope.trace["traceparent"].split("-")[1] == trace_id
        assert "baggage" not in envelope.trace and "tracestate" not in envelope.trace
    names = {s.name for s in EXPORTER.get_finished_spans() if format(s.context.trace_id, "032x") == trace_id}
    assert {"SubmitCommand", "eventstore.append", "engine.decide"} <= names
    served = [s for s in EXPORTER.get_finished_spans()
              if s.name == "SubmitCommand" and format(s.context.trace_id, "032x") == trace_id]
    # the server span names what it is about: the match and the command
    assert served[0].attributes["famiglia.match_id"] == match.match_id
    assert served[0].attributes["famiglia.command_id"] == "traced-1"
    # the decision names the game, the match and the seat (a SubmitCommands span holds several)
    (decided,) = [s for s in EXPORTER.get_finished_spans()
                  if s.name == "engine.decide" and format(s.context.trace_id, "032x") == trace_id]
    assert (decided.attributes["game_id"], decided.attributes["match_id"], decided.attributes["seat"]) == (
        game_id, match.match_id, seat)
