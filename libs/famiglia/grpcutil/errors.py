"""Application errors and their gRPC statuses, in one place.

A refusal carries a stable code (a rule id like "GC-A03", or one of ours like
"stale_version") in the status details (google.rpc.ErrorInfo.reason) and in the
trailing metadata `famiglia-code`, with a readable message; a few carry what a program
acts on besides (ErrorInfo.metadata: `clock_not_run_out`'s `left_ms`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

DOMAIN = "famiglia"


class AppError(Exception):
    """An error a client caused or may see; `status` is the gRPC code it maps to."""

    status: grpc.StatusCode = grpc.StatusCode.INTERNAL
    logged: bool = False
    """True when whoever raised it has already written its log line (with more than the RPC
    knows, a rule refusal's seat): the RPC wrapper then writes no second one."""
    seat: int | None = None
    """The seat whose request was refused, when the service knew it (a seat token's): the
    refusal's log line names it beside the request's ids."""

    def __init__(self, code: str, message: str, *, metadata: Mapping[str, str] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.metadata = dict(metadata) if metadata else {}
        """ErrorInfo.metadata: what a program acts on, which the message only tells a person"""


class InvalidArgument(AppError):
    status = grpc.StatusCode.INVALID_ARGUMENT


class FailedPrecondition(AppError):
    status = grpc.StatusCode.FAILED_PRECONDITION


class NotFound(AppError):
    status = grpc.StatusCode.NOT_FOUND


class Unauthenticated(AppError):
    status = grpc.StatusCode.UNAUTHENTICATED


class PermissionDenied(AppError):
    status = grpc.StatusCode.PERMISSION_DENIED


class Aborted(AppError):
    status = grpc.StatusCode.ABORTED


class AlreadyExists(AppError):
    status = grpc.StatusCode.ALREADY_EXISTS


class Unavailable(AppError):
    status = grpc.StatusCode.UNAVAILABLE


class OutOfRange(AppError):
    status = grpc.StatusCode.OUT_OF_RANGE


class ResourceExhausted(AppError):
    status = grpc.StatusCode.RESOURCE_EXHAUSTED


def _store_errors() -> tuple[type[BaseException], ...]:
    try:
        from redis import exceptions
    except ImportError:  # pragma: no cover - every service has redis-py
        return (ConnectionError, TimeoutError)
    # BusyLoadingError (Redis loading its AOF after a restart) is one of redis-py's ConnectionErrors;
    # the reply errors of `STORE_REFUSING` redis-py has classes for count however they were made.
    return (ConnectionError, TimeoutError, exceptions.ConnectionError, exceptions.TimeoutError,
            exceptions.ReadOnlyError, exceptions.OutOfMemoryError, exceptions.ClusterDownError,
            exceptions.TryAgainError)


def _response_error() -> tuple[type[BaseException], ...]:
    try:
        from redis import exceptions
    except ImportError:  # pragma: no cover - every service has redis-py
        return ()
    return (exceptions.ResponseError,)


def doubled_pause(base: float, times: int, most: float) -> float:
    """`base` doubled `times` times, at most `most`: the wait of a loop whose passes keep failing
    (the store or a peer away), so an outage is not met with a line and a retry a tick."""
    return min(most, base * 2.0 ** min(max(times, 0), 16))


_STORE_ERRORS: tuple[type[BaseException], ...] | None = None
_RESPONSE_ERROR: tuple[type[BaseException], ...] | None = None

#: The error codes of a Redis that answers but refuses for now, a state that passes without
#: anything of ours changing: a replica (READONLY: the primary failed over and this node was
#: demoted, or the client still points at the old one), past maxmemory with nothing to evict
#: (OOM), its snapshot failing to save (MISCONF: a disk full), loading its data (LOADING), a
#: replica whose primary is down (MASTERDOWN), a cluster reconfiguring (CLUSTERDOWN, TRYAGAIN).
#: A write it refuses so wrote nothing: Redis checks them before a command's first write, and a
#: script's first write (one refused aborts the script, before anything of it is written).
STORE_REFUSING = frozenset({"READONLY", "OOM", "MISCONF", "LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN"})
#: How Redis 6 tells a command refused inside a script: "ERR Error running script (call to
#: f_...): @user_script:12: -READONLY You can't write...".
_IN_SCRIPT = re.compile(r"-([A-Z]+) ")


def store_refusing(exc: BaseException) -> bool:
    """Whether `exc` is a reply error of a Redis refusing for now (`STORE_REFUSING`), read from
    the reply's code: redis-py's class for some (ReadOnlyError, OutOfMemoryError...), a plain
    ResponseError for others (MISCONF), and Redis 6 wraps a script's in an ERR."""
    return _refusal(exc) in STORE_REFUSING


#: What Redis tells the commands it was blocking (BRPOP, XREAD and XREADGROUP BLOCK) as it turns
#: replica: "UNBLOCKED force unblock from blocking operation, instance state changed (master ->
#: replica?)" (Redis 6 and 7; CLIENT UNBLOCK's own UNBLOCKED says otherwise, and is not one).
_TURNED_REPLICA = "instance state changed"


def store_demoted(exc: BaseException) -> bool:
    """Whether `exc` is a replica's READONLY, or the UNBLOCKED a blocked command gets as its node
    turns replica: the node a connection is on was demoted by a failover (or never was the
    primary), so a connection made again, to wherever the address now leads, may find the
    primary (famiglia.redis_clients). Either wrote nothing: the call is retried."""
    if _refusal(exc) == "READONLY":
        return True
    if not isinstance(exc, _RESPONSE_ERROR or ()):  # (set by `_refusal`)
        return False
    text = str(exc)
    return (getattr(exc, "status_code", None) == "UNBLOCKED" or text.startswith("UNBLOCKED")) and _TURNED_REPLICA in text


def _refusal(exc: BaseException) -> str | None:
    """The code of a Redis reply error, when it is one of `STORE_REFUSING`, else None."""
    global _RESPONSE_ERROR
    if _RESPONSE_ERROR is None:
        _RESPONSE_ERROR = _response_error()
    if not isinstance(exc, _RESPONSE_ERROR):
        return None
    code = getattr(exc, "status_code", None)  # redis-py 7+: the reply's first word, taken off the message
    text = str(exc)
    if code in STORE_REFUSING:
        return str(code)
    first = text.split(" ", 1)[0]
    if first in STORE_REFUSING:
        return first
    if code is not None and code != "ERR" or not text.startswith(("ERR Error running script", "Error running script")):
        return None
    found = _IN_SCRIPT.search(text)
    return found.group(1) if found is not None and found.group(1) in STORE_REFUSING else None


def store_away(exc: BaseException) -> bool:
    """Whether `exc` says the store (Redis) is out of reach or refusing for now: restarting,
    loading, failing over (a replica's READONLY), refusing connections, too slow to answer, past
    its memory or unable to save (`STORE_REFUSING`). Such a failure is UNAVAILABLE (retry), not
    INTERNAL. (A built-in ConnectionError or TimeoutError is a socket's: the store's own fast
    paths raise those.) A blocked read cut short as its node turns replica is one too
    (`store_demoted`): before session 35 it was INTERNAL, to every watch at a failover. The one
    classification: the projection's `StoreUnreadable` uses it too."""
    global _STORE_ERRORS
    if _STORE_ERRORS is None:
        _STORE_ERRORS = _store_errors()
    return isinstance(exc, _STORE_ERRORS) or store_refusing(exc) or store_demoted(exc)


def _database_errors() -> tuple[type[BaseException], type[BaseException], type[BaseException]] | None:
    try:
        from sqlalchemy import exc
    except ImportError:  # pragma: no cover - a service without the read models
        return None
    return exc.DBAPIError, exc.OperationalError, exc.TimeoutError


_DATABASE_ERRORS: tuple[type[BaseException], ...] | None = None
#: PostgreSQL's SQLSTATEs of a server away or refusing for now, besides class 08 (connection
#: exception): shutting down, crashed or starting (57P01-57P03), too many connections (53300),
#: out of disk or memory (53100, 53200), a statement cut short by `statement_timeout` (57014,
#: query_canceled), a lock not had within `lock_timeout` or NOWAIT (55P03), a transaction lost to
#: a concurrent one (40001 serialization_failure, 40P01 deadlock_detected). PostgreSQL rolls back
#: the statement (its transaction) on each, so the call wrote nothing and may be made again.
_PG_AWAY = frozenset({"57P01", "57P02", "57P03", "53300", "53100", "53200", "57014", "55P03", "40001", "40P01"})
#: SQLite's of a file out of reach for now: locked past the busy timeout, unopenable, unreadable.
_SQLITE_AWAY = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_CANTOPEN", "SQLITE_IOERR")


def pg_sqlstate(orig: object) -> str | None:
    """The SQLSTATE of a PostgreSQL driver's error: psycopg 3's `sqlstate`, psycopg2's `pgcode`,
    or either's `diag.sqlstate`; None when the server sent none (a connection that failed
    client-side) or `orig` is not PostgreSQL's."""
    for found in (getattr(orig, "sqlstate", None), getattr(orig, "pgcode", None),
                  getattr(getattr(orig, "diag", None), "sqlstate", None)):
        if isinstance(found, str) and found:
            return found
    return None


def database_away(exc: BaseException) -> bool:
    """Whether `exc` says the SQL database (the read models) is out of reach or refusing for now:
    refusing or dropping connections, shutting down, past its connection bound, out of disk or
    memory, a statement past its `statement_timeout` or a lock past its `lock_timeout`, a
    serialization failure or a deadlock (`_PG_AWAY`), a SQLite file locked or unopenable, no
    pooled connection free in time. Such a failure is UNAVAILABLE (retry), not INTERNAL; a query
    the database refuses (SQLite's OperationalError for a syntax error or a missing table too)
    stays a failure of ours."""
    global _DATABASE_ERRORS
    if _DATABASE_ERRORS is None:
        _DATABASE_ERRORS = _database_errors() or ()
    if not _DATABASE_ERRORS:
        return False
    dbapi_error, operational, pool_timeout = _DATABASE_ERRORS
    if isinstance(exc, pool_timeout):
        return True
    if not isinstance(exc, dbapi_error):
        return False
    if getattr(exc, "connection_invalidated", False):  # SQLAlchemy saw the connection drop
        return True
    orig = getattr(exc, "orig", None)
    sqlstate = pg_sqlstate(orig)
    if sqlstate:
        return sqlstate.startswith("08") or sqlstate in _PG_AWAY
    if not isinstance(exc, operational):
        return False
    sqlite_error = getattr(orig, "sqlite_errorname", None)
    if sqlite_error:
        return sqlite_error.startswith(_SQLITE_AWAY)
    # A connection that could not be made or broke, as psycopg tells it client-side (no SQLSTATE).
    return True


def unavailable(exc: BaseException) -> Unavailable | None:
    """The refusal a server's own failure is answered with when it is a dependency out of reach
    (Redis or the SQL database: UNAVAILABLE `store_unavailable`, retry), or None (a failure of
    ours: INTERNAL). One mapping, for every service's `@rpc` calls."""
    if store_away(exc):
        return Unavailable("store_unavailable", "the event store is out of reach for now; retry")
    if database_away(exc):
        return Unavailable("store_unavailable", "the database is out of reach for now; retry")
    return None


#: The longest message a status carries, in UTF-8 bytes. It travels twice (the message header,
#: percent-encoded: a byte past ASCII takes three, and the status details' trailer) and messages
#: quote the caller's ids: a long id must not push the trailers past a client's header limit
#: (8 KB by default), which would hide the code behind "Stream removed". 1,000 bytes of
#: non-ASCII is ~3 KB as a header and ~1.4 KB in the details.
MAX_MESSAGE = 1000


def _cut(message: str) -> str:
    """`message` within MAX_MESSAGE bytes of UTF-8, cut at a character and ended with "…"."""
    data = message.encode()
    if len(data) <= MAX_MESSAGE:
        return message
    return data[:MAX_MESSAGE - len("…".encode())].decode(errors="ignore") + "…"


def to_status(error: AppError) -> grpc.Status:
    info = error_details_pb2.ErrorInfo(reason=error.code, domain=DOMAIN, metadata=error.metadata)
    detail = any_pb2.Any()
    detail.Pack(info)
    message = _cut(f"{error.code}: {error.message}")
    proto = status_pb2.Status(
        code=getattr(code_pb2, error.status.name),
        message=message,
        details=[detail],
    )
    status = rpc_status.to_status(proto)
    # Also in plain trailing metadata, for clients that do not parse status details.
    return _WithCode(status, error.code)


class _WithCode(grpc.Status):
    def __init__(self, status: grpc.Status, code: str) -> None:
        self.code = status.code
        self.details = status.details
        self.trailing_metadata = (*status.trailing_metadata, ("famiglia-code", code))


def abort(context: grpc.ServicerContext, error: AppError) -> None:
    context.abort_with_status(to_status(error))


def error_code(exc: grpc.RpcError) -> str:
    """The famiglia code of a failed call, as a client reads it."""
    for key, value in exc.trailing_metadata() or ():  # type: ignore[attr-defined]
        if key == "famiglia-code":
            return str(value)
    status = rpc_status.from_call(exc)  # type: ignore[arg-type]
    if status is not None:
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                return info.reason
    return ""


def error_metadata(exc: grpc.RpcError) -> dict[str, str]:
    """The ErrorInfo.metadata of a refused call (`AppError.metadata`), as a client reads it; {}
    for none."""
    status = rpc_status.from_call(exc)  # type: ignore[arg-type]
    if status is not None:
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                return dict(info.metadata)
    return {}
