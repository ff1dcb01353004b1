"""A consumer group recreated under its consumers (gone — FLUSHALL of the group, `XGROUP DESTROY`
— and created again from the start by the first consumer that read: NOGROUP, XGROUP CREATE): its
new pending list lacks every entry the consumers kept deferred in memory, and it delivers them
again, to whichever consumer reads. The consumer that recreated it reads its pending entries again;
before session 33 the others kept their deferred entries, retried them alongside the consumer
the new group gave them to, and forgot them only at a later hold, if another held them by then.
Now a consumer forgets them as soon as it finds the group went back (a read of new entries gives
one it was given before) or its hold finds them pending under no one."""

from __future__ import annotations

from dataclasses import replace

import pytest
from structlog.testing import capture_logs

from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.readmodels import match_summary
from famiglia.readmodels.db import read_session
from services.projection.app import ProjectionApp
from services.projection.runner import ProjectionRunner

from .support import MatchSpec, drain, write_matches
from .test_claims import _held, _owners, _replica, _with_a_gap

pytestmark = pytest.mark.redis


def _destroy_groups(app: ProjectionApp) -> None:
    for partition in range(app.store.partitions):
        app.store.client.xgroup_destroy(app.store.keys.partition_stream(partition), app.settings.runner.group)


def _kept_not_pending_under(runner: ProjectionRunner, app: ProjectionApp) -> set[str]:
    """The entries `runner` keeps deferred that the group does not have pending under it."""
    owners = _owners(app)
    return {entry_id for _, entry_id in runner.deferred if owners.get(entry_id) != runner.name}


def test_a_consumer_forgets_its_waiting_entries_once_it_reads_from_a_group_recreated_by_another(
        app: ProjectionApp) -> None:
    gap = _with_a_gap(app)
    b = app.runner("b")  # holds its waiting entries every 20 s: not again in this test's rounds
    b.run_once(block_ms=0)
    b.run_once(block_ms=0)  # (its first hold)
    waiting = _held(b)
    assert len(waiting) == len(gap.envelopes) - 1
    _destroy_groups(app)
    thief = PartitionConsumer.for_store(app.store, app.settings.runner.group, "elsewhere")
    [taken] = thief.read(count=1)  # the group recreated from the start, the gap's first entry taken again
    assert taken.envelope.match_id == "gap" and taken.envelope.seq == 1
    thief.ack([taken])
    a = app.runner("a")
    a.config = replace(a.config, batch=2)  # the new group's first read leaves most of the history to b
    a.run_once(block_ms=0)  # the next two of the gap's entries, which b keeps waiting too
    assert _held(a) & waiting
    with capture_logs() as logs:
        b.run_once(block_ms=0)  # gives b entries it was given before: the group went back
    assert not _kept_not_pending_under(b, app), "b kept entries the new group does not have pending under it"
    assert not _held(a) & _held(b)
    assert [line["event"] for line in logs if line["event"] == "projection_reconnected"]
    app.unpark("gap")  # what the operator does about the gap: the waiting entries are then done
    both: set[tuple[int, str]] = set()
    for _ in range(60):
        if a.caught_up() and b.caught_up():
            break
        for runner in (a, b):
            runner.run_once(block_ms=0)
        both |= {key for key in a.deferred} & {key for key in b.deferred}
    assert a.caught_up() and b.caught_up()
    assert not both, f"entries in both consumers' hands: {sorted(both)}"
    with read_session(app.sql) as session:
        summary = match_summary(session, "gap")
    assert summary is not None and summary.version == len(gap.envelopes)


@pytest.mark.parametrize("recreated", [True, False], ids=["recreated", "gone"])
def test_a_hold_forgets_waiting_entries_pending_under_no_one(app: ProjectionApp, recreated: bool) -> None:
    """Found at the hold, before any read: the group is gone (the next read recreates it), or
    another consumer recreated it and it has delivered them to no one yet."""
    _with_a_gap(app)
    b = _replica(app, "b")
    b.run_once(block_ms=0)
    kept = len(b.deferred)
    assert kept and _held(b)
    _destroy_groups(app)
    if recreated:
        PartitionConsumer.for_store(app.store, app.settings.runner.group, "a").ensure_groups("0")
    with capture_logs() as logs:
        b.hold_deferred()
    assert not b.deferred
    assert [line["entries"] for line in logs if line["event"] == "projection_entries_gone"] == [kept]


def test_a_hold_keeps_waiting_entries_whose_pending_records_went_while_the_group_stayed(app: ProjectionApp) -> None:
    """An entry pending under no one in a group that did not go back (its consumer deleted, XGROUP
    DELCONSUMER: another replica's `forget_dead_consumers` looking at this consumer's name just
    before it read again; or an acked one) is delivered by the group to no one again: the consumer
    keeping it in memory is the only one left to project it. Session 33's hold forgot it as gone,
    and its match waited for good behind it."""
    [played] = write_matches(app.store, app.registry, [MatchSpec("m", ["ann", "bob"], seed=1)])
    first = PartitionConsumer.for_store(app.store, app.settings.runner.group, "a")
    first.ensure_groups("0")
    [creation] = first.read(count=1)  # "a" holds the creation, not projected yet
    assert creation.envelope.seq == 1
    b = _replica(app, "b")
    b.run_once(block_ms=0)  # the rest, waiting for the creation
    waiting = len(b.deferred)
    assert waiting == len(played.envelopes) - 1
    key = app.store.keys.partition_stream(creation.partition)
    app.store.client.xgroup_delconsumer(key, app.settings.runner.group, "b")
    with capture_logs() as logs:
        b.hold_deferred()
    assert len(b.deferred) == waiting
    assert not [line for line in logs if line["event"] == "projection_entries_gone"]
    a = app.runner("a")
    a.run_once(block_ms=0)  # reads its creation back and projects it
    a.flush_acks()
    b.process(list(b.deferred.values()))  # b's next try of the match
    b.flush_acks()
    with read_session(app.sql) as session:
        summary = match_summary(session, "m")
    assert summary is not None and summary.version == len(played.envelopes)


def test_a_consumer_claiming_every_round_reads_from_a_group_that_vanished(app: ProjectionApp) -> None:
    """A consumer takes over stale entries (XAUTOCLAIM) before it reads, and its read is what
    creates a vanished group again. The claim raised NOGROUP, so with `CLAIM_EVERY_S` 0 (this
    suite's, a claim each round) every round failed before its read, and the projection never
    projected again."""
    played = write_matches(app.store, app.registry, [MatchSpec(f"m{i}", ["ann", "bob"], seed=i) for i in range(3)])
    runner = app.runner("a")
    assert runner.config.claim_every_s == 0
    runner.run_once(block_ms=0)
    _destroy_groups(app)  # FLUSHALL of the groups, say: the next read creates them again, from the start
    for _ in range(10):  # each round failed at its claim, before the read that creates the group
        runner.run_once(block_ms=0)
    drain([runner])
    with read_session(app.sql) as session:
        versions = {p.match_id: match_summary(session, p.match_id).version for p in played}  # type: ignore[union-attr]
    assert versions == {p.match_id: len(p.envelopes) for p in played}
