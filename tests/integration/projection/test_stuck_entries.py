"""A gap nothing fills (an earlier event of a match taken and acked by a consumer that never
projected it here: a projection of another database in the same group, a stream trimmed before
it was read) is told by `projection_entries_stuck`, naming the match, however busy the other
matches keep the consumer. The warning once came only after 500 rounds in a row that projected
nothing else: on a deployment in play, never, while `projection_lag` read 0."""

from __future__ import annotations

from dataclasses import replace

from structlog.testing import capture_logs

from famiglia.eventstore.consumer import PartitionConsumer
from services.projection.app import ProjectionApp

from .support import MatchSpec, write_matches


def test_a_gap_is_told_while_other_matches_are_projected(app: ProjectionApp) -> None:
    runner = app.runner()
    now = [1000.0]  # a clock that moves only when the test says
    runner.clock = lambda: now[0]
    [gap] = write_matches(app.store, app.registry, [MatchSpec("gap", ["ann", "bob"], seed=1)])
    thief = PartitionConsumer.for_store(app.store, runner.config.group, "elsewhere")
    thief.ensure_groups("0")
    [taken] = thief.read(count=1)  # the match's creation, acked by a consumer writing elsewhere
    assert taken.envelope.match_id == "gap" and taken.envelope.seq == 1
    thief.ack([taken])
    stuck = []
    with capture_logs() as logs:
        for i in range(8):
            write_matches(app.store, app.registry, [MatchSpec(f"busy{i}", ["cy", "dee"], seed=i)])
            before = runner.projected
            for _ in range(50):
                runner.run_once(block_ms=0)
            assert runner.projected > before  # the others are projected meanwhile
            assert runner.deferred  # and the match with a gap waits
            now[0] += 30
            stuck = [line for line in logs if line["event"] == "projection_entries_stuck"]
    assert stuck, "a gap that lasted four minutes was never told"
    assert stuck[0]["match_id"] == "gap" and stuck[0]["seq"] == 2, stuck[0]
    assert len(stuck) <= 4, stuck  # told again now and then, not every round
    assert len(gap.envelopes) > 1


def test_unpark_projects_a_match_with_a_gap_from_its_stream(app: ProjectionApp) -> None:
    """What the warning's reader does, the consumer running: its waiting entries are then done,
    at their next try (within `retry_max_ms`)."""
    runner = app.runner()
    now = [1000.0]
    runner.clock = lambda: now[0]
    [gap] = write_matches(app.store, app.registry, [MatchSpec("gap", ["ann", "bob"], seed=1)])
    thief = PartitionConsumer.for_store(app.store, runner.config.group, "elsewhere")
    thief.ensure_groups("0")
    thief.ack(thief.read(count=1))
    for _ in range(5):
        runner.run_once(block_ms=0)
    assert runner.deferred and runner.projected == 0
    outcome = app.unpark("gap")
    assert len(outcome.applied) == len(gap.envelopes) and not outcome.deferred
    now[0] += runner.config.retry_max_ms / 1000
    for _ in range(5):
        runner.run_once(block_ms=0)
    assert not runner.deferred


def test_a_match_with_a_gap_is_tried_again_with_a_backoff(app: ProjectionApp) -> None:
    """Its entries are tried after 20 ms, then twice as long each time, up to `retry_max_ms`;
    entries of the match arriving meanwhile after the ones waiting wait with them, while one
    before them (what they may wait for) has the match tried at once. Before, every round
    tried every waiting entry again, one more transaction a round for as long as the gap lasted."""
    runner = app.runner()
    runner.config = replace(runner.config, batch=2, retry_max_ms=5000)
    now = [1000.0]
    runner.clock = lambda: now[0]
    tries: list[float] = []
    project = runner.projector.project

    def counted(entries):  # type: ignore[no-untyped-def]
        if any(e.envelope.match_id == "gap" for e in entries):
            tries.append(now[0])
        return project(entries)

    runner.projector.project = counted  # type: ignore[method-assign]
    [gap] = write_matches(app.store, app.registry, [MatchSpec("gap", ["ann", "bob"], seed=1)])
    holder = PartitionConsumer.for_store(app.store, runner.config.group, "holder")
    holder.ensure_groups("0")
    [first] = holder.read(count=1)  # the match's creation, in another consumer's hands
    assert first.envelope.match_id == "gap" and first.envelope.seq == 1
    for _ in range(len(gap.envelopes)):  # two entries a round, the clock standing still
        runner.run_once(block_ms=0)
    assert len(runner.deferred) == len(gap.envelopes) - 1 and len(tries) == 1

    for _ in range(1200):  # twelve seconds in steps of 10 ms
        now[0] += 0.01
        runner.run_once(block_ms=0)
    waits = [b - a for a, b in zip(tries, tries[1:], strict=False)]  # each up to a step late
    assert all(abs(wait - 0.02 * 2**i) < 0.011 for i, wait in enumerate(waits[:8])), waits
    assert all(4.99 < wait < 5.011 for wait in waits[8:]) and 9 <= len(waits) < 15, waits
    assert runner.deferred and runner.projected == 0

    holder_gone = replace(runner.config, claim_idle_ms=0)  # the holder died: its entry comes here
    runner.config = holder_gone
    runner.run_once(block_ms=0)  # the match is tried at once, its wait not over
    assert not runner.deferred and runner.projected == len(gap.envelopes)
