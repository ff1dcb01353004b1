"""Build a gRPC server the way every famiglia service runs one: a thread pool,
server reflection, the standard health service, tracing and error mapping."""

from __future__ import annotations

import functools
import inspect
import sys
import threading
import time
import types
from collections.abc import Callable, Iterable, Sequence
from concurrent import futures
from typing import Any

import grpc
from google.protobuf import descriptor_pool
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Status, StatusCode

from famiglia.telemetry import close_server_span, extract_context, get_logger, open_server_span, server_span
from famiglia.telemetry import metrics as _metrics

from .errors import AppError, InvalidArgument, ResourceExhausted, Unavailable, to_status, unavailable
from .readiness import CHECK_EVERY_S, LIVENESS, Dependency, Readiness
from .tls import Transport
from .watchdog import RUNNING, Running, Watchdog

log = get_logger("famiglia.grpc")

#: Seconds a connection with calls open may stay quiet before the server pings it, and seconds
#: it then waits for the answer before it closes the connection (and ends its calls).
KEEPALIVE_S = 60.0
KEEPALIVE_TIMEOUT_S = 20.0
#: The shortest quiet spell after which a client may ping (the SDK's keepalive, every minute):
#: gRPC's default, five minutes, answers a third earlier ping with GOAWAY `too_many_pings`,
#: breaking the streams a phone keeps open.
CLIENT_PING_MIN_S = 30.0


def bearer_token(context: grpc.ServicerContext) -> str | None:
    """The token of `authorization: Bearer <token>` metadata, or None."""
    for key, value in context.invocation_metadata() or ():
        if key == "authorization" or key.lower() == "authorization":  # gRPC hands keys in lower case
            text = value if isinstance(value, str) else value.decode()
            if text.startswith("Bearer "):  # what every client sends: the partition below, at once
                return text[7:].strip()
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
    fields = _fields if _fields is not None else _propagation_fields()
    metadata = context.invocation_metadata() or ()
    for key, _value in metadata:
        if key in fields:
            return {k: v for k, v in metadata if isinstance(v, str)}
    return None


def _parent(context: grpc.ServicerContext) -> otel_context.Context | None:
    """The caller's trace context, or None when it sent none (the current context then)."""
    carrier = _carrier(context)
    return None if carrier is None else extract_context(carrier)


#: Request fields a refusal's or failure's log line names, when the request has them.
_ID_FIELDS = ("match_id", "command_id", "ticket_id", "tournament_id", "event_id")


def _request_ids(request: Any) -> dict[str, Any]:
    """The ids of a request an operator looks a line up by (those it has and set)."""
    out: dict[str, Any] = {}
    fields = getattr(getattr(request, "DESCRIPTOR", None), "fields_by_name", {})
    for key in _ID_FIELDS:
        if key in fields:
            value = getattr(request, key)
            if value:
                out[key] = value[:200] if isinstance(value, str) else value
    return out


def _name_ids(span: trace.Span, request: Any) -> None:
    """A recorded server span names the match (ticket, tournament...) its request is about."""
    for key, value in _request_ids(request).items():
        span.set_attribute(f"famiglia.{key}", value)


_OK = ("OK", "")
_INTERNAL = ("INTERNAL", "")
_CANCELLED = ("CANCELLED", "")
_STORE_AWAY = ("UNAVAILABLE", "store_unavailable")
_STOPPED = ("UNAVAILABLE", "server_stopping")  # a stream `_gated` cuts short as the server stops


def _outcome(exc: BaseException) -> tuple[str, str]:
    """(status name, famiglia code) a call ending in `exc` is answered with (`_fail`)."""
    if isinstance(exc, AppError):
        return exc.status.name, exc.code
    return _STORE_AWAY if unavailable(exc) is not None else _INTERNAL


_service_names: dict[type, str] = {}


def _service_name(servicer: type) -> str:
    """The full gRPC service name a servicer class serves (`famiglia.v1.GameService`), from the
    generated base class it extends; its own class name when it extends none."""
    found = _service_names.get(servicer)
    if found is not None:
        return found
    found = servicer.__name__
    for base in servicer.__mro__:
        if base.__module__.endswith("_pb2_grpc") and base.__name__.endswith("Servicer"):
            short = base.__name__[:-len("Servicer")]
            file = getattr(sys.modules.get(base.__module__[:-len("_grpc")]), "DESCRIPTOR", None)
            service = file.services_by_name.get(short) if file is not None else None
            found = service.full_name if service is not None else short
            break
    _service_names[servicer] = found
    return found


def rpc(method: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a servicer method: a server span continuing the client's trace,
    AppError -> status with code, Redis or the SQL database away -> UNAVAILABLE `store_unavailable`
    (`errors.unavailable`), any other exception -> INTERNAL (logged). With metrics on
    (`famiglia.telemetry.metrics`), each call counted by its status and code, and a unary
    call's time measured; off, one test of a module attribute a call."""
    name = method.__name__
    streaming = inspect.isgeneratorfunction(method)
    running, get_ident, monotonic = RUNNING, threading.get_ident, time.monotonic

    def _fail(context: grpc.ServicerContext, span: trace.Span, exc: BaseException, request: Any = None,
              answer: bool = True) -> None:
        """Log, trace and answer a call's exception; `answer=False`: its client is gone, so
        only log and trace it (a failure is the server's own whoever is left to hear of it)."""
        ids = _request_ids(request)
        if isinstance(exc, AppError):
            span.set_attribute("famiglia.code", exc.code)
            if exc.seat is not None:
                ids["seat"] = exc.seat
            if not exc.logged:
                log.info("rpc_refused", rpc=name, status=exc.status.name, code=exc.code,
                         reason=exc.message[:300], **ids)
            if answer:
                context.abort_with_status(to_status(exc))
            return
        # The server's own failure: an error span with its exception (a refusal above is neither).
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:300]))
        away = unavailable(exc)
        if away is not None:  # Redis or the database restarting or away: retry (a stream, from the version it has)
            log.warning("store_unavailable", rpc=name, error=f"{type(exc).__name__}: {exc}"[:300], **ids)
            if answer:
                context.abort_with_status(to_status(away))
            return
        log.exception("rpc_failed", rpc=name, **ids)
        if answer:
            context.abort(grpc.StatusCode.INTERNAL, f"internal error in {name}")

    if streaming:

        @functools.wraps(method)
        def stream_wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Iterable[Any]:
            measured = _metrics.rpc
            outcome = _OK
            try:
                with server_span(name, _parent(context)) as span:
                    if span.is_recording():
                        _name_ids(span, request)
                    try:
                        yield from method(self, request, context)
                    except Exception as exc:  # noqa: BLE001
                        outcome = _outcome(exc)
                        # A client that has left hears nothing, but the failure is still logged and traced.
                        _fail(context, span, exc, request, answer=isinstance(exc, AppError) or context.is_active())
                    if measured is not None and outcome is _OK:  # how it ended: as `_gated` answers it
                        active = context.is_active()
                        if getattr(context, "stopped", False):
                            outcome = _STOPPED
                        elif not active:
                            outcome = _CANCELLED
            except GeneratorExit:  # gRPC dropped it between replies: its client is gone
                outcome = _CANCELLED
                raise
            finally:
                # Counted at its end; no duration: a follower's lasts as long as its client stays.
                if measured is not None:
                    measured.called(_service_name(type(self)), name, *outcome, None)

        return stream_wrapper

    def measured_unary(self: Any, request: Any, context: grpc.ServicerContext,
                       measured: _metrics.RpcInstruments) -> Any:
        """`unary_wrapper` with the call counted and timed (metrics on)."""
        began = time.perf_counter()
        outcome = _OK
        parent = _parent(context)
        opened = open_server_span(name, parent)
        try:
            if opened is None:  # a recorded span (or another OpenTelemetry layout)
                with server_span(name, parent) as span:
                    if span.is_recording():
                        _name_ids(span, request)
                    try:
                        return method(self, request, context)
                    except Exception as exc:  # noqa: BLE001
                        outcome = _outcome(exc)
                        _fail(context, span, exc, request)
                return None
            span, token = opened
            try:
                return method(self, request, context)
            except Exception as exc:  # noqa: BLE001
                outcome = _outcome(exc)
                _fail(context, span, exc, request)
            finally:
                close_server_span(token)
            return None
        finally:
            measured.called(_service_name(type(self)), name, *outcome, began)

    @functools.wraps(method)
    def unwatched(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        """The call measured and traced, without the watchdog's slot: what a server that runs no
        watchdog serves (`_unwatched_on`)."""
        measured = _metrics.rpc
        if measured is not None:
            return measured_unary(self, request, context, measured)
        parent = _parent(context)
        opened = open_server_span(name, parent)
        if opened is None:  # a recorded span (or another OpenTelemetry layout)
            with server_span(name, parent) as span:
                if span.is_recording():
                    _name_ids(span, request)
                try:
                    return method(self, request, context)
                except Exception as exc:  # noqa: BLE001
                    _fail(context, span, exc, request)
            return None
        span, token = opened  # the usual case, without a context manager object
        try:
            return method(self, request, context)
        except Exception as exc:  # noqa: BLE001
            _fail(context, span, exc, request)
        finally:
            close_server_span(token)
        return None

    @functools.wraps(method)
    def unary_wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        ident = get_ident()
        running[ident] = (monotonic(), self, name, request, context)  # a `Running`, for the watchdog
        try:
            return unwatched(self, request, context)
        finally:
            running[ident] = None

    unary_wrapper.unwatched = unwatched  # type: ignore[attr-defined]
    return unary_wrapper


def _unwatched_on(servicer: Any, service_name: str) -> Any:
    """The servicer's `@rpc` unary methods (by the service's descriptor) as they run where no
    watchdog reads their slots (`rpc`'s `unwatched`); returns the servicer."""
    service = descriptor_pool.Default().FindServiceByName(service_name)
    for method in service.methods:
        if not (method.server_streaming or method.client_streaming):
            unwatched = getattr(getattr(type(servicer), method.name, None), "unwatched", None)
            if unwatched is not None:
                setattr(servicer, method.name, types.MethodType(unwatched, servicer))
    return servicer


#: The largest request a server receives, unless its service says otherwise: gRPC refuses one
#: past it RESOURCE_EXHAUSTED before any handler (no code). The replay service's imports take
#: more (`famiglia.replay.export.MESSAGE_MAX_BYTES`).
MAX_RECEIVE_BYTES = 8 * 1024 * 1024


def build_server(
    address: str,
    register: Iterable[tuple[Callable[[Any, grpc.Server], None], Any, str]],
    *,
    workers: int = 64,
    call_workers: int | None = None,
    keepalive_s: float = KEEPALIVE_S,
    dependencies: Sequence[Dependency] = (),
    check_every: float = CHECK_EVERY_S,
    transport: Transport | None = None,
    stuck_call_s: float | None = None,
    describe_call: Callable[[Running], dict[str, Any]] | None = None,
    on_stuck: Callable[[int, Running], bool | None] | None = None,
    on_stuck_ended: Callable[[int, Running], None] | None = None,
    max_receive_bytes: int = MAX_RECEIVE_BYTES,
) -> tuple[grpc.Server, int]:
    """A started-ready server with reflection and health; returns (server, bound port).

    `register` holds (add_XServicer_to_server, servicer, full service name) triples.
    Every call runs on one pool of `workers` threads, unless `call_workers` is set: then
    unary calls run on a pool of that many threads and streaming calls (each holds its
    thread for as long as its client stays) on their own pool of `workers`. A few threads
    for unary calls keep a busy single-process server from handing the GIL around dozens
    of threads that all want it at once; they must not block for long.

    Streams are admitted up to a limit (`workers` on their own pool; on a shared pool,
    what leaves a quarter of it to other calls), and one more is refused at once with
    RESOURCE_EXHAUSTED (`too_many_streams`): queued behind streams that may last for hours,
    it would wait without a word, and on a shared pool take every thread from short calls.

    A connection with calls open that has been quiet for `keepalive_s` is pinged, and closed
    when the ping goes unanswered (`KEEPALIVE_TIMEOUT_S`): a client whose network vanished
    (a phone off the network sends no FIN) then leaves its streams, and their slots, within
    about a minute and a half, rather than gRPC's default two hours.

    Health answers for the server ("") and each registered service: SERVING, or with
    `dependencies`, whether the last round of their checks (every `check_every` seconds
    once started; NOT_SERVING until the first) found them all (`readiness.Readiness`).
    `LIVENESS` answers SERVING until the server stops, whatever they say (unless a call is
    stuck, below).

    With `stuck_call_s`, a `watchdog.Watchdog` watches the unary calls (without, their `@rpc`
    wrappers write no slot for it): one that has run that
    long is stuck (`call_stuck`, its fields `_request_ids` and `describe_call`'s, counted in
    `famiglia.rpc.stuck`), and while one is, every name health answers for is NOT_SERVING,
    and `LIVENESS` too while the dependencies answer: a thread cannot be stopped, so the process
    must be restarted (a call held by a Redis that stopped answering is not, see `_Health`).
    `on_stuck(thread id, call)` runs as a call is found stuck (and again each round while it
    raises or returns False), and `on_stuck_ended` when one ends after all (the command service's
    quarantine), on a thread of the watchdog's apart from its verdicts: a hook held by a Redis
    that hangs holds neither health nor the next stuck call's line.

    With `transport.tls` the server serves TLS only (`famiglia.grpcutil.tls`); its
    `health_address` opens a second, plaintext port that serves the health service alone (the
    same answers): a Kubernetes gRPC probe cannot speak TLS, and no token travels on it.
    """
    register = list(register)  # read twice: the servicers, then the watchdog's
    streams = None
    if call_workers is not None:
        streams = futures.ThreadPoolExecutor(max_workers=workers + STREAM_SPARE, thread_name_prefix="grpc-stream")
        gate = _StreamGate(workers)
    else:
        gate = _StreamGate(max(1, workers - max(2, workers // 4)))
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=call_workers or workers, thread_name_prefix="grpc"),
        options=[
            ("grpc.max_receive_message_length", max_receive_bytes),
            ("grpc.so_reuseport", 0),
            ("grpc.keepalive_time_ms", int(keepalive_s * 1000)),
            ("grpc.keepalive_timeout_ms", int(min(KEEPALIVE_TIMEOUT_S, keepalive_s) * 1000)),
            # Any ping's wait for its answer (gRPC's default: a minute), which the keepalive's
            # timeout does not shorten in this gRPC.
            ("grpc.http2.ping_timeout_ms", int(min(KEEPALIVE_TIMEOUT_S, keepalive_s) * 1000)),
            ("grpc.http2.min_recv_ping_interval_without_data_ms", int(CLIENT_PING_MIN_S * 1000)),
        ],
    )
    names = [reflection.SERVICE_NAME, health.SERVICE_NAME]
    served = [""]  # health's names for the whole server and each service registered
    health_servicer = _streams_on(health.HealthServicer(), health.SERVICE_NAME, streams, gate)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for add, servicer, service_name in register:
        if stuck_call_s is None:  # nothing reads the calls' slots: none is written
            _unwatched_on(servicer, service_name)
        add(_streams_on(servicer, service_name, streams, gate), _Lenient(server))
        names.append(service_name)
        served.append(service_name)
    told = _Health(health_servicer, served, ready=not dependencies)
    readiness = None
    if dependencies:
        readiness = Readiness(dependencies, told.ready, every=check_every)
    watchdog = None
    if stuck_call_s is not None:
        watchdog = Watchdog(stuck_call_s, told.stuck, servicers=[servicer for _, servicer, _ in register],
                            describe=functools.partial(_described, describe_call), count=_count_stuck,
                            on_stuck=on_stuck, on_ended=on_stuck_ended)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(
        _streams_on(reflection.ReflectionServicer(names), reflection.SERVICE_NAME, streams, gate), server)
    transport = transport or Transport()
    if transport.tls is not None:
        credentials = transport.tls.credentials()
        port = _bind(lambda: server.add_secure_port(address, credentials), address)
    else:
        port = _bind(lambda: server.add_insecure_port(address), address)
    probes = _probe_server(health_servicer, transport.health_address) if transport.health_address else None
    return _Stopping(server, gate, health_servicer, readiness, probes, watchdog), port


def _probe_server(health_servicer: health.HealthServicer, address: str) -> grpc.Server:
    """A plaintext server of the health service alone, answering as `health_servicer` does."""
    probes = grpc.server(futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="grpc-probe"),
                         options=[("grpc.so_reuseport", 0)])
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, probes)
    _bind(lambda: probes.add_insecure_port(address), address, "FAMIGLIA_HEALTH_ADDR")
    return probes


class BindError(RuntimeError):
    """A server that cannot listen on its address: the port taken (a replica started twice on a
    host, an old process still there), a host not this machine's. `setting`: the variable that
    named the address, when the server knows it (the probes' port)."""

    def __init__(self, address: str, setting: str = "") -> None:
        super().__init__(f"cannot listen on {address}" + (f" ({setting})" if setting else ""))
        self.address = address
        self.setting = setting


def _bind(add: Callable[[], int], address: str, setting: str = "") -> int:
    """The port `add` bound; gRPC says it bound none by 0 or by a RuntimeError, as its version has it."""
    try:
        port = add()
    except RuntimeError:
        port = 0
    if port == 0:
        raise BindError(address, setting)
    return port


class _Health:
    """What health answers, from two sources on threads of their own: `names` are SERVING while
    the dependencies answer (`ready`, told by the `Readiness`) and no call is stuck (`stuck`,
    told by the `Watchdog`); `LIVENESS` unless a call is stuck while the dependencies answer. A
    Redis that stops answering holds every call that reads it past the bound too, and a restart
    would not bring it back: an outage of Redis restarts nothing, a stuck call once it is over."""

    def __init__(self, servicer: health.HealthServicer, names: Sequence[str], *, ready: bool) -> None:
        self._servicer = servicer
        self._names = tuple(names)
        self._ready = ready
        self._stuck = False
        self._lock = threading.Lock()  # the two sources' answers set together, never interleaved
        self._tell()

    def ready(self, ready: bool) -> None:
        with self._lock:
            self._ready = ready
            self._tell()

    def stuck(self, stuck: bool) -> None:
        with self._lock:
            self._stuck = stuck
            self._tell()

    def _tell(self) -> None:
        serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
        status = serving if self._ready and not self._stuck else not_serving
        for name in self._names:
            self._servicer.set(name, status)
        self._servicer.set(LIVENESS, not_serving if self._stuck and self._ready else serving)


def _described(describe: Callable[[Running], dict[str, Any]] | None, call: Running) -> dict[str, Any]:
    """A stuck call's fields: the ids its request names, and what its service adds (`describe`)."""
    fields = _request_ids(call.request)
    if describe is not None:
        fields.update(describe(call))
    return fields


def _count_stuck(call: Running) -> None:
    measured = _metrics.rpc
    if measured is not None:
        measured.stuck.add((_service_name(type(call.servicer)), call.rpc))


class _Stopping(grpc.Server):
    """The gRPC server, whose `stop` first tells its streams: a follower waits for events that
    will not come before the server is gone, so it would hold the shutdown for the whole grace
    and then be cut without a word of why. Told, each ends within its next poll with
    UNAVAILABLE (`server_stopping`), the status a client reconnects on (another replica, from
    the version it has), and health answers NOT_SERVING to whoever watches it. Its
    dependencies' checks (`readiness`) run from `start` to `stop`, and so do the plaintext
    port of probes (`probes`) and the stuck-call watchdog (`watchdog`), if any: the watchdog
    through the drain, and once it is over one last look (`Watchdog.finish`) before the event
    `stop` returns is set, so a stuck call that ended in the grace is told ended (the command
    service lifts what it set aside) before the service closes its stores."""

    def __init__(self, server: grpc.Server, gate: _StreamGate, health_servicer: health.HealthServicer,
                 readiness: Readiness | None = None, probes: grpc.Server | None = None,
                 watchdog: Watchdog | None = None) -> None:
        self._server = server
        self._gate = gate
        self._health = health_servicer
        self.readiness = readiness
        self._probes = probes
        self.watchdog = watchdog

    def stop(self, grace: float | None) -> threading.Event:
        self._gate.closing.set()
        self._health.enter_graceful_shutdown()
        stopped = self._server.stop(grace)
        if self._probes is not None:
            self._probes.stop(grace)
        if self.readiness is not None:
            self.readiness.stop()
        watchdog = self.watchdog
        if watchdog is None:
            return stopped
        finished = threading.Event()

        def finish() -> None:
            stopped.wait()
            try:
                watchdog.finish()
            finally:
                finished.set()

        threading.Thread(target=finish, name="stuck-calls-last-look", daemon=True).start()
        return finished

    def start(self) -> None:
        self._server.start()
        if self._probes is not None:
            self._probes.start()
        if self.readiness is not None:
            self.readiness.start()
        if self.watchdog is not None:
            self.watchdog.start()

    def add_generic_rpc_handlers(self, generic_rpc_handlers: Any) -> None:
        self._server.add_generic_rpc_handlers(generic_rpc_handlers)

    def add_insecure_port(self, address: str) -> int:
        return self._server.add_insecure_port(address)

    def add_secure_port(self, address: str, server_credentials: grpc.ServerCredentials) -> int:
        return self._server.add_secure_port(address, server_credentials)

    # grpc.Server defines these two on the base class (one raises NotImplementedError, the other
    # does nothing), so `__getattr__` would never reach the wrapped server's.
    def wait_for_termination(self, timeout: float | None = None) -> bool:
        return self._server.wait_for_termination(timeout)

    def add_registered_method_handlers(self, service_name: str, method_handlers: Any) -> None:
        self._server.add_registered_method_handlers(service_name, method_handlers)

    def __getattr__(self, name: str) -> Any:  # anything else the wrapped server has
        return getattr(self._server, name)


class _Undecodable:
    """What a request that does not parse is handed to its handler as (`_lenient`)."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


def _refused_before(service: str, method: str, refusal: AppError) -> AppError:
    """`refusal`, counted in `famiglia.rpc.calls` (metrics on): made before the call's `@rpc`
    wrapper runs, which counts every other answer."""
    measured = _metrics.rpc
    if measured is not None:
        measured.called(service, method, refusal.status.name, refusal.code, None)
    return refusal


def _lenient(handler: Any, service: str = "", method: str = "") -> Any:
    """`handler` (a grpc.RpcMethodHandler of one request) with a request that does not parse (a
    string that is not UTF-8, a field cut short) refused as INVALID_ARGUMENT
    `undecodable_request`: gRPC itself answers it INTERNAL "Exception deserializing request!",
    with no code, as if the server had failed. `service`, `method`: the call's, as counted."""
    if handler is None or handler.request_streaming or handler.request_deserializer is None:
        return handler
    parse = handler.request_deserializer
    descriptor = getattr(getattr(parse, "__self__", None), "DESCRIPTOR", None)  # Message.FromString's class
    shown = descriptor.full_name if descriptor is not None else "request"

    def deserialize(data: bytes) -> Any:
        try:
            return parse(data)
        except Exception as exc:  # noqa: BLE001 - DecodeError, or whatever a deserializer raises
            return _Undecodable(exc)

    field = "unary_stream" if handler.response_streaming else "unary_unary"
    behavior = getattr(handler, field)

    @functools.wraps(behavior)  # keeps experimental_thread_pool (a stream's own pool)
    def call(request: Any, context: grpc.ServicerContext) -> Any:
        if type(request) is _Undecodable:
            log.info("rpc_refused", rpc=getattr(behavior, "__name__", "?"), status="INVALID_ARGUMENT",
                     code="undecodable_request", reason=str(request.error)[:300])
            context.abort_with_status(to_status(_refused_before(service, method, InvalidArgument(
                "undecodable_request", f"the request is not a valid {shown}: {str(request.error)[:200]}"))))
        return behavior(request, context)

    return handler._replace(request_deserializer=deserialize, **{field: call})


class _Lenient:
    """The server as a generated `add_XServicer_to_server` sees it: what it registers goes to the
    server with every method handler `_lenient`."""

    def __init__(self, server: grpc.Server) -> None:
        self._server = server

    def add_registered_method_handlers(self, service_name: str, method_handlers: dict[str, Any]) -> None:
        self._server.add_registered_method_handlers(
            service_name, {method: _lenient(h, service_name, method) for method, h in method_handlers.items()})

    def add_generic_rpc_handlers(self, generic_rpc_handlers: Iterable[grpc.GenericRpcHandler]) -> None:
        self._server.add_generic_rpc_handlers(tuple(_LenientGeneric(h) for h in generic_rpc_handlers))


class _LenientGeneric(grpc.GenericRpcHandler):
    def __init__(self, handler: grpc.GenericRpcHandler) -> None:
        self._handler = handler
        self._made: dict[str, Any] = {}

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        method = handler_call_details.method
        made = self._made.get(method)
        if made is None:
            service, _, rpc_method = method.lstrip("/").partition("/")  # "/famiglia.v1.GameService/GetView"
            made = _lenient(self._handler.service(handler_call_details), service, rpc_method)
            if made is not None:
                self._made[method] = made
        return made


#: Threads a streams pool has beyond its limit of streams: one more stream is refused on them.
STREAM_SPARE = 4


class _StreamGate:
    """How many streaming calls a server follows at once, at most."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._free = threading.BoundedSemaphore(limit)
        self.closing = threading.Event()
        """Set when the server stops: its streams end (`_Followed`)."""

    def enter(self) -> bool:
        return self._free.acquire(blocking=False)

    def leave(self) -> None:
        self._free.release()


def _streams_on(servicer: Any, service_name: str, pool: futures.ThreadPoolExecutor | None,
                gate: _StreamGate) -> Any:
    """Route the servicer's streaming methods (by the service's descriptor) through `gate`,
    and to `pool` when there is one (gRPC's per-method `experimental_thread_pool`); returns
    the servicer."""
    service = descriptor_pool.Default().FindServiceByName(service_name)  # KeyError: protos not imported
    for method in service.methods:
        if method.server_streaming or method.client_streaming:
            handler = getattr(servicer, method.name)
            if getattr(handler, "experimental_non_blocking", False):
                continue  # it answers through a callback and holds no thread (health's Watch)
            setattr(servicer, method.name, _gated(handler, gate, pool, service_name))
    return servicer


_STOPPING = Unavailable("server_stopping", "this server is shutting down; reconnect (from the version you have)")


class _Followed:
    """A streaming call's context as its handler sees it: no longer active once the server
    stops (handlers poll `is_active` between waits and end), and remembering it ended so."""

    __slots__ = ("_context", "_closing", "stopped")

    def __init__(self, context: grpc.ServicerContext, closing: threading.Event) -> None:
        self._context = context
        self._closing = closing
        self.stopped = False

    def is_active(self) -> bool:
        if self._closing.is_set():
            self.stopped = True
            return False
        return self._context.is_active()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def _gated(handler: Callable[..., Any], gate: _StreamGate, pool: futures.ThreadPoolExecutor | None,
           service: str = "") -> Callable[..., Any]:
    name = getattr(handler, "__name__", "stream")

    @functools.wraps(handler)
    def call(request: Any, context: grpc.ServicerContext) -> Iterable[Any]:
        if gate.closing.is_set():
            context.abort_with_status(to_status(_refused_before(service, name, _STOPPING)))
        if not gate.enter():
            log.warning("stream_refused", rpc=name, limit=gate.limit)
            context.abort_with_status(to_status(_refused_before(service, name, ResourceExhausted(
                "too_many_streams", f"this server follows as many streams as it may ({gate.limit}); retry later"))))
        followed = _Followed(context, gate.closing)
        began, replies, ended = time.monotonic(), 0, "aborted"  # a refusal or failure: its own line says which
        log.debug("stream_opened", rpc=name, **_request_ids(request))
        stream = None
        try:
            stream = handler(request, followed)
            for reply in stream:
                replies += 1
                yield reply
            ended = "server_stopping" if followed.stopped else "done" if context.is_active() else "client_left"
        except GeneratorExit:  # gRPC dropped it between replies: its client is gone
            ended = "client_left"
            raise
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()  # at once, as `yield from` did: its span ends now, not when collected
            gate.leave()
            # An operator following one client's stream turns debug on (FAMIGLIA_LOG_LEVEL).
            log.debug("stream_closed", rpc=name, ended=ended, replies=replies,
                      seconds=round(time.monotonic() - began, 3), **_request_ids(request))
        if followed.stopped and context.is_active():  # cut short, not done: not an OK a client trusts
            context.abort_with_status(to_status(_STOPPING))

    if pool is not None:
        call.experimental_thread_pool = pool  # type: ignore[attr-defined]
    return call
