"""Retention: finished matches leave Redis once archived and over for long enough, on a real
Redis and SQL (SQLite and PostgreSQL); live matches, unarchived events and replay are safe."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy import inspect

from famiglia.eventstore.consumer import PartitionConsumer, trim_consumed
from famiglia.eventstore.envelopes import match_created_envelope
from famiglia.readmodels import archived_envelopes, record_tournament
from famiglia.readmodels.db import read_session, write_session
from famiglia.v1 import envelope_pb2
from services.projection.app import ProjectionApp
from services.projection.projector import entry_key
from services.projection.rebuild import KEPT_ARCHIVE, _keep_archive_and_empty, kept_archive_entries
from services.projection.retention import RetentionSweep
from services.projection.settings import ProjectionSettings

from .support import Played, drain, dump, write_matches
from .test_projection import drain_app, specs

HOUR_MS = 3_600_000
FAR_FUTURE_MS = 4_000_000_000_000  # after every entry id and event time of these tests


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


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
    assert app.diverged() == []  # kept, not flagged: the store and the archive agree wherever both hold an event
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


def _stream_lengths(app: ProjectionApp) -> list[int]:
    return [int(app.store.client.xlen(key)) for key in app.store.partitions_keys()]


def test_partition_entries_go_once_every_group_acked_them(app: ProjectionApp) -> None:
    write_matches(app.store, app.registry, specs(4))
    drain_app(app)
    before = _stream_lengths(app)
    other = PartitionConsumer.for_store(app.store, "other", "o1")
    other.ensure_groups("0")
    assert trim_consumed(app.store, "projection", keep_after_ms=FAR_FUTURE_MS) == 0, "a group that read nothing"

    taken = other.read(count=3)  # three entries per partition given to `other`, not acked
    assert trim_consumed(app.store, "projection", keep_after_ms=FAR_FUTURE_MS) == 0, "its pending entries hold"
    oldest_pending = min(taken, key=lambda e: entry_key(e.entry_id))  # the first entry of its partition
    other.ack([e for e in taken if e is not oldest_pending])
    while batch := other.read(count=100):
        other.ack(batch)
    dropped = trim_consumed(app.store, "projection", keep_after_ms=FAR_FUTURE_MS)
    key = app.store.keys.partition_stream(oldest_pending.partition)
    assert _text(app.store.client.xrange(key, count=1)[0][0]) == oldest_pending.entry_id
    other.ack([oldest_pending])
    dropped += trim_consumed(app.store, "projection", keep_after_ms=FAR_FUTURE_MS)
    assert dropped == sum(before) - sum(1 for n in before if n), "each stream keeps its newest entry"
    assert trim_consumed(app.store, "projection", keep_after_ms=0) == 0
    assert trim_consumed(app.store, "no-such-group", keep_after_ms=FAR_FUTURE_MS) == 0


def test_a_rebuild_after_retention_trimmed_redis_gives_the_same_tables(app: ProjectionApp) -> None:
    played = write_matches(app.store, app.registry, specs(7))
    with write_session(app.sql) as session:
        record_tournament(session, "cup", name="The Cup", status="finished", now_ms=1)
    drain_app(app, consumers=2)
    incremental = dump(app.sql)
    report = _sweep(app, FAR_FUTURE_MS).sweep()
    assert report.trimmed == 7 and report.entries > 0
    assert all(app.store.read(p.match_id) == [] for p in played)
    assert sum(_stream_lengths(app)) < sum(len(p.envelopes) for p in played) // 2
    rebuilt = app.rebuild()
    assert rebuilt.archived == sum(len(p.envelopes) for p in played)
    assert rebuilt.left_deferred == 0 and rebuilt.matches_finished == 7
    assert dump(app.sql) == incremental


def test_a_rebuild_that_died_starts_again_from_the_archive_it_kept(app: ProjectionApp) -> None:
    played = write_matches(app.store, app.registry, specs(5))
    drain_app(app)
    incremental = dump(app.sql)
    _sweep(app, FAR_FUTURE_MS).sweep()
    assert _keep_archive_and_empty(app.sql)[0] == sum(len(p.envelopes) for p in played)
    app.projector.project(list(kept_archive_entries(app.store, app.sql))[:10])  # then it died
    app.rebuild()
    assert dump(app.sql) == incremental
    with app.sql.connect() as conn:
        assert not inspect(conn).has_table(KEPT_ARCHIVE)


def test_a_rebuild_reads_the_whole_kept_archive_page_after_page(app: ProjectionApp) -> None:
    """The kept archive is read in pages (of 2000 events in production): every archived event
    once, in (event time, match, seq) order, however many pages it takes, and a rebuild from it
    (the streams trimmed) gives the incremental tables."""
    played = write_matches(app.store, app.registry, specs(3))
    drain_app(app)
    incremental = dump(app.sql)
    _sweep(app, FAR_FUTURE_MS).sweep()
    total = _keep_archive_and_empty(app.sql)[0]
    assert total == sum(len(p.envelopes) for p in played)
    for page in (7, total):
        read = [(e.envelope.timestamp.ToMilliseconds(), e.envelope.match_id, e.envelope.seq)
                for e in kept_archive_entries(app.store, app.sql, page=page)]
        assert len(read) == total and read == sorted(set(read)), page
    app.rebuild()
    assert dump(app.sql) == incremental


def test_a_rebuild_that_died_keeps_what_the_runner_recorded_about_tournaments(
        app: ProjectionApp, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The tournament rows' name, status and configuration come from the bots' runner, not from
    events: a rebuild that dies after emptying the tables must not lose them for the next one."""
    import services.projection.rebuild as rebuild_module

    write_matches(app.store, app.registry, specs(4))
    with write_session(app.sql) as session:
        record_tournament(session, "cup", name="The Cup", games=["dice_race"], config={"rounds": 3},
                          status="finished", now_ms=1)
    drain_app(app)
    incremental = dump(app.sql)

    def killed(*_args, **_kwargs):  # type: ignore[no-untyped-def]
        raise SystemExit("killed mid-rebuild")

    with monkeypatch.context() as patched:  # dies with every table refilled but the runner's records
        patched.setattr(rebuild_module, "_checkpoints_at_the_top", killed)
        try:
            app.rebuild()
        except SystemExit:
            pass
        else:
            raise AssertionError("the rebuild was to die")
    app.rebuild()
    assert dump(app.sql) == incremental


def test_a_finished_match_whose_rematch_is_not_made_yet_stays_until_it_is(app: ProjectionApp) -> None:
    """Its table asked in full and the request id is fixed, but the asker's process died before
    it created the rematch: the sweep trimmed the finished match an hour after its end all the
    same, and the rematch, which is made from it, was lost (nothing could make it any more). It
    stays until the creation is done (the command service's sweep), and a later sweep trims it."""
    from famiglia.eventstore.rematch_asks import RedisRematchAsks

    played = sorted(write_matches(app.store, app.registry, specs(2)), key=lambda p: p.finished_ms)
    drain_app(app)
    asks = RedisRematchAsks(app.store.client, app.store.keys)
    waiting = played[0]
    asks.fix_request_id(waiting.match_id, "a-secret-request-id", at_ms=waiting.finished_ms)
    after = played[-1].finished_ms + HOUR_MS
    report = _sweep(app, after).sweep()
    assert (report.trimmed, report.skipped) == (1, 1)
    assert _bytes(app.store.read(waiting.match_id)) == _bytes(waiting.envelopes)
    assert _bytes(app.store.read(played[1].match_id)) == []
    assert _sweep(app, after).sweep().looked_at == 1  # looked at again, whatever the watermark
    assert app.store.read(waiting.match_id)

    asks.drop_pending(waiting.match_id)  # the rematch is made
    report = _sweep(app, after).sweep()
    assert (report.looked_at, report.trimmed) == (1, 1)
    assert app.store.read(waiting.match_id) == []
    assert _sweep(app, after).sweep().looked_at == 0


def test_a_match_kept_for_its_rematch_is_looked_at_again_after_a_sweep_that_failed_later(
        app: ProjectionApp, monkeypatch: pytest.MonkeyPatch) -> None:
    """The matches kept for their rematch were named for a revisit only at the end of the walk,
    after the watermark had passed them: a sweep that failed after (Redis away for a later
    match's trim, the process killed) left one behind the watermark and named nowhere, and no
    sweep ever trimmed it once its rematch was made. It is named as it is kept."""
    from famiglia.eventstore.rematch_asks import RedisRematchAsks

    played = sorted(write_matches(app.store, app.registry, specs(2)), key=lambda p: p.finished_ms)
    drain_app(app)
    asks = RedisRematchAsks(app.store.client, app.store.keys)
    waiting, later = played
    asks.fix_request_id(waiting.match_id, "a-secret-request-id", at_ms=waiting.finished_ms)
    after = later.finished_ms + HOUR_MS
    trim = app.store.trim

    def away_for_the_later(match_id: str, attempts: int = 5) -> int:
        if match_id == later.match_id:
            raise ConnectionError("Redis away")
        return trim(match_id, attempts)

    with monkeypatch.context() as patched:
        patched.setattr(app.store, "trim", away_for_the_later)
        with pytest.raises(ConnectionError):
            _sweep(app, after, batch=1).sweep()
    asks.drop_pending(waiting.match_id)  # the rematch is made
    _sweep(app, after, batch=1).sweep()
    assert app.store.read(waiting.match_id) == [] and app.store.read(later.match_id) == []


def test_a_pending_creation_whose_asks_expired_keeps_its_match_no_longer(app: ProjectionApp) -> None:
    """The pending set has no TTL, and only the command service's sweep of this release drops an
    entry nothing can make: with none running (rolled back to the release before, whose asks
    make the rematch but drop no entry), the retention kept such a finished match in Redis for
    ever. Once the asks expired nothing can make it: it is trimmed."""
    from famiglia.eventstore.rematch_asks import RedisRematchAsks

    played = sorted(write_matches(app.store, app.registry, specs(2)), key=lambda p: p.finished_ms)
    drain_app(app)
    asks = RedisRematchAsks(app.store.client, app.store.keys)
    waiting = played[0]
    asks.fix_request_id(waiting.match_id, "a-secret-request-id", at_ms=waiting.finished_ms)
    after = played[-1].finished_ms + HOUR_MS
    assert _sweep(app, after).sweep().skipped == 1
    app.store.client.delete(app.store.keys.rematch(waiting.match_id))  # expired (30 days after the last write)
    assert _sweep(app, after).sweep().trimmed == 1
    assert app.store.read(waiting.match_id) == []


def test_a_rematch_table_completing_between_the_check_and_the_trim_keeps_its_match(
        app: ProjectionApp, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep looked whether the match's rematch was pending, then trimmed it: a table that
    completed in between (its request id fixed, the match pending) while the asker's process
    then died lost its rematch, made from the finished match the trim had just dropped. The
    trim itself looks again, in its script, and keeps the match: a later sweep trims it once
    the creation is done."""
    from famiglia.eventstore.rematch_asks import RedisRematchAsks
    from services.projection import retention

    played = sorted(write_matches(app.store, app.registry, specs(2)), key=lambda p: p.finished_ms)
    drain_app(app)
    asks = RedisRematchAsks(app.store.client, app.store.keys)
    waiting = played[0]
    looked = retention.creation_pending

    def then_the_table_completes(client, keys, match_id: str) -> bool:  # type: ignore[no-untyped-def]
        pending = looked(client, keys, match_id)
        if match_id == waiting.match_id:  # the last ask lands now; its process dies before the creation
            asks.fix_request_id(match_id, "a-secret-request-id", at_ms=waiting.finished_ms)
        return pending

    after = played[-1].finished_ms + HOUR_MS
    with monkeypatch.context() as patched:
        patched.setattr(retention, "creation_pending", then_the_table_completes)
        report = _sweep(app, after).sweep()
    assert (report.trimmed, report.skipped) == (1, 1)
    assert _bytes(app.store.read(waiting.match_id)) == _bytes(waiting.envelopes)
    assert app.store.read(played[1].match_id) == []
    assert _sweep(app, after).sweep().looked_at == 1  # named for a revisit, as a match kept before

    asks.drop_pending(waiting.match_id)  # the command service's sweep made the rematch
    assert _sweep(app, after).sweep().trimmed == 1
    assert app.store.read(waiting.match_id) == []
