"""The clock the dispatcher queues runs out when the deadline the command service shows a seat
says (`deadline_ms`): both come from the match's fold (`MatchState.deadlines`), so a restarted
dispatcher, or one that read several commands at once, queues the same moment."""

from __future__ import annotations

import pytest

from famiglia.engine import clock_key
from services.bots.dispatcher import Dispatcher
from services.command.app import Viewer
from tests.unit.bots.test_dispatcher import _Walk

GRACE = 0.5


def _restarted(walk: _Walk) -> Dispatcher:
    table = walk.table
    return Dispatcher(table.store, table.dispatcher.registry, table.tasks, stall_seconds=10,
                      clock_grace_seconds=GRACE, now=lambda: table.clock_now[0], wall=lambda: walk.wall[0],
                      live=table.dispatcher.live)


def test_a_restarted_dispatcher_keeps_when_an_unnamed_clock_began(monkeypatch) -> None:
    """A restarted dispatcher counted every unnamed clock from the match's last event: a seat
    asked 20 s before another seat's move (a Nothing Personal offer) got its whole clock again,
    20 s past the deadline the running dispatcher kept (and the seat is shown)."""
    walk = _Walk(monkeypatch, "nothing_personal", 3)
    engine = walk.match.engine
    for _ in range(400):
        asked = walk.asked()
        assert asked, "the match ended before a seat moved out of turn"
        state = walk.match.state
        timed = [p for p in asked if not clock_key(engine, state, p)]
        idle = [s for s in range(3) if s not in {p.seat for p in asked} and engine.legal_commands(state, s)]
        if timed and idle:
            seat = timed[0].seat
            walk.play(idle[0], engine.legal_commands(state, idle[0])[0], after=20.0)
            if seat not in walk.countdowns():
                continue  # no longer asked the same
            running = walk.countdowns()[seat]
            assert running == pytest.approx(timed[0].timeout_seconds - 20.0 + 2 * GRACE, abs=0.01)
            walk.table.tasks.clocks.clear()
            _restarted(walk).handle(walk.table.store.read(walk.match_id))
            assert walk.countdowns()[seat] == pytest.approx(running, abs=0.01)
            return
        walk.play(asked[0].seat, engine.timeout_command(state, asked[0].seat), after=1.0)
    raise AssertionError("no seat moved out of turn while another was asked")


@pytest.mark.parametrize(("game", "seats", "options"), [
    ("goodcritters", 4, {}), ("nostra_city", 3, {}), ("nothing_personal", 3, {}), ("grifters", 3, {})])
def test_the_deadline_a_seat_is_shown_is_when_the_dispatchers_clock_runs_out(
        monkeypatch, game: str, seats: int, options: dict[str, str]) -> None:
    """Through a walk with pauses, read at once and read late: every seat shown a deadline has
    a clock queued at the version, which fires one to two graces after it (one when queued as its
    decision began; a dispatcher that queues it later takes the delay off all but one grace)."""
    walk = _Walk(monkeypatch, game, seats, **options)
    app, engine, compared = walk.table.app, walk.match.engine, 0
    fires: dict[tuple[int, int], float] = {}  # (version, seat) -> when its clock task runs out
    queue = walk.table.tasks.clock

    def clock(match_id, seat, version, countdown, trace=None) -> None:
        fires[version, seat] = walk.wall[0] + countdown
        queue(match_id, seat, version, countdown, trace)

    walk.table.tasks.clock = clock  # type: ignore[method-assign]
    for step in range(160):
        asked = walk.asked()
        if not asked:
            break
        version = walk.table.version(walk.match_id)
        for seat in range(seats):
            shown = app.get_view(walk.match_id, Viewer(seat)).deadline_ms / 1000
            if not shown:  # not asked with a clock (or its answer is held back, NP-H9)
                assert seat not in {p.seat for p in asked}
                continue
            if step == 0 and (version, seat) not in fires:
                continue  # queued before the test listened
            assert shown + GRACE - 0.002 <= fires[version, seat] <= shown + 2 * GRACE + 0.002, (step, seat)
            compared += 1
        seat = asked[step % len(asked)].seat
        command = engine.timeout_command(walk.match.state, seat)
        if step % 3 == 1:  # the next command read late by the dispatcher
            walk.wall[0] += 4.0
            walk.n += 1
            app.submit(walk.match_id, Viewer(seat), f"walk-{walk.n}", command)
            walk.wall[0] += 1.5 * GRACE
            walk.table.pump(walk.match_id)
        else:
            walk.play(seat, command, after=7.0)
    assert compared > 30
