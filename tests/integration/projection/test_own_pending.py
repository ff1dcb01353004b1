"""A consumer's own pending entries, on a real Redis: a consumer restarted under its name, or one
whose connection broke, reads back every entry pending under it, not only the first `batch` of
each partition. Before, the rest were neither held nor in memory: they sat until an XAUTOCLAIM
(its own, logging `projection_claimed` for entries that were its own, or another replica's)
took them after `CLAIM_IDLE_MS`. Counted in rounds, not time: `CLAIM_IDLE_MS` is a minute here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace

import pytest
from structlog.testing import capture_logs

from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.readmodels import match_summary
from famiglia.readmodels.db import read_session
from services.projection.app import ProjectionApp
from services.projection.runner import ProjectionRunner

from .support import MatchSpec, write_matches
from .test_claims import _owners, _with_a_gap
from .test_projection import specs

pytestmark = pytest.mark.redis

ROUNDS = 40
"""Far more rounds than reading the entries back takes (a few); 40 rounds that wait for nothing
take well under `CLAIM_IDLE_MS` (60 s), so no XAUTOCLAIM takes any entry meanwhile."""


def _rounds(runner: ProjectionRunner, until: Callable[[], bool]) -> int:
    """Rounds until `until()` holds; how many it took (`ROUNDS`: it never did)."""
    for done in range(ROUNDS):
        if until():
            return done
        runner.run_once(block_ms=0)
    return ROUNDS


def _read_and_died(app: ProjectionApp) -> list:
    """Every entry read by consumer "a", none acked: it died there."""
    died = PartitionConsumer.for_store(app.store, app.settings.runner.group, "a")
    died.ensure_groups("0")
    left = []
    while batch := died.read(count=app.settings.runner.batch):
        left += batch
    return left


def test_a_restarted_consumer_projects_every_entry_it_left_pending_once(app: ProjectionApp) -> None:
    played = write_matches(app.store, app.registry, specs(6))
    left = _read_and_died(app)
    per_partition = Counter(e.partition for e in left)
    assert max(per_partition.values()) > 2 * app.settings.runner.batch  # more than one read back gives
    restarted = app.runner("a")
    with capture_logs() as logs:
        rounds = _rounds(restarted, restarted.caught_up)
    assert rounds < ROUNDS, f"{restarted.consumer.pending_count()} of its own entries left pending"
    assert restarted.projected == len(left) == sum(len(p.envelopes) for p in played)  # each once
    assert not [line for line in logs if line["event"] == "projection_claimed"]
    with read_session(app.sql) as session:
        for p in played:
            summary = match_summary(session, p.match_id)
            assert summary is not None and summary.version == len(p.envelopes), p.match_id


def test_a_consumer_whose_connection_broke_keeps_every_waiting_entry_it_holds(app: ProjectionApp) -> None:
    gap = _with_a_gap(app)
    [more] = write_matches(app.store, app.registry, [MatchSpec("later", ["cid", "dee"], seed=2)])
    runner = app.runner("a")
    runner.config = replace(runner.config, batch=2)  # the match's waiting entries are few
    _rounds(runner, lambda: False)  # reads it all, projects what it can
    waiting = {e.entry_id for e in runner.deferred.values() if e.envelope.match_id == "gap"}
    assert len(waiting) == len(gap.envelopes) - 1 > 2 * runner.config.batch
    app.store.client.client_kill_filter(_type="normal", skipme=True)  # a Redis restart drops every connection
    with capture_logs() as logs:
        _rounds(runner, lambda: False)
    assert [line["event"] for line in logs if line["event"] == "projection_reconnected"]
    held = {e.entry_id for e in runner.deferred.values() if e.envelope.match_id == "gap"}
    assert held == waiting, f"{len(waiting - held)} waiting entries left to XAUTOCLAIM"
    assert not [line for line in logs if line["event"] == "projection_claimed"]
    assert {_owners(app)[entry_id] for entry_id in waiting} == {"a"}
    with read_session(app.sql) as session:
        summary = match_summary(session, "later")
    assert summary is not None and summary.version == len(more.envelopes)


def _away(app: ProjectionApp, entries: list, minutes: int) -> None:
    """As if the consumer holding `entries` had been down `minutes`: their idle time set so (XCLAIM
    to the same consumer with IDLE), every one past `CLAIM_IDLE_MS`, without waiting that long."""
    owners = _owners(app)
    for entry in entries:
        key = app.store.keys.partition_stream(entry.partition)
        app.store.client.xclaim(key, app.settings.runner.group, owners[entry.entry_id], 0, [entry.entry_id],
                                idle=minutes * 60_000, justid=True)


def test_another_replica_takes_none_of_a_restarted_consumers_leftovers_once_it_started(app: ProjectionApp) -> None:
    """Its first round holds every entry it left pending, not only the `batch` a partition it reads
    back: until session 33 the rest, idle since it went down, went to the first replica whose
    XAUTOCLAIM came (moved once, not lost, but projected by another with a claim logged)."""
    played = write_matches(app.store, app.registry, specs(6))
    left = _read_and_died(app)
    assert max(Counter(e.partition for e in left).values()) > 2 * app.settings.runner.batch
    _away(app, left, minutes=10)
    restarted, other = app.runner("a"), app.runner("b")  # claim_every_s 0: b claims in every round
    with capture_logs() as logs:
        restarted.run_once(block_ms=0)  # started: reads back the first `batch` of each partition
        assert other.consumer.claim_stale(app.settings.runner.claim_idle_ms, count=len(left)) == []
        for _ in range(ROUNDS):
            if restarted.caught_up():
                break
            other.run_once(block_ms=0)
            restarted.run_once(block_ms=0)
    assert restarted.caught_up(), f"{restarted.consumer.pending_count()} of its own entries left pending"
    assert other.projected == 0 and restarted.projected == len(left)
    assert not [line for line in logs if line["event"] == "projection_claimed"]
    held = [line for line in logs if line["event"] == "projection_pending_held"]
    assert [line["entries"] for line in held] == [len(left)]
    with read_session(app.sql) as session:
        for p in played:
            summary = match_summary(session, p.match_id)
            assert summary is not None and summary.version == len(p.envelopes), p.match_id


def test_a_restarted_consumer_whose_first_read_back_failed_reads_back_in_the_next_round(
        app: ProjectionApp, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, the first round marked the consumer started before its read back: one that failed
    (Redis away for a moment) was never done again, the entries left to XAUTOCLAIM."""
    write_matches(app.store, app.registry, specs(2))
    died = PartitionConsumer.for_store(app.store, app.settings.runner.group, "a")
    died.ensure_groups("0")
    left = died.read(count=app.settings.runner.batch)
    assert left
    restarted = app.runner("a")
    real = restarted.consumer.read_pending
    calls = []

    def flaky(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args)
        if len(calls) == 1:
            raise ConnectionError("Redis away for a moment")
        return real(*args, **kwargs)

    monkeypatch.setattr(restarted.consumer, "read_pending", flaky)
    with pytest.raises(ConnectionError):
        restarted.run_once(block_ms=0)
    restarted.run_once(block_ms=0)
    assert {(e.partition, e.entry_id) for e in left} <= set(restarted.deferred) | {
        (e.partition, e.entry_id) for e in restarted.unacked}


def test_a_reconnect_whose_read_back_fails_is_told_with_the_waiting_entries_it_dropped(
        app: ProjectionApp, monkeypatch: pytest.MonkeyPatch) -> None:
    """Redis restarting drops the connection, and often fails the first read back too: the
    warning that the consumer dropped the entries it kept came only after a read back that
    succeeded, so a reconnect whose first read back failed was never told (the next round read
    them back with `projection_pending_held` at info alone) and its count was lost."""
    gap = _with_a_gap(app)
    runner = app.runner("a")
    _rounds(runner, lambda: False)
    kept = len(runner.deferred)
    assert kept == len(gap.envelopes) - 1
    app.store.client.client_kill_filter(_type="normal", skipme=True)  # a Redis restart drops every connection
    real = runner.consumer.hold_pending
    calls = []

    def flaky(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args)
        if len(calls) == 1:
            raise ConnectionError("Redis still loading")
        return real(*args, **kwargs)

    monkeypatch.setattr(runner.consumer, "hold_pending", flaky)
    with capture_logs() as logs:
        with pytest.raises(ConnectionError):
            runner.run_once(block_ms=0)
        runner.run_once(block_ms=0)  # reads them back
    told = [line for line in logs if line["event"] == "projection_reconnected"]
    assert [line["deferred_dropped"] for line in told] == [kept]
    assert told[0]["log_level"] == "warning"
    assert len(runner.deferred) == kept
