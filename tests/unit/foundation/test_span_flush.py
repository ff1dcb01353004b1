"""Spans still queued when a process leaves by `os._exit` (a forked bots worker, a Celery pool
process, a command service left with a call stuck): the batch processor sends them every 5 s,
and the provider's `atexit` hook, which would send the rest, never runs there
(`famiglia.telemetry.flush_spans`)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from famiglia import telemetry

HOURLY = 3_600_000


@contextmanager
def _queued_for_an_hour(monkeypatch: pytest.MonkeyPatch, exporter: SpanExporter) -> Iterator[TracerProvider]:
    """The process's provider for the block, its spans sent once an hour (so only by a flush)."""
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=HOURLY))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)  # the global provider, for this test
    try:
        yield provider
    finally:
        provider.shutdown()


class _Left(Exception):
    """`os._exit`, caught: the test goes on after the process would have left."""


def leave(code: int) -> None:
    raise _Left(code)


def test_a_forked_worker_sends_its_queued_spans_before_it_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    from services.bots import worker

    exporter = InMemorySpanExporter()
    with _queued_for_an_hour(monkeypatch, exporter) as provider:

        def play(*args: Any, **kwargs: Any) -> None:
            provider.get_tracer("test").start_span("decide").end()  # queued, not sent yet
            raise SystemExit(0)  # Celery's warm shutdown

        monkeypatch.setattr(worker.os, "fork", lambda: 0)
        monkeypatch.setattr(worker.os, "_exit", leave)
        monkeypatch.setattr(worker, "_run_celery", play)
        monkeypatch.setattr(worker.signal, "signal", lambda *args: None)
        with pytest.raises(_Left):
            worker._fork_solo(type("App", (), {"bots": worker.BotsSettings()})(), 0, [])
        assert [span.name for span in exporter.get_finished_spans()] == ["decide"]


def test_a_prefork_pool_process_sends_its_queued_spans_before_it_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    from celery import signals

    import services.bots.entrypoints.celery_app  # noqa: F401 - connects its signal handlers

    exporter = InMemorySpanExporter()
    with _queued_for_an_hour(monkeypatch, exporter) as provider:
        provider.get_tracer("test").start_span("decide").end()
        assert exporter.get_finished_spans() == ()
        signals.worker_process_shutdown.send(sender="bots@test", pid=1, exitcode=0)
        assert [span.name for span in exporter.get_finished_spans()] == ["decide"]


def test_a_collector_that_does_not_answer_keeps_no_process_from_leaving(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's flush waits as long as its exporter takes, whatever timeout it is given."""
    released = threading.Event()

    class Stuck(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            released.wait()
            return SpanExportResult.SUCCESS

    try:
        with _queued_for_an_hour(monkeypatch, Stuck()) as provider:
            provider.get_tracer("test").start_span("decide").end()
            assert telemetry.flush_spans(timeout_s=0.2) is False
            released.set()
    finally:
        released.set()


def test_nothing_to_flush_when_spans_go_nowhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", TracerProvider())  # no exporter: `configure` without one
    assert telemetry.flush_spans() is True


_FORKED = r'''
import json, os
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from famiglia import telemetry

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=3_600_000))
trace.set_tracer_provider(provider)
provider.get_tracer("t").start_span("parent's").end()  # queued in the parent
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    provider.get_tracer("t").start_span("child's").end()
    flushed = telemetry.flush_spans()
    os.write(write, json.dumps({"flushed": flushed,
                                "sent": [s.name for s in exporter.get_finished_spans()]}).encode())
    os._exit(0)
os.close(write)
got = json.loads(os.read(read, 65536))
os.waitpid(pid, 0)
print(json.dumps(got))
'''


def test_a_forked_child_sends_its_own_queued_spans() -> None:
    """After a real fork (the SDK starts the batch processor's thread again in the child, with a
    queue of its own): the child sends its spans, not the parent's it inherited."""
    import json

    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", _FORKED], capture_output=True, text=True, timeout=120, cwd=root,
                          env=dict(os.environ, PYTHONPATH=f"{root / 'libs'}{os.pathsep}{root}"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"flushed": True, "sent": ["child's"]}


@pytest.mark.parametrize("stuck", [1, 0], ids=["stuck", "slow"])
def test_a_service_that_leaves_with_a_call_running_sends_its_queued_spans(monkeypatch: pytest.MonkeyPatch,
                                                                          stuck: int) -> None:
    """`leave_running` leaves by `os._exit` too (a call thread that never ends would hold the
    interpreter's exit): the spans of the calls served until the drain must not die with it.
    A call past the stuck bound is a stop that failed (status 1); a slow one, a stop (0)."""
    from famiglia.grpcutil import lifecycle

    exporter = InMemorySpanExporter()
    with _queued_for_an_hour(monkeypatch, exporter) as provider:
        provider.get_tracer("test").start_span("SubmitCommand").end()  # queued, not sent yet
        monkeypatch.setattr(lifecycle.os, "_exit", leave)
        with pytest.raises(_Left) as left:
            lifecycle.leave_running("command", 1, stuck, 0.0)
        assert left.value.args == (1 if stuck else 0,)
        assert [span.name for span in exporter.get_finished_spans()] == ["SubmitCommand"]
