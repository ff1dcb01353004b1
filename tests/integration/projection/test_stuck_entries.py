"""A gap nothing fills (an earlier event of a match taken and acked by a consumer that never
projected it here: a projection of another database in the same group, a stream trimmed before
it was read) is told by `projection_entries_stuck`, naming the match, however busy the other
matches keep the consumer. The warning once came only after 500 rounds in a row that projected
nothing else: on a deployment in play, never, while `projection_lag` read 0."""

from __future__ import annotations

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
    """What the warning's reader does, the consumer running: its waiting entries are then done."""
    runner = app.runner()
    [gap] = write_matches(app.store, app.registry, [MatchSpec("gap", ["ann", "bob"], seed=1)])
    thief = PartitionConsumer.for_store(app.store, runner.config.group, "elsewhere")
    thief.ensure_groups("0")
    thief.ack(thief.read(count=1))
    for _ in range(5):
        runner.run_once(block_ms=0)
    assert runner.deferred and runner.projected == 0
    outcome = app.unpark("gap")
    assert len(outcome.applied) == len(gap.envelopes) and not outcome.deferred
    for _ in range(5):
        runner.run_once(block_ms=0)
    assert not runner.deferred
