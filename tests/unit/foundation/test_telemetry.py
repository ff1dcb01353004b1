"""The server span of a call: recorded when spans go somewhere, ids only when they go nowhere."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind

from famiglia.telemetry import extract_context, inject_context, server_span

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_without_an_exporter_the_span_is_not_recorded_but_carries_fresh_sampled_ids() -> None:
    provider = TracerProvider()  # the production default: SDK on, no span processor
    seen = []
    for _ in range(2):
        with server_span("SubmitCommand", provider=provider) as span:
            assert not span.is_recording()
            assert trace.get_current_span() is span
            seen.append(span.get_span_context())
            carrier = inject_context()
    first, second = seen
    assert first.is_valid and second.is_valid and first.trace_id != second.trace_id
    assert first.trace_flags.sampled  # what ParentBased(ALWAYS_ON) decides for a root span
    assert carrier["traceparent"] == f"00-{second.trace_id:032x}-{second.span_id:016x}-{second.trace_flags:02x}"
    assert trace.get_current_span() is not span


def test_without_an_exporter_the_span_continues_the_callers_trace_and_its_sampling() -> None:
    provider = TracerProvider()
    for flags, sampled in (("01", True), ("00", False)):
        parent = extract_context({"traceparent": PARENT[:-2] + flags, "baggage": "team=blue"})
        with server_span("SubmitCommand", parent, provider=provider) as span:
            ctx = span.get_span_context()
            assert f"{ctx.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
            assert ctx.span_id != 0xB7AD6B7169203331 and ctx.trace_flags.sampled is sampled
            assert inject_context()["baggage"] == "team=blue"  # the caller's context is current too


def test_the_providers_sampler_decides_the_flags() -> None:
    with server_span("SubmitCommand", provider=TracerProvider(sampler=ALWAYS_OFF)) as span:
        assert span.get_span_context().is_valid and not span.get_span_context().trace_flags.sampled


def test_with_an_exporter_the_server_span_is_recorded_under_the_caller() -> None:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with server_span("SubmitCommand", extract_context({"traceparent": PARENT}), provider=provider) as span:
        assert span.is_recording()
    (finished,) = exporter.get_finished_spans()
    assert finished.name == "SubmitCommand" and finished.kind == SpanKind.SERVER
    assert finished.parent is not None and finished.parent.span_id == 0xB7AD6B7169203331


def test_a_served_span_carries_what_the_public_api_writes() -> None:
    """The served span's shortcuts (its traceparent and tracestate written once, the span
    context built as a tuple, the context var set directly) give what the API gives."""
    from opentelemetry import context as otel_context
    from opentelemetry import propagate
    from opentelemetry.trace import SpanContext

    provider = TracerProvider()
    cases = [None, extract_context({"traceparent": PARENT, "tracestate": "vendor=x1,other=y2"}),
             extract_context({"traceparent": PARENT[:-2] + "00", "baggage": "team=blue"})]
    for parent in cases:
        before = otel_context.get_current()
        with server_span("SubmitCommand", parent, provider=provider) as span:
            ctx = span.get_span_context()
            rebuilt = SpanContext(ctx.trace_id, ctx.span_id, is_remote=False, trace_flags=ctx.trace_flags,
                                  trace_state=ctx.trace_state)
            assert ctx == rebuilt and ctx.is_valid and not ctx.is_remote
            assert otel_context.get_current() == trace.set_span_in_context(span, parent)
            expected: dict[str, str] = {}
            propagate.inject(expected)
            assert inject_context() == expected and "traceparent" in expected
            assert ("tracestate" in expected) is (parent is cases[1])
        assert otel_context.get_current() is before


def test_detaching_in_another_context_is_logged_and_swallowed_like_opentelemetry(caplog) -> None:
    import contextvars

    cm = server_span("StreamEvents", provider=TracerProvider())
    contextvars.copy_context().run(cm.__enter__)
    cm.__exit__(None, None, None)  # the token belongs to the other context: OpenTelemetry logs it
    assert "Failed to detach context" in caplog.text


def test_follows_from_starts_a_new_trace_linked_to_the_carried_one() -> None:
    from famiglia.telemetry import follows_from

    carried = extract_context({"traceparent": PARENT})
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with follows_from("bots.decide", carried, provider=provider, seat=1):
        inside = trace.get_current_span().get_span_context()
    (finished,) = exporter.get_finished_spans()
    assert finished.name == "bots.decide" and finished.kind == SpanKind.CONSUMER and finished.parent is None
    assert finished.context.trace_id == inside.trace_id != 0x0AF7651916CD43DD8448EB211C80319C
    assert [link.context.span_id for link in finished.links] == [0xB7AD6B7169203331]
    assert finished.attributes["seat"] == 1
    # without an exporter: fresh ids alone, which the logs and the next call carry
    with follows_from("bots.decide", carried, provider=TracerProvider()):
        quiet = trace.get_current_span().get_span_context()
        carrier = inject_context()
    assert quiet.is_valid and quiet.trace_id != 0x0AF7651916CD43DD8448EB211C80319C
    assert carrier["traceparent"].split("-")[1] == f"{quiet.trace_id:032x}"
    assert not trace.get_current_span().get_span_context().is_valid  # nothing left current


def test_the_standard_librarys_lines_are_json_lines_too(tmp_path) -> None:
    """Celery's task lines, the broker's bookkeeping and OpenTelemetry's exporter failures log
    through `logging`: once configured, they are the same JSON lines as structlog's (service,
    level, logger, trace ids, the traceback as one value), not bare text among them."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    probe = (
        "import logging\n"
        "from opentelemetry import trace\n"
        "from famiglia.telemetry import configure, get_logger, server_span\n"
        "configure('probe', json=True)\n"
        "with server_span('SubmitCommand'):\n"
        "    get_logger().info('ours', match_id='m1')\n"
        "    try:\n"
        "        raise OSError('collector away')\n"
        "    except OSError:\n"
        "        logging.getLogger('opentelemetry.sdk').exception('Exception while exporting Span batch.')\n"
        "    logging.getLogger('celery.worker').warning('lost %s tasks', 2)\n"
    )
    env = dict(os.environ, PYTHONPATH=f"{root / 'libs'}{os.pathsep}{root}", FAMIGLIA_LOG_LEVEL="info")
    env.pop("OTEL_SDK_DISABLED", None)
    env.pop("OTEL_TRACES_EXPORTER", None)
    done = subprocess.run([sys.executable, "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(text) for text in done.stderr.splitlines()]  # every line JSON
    ours, failed, lost = lines
    assert (failed["event"], failed["level"], failed["logger"], failed["service"]) == (
        "Exception while exporting Span batch.", "error", "opentelemetry.sdk", "probe")
    assert "OSError: collector away" in failed["exception"]
    assert (lost["event"], lost["level"], lost["logger"]) == ("lost 2 tasks", "warning", "celery.worker")
    assert failed["trace_id"] == lost["trace_id"] == ours["trace_id"]


def test_an_unknown_exporter_stops_the_service_with_its_variable() -> None:
    """A typo (`otpl`) used to send every span nowhere, and every metric to OTLP, without a word."""
    import pytest

    from famiglia.telemetry import exporters

    for variable in ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER"):
        for typo in ("otpl", "otlp,zipkin"):
            with pytest.raises(SystemExit, match=variable):
                exporters(variable, {variable: typo})
        assert exporters(variable, {variable: " OTLP , console,otlp"}) == ["otlp", "console"]
        assert exporters(variable, {variable: "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}) == []
        assert exporters(variable, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}) == ["otlp"]
        assert exporters(variable, {}) == []


def test_a_service_refuses_an_unknown_metrics_exporter(monkeypatch) -> None:
    import pytest

    from famiglia.telemetry.metrics import configure_metrics

    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "otpl")
    with pytest.raises(SystemExit, match="OTEL_METRICS_EXPORTER"):
        configure_metrics("projection")
