"""The command path's shortcuts write what the long way writes: event ids, random bytes,
trace carriers, the span-export check."""

from __future__ import annotations

import os
import random

import pytest
from opentelemetry import baggage, propagate, trace
from opentelemetry import context as otel_context
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from famiglia import telemetry
from famiglia.engine import MatchConfig
from famiglia.engine.registry import default_registry
from famiglia.eventstore import envelopes
from famiglia.eventstore.envelopes import game_envelopes, new_event_id, random_bytes

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _reference_ulid(ms: int, random80: int) -> str:
    """A ULID the long way: 130 bits, five at a time, most significant first."""
    value = ((ms & 0xFFFFFFFFFFFF) << 80) | random80
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def test_event_ids_are_ulids_of_the_millisecond_and_fresh_random_bits() -> None:
    rng = random.Random(5)
    for _ in range(500):
        ms, randoms = rng.getrandbits(50), rng.randbytes(30)
        envelopes._last_time_part = (-1, "")
        parts = envelopes._random_parts(randoms)
        for i in range(3):
            expected = _reference_ulid(ms, int.from_bytes(randoms[10 * i:10 * i + 10], "big"))
            assert envelopes._time_part(ms) + parts[16 * i:16 * i + 16] == expected
    assert new_event_id(1234)[:10] == _reference_ulid(1234, 0)[:10]


def test_a_batch_of_envelopes_has_distinct_ids_of_its_millisecond() -> None:
    engine = default_registry().get("goodcritters")
    events = list(engine.setup(MatchConfig(seats=4, options={}), 3))
    out = game_envelopes(engine, "m1", 1, events, now_ms=1_700_000_000_123)
    ids = [e.event_id for e in out]
    assert len(set(ids)) == len(events) > 2
    assert {i[:10] for i in ids} == {_reference_ulid(1_700_000_000_123, 0)[:10]}
    assert [e.seq for e in out] == list(range(2, 2 + len(events)))


def test_random_bytes_are_never_handed_out_twice_even_across_a_fork() -> None:
    seen = [random_bytes(10) for _ in range(1000)]  # several refills of the pool
    assert len(set(seen)) == 1000
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: what would the parent hand out next?
        os.write(write, random_bytes(16))
        os._exit(0)
    os.close(write)
    child = os.read(read, 16)
    os.waitpid(pid, 0)
    assert len(child) == 16 and child != random_bytes(16)


def _span(state: TraceState | None = None, flags: int = 1) -> NonRecordingSpan:
    return NonRecordingSpan(SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, is_remote=False,
                                        trace_flags=TraceFlags(flags), trace_state=state))


@pytest.mark.parametrize("case", ["nothing", "span", "unsampled", "tracestate", "baggage", "baggage only"])
def test_the_carrier_is_what_the_default_propagators_write(case: str) -> None:
    ctx = otel_context.Context()
    if case in ("span", "tracestate", "baggage", "unsampled"):
        state = TraceState([("vendor", "x1")]) if case == "tracestate" else None
        ctx = trace.set_span_in_context(_span(state, 0 if case == "unsampled" else 1), ctx)
    if case.startswith("baggage"):
        ctx = baggage.set_baggage("team", "blue", ctx)
    token = otel_context.attach(ctx)
    try:
        expected: dict[str, str] = {}
        propagate.inject(expected)
        assert telemetry.inject_context() == expected
        assert expected or case == "nothing"
    finally:
        otel_context.detach(token)


def test_another_propagator_setting_goes_the_long_way(monkeypatch: pytest.MonkeyPatch) -> None:
    only_trace = CompositePropagator([TraceContextTextMapPropagator()])
    monkeypatch.setattr(propagate, "get_global_textmap", lambda: only_trace)
    ctx = baggage.set_baggage("team", "blue", trace.set_span_in_context(_span()))
    token = otel_context.attach(ctx)
    try:
        carrier = telemetry.inject_context()
    finally:
        otel_context.detach(token)
    assert "traceparent" in carrier and "baggage" not in carrier


def test_the_export_check_follows_span_processors_added_later() -> None:
    provider = TracerProvider()
    assert telemetry._export_state(provider) == (False, provider)
    assert telemetry._export_state(provider) == (False, provider)  # remembered
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    assert telemetry._export_state(provider) == (True, None)
    assert telemetry._export_state(trace.NoOpTracerProvider()) == (False, None)
