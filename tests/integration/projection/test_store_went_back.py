"""A Redis that lost acknowledged writes after a match finished, and was played on: the match is
flagged, retention keeps its stream, an operator finds it, and a rebuild takes it from the store.
On a real redis-server (its keys restored from a snapshot, as a Redis restarted on an older AOF
comes back) and SQL (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from famiglia.config import Settings
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.readmodels import archived_envelopes, match_summary
from famiglia.readmodels.db import read_session
from famiglia.v1 import envelope_pb2
from services.projection.__main__ import cmd_diverged
from services.projection.app import ProjectionApp
from services.projection.rebuild import _keep_archive_and_empty
from services.projection.retention import RetentionSweep

from .dice_race import ENGINE
from .support import Clock, MatchSpec, _batches, write_matches
from .test_projection import drain_app, specs

pytestmark = pytest.mark.redis
HOUR_MS = 3_600_000
FAR_FUTURE_MS = 4_000_000_000_000
LOST = "lost-1"


def _snapshot(store: RedisEventStore) -> dict[bytes, bytes]:
    """Every key as DUMP gives it (streams with their consumer groups)."""
    return {key: store.client.dump(key) for key in store.client.scan_iter()}


def _restore(store: RedisEventStore, snapshot: dict[bytes, bytes]) -> None:
    """Redis as it was at the snapshot: what a restart on an AOF that lost its last writes gives."""
    store.client.flushdb()
    for key, value in snapshot.items():
        store.client.restore(key, 0, value)


def _append(store: RedisEventStore, batches: list[tuple[str, list]], version: int = 0) -> int:
    for command_id, envelopes in batches:
        store.append(LOST, version, envelopes, command_id=command_id)
        version += len(envelopes)
    return version


def _lost_and_played_again(app: ProjectionApp, lost_commands: int = 2) -> tuple[list, list, int]:
    """A match played to its end and projected (finished, rated); then Redis goes back to before
    its last `lost_commands` commands, and the same commands are made again later: the same
    seqs, new event ids and times. (The projection's own consumer group goes back with it.)
    Returns the archived events, the store's, and the first seq at which they differ."""
    spec = MatchSpec(match_id=LOST, players=["ann", "bob"], seed=7)
    first = [b for b in _batches(ENGINE, spec, Clock(1_700_000_500_000)) if b[0] != "done"]
    kept = len(first) - lost_commands
    version = _append(app.store, first[:kept])
    before_the_loss = _snapshot(app.store)
    _append(app.store, first[kept:], version)
    drain_app(app)
    _restore(app.store, before_the_loss)
    again = [b for b in _batches(ENGINE, spec, Clock(1_700_100_000_000)) if b[0] != "done"]
    _append(app.store, again[kept:], version)
    archived = [e for _c, envelopes in first for e in envelopes]
    stored = app.store.read(LOST)
    assert len(stored) == len(archived) and stored[version].event_id != archived[version].event_id
    return archived, stored, version + 1


def _bytes(envelopes: list[envelope_pb2.EventEnvelope]) -> list[bytes]:
    return [e.SerializeToString(deterministic=True) for e in envelopes]


def _archived(app: ProjectionApp) -> list[bytes]:
    with read_session(app.sql) as session:
        return _bytes(archived_envelopes(session, LOST))


def _sweep(app: ProjectionApp, now_ms: int = FAR_FUTURE_MS) -> RetentionSweep:
    return RetentionSweep(app.store, app.sql, HOUR_MS, clock=lambda: now_ms / 1000)


def test_a_finished_match_the_store_took_back_is_kept_listed_and_rebuilt_from_the_store(
        app: ProjectionApp, redis_url: str, database_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Before, the projection only logged the match: a sweep found the store's version equal to
    the projected one and trimmed the store's history, the only copy of what the store says."""
    others = write_matches(app.store, app.registry, specs(2))
    archived, stored, seq = _lost_and_played_again(app)
    drain_app(app)
    assert [(m.match_id, m.diverged_seq, m.status) for m in app.diverged()] == [(LOST, seq, "finished")]
    assert _archived(app) == _bytes(archived), "nothing of the new history goes onto the lost one"

    settings = Settings(redis_url=redis_url, database_url=database_url, secret="test", partitions=4)
    assert cmd_diverged(settings) == 0
    listed = capsys.readouterr().out
    assert f"{LOST}  finished  differs from seq {seq}" in listed and "rebuild" in listed

    report = _sweep(app).sweep()
    assert (report.trimmed, report.skipped) == (len(others), 1)
    assert _bytes(app.store.read(LOST)) == _bytes(stored), "a flagged match keeps its stream"

    rebuilt = app.rebuild()
    assert rebuilt.diverged == 1 and rebuilt.left_deferred == 0 and rebuilt.parked == 0
    assert app.diverged() == []
    assert _archived(app) == _bytes(stored)
    with read_session(app.sql) as session:
        summary = match_summary(session, LOST)
    assert summary is not None and summary.status == "finished" and summary.version == len(stored)
    assert summary.finished_ms == stored[-1].timestamp.ToMilliseconds()

    assert _sweep(app).sweep().trimmed == 1, "once rebuilt, it leaves Redis like any other"
    assert app.store.read(LOST) == [] and _archived(app) == _bytes(stored)


def test_retention_keeps_and_flags_a_match_whose_store_events_differ_before_the_projection_sees_them(
        app: ProjectionApp) -> None:
    """A late consumer: the store went back and was played on to the same length, and the sweep
    comes first. Equal versions are not enough: the event ids differ, so the match is flagged
    and kept. Before, it was trimmed, and the late consumer then skipped the new history."""
    archived, stored, seq = _lost_and_played_again(app)
    report = _sweep(app).sweep()
    assert (report.trimmed, report.skipped) == (0, 1)
    assert _bytes(app.store.read(LOST)) == _bytes(stored)
    assert [(m.match_id, m.diverged_seq) for m in app.diverged()] == [(LOST, seq)]
    drain_app(app)  # the late consumer: nothing goes onto the lost history
    assert _archived(app) == _bytes(archived)
    assert [(m.match_id, m.diverged_seq) for m in app.diverged()] == [(LOST, seq)]


def test_a_rebuild_that_died_after_emptying_the_tables_still_takes_a_diverged_match_from_the_store(
        app: ProjectionApp) -> None:
    """The flag lives in the emptied `matches` table: the copy kept for the next rebuild already
    holds the store's events, taken in the same transaction."""
    _archived_events, stored, _seq = _lost_and_played_again(app)
    drain_app(app)
    assert _keep_archive_and_empty(app.sql, app.store) == (len(stored), 1)  # then it died
    assert app.rebuild().diverged == 0
    assert _archived(app) == _bytes(stored) and app.diverged() == []
