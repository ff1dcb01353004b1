"""A read-model database out of reach (PostgreSQL refusing connections, a SQLite file that cannot be
opened) answers QueryService calls UNAVAILABLE `store_unavailable`, the status the SDK retries, as
Redis away does; before, every SQL failure was INTERNAL "internal error in GetMatchSummary", which
a client gives up on. A query the database refuses (a table missing) stays INTERNAL: ours to fix."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError
from structlog.testing import capture_logs

from famiglia.grpcutil.errors import database_away, error_code
from famiglia.readmodels.db import make_engine
from famiglia.v1 import query_service_pb2 as pb
from famiglia.v1 import query_service_pb2_grpc as pb_grpc
from services.projection.entrypoints.grpc_server import serve
from tests.integration.projection.dice_race import GAME_ID, registry


@pytest.fixture
def query() -> Iterator[Callable[[Engine], pb_grpc.QueryServiceStub]]:
    """A QueryService over real gRPC, on the engine given."""
    started: list[tuple[grpc.Server, grpc.Channel]] = []

    def start(engine: Engine) -> pb_grpc.QueryServiceStub:
        server, port = serve(engine, "127.0.0.1:0", workers=2, registry=registry())
        server.start()
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        started.append((server, channel))
        return pb_grpc.QueryServiceStub(channel)

    yield start
    for server, channel in started:
        channel.close()
        server.stop(grace=None)


def _refusing_port() -> int:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        return closed.getsockname()[1]  # nothing listens there: refused at once


def _every_call(stub: pb_grpc.QueryServiceStub) -> list[Callable[[], object]]:
    return [
        lambda: stub.ListMatches(pb.ListMatchesRequest()),
        lambda: stub.GetMatchSummary(pb.GetMatchSummaryRequest(match_id="m1")),
        lambda: stub.GetLeaderboard(pb.GetLeaderboardRequest(game_id=GAME_ID)),
        lambda: stub.GetPlayerHistory(pb.GetPlayerHistoryRequest(player_id="ann")),
        lambda: stub.GetTournamentStandings(pb.GetTournamentStandingsRequest(tournament_id="cup")),
    ]


def test_a_postgresql_refusing_connections_answers_every_call_unavailable(query) -> None:
    stub = query(make_engine(f"postgresql://famiglia@127.0.0.1:{_refusing_port()}/famiglia"))
    with capture_logs() as logs:
        for call in _every_call(stub):
            with pytest.raises(grpc.RpcError) as away:
                call()
            assert away.value.code() == grpc.StatusCode.UNAVAILABLE, away.value.details()
            assert error_code(away.value) == "store_unavailable"
            assert "database is out of reach" in away.value.details()
    assert not [line for line in logs if line["event"] == "rpc_failed"]  # no traceback: not our fault
    assert len([line for line in logs if line["event"] == "store_unavailable"]) == 5


def test_a_sqlite_file_that_cannot_be_opened_answers_unavailable(query, tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'gone' / 'read_models.db'}")
    shutil.rmtree(tmp_path / "gone")  # its volume unmounted under the service
    stub = query(engine)
    with pytest.raises(grpc.RpcError) as away:
        stub.GetMatchSummary(pb.GetMatchSummaryRequest(match_id="m1"))
    assert away.value.code() == grpc.StatusCode.UNAVAILABLE, away.value.details()
    assert error_code(away.value) == "store_unavailable"


def test_a_query_the_database_refuses_stays_internal(query, tmp_path: Path) -> None:
    """No tables (SQLite says so with an OperationalError too): a failure of ours, not an outage."""
    stub = query(make_engine(f"sqlite:///{tmp_path / 'empty.db'}"))
    with capture_logs() as logs:
        with pytest.raises(grpc.RpcError) as failed:
            stub.GetMatchSummary(pb.GetMatchSummaryRequest(match_id="m1"))
    assert failed.value.code() == grpc.StatusCode.INTERNAL
    assert [line["event"] for line in logs if line["event"] in ("rpc_failed", "store_unavailable")] == ["rpc_failed"]


#: PostgreSQL refusing for now, each rolled back so retried safely: 57014 (statement_timeout),
#: 55P03 (lock_timeout, NOWAIT), 40001 / 40P01 (serialization failure, deadlock), 53100 / 53200 /
#: 53300 (disk full, out of memory, too many connections), 57P01-57P03 (shutting down, crashed,
#: starting). Before, the first six were INTERNAL.
_PG_REFUSING_NOW = ["08006", "57014", "55P03", "40001", "40P01", "53100", "53200", "53300", "57P01", "57P02", "57P03"]
#: Refusals of the query itself: an undefined table, a bad encoding, a unique violation, bad SQL.
_PG_REFUSING_THE_QUERY = ["42P01", "22021", "23505", "42601"]


@pytest.mark.parametrize(("sqlstate", "away"), [*((code, True) for code in _PG_REFUSING_NOW),
                                                 *((code, False) for code in _PG_REFUSING_THE_QUERY)])
def test_postgresql_states_of_a_server_away_are_told_from_a_query_it_refuses(sqlstate: str, away: bool) -> None:
    class PgError(Exception):
        pass

    orig = PgError("server says no")
    orig.sqlstate = sqlstate  # type: ignore[attr-defined]
    assert database_away(OperationalError("SELECT 1", {}, orig)) is away


class _Diag:
    def __init__(self, sqlstate: str) -> None:
        self.sqlstate = sqlstate


@pytest.mark.parametrize("driver", ["psycopg2", "diag"])
@pytest.mark.parametrize("sqlstate", [*_PG_REFUSING_NOW, *_PG_REFUSING_THE_QUERY])
def test_the_sqlstate_is_read_however_the_driver_gives_it(driver: str, sqlstate: str) -> None:
    """psycopg2 names it `pgcode`, both psycopgs have it on `diag.sqlstate` too; an error with none
    of them is a connection that failed client-side (away, as before)."""
    from sqlalchemy.exc import DBAPIError

    class PgError(Exception):
        pass

    orig = PgError("server says no")
    if driver == "psycopg2":
        orig.pgcode = sqlstate  # type: ignore[attr-defined]
        orig.sqlstate = None  # type: ignore[attr-defined]
    else:
        orig.diag = _Diag(sqlstate)  # type: ignore[attr-defined]
    away = sqlstate in _PG_REFUSING_NOW
    assert database_away(OperationalError("SELECT 1", {}, orig)) is away
    # A DBAPIError that is not an OperationalError (psycopg2 raises 40001 as a TransactionRollbackError,
    # an OperationalError; a driver may not): the SQLSTATE decides all the same.
    assert database_away(DBAPIError("SELECT 1", {}, orig)) is away
