"""A lease on the worker's side: one decide task plays a match's quick bot seats on through
their turns, each turn as a fresh task would have played it (the same seat order, payloads,
seeds and command ids), asking the command service for the next decisions in the same call
(`ask_next`) — or, from a command service without SubmitCommands, over GetView and
ListLegalCommands — and stops at its most commands, a human's turn or an outside command;
the dispatcher queues nothing while it plays and takes over as soon as it stops."""

from __future__ import annotations

import pytest

from famiglia.bots.toy import ENGINE as HIGHCARD
from famiglia.v1 import envelope_pb2
from services.bots import handlers
from services.bots.dispatcher import Dispatcher
from services.command.app import Viewer

from .secret_card import GAME_ID, secret_registry
from .test_bot_batches import LocalWorker
from .test_dispatcher import Table
from .test_dispatcher_lease import LeaseTasks

BOTS = {0: "random", 1: "heuristic", 2: "random"}


def table_with(most: int, registry=None) -> Table:
    table = Table(registry=registry or secret_registry())
    table.tasks = LeaseTasks()
    table.dispatcher = Dispatcher(table.store, table.dispatcher.registry, table.tasks, observer=table.observer,
                                  stall_seconds=10, lease_moves=most, now=lambda: table.clock_now[0])
    return table


def play(worker: LocalWorker, game_id: str = GAME_ID, task: int = -1) -> list[str]:
    """The `task`-th decide task, with its lease, as the Celery task plays it."""
    tasks = worker.table.tasks
    match_id, seat, version, policy = tasks.decisions[task]
    batch = [(seat, policy, tasks.payloads[task]), *tasks.thens[task]]
    lease = tasks.leases[task]
    return handlers.play_bot_decisions(worker, match_id, game_id, version, batch,  # type: ignore[arg-type]
                                       lease=None if lease is None else (lease[0], dict(lease[1])))


def played(table: Table, match_id: str) -> list[tuple[str, int, bytes]]:
    return [(e.command_id, e.seat, e.payload) for e in table.store.read(match_id)]


def run_match(most: int, chained: bool, hand: str = "4") -> tuple[Table, str, LocalWorker, int]:
    handlers._REACHED.clear()  # a fresh worker process for each run of the same match id
    table = table_with(most)
    info = [envelope_pb2.SeatInfo(seat=s, bot=True, policy=p) for s, p in BOTS.items()]
    # The same match id in every run: the bots' seeds and command ids are made from it.
    match_id = table.app.create_match(GAME_ID, 3, seed=5, options={"hand": hand}, seat_info=info,
                                      request_id="lease-test-0123456789", tournament_id="t1").match_id
    table.pump(match_id)
    worker = LocalWorker(table, chained=chained)
    tasks = 0
    while match_id in table.dispatcher.matches:
        assert len(table.tasks.decisions) == tasks + 1  # never a second task while one plays
        outcomes = play(worker)
        assert outcomes and set(outcomes) == {"submitted"}
        tasks += 1
    return table, match_id, worker, tasks


def test_one_task_plays_a_whole_match_of_quick_bots(chained: bool) -> None:
    table, match_id, worker, tasks = run_match(32, chained)
    assert tasks == 1 and table.observer.finished == [match_id]
    if chained:  # one call a trick, each also asking who is next
        assert worker.stub.calls == [3, 3, 3, 3]


@pytest.mark.parametrize("most", [3, 6, 32])
def test_a_lease_plays_exactly_what_a_task_a_turn_plays(most: int, chained: bool) -> None:
    leased, leased_id, _, tasks = run_match(most, chained)
    plain, plain_id, _, plain_tasks = run_match(0, chained)
    assert played(leased, leased_id) == played(plain, plain_id)  # move for move, byte for byte
    assert plain_tasks == 4 and tasks == -(-12 // most)  # its most commands, then the next task


@pytest.mark.parametrize("most", [1, 2, 5])
def test_a_lease_ending_inside_a_simultaneous_choice_leaves_the_rest_to_a_fresh_task(most: int,
                                                                                     chained: bool) -> None:
    """The rest of that choice is then decided from the version reached, as after any
    interrupted batch: other seeds, so other (equally legal) choices than one whole batch's."""
    table, match_id, _, tasks = run_match(most, chained)
    assert tasks == -(-12 // most) and table.observer.finished == [match_id]
    ids = [e.command_id for e in table.store.read(match_id) if e.command_id]
    assert len(ids) == 12 and all(i.startswith(f"bot:{match_id}:") for i in ids)


def test_a_lease_stops_at_a_human_turn_and_the_dispatcher_takes_over(chained: bool) -> None:
    table = Table()
    table.tasks = LeaseTasks()
    table.dispatcher = Dispatcher(table.store, table.dispatcher.registry, table.tasks, observer=table.observer,
                                  stall_seconds=10, lease_moves=32, now=lambda: table.clock_now[0])
    match_id = table.create({1: "random"}, hand="5")
    table.pump(match_id)
    worker = LocalWorker(table, chained=chained)
    human = 0
    while match_id in table.dispatcher.matches:
        state = table.app.matches.get(match_id).match.state
        asked = [p.seat for p in HIGHCARD.pending(state)]
        if asked == [0]:  # the human plays; the bot seat's next task is queued at once
            at = table.act(match_id, 0)
            table.pump(match_id)
            human += 1
            now = table.app.matches.get(match_id).match.state
            if match_id in table.dispatcher.matches and 1 in [p.seat for p in HIGHCARD.pending(now)]:
                assert table.tasks.decisions[-1][1:3] == (1, at)
            continue
        outcomes = play(worker, "highcard")  # the bot's turns, up to the human's
        assert outcomes and set(outcomes) == {"submitted"}
        state = table.app.matches.get(match_id).match.state
        assert match_id not in table.dispatcher.matches or [p.seat for p in HIGHCARD.pending(state)] == [0]
    assert human >= 2 and table.observer.finished == [match_id]


def test_an_outside_command_mid_lease_makes_the_rest_stale(chained: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    table = table_with(32)
    match_id = table.create(BOTS, seats=3, seed=5, game=GAME_ID, hand="4")
    table.pump(match_id)
    worker = LocalWorker(table, chained=chained)
    real = handlers._play_step
    steps = []

    def step_then_intrude(*args, **kwargs):
        out = real(*args, **kwargs)
        steps.append(out)
        if len(steps) == 2:  # after the second trick someone else plays a seat
            state = table.app.matches.get(match_id).match.state
            seat = [p.seat for p in table.dispatcher.registry.get(GAME_ID).pending(state)][0]
            command = table.dispatcher.registry.get(GAME_ID).legal_commands(state, seat)[0]
            table.app.submit(match_id, Viewer(seat), "outside", command)
            table.pump(match_id)
        return out

    monkeypatch.setattr(handlers, "_play_step", step_then_intrude)
    outcomes = play(worker)
    # With the next decisions in the second trick's answer, the third trick's first submit is
    # stale; a call a seat asks on its own after the trick, and that ask is.
    assert outcomes == ["submitted"] * 6 + (["stale"] if chained else [])
    assert len(table.tasks.decisions) == 2  # the dispatcher took over after the outside command
    assert table.tasks.decisions[-1][2] == table.version(match_id)


def test_a_lease_shares_the_tasks_time_and_stops_once_it_is_gone(chained: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The turns a task plays on share its time budget, as its seats do: a turn played on gets
    what is left and none once it is gone (before, each turn got the whole budget again, and a
    task playing on could run past the hard limit that kills it)."""
    handlers._REACHED.clear()
    table = table_with(32)
    info = [envelope_pb2.SeatInfo(seat=s, bot=True, policy=p) for s, p in BOTS.items()]
    match_id = table.app.create_match(GAME_ID, 3, seed=5, options={"hand": "4"}, seat_info=info,
                                      request_id="lease-time-0123456789", tournament_id="t1").match_id
    table.pump(match_id)
    worker = LocalWorker(table, chained=chained)
    tasks = table.tasks
    match, seat, version, policy = tasks.decisions[-1]
    lease = tasks.leases[-1]
    clock = iter(range(0, 10_000, 5))  # every look at the clock, five seconds later
    monkeypatch.setattr(handlers.time, "monotonic", lambda: float(next(clock)))
    outcomes = handlers.play_bot_decisions(worker, match, GAME_ID, version,  # type: ignore[arg-type]
                                           [(seat, policy, tasks.payloads[-1]), *tasks.thens[-1]],
                                           think_seconds=8.0, lease=(lease[0], dict(lease[1])))
    assert outcomes and len(outcomes) < 12  # the first turn only, not the whole match


def test_a_lease_whose_asking_the_server_fails_on_stops_instead_of_retrying(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command service failing on `ask_next` (INTERNAL: a seat's view it cannot render) was
    `Transient`: Celery retried the whole task, which replayed its commands as duplicates and
    asked again, into the same failure, twelve times. The task now stops with what it played;
    the stall timer queues the match's next decision. Fails if the task raises."""
    from services.command.app import CommandApp

    handlers._REACHED.clear()
    table = table_with(32)
    info = [envelope_pb2.SeatInfo(seat=s, bot=True, policy=p) for s, p in BOTS.items()]
    match_id = table.app.create_match(GAME_ID, 3, seed=5, options={"hand": "4"}, seat_info=info,
                                      tournament_id="t1").match_id
    table.pump(match_id)
    version = table.version(match_id)

    def _next_decisions(self, *args, **kwargs):
        raise RuntimeError("engine bug: a view of this state")

    monkeypatch.setattr(CommandApp, "_next_decisions", _next_decisions)
    worker = LocalWorker(table, chained=True)
    # The first trick went in before the call failed; the worker's call a seat finds it taken.
    assert play(worker) == ["duplicate"] * 3
    assert table.version(match_id) == version + 3
    table.clock_now[0] += 10
    table.dispatcher.check_stalls()
    assert table.tasks.decisions[-1][2] == version + 3
