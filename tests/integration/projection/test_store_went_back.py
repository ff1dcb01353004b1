"""A Redis that lost acknowledged writes after a match finished, and was played on: the match is
flagged, retention keeps its stream, an operator finds it, and a rebuild takes it from the store.
On a real redis-server (its keys restored from a snapshot, as a Redis restarted on an older AOF
comes back) and SQL (SQLite and PostgreSQL)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import pytest
from google.protobuf.struct_pb2 import ListValue, Value
from sqlalchemy import update

from famiglia.config import Settings
from famiglia.engine import MatchConfig
from famiglia.engine.registry import Registry
from famiglia.eventstore import PartitionEntry
from famiglia.eventstore.envelopes import game_envelopes, match_created_envelope
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.matchstate import MatchState
from famiglia.readmodels import archived_envelopes, match_summary
from famiglia.readmodels.db import read_session
from famiglia.v1 import envelope_pb2
from services.projection.__main__ import cmd_diverged
from services.projection.app import ProjectionApp
from services.projection.projector import BatchOutcome
from services.projection.rebuild import _keep_archive_and_empty, rebuild
from services.projection.retention import RetentionSweep, revisit_later
from services.projection.runner import ProjectionRunner
from services.projection.writes import MATCHES

from .dice_race import ENGINE
from .support import Clock, MatchSpec, _batches, drain, write_matches
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


def test_a_rebuilt_diverged_match_leaves_redis_though_the_retention_watermark_passed_its_new_end(
        app: ProjectionApp) -> None:
    """The usual order: the match is flagged, the sweep keeps it and walks on past matches that
    finished later, and the operator rebuilds. The rebuilt match ends where the watermark has
    passed: before, no sweep looked at it again and its stream stayed in Redis for ever. It is
    trimmed once over for the retention period, as any other match."""
    others = write_matches(app.store, app.registry, specs(2), clock=Clock(1_800_000_000_000))
    _archived_events, stored, _seq = _lost_and_played_again(app)
    drain_app(app)
    assert (_sweep(app).sweep().trimmed, _sweep(app).watermark()[0]) == (
        len(others), max(p.finished_ms for p in others))
    assert app.rebuild().diverged == 1 and app.diverged() == []
    new_end = stored[-1].timestamp.ToMilliseconds()
    assert new_end < _sweep(app).watermark()[0]

    within_the_hour = _sweep(app, now_ms=new_end + HOUR_MS - 1).sweep()
    assert (within_the_hour.trimmed, within_the_hour.skipped) == (0, 0)
    assert _bytes(app.store.read(LOST)) == _bytes(stored), "clients may still follow it for the hour"
    after_the_hour = _sweep(app, now_ms=new_end + HOUR_MS).sweep()
    assert (after_the_hour.trimmed, after_the_hour.events) == (1, len(stored))
    assert app.store.read(LOST) == [] and _archived(app) == _bytes(stored)
    assert _sweep(app).sweep().looked_at == 0, "looked at once"


def test_a_match_named_for_a_revisit_is_kept_while_flagged_and_checked_as_the_walk_checks(
        app: ProjectionApp) -> None:
    """The sweep looks at a named match only once it is no longer flagged (a rebuild running
    meanwhile clears the flag when it commits), and then with the walk's checks: a store whose
    events are not the archive's keeps its stream, flagged."""
    _archived_events, stored, seq = _lost_and_played_again(app)
    drain_app(app)
    revisit_later(app.store, [LOST])
    assert _sweep(app).sweep().looked_at == 1  # the walk's look, which keeps it; the named one waits
    assert _sweep(app).sweep().looked_at == 0 and _bytes(app.store.read(LOST)) == _bytes(stored)
    with app.sql.begin() as conn:  # as if the flag were cleared without the store's events taken
        conn.execute(update(MATCHES).where(MATCHES.c.match_id == LOST).values(diverged_seq=None))
    report = _sweep(app).sweep()
    assert (report.looked_at, report.trimmed, report.skipped) == (1, 0, 1)
    assert _bytes(app.store.read(LOST)) == _bytes(stored)
    assert [(m.match_id, m.diverged_seq) for m in app.diverged()] == [(LOST, seq)]


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


@pytest.mark.parametrize("batch", [500, 4], ids=["archive-and-streams-in-one-batch", "in-batches-of-their-own"])
def test_a_rebuild_that_meets_a_diverged_match_takes_it_from_the_store_in_the_same_run(
        app: ProjectionApp, batch: int) -> None:
    """A Redis restored to an older point and played on, and `rebuild` run before any consumer
    saw the new history (a restore's runbook, docs/operations.md): the rebuild meets the store's
    other events only as it feeds the streams over the archive. Before, an entry in one batch with
    the archive's event at its seq was skipped as a redelivery (the lost history kept, unflagged),
    and one in a later batch flagged the match while the rebuild said it was done (exit 0) and
    left it ranked on the lost history until a second rebuild."""
    _archived_events, stored, _seq = _lost_and_played_again(app)
    report = rebuild(app.store, app.sql, app.projector, batch=batch)
    assert app.diverged() == []
    assert _archived(app) == _bytes(stored)
    assert (report.diverged, report.flagged, report.left_deferred, report.parked) == (1, 0, 0, 0)
    with read_session(app.sql) as session:
        summary = match_summary(session, LOST)
    assert summary is not None and summary.finished_ms == stored[-1].timestamp.ToMilliseconds()


# -- a consumer's folded match after another consumer followed the store back ---------------------------
RACE = "race-1"


def _roll(seat: int, pips: int) -> Value:
    """A Dice Race roll event (seat, pips)."""
    return Value(list_value=ListValue(values=[Value(number_value=seat), Value(number_value=pips)]))


def _race_opening(target: int = 12) -> list[envelope_pb2.EventEnvelope]:
    created = envelope_pb2.MatchCreated(game_id=ENGINE.info.game_id, seats=2, seed=7)
    created.options["target"] = str(target)
    for seat, player in enumerate(("ann", "bob")):
        created.seat_info.add(seat=seat, player_id=player, display_name=player.title(), bot=True, policy="random")
    setup = ENGINE.setup(MatchConfig(seats=2, options={"target": str(target)}), 7)
    return [match_created_envelope(RACE, created, now_ms=1_700_000_000_000),
            *game_envelopes(ENGINE, RACE, 1, setup, now_ms=1_700_000_000_000)]


def _roll_on(store: RedisEventStore, pips: list[int], start_ms: int, tag: str) -> None:
    """Append one roll a command after the store's version, the seats in turn (seat 0 first)."""
    version = store.version(RACE)
    for i, n in enumerate(pips):
        seat = (version - 2) % 2  # seq 3 is seat 0's first roll (after match_created and the setup)
        envelopes = game_envelopes(ENGINE, RACE, version, [_roll(seat, n)], command_id=f"{tag}-{version + 1}",
                                   seat=seat, now_ms=start_ms + 1000 * i)
        store.append(RACE, version, envelopes, command_id=f"{tag}-{version + 1}")
        version += 1


def _fold(registry: Registry, envelopes: list[envelope_pb2.EventEnvelope]) -> MatchState:
    state = MatchState.start(registry, envelopes[0])
    state.apply(envelopes[1:])
    return state


@pytest.mark.parametrize("taken_by_the_other", [2, 3], ids=["to-the-version-folded", "past-it"])
def test_a_consumer_that_folded_lost_events_folds_the_match_anew_after_another_followed_the_store(
        app: ProjectionApp, taken_by_the_other: int) -> None:
    """Consumer A folds a live match on events the store then loses; the store is written on,
    and consumer B meets the replaced seqs and projects the match again from the store. A's
    folded match is at a version the archive has (or behind it), but of the lost history:
    before, A folded the store's next events onto it and finished the match on a mix of the
    two histories (another winner, score and end than the store's)."""
    a, b = app.runner("a"), app.runner("b")
    app.store.append(RACE, 0, _race_opening(), command_id="")
    _roll_on(app.store, [1, 1], 1_700_000_001_000, "shared")
    drain([a])
    before_the_loss = _snapshot(app.store)
    _roll_on(app.store, [6, 6], 1_700_000_010_000, "lost")
    drain([a])
    assert app.projector.cache.get(RACE) is None and a.projector.cache.get(RACE).version == 6  # type: ignore[union-attr]
    _restore(app.store, before_the_loss)
    new_history = [2, 3] * 4  # seat 1 reaches the target (12) at its fourth roll: [9, 13] at seq 12
    _roll_on(app.store, new_history[:taken_by_the_other], 1_700_000_100_000, "again")
    b.run_once(block_ms=0)  # B meets seq 5 under another id: the match is projected again from the store
    b.flush_acks()
    assert _archived_race(app) == _bytes(app.store.read(RACE))
    _roll_on(app.store, new_history[taken_by_the_other:], 1_700_000_200_000, "again")
    drain([a, b])

    stored = app.store.read(RACE)
    expected = _fold(app.registry, stored).result()
    assert expected is not None and [s.score for s in expected.seats] == [9.0, 13.0]
    with read_session(app.sql) as session:
        summary = match_summary(session, RACE)
    assert summary is not None and summary.status == "finished" and summary.version == len(stored) == 12
    assert [(s.seat, s.score, s.rank) for s in summary.seats] == [(s.seat, s.score, s.rank) for s in expected.seats]
    assert summary.finished_ms == stored[-1].timestamp.ToMilliseconds()
    assert _archived_race(app) == _bytes(stored)


def _archived_race(app: ProjectionApp) -> list[bytes]:
    with read_session(app.sql) as session:
        return _bytes(archived_envelopes(session, RACE))


def test_entries_a_consumer_kept_from_before_the_store_went_back_are_never_projected(app: ProjectionApp) -> None:
    """A consumer keeps a deferred entry in memory (an earlier event of its match was in another
    consumer's batch, which died); Redis restarts without them (lost acknowledged writes), the
    match is played on to its end, and another consumer projects that. Before, the kept entry,
    at the seq after the new end, was archived onto the finished match: a lost event in the
    archive and a projected version the store never had (retention then kept the stream for
    ever). A consumer whose connection broke reads its pending entries again instead."""
    a, b, gone = app.runner("a"), app.runner("b"), app.runner("gone")
    app.store.append(RACE, 0, _race_opening(target=4), command_id="")
    _roll_on(app.store, [1, 1], 1_700_000_001_000, "shared")
    drain([a, b, gone])
    before_the_loss = _snapshot(app.store)
    _roll_on(app.store, [1, 1], 1_700_000_010_000, "lost")
    assert len(gone.consumer.read(10)) == 2  # ... and it dies before its commit
    _roll_on(app.store, [1], 1_700_000_020_000, "lost")
    a.run_once(block_ms=0)
    assert [e.envelope.seq for e in a.deferred.values()] == [7]
    _restore(app.store, before_the_loss)
    app.store.client.client_kill_filter(_type="normal", skipme=True)  # a restart drops every connection
    _roll_on(app.store, [2, 3], 1_700_000_100_000, "again")  # seat 1 reaches 4 at seq 6: over
    drain([b])
    drain([a, b])

    stored = app.store.read(RACE)
    with read_session(app.sql) as session:
        summary = match_summary(session, RACE)
    assert summary is not None and summary.status == "finished" and summary.version == len(stored) == 6
    assert [s.score for s in summary.seats] == [3.0, 4.0]
    assert _archived_race(app) == _bytes(stored)


# -- a batch read before the store went back, applied after another consumer projected the new history --
def _restarted_while_busy(app: ProjectionApp, runner: ProjectionRunner, before_the_loss: dict[bytes, bytes],
                          then: Callable[[], None]) -> None:
    """`runner`'s next round reads its batch, and while it projects it (its read went well, so its
    connection breaks under no read) Redis restarts without the lost writes and `then` runs."""
    project = runner.projector.project

    def busy(entries: Sequence[PartitionEntry]) -> BatchOutcome:
        runner.projector.project = project  # type: ignore[method-assign]
        _restore(app.store, before_the_loss)
        app.store.client.client_kill_filter(_type="normal", skipme=True)  # a restart drops every connection
        time.sleep(0.005)  # a restart takes time: the store's new entries get later ids than the lost ones
        then()
        return project(entries)

    runner.projector.project = busy  # type: ignore[method-assign]
    runner.run_once(block_ms=0)


@pytest.mark.parametrize(("lost_in_the_batch", "played_again"), [
    (1, [3]), (1, [1, 1, 2]), (2, [3]),
], ids=["after-it-went-back-the-new-history-ends", "after-it-went-back-the-new-history-goes-on",
        "both-lost-entries-the-new-history-ends"])
def test_a_batch_read_before_the_store_went_back_is_never_applied_once_another_consumer_projected_the_new_one(
        app: ProjectionApp, lost_in_the_batch: int, played_again: list[int]) -> None:
    """Consumer A reads the match's lost entries (the last, or both) and is busy projecting them
    when Redis restarts without them; the match is played again and consumer B projects the new
    history (projecting it again from the store when B had projected the first lost entry). A's
    read went well, so no broken read tells A to drop its batch. Before, A applied the lost seq 6
    right after the store's new seq 5: archived onto the finished match (a version the store never
    had), or finishing the match on a mix of two histories (seat 1 the winner, rated; then flagged
    when the store's own seq 6 came); or, both lost entries in its batch, A met seq 5 under another
    id than the archive's and flagged the finished match for a rebuild, which the store did not
    need: the archive held the store's history."""
    a, b = app.runner("a"), app.runner("b")
    app.store.append(RACE, 0, _race_opening(target=4), command_id="")
    _roll_on(app.store, [1, 1], 1_700_000_001_000, "shared")  # seq 3 and 4: [1, 1]
    drain([a, b])
    before_the_loss = _snapshot(app.store)
    _roll_on(app.store, [1], 1_700_000_010_000, "lost")  # seq 5: [2, 1]
    if lost_in_the_batch == 1:
        b.run_once(block_ms=0)  # B projects the lost seq 5
    _roll_on(app.store, [3], 1_700_000_011_000, "lost")  # seq 6: [2, 4], seat 1 wins the lost history

    def played_again_and_projected_by_b() -> None:
        _roll_on(app.store, played_again[:1], 1_700_000_100_000, "again")
        drain([b])

    _restarted_while_busy(app, a, before_the_loss, played_again_and_projected_by_b)
    _roll_on(app.store, played_again[1:], 1_700_000_101_000, "again")
    drain([a, b])

    stored = app.store.read(RACE)
    expected = _fold(app.registry, stored).result()
    assert expected is not None and expected.seats[0].rank == 1
    assert app.diverged() == []
    with read_session(app.sql) as session:
        summary = match_summary(session, RACE)
    assert summary is not None and summary.status == "finished" and summary.version == len(stored)
    assert [(s.seat, s.score, s.rank) for s in summary.seats] == [(s.seat, s.score, s.rank) for s in expected.seats]
    assert _archived_race(app) == _bytes(stored)
