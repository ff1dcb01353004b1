"""Entries a consumer cannot project yet (deferred: an earlier event of the match is missing) stay
with the consumer that holds them while it lives: it keeps them from looking idle to the others of
the group, so they are never taken over from a live consumer, re-claimed by itself, or passed back
and forth between replicas every `CLAIM_IDLE_MS` (each logging `projection_claimed` and retrying
them). A dead consumer's entries move once, to one live consumer, and stay there; none is lost.
Before, every replica's XAUTOCLAIM took them as soon as they had sat `CLAIM_IDLE_MS` unacked, its
own holder's included."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import pytest
from structlog.testing import capture_logs

from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.readmodels import match_summary
from famiglia.readmodels.db import read_session
from services.projection.app import ProjectionApp
from services.projection.runner import ProjectionRunner

from .support import MatchSpec, Played, write_matches

pytestmark = pytest.mark.redis

IDLE_MS = 1500
"""The replicas' CLAIM_IDLE_MS here: an entry unacked this long may be taken over."""


def _with_a_gap(app: ProjectionApp) -> Played:
    """A match whose creation was taken and acked by a consumer writing elsewhere: its other
    entries wait for it in whichever consumer reads them (until `unpark`)."""
    [gap] = write_matches(app.store, app.registry, [MatchSpec("gap", ["ann", "bob"], seed=1)])
    thief = PartitionConsumer.for_store(app.store, app.settings.runner.group, "elsewhere")
    thief.ensure_groups("0")
    [taken] = thief.read(count=1)
    assert taken.envelope.match_id == "gap" and taken.envelope.seq == 1
    thief.ack([taken])
    return gap


def _replica(app: ProjectionApp, name: str) -> ProjectionRunner:
    runner = app.runner(name)
    runner.config = replace(runner.config, claim_idle_ms=IDLE_MS)  # claim_every_s is 0: every round
    return runner


def _held(runner: ProjectionRunner) -> set[str]:
    return {e.entry_id for e in runner.deferred.values() if e.envelope.match_id == "gap"}


def _owners(app: ProjectionApp) -> dict[str, str]:
    """Entry id -> the consumer Redis says holds it, for every pending entry of the group."""
    owners = {}
    for partition in range(app.store.partitions):
        key = app.store.keys.partition_stream(partition)
        for row in app.store.client.xpending_range(key, app.settings.runner.group, min="-", max="+", count=1000):
            owners[row["message_id"].decode()] = row["consumer"].decode()
    return owners


def _rounds_for(runners: list[ProjectionRunner], idle_periods: float,
                watch: Callable[[], object] | None = None) -> None:
    """Every replica runs rounds, as a deployment's do, until `idle_periods` times `IDLE_MS` have
    passed (how long entries may sit before they are taken over; not a bound asserted on)."""
    until = time.monotonic() + idle_periods * IDLE_MS / 1000
    while time.monotonic() < until:
        for runner in runners:
            runner.run_once(block_ms=0)
            if watch is not None:
                watch()
        time.sleep(0.01)


def test_a_live_consumers_waiting_entries_stay_with_it(app: ProjectionApp) -> None:
    gap = _with_a_gap(app)
    a, b = _replica(app, "a"), _replica(app, "b")
    a.run_once(block_ms=0)
    waiting = _held(a)
    assert len(waiting) == len(gap.envelopes) - 1
    seen_in_b: set[str] = set()
    with capture_logs() as logs:
        _rounds_for([b, a], 2.5, watch=lambda: seen_in_b.update(_held(b)))
    claimed = [line for line in logs if line["event"] == "projection_claimed"]
    assert not seen_in_b, "a live replica's waiting entries were taken over by another"
    assert not claimed, claimed  # nor re-claimed by their own holder, logged each time
    assert _held(a) == waiting
    assert all(_owners(app)[entry_id] == "a" for entry_id in waiting)


def test_a_dead_consumers_waiting_entries_move_once_and_stay(app: ProjectionApp) -> None:
    gap = _with_a_gap(app)
    dead = _replica(app, "dead")
    dead.run_once(block_ms=0)  # reads the waiting entries, then is never heard of again
    waiting = _held(dead)
    assert waiting
    b, c = _replica(app, "b"), _replica(app, "c")
    holders: list[str] = []

    def watch() -> None:
        for runner in (b, c):
            if _held(runner) and (not holders or holders[-1] != runner.name):
                holders.append(runner.name)

    with capture_logs() as logs:
        _rounds_for([b, c], 4.0, watch=watch)
    claimed = [line for line in logs if line["event"] == "projection_claimed"]
    assert len(holders) == 1, f"the waiting entries passed between replicas: {holders}"
    [holder] = [r for r in (b, c) if r.name == holders[0]]
    assert _held(holder) == waiting and not _held(c if holder is b else b)
    assert len(claimed) == 1 and claimed[0]["entries"] == len(waiting), claimed
    assert {_owners(app)[entry_id] for entry_id in waiting} == {holder.name}

    app.unpark("gap")  # what the operator does about the gap: the waiting entries are then done
    deadline = time.monotonic() + 30
    while not (holder.caught_up() and b.caught_up() and c.caught_up()):
        assert time.monotonic() < deadline, "the unparked match's entries were never done"
        for runner in (b, c):
            runner.run_once(block_ms=0)
    with read_session(app.sql) as session:
        summary = match_summary(session, "gap")
    assert summary is not None and summary.version == len(gap.envelopes)
