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
from famiglia.eventstore.envelopes import game_envelopes, new_event_id

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _reference_ulid(ms: int, random80: int) -> str:
    """A ULID the long way: 130 bits, five at a time, most significant first."""
    value = ((ms & 0xFFFFFFFFFFFF) << 80) | random80
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def test_event_ids_are_the_ulid_time_then_random_digits() -> None:
    rng = random.Random(5)
    for _ in range(500):
        ms = rng.getrandbits(50)
        envelopes._last_time_part = (-1, "")
        assert envelopes._time_part(ms) == _reference_ulid(ms, 0)[:10]
    ids = [new_event_id(1234) for _ in range(2000)]
    assert {i[:10] for i in ids} == {_reference_ulid(1234, 0)[:10]}
    assert len(set(ids)) == 2000 and all(len(i) == 26 and set(i) <= set(_CROCKFORD) for i in ids)
    digits = "".join(i[10:] for i in ids)  # 32,000 random digits: each of the 32 about as often
    assert min(digits.count(d) for d in _CROCKFORD) > 800


def test_every_random_byte_maps_to_its_low_five_bits() -> None:
    assert envelopes._DIGIT_OF_BYTE == bytes(_CROCKFORD[b % 32].encode()[0] for b in range(256))


def test_a_batch_of_envelopes_has_distinct_ids_of_its_millisecond() -> None:
    engine = default_registry().get("goodcritters")
    events = list(engine.setup(MatchConfig(seats=4, options={}), 3))
    out = game_envelopes(engine, "m1", 1, events, now_ms=1_700_000_000_123)
    ids = [e.event_id for e in out]
    assert len(set(ids)) == len(events) > 2
    assert {i[:10] for i in ids} == {_reference_ulid(1_700_000_000_123, 0)[:10]}
    assert [e.seq for e in out] == list(range(2, 2 + len(events)))


def test_random_digits_are_never_handed_out_twice_even_across_a_fork() -> None:
    seen = [envelopes._pool.take(16) for _ in range(1000)]  # several refills of the pool
    assert len(set(seen)) == 1000
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: what would the parent hand out next?
        os.write(write, envelopes._pool.take(16).encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 16).decode()
    os.waitpid(pid, 0)
    assert len(child) == 16 and child != envelopes._pool.take(16)


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
