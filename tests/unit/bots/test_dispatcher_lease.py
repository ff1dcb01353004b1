"""A lease: one decide task plays a match's bot seats on through their turns, and the
dispatcher follows it by the command ids it submits (`bot:<match>:<version>:<seat>`),
queueing nothing while it plays, and again as soon as it stops or anyone else moves."""

from __future__ import annotations

from dataclasses import dataclass, field

from famiglia.bots.toy import ENGINE as HIGHCARD
from services.bots.dispatcher import Dispatcher
from services.bots.payload import bot_command_id, leasable, turn_order
from services.command.app import Viewer

from .test_dispatcher import FakeTasks, Table, handle_with_a_lost_batch


@dataclass
class LeaseTasks(FakeTasks):
    leases: list = field(default_factory=list)
    """each decision's lease: None, or (most commands, every bot seat's (seat, policy))"""

    def decide(self, match_id, game_id, seat, version, policy, trace=None, payload=None, then=(),
               lease=None) -> None:
        super().decide(match_id, game_id, seat, version, policy, trace, payload, then)
        self.leases.append(lease)


def leasing(now: list[float] | None = None, most: int = 4, **kw) -> Table:
    table = Table(now)
    table.tasks = LeaseTasks()
    table.dispatcher = Dispatcher(table.store, table.dispatcher.registry, table.tasks, observer=table.observer,
                                  stall_seconds=10, clock_grace_seconds=0.5, lease_moves=most,
                                  now=lambda: table.clock_now[0], **kw)
    return table


def play_as_lease(table: Table, match_id: str, command_id: str | None = None) -> int:
    """The first asked seat plays, named as the lease's worker names its commands (or `command_id`)."""
    hot = table.app.matches.get(match_id).match
    seat = turn_order([p.seat for p in HIGHCARD.pending(hot.state)], hot.version)[0]
    command = HIGHCARD.legal_commands(hot.state, seat)[0]
    version = hot.version
    return table.app.submit(match_id, Viewer(seat), command_id or bot_command_id(match_id, version, seat),
                            command).version


def test_a_match_of_quick_bots_gets_a_lease_and_nothing_more_while_its_commands_come() -> None:
    table = leasing(most=4)
    match_id = table.create({0: "random", 1: "heuristic"}, hand="5")
    table.pump(match_id)
    assert table.tasks.leases == [(4, [(0, "random"), (1, "heuristic")])]
    for _ in range(3):  # the lease's first three commands, read one by one
        play_as_lease(table, match_id)
        table.pump(match_id)
    assert len(table.tasks.decisions) == 1
    at = play_as_lease(table, match_id)  # its fourth and last: the dispatcher takes over again
    table.pump(match_id)
    assert len(table.tasks.decisions) == 2 and table.tasks.decisions[-1][2] == at
    assert table.tasks.leases[-1] is not None


def test_a_lease_read_in_one_batch_is_followed_to_its_end_at_once() -> None:
    table = leasing(most=3)
    match_id = table.create({0: "random", 1: "random"}, hand="5")
    table.pump(match_id)
    for _ in range(3):
        at = play_as_lease(table, match_id)
    table.pump(match_id)
    assert len(table.tasks.decisions) == 2 and table.tasks.decisions[-1][2] == at


def test_an_outside_command_ends_the_lease() -> None:
    table = leasing(most=10)
    match_id = table.create({0: "random", 1: "random"}, hand="5")
    table.pump(match_id)
    play_as_lease(table, match_id)
    at = play_as_lease(table, match_id, command_id="someone-else")
    table.pump(match_id)
    assert len(table.tasks.decisions) == 2 and table.tasks.decisions[-1][2] == at


def test_a_lease_stopped_short_is_taken_over_by_the_stall_timer() -> None:
    now = [0.0]
    table = leasing(now, most=10)
    match_id = table.create({0: "random", 1: "random"}, hand="5")
    table.pump(match_id)
    now[0] = 8.0
    at = play_as_lease(table, match_id)  # a move restarts the stall clock
    table.pump(match_id)
    now[0] = 15.0
    assert table.dispatcher.check_stalls() == 0
    now[0] = 19.0  # then the worker died
    assert table.dispatcher.check_stalls() == 1
    assert table.tasks.decisions[-1][2] == at and table.tasks.leases[-1] is not None


def test_no_lease_for_a_search_policy() -> None:
    table = leasing(most=10)
    match_id = table.create({0: "random", 1: "ismcts"}, hand="5")
    table.pump(match_id)
    for _ in range(4):
        play_as_lease(table, match_id)
        table.pump(match_id)
    assert len(table.tasks.leases) == 5 and all(lease is None for lease in table.tasks.leases)
    assert leasable("heuristic") and leasable("random?x=1") and not leasable("ismcts?iterations=5")


def test_a_human_seats_command_ends_the_lease_of_the_bot_seats() -> None:
    table = leasing(most=10)
    match_id = table.create({1: "random"}, hand="5")
    table.pump(match_id)
    queued = 0
    for _ in range(6):
        hot = table.app.matches.get(match_id).match
        asked = [p.seat for p in HIGHCARD.pending(hot.state)]
        at = play_as_lease(table, match_id)  # the human's id names a seat that is no bot's
        table.pump(match_id)
        if asked == [0] and 1 in [p.seat for p in HIGHCARD.pending(table.app.matches.get(match_id).match.state)]:
            assert table.tasks.decisions[-1][1:3] == (1, at)  # a new task at once after the human
            assert table.tasks.leases[-1] == (10, [(1, "random")])
            queued += 1
    assert queued >= 1


def test_one_task_per_decision_takes_no_lease() -> None:
    table = leasing(most=10, seats_per_task=1)
    match_id = table.create({0: "random", 1: "random"}, hand="5")
    table.pump(match_id)
    assert table.tasks.leases == [None]


def test_a_lease_whose_send_fails_is_forgotten_so_the_redo_sends_it() -> None:
    table = leasing(most=10)
    match_id = table.create({0: "random", 1: "random"}, hand="5")
    envelopes = table.store.read(match_id)
    handle_with_a_lost_batch(table, envelopes)
    table.tasks.leases.clear()
    assert table.dispatcher.matches[match_id].lease is None
    table.dispatcher.handle(envelopes)
    assert len(table.tasks.decisions) == 1 and table.tasks.leases[0] is not None
