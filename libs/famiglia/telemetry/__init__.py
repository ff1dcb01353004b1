"""Logs and traces for every service: structlog key/values and OpenTelemetry spans.

`configure(service)` once per process. Logs are JSON when stderr is not a TTY and
carry the current trace and span ids; bind match_id, seat and command_id with
`structlog.contextvars.bound_contextvars`. Traces go to the console or OTLP by the
standard OTEL_* variables (OTEL_TRACES_EXPORTER=console|otlp|none,
OTEL_EXPORTER_OTLP_ENDPOINT); the trace context travels in gRPC metadata and in
each event's `trace` map so consumers continue the trace.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, MutableMapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import structlog
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

_configured: str | None = None


def _add_trace_ids(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    span = trace.get_current_span()
    ctx = span.get_span_context()
    if ctx.is_valid:
        event_dict.setdefault("trace_id", format(ctx.trace_id, "032x"))
        event_dict.setdefault("span_id", format(ctx.span_id, "016x"))
    return event_dict


def configure(service: str, *, level: str | None = None, json: bool | None = None) -> None:
    """Set up structlog and the tracer provider for this process (idempotent)."""
    global _configured
    if _configured:
        return
    _configured = service
    level_name = (level or os.environ.get("FAMIGLIA_LOG_LEVEL", "info")).upper()
    log_level = getattr(logging, level_name, logging.INFO)
    logging.basicConfig(level=log_level, stream=sys.stderr, format="%(message)s")
    use_json = (not sys.stderr.isatty()) if json is None else json
    renderer: Any = structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _add_trace_ids,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(log_level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.bind_contextvars(service=service)
    _configure_tracing(service)


def _configure_tracing(service: str) -> None:
    exporter_name = os.environ.get("OTEL_TRACES_EXPORTER", "").lower()
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", f"famiglia-{service}")})
    provider = TracerProvider(resource=resource)
    if exporter_name == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
    elif exporter_name == "otlp" or (exporter_name == "" and os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")):
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    # With no exporter, spans are still created so trace ids reach the logs and events.
    trace.set_tracer_provider(provider)


def get_logger(name: str = "famiglia") -> Any:
    return structlog.get_logger(name)


_tracers: dict[str, trace.Tracer] = {}


def tracer(name: str = "famiglia") -> trace.Tracer:
    """The tracer of `name`, made once: the SDK's get_tracer builds scope objects and
    re-registers a warnings filter on every call. Before `configure` this is a proxy
    that follows the provider set later."""
    found = _tracers.get(name)
    if found is None:
        found = _tracers[name] = trace.get_tracer(name)
    return found


def spans_exported() -> bool:
    """Whether finished spans go anywhere (an SDK provider with a span processor).

    Without one, only the server span of a call matters (its ids reach the logs and
    the events); a child span nobody can see still costs ~25 us in the SDK."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.NoOpTracerProvider, trace.ProxyTracerProvider)):
        return False  # not configured, or OTEL_SDK_DISABLED: every span is a no-op
    processors = getattr(getattr(provider, "_active_span_processor", None), "_span_processors", None)
    return True if processors is None else bool(processors)  # unknown provider: assume they go somewhere


def child_span(name: str, attributes: Mapping[str, Any] | None = None) -> AbstractContextManager[Any]:
    """A span under the current one, not made current (nothing below opens spans, and
    attaching a context costs as much as the span); a no-op when spans go nowhere."""
    if not spans_exported():
        return nullcontext()
    return tracer().start_span(name, attributes=attributes)


def inject_context() -> dict[str, str]:
    """The current trace context as a carrier (traceparent, tracestate)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def extract_context(carrier: Mapping[str, str]) -> otel_context.Context:
    return propagate.extract(dict(carrier))
