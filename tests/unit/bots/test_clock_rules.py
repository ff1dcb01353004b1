"""`handlers.run_clock`: the guards that keep a clock from playing for a seat that moved or is not asked."""

from __future__ import annotations

from dataclasses import dataclass, field

from famiglia.bots.toy import ENGINE as HIGHCARD
from famiglia.bots.toy import play as play_card
from famiglia.grpcutil.errors import AppError
from famiglia.v1 import game_service_pb2 as pb
from services.bots import handlers
from services.command.app import Viewer
from tests.support.refusals import Refused
from tests.unit.bots.test_dispatcher import Table
from tests.unit.bots.test_handlers import _RpcError


@dataclass
class ClockSeat:
    table: Table
    match_id: str
    seat: int
    before: object = None
    submitted: list = field(default_factory=list)

    def submit(self, command, *, command_id=None, expected_version=None, omit_events=False):
        if self.before is not None:
            self.before()  # the person's own move lands first
        self.submitted.append((command, command_id, expected_version))
        try:
            done = self.table.app.submit(self.match_id, Viewer(self.seat), command_id, command, expected_version,
                                         omit_events=omit_events)
        except AppError as exc:
            raise _RpcError(exc.status) from None
        return pb.SubmitCommandResponse(version=done.version, duplicate=done.duplicate)


@dataclass
class ClockApp:
    table: Table
    before: object = None
    seats: dict = field(default_factory=dict)

    @property
    def registry(self):
        return self.table.dispatcher.registry

    @property
    def store(self):
        return self.table.store

    def seat(self, match_id: str, seat: int) -> ClockSeat:
        return self.seats.setdefault(seat, ClockSeat(self.table, match_id, seat, self.before))


def _people(seed: int) -> tuple[Table, str]:
    table = Table()
    match_id = table.app.create_match("highcard", 2, seed=seed, options={"hand": "3", "clock_s": "30"},
                                      seat_info=[]).match_id
    return table, match_id


def test_a_clock_for_a_seat_not_asked_submits_nothing() -> None:
    """Fails on a change the suite once missed (run_clock without its not-asked check)."""
    table, match_id = _people(3)
    state = table.app.matches.get(match_id).match.state
    other = 1 - HIGHCARD.pending(state)[0].seat
    app = ClockApp(table)
    version = table.version(match_id)
    assert handlers.run_clock(app, match_id, other, version) == "not_pending"  # type: ignore[arg-type]
    assert not any(s.submitted for s in app.seats.values())
    assert table.version(match_id) == version


def test_a_clock_racing_the_persons_own_move_never_plays_a_second_card() -> None:
    """Fails on a change the suite once missed (the clock submitted without expected_version): the clock read the match at v,
    the person's real move lands before the clock's submit and leaves the same seat to lead the
    next trick. The clock must be stale, not play that seat's lowest card as an extra move."""
    for seed in range(1, 200):
        table, match_id = _people(seed)
        for _ in range(6):
            match = table.app.matches.get(match_id).match
            state = match.state
            if state.over:
                break
            seat = HIGHCARD.pending(state)[0].seat
            if len(state.trick) == 1 and max(state.hands[seat]) > state.trick[0] and len(state.hands[seat]) > 1:
                break
            table.act(match_id, seat)
        else:
            continue
        if state.over or not (len(state.trick) == 1 and max(state.hands[seat]) > state.trick[0]
                              and len(state.hands[seat]) > 1):
            continue
        version, best = match.version, max(state.hands[seat])

        def persons_move(table=table, match_id=match_id, seat=seat, best=best, version=version) -> None:
            table.app.submit(match_id, Viewer(seat), "person-move", play_card(best), version)

        app = ClockApp(table, before=persons_move)
        assert handlers.run_clock(app, match_id, seat, version) == "stale"  # type: ignore[arg-type]
        assert table.version(match_id) == version + 1  # the person's move only
        after = table.app.matches.get(match_id).match.state
        assert HIGHCARD.pending(after)[0].seat == seat  # the seat leads again: a clock there would play
        return
    raise AssertionError("no seed gave the race")


def test_a_clock_the_match_moved_past_is_stale_without_reading_the_match() -> None:
    """Most clocks come stale: every other seat's command queues the people still asked a clock
    again at the new version, and the old ones fire all the same (in a GoodCritters Step 3 among
    bots, tens at each deadline). Each read and folded the whole match from the store to find its
    version moved; the store's version says it."""
    table, match_id = _people(3)
    version = table.version(match_id)
    seat = HIGHCARD.pending(table.app.matches.get(match_id).match.state)[0].seat
    table.act(match_id, seat)
    reads: list[str] = []
    read = table.store.read

    def counted(match_id: str, *args, **kwargs):
        reads.append(match_id)
        return read(match_id, *args, **kwargs)

    table.store.read = counted  # type: ignore[method-assign]
    app = ClockApp(table)
    for asked in (0, 1):
        assert handlers.run_clock(app, match_id, asked, version) == "stale"  # type: ignore[arg-type]
    assert reads == [] and not any(s.submitted for s in app.seats.values())
    now = table.version(match_id)
    turn = HIGHCARD.pending(table.app.matches.get(match_id).match.state)[0].seat
    assert handlers.run_clock(app, match_id, turn, now) == "submitted"  # type: ignore[arg-type]
    assert reads  # a clock at the match's version reads it, as before



@dataclass
class BotsTokenSeat(ClockSeat):
    """The seat as the bots' own token submits for it (`Viewer.bot`), as `run_clock`'s client does."""

    def submit(self, command, *, command_id=None, expected_version=None, omit_events=False):
        self.submitted.append((command, command_id, expected_version))
        try:
            done = self.table.app.submit(self.match_id, Viewer(self.seat, bot=True), command_id, command,
                                         expected_version, omit_events=omit_events)
        except AppError as exc:
            raise Refused(exc) from None
        return pb.SubmitCommandResponse(version=done.version, duplicate=done.duplicate)


def test_a_default_the_command_service_finds_early_is_sent_again_when_its_clock_says() -> None:
    """A worker (or dispatcher) whose clock runs fast fires a person's clock before its deadline:
    the command service refuses it (`clock_not_run_out`), and the task is sent `again` for the
    time the service says is left, by its clock (the worker's is the one suspected); without
    `again` it is dropped (the dispatcher queues an overdue clock again). Then it goes in."""
    table, match_id = _people(3)
    seat, version = HIGHCARD.pending(table.app.matches.get(match_id).match.state)[0].seat, table.version(match_id)
    runs_out = table.app.matches.get(match_id).match.deadlines()[seat]
    table.app.wall = lambda: runs_out - 20
    app = ClockApp(table)
    app.seats[seat] = BotsTokenSeat(table, match_id, seat)
    waits: list[float] = []
    assert handlers.run_clock(app, match_id, seat, version, waits.append) == "early"  # type: ignore[arg-type]
    assert waits == [20.0]
    assert handlers.run_clock(app, match_id, seat, version) == "early"  # type: ignore[arg-type]
    assert table.version(match_id) == version
    table.app.wall = lambda: runs_out
    assert handlers.run_clock(app, match_id, seat, version, waits.append) == "submitted"  # type: ignore[arg-type]
    assert waits == [20.0] and table.version(match_id) > version
