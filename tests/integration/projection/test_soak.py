"""Soak (`make soak`): real projection processes share the work on a database, one is killed
with SIGKILL mid-stream, the others claim its entries; every event is projected exactly once,
and a rebuild gives the same tables."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlmodel import func, select

from famiglia.localstack.redis_server import free_port
from famiglia.readmodels.db import read_session
from famiglia.readmodels.tables import Match
from services.projection.app import ProjectionApp
from tests.profile import SOAK

from .support import MatchSpec, Played, dump, write_matches
from .test_projection import assert_projected

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(not SOAK, reason="soak profile only (make soak)")


def _start(redis_url: str, database_url: str, name: str) -> subprocess.Popen:
    env = dict(os.environ)
    env.update(FAMIGLIA_REDIS_URL=redis_url, FAMIGLIA_DATABASE_URL=database_url, FAMIGLIA_PARTITIONS="4",
               FAMIGLIA_PROJECTION_ADDR=f"localhost:{free_port()}", FAMIGLIA_SECRET="soak",
               FAMIGLIA_PROJECTION_CONSUMER=name, FAMIGLIA_PROJECTION_BLOCK_MS="50", FAMIGLIA_PROJECTION_BATCH="5",
               FAMIGLIA_PROJECTION_CLAIM_IDLE_MS="1500", FAMIGLIA_PROJECTION_CLAIM_EVERY_S="0.5",
               FAMIGLIA_LOG_LEVEL="warning", PYTHONPATH=os.pathsep.join([str(ROOT / "libs"), str(ROOT)]))
    return subprocess.Popen([sys.executable, "-m", "services.projection"], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.soak
def test_processes_killed_mid_stream_lose_nothing_and_count_nothing_twice(app: ProjectionApp, redis_url: str,
                                                                           database_url: str) -> None:
    games = [g for g in ("grifters", "nostra_city", "goodcritters") if g in app.registry]
    if not games:
        pytest.skip("needs a registered real game")
    app.migrate()
    players = ["ann", "bob", "cy", "dee", "eve", "fay"]
    specs = []
    for i in range(30):
        game = games[i % len(games)]
        seats = app.registry.get(game).info.min_players + i % 2
        specs.append(MatchSpec(match_id=f"soak{i:03d}", players=[players[(i + k) % 6] for k in range(seats)],
                               seed=500 + i, game_id=game))
    processes = {name: _start(redis_url, database_url, name) for name in ("p1", "p2")}
    played: list[Played] = []
    writer = threading.Thread(target=lambda: played.extend(write_matches(app.store, app.registry, specs)))
    writer.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with read_session(app.sql) as session:
                if int(session.exec(select(func.count()).select_from(Match)).one()) >= 5:
                    break
            time.sleep(0.1)
        processes["p1"].send_signal(signal.SIGKILL)  # dies with a batch read, maybe committed, not acked
        processes["p3"] = _start(redis_url, database_url, "p3")
        writer.join()
        while time.monotonic() < deadline:
            with read_session(app.sql) as session:
                done = int(session.exec(select(func.count()).select_from(Match)
                                        .where(Match.status == "finished")).one())
            if done == len(specs):
                break
            time.sleep(0.2)
    finally:
        for proc in processes.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in processes.values():
            proc.wait(timeout=30)
    assert_projected(app, played)
    incremental = dump(app.sql)
    app.rebuild()
    assert dump(app.sql) == incremental
