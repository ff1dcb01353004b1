"""Logs and traces for every service: structlog key/values and OpenTelemetry spans.

`configure(service)` once per process. Logs are JSON when stderr is not a TTY and
carry the current trace and span ids; bind match_id, seat and command_id with
`structlog.contextvars.bound_contextvars`. Traces go to the console or OTLP by the
standard OTEL_* variables (OTEL_TRACES_EXPORTER=console|otlp|none,
OTEL_EXPORTER_OTLP_ENDPOINT); the trace context travels in gRPC metadata and in
each event's `trace` map so consumers continue the trace. Metrics: `famiglia.telemetry.metrics`.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any

import structlog
from opentelemetry import baggage as otel_baggage
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.context.context import Context
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider, sampling
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags, TraceState
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from famiglia.heldio import never_waiting_fd, write_held

_configured: str | None = None


def _add_trace_ids(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    span = trace.get_current_span()
    ctx = span.get_span_context()
    if ctx.is_valid:
        event_dict.setdefault("trace_id", format(ctx.trace_id, "032x"))
        event_dict.setdefault("span_id", format(ctx.span_id, "016x"))
    return event_dict


_second: tuple[int, str] = (-1, "")


def _timestamp(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """ISO 8601 UTC with microseconds, like TimeStamper(fmt="iso", utc=True), but the date
    and time of day are formatted once a second instead of building a datetime per line."""
    now = time.time()
    second = int(now)
    cached = _second
    if cached[0] != second:
        cached = _stamp_second(second)
    event_dict["timestamp"] = f"{cached[1]}.{int((now - second) * 1e6):06d}Z"
    return event_dict


def _stamp_second(second: int) -> tuple[int, str]:
    global _second
    _second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return _second


def _json_default(obj: Any) -> Any:
    """What structlog's JSONRenderer does with a value JSON cannot hold."""
    custom = getattr(obj, "__structlog__", None)
    return custom() if custom is not None else repr(obj)


_encoder = json.JSONEncoder(default=_json_default)


_LEVEL_NAMES = {"warn": "warning", "exception": "error"}  # what add_log_level writes


def _json_tail(logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> str:
    """add_log_level, _timestamp, _add_trace_ids, format_exc_info and the JSON rendering in
    one processor: the same keys in the same order, without five calls through structlog's
    chain for every line. `_encoder` is made once (json.dumps(..., default=) builds one a call)."""
    if _configured is not None and "service" not in event_dict:
        event_dict["service"] = _configured
    event_dict["level"] = _LEVEL_NAMES.get(method_name, method_name)
    _timestamp(logger, method_name, event_dict)
    ctx = _current_span_context()
    if ctx is not None and ctx.is_valid:
        if "trace_id" not in event_dict:
            event_dict["trace_id"] = format(ctx.trace_id, "032x")
        if "span_id" not in event_dict:
            event_dict["span_id"] = format(ctx.span_id, "016x")
    if "exc_info" in event_dict:
        event_dict = structlog.processors.format_exc_info(logger, method_name, event_dict)
    return _encoder.encode(event_dict)


_json_out: structlog.WriteLogger | None = None  # set by configure when lines are JSON at info or below
#: (that writer, its descriptor) when a write there never waits (a file, /dev/null): EventLine
#: writes its lines to the descriptor with the GIL kept (famiglia.heldio); (None, -1) otherwise.
_held: tuple[Any, int] = (None, -1)
#: Whether WriteLogger keeps its file's lock, write and flush where `EventLine` can call them.
_OUT_PARTS = all(hasattr(structlog.WriteLogger(sys.__stderr__ or sys.stderr), name)
                 for name in ("_lock", "_write", "_flush"))


class EventLine:
    """One log line with a fixed event and keys, for a line written on a hot path:
    `line(*values)` writes exactly what `log.info(event, **dict(zip(keys, values)))` writes
    when logs are JSON (same keys, order and values, the same write lock), but the fixed
    parts are rendered once and each value encoded alone, without structlog's chain (under
    half its cost). Anything else (console output, another level, no `configure`,
    a value JSON cannot hold as is) goes through structlog."""

    __slots__ = ("log", "event", "keys", "head")

    def __init__(self, logger_name: str, event: str, *keys: str) -> None:
        self.log = get_logger(logger_name)
        self.event, self.keys = event, keys
        # The fixed text with a %s per value: one format instead of a string per key.
        fixed = [f'"{key}": '.replace("%", "%%") + "%s" for key in keys]
        self.head = "{" + ", ".join(fixed) + f', "event": {_encoder.encode(event)}'.replace("%", "%%")

    def _structlog(self, values: tuple[Any, ...]) -> None:
        self.log.info(self.event, **dict(zip(self.keys, values, strict=True)))

    def __call__(self, *values: Any) -> None:
        out = _json_out
        if out is None or not _CONTEXT_VARS_OK or len(values) != len(self.keys):
            self._structlog(values)
            return
        encoded = []
        for value in values:
            kind = type(value)
            if kind is str:
                encoded.append(_quote(value))
            elif kind is int:
                encoded.append(value)
            else:
                self._structlog(values)
                return
        line = self.head % tuple(encoded)
        service = _configured is not None and "service" not in self.keys
        if _CONTEXT_VARS:
            for name, var in tuple(_CONTEXT_VARS.items()):  # a copy: another thread may bind a new one
                bound = var.get(Ellipsis)
                if bound is not Ellipsis and name[_PREFIX:] not in self.keys:
                    line += _bound_pair(name, bound)
                    if name[_PREFIX:] == "service":
                        service = False
        if service:  # as _json_tail adds it
            line += _bound_pair(_SERVICE_KEY, _configured)
        now = time.time()  # what _timestamp writes, inline
        second = int(now)
        cached = _second
        if cached[0] != second:
            cached = _stamp_second(second)
        span: Any = _current().get(_SPAN_KEY) if _SPAN_KEY is not None else trace.get_current_span()
        if type(span) is _ServedSpan:  # its ids are in its traceparent, already in hex
            parent = span.traceparent
            text = _TAIL_SERVED % (line, cached[1], (now - second) * 1e6, parent[3:35], parent[36:52])
        else:
            ids = None if span is None else _ids(span.get_span_context())
            if ids is not None and ids[4]:
                text = _TAIL_TRACED % (line, cached[1], (now - second) * 1e6, ids[0], ids[1])
            else:
                text = _TAIL % (line, cached[1], (now - second) * 1e6)
        if _OUT_PARTS:  # WriteLogger.msg without its call: the same lock, write and flush
            with out._lock:  # type: ignore[attr-defined]
                held = _held
                if held[0] is out:  # a file that never waits: written with the GIL kept
                    out._flush()  # type: ignore[attr-defined]  # text another writer left buffered goes first
                    data = (text + "\n").encode()
                    done = write_held(held[1], data)
                    if done == len(data):
                        return
                    if done:  # a short write to a file (full disk?): the rest as Python writes
                        out._write(data[done:].decode())  # type: ignore[attr-defined]
                        out._flush()  # type: ignore[attr-defined]
                        return
                out._write(text + "\n")  # type: ignore[attr-defined]
                out._flush()  # type: ignore[attr-defined]
        else:
            out.msg(text)


#: ", name: value" of a bound context variable, by name, while it stays bound to the same
#: value (a service binds `service` once; encoding it for every line cost two encoder calls).
_bound_seen: dict[str, tuple[Any, str]] = {}


def _bound_pair(name: str, bound: Any) -> str:
    seen = _bound_seen.get(name)
    if seen is not None and seen[0] is bound:
        return seen[1]
    pair = f", {_encoder.encode(name[_PREFIX:])}: {_encoder.encode(bound)}"
    if type(bound) is str:  # immutable: its text cannot change under the same object
        _bound_seen[name] = (bound, pair)
    return pair


# What _json_tail adds after the event: level, timestamp (%06d of the float truncates like
# int()), trace and span ids, as one format each.
_TAIL = '%s, "level": "info", "timestamp": "%s.%06dZ"}'
_TAIL_TRACED = '%s, "level": "info", "timestamp": "%s.%06dZ", "trace_id": "%032x", "span_id": "%016x"}'
_TAIL_SERVED = '%s, "level": "info", "timestamp": "%s.%06dZ", "trace_id": "%s", "span_id": "%s"}'


def _current_span_context() -> SpanContext | None:
    """trace.get_current_span().get_span_context(), or None for no span: one context look-up
    instead of trace's three calls."""
    if _SPAN_KEY is None:
        return trace.get_current_span().get_span_context()
    span: Any = _current().get(_SPAN_KEY)
    return None if span is None else span.get_span_context()


# -- OpenTelemetry's per-call steps, done directly ----------------------------------------
# A served call opens a span, makes it current, reads it back for the log line and the
# events' trace map, and detaches it: through the API that is a dozen Python calls and
# property reads (about a fifth of a command). The shortcuts below rely on two layouts of
# the OpenTelemetry release, checked once here; when either differs, the public API is used.

_RUNTIME = getattr(otel_context, "_RUNTIME_CONTEXT", None)
_CURRENT_VAR: ContextVar[Context] | None = getattr(_RUNTIME, "_current_context", None)
if type(_RUNTIME) is not ContextVarsRuntimeContext or not isinstance(_CURRENT_VAR, ContextVar):
    _CURRENT_VAR = None  # another runtime context: its own get, attach and detach
#: otel_context.get_current / attach: the runtime's ContextVar itself (one C call, not two
#: Python ones) when the runtime is the default contextvars one.
_current = otel_context.get_current if _CURRENT_VAR is None else _CURRENT_VAR.get
_attach = otel_context.attach if _CURRENT_VAR is None else _CURRENT_VAR.set


def _span_context_is_tuple() -> bool:
    """Whether SpanContext is the tuple (trace_id, span_id, is_remote, trace_flags,
    trace_state, is_valid) its properties read: then hot paths index and build it directly."""
    state = TraceState([("k", "v")])
    probe = SpanContext(0x1234, 0x56, True, TraceFlags(TraceFlags.SAMPLED), state)
    invalid = SpanContext(0, 0x56, False)
    return (isinstance(probe, tuple) and tuple(probe) == (0x1234, 0x56, True, 1, state, True)
            and (probe.trace_id, probe.span_id, probe.is_remote, probe.trace_flags, probe.trace_state,
                 probe.is_valid) == tuple(probe)
            and tuple(invalid)[5] is False and invalid.trace_state is trace.DEFAULT_TRACE_STATE
            and tuple.__new__(SpanContext, tuple(probe)) == probe)


_SC_TUPLE = _span_context_is_tuple()
_DEFAULT_STATE = trace.DEFAULT_TRACE_STATE
_TRACE_ID_MAX, _SPAN_ID_MAX = 2**128 - 1, 2**64 - 1


def _ids(sc: SpanContext) -> tuple[int, int, TraceFlags, TraceState, bool]:
    """(trace_id, span_id, trace_flags, trace_state, is_valid) of a span context."""
    if _SC_TUPLE:
        trace_id, span_id, _remote, flags, state, valid = sc
        return trace_id, span_id, flags, state, valid
    return sc.trace_id, sc.span_id, sc.trace_flags, sc.trace_state, sc.is_valid


def _span_context(trace_id: int, span_id: int, flags: TraceFlags, state: TraceState | None) -> SpanContext:
    """SpanContext(trace_id, span_id, is_remote=False, ...), without its Python constructor."""
    if not _SC_TUPLE:
        return SpanContext(trace_id, span_id, is_remote=False, trace_flags=flags, trace_state=state)
    valid = 0 < trace_id <= _TRACE_ID_MAX and 0 < span_id <= _SPAN_ID_MAX
    return tuple.__new__(SpanContext, (trace_id, span_id, False, flags,
                                       _DEFAULT_STATE if state is None else state, valid))


def _provider() -> object:
    """trace.get_tracer_provider(), without its `cast` call once a provider is set."""
    found = getattr(trace, "_TRACER_PROVIDER", None)
    return trace.get_tracer_provider() if found is None else found


_quote = json.encoder.encode_basestring_ascii  # what the encoder writes for a str (ensure_ascii)
_CONTEXT_VARS: Mapping[str, Any] = getattr(structlog.contextvars, "_CONTEXT_VARS", {})
_CONTEXT_VARS_OK = hasattr(structlog.contextvars, "_CONTEXT_VARS")  # else the structlog path
_PREFIX = len(structlog.contextvars.STRUCTLOG_KEY_PREFIX)
_SERVICE_KEY = structlog.contextvars.STRUCTLOG_KEY_PREFIX + "service"  # _bound_pair's form of the name


def _add_service(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """The process's service on every line, whatever thread writes it (a context variable
    bound in the main thread is not seen by the gRPC, consumer and dispatcher threads)."""
    if _configured is not None:
        event_dict.setdefault("service", _configured)
    return event_dict


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
"""What FAMIGLIA_LOG_LEVEL may name (any case), as `logging` and Celery's --loglevel know them."""


def configure(service: str, *, level: str | None = None, json: bool | None = None) -> None:
    """Set up structlog and the tracer provider for this process (idempotent)."""
    global _configured
    if _configured:
        return
    level_name = (level or os.environ.get("FAMIGLIA_LOG_LEVEL", "").strip() or "info").upper()  # blank: the default
    log_level = logging.getLevelName(level_name)
    if level_name not in LOG_LEVELS or not isinstance(log_level, int):  # a typo would log at info, unsaid
        raise SystemExit(f"FAMIGLIA_LOG_LEVEL={level_name.lower()!r} is not one of "
                         f"{', '.join(n.lower() for n in LOG_LEVELS)}")
    _configured = service
    use_json = (not sys.stderr.isatty()) if json is None else json
    tail: list[Any] = ([_json_tail] if use_json else
                       [_add_service, structlog.processors.add_log_level, _timestamp, _add_trace_ids,
                        structlog.processors.format_exc_info, structlog.dev.ConsoleRenderer()])
    logging.basicConfig(level=log_level, handlers=[_foreign_lines(tail)])
    logging.captureWarnings(True)  # Python's warnings (Celery's SecurityWarning as root) as lines like any other
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, *tail],
        wrapper_class=structlog.make_filtering_bound_logger(log_level),
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),  # one write per line, not print's two
        cache_logger_on_first_use=True,
    )
    global _json_out, _held
    _json_out = structlog.WriteLogger(sys.stderr) if use_json and log_level <= logging.INFO else None
    fd = never_waiting_fd(sys.stderr) if _json_out is not None else None
    _held = (None, -1) if fd is None else (_json_out, fd)
    _configure_tracing(service)


def _foreign_lines(tail: list[Any]) -> logging.Handler:
    """The handler of the standard library's records (Celery, OpenTelemetry's exporters, the
    broker's bookkeeping, alembic): rendered by the same `tail` as structlog's lines, so they
    are JSON lines too, with the service, level, timestamp, logger, trace ids and bound
    context variables, rather than bare text and tracebacks among them."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.contextvars.merge_contextvars, structlog.stdlib.add_logger_name],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *tail]))
    return handler


EXPORTERS = ("console", "otlp", "none")
"""What OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER may name (comma-separated lists, as
OpenTelemetry reads them)."""


def exporters(variable: str = "OTEL_TRACES_EXPORTER", env: Mapping[str, str] | None = None) -> list[str]:
    """The exporters a setting names (`otlp` when it is blank and OTEL_EXPORTER_OTLP_ENDPOINT
    is set); a name none of EXPORTERS stops the service, as every other setting's typo does,
    rather than send the spans (or the metrics) nowhere, or somewhere else, without a word."""
    env = os.environ if env is None else env
    value = env.get(variable, "").strip().lower()
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in EXPORTERS]
    if unknown:
        raise SystemExit(f"{variable}={value!r}: {', '.join(unknown)} is not one of {', '.join(EXPORTERS)}")
    if not names and env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        names = ["otlp"]
    return [name for name in dict.fromkeys(names) if name != "none"]


def _configure_tracing(service: str) -> None:
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return
    named = exporters()
    name = os.environ.get("OTEL_SERVICE_NAME", "").strip() or f"famiglia-{service}"  # blank: the default
    resource = Resource.create({"service.name": name})
    provider = TracerProvider(resource=resource)
    if "console" in named:
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
    if "otlp" in named:
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
    return _export_state(_provider())[0]


def flush_spans(timeout_s: float = 2.0) -> bool:
    """Export the finished spans still queued (a batch goes every 5 s), waiting `timeout_s` at
    most: for a process that leaves by `os._exit` (a forked bots worker, a Celery pool process),
    where the provider's own `atexit` hook never runs and the queue dies with it. The SDK's
    flush takes as long as its exporter does (OTLP: its own timeout, retries), whatever it is
    told, so it runs on a thread of its own, left behind past `timeout_s`: a collector away
    must not keep a worker from leaving. Fork-safe: a forked child's batch processor was
    started again by the SDK, with the child's own queue. True when every span went out in
    time (or none goes anywhere)."""
    provider = _provider()
    flush = getattr(provider, "force_flush", None)
    if flush is None or not spans_exported():
        return True
    flushed: list[bool] = []

    def run() -> None:
        try:
            flushed.append(flush(max(1, int(timeout_s * 1000))) is not False)
        except Exception:  # noqa: BLE001 - an exporter's error must not keep the process from leaving
            get_logger("famiglia.telemetry").warning("spans_final_export_failed", exc_info=True)

    flusher = threading.Thread(target=run, name="famiglia-spans-flush", daemon=True)
    flusher.start()
    flusher.join(timeout_s)
    if flusher.is_alive():
        get_logger("famiglia.telemetry").warning("spans_final_export_late", timeout_s=timeout_s)
        return False
    return flushed == [True]


#: (provider, its span processors, the answer) of the last `_export_state` asked: the
#: isinstance checks against OpenTelemetry's abstract classes cost more than the rest of
#: a child span's no-op; adding a span processor replaces the processors tuple.
_export_seen: tuple[object, object, tuple[bool, TracerProvider | None]] = (None, None, (False, None))


def _export_state(provider: object) -> tuple[bool, TracerProvider | None]:
    """(spans are exported, the SDK provider if it records for nobody) of `provider`."""
    processors = getattr(getattr(provider, "_active_span_processor", None), "_span_processors", None)
    global _export_seen
    seen = _export_seen
    if seen[0] is provider and seen[1] is processors:
        return seen[2]
    if isinstance(provider, (trace.NoOpTracerProvider, trace.ProxyTracerProvider)):
        state: tuple[bool, TracerProvider | None] = (False, None)  # not configured, or OTEL_SDK_DISABLED
    elif isinstance(provider, TracerProvider) and processors is not None and not processors:
        state = (False, provider)
    else:
        state = (True, None)  # spans go somewhere, or an unknown provider: assume they do
    _export_seen = (provider, processors, state)
    return state


class _Current(AbstractContextManager[trace.Span]):
    """Makes a span current in `parent` (or the current context) until the block ends."""

    __slots__ = ("span", "parent", "token")

    def __init__(self, span: trace.Span, parent: otel_context.Context | None) -> None:
        self.span, self.parent = span, parent

    def __enter__(self) -> trace.Span:
        if _SPAN_KEY is None:
            self.token = _attach(trace.set_span_in_context(self.span, self.parent))
        else:  # set_span_in_context's copy with the span, in one copy instead of two
            context = Context(_current() if self.parent is None else self.parent)
            dict.__setitem__(context, _SPAN_KEY, self.span)  # Context refuses it, but nobody has this one yet
            self.token = _attach(context)
        return self.span

    def __exit__(self, *exc: object) -> None:
        if _CURRENT_VAR is None:
            otel_context.detach(self.token)
            return
        try:
            _CURRENT_VAR.reset(self.token)
        except Exception:  # noqa: BLE001
            otel_context.detach(self.token)  # logged and swallowed, as OpenTelemetry does


def server_span(name: str, parent: otel_context.Context | None = None, *,
                provider: trace.TracerProvider | None = None) -> AbstractContextManager[trace.Span]:
    """The span of one served call, current for the block, under `parent` (the caller's
    extracted context, made current with it) or the current context.

    When spans go nowhere (SDK on, no exporter: the production default), the SDK would
    record a span only to drop it (~15 us a call). Then the span is a NonRecordingSpan
    with the ids and flags the SDK would have given it (its id generator and sampler),
    so log lines, each event's `trace` map and downstream services see the same trace
    as before. With an exporter, a recorded SDK span as usual, but one that records no
    exception and sets no status by itself: the caller says which end is a failure.
    `provider`: the global one unless given (tests)."""
    sdk = _export_state(_provider() if provider is None else provider)[1]
    if sdk is not None:
        return _Current(_unrecorded(sdk, name, parent), parent)
    return _recorded(name, parent, tracer() if provider is None else provider.get_tracer("famiglia"))


def open_server_span(name: str, parent: otel_context.Context | None = None) -> tuple[trace.Span, Any] | None:
    """`server_span`'s usual case (spans go nowhere) without a context manager object: the
    span, made current until `close_server_span(token)`, and that token; None when the span
    must be recorded or the layouts differ (then use `server_span`). Three Python frames
    fewer per served call."""
    sdk = _export_state(_provider())[1]
    if sdk is None or _SPAN_KEY is None or _CURRENT_VAR is None:
        return None
    span = _unrecorded(sdk, name, parent)
    context = Context(_current() if parent is None else parent)
    dict.__setitem__(context, _SPAN_KEY, span)  # as _Current.__enter__
    return span, _CURRENT_VAR.set(context)


def close_server_span(token: Any) -> None:
    """Restore the context `open_server_span` replaced (a failure is logged and swallowed by
    OpenTelemetry's detach, as with `server_span`)."""
    try:
        _CURRENT_VAR.reset(token)  # type: ignore[union-attr]  # open_server_span checked it
    except Exception:  # noqa: BLE001
        otel_context.detach(token)


@contextmanager
def _recorded(name: str, parent: otel_context.Context | None, spans: trace.Tracer) -> Iterator[trace.Span]:
    token = None if parent is None else otel_context.attach(parent)
    try:
        # Not on any exception: a call the server refuses (the client's mistake, a rule) ends in
        # one too, and is no server error; the caller records the failures that are (grpcutil).
        with spans.start_as_current_span(name, kind=SpanKind.SERVER, record_exception=False,
                                         set_status_on_exception=False) as span:
            yield span
    finally:
        if token is not None:
            otel_context.detach(token)


def _unrecorded(provider: TracerProvider, name: str, parent: otel_context.Context | None) -> trace.Span:
    """What `Tracer.start_span` makes when its sampler says not to record, sampled or not."""
    if _SPAN_KEY is None:
        above = trace.get_current_span(parent).get_span_context()
    else:  # get_current_span's look-up, without its three calls
        span: Any = (_current() if parent is None else parent).get(_SPAN_KEY)
        above = trace.INVALID_SPAN_CONTEXT if span is None else span.get_span_context()
    if _SC_TUPLE:  # _ids, inline
        above_trace, _, _, above_flags, above_state, above_valid = above
    else:
        above_trace, _, above_flags, above_state, above_valid = _ids(above)
    ids = provider.id_generator
    if above_valid:
        trace_id, random_id = above_trace, above_flags & _RANDOM_TRACE_ID
    else:
        trace_id, random_id = ids.generate_trace_id(), ids.is_trace_id_random()
    sampler = provider.sampler
    if sampler is sampling.DEFAULT_ON:  # the SDK default, ParentBased(ALWAYS_ON), without the call
        sampled, state = (bool(above_flags & _SAMPLED), above_state) if above_valid else (True, None)
    else:
        result = sampler.should_sample(parent, trace_id, name, SpanKind.SERVER)
        sampled, state = result.decision.is_sampled(), result.trace_state
    flags = _FLAGS[sampled, bool(random_id)]
    if not _SERVED_SPANS:
        return NonRecordingSpan(_span_context(trace_id, ids.generate_span_id(), flags, state))
    span_id = ids.generate_span_id()
    valid = 0 < trace_id <= _TRACE_ID_MAX and 0 < span_id <= _SPAN_ID_MAX  # _span_context, inline
    context = tuple.__new__(SpanContext, (trace_id, span_id, False, flags,
                                          _DEFAULT_STATE if state is None else state, valid))
    if not valid:  # no ids to write
        return NonRecordingSpan(context)
    header = "" if state is None or not state else state.to_header()
    return _ServedSpan(context, _TRACEPARENT_IDS % (context[0], context[1]) + _FLAGS_HEX[flags], header)


class _ServedSpan(NonRecordingSpan):
    """The NonRecordingSpan of a served call, with its W3C `traceparent` (and `tracestate`)
    written once: the events' trace map copies them and the log line slices its trace and
    span ids out of them, instead of each reading and formatting the ids again."""

    def __init__(self, context: SpanContext, traceparent: str, tracestate: str) -> None:
        self._context = context  # what NonRecordingSpan.__init__ sets (checked below)
        self.traceparent, self.tracestate = traceparent, tracestate


def _served_spans_work() -> bool:
    """Whether a _ServedSpan is a NonRecordingSpan of its context (the SDK layout it relies on)."""
    if not _SC_TUPLE:
        return False
    probe = SpanContext(0x1234, 0x56, False)
    try:
        span = _ServedSpan(probe, "", "")
        return span.get_span_context() is probe and not span.is_recording()
    except Exception:  # noqa: BLE001
        return False


_SAMPLED, _RANDOM_TRACE_ID = int(TraceFlags.SAMPLED), int(TraceFlags.RANDOM_TRACE_ID)
_SERVED_SPANS = _served_spans_work()
#: TraceFlags by (sampled, random trace id), made once rather than per span.
_FLAGS = {(sampled, random_id): TraceFlags((TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
                                           | (TraceFlags.RANDOM_TRACE_ID if random_id else 0))
          for sampled in (False, True) for random_id in (False, True)}
_TRACEPARENT_IDS = "00-%032x-%016x-"
_FLAGS_HEX = {flags: f"{flags:02x}" for flags in _FLAGS.values()}  # formatting an int subclass is slow


def child_span(name: str, attributes: Mapping[str, Any] | None = None, *,
               record_exception: bool = True) -> AbstractContextManager[Any]:
    """A span under the current one, not made current (nothing below opens spans, and
    attaching a context costs as much as the span); a no-op when spans go nowhere.
    `record_exception=False`: an exception leaving the block is neither recorded (its message
    and traceback) nor made the span's error status, for a block whose exceptions are answers
    (a rule's refusal) whose text the trace must not keep."""
    if not _export_state(_provider())[0]:
        return _NO_SPAN
    return tracer().start_span(name, attributes=attributes, record_exception=record_exception,
                               set_status_on_exception=record_exception)


_NO_SPAN = nullcontext()  # reusable: it holds nothing


def inject_context() -> dict[str, str]:
    """The current trace context as a carrier (traceparent, tracestate, baggage).

    With the default propagators (W3C trace context, then baggage) the carrier is written
    here, as they would write it, without the composite's calls and context look-ups per
    field; any other propagator setting goes through `propagate.inject`."""
    carrier: dict[str, str] = {}
    if not _default_propagation():
        propagate.inject(carrier)
        return carrier
    ctx = _current()
    span: Any = ctx.get(_SPAN_KEY)  # type: ignore[arg-type]
    if type(span) is _ServedSpan:
        carrier["traceparent"] = span.traceparent
        if span.tracestate:
            carrier["tracestate"] = span.tracestate
    elif span is not None:
        sc = span.get_span_context()
        if sc != trace.INVALID_SPAN_CONTEXT:
            trace_id, span_id, flags, state, _valid = _ids(sc)
            carrier["traceparent"] = _TRACEPARENT % (trace_id, span_id, flags)
            if state is not _DEFAULT_STATE and state:
                carrier["tracestate"] = state.to_header()
    if ctx.get(_BAGGAGE_KEY):  # type: ignore[arg-type]
        _BAGGAGE.inject(carrier, ctx)
    return carrier


def stored_context() -> dict[str, str]:
    """The trace context an event keeps (`EventEnvelope.trace`): traceparent and tracestate,
    never baggage. Baggage is the caller's to fill (up to gRPC's 8 KB of metadata), and an
    event keeps it for good and shows it in every export once the match is over: a client
    could make each event that much larger, or hand its own data to every other player. A
    tracestate past the 512 characters W3C asks every vendor to carry is dropped likewise."""
    carrier = inject_context()
    carrier.pop("baggage", None)
    if len(carrier.get("tracestate", "")) > TRACESTATE_KEPT:
        del carrier["tracestate"]
    return carrier


TRACESTATE_KEPT = 512


_TRACEPARENT = "00-%032x-%016x-%02x"
# The context keys OpenTelemetry keeps the current span and the baggage under (private
# names: if a release renames them, every carrier goes through `propagate.inject`).
_SPAN_KEY: str | None = getattr(trace.propagation, "_SPAN_KEY", None)
_BAGGAGE_KEY: str | None = getattr(otel_baggage, "_BAGGAGE_KEY", None)
_BAGGAGE = W3CBaggagePropagator()
_textmap_seen: tuple[object, bool] = (None, False)


def _default_propagation() -> bool:
    """Whether the global propagator is OpenTelemetry's default: trace context, then baggage."""
    global _textmap_seen
    textmap = propagate.get_global_textmap()
    seen = _textmap_seen
    if seen[0] is textmap:
        return seen[1]
    kinds = [type(p) for p in getattr(textmap, "_propagators", ())]
    default = (type(textmap) is CompositePropagator and _SPAN_KEY is not None and _BAGGAGE_KEY is not None
               and kinds == [TraceContextTextMapPropagator, W3CBaggagePropagator])
    _textmap_seen = (textmap, default)
    return default


def extract_context(carrier: Mapping[str, str]) -> otel_context.Context:
    return propagate.extract(dict(carrier))


FOLLOWS_KEY = "famiglia-follows"
"""A carrier entry asking its receiver to start a new trace that links to the carried one,
instead of continuing it: work one step of a long automatic chain (a bot answering a bot)."""


@contextmanager
def follows_from(name: str, carried: otel_context.Context, *,
                 provider: trace.TracerProvider | None = None, **attributes: Any) -> Iterator[None]:
    """A new trace for the block, its root span linked to the span in `carried`: each bot move
    of a match played by bots alone is its own trace, not one more level of a trace as deep as
    the match. Recorded when spans go somewhere; otherwise fresh ids only, as `server_span`
    gives, which the logs and the next call's metadata carry."""
    exported, sdk = _export_state(_provider() if provider is None else provider)
    if not exported and sdk is None:  # no SDK at all (not configured, OTEL_SDK_DISABLED): no new
        token = otel_context.attach(carried)  # ids to make, so keep the carried ones, as before
        try:
            yield
        finally:
            otel_context.detach(token)
        return
    root = Context()
    if sdk is not None:
        with _Current(_unrecorded(sdk, name, root), root):
            yield
        return
    above = trace.get_current_span(carried).get_span_context()
    links = [trace.Link(above)] if above.is_valid else []
    token = otel_context.attach(root)
    try:
        spans = tracer() if provider is None else provider.get_tracer("famiglia")
        with spans.start_as_current_span(name, kind=SpanKind.CONSUMER, links=links, attributes=attributes):
            yield
    finally:
        otel_context.detach(token)


def carried_trace_id(carrier: Mapping[str, str] | None) -> str:
    """The trace id of a stored carrier's W3C traceparent ("00-<trace id>-<span id>-<flags>"),
    or "": what a log line names so an operator can find the command's other lines."""
    parent = (carrier or {}).get("traceparent", "")
    return parent[3:35] if len(parent) >= 35 else ""
