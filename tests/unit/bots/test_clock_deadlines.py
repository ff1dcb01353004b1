"""The clock the dispatcher queues runs out when the deadline the command service shows a seat
says (`deadline_ms`): both come from the match's fold (`MatchState.deadlines`), so a restarted
dispatcher, or one that read several commands at once, queues the same moment."""

from __future__ import annotations

import random

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


def test_a_person_chatting_while_asked_does_not_put_off_its_default_NP_D1(monkeypatch) -> None:
    """NP-D1, one timeout a decision: the clock the dispatcher queues for a seat that chats,
    offers or shakes down while asked (NP-R6: none answers its decision) still runs out when its
    decision, asked once, does, here 60 s after round 1's first Commission turn began (NP-D4).
    Each of them used to restart it, so that a person chatting every 50 s was never timed out;
    a restarted dispatcher, folding the match anew, agrees."""
    from famiglia.nothing_personal.v1 import nothing_personal_pb2 as np

    walk = _Walk(monkeypatch, "nothing_personal", 3)
    while not (walk.match.state.phase == "commission" and walk.match.state.round == 1):
        seat = walk.asked()[0].seat
        walk.play(seat, walk.match.engine.timeout_command(walk.match.state, seat), after=1.0)
    seat = walk.asked()[0].seat
    asked = walk.wall[0]
    assert walk.countdowns() == {seat: pytest.approx(60.0 + GRACE, abs=0.01)}
    other = (seat + 1) % 3
    talk = [np.Command(send_chat=np.SendChat(text="wait")), walk.kinds(seat)["shakedown"][0],
            np.Command(send_chat=np.SendChat(text="wait more", to=[other]))]
    for command in talk:
        walk.play(seat, command, after=15.0)
        assert [p.seat for p in walk.asked()] == [seat]
        left = asked + 60.0 - walk.wall[0]  # the decision's own: a dispatcher taking it late takes the delay off
        assert walk.countdowns() == {seat: pytest.approx(left + 2 * GRACE, abs=0.01)}, command.WhichOneof("kind")
    running = walk.countdowns()[seat]
    walk.table.tasks.clocks.clear()
    _restarted(walk).handle(walk.table.store.read(walk.match_id))
    assert walk.countdowns() == {seat: pytest.approx(running, abs=0.01)}


@pytest.mark.parametrize(("game", "seats", "options", "untimed"), [
    ("nostra_city", 3, {"turn_timeout_s": "0"}, {"business", "meeting", "trial"}),   # NC-D02
    ("grifters", 2, {"timeouts": "0,30"}, {"play"}),                                  # GR-D06
])
def test_a_clock_option_of_0_seconds_is_no_clock_for_its_decisions(
        monkeypatch, game: str, seats: int, options: dict[str, str], untimed: set[str]) -> None:
    """0 seconds is no clock (docs/engines.md, "Clocks"): a seat asked such a decision is shown no
    deadline and gets no clock task, so a person there is waited for; the game's other clock
    still runs, shown as it is queued."""
    walk = _Walk(monkeypatch, game, seats, **options)
    app, engine, pick = walk.table.app, walk.match.engine, random.Random(5)
    met: set[bool] = set()
    for _ in range(300):
        pendings = engine.pending(walk.match.state)
        if not pendings:
            break
        queued = walk.countdowns()
        for p in pendings:
            shown = app.get_view(walk.match_id, Viewer(p.seat)).deadline_ms
            timed = p.label not in untimed
            assert (p.timeout_seconds > 0, shown > 0, p.seat in queued) == (timed, timed, timed), p
            met.add(timed)
        seat = pendings[0].seat
        walk.play(seat, pick.choice(engine.legal_commands(walk.match.state, seat, limit=16)), after=1.0)
    assert met == {True, False}
