"""The command service takes a person's clock default (the bots' token, a "clock:" id) only once
the seat's deadline, as its own fold winds it, has passed by its own clock, less
`clock_skew_s` (docs/bots.md, "Turn clocks"). Before, a worker or dispatcher whose clock ran
fast, or a bug, played a person's default early: the service took it at once. The service's
clock is the test's (`CommandApp.wall`), set from the seat's deadline: nothing here waits."""

from __future__ import annotations

import pytest

from famiglia.auth import TokenSigner
from famiglia.bots.toy import ENGINE as HIGHCARD
from famiglia.bots.toy import toy_registry
from famiglia.clocks import STANDING_ANSWER_S
from famiglia.config import Settings
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.grpcutil.errors import FailedPrecondition, to_status
from famiglia.v1 import envelope_pb2
from services.command.app import CLOCK_SKEW_S, CommandApp
from services.command.bootstrap import CommandSettings, bootstrap

SETTINGS = Settings(secret="unit-test-secret")
SIGNER = TokenSigner(SETTINGS.secret)


def _app(clock_s: str = "30", *, bot_seat: int | None = None) -> tuple[CommandApp, str]:
    app = bootstrap(store=InMemoryEventStore(), registry=toy_registry(), settings=SETTINGS,
                    command_settings=CommandSettings(leave_policy="random"))
    info = [envelope_pb2.SeatInfo(seat=s, player_id=f"p{s}", bot=s == bot_seat,
                                  policy="random" if s == bot_seat else "") for s in range(2)]
    match_id = app.create_match("highcard", 2, seed=5, options={"hand": "4", "clock_s": clock_s},
                                seat_info=info).match_id
    return app, match_id


def _turn(app: CommandApp, match_id: str) -> tuple[int, int, object]:
    m = app.matches.get(match_id).match
    return HIGHCARD.pending(m.state)[0].seat, m.public_version, m.state


def _deadline(app: CommandApp, match_id: str, seat: int) -> float:
    return app.matches.get(match_id).match.deadlines()[seat]


def _default(app: CommandApp, match_id: str, *, bots: bool = True):
    """The asked seat's clock default, as the bots' `run_clock` submits it (or under its player's token)."""
    seat, version, state = _turn(app, match_id)
    token = SIGNER.bot_seat_token(match_id, seat) if bots else SIGNER.seat_token(match_id, seat, f"p{seat}")
    return app.submit(match_id, app.viewer(match_id, token), f"clock:{match_id}:{version}:{seat}",
                      HIGHCARD.timeout_command(state, seat), version, omit_events=True)  # type: ignore[arg-type]


def test_a_default_before_the_seats_deadline_is_refused_naming_the_deadline() -> None:
    app, match_id = _app()
    seat, version, _ = _turn(app, match_id)
    runs_out = _deadline(app, match_id, seat)
    app.wall = lambda: runs_out - 10
    with pytest.raises(FailedPrecondition) as refused:
        _default(app, match_id)
    assert refused.value.code == "clock_not_run_out"
    assert str(round(runs_out * 1000)) in refused.value.message
    assert refused.value.metadata == {"deadline_ms": str(round(runs_out * 1000)), "left_ms": "10000"}
    info = to_status(refused.value).trailing_metadata  # (the worker reads `left_ms` from the status)
    assert ("famiglia-code", "clock_not_run_out") in info
    assert app.store.version(match_id) == version and _turn(app, match_id)[0] == seat


def test_a_default_at_the_seats_deadline_goes_in() -> None:
    app, match_id = _app()
    seat, version, _ = _turn(app, match_id)
    runs_out = _deadline(app, match_id, seat)
    app.wall = lambda: runs_out
    done = _default(app, match_id)
    assert done.version > version and app.store.read(match_id)[-1].command_id.startswith("clock:")


@pytest.mark.parametrize(("early_s", "taken"), [(CLOCK_SKEW_S - 0.25, True), (CLOCK_SKEW_S + 0.25, False)])
def test_a_default_is_taken_within_the_clock_skew_before_the_deadline(early_s: float, taken: bool) -> None:
    """Hosts' clocks disagree by a little: within `FAMIGLIA_CLOCK_SKEW_S` of the deadline the
    default is taken, further before it is not."""
    app, match_id = _app()
    seat, version, _ = _turn(app, match_id)
    runs_out = _deadline(app, match_id, seat)
    app.wall = lambda: runs_out - early_s
    if taken:
        assert _default(app, match_id).version > version
    else:
        with pytest.raises(FailedPrecondition, match="clock_not_run_out"):
            _default(app, match_id)


def test_the_skew_is_the_services_setting() -> None:
    app = bootstrap(store=InMemoryEventStore(), registry=toy_registry(), settings=SETTINGS,
                    command_settings=CommandSettings(clock_skew_s=0.0))
    match_id = app.create_match("highcard", 2, seed=5, options={"clock_s": "30"}, seat_info=[]).match_id
    seat = _turn(app, match_id)[0]
    runs_out = _deadline(app, match_id, seat)
    app.wall = lambda: runs_out - 0.25
    with pytest.raises(FailedPrecondition, match="clock_not_run_out"):
        _default(app, match_id)
    with pytest.raises(ValueError):
        CommandApp(store=InMemoryEventStore(), registry=toy_registry(), signer=SIGNER, clock_skew_s=-1.0)


def test_a_seat_asked_without_a_clock_gets_no_default() -> None:
    app, match_id = _app(clock_s="0")
    version = _turn(app, match_id)[1]
    with pytest.raises(FailedPrecondition) as refused:
        _default(app, match_id)
    assert refused.value.code == "no_clock" and app.store.version(match_id) == version


def test_a_persons_own_clock_named_command_is_no_default() -> None:
    """A client's "clock:" id is its own command: taken as any other, whenever it comes."""
    app, match_id = _app()
    seat, version, _ = _turn(app, match_id)
    app.wall = lambda: _deadline(app, match_id, seat) - 3600
    assert _default(app, match_id, bots=False).version > version


def test_a_bots_seat_has_no_clock_to_wait_for() -> None:
    """A seat created as a bot's, or one the bots play since its player left, runs no clock: the
    bots' "clock:" id there is a bot's move."""
    app, match_id = _app(bot_seat=0)
    while _turn(app, match_id)[0] != 0:
        _default(app, match_id, bots=False)  # the person plays (its own id: no default)
    version = _turn(app, match_id)[1]
    assert _default(app, match_id).version > version
    app, match_id = _app()
    seat = _turn(app, match_id)[0]
    app.leave_match(match_id, app.viewer(match_id, SIGNER.seat_token(match_id, seat, f"p{seat}")))
    version = _turn(app, match_id)[1]
    assert _default(app, match_id).version > version


def test_a_standing_auto_pass_is_due_at_once() -> None:
    """NP-D7: a seat that set its auto-pass is asked a window on a clock of 0.01 s, its default
    played by the bots at once: the service takes it as soon as the window opens (held, NP-H9)."""
    from tests.unit.command.test_held_answers import SETTINGS as NP_SETTINGS
    from tests.unit.command.test_held_answers import _window_of_every_seat

    app = bootstrap(store=InMemoryEventStore(), settings=NP_SETTINGS)
    created, _window = _window_of_every_seat(app, 3)  # (its walk sets auto-passes)
    match_id = created.match_id
    m = app.matches.get(match_id).match
    standing = [p for p in m.engine.pending(m.state) if 0 < p.timeout_seconds < STANDING_ANSWER_S]
    assert standing, "the walk set no auto-pass"
    seat = standing[0].seat
    runs_out = m.deadlines()[seat]
    app.wall = lambda: runs_out - standing[0].timeout_seconds  # the moment the window opened
    bots = app.viewer(match_id, SIGNER.bot_seat_token(match_id, seat))
    done = app.submit(match_id, bots, f"clock:{match_id}:{m.public_version}:{seat}",
                      m.engine.timeout_command(m.state, seat), m.public_version)  # type: ignore[arg-type]
    assert done.held
    late = next(p for p in m.engine.pending(m.state) if p.timeout_seconds >= STANDING_ANSWER_S)
    other = app.viewer(match_id, SIGNER.bot_seat_token(match_id, late.seat))
    with pytest.raises(FailedPrecondition, match="clock_not_run_out"):  # a person's window clock is not out
        app.submit(match_id, other, f"clock:{match_id}:{m.public_version}:{late.seat}",
                   m.engine.timeout_command(m.state, late.seat), m.public_version)  # type: ignore[arg-type]
