"""Build a gRPC server the way every famiglia service runs one: a thread pool,
server reflection, the standard health service, tracing and error mapping."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from concurrent import futures
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Status, StatusCode

from famiglia.telemetry import extract_context, get_logger, server_span

from .errors import AppError, to_status

log = get_logger("famiglia.grpc")


def bearer_token(context: grpc.ServicerContext) -> str | None:
    """The token of `authorization: Bearer <token>` metadata, or None."""
    for key, value in context.invocation_metadata() or ():
        if key.lower() == "authorization":
            text = value if isinstance(value, str) else value.decode()
            scheme, _, token = text.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return ""  # present but malformed: the handler refuses it
    return None


_fields: frozenset[str] | None = None


def _propagation_fields() -> frozenset[str]:
    """Metadata keys the global propagator reads (traceparent, tracestate, baggage)."""
    global _fields
    if _fields is None:
        _fields = frozenset(f.lower() for f in propagate.get_global_textmap().fields)
    return _fields


def _carrier(context: grpc.ServicerContext) -> dict[str, str] | None:
    """The trace carrier of a call, or None when the client sent no trace context
    (then there is nothing to extract or attach: most calls skip that work)."""
    fields = _propagation_fields()
    carrier = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
    return carrier if not fields.isdisjoint(carrier) else None


def _parent(context: grpc.ServicerContext) -> otel_context.Context | None:
    """The caller's trace context, or None when it sent none (the current context then)."""
    carrier = _carrier(context)
    return None if carrier is None else extract_context(carrier)


def rpc(method: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a servicer method: a server span continuing the client's trace,
    AppError -> status with code, any other exception -> INTERNAL (logged)."""
    name = method.__name__
    streaming = inspect.isgeneratorfunction(method)

    def _fail(context: grpc.ServicerContext, span: trace.Span, exc: BaseException) -> None:
        if isinstance(exc, AppError):
            span.set_attribute("famiglia.code", exc.code)
            context.abort_with_status(to_status(exc))
        span.set_status(Status(StatusCode.ERROR, str(exc)))
        log.exception("rpc_failed", rpc=name)
        context.abort(grpc.StatusCode.INTERNAL, f"internal error in {name}")

    if streaming:

        @functools.wraps(method)
        def stream_wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Iterable[Any]:
            with server_span(name, _parent(context)) as span:
                try:
                    yield from method(self, request, context)
                except AppError as exc:
                    _fail(context, span, exc)
                except Exception as exc:  # noqa: BLE001
                    if context.is_active():
                        _fail(context, span, exc)

        return stream_wrapper

    @functools.wraps(method)
    def unary_wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        with server_span(name, _parent(context)) as span:
            try:
                return method(self, request, context)
            except Exception as exc:  # noqa: BLE001
                _fail(context, span, exc)

    return unary_wrapper


def build_server(
    address: str,
    register: Iterable[tuple[Callable[[Any, grpc.Server], None], Any, str]],
    *,
    workers: int = 64,
) -> tuple[grpc.Server, int]:
    """A started-ready server with reflection and health; returns (server, bound port).

    `register` holds (add_XServicer_to_server, servicer, full service name) triples.
    """
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="grpc"),
        options=[
            ("grpc.max_receive_message_length", 8 * 1024 * 1024),
            ("grpc.so_reuseport", 0),
        ],
    )
    names = [reflection.SERVICE_NAME, health.SERVICE_NAME]
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for add, servicer, service_name in register:
        add(servicer, server)
        names.append(service_name)
        health_servicer.set(service_name, health_pb2.HealthCheckResponse.SERVING)
    health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    reflection.enable_server_reflection(names, server)
    port = server.add_insecure_port(address)
    if port == 0:
        raise RuntimeError(f"cannot bind {address}")
    return server, port
