"""Retention, lag and consumer clean-up rules against a real Redis: each pins what a mutation of
the code once changed without any other test noticing."""
from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy import update

from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.readmodels.db import write_session
from famiglia.readmodels.tables import Match
from services.projection.app import ProjectionApp
from services.projection.lag import LagMonitor
from services.projection.projector import Projector
from services.projection.retention import RetentionSweep
from services.projection.runner import ProjectionRunner
from tests.integration.projection.support import Clock, write_matches
from tests.integration.projection.test_projection import drain_app, specs

pytestmark = pytest.mark.redis
HOUR_MS = 3_600_000


def _sweep(app: ProjectionApp, now_ms: int, **kw) -> RetentionSweep:
    return RetentionSweep(app.store, app.sql, HOUR_MS, clock=lambda: now_ms / 1000, **kw)


# pins retention `if stored != projected` (the store has fewer events than were projected)
def test_a_finished_match_whose_store_lost_events_keeps_its_stream(app: ProjectionApp) -> None:
    played = write_matches(app.store, app.registry, specs(2))
    drain_app(app)
    odd = played[0]
    with write_session(app.sql) as session:  # projected past what the store holds now (it went back)
        session.execute(update(Match).where(Match.match_id == odd.match_id).values(version=len(odd.envelopes) + 1))
    report = _sweep(app, max(p.finished_ms for p in played) + HOUR_MS).sweep()
    assert (report.trimmed, report.skipped) == (1, 1)
    assert len(app.store.read(odd.match_id)) == len(odd.envelopes)


# pins retention `looked >= self.most`
def test_one_sweep_looks_at_most_matches_and_the_next_goes_on(app: ProjectionApp) -> None:
    played = write_matches(app.store, app.registry, specs(5))
    drain_app(app)
    now = max(p.finished_ms for p in played) + HOUR_MS
    first = _sweep(app, now, batch=1, most=2).sweep()
    assert (first.looked_at, first.trimmed) == (2, 2)
    second = _sweep(app, now, batch=1, most=10).sweep()
    assert (second.looked_at, second.trimmed) == (3, 3)


# pins lag before anything was projected is measured from the oldest waiting event
def test_lag_before_any_checkpoint_is_newest_minus_oldest_waiting_event(app: ProjectionApp) -> None:
    played = write_matches(app.store, app.registry, specs(3), clock=Clock(step_ms=250))
    times = [e.timestamp.ToMilliseconds() for p in played for e in p.envelopes]
    report = LagMonitor(app.store, app.sql).measure()
    assert 0 < report.max_lag_ms <= max(times) - min(times)


# pins lag `max(0, ...)`: a stream's times need not grow with its entries
def test_an_event_older_than_the_one_projected_last_is_no_negative_lag(app: ProjectionApp) -> None:
    """A command process whose clock is behind writes an event after the newest projected one,
    with an earlier time: the partition is behind by nothing yet (0), never by a negative time."""
    from famiglia.eventstore.envelopes import match_created_envelope
    from famiglia.v1 import envelope_pb2

    played = write_matches(app.store, app.registry, specs(2))
    drain_app(app)
    partition = app.store.partition_of(played[0].match_id)
    late = next(m for m in (f"late-{i}" for i in range(1000)) if app.store.partition_of(m) == partition)
    oldest_ms = min(e.timestamp.ToMilliseconds() for p in played for e in p.envelopes)
    app.store.append(late, 0, [match_created_envelope(late, envelope_pb2.MatchCreated(game_id="dice_race", seats=2),
                                                      now_ms=oldest_ms - 60_000)])
    report = LagMonitor(app.store, app.sql).measure()
    assert report.by_partition[partition] == 0 and report.max_lag_ms == 0


def test_a_consumer_that_reads_between_the_cleanups_look_and_its_delete_keeps_its_entries(
        app: ProjectionApp, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cleanup looked (XINFO CONSUMERS: nothing pending, idle long enough), then deleted: a
    consumer restarted under that name that read in between lost its pending records with it
    (XGROUP DELCONSUMER drops them), entries the group then gives to no one again. The look is
    made again in the delete's own script."""
    group = app.settings.runner.group
    back = PartitionConsumer.for_store(app.store, group, "back")
    back.ensure_groups("0")
    write_matches(app.store, app.registry, specs(1))
    assert back.ack(back.read(count=100))  # known to the group, holding nothing
    write_matches(app.store, app.registry, specs(3)[1:])
    live = ProjectionRunner(app.store, Projector(app.sql, app.registry),
                            replace(app.settings.runner_config("live"), forget_idle_ms=0))
    live.start()
    client, read, seen = app.store.client, [], {}
    looked = client.xinfo_consumers

    def look(key, name):  # type: ignore[no-untyped-def]
        if not seen:  # every partition looked at first, then "back" reads: the race, made certain
            seen.update({k: looked(k, name) for k in app.store.partitions_keys()})
            read.extend(back.read(count=100))
        return seen[key]

    monkeypatch.setattr(client, "xinfo_consumers", look)
    live.forget_dead_consumers()
    assert read
    assert live.consumer.pending_count() == len(read), "the cleanup dropped entries pending under a live consumer"


def _xinfo_consumers_calls(app: ProjectionApp) -> int:
    stats = app.store.client.info("commandstats")
    return int(stats.get("cmdstat_xinfo|consumers", {}).get("calls", 0))


def test_the_cleanup_lists_a_partitions_consumers_a_few_times_however_many_it_forgets(app: ProjectionApp) -> None:
    """Restarts under fresh names (a crash loop) leave many dead consumers. The cleanup's script
    listed every consumer (XINFO CONSUMERS) once for each one it removed, so n of them cost n
    listings of n a partition, with Redis blocked: 3,000 were ~7 s of Redis a partition and ~9 s of
    the consumer's round. Now one script call looks at up to `HOLD_PAGE` candidates with one listing."""
    group = app.settings.runner.group
    dead = [f"crashed-{i}" for i in range(60)]
    live = ProjectionRunner(app.store, Projector(app.sql, app.registry),
                            replace(app.settings.runner_config("live"), forget_idle_ms=0))
    live.start()
    with app.store.client.pipeline(transaction=False) as pipe:
        for key in app.store.partitions_keys():
            for name in dead:
                pipe.xgroup_createconsumer(key, group, name)
        pipe.execute()
    before = _xinfo_consumers_calls(app)
    assert set(live.forget_dead_consumers()) == set(dead)
    # the runner's own look and one script call a partition (60 candidates: one page)
    assert _xinfo_consumers_calls(app) - before <= 2 * app.store.partitions
    for key in app.store.partitions_keys():
        assert {c["name"] for c in app.store.client.xinfo_consumers(key, group)} <= {b"live", "live"}


# pins runner.forget_dead_consumers never deletes a consumer holding pending entries
def test_an_idle_consumer_holding_entries_is_never_forgotten(app: ProjectionApp) -> None:
    write_matches(app.store, app.registry, specs(2))
    dead = app.runner("dead")
    dead.start()
    held = dead.consumer.read(100, block_ms=0)  # read, then the process died before projecting
    assert held
    config = replace(app.settings.runner_config("live"), forget_idle_ms=0)
    live = ProjectionRunner(app.store, Projector(app.sql, app.registry), config)
    live.start()
    assert "dead" not in live.forget_dead_consumers()
    assert live.consumer.pending_count() == len(held)
