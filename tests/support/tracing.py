"""Spans of the whole process to an in-memory exporter, for tests that follow a trace."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def export_spans_to(exporter: InMemorySpanExporter) -> None:
    """The global tracer provider (an SDK one, set once per process: OpenTelemetry refuses a
    second) also sends every span to `exporter`."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
