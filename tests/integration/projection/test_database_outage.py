"""The database away for long (a failover, a full disk): the runner keeps what it read and reads
nothing new until the database takes a batch again, so its memory stays one read's worth however
long the outage lasts, and the rest waits in the streams and the group. Before, each failing round
read `BATCH` more new entries a partition into its waiting entries, without end."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from sqlalchemy.exc import OperationalError
from sqlmodel import func, select
from structlog.testing import capture_logs

from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.readmodels.db import read_session
from famiglia.readmodels.tables import Match
from services.projection.app import ProjectionApp
from services.projection.lag import LagMonitor
from services.projection.projector import Projector

from .support import MatchSpec, drain, write_matches


def _refused(*args: object, **kwargs: object) -> None:
    raise OperationalError("connect", {}, Exception("connection refused: the database is away"))


def _matches(n: int, prefix: str = "m") -> list[MatchSpec]:
    return [MatchSpec(f"{prefix}{i:03d}", ["ann", "bob", "cy"][: 2 + i % 2], seed=100 + i) for i in range(n)]


def _held_back_points(reader: InMemoryMetricReader) -> list[float]:
    return [value for _, value in _points(reader, "famiglia.projection.held_back")]


def _points(reader: InMemoryMetricReader, name: str) -> list[tuple[dict, float]]:
    data = reader.get_metrics_data()
    return [(dict(point.attributes or {}), point.value) for resource in (data.resource_metrics if data else [])
            for scope in resource.scope_metrics for metric in scope.metrics if metric.name == name
            for point in metric.data.data_points]


def _max_lag(reader: InMemoryMetricReader) -> float:
    [lag] = [value for attributes, value in _points(reader, "famiglia.projection.lag") if not attributes]
    return lag


def _a_failed_round(app: ProjectionApp, outage: pytest.MonkeyPatch) -> Any:
    """A runner whose first round met the database away (`outage` keeps it away): held back."""
    runner = app.runner("outage")
    runner.projector.max_attempts = 1
    outage.setattr(app.sql, "connect", _refused)
    runner.projector.release()
    with pytest.raises(OperationalError):
        runner.run_once(block_ms=0)
    return runner


def test_a_runner_reads_nothing_new_while_the_database_refuses(app: ProjectionApp, monkeypatch) -> None:
    runner = app.runner("outage")
    runner.projector.max_attempts = 1  # each failing round at once, not after seven waits
    reader = InMemoryMetricReader()
    runner.lag = LagMonitor(app.store, app.sql, meter=MeterProvider(metric_readers=[reader]).get_meter("t"))
    played = write_matches(app.store, app.registry, _matches(40))
    total = sum(len(p.envelopes) for p in played)
    one_read = runner.config.batch * app.store.partitions
    assert total > 10 * one_read  # enough for the waiting entries to grow, were they to
    with capture_logs() as logs:
        with monkeypatch.context() as outage:
            outage.setattr(app.sql, "connect", _refused)
            runner.projector.release()  # the kept connection broke with the server
            for i in range(12):  # commands go on meanwhile
                with pytest.raises(OperationalError):
                    runner.run_once(block_ms=0)
                assert len(runner.deferred) <= one_read, "the waiting entries grew with every failing round"
                played += write_matches(app.store, app.registry, _matches(1, prefix=f"late{i:02d}-"))
            assert runner.consumer.pending_count() == len(runner.deferred)  # read, kept, pending: no more
            assert _held_back_points(reader) == [1]
        drain([runner])  # the database is back: everything, once
    with read_session(app.sql) as session:
        versions = dict(session.exec(select(Match.match_id, Match.version)).all())
        assert session.exec(select(func.count()).select_from(Match)).one() == len(played)
    assert versions == {p.match_id: len(p.envelopes) for p in played}
    assert runner.projected == sum(len(p.envelopes) for p in played)
    held = [line["event"] for line in logs if line["event"].startswith("projection_reads_")]
    assert held == ["projection_reads_held_back", "projection_reads_resumed"], held  # told once each way
    assert _held_back_points(reader) == [0]


def test_a_restarted_runner_reads_its_leftovers_back_no_further_while_the_database_refuses(
        app: ProjectionApp, monkeypatch) -> None:
    """Its own pending entries are read back `BATCH` a partition a round; with the database away
    that stops too, the rest held in the group (`hold_pending`), none claimed by another."""
    played = write_matches(app.store, app.registry, _matches(40))
    first = app.runner("steady")
    first.start()
    while first.consumer.read(first.config.batch, block_ms=0):  # read everything, then die before any commit
        pass
    pending = first.consumer.pending_count()
    assert pending == sum(len(p.envelopes) for p in played)
    first.consumer.close()
    restarted = app.runner("steady")
    restarted.projector.max_attempts = 1
    kept = []
    with monkeypatch.context() as outage:
        outage.setattr(app.sql, "connect", _refused)
        for _ in range(12):
            with pytest.raises(OperationalError):
                restarted.run_once(block_ms=0)
            kept.append(len(restarted.deferred))
        # The first round reads back two batches a partition (`_resume`, then the round's own read).
        assert kept == [kept[0]] * len(kept) and kept[0] <= 2 * restarted.config.batch * app.store.partitions, kept
        assert restarted.consumer.pending_count() == pending  # every one still pending under it
    drain([restarted])
    with read_session(app.sql) as session:
        versions = dict(session.exec(select(Match.match_id, Match.version)).all())
    assert versions == {p.match_id: len(p.envelopes) for p in played}


def test_poison_matches_kept_through_an_outage_do_not_hold_the_runner_back_once_the_database_answers(
        app: ProjectionApp, monkeypatch) -> None:
    """Two poison matches are all a runner keeps when the database goes away: held back, it tries
    only them, and once the database answers they fail alone together, a poison-like failure (the
    data's or our code's, not the database's), which counts no strike while nothing else moves.
    Session 33's hold-back stayed held back on it and never read the new entries that let the
    projector tell them apart: no match projected again, for good. Such a failure reads on."""
    real = Projector._create_match

    def poison(self, writes, envelope):  # a bug reading these two matches
        if envelope.match_id.startswith("p"):
            raise ValueError(f"cannot read {envelope.match_id}")
        return real(self, writes, envelope)

    monkeypatch.setattr(Projector, "_create_match", poison)
    write_matches(app.store, app.registry, _matches(2, prefix="p"))
    with monkeypatch.context() as outage:
        runner = _a_failed_round(app, outage)
    assert {e.envelope.match_id for e in runner.deferred.values()} <= {"p000", "p001"} and runner.deferred
    good = write_matches(app.store, app.registry, _matches(3, prefix="g"))
    for _ in range(30):  # rounds as `run` makes them: a failed one is retried
        try:
            runner.run_once(block_ms=0)
        except ValueError:
            pass
    with read_session(app.sql) as session:
        versions = dict(session.exec(select(Match.match_id, Match.version)).all())
    assert {p.match_id: versions.get(p.match_id) for p in good} == {p.match_id: len(p.envelopes) for p in good}


def test_a_wait_the_outage_made_is_not_told_as_a_gap_once_the_database_is_back(app: ProjectionApp, monkeypatch) -> None:
    """Entries waiting for another consumer's commit wait through a database outage too: that
    consumer cannot commit either. A failing round never reaches the stuck check, so the first
    round after an outage longer than the stuck time told `projection_entries_stuck` ("an earlier
    event of the match is missing from every consumer") for a match that was only waiting its
    turn. The time held back does not count as waiting for a gap."""
    [played] = write_matches(app.store, app.registry, [MatchSpec("m", ["ann", "bob"], seed=1)])
    other = PartitionConsumer.for_store(app.store, app.settings.runner.group, "other")
    other.ensure_groups("0")
    [creation] = other.read(count=1)  # another consumer has the creation, not committed yet
    assert creation.envelope.seq == 1
    runner = app.runner("waiting")
    runner.projector.max_attempts = 1
    now = [1000.0]
    runner.clock = lambda: now[0]
    runner.run_once(block_ms=0)
    assert len(runner.deferred) == len(played.envelopes) - 1  # waiting for the creation
    with capture_logs() as logs:
        with monkeypatch.context() as outage:
            outage.setattr(app.sql, "connect", _refused)
            runner.projector.release()
            for _ in range(10):  # ten minutes of rounds refused
                now[0] += 60
                with pytest.raises(OperationalError):
                    runner.run_once(block_ms=0)
        runner.run_once(block_ms=0)  # back: the creation is still the other consumer's to commit
        assert len(runner.deferred) == len(played.envelopes) - 1
        now[0] += 1
        runner.run_once(block_ms=0)
    assert [line["event"] for line in logs if line["event"].startswith("projection_reads_")] == [
        "projection_reads_held_back", "projection_reads_resumed"]
    assert not [line for line in logs if line["event"] == "projection_entries_stuck"]


def test_a_dead_consumers_entries_wait_out_the_hold_back_and_are_claimed_after_it(app: ProjectionApp, monkeypatch) -> None:
    """Held back, a runner claims nothing (a dead consumer's entries would only wait in its
    memory); they stay pending under the dead one, and the first claim after a batch commits
    takes them: nothing lost, nothing left behind."""
    played = write_matches(app.store, app.registry, _matches(6))
    group = app.settings.runner.group
    dead = PartitionConsumer.for_store(app.store, group, "dead")
    dead.ensure_groups("0")
    left = dead.read(count=3)  # read, then the process died
    assert left
    with monkeypatch.context() as outage:
        runner = _a_failed_round(app, outage)  # held back from here on
        for entry in left:  # idle past any claim time, as after a long absence
            app.store.client.xclaim(app.store.keys.partition_stream(entry.partition), group, "dead", 0,
                                    [entry.entry_id], idle=10 * 60_000, justid=True)
        for _ in range(3):
            with pytest.raises(OperationalError):
                runner.run_once(block_ms=0)
        owners = {row["consumer"] for entry in left for row in app.store.client.xpending_range(
            app.store.keys.partition_stream(entry.partition), group, entry.entry_id, entry.entry_id, 1)}
        assert owners == {b"dead"}  # not claimed while held back
    drain([runner])
    with read_session(app.sql) as session:
        versions = dict(session.exec(select(Match.match_id, Match.version)).all())
    assert versions == {p.match_id: len(p.envelopes) for p in played}
    assert runner.consumer.pending_count() == 0


def test_the_lag_grows_through_an_outage_and_is_0_again_once_the_database_is_back(
        app: ProjectionApp, monkeypatch) -> None:
    """The lag is measured against the checkpoints, in the database: with it away, the gauge kept
    its value from before the outage (0, caught up), and an alert on lag never fired however long
    the read models stood still. Now it is measured from Redis and the entries kept: the oldest
    kept entry's age at least."""
    runner = app.runner("outage")
    runner.config = replace(runner.config, lag_every_s=0)  # measured every round
    runner.projector.max_attempts = 1
    reader = InMemoryMetricReader()
    now_ms = [0]
    runner.lag = LagMonitor(app.store, app.sql, meter=MeterProvider(metric_readers=[reader]).get_meter("t"),
                            clock_ms=lambda: now_ms[0])
    write_matches(app.store, app.registry, _matches(3))
    drain([runner])
    assert _max_lag(reader) == 0
    with monkeypatch.context() as outage:
        outage.setattr(app.sql, "connect", _refused)
        outage.setattr(app.sql.pool, "connect", _refused)  # every connection, a read session's too (the checkpoints)
        runner.projector.release()
        late = write_matches(app.store, app.registry, _matches(2, prefix="late"))
        oldest = min(e.timestamp.ToMilliseconds() for p in late for e in p.envelopes)
        now_ms[0] = oldest + 60_000
        with pytest.raises(OperationalError):
            runner.run_once(block_ms=0)
        assert runner.deferred and _held_back_points(reader) == [1]
        assert _max_lag(reader) == 60_000  # the oldest entry kept, a minute old
        assert runner.lag.last is not None and not runner.lag.last.checkpoints_read
        now_ms[0] += 120_000
        with pytest.raises(OperationalError):
            runner.run_once(block_ms=0)
        assert _max_lag(reader) == 180_000  # and on, while the outage lasts
    drain([runner])
    assert _max_lag(reader) == 0 and runner.lag.last.checkpoints_read


def test_a_runner_whose_kept_entries_were_taken_over_is_held_back_no_more(app: ProjectionApp, monkeypatch) -> None:
    """Held back, a runner whose kept entries another consumer took over (it stalled past the
    claim time) keeps nothing: it reads on, and the gauge says so. Before, the gauge stayed at 1
    until a batch of its own committed, which a consumer that reads nothing new never has."""
    write_matches(app.store, app.registry, _matches(2))
    runner = app.runner("stalled")
    runner.projector.max_attempts = 1
    reader = InMemoryMetricReader()
    runner.lag = LagMonitor(app.store, app.sql, meter=MeterProvider(metric_readers=[reader]).get_meter("t"))
    group = app.settings.runner.group
    with capture_logs() as logs:
        with monkeypatch.context() as outage:
            outage.setattr(app.sql, "connect", _refused)
            runner.projector.release()
            with pytest.raises(OperationalError):
                runner.run_once(block_ms=0)
            assert runner.deferred and _held_back_points(reader) == [1]
            other = PartitionConsumer.for_store(app.store, group, "other")
            for entry in runner.deferred.values():  # another replica's XAUTOCLAIM, while this one stalled
                app.store.client.xclaim(app.store.keys.partition_stream(entry.partition), group, "other", 0,
                                        [entry.entry_id], justid=True)
            while other.read(count=100, block_ms=0):  # and the rest of the streams: nothing new for this one
                pass
            runner._last_hold = 0.0  # noqa: SLF001 - its next hold is due
            runner.run_once(block_ms=0)  # nothing kept, nothing new: no batch to commit
        assert not runner.deferred and _held_back_points(reader) == [0]
    events = [line["event"] for line in logs if line["event"].startswith(("projection_reads_", "projection_entries_"))]
    assert events == ["projection_reads_held_back", "projection_entries_taken_over", "projection_reads_resumed"]


def test_an_idle_consumer_with_the_database_away_still_warns(app: ProjectionApp, monkeypatch) -> None:
    """A consumer with nothing to project never tries a batch, so only its lag measure meets the
    database away. Before the lag was measured from Redis that measure failed its round
    (`projection_round_failed`, at error); then the outage was told at info alone, which no
    alert on warnings saw."""
    runner = app.runner("idle")
    runner.config = replace(runner.config, lag_every_s=0)
    runner.lag = LagMonitor(app.store, app.sql)
    write_matches(app.store, app.registry, _matches(2))
    drain([runner])
    with monkeypatch.context() as outage:
        outage.setattr(app.sql, "connect", _refused)
        outage.setattr(app.sql.pool, "connect", _refused)
        with capture_logs() as logs:
            runner.run_once(block_ms=0)  # nothing new: no batch, only the lag's read of the checkpoints
    [line] = [line for line in logs if line["event"] == "projection_lag"]
    assert line["log_level"] == "warning" and "database is away" in line["reason"]


def test_a_partition_without_a_checkpoint_keeps_its_lag_through_an_outage(app: ProjectionApp, monkeypatch) -> None:
    """A partition nothing was projected from has no checkpoint: its lag is its whole stream's
    span. Before, the database away, it was measured as 0 (no checkpoint last read), so the
    gauge fell to 0 at the start of an outage for exactly the partitions furthest behind."""
    played = write_matches(app.store, app.registry, _matches(3))
    assert any(len({e.timestamp.ToMilliseconds() for e in p.envelopes}) > 1 for p in played)
    monitor = LagMonitor(app.store, app.sql)
    before = monitor.measure().by_partition  # nothing projected: no checkpoint at all
    assert max(before.values()) > 0
    with monkeypatch.context() as outage:
        outage.setattr(app.sql, "connect", _refused)
        outage.setattr(app.sql.pool, "connect", _refused)
        during = monitor.measure()
    assert not during.checkpoints_read and during.by_partition == before
