"""A PostgreSQL server that stops answering (its host's packets dropped, a failover's old
address) is given up on within FAMIGLIA_DATABASE_TIMEOUT_S. Before, every read-model engine
(the projection's, the QueryService's, matchmaking's ratings) set no bound: psycopg waited 130 s
a connect, and the projection retried it eight times in one round, so its holds did not run and
its waiting entries were taken over; the hold-back (`projection_reads_held_back`) came minutes late."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import event
from sqlalchemy.exc import OperationalError

from famiglia.readmodels.db import make_engine, postgres_timeouts


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port whose listener takes connections and never says a word (as a blackholed host,
    for a connect), and hangs up after a while, so the test fails rather than hangs without a bound."""
    listener = socket.create_server(("127.0.0.1", 0))
    gone = threading.Event()
    taken: list[socket.socket] = []

    def serve() -> None:
        listener.settimeout(0.1)
        while not gone.wait(0):
            try:
                taken.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    hang_up = threading.Timer(60, lambda: [conn.close() for conn in taken])
    hang_up.start()
    try:
        yield listener.getsockname()[1]
    finally:
        gone.set()
        hang_up.cancel()
        thread.join()
        for conn in taken:
            conn.close()
        listener.close()


def _passed(engine: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    @event.listens_for(engine, "do_connect")
    def _look(_dialect: Any, _record: Any, _cargs: Any, cparams: dict[str, Any]) -> None:
        seen.update(cparams)

    return seen


def test_a_connect_to_a_silent_server_gives_up_within_the_setting(silent_server: int, monkeypatch) -> None:
    monkeypatch.setenv("FAMIGLIA_DATABASE_TIMEOUT_S", "2")
    engine = make_engine(f"postgresql://famiglia@127.0.0.1:{silent_server}/famiglia")
    passed = _passed(engine)
    with pytest.raises(OperationalError) as failed:
        engine.connect()
    assert passed["connect_timeout"] == 2 and passed["tcp_user_timeout"] == 2000
    assert isinstance(failed.value.orig, psycopg.errors.ConnectionTimeout), failed.value  # not the hang-up


def test_every_bound_is_the_setting_and_the_urls_own_parameters_win() -> None:
    assert postgres_timeouts(5) == {"connect_timeout": 5, "tcp_user_timeout": 5000, "keepalives": 1,
                                    "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3}
    assert postgres_timeouts(0.5)["connect_timeout"] == 2  # libpq's least
    assert "connect_timeout" not in postgres_timeouts(5, "postgres://u@db/famiglia?connect_timeout=30")


def test_the_readiness_check_keeps_the_urls_own_connect_timeout() -> None:
    """Before, it passed `connect_timeout` of its own, which overrides the URL's."""
    from sqlalchemy.engine import Engine

    from famiglia.grpcutil.readiness import sql_select_one

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens there: refused at once
    seen: dict[str, Any] = {}

    def look(_dialect: Any, _record: Any, _cargs: Any, cparams: dict[str, Any]) -> None:
        seen.update(cparams)

    event.listen(Engine, "do_connect", look)
    try:
        dependency = sql_select_one(f"postgresql://famiglia@127.0.0.1:{port}/famiglia?connect_timeout=30", timeout=2)
        with pytest.raises(OperationalError):
            dependency.check()
        dependency.close()
    finally:
        event.remove(Engine, "do_connect", look)
    assert seen["connect_timeout"] == "30" and seen["tcp_user_timeout"] == 2000


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan"])
def test_a_timeout_that_is_no_bound_stops_the_process_naming_it(value: str, monkeypatch) -> None:
    monkeypatch.setenv("FAMIGLIA_DATABASE_TIMEOUT_S", value)
    with pytest.raises(SystemExit, match="FAMIGLIA_DATABASE_TIMEOUT_S"):
        make_engine("postgresql://u@db/famiglia")



def test_a_batch_whose_connection_cannot_be_made_is_not_retried_in_its_round() -> None:
    """Eight connects in one round, each up to the bound, outlasted the claim time (30 s) even
    bounded: the round ends at the first, and the runner retries after its pause, holding meanwhile."""
    from services.projection.projector import Projector
    from tests.integration.projection.dice_race import registry
    from tests.unit.projection.test_projector import played_entries

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens there: refused at once
    engine = make_engine(f"postgresql://famiglia@127.0.0.1:{port}/famiglia")
    connects = []
    event.listen(engine, "do_connect", lambda *args: connects.append(1))
    projector = Projector(engine, registry())
    entries, _ = played_entries("m1", seed=3)
    with pytest.raises(OperationalError):
        projector.project(entries)
    assert len(connects) == 1


def test_a_lost_race_told_at_commit_is_still_retried_in_its_round(tmp_path, monkeypatch) -> None:
    """An error at COMMIT carries no statement either (a deferred constraint a concurrent batch
    broke, a serialisation failure): the connection was made, and the race is redone at once.
    Before, `_not_connected` took every error without a statement for a failed connect and
    ended the round on it."""
    from sqlalchemy.engine import Connection
    from sqlalchemy.exc import IntegrityError

    from services.projection import schema
    from services.projection.projector import Projector
    from tests.integration.projection.dice_race import registry
    from tests.unit.projection.test_projector import played_entries

    engine = make_engine(f"sqlite:///{tmp_path / 'unit.db'}")
    schema.upgrade(engine)
    projector = Projector(engine, registry())
    entries, total = played_entries("m1", seed=3)
    commit = Connection._commit_impl
    lost = [IntegrityError(None, None, Exception("UNIQUE constraint failed at commit"))]

    def race_at_commit(conn: Connection) -> None:
        if lost:
            raise lost.pop()
        commit(conn)

    monkeypatch.setattr(Connection, "_commit_impl", race_at_commit)
    outcome = projector.project(entries)
    assert outcome.attempts == 2 and len(outcome.applied) == total
    engine.dispose()


def test_a_long_timeout_stays_within_what_the_kernel_takes() -> None:
    """Linux refuses keepalive times over 32767 s (setsockopt(TCP_KEEPIDLE) failed: Invalid
    argument) and libpq an int over 2**31 - 1: before, a setting of 40000 was taken at start
    and then failed every connection."""
    bounds = postgres_timeouts(40_000)
    assert bounds["keepalives_idle"] == 32767 and bounds["keepalives_interval"] == 13334
    assert bounds["connect_timeout"] == 40_000 and bounds["tcp_user_timeout"] == 40_000_000
    assert postgres_timeouts(1e10) == {"connect_timeout": 2**31 - 1, "tcp_user_timeout": 2**31 - 1, "keepalives": 1,
                                       "keepalives_idle": 32767, "keepalives_interval": 32767, "keepalives_count": 3}
