"""The `rpc` wrapper: each call under its own server span, the caller's context restored
after it, errors mapped to statuses; the same whether the span is recorded or not."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from famiglia import telemetry
from famiglia.grpcutil.errors import FailedPrecondition
from famiglia.grpcutil.server import rpc
from tests.support.grpc_calls import Aborted, FakeCall

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class _Service:
    def __init__(self) -> None:
        self.spans: list[trace.Span] = []
        self.recording: list[bool] = []

    @rpc
    def Ok(self, request: Any, context: Any) -> str:
        self.spans.append(trace.get_current_span())
        self.recording.append(self.spans[-1].is_recording())
        return f"reply to {request}"

    @rpc
    def Refused(self, request: Any, context: Any) -> None:
        raise FailedPrecondition("match_over", "the match is over")

    @rpc
    def Broken(self, request: Any, context: Any) -> None:
        raise RuntimeError("boom")


@pytest.mark.parametrize("exported", [False, True])
def test_each_call_has_its_span_and_leaves_the_context_as_it_found_it(monkeypatch, exported: bool) -> None:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    if exported:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)  # the global provider, for this test
    monkeypatch.setattr(telemetry, "_tracers", {})
    service, before = _Service(), otel_context.get_current()

    assert service.Ok("a", FakeCall(("authorization", "Bearer x"))) == "reply to a"
    assert service.Ok("b", FakeCall(("traceparent", PARENT))) == "reply to b"
    assert otel_context.get_current() is before
    root, child = (span.get_span_context() for span in service.spans)
    assert root.is_valid and child.is_valid and root.trace_id != child.trace_id
    assert f"{child.trace_id:032x}" == PARENT[3:35] and child.span_id != int(PARENT[36:52], 16)
    assert service.recording == [exported, exported]

    refused = FakeCall()
    with pytest.raises(Aborted):
        service.Refused(None, refused)
    assert refused.status.code == grpc.StatusCode.FAILED_PRECONDITION
    broken = FakeCall()
    with pytest.raises(Aborted):
        service.Broken(None, broken)
    assert broken.status == (grpc.StatusCode.INTERNAL, "internal error in Broken")
    assert otel_context.get_current() is before
    assert [s.name for s in exporter.get_finished_spans()] == (["Ok", "Ok", "Refused", "Broken"] if exported else [])


def test_a_clients_mistake_is_not_an_error_span_but_a_servers_failure_is(monkeypatch) -> None:
    """OpenTelemetry's gRPC conventions: a server span is an error for the server's own
    failures (INTERNAL), not for a refusal the client caused (FAILED_PRECONDITION with its rule
    code): those would fill the error view of every trace backend with exception events and
    stack traces of ordinary play."""
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    monkeypatch.setattr(telemetry, "_tracers", {})
    service = _Service()
    for method in (service.Refused, service.Broken):
        with pytest.raises(Aborted):
            method(None, FakeCall())
    refused, broken = exporter.get_finished_spans()
    assert refused.attributes["famiglia.code"] == "match_over"
    assert refused.status.status_code is not trace.StatusCode.ERROR
    assert not [e for e in refused.events if e.name == "exception"]
    assert broken.status.status_code is trace.StatusCode.ERROR
    assert [e.attributes["exception.type"] for e in broken.events if e.name == "exception"] == ["RuntimeError"]


class _Gone(FakeCall):
    """A call whose client has already left (cancelled, its deadline passed, its network gone)."""

    def is_active(self) -> bool:
        return False


class _Open(FakeCall):
    def is_active(self) -> bool:
        return True


class _Streams:
    @rpc
    def FailsLate(self, request: Any, context: Any):  # type: ignore[no-untyped-def]
        yield "first"
        raise RuntimeError("boom after the first reply")

    @rpc
    def StoreAway(self, request: Any, context: Any):  # type: ignore[no-untyped-def]
        import redis

        yield "first"
        raise redis.ConnectionError("Connection closed by server.")


def test_a_stream_that_fails_after_its_client_left_still_leaves_its_line_and_error_span(monkeypatch) -> None:
    """Nothing can be answered to a client that has gone, but the failure is still the server's
    own: an operator must find its `rpc_failed` line (with the traceback) and its error span.
    The wrapper used to swallow any exception of a stream whose client had left, silently."""
    import structlog

    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    monkeypatch.setattr(telemetry, "_tracers", {})
    gone = _Gone()
    with structlog.testing.capture_logs() as captured:
        replies = _Streams().FailsLate(None, gone)
        assert next(replies) == "first"
        assert list(replies) == []  # nothing to abort: the client is gone
    assert gone.status is None
    assert [c["rpc"] for c in captured if c["event"] == "rpc_failed"] == ["FailsLate"]
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is trace.StatusCode.ERROR
    assert [e.attributes["exception.type"] for e in span.events if e.name == "exception"] == ["RuntimeError"]


def test_a_store_gone_away_under_a_stream_is_unavailable_not_internal() -> None:
    """Redis restarting under an open stream (StreamEvents' XREAD BLOCK, WatchTicket's poll)
    ended it with INTERNAL, a status that says "our bug" and that clients do not retry, and a
    full traceback a stream. It is UNAVAILABLE (`store_unavailable`): reconnect, from the
    version the client has, and one warning line."""
    import structlog

    open_call = _Open()
    with structlog.testing.capture_logs() as captured, pytest.raises(Aborted):
        replies = _Streams().StoreAway(None, open_call)
        assert next(replies) == "first"
        next(replies)
    assert open_call.status.code == grpc.StatusCode.UNAVAILABLE
    assert ("famiglia-code", "store_unavailable") in open_call.status.trailing_metadata
    assert [c["event"] for c in captured] == ["store_unavailable"]
    assert captured[0]["log_level"] == "warning" and captured[0]["rpc"] == "StoreAway"


class _Unary:
    @rpc
    def StoreAway(self, request: Any, context: Any) -> Any:
        import redis

        raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:6390. Connection refused.")


def test_a_store_gone_away_under_a_unary_call_is_unavailable_not_internal() -> None:
    """The same for a unary call (a SubmitCommand while Redis restarts): INTERNAL with a
    traceback said "our bug", which a client does not retry; UNAVAILABLE store_unavailable is
    the status to retry on, with one warning line."""
    import structlog

    call = FakeCall()
    with structlog.testing.capture_logs() as captured, pytest.raises(Aborted):
        _Unary().StoreAway(None, call)
    assert call.status.code == grpc.StatusCode.UNAVAILABLE
    assert ("famiglia-code", "store_unavailable") in call.status.trailing_metadata
    assert [c["event"] for c in captured] == ["store_unavailable"]


def test_a_stream_leaves_debug_lines_when_it_opens_and_closes_saying_how_it_ended() -> None:
    """An operator chasing one client's dropped stream had no line of it at all (only refusals
    and failures are logged): at debug, each stream says when it opened, and when it closed how
    (whole, its client gone, its server stopping), after how many replies and seconds."""
    import structlog

    from famiglia.grpcutil import server

    def follow(request: Any, context: Any):  # type: ignore[no-untyped-def]
        while context.is_active():
            yield "event"

    def two(request: Any, context: Any):  # type: ignore[no-untyped-def]
        yield from ("a", "b")

    gate = server._StreamGate(4)
    with structlog.testing.capture_logs() as captured:
        assert list(server._gated(two, gate, None)(None, _Open())) == ["a", "b"]
        left = server._gated(follow, gate, None)(None, _Open())
        assert next(left) == "event"
        left.close()  # gRPC drops a stream whose client is gone
        stopping = server._gated(follow, gate, None)(None, _Open())
        assert next(stopping) == "event"
        gate.closing.set()
        with pytest.raises(Aborted):
            next(stopping)
    closed = [(c["rpc"], c["ended"], c["replies"]) for c in captured if c["event"] == "stream_closed"]
    assert closed == [("two", "done", 2), ("follow", "client_left", 1), ("follow", "server_stopping", 1)]
    assert [c["event"] for c in captured].count("stream_opened") == 3
    assert all(c["log_level"] == "debug" for c in captured if c["event"].startswith("stream_"))


def test_the_stopping_server_passes_every_server_method_on_to_grpcs() -> None:
    """build_server's server wraps gRPC's to tell its streams when it stops. grpc.Server's own
    `wait_for_termination` (raise NotImplementedError) and `add_registered_method_handlers` (do
    nothing) are defined on the base class, so a `__getattr__` never reached them: a caller
    waiting for termination crashed, and a servicer added later (generated code calls
    add_registered_method_handlers) quietly lost its registered handlers."""
    from famiglia.grpcutil import server

    built, port = server.build_server("127.0.0.1:0", [], workers=4)
    assert port > 0 and isinstance(built, grpc.Server)
    seen: list[str] = []
    built._server.add_registered_method_handlers = lambda name, handlers: seen.append(name)  # type: ignore[attr-defined]
    built.add_registered_method_handlers("famiglia.v1.Test", {})
    assert seen == ["famiglia.v1.Test"]
    built.start()
    try:
        assert built.wait_for_termination(timeout=0.01) is True  # still serving: the wait timed out
    finally:
        built.stop(grace=0).wait()
    assert built.wait_for_termination(timeout=1) is False
