"""Metrics of every service: each served call counted by its status and famiglia code, and
timed; with no exporter (the default, and the bench), no instrument made or called at all."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import grpc
import pytest
from opentelemetry import metrics as otel_metrics

from famiglia.config import Settings
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.grpcutil.errors import NotFound
from famiglia.grpcutil.server import build_server, rpc
from famiglia.telemetry import metrics
from famiglia.v1 import game_service_pb2 as pb
from famiglia.v1 import game_service_pb2_grpc as pb_grpc
from tests.support.metrics import recorded

SERVICE = "famiglia.v1.GameService"


class _Game(pb_grpc.GameServiceServicer):
    """A GameService whose calls answer, refuse and fail on purpose."""

    @rpc
    def ListGames(self, request: Any, context: Any) -> pb.ListGamesResponse:
        return pb.ListGamesResponse()

    @rpc
    def GetView(self, request: Any, context: Any) -> pb.GetViewResponse:
        raise NotFound("unknown_match", "no such match")

    @rpc
    def ListChat(self, request: Any, context: Any) -> pb.ListChatResponse:
        raise RuntimeError("a bug of the server's own")

    @rpc
    def StreamEvents(self, request: Any, context: Any) -> Iterator[pb.StreamEventsResponse]:
        yield pb.StreamEventsResponse(version=1)
        yield pb.StreamEventsResponse(version=2, finished=True)


def _served_calls() -> None:
    """One call of each kind over real gRPC: OK, a refusal, a failure, a stream."""
    server, port = build_server("127.0.0.1:0", [(pb_grpc.add_GameServiceServicer_to_server, _Game(), SERVICE)],
                                workers=4)
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.GameServiceStub(channel)
            stub.ListGames(pb.ListGamesRequest(), timeout=10)
            with pytest.raises(grpc.RpcError) as refused:
                stub.GetView(pb.GetViewRequest(match_id="m-1"), timeout=10)
            assert refused.value.code() == grpc.StatusCode.NOT_FOUND
            with pytest.raises(grpc.RpcError) as failed:
                stub.ListChat(pb.ListChatRequest(match_id="m-1"), timeout=10)
            assert failed.value.code() == grpc.StatusCode.INTERNAL
            assert [r.version for r in stub.StreamEvents(pb.StreamEventsRequest(match_id="m-1"), timeout=10)] == [1, 2]
    finally:
        server.stop(grace=None)


def test_each_call_is_counted_by_its_status_and_code_and_a_unary_call_timed() -> None:
    with recorded() as seen:
        _served_calls()

    def calls(method: str, status: str, code: str) -> Any:
        return seen.value("famiglia.rpc.calls", **{"rpc.service": SERVICE, "rpc.method": method,
                                                   "status": status, "code": code})

    assert calls("ListGames", "OK", "") == 1
    assert calls("GetView", "NOT_FOUND", "unknown_match") == 1
    assert calls("ListChat", "INTERNAL", "") == 1
    assert calls("StreamEvents", "OK", "") == 1  # a stream, at its end
    timed = {attributes["rpc.method"]: value for attributes, value in seen.points("famiglia.rpc.duration")}
    assert set(timed) == {"ListGames", "GetView", "ListChat"}  # no duration for a stream
    assert all(count == 1 and total >= 0 for count, total in timed.values())
    assert all(attributes.keys() == {"rpc.service", "rpc.method"} for attributes, _ in seen.points("famiglia.rpc.duration"))


def test_counts_added_from_several_threads_add_up_exactly() -> None:
    """A count is a dict update (`Tally`), which the GIL does not make atomic: a thread switched
    out between its read and its write would lose counts. Threads switched every microsecond."""
    threads, each = 8, 10_000
    ready = threading.Barrier(threads)
    before = sys.getswitchinterval()

    def serve(n: int, measured: metrics.RpcInstruments) -> None:
        ready.wait()
        for _ in range(each):
            measured.called(SERVICE, "ListGames", "OK", "", None)
            measured.called(SERVICE, "GetView", "NOT_FOUND", f"code_{n % 2}", None)

    with recorded() as seen:
        measured = metrics.rpc
        assert measured is not None
        sys.setswitchinterval(1e-6)
        try:
            running = [threading.Thread(target=serve, args=(n, measured)) for n in range(threads)]
            for thread in running:
                thread.start()
            for thread in running:
                thread.join()
        finally:
            sys.setswitchinterval(before)

    def calls(method: str, status: str, code: str) -> Any:
        return seen.value("famiglia.rpc.calls", **{"rpc.service": SERVICE, "rpc.method": method,
                                                   "status": status, "code": code})

    assert calls("ListGames", "OK", "") == threads * each
    assert calls("GetView", "NOT_FOUND", "code_0") == calls("GetView", "NOT_FOUND", "code_1") == threads // 2 * each


def test_two_users_of_a_meter_count_into_one_tally_and_past_its_limit_into_the_overflow(monkeypatch) -> None:
    """The SDK keeps an observable instrument's first callbacks only: a second `CommandApp` of a
    process must count into the first's tally, not into one nobody reads."""
    monkeypatch.setattr(metrics, "TALLY_LIMIT", 2)
    with recorded() as seen:
        made = metrics.meter("famiglia.test")
        assert made is not None
        first = metrics.tally(made, "famiglia.test.things", ("kind",), unit="{thing}", description="things")
        second = metrics.tally(made, "famiglia.test.things", ("kind",), unit="{thing}", description="things")
        assert second is first
        for kind in ("a", "b", "a", "c", "d"):
            second.add((kind,))
        with pytest.raises(ValueError):
            metrics.tally(made, "famiglia.test.things", ("game",), unit="{thing}", description="things")
    assert sorted(seen.points("famiglia.test.things"), key=str) == sorted(
        [({"kind": "a"}, 2), ({"kind": "b"}, 1), ({"otel.metric.overflow": True}, 2)], key=str)


class _NoMeters(otel_metrics.NoOpMeterProvider):
    """A provider that fails the test if anything asks it for a meter."""

    def get_meter(self, *args: Any, **kwargs: Any) -> otel_metrics.Meter:
        raise AssertionError(f"a meter was asked for with metrics off: {args}")


def test_with_metrics_off_no_instrument_is_made_or_called(monkeypatch) -> None:
    """The default, and the bench's: the command path pays one attribute test, not an instrument."""
    from services.command.bootstrap import bootstrap as command_bootstrap
    from services.replay.bootstrap import bootstrap as replay_bootstrap

    monkeypatch.setattr(otel_metrics._internal, "_METER_PROVIDER", _NoMeters())
    monkeypatch.setattr(metrics.RpcInstruments, "called", _never)
    with metrics.metrics_to(None):
        assert not metrics.metrics_on() and metrics.rpc is None and metrics.meter("famiglia.command") is None
        _served_calls()
        store, settings = InMemoryEventStore(), Settings(secret="metrics-off")
        assert command_bootstrap(store=store, settings=settings).metrics is None
        assert replay_bootstrap(store=store, settings=settings, use_archive=False).metrics is None


def test_the_projections_lag_monitor_makes_no_instrument_with_metrics_off(monkeypatch) -> None:
    """It asked OpenTelemetry's global provider for its meter: with metrics off, no-op
    instruments, each batch of events projected still paying a call and an attributes dict."""
    from services.projection.lag import LagMonitor

    monkeypatch.setattr(otel_metrics._internal, "_METER_PROVIDER", _NoMeters())
    with metrics.metrics_to(None):
        LagMonitor(store=None, engine=None).projected(0, 3)  # type: ignore[arg-type]
    with recorded() as seen:  # on: the service's meter, as every service's instruments
        LagMonitor(store=None, engine=None).projected(0, 3)  # type: ignore[arg-type]
    assert seen.value("famiglia.projection.events") == 3


def _never(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("an instrument was called with metrics off")


def test_no_exporter_leaves_metrics_off(monkeypatch) -> None:
    for variable in ("OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(metrics, "_made", None)
    with metrics.metrics_to(None):
        metrics.configure_metrics("command")
        assert not metrics.metrics_on() and metrics.rpc is None
        monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317")
        metrics.configure_metrics("command")
        assert not metrics.metrics_on()


_FORKED = r'''
import json, os, threading
os.environ["OTEL_METRICS_EXPORTER"] = "console"
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
from famiglia.telemetry import metrics

exported = []


class Recording(MetricExporter):
    def export(self, metrics_data, timeout_millis=10_000, **kwargs):
        for resource in metrics_data.resource_metrics:
            calls = sum(point.value for scope in resource.scope_metrics for metric in scope.metrics
                        if metric.name == "famiglia.rpc.calls" for point in metric.data.data_points)
            exported.append([os.getpid(), resource.resource.attributes["service.instance.id"], calls])
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis=10_000):
        return True

    def shutdown(self, timeout_millis=30_000, **kwargs):
        pass


metrics._exporters = lambda named: [Recording()]
metrics.configure_metrics("bots-worker", interval_ms=3_600_000)
metrics.rpc.called("S", "M", "OK", "", None)
inherited = metrics._provider
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    metrics.rpc.called("S", "M", "OK", "", None)
    metrics.rpc.called("S", "M", "OK", "", None)
    inherited.force_flush()  # what the parent's reader would export from the child
    metrics._provider.force_flush()
    readers = [t.name for t in threading.enumerate() if t.name == "OtelPeriodicExportingMetricReader"]
    os.write(write, json.dumps({"pid": os.getpid(), "exported": exported, "readers": len(readers)}).encode())
    os._exit(0)
os.close(write)
got = json.loads(os.read(read, 65536))
os.waitpid(pid, 0)
print(json.dumps(dict(got, host=__import__("socket").gethostname())))
'''


def test_a_forked_process_exports_its_own_counts_alone_from_one_thread() -> None:
    """The SDK restarts an inherited provider's exporting thread in a forked child and names it
    anew (a random `service.instance.id`): each bots worker exported its parent's counts again,
    as a series of its own, from a second thread, beside the provider of its own."""
    import json
    import os
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", _FORKED], capture_output=True, text=True, timeout=120, cwd=root,
                          env=dict(os.environ, PYTHONPATH=f"{root / 'libs'}{os.pathsep}{root}"))
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["exported"] == [[got["pid"], f"{got['host']}:{got['pid']}", 2]]  # the child's two calls alone
    assert got["readers"] == 1


def test_a_forked_worker_exports_its_last_interval_before_it_leaves(monkeypatch) -> None:
    """A solo bots worker leaves by `os._exit`, which runs no atexit hook: the meter provider's
    last export (what was counted since the one before, up to 10 s of decisions) never ran."""

    from services.bots import worker

    class _Left(Exception):
        pass

    def leave(code: int) -> None:
        raise _Left(code)

    def play(*args: Any, **kwargs: Any) -> None:
        assert metrics.rpc is not None
        metrics.rpc.called(SERVICE, "ListGames", "OK", "", None)  # counted after the last export
        raise SystemExit(0)  # Celery's warm shutdown

    monkeypatch.setattr(worker.os, "fork", lambda: 0)
    monkeypatch.setattr(worker.os, "_exit", leave)
    monkeypatch.setattr(worker, "_run_celery", play)
    monkeypatch.setattr(worker.signal, "signal", lambda *args: None)
    with _exporting_hourly() as exported:
        with pytest.raises(_Left):
            worker._fork_solo(type("App", (), {"bots": worker.BotsSettings()})(), 0, [])
    assert exported == [1]  # the worker's last count, exported as it left


def test_a_prefork_pool_process_exports_its_last_interval_before_it_leaves() -> None:
    """Billiard's pool processes leave by `os._exit` too: Celery tells them first."""
    from celery import signals

    import services.bots.entrypoints.celery_app  # noqa: F401 - connects its signal handlers

    with _exporting_hourly() as exported:
        assert metrics.rpc is not None
        metrics.rpc.called(SERVICE, "ListGames", "OK", "", None)
        signals.worker_process_shutdown.send(sender="bots@test", pid=1, exitcode=0)
    assert exported == [1]


@contextmanager
def _exporting_hourly() -> Iterator[list[int]]:
    """Metrics on for the block, exported once an hour (so only by a shutdown): yields the
    `famiglia.rpc.calls` total of each export."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        MetricExporter,
        MetricExportResult,
        PeriodicExportingMetricReader,
    )

    exported: list[int] = []

    class Recording(MetricExporter):
        def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
            exported.append(sum(point.value for resource in metrics_data.resource_metrics
                                for scope in resource.scope_metrics for metric in scope.metrics
                                if metric.name == "famiglia.rpc.calls" for point in metric.data.data_points))
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
            pass

    provider = MeterProvider(metric_readers=[PeriodicExportingMetricReader(Recording(), 3_600_000)])
    try:
        with metrics.metrics_to(provider):
            yield exported
    finally:
        during = len(exported)
        if not during:
            provider.shutdown()  # its thread stopped; what it exports now is not the block's
        del exported[during:]


class _Refused(Exception):
    pass


class _Context:
    """A streaming call's context for `_gated` alone: aborting raises, as gRPC's does."""

    def is_active(self) -> bool:
        return True

    def abort_with_status(self, status: Any) -> None:
        raise _Refused(status.code)


def test_calls_refused_before_their_handler_runs_are_counted_too() -> None:
    """A request that does not parse (`undecodable_request`), a stream past the server's limit
    (`too_many_streams`) and one opened as the server stops (`server_stopping`) are answered
    before `@rpc` runs, which counted every other call: an alert on refusals missed them all."""
    from famiglia.grpcutil import server

    def follow(request: Any, context: Any) -> Iterator[str]:
        yield "event"

    follow.__name__ = "StreamEvents"
    with recorded() as seen:
        built, port = build_server("127.0.0.1:0", [(pb_grpc.add_GameServiceServicer_to_server, _Game(), SERVICE)],
                                   workers=4)
        built.start()
        try:
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                raw = channel.unary_unary(f"/{SERVICE}/GetView", request_serializer=None,
                                          response_deserializer=None)
                with pytest.raises(grpc.RpcError) as refused:
                    raw(b"\x0a\x05\xff\xfe\xfd\xfc\xfb", timeout=10)  # match_id: not UTF-8
                assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        finally:
            built.stop(grace=None)
        full = server._StreamGate(1)
        assert full.enter()
        with pytest.raises(_Refused):
            next(iter(server._gated(follow, full, None, SERVICE)(None, _Context())))
        stopping = server._StreamGate(4)
        stopping.closing.set()
        with pytest.raises(_Refused):
            next(iter(server._gated(follow, stopping, None, SERVICE)(None, _Context())))

    def calls(method: str, status: str, code: str) -> Any:
        return seen.value("famiglia.rpc.calls", **{"rpc.service": SERVICE, "rpc.method": method,
                                                   "status": status, "code": code})

    assert calls("GetView", "INVALID_ARGUMENT", "undecodable_request") == 1
    assert calls("StreamEvents", "RESOURCE_EXHAUSTED", "too_many_streams") == 1
    assert calls("StreamEvents", "UNAVAILABLE", "server_stopping") == 1


_KINDS = {"create_counter": "counter", "create_observable_counter": "counter", "create_histogram": "histogram",
          "create_gauge": "gauge", "create_observable_gauge": "gauge (observable)"}


class _Noting:
    """A meter that notes each instrument made on it: (kind, unit) by name."""

    def __init__(self, meter: Any, made: dict[str, tuple[str, str]]) -> None:
        self._meter, self._made = meter, made

    def __getattr__(self, name: str) -> Any:
        create = getattr(self._meter, name)
        kind = _KINDS.get(name)
        if kind is None:
            return create

        def noted(instrument: str, *args: Any, unit: str = "", **kwargs: Any) -> Any:
            assert instrument not in self._made, f"{instrument} made twice"
            self._made[instrument] = (kind, unit)
            return create(instrument, *args, unit=unit, **kwargs)

        return noted


def test_the_metrics_reference_lists_exactly_the_instruments_the_services_make() -> None:
    """docs/metrics.md is what an operator builds dashboards from: each row's name, kind, unit
    and (for a count) attributes, as the code makes them, and no instrument left out."""
    from pathlib import Path

    from opentelemetry.sdk.metrics import MeterProvider

    from services.bots.metrics import BotsMetrics
    from services.command.metrics import CommandMetrics
    from services.matchmaking.metrics import MatchmakingMetrics
    from services.projection.lag import LagMonitor
    from services.replay.metrics import ReplayMetrics

    made: dict[str, tuple[str, str]] = {}
    meter = _Noting(MeterProvider().get_meter("famiglia.test"), made)
    metrics.RpcInstruments(meter)  # type: ignore[arg-type]
    CommandMetrics(meter, matches=None)  # type: ignore[arg-type]
    MatchmakingMetrics(meter, store=None, games=["highcard"])  # type: ignore[arg-type]
    ReplayMetrics(meter)  # type: ignore[arg-type]
    BotsMetrics(meter).watch_backlog(dict)  # type: ignore[arg-type]
    LagMonitor(store=None, engine=None, meter=meter)  # type: ignore[arg-type]
    counted = {name: ", ".join(f"`{key}`" for key in found.keys)
               for name, found in metrics._tallies[meter].items()}  # type: ignore[index]

    documented: dict[str, tuple[str, str]] = {}
    for line in (Path(__file__).resolve().parents[3] / "docs" / "metrics.md").read_text().splitlines():
        if line.startswith("| `famiglia."):
            name, kind, unit, attributes = (cell.strip() for cell in line.split("|")[1:5])
            documented[name.strip("`")] = (kind, unit.strip("`"))
            if name.strip("`") in counted:
                assert attributes == counted[name.strip("`")], name
    assert documented == made
