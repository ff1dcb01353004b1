"""Metrics of every service: each served call counted by its status and famiglia code, and
timed; with no exporter (the default, and the bench), no instrument made or called at all."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
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
