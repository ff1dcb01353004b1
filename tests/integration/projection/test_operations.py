"""Operating the projection: schema migrations, the lag metric, the process and its rebuild command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.readmodels.db import make_engine
from famiglia.readmodels.tables import metadata
from famiglia.v1 import query_service_pb2 as pb
from famiglia.v1 import query_service_pb2_grpc as pb_grpc
from services.projection import schema
from services.projection.app import ProjectionApp
from services.projection.lag import LagMonitor
from tests.support.processes import start_service

from .support import Clock, MatchSpec, drain, games_registry, write_matches
from .test_projection import specs

ROOT = Path(__file__).resolve().parents[3]


def test_the_initial_migration_creates_exactly_the_models(database_url: str) -> None:
    engine = make_engine(database_url)
    schema.upgrade(engine)
    schema.upgrade(engine)  # idempotent
    assert schema.current_revision(engine) == schema.head_revision()
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection, opts={"compare_type": True}), metadata)
    assert [d for d in diff if not (d[0] == "remove_table" and d[1].name == schema.VERSION_TABLE)] == []
    schema.downgrade(engine)
    assert schema.current_revision(engine) is None
    engine.dispose()


def test_migration_0009_gives_the_seats_already_projected_their_matchs_created_time(database_url: str) -> None:
    """The seats written before 0009 are paged by player in their match's order at once, not
    after a rebuild: the column is filled from `matches` as it is added."""
    from sqlalchemy import text

    engine = make_engine(database_url)
    schema.upgrade(engine, "0008")
    with engine.begin() as conn:
        for n, created in ((1, 5000), (2, 7000)):
            conn.execute(text("INSERT INTO matches (match_id, game_id, status, seats, created_ms, last_event_ms, "
                              "version, seed, options, tournament_id, outcome, fold_error) VALUES "
                              f"('m{n}', 'g', 'live', 2, {created}, {created}, 1, 1, '{{}}', '', '{{}}', '')"))
            for seat in range(2):
                conn.execute(text("INSERT INTO match_seats (match_id, seat, player_id, display_name, bot, policy, "
                                  f"winner, details) VALUES ('m{n}', {seat}, 'p{seat}', '', false, '', false, '{{}}')"))
    schema.upgrade(engine)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT match_id, seat, created_ms FROM match_seats ORDER BY match_id, seat")).all()
    assert [tuple(r) for r in rows] == [("m1", 0, 5000), ("m1", 1, 5000), ("m2", 0, 7000), ("m2", 1, 7000)]
    schema.downgrade(engine, "0008")
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM match_seats"))
        conn.execute(text("DELETE FROM matches"))
    schema.downgrade(engine)
    engine.dispose()


def test_migration_0011_leaves_the_matches_already_projected_out_of_any_series(database_url: str) -> None:
    """No event before 0011 named the match it follows: the matches projected before it are no
    rematch (NULL), the column takes one after it, and a downgrade drops it with its index, the
    matches and their seats kept (SQLite's copy of the table anew was refused by the seats'
    foreign keys)."""
    from sqlalchemy import inspect, text

    engine = make_engine(database_url)
    schema.upgrade(engine, "0010")
    insert = ("INSERT INTO matches (match_id, game_id, status, seats, created_ms, last_event_ms, version, seed, "
              "options, tournament_id, outcome, fold_error) VALUES ('{id}', 'g', 'finished', 2, {ms}, {ms}, 1, 1, "
              "'{{}}', '', '{{}}', '')")
    with engine.begin() as conn:
        conn.execute(text(insert.format(id="m1", ms=5000)))
        conn.execute(text("INSERT INTO match_seats (match_id, seat, player_id, display_name, bot, policy, winner, "
                          "details) VALUES ('m1', 0, 'p0', '', false, '', false, '{}')"))
    schema.upgrade(engine)
    with engine.begin() as conn:
        conn.execute(text(insert.format(id="m2", ms=7000)))
        conn.execute(text("UPDATE matches SET rematch_of = 'm1' WHERE match_id = 'm2'"))
        rows = conn.execute(text("SELECT match_id, rematch_of FROM matches ORDER BY match_id")).all()
    assert [tuple(r) for r in rows] == [("m1", None), ("m2", "m1")]
    assert "ix_matches_rematch_of" in {i["name"] for i in inspect(engine).get_indexes("matches")}
    schema.downgrade(engine, "0010")
    assert "rematch_of" not in {c["name"] for c in inspect(engine).get_columns("matches")}
    with engine.begin() as conn:
        assert conn.execute(text("SELECT count(*) FROM matches")).scalar() == 2
        assert conn.execute(text("SELECT count(*) FROM match_seats")).scalar() == 1
        conn.execute(text("DELETE FROM match_seats"))
        conn.execute(text("DELETE FROM matches"))
    schema.downgrade(engine)
    engine.dispose()


def test_every_downgrade_keeps_the_matches_and_their_seats(database_url: str) -> None:
    """Down from the head to 0005 with a match and its seat stored: no downgrade copies `matches`
    anew (SQLite's way to drop a column before 3.35), which the seats' foreign keys refuse."""
    from sqlalchemy import text

    engine = make_engine(database_url)
    schema.upgrade(engine)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO matches (match_id, game_id, status, seats, created_ms, last_event_ms, version, "
                          "seed, options, tournament_id, outcome, fold_error) VALUES ('m1', 'g', 'finished', 2, 5, 5, "
                          "1, 1, '{}', '', '{}', '')"))
        conn.execute(text("INSERT INTO match_seats (match_id, seat, player_id, display_name, bot, policy, winner, "
                          "details) VALUES ('m1', 0, 'p0', '', false, '', false, '{}')"))
    schema.downgrade(engine, "0005")
    with engine.begin() as conn:
        assert conn.execute(text("SELECT count(*) FROM matches")).scalar() == 1
        assert conn.execute(text("SELECT count(*) FROM match_seats")).scalar() == 1
        conn.execute(text("DELETE FROM match_seats"))
        conn.execute(text("DELETE FROM matches"))
    schema.downgrade(engine)
    engine.dispose()


def _gauge_points(reader: InMemoryMetricReader) -> dict[object, float]:
    points: dict[object, float] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "famiglia.projection.lag":
                    for point in metric.data.data_points:
                        points[point.attributes.get("partition", "max")] = point.value
    return points


def test_lag_is_a_gauge_that_falls_to_zero_once_caught_up(app: ProjectionApp) -> None:
    reader = InMemoryMetricReader()
    monitor = LagMonitor(app.store, app.sql, meter=MeterProvider(metric_readers=[reader]).get_meter("t"))
    write_matches(app.store, app.registry, specs(3), clock=Clock(step_ms=250))
    behind = monitor.measure()
    assert behind.max_lag_ms > 0
    assert _gauge_points(reader)["max"] == behind.max_lag_ms
    drain([app.runner("lag")])
    assert monitor.measure().max_lag_ms == 0
    points = _gauge_points(reader)
    assert points["max"] == 0 and set(points) == {"max", *range(app.store.partitions)}


def _env(redis_url: str, database_url: str, port: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(FAMIGLIA_REDIS_URL=redis_url, FAMIGLIA_DATABASE_URL=database_url, FAMIGLIA_PARTITIONS="4",
               FAMIGLIA_PROJECTION_ADDR=f"127.0.0.1:{port}", FAMIGLIA_SECRET="test",
               FAMIGLIA_PROJECTION_BLOCK_MS="100", PYTHONPATH=os.pathsep.join([str(ROOT / "libs"), str(ROOT)]))
    return env


@pytest.mark.slow
def test_the_service_process_consumes_serves_stops_and_rebuilds(store: RedisEventStore, redis_url: str,
                                                                tmp_path: Path) -> None:
    """The process itself (what the embedded stack starts); the database backends are covered above."""
    registry = games_registry()
    games = [g for g in ("nostra_city", "grifters", "goodcritters", "nothing_personal") if g in registry]
    if not games:
        pytest.skip("the service process plays real games only, and none is registered yet")
    seats = registry.get(games[0]).info.min_players
    played = write_matches(store, registry, [
        MatchSpec(match_id=f"s{i}", players=["ann", "bob", "cy", "dee", "eve"][:seats], seed=i, game_id=games[0])
        for i in range(2)])
    database_url = f"sqlite:///{tmp_path / 'service.db'}"
    env = _env(redis_url, database_url, 0)  # the kernel's pick, named by the start line
    log = tmp_path / "projection.log"
    proc, port = start_service("services.projection", env, log)
    try:
        stub = pb_grpc.QueryServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        deadline = time.monotonic() + 30
        finished = 0
        while time.monotonic() < deadline and finished < len(played):
            try:
                reply = stub.ListMatches(pb.ListMatchesRequest(status=pb.MATCH_STATUS_FINISHED), timeout=2)
                finished = len(reply.matches)
            except grpc.RpcError:
                pass
            time.sleep(0.1)
        assert finished == len(played), log.read_text()[-3000:]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, log.read_text()[-3000:]
    rebuilt = subprocess.run([sys.executable, "-m", "services.projection", "rebuild"], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    assert "2 matches finished" in rebuilt.stdout
