"""A PostgreSQL that answers but refuses a statement for now (cut short by `statement_timeout`, a
lock not had within `lock_timeout`) answers QueryService calls UNAVAILABLE `store_unavailable`,
which clients retry, as a server refusing connections does. Before, only class 08, 57P01-57P03
and 53300 counted: a statement timeout was INTERNAL "internal error in GetMatchSummary", with a
traceback, and the SDK gave up on a call that would have passed a moment later."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import psycopg
import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import OperationalError
from structlog.testing import capture_logs

from famiglia.grpcutil.errors import database_away, error_code, unavailable
from famiglia.readmodels.db import make_engine
from famiglia.v1 import query_service_pb2 as pb
from famiglia.v1 import query_service_pb2_grpc as pb_grpc
from services.projection.entrypoints.grpc_server import serve
from services.projection.schema import upgrade

from .dice_race import registry


def _engine_with(url: str, setting: str) -> Any:
    """The service's engine on `url` (its tables made), every connection of it `SET` so."""
    upgrade(make_engine(url))
    engine = make_engine(url)

    @event.listens_for(engine, "connect")
    def _set(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute(f"SET {setting}")
        dbapi_connection.commit()

    return engine


@pytest.fixture
def matches_locked(postgres_url: str) -> Iterator[None]:
    """The `matches` table held ACCESS EXCLUSIVE by another transaction (a migration's, a
    rebuild's) while the test runs: every read of it waits. The server ends the holder after 60 s
    idle, so a read nothing cuts short fails the test rather than hangs it."""
    upgrade(make_engine(postgres_url))
    with psycopg.connect(postgres_url.replace("+psycopg", "")) as holder:
        holder.execute("SET idle_in_transaction_session_timeout = 60000")
        holder.execute("LOCK TABLE matches IN ACCESS EXCLUSIVE MODE")
        yield
        if not holder.closed and not holder.broken:
            holder.rollback()


@pytest.mark.parametrize(("setting", "sqlstate"), [("statement_timeout = 200", "57014"),
                                                   ("lock_timeout = 200", "55P03")])
def test_a_statement_postgresql_cuts_short_answers_unavailable(postgres_url: str, matches_locked: None,
                                                               setting: str, sqlstate: str) -> None:
    """`sqlstate` is the SQLSTATE PostgreSQL answers the waiting read with."""
    engine = _engine_with(postgres_url, setting)
    server, port = serve(engine, "127.0.0.1:0", workers=2, registry=registry())
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = pb_grpc.QueryServiceStub(channel)
        with capture_logs() as logs:
            for call in (lambda: stub.GetMatchSummary(pb.GetMatchSummaryRequest(match_id="m1")),
                         lambda: stub.ListMatches(pb.ListMatchesRequest())):
                with pytest.raises(grpc.RpcError) as refused:
                    call()
                assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, refused.value.details()
                assert error_code(refused.value) == "store_unavailable"
        assert not [line for line in logs if line["event"] == "rpc_failed"]  # no traceback: not our fault
        assert len([line for line in logs if line["event"] == "store_unavailable"]) == 2
    finally:
        channel.close()
        server.stop(grace=None)
        engine.dispose()


def test_a_statement_timeout_is_the_database_away(postgres_url: str) -> None:
    """The SQLSTATE as psycopg reports it, read by the one classification every `@rpc` uses."""
    engine = _engine_with(postgres_url, "statement_timeout = 50")
    try:
        with pytest.raises(OperationalError) as cut, engine.connect() as connection:
            connection.execute(text("SELECT pg_sleep(30)"))
        assert cut.value.orig.sqlstate == "57014"  # type: ignore[union-attr]
        assert database_away(cut.value)
        refusal = unavailable(cut.value)
        assert refusal is not None and refusal.code == "store_unavailable"
    finally:
        engine.dispose()
