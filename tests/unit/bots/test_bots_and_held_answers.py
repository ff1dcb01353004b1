"""Bots in Nothing Personal, whose window answers are held back from the stream (NP-H9).

A match with a person at the table holds its window answers back until the window resolves
(a match of bots only holds nothing: there is nobody to hide them from). The dispatcher reads
the stream, so such a match must never wait on what it cannot see: a task whose answers were
held plays on the seats of its own the game still asks (a bot that made an optional move in a
window, say), a lease that has used its moves is still playing while answers are held, and the
stall timer counts the held answers. Random bots make such moves all the time; every match here
is played to its end by the dispatcher and the worker's own code, in process, the people's
seats by the test.
"""

from __future__ import annotations

import random

import pytest

from famiglia.engine.registry import default_registry
from famiglia.v1 import envelope_pb2
from services.bots import handlers
from services.command.app import Viewer
from tests.profile import examples

from .test_bot_batches import LocalWorker
from .test_bot_lease import play, table_with

GAME = "nothing_personal"


@pytest.mark.parametrize("chained", [True, False])
@pytest.mark.parametrize("most", [0, 1, 32])
@pytest.mark.parametrize(("seats", "persons"), [(3, (0,)), (4, (1,)), (5, (0, 3)), (4, (0, 1, 2))])
@pytest.mark.parametrize("seed", range(11, 11 + examples(2, 30)))
def test_matches_with_people_and_bots_play_to_the_end(chained: bool, most: int, seats: int,
                                                      persons: tuple[int, ...], seed: int) -> None:
    """Every table shape, leases of none, one and many moves, with and without SubmitCommands;
    a request id per case, so a case plays the same match every run."""
    handlers._REACHED.clear()
    table = table_with(most, registry=default_registry())
    info = [envelope_pb2.SeatInfo(seat=s, bot=True, policy="random") for s in range(seats) if s not in persons]
    match_id = table.app.create_match(GAME, seats, seed=seed, seat_info=info, tournament_id="t1",
                                      request_id=f"held-{seed}-{seats}-{persons}-{most}-{chained}").match_id
    table.pump(match_id)
    worker = LocalWorker(table, chained=chained)
    staged, stage = [], table.store.stage

    def counting_stage(*args, **kwargs):
        staged.append(args[0])
        return stage(*args, **kwargs)

    table.store.stage = counting_stage  # type: ignore[method-assign]
    rng = random.Random(seed)
    done, stalls, steps = 0, 0, 0
    outcomes: list[str] = []
    match = table.app.matches.get(match_id).match
    while match_id in table.dispatcher.matches:
        steps += 1
        assert steps < 20_000, "the match does not end"
        asked = [p.seat for p in match.engine.pending(match.state) if p.seat in persons]
        if done < len(table.tasks.decisions):
            outcomes += play(worker, GAME, task=done)
            done += 1
        elif asked:
            person = rng.choice(asked)
            legal = table.app.legal_commands(match_id, Viewer(person), limit=32).commands
            table.app.submit(match_id, Viewer(person), f"person-{steps}", rng.choice(legal))
        else:  # nothing queued and nobody to play: only the stall timer is left
            stalls += 1
            table.clock_now[0] += 1000
            assert table.dispatcher.check_stalls() > 0, "the match waits on nothing the dispatcher sees"
        table.pump(match_id)
    assert table.observer.finished == [match_id]
    assert staged  # the walk met held answers
    assert stalls == 0  # no bot decision waited for the stall timer
    if most > 1:  # a lease: no task queued for what it still played (a command made in a
        # window goes in after padding: a lease that took that for someone else's ended early,
        # and tasks raced it, stale or duplicate by the thousand)
        assert "duplicate" not in outcomes and "stale" not in outcomes, outcomes


def test_a_seat_refused_in_a_task_does_not_stop_the_other_seats_of_it() -> None:
    """The walk of seed 18 (a soak case): a task of two seats, queued while another task
    still played the first one's answer, which is held back; that seat's command is refused
    (it has answered), and the other seat's turn must still be played, or the match waits
    for the stall timer."""
    test_matches_with_people_and_bots_play_to_the_end(True, 0, 4, (1,), 18)


def test_a_match_of_bots_only_holds_nothing_back() -> None:
    handlers._REACHED.clear()
    table = table_with(32, registry=default_registry())
    info = [envelope_pb2.SeatInfo(seat=s, bot=True, policy="random") for s in range(3)]
    match_id = table.app.create_match(GAME, 3, seed=3, seat_info=info, tournament_id="t1").match_id
    table.pump(match_id)
    worker = LocalWorker(table, chained=True)
    table.store.stage = None  # type: ignore[assignment,method-assign]  # any stage would fail
    done = 0
    while match_id in table.dispatcher.matches:
        assert done < len(table.tasks.decisions), "nothing queued"
        play(worker, GAME, task=done)
        done += 1
        table.pump(match_id)
    assert table.observer.finished == [match_id]


def _window_of_three_bots(seed: int):
    """A 4-seat match, a person at seat 0 and three random bots, walked to a card window that
    asks every bot and that nobody has answered, with the dispatcher's batch queued for it:
    (table, match id, the batch's seats in order, the version) or None."""
    from famiglia.nothing_personal.v1 import nothing_personal_pb2 as np_pb

    from .test_dispatcher import Table

    table = Table(registry=default_registry())
    info = [envelope_pb2.SeatInfo(seat=s, bot=True, policy="random") for s in (1, 2, 3)]
    match_id = table.app.create_match(GAME, 4, seed=seed, seat_info=info, tournament_id="t1").match_id
    table.pump(match_id)
    rng = random.Random(seed)
    hot = table.app.matches.get(match_id)
    for step in range(3000):
        m = hot.match
        w = m.state.window
        if m.finished:
            return None
        if w is not None and w.kind == "card" and {1, 2, 3} <= set(w.seats) and m.state.round >= 1 \
                and all(w.answers[s] is None for s in w.seats):
            decision, then = table.tasks.decisions[-1], table.tasks.thens[-1]
            order = [decision[1]] + [s for s, _, _ in then]
            if decision[2] == m.version and len(order) == 3:
                return table, match_id, order, m.version
        seat = rng.choice([p.seat for p in m.engine.pending(m.state)])
        legal = table.app.legal_commands(match_id, Viewer(seat), limit=32).commands
        table.app.submit(match_id, Viewer(seat), f"walk-{step}",
                         rng.choice([c for c in legal if c.WhichOneof("kind") != "set_auto_pass"]
                                    or [np_pb.Command(**{"pass": np_pb.Pass()})]))
        table.pump(match_id)
    return None


def _first_window_of_three_bots(asking_the_person: bool = False):
    """`_window_of_three_bots` at the first seed that reaches one (asking seat 0 too, if told)."""
    for seed in range(1, 40):
        found = _window_of_three_bots(seed)
        if found is not None and (
                not asking_the_person or 0 in found[0].app.matches.get(found[1]).match.state.window.seats):
            return found
    raise AssertionError("no seed reached a card window asking every bot"
                         + (" and the person" if asking_the_person else ""))


def test_np_h9_the_dispatcher_follows_a_batch_whose_held_answer_a_public_entry_wrote_out() -> None:
    """NP-H9: a chain names each entry by the version the table can see (a held answer moves
    none), not by its position (which counted every held answer, a person's too, and told the
    table how many had come in). A batch whose first seat's answer is held and whose second
    seat then makes a public command (a shakedown, NP-R6) in the window is still the batch's
    own to the dispatcher: nothing is queued for its third seat, which the task plays next."""
    from famiglia.nothing_personal.v1 import nothing_personal_pb2 as np_pb
    from services.bots.payload import bot_command_id

    table, match_id, order, version = _first_window_of_three_bots()
    first, second, third = order
    m = table.app.matches.get(match_id).match
    queued = len(table.tasks.decisions)
    answered = table.app.submit(match_id, Viewer(first), bot_command_id(match_id, version, first),
                                np_pb.Command(**{"pass": np_pb.Pass()}), version)
    assert answered.held and answered.version == version
    table.pump(match_id)
    card = m.state.hands[second][0]
    shaken = table.app.submit(match_id, Viewer(second), bot_command_id(match_id, version, second),
                              np_pb.Command(shakedown=np_pb.Shakedown(cards=[card])), version)
    assert not shaken.held and shaken.version > version + 4  # behind a block of four slots
    table.pump(match_id)
    tracked = table.dispatcher.matches[match_id]
    assert tracked.seat_batch is not None and tracked.seat_batch.next == 2
    assert (shaken.version, third) in tracked.sent
    assert len(table.tasks.decisions) == queued  # the task plays the third seat: nothing queued for it


@pytest.mark.parametrize(("chained", "seats", "persons", "seed"), [(True, 3, (0,), 11), (False, 3, (0,), 11)])
def test_a_seat_whose_answer_another_task_gave_plays_nothing_else_in_its_place(
        monkeypatch: pytest.MonkeyPatch, chained: bool, seats: int, persons: tuple[int, ...], seed: int) -> None:
    """A task playing on after held answers (`:h`) and a task the dispatcher queued for the same
    seat at the same version, from a stream where it was still asked (it had made an optional
    move in the window), both make that seat's one decision, under two command ids: the second's
    answer is refused (NP-X21: it has answered). Its fallback, another listed command, then went
    in in its place: an optional move no policy chose (NP-D7's `set_auto_pass`, changing the
    bot's standing auto-pass for the rest of the match, a shakedown, an offer). A seat no longer
    asked now plays no fallback. Fails if a bot seat's fallback (`:f`) goes in at a version after
    its own answer was held back there. (The second task's own choice from its payload may still
    go in when it is an optional move, which a seat not asked may make: its policy chose it.)"""
    from services.bots.payload import HELD_FOLLOW_UP
    from services.command.app import CommandApp

    submit = CommandApp._submit
    answered: set[tuple[int, int]] = set()
    after_answer: list[tuple[str, int, int]] = []
    follow_ups_again: list[str] = []  # a turn played on whose id an earlier one of the seat took

    def watching(self, hot, viewer, command_id, command, expected_version, omit_events):
        before = hot.match.public_version
        done = submit(self, hot, viewer, command_id, command, expected_version, omit_events)
        if command_id.endswith(HELD_FOLLOW_UP) and done.duplicate:
            follow_ups_again.append(command_id)
        if command_id.startswith("bot:") and not done.duplicate:
            if (viewer.seat, before) in answered and command_id.endswith(":f"):
                after_answer.append((command_id, viewer.seat, before))
            if done.held:
                answered.add((viewer.seat, before))
        return done

    monkeypatch.setattr(CommandApp, "_submit", watching)
    test_matches_with_people_and_bots_play_to_the_end(chained, 0, seats, persons, seed)
    assert answered  # the walk met held answers
    assert after_answer == []
    # One `:h` a follow-up is enough: a seat is asked no more at the version of its held answer.
    assert follow_ups_again == []


def test_a_match_the_dispatcher_stops_retrying_with_its_bots_answers_held_gives_no_bot_seat_up(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """NP-H9: every bot in a card window has answered, held back from the stream, and the window
    waits for its person. The dispatcher failing on the match (here queuing the person's clock)
    gives it up after `MAX_DISPATCH_FAILURES`, and asked the stream alone which bot seats wait:
    there all three still do, so it logged `bot_match_given_up` with three defaults and counted
    three bot decisions given up, none of which was (their clocks find them not asked). Held
    answers are counted now, as `_schedule` counts them: it is the person's turn,
    `match_dispatch_stopped`, nothing counted. Fails if a bot seat is given up or counted."""
    import structlog

    from famiglia.nothing_personal.v1 import nothing_personal_pb2 as np_pb
    from services.bots import dispatcher as dispatcher_module
    from services.bots.dispatcher import MAX_DISPATCH_FAILURES
    from services.bots.payload import bot_command_id

    from .test_hopeless_decisions import Counted

    table, match_id, order, version = _first_window_of_three_bots(asking_the_person=True)
    metrics = table.dispatcher.metrics = Counted()  # type: ignore[assignment]
    for seat in order:  # the batch's task answers every bot, held back: the window waits for seat 0
        answered = table.app.submit(match_id, Viewer(seat), bot_command_id(match_id, version, seat),
                                    np_pb.Command(**{"pass": np_pb.Pass()}), version)
        assert answered.held and answered.version == version
    table.pump(match_id)
    queue_clocks = dispatcher_module.Dispatcher._queue_clocks

    def failing_clocks(self, tracked, pendings):
        if tracked.match.version == version:
            raise RuntimeError("engine bug: the clock of this state")
        return queue_clocks(self, tracked, pendings)

    monkeypatch.setattr(dispatcher_module.Dispatcher, "_queue_clocks", failing_clocks)
    table.dispatcher._let_go(match_id, RuntimeError("engine bug: the clock of this state"))
    clocks = len(table.tasks.clocks)
    with structlog.testing.capture_logs() as lines:
        for _ in range(100):  # 1,000 s of checks (stall time 10 s)
            table.clock_now[0] += 10
            table.dispatcher.check_stalls()
    assert [line for line in lines if line["event"] == "match_recovery_failed"]  # the refolds failed
    assert not [line for line in lines if line["event"] == "bot_match_given_up"]
    assert metrics.given_up == []
    [line] = [line for line in lines if line["event"] == "match_dispatch_stopped"]
    assert (line["match_id"], line["failures"], line["asked"]) == (match_id, MAX_DISPATCH_FAILURES, [0])
    assert len(table.tasks.clocks) == clocks  # no bot's clock queued


def _batch_in_a_window(monkeypatch: pytest.MonkeyPatch, chained: bool, choose):
    """`_window_of_three_bots` with every bot's policy `choose(decision)`: (table, match id, the
    batch's seats, the version, the batch's task, a worker)."""
    table, match_id, order, version = _first_window_of_three_bots()
    handlers._REACHED.clear()

    class Chooser:
        def choose(self, rules, decision):
            return choose(decision)

    monkeypatch.setattr(handlers, "make_policy", lambda name: Chooser())
    return table, match_id, order, version, len(table.tasks.decisions) - 1, LocalWorker(table, chained=chained)


def _play(worker: LocalWorker, task: int) -> list[str]:
    """The `task`-th decide task (one of no lease), as the worker plays it."""
    tasks = worker.table.tasks
    match_id, seat, version, policy = tasks.decisions[task]
    batch = [(seat, policy, tasks.payloads[task]), *tasks.thens[task]]
    return handlers.play_bot_decisions(worker, match_id, GAME, version, batch)  # type: ignore[arg-type]


def _pass():
    from famiglia.nothing_personal.v1 import nothing_personal_pb2 as np_pb

    return np_pb.Command(**{"pass": np_pb.Pass()})


@pytest.mark.parametrize("chained", [True, False])
def test_a_later_seat_found_not_asked_when_decided_afresh_is_passed_over_and_the_rest_still_play(
        monkeypatch: pytest.MonkeyPatch, chained: bool) -> None:
    """NP-H9: the batch's second seat answered in another task (held back, so the dispatcher's
    payload still asked it). The task's command for it is refused (it has answered), its
    afresh read finds it asked no more (`not_pending`): the seat is passed over as a refused
    one, and the third seat's answer still goes in. Before, the task stopped there, and the
    third seat waited for another task or the stall timer."""
    from services.bots.payload import HELD_FOLLOW_UP, bot_command_id

    table, match_id, order, version, task, worker = _batch_in_a_window(monkeypatch, chained, lambda d: _pass())
    first, second, third = order
    answered = table.app.submit(match_id, Viewer(second), bot_command_id(match_id, version, second) + HELD_FOLLOW_UP,
                                _pass(), version)
    assert answered.held and answered.version == version
    table.pump(match_id)
    outcomes = _play(worker, task)
    assert outcomes == ["submitted", "not_pending", "submitted"]
    assert worker.seats[(match_id, second)].reads == ["view"]  # read afresh, found not asked
    window = table.app.matches.get(match_id).match.state.window
    assert window is None or all(window.answers[s] is not None for s in order)  # the third seat answered too


@pytest.mark.parametrize("chained", [True, False])
def test_a_later_seat_decided_afresh_whose_answer_lands_meanwhile_plays_no_fallback(
        monkeypatch: pytest.MonkeyPatch, chained: bool) -> None:
    """NP-H9: the batch's second seat's listed command is refused and the seat decided afresh;
    between its reads and its submit another task's answer for it goes in, held back. Its
    command is refused (it has answered), and no fallback (another listed command: an optional
    move no policy chose, NP-D7's `set_auto_pass`, say) is played in its place, as for a seat
    refused from its payload (`_answered`). Fails if a `:f` is submitted for the seat."""
    from famiglia.nothing_personal.v1 import nothing_personal_pb2 as np_pb
    from services.bots.payload import HELD_FOLLOW_UP, bot_command_id

    asked: list[int] = []

    def choose(decision):
        asked.append(decision.seat)
        if decision.seat == order[1] and asked.count(decision.seat) == 1:  # its payload's: a card it lacks
            return np_pb.Command(shakedown=np_pb.Shakedown(cards=["no-such-card"]))
        return _pass()

    table, match_id, order, version, task, worker = _batch_in_a_window(monkeypatch, chained, choose)
    first, second, third = order
    client = worker.seat(match_id, second)
    legal_commands = client.legal_commands

    def racing(limit: int = 0):
        read = legal_commands(limit)
        answered = table.app.submit(match_id, Viewer(second),
                                    bot_command_id(match_id, version, second) + HELD_FOLLOW_UP, _pass(), version)
        assert answered.held and not answered.duplicate
        return read

    client.legal_commands = racing  # type: ignore[method-assign]
    outcomes = _play(worker, task)
    assert [command_id for command_id, _ in client.submitted if command_id.endswith(":f")] == []
    assert client.reads == ["view", "legal", "view"]  # decided afresh, then asked whether it answered
    assert outcomes == ["submitted", "answered", "submitted"]
