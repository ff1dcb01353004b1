"""Retention: finished matches leave Redis once archived and over for long enough, on a real
Redis and SQL (SQLite and PostgreSQL); live matches, unarchived events and replay are safe."""

from __future__ import annotations

from dataclasses import replace

from famiglia.eventstore.envelopes import match_created_envelope
from famiglia.readmodels import archived_envelopes
from famiglia.readmodels.db import read_session
from famiglia.v1 import envelope_pb2
from services.projection.app import ProjectionApp
from services.projection.retention import RetentionSweep
from services.projection.settings import ProjectionSettings

from .support import Played, drain, write_matches
from .test_projection import drain_app, specs

HOUR_MS = 3_600_000


def _sweep(app: ProjectionApp, now_ms: int, batch: int = 2) -> RetentionSweep:
    return RetentionSweep(app.store, app.sql, HOUR_MS, batch=batch, clock=lambda: now_ms / 1000)


def _bytes(envelopes: list[envelope_pb2.EventEnvelope]) -> list[bytes]:
    return [e.SerializeToString(deterministic=True) for e in envelopes]


def _assert_archived_whole(app: ProjectionApp, played: Played) -> None:
    with read_session(app.sql) as session:
        assert _bytes(archived_envelopes(session, played.match_id)) == _bytes(played.envelopes)


def test_finished_matches_leave_redis_an_hour_after_they_end_and_stay_in_the_archive(app: ProjectionApp) -> None:
    played = sorted(write_matches(app.store, app.registry, specs(5)), key=lambda p: p.finished_ms)
    live = "live-1"
    app.store.append(live, 0, [match_created_envelope(live, envelope_pb2.MatchCreated(game_id="dice_race", seats=2),
                                                      now_ms=played[0].finished_ms - HOUR_MS)])
    drain_app(app)

    # An hour after the third finish: the first three go, in finish order, two per query.
    report = _sweep(app, played[2].finished_ms + HOUR_MS).sweep()
    assert (report.looked_at, report.trimmed, report.skipped) == (3, 3, 0)
    assert report.events == sum(len(p.envelopes) for p in played[:3])
    for p in played[:3]:
        assert app.store.read(p.match_id) == []
        assert app.store.version(p.match_id) == len(p.envelopes), "the version key outlives the trim"
        _assert_archived_whole(app, p)
    for p in played[3:]:
        assert _bytes(app.store.read(p.match_id)) == _bytes(p.envelopes)
    assert len(app.store.read(live)) == 1, "a live match is never trimmed"

    # The watermark: a sweep looks at each finished match once.
    later = _sweep(app, played[-1].finished_ms + HOUR_MS)
    assert later.watermark() == (played[2].finished_ms, played[2].match_id)
    assert later.sweep().trimmed == 2
    assert later.sweep().looked_at == 0
    assert len(app.store.read(live)) == 1


def test_a_finished_match_with_events_the_archive_lacks_keeps_its_stream(app: ProjectionApp) -> None:
    played = write_matches(app.store, app.registry, specs(2))
    drain_app(app)
    odd = played[0]
    extra = envelope_pb2.EventEnvelope()
    extra.CopyFrom(odd.envelopes[-1])
    extra.seq, extra.event_id = len(odd.envelopes) + 1, "extra-event"
    app.store.append(odd.match_id, len(odd.envelopes), [extra])  # written after the projection looked

    report = _sweep(app, max(p.finished_ms for p in played) + HOUR_MS).sweep()
    assert (report.trimmed, report.skipped) == (1, 1)
    assert len(app.store.read(odd.match_id)) == len(odd.envelopes) + 1
    assert app.store.read(played[1].match_id) == []


def test_the_consumer_sweeps_on_its_own_and_zero_retention_keeps_everything(app: ProjectionApp) -> None:
    played = write_matches(app.store, app.registry, specs(3))
    keep = replace(app.settings, runner=replace(app.settings.runner, retain_finished_ms=0, retain_every_s=0.0))
    assert ProjectionApp(app.store, app.sql, app.registry, keep).runner("keeper").retention is None
    drain([ProjectionApp(app.store, app.sql, app.registry, keep).runner("keeper")])
    assert all(app.store.read(p.match_id) for p in played)

    # The test matches finished in 2023: an hour is long past, so the next sweep trims them.
    sweeping: ProjectionSettings = replace(app.settings, runner=replace(app.settings.runner, retain_every_s=0.0))
    runner = ProjectionApp(app.store, app.sql, app.registry, sweeping).runner("sweeper")
    runner.run_once(block_ms=0)
    assert all(app.store.read(p.match_id) == [] for p in played)
    for p in played:
        _assert_archived_whole(app, p)
