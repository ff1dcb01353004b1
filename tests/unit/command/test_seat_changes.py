"""A seat's player leaves mid-match and the bots play the seat (LeaveMatch, its clock running out
too often, ReturnToMatch): the command service's use cases on an in-memory store, High Card with
a turn clock. The same over gRPC and Redis: tests/integration/test_seat_changes.py."""

from __future__ import annotations

import pytest

from famiglia.auth import TokenSigner
from famiglia.bots.toy import ENGINE as HIGHCARD
from famiglia.bots.toy import toy_registry
from famiglia.config import Settings
from famiglia.engine import private_to
from famiglia.engine.registry import Registry
from famiglia.eventstore.envelopes import SEAT_LEFT, SEAT_RETURNED, open_seat_change
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.grpcutil.errors import Aborted, AppError, FailedPrecondition
from famiglia.matchstate import MatchState
from famiglia.replay.verify import verify_envelopes
from famiglia.v1 import envelope_pb2
from services.command.app import LEFT, TIMEOUTS, CommandApp, Viewer
from services.command.bootstrap import CommandSettings, bootstrap
from tests.support.clocks import run_out

SETTINGS = Settings(secret="unit-test-secret")
REGISTRY = toy_registry()
SIGNER = TokenSigner(SETTINGS.secret)


def _app(timeouts: int = 3, store: InMemoryEventStore | None = None) -> CommandApp:
    """The service, its clock past every seat's deadline: `_clock` plays a clock run out."""
    return run_out(bootstrap(store=store or InMemoryEventStore(), registry=REGISTRY, settings=SETTINGS,
                             command_settings=CommandSettings(timeouts_to_bot=timeouts, leave_policy="random")))


def _match(app: CommandApp, *, bot_seat: int | None = None) -> str:
    info = [envelope_pb2.SeatInfo(seat=s, player_id=f"p{s}", bot=s == bot_seat, policy="random" if s == bot_seat else "")
            for s in range(2)]
    return app.create_match("highcard", 2, seed=5, options={"hand": "6", "clock_s": "30"}, seat_info=info).match_id


def _turn(app: CommandApp, match_id: str) -> tuple[int, int, object]:
    m = app.matches.catch_up(app.matches.get(match_id))
    seat = HIGHCARD.pending(m.state)[0].seat
    return seat, m.public_version, m.state


def _person(app: CommandApp, match_id: str, seat: int) -> Viewer:
    return app.viewer(match_id, SIGNER.seat_token(match_id, seat, f"p{seat}"))


def _bots(app: CommandApp, match_id: str, seat: int) -> Viewer:
    return app.viewer(match_id, SIGNER.bot_seat_token(match_id, seat))


def _clock(app: CommandApp, match_id: str, seat: int):
    """The seat's clock runs out: its default, as the bots' `run_clock` submits it (its own token)."""
    turn, version, state = _turn(app, match_id)
    assert turn == seat
    return app.submit(match_id, _bots(app, match_id, seat), f"clock:{match_id}:{version}:{seat}",
                      HIGHCARD.timeout_command(state, seat), version, omit_events=True)


def _play(app: CommandApp, match_id: str, viewer: Viewer, command_id: str = ""):
    seat, version, state = _turn(app, match_id)
    assert seat == viewer.seat
    return app.submit(match_id, viewer, command_id or f"c{version}", HIGHCARD.legal_commands(state, seat)[-1], version)


def _until(app: CommandApp, match_id: str, seat: int) -> None:
    """Play the other seat (its player) until `seat` is asked."""
    while (turn := _turn(app, match_id)[0]) != seat:
        _play(app, match_id, _person(app, match_id, turn))


def _refused(call) -> tuple[str, str]:
    with pytest.raises(AppError) as raised:
        call()
    return raised.value.status.name, raised.value.code


def _away_by_clock(app: CommandApp, match_id: str, seat: int = 0) -> int:
    """Run `seat`'s clock out on it until the bots take it; the seq of its `seat_left`."""
    for _ in range(app.timeouts_to_bot):
        _until(app, match_id, seat)
        _clock(app, match_id, seat)
    left = app.store.read(match_id)[-1]
    assert left.type == SEAT_LEFT and left.seat == seat
    return left.seq


def test_leaving_appends_one_public_seat_left_and_again_answers_it() -> None:
    app = _app()
    match_id = _match(app)
    me = _person(app, match_id, 1)
    done = app.leave_match(match_id, me)
    last = app.store.read(match_id)[-1]
    assert (done.version, done.duplicate) == (last.seq, False)
    assert (last.type, last.seat, last.visibility.kind, last.command) == (
        SEAT_LEFT, 1, envelope_pb2.VISIBILITY_PUBLIC, b"")
    assert open_seat_change(last) == envelope_pb2.SeatLeft(seat=1, policy="random", reason=LEFT)
    again = app.leave_match(match_id, me)
    assert (again.version, again.duplicate) == (done.version, True)
    assert app.store.version(match_id) == done.version
    folded = MatchState.from_envelopes(REGISTRY, app.store.read(match_id))
    assert folded.bot_policies() == {1: "random"}


def test_a_player_who_left_reads_as_a_spectator_and_commands_nothing() -> None:
    app = _app()
    match_id = _match(app)
    seat = _turn(app, match_id)[0]
    me = _person(app, match_id, seat)
    assert app.get_view(match_id, me).view.hand  # its own cards, while it plays
    app.leave_match(match_id, me)
    view = app.get_view(match_id, me)
    assert view.seat is None and not view.view.hand and view.deadline_ms == 0
    assert view.away == [(seat, LEFT, app.store.version(match_id))]
    assert _refused(lambda: _play(app, match_id, me)) == ("FAILED_PRECONDITION", "seat_left")
    assert _refused(lambda: app.legal_commands(match_id, me)) == ("FAILED_PRECONDITION", "seat_left")
    assert _refused(lambda: app.send_chat(match_id, me, "m1", [], "hi")) == ("FAILED_PRECONDITION", "seat_left")
    # its stream: the table's events only, from the start as from where it left
    seen = [e for e, _v, _f in app.events(match_id, me, 0, follow=False) if e is not None]
    assert all(e.envelope.visibility.kind == envelope_pb2.VISIBILITY_PUBLIC for e in seen)
    assert seen[-1].envelope.type == SEAT_LEFT and seen[-1].text.startswith(f"seat {seat} left")
    # the bots play the seat on
    bots = _bots(app, match_id, seat)
    assert _play(app, match_id, bots, "bot-1").version == app.store.version(match_id)


def test_a_stream_open_across_the_leave_shows_what_follows_as_a_spectators() -> None:
    app = _app()
    match_id = _match(app)
    me = _person(app, match_id, 0)
    _until(app, match_id, 0)
    stream = app.events(match_id, me, 0, follow=False)
    first = next(stream)[0]  # open: the seat's own events so far
    app.leave_match(match_id, me)
    app.leave_match(match_id, _person(app, match_id, 1))
    before = app.store.version(match_id)
    _play(app, match_id, _bots(app, match_id, 0), "bot-1")  # the bot plays seat 0's card
    shown = [first] + [e for e, _v, _f in stream if e is not None]
    assert any(e.envelope.visibility.kind != envelope_pb2.VISIBILITY_PUBLIC for e in shown)  # its own, before
    assert [e.envelope.type for e in shown if e.envelope.type == SEAT_LEFT] == [SEAT_LEFT] * 2
    (played,) = [e for e in shown if e.envelope.seq > before]
    assert played.envelope.seat == 0 and played.foreign  # the bot's move: a spectator's to see, its id not shown


def test_a_chat_stream_open_across_the_leave_reads_on_as_a_spectators() -> None:
    """As ListChat answers once the player left: a message to the seat is the bot's now."""
    app = _app()
    match_id = _match(app)
    me, other = _person(app, match_id, 0), _person(app, match_id, 1)
    app.send_chat(match_id, other, "m-before", [0], "to seat 0, while its player plays")
    stream = app.chat_messages(match_id, me, follow=True, poll_ms=10)
    assert next(stream).text == "to seat 0, while its player plays"
    app.leave_match(match_id, me)
    app.send_chat(match_id, other, "m-after", [0], "to seat 0, the bot's now")
    app.send_chat(match_id, other, "m-table", [], "to the table")
    assert next(stream).text == "to the table"
    assert [e.text for e in app.list_chat(match_id, me)] == ["to the table"]


def test_the_seat_changes_command_ids_are_no_clients_to_take() -> None:
    """A seat's own command under "leave" made its LeaveMatch a duplicate of it, never written
    (UNAVAILABLE contention on every call); under "return:<version>", its ReturnToMatch."""
    app = _app()
    match_id = _match(app)
    seat, version, _state = _turn(app, match_id)
    me = _person(app, match_id, seat)
    for taken in ("leave", f"return:{version}", f"away:clock:{match_id}:{version}:{seat}"):
        assert _refused(lambda taken=taken: _play(app, match_id, me, taken)) == ("INVALID_ARGUMENT", "bad_command_id")
    assert not app.leave_match(match_id, me).duplicate


def test_a_clock_default_that_ends_the_match_sends_nobody_to_the_bots() -> None:
    """Nobody plays the seat any more, and a seat change after the result is one a LeaveMatch
    refuses (`match_over`) and a verification too (`format`): the stored match stays verifiable."""
    app = _app(timeouts=1)
    info = [envelope_pb2.SeatInfo(seat=s, player_id=f"p{s}") for s in range(2)]
    match_id = app.create_match("highcard", 2, seed=5, options={"hand": "1", "clock_s": "30"},
                                seat_info=info).match_id
    _play(app, match_id, _person(app, match_id, _turn(app, match_id)[0]))
    _clock(app, match_id, _turn(app, match_id)[0])  # the last card: the match's end
    envelopes = app.store.read(match_id)
    assert app.matches.get(match_id).match.finished
    assert SEAT_LEFT not in {e.type for e in envelopes}
    assert verify_envelopes(REGISTRY, envelopes).ok


def test_leaving_is_refused_to_a_bots_seat_the_bots_token_and_a_match_over() -> None:
    app = _app()
    match_id = _match(app, bot_seat=1)
    assert _refused(lambda: app.leave_match(match_id, _person(app, match_id, 1))) == (
        "FAILED_PRECONDITION", "seat_is_bot")
    assert _refused(lambda: app.leave_match(match_id, _bots(app, match_id, 0))) == (
        "FAILED_PRECONDITION", "seat_is_bot")
    assert _refused(lambda: app.return_to_match(match_id, _bots(app, match_id, 0))) == (
        "FAILED_PRECONDITION", "seat_is_bot")
    app.cancel_match(match_id, "tests", "over")
    assert _refused(lambda: app.leave_match(match_id, _person(app, match_id, 0))) == (
        "FAILED_PRECONDITION", "match_over")


def test_the_nth_clock_default_in_a_row_sends_the_seat_to_the_bots_in_the_same_append() -> None:
    app = _app(timeouts=3)
    match_id = _match(app)
    for n in range(2):
        _until(app, match_id, 0)
        _clock(app, match_id, 0)
        assert app.matches.get(match_id).match.timeouts == {0: n + 1}
    _until(app, match_id, 0)
    before = app.store.version(match_id)
    done = _clock(app, match_id, 0)
    written = app.store.read(match_id, after=before)
    assert written[0].command_id.startswith("clock:") and written[-1].type == SEAT_LEFT
    assert open_seat_change(written[-1]).reason == TIMEOUTS and done.version == written[-1].seq
    m = MatchState.from_envelopes(REGISTRY, app.store.read(match_id), clocks=True)
    assert m.away[0][0].reason == TIMEOUTS and m.timeouts == {} and 0 not in m.deadlines()
    # the player still reads its seat, but commands nothing until it returns
    me = _person(app, match_id, 0)
    assert app.get_view(match_id, me).seat == 0
    _until(app, match_id, 0)
    refused = _refused(lambda: _play(app, match_id, me))
    assert refused == ("FAILED_PRECONDITION", "seat_away")


def test_a_command_of_the_seats_own_between_two_clocks_starts_the_count_over() -> None:
    app = _app(timeouts=2)
    match_id = _match(app)
    me = _person(app, match_id, 0)
    _until(app, match_id, 0)
    _clock(app, match_id, 0)
    _until(app, match_id, 0)
    _play(app, match_id, me)
    _until(app, match_id, 0)
    _clock(app, match_id, 0)
    assert SEAT_LEFT not in {e.type for e in app.store.read(match_id)}
    assert app.matches.get(match_id).match.timeouts == {0: 1}


def test_a_clock_id_from_the_players_own_token_is_no_clock_default() -> None:
    """Only the bots' token submits a clock's default: a client naming its commands "clock:..."
    is counted by the fold (which cannot tell) but never sent to the bots by them."""
    app = _app(timeouts=1)
    match_id = _match(app)
    _until(app, match_id, 0)
    seat, version, _state = _turn(app, match_id)
    _play(app, match_id, _person(app, match_id, 0), f"clock:{match_id}:{version}:0")
    assert SEAT_LEFT not in {e.type for e in app.store.read(match_id)}


def test_no_seat_goes_to_the_bots_with_the_setting_off() -> None:
    app = _app(timeouts=0)
    match_id = _match(app)
    for _ in range(4):
        _until(app, match_id, 0)
        _clock(app, match_id, 0)
    assert SEAT_LEFT not in {e.type for e in app.store.read(match_id)}


def test_returning_restarts_the_clock_and_the_player_plays_again() -> None:
    app = _app(timeouts=2)
    match_id = _match(app)
    me = _person(app, match_id, 0)
    since = _away_by_clock(app, match_id)
    bots = _bots(app, match_id, 0)
    _until(app, match_id, 0)
    stale_version = _turn(app, match_id)[1]
    done = app.return_to_match(match_id, me)
    returned = app.store.read(match_id)[-1]
    assert (returned.type, returned.seat, done.version, done.duplicate) == (SEAT_RETURNED, 0, returned.seq, False)
    # the clock runs from the return, not from the event that asked the seat
    view = app.get_view(match_id, me)
    assert view.deadline_ms == returned.timestamp.ToMilliseconds() + 30_000 and view.away == []
    assert since < returned.seq
    # a bot decision made before the return is stale: the seat is its player's again
    state = _turn(app, match_id)[2]
    stale = _refused(lambda: app.submit(match_id, bots, f"bot:{stale_version}", HIGHCARD.legal_commands(state, 0)[0],
                                        stale_version))
    assert stale == ("ABORTED", "stale_version")
    _play(app, match_id, me)
    again = app.return_to_match(match_id, me)  # not away: nothing to write
    assert again.duplicate and again.version == app.store.version(match_id)


def test_a_seat_away_by_its_clock_that_leaves_is_gone_for_good() -> None:
    app = _app(timeouts=1)
    match_id = _match(app)
    me = _person(app, match_id, 0)
    _away_by_clock(app, match_id)
    done = app.leave_match(match_id, me)
    assert not done.duplicate
    assert open_seat_change(app.store.read(match_id)[-1]).reason == LEFT
    assert _refused(lambda: app.return_to_match(match_id, me)) == ("FAILED_PRECONDITION", "seat_left")


def test_my_turns_drops_a_match_left_for_good_and_marks_a_seat_away() -> None:
    app = _app(timeouts=1)
    match_id = _match(app)
    _away_by_clock(app, match_id, 0)
    (mine,) = app.my_turns("p0")
    assert (mine.match_id, mine.away, mine.to_act, mine.deadline_ms) == (match_id, True, False, 0)
    app.leave_match(match_id, _person(app, match_id, 0))
    assert app.my_turns("p0") == [] and app.players.newest("p0", 10) == []
    assert [t.match_id for t in app.my_turns("p1")] == [match_id]


def test_a_stale_replica_refuses_the_left_player_on_the_stores_word() -> None:
    store = InMemoryEventStore()
    one, two = _app(store=store), _app(store=store)
    match_id = _match(one)
    seat = _turn(one, match_id)[0]
    two.get_view(match_id, Viewer(None))  # folded before the leave
    one.leave_match(match_id, _person(one, match_id, seat))
    state = _turn(one, match_id)[2]
    with pytest.raises(FailedPrecondition) as refused:
        two.submit(match_id, _person(two, match_id, seat), "late", HIGHCARD.legal_commands(state, seat)[0])
    assert refused.value.code == "seat_left"
    with pytest.raises(Aborted):  # its expected version is the one before the leave
        two.submit(match_id, _person(two, match_id, seat), "late-2", HIGHCARD.legal_commands(state, seat)[0],
                   store.version(match_id) - 1)


# -- Nothing Personal's held answers (NP-H9) ------------------------------------------------------


@pytest.mark.parametrize("order", [(0,), (2, 0), (1, 2, 0)])
def test_a_seat_left_while_answers_are_held_goes_in_behind_their_slots(order: tuple[int, ...]) -> None:
    """A seat change is a public event: made while a window's answers are held, it goes in as a
    cancel does, behind a slot a seat (each its held answer or padding), so it tells nobody how
    many answered, nor who first; and every replica folds it alike."""
    from tests.unit.command.test_held_answers import SETTINGS as NP_SETTINGS
    from tests.unit.command.test_held_answers import _fresh_fold, _pass, _same_fold, _window_of_every_seat

    store = InMemoryEventStore()
    app = bootstrap(store=store, settings=NP_SETTINGS)
    created, window = _window_of_every_seat(app, 4)
    match_id, tokens = created.match_id, created.seat_tokens
    version = store.version(match_id)
    answering = [window.seats[i] for i in order]
    for seat in answering:
        assert _pass(app, match_id, tokens[seat], f"answer-{seat}").held
    leaver = window.seats[-1]
    done = app.leave_match(match_id, app.viewer(match_id, tokens[leaver]))
    written = store.read(match_id, after=version)
    assert [(e.type, e.seat) for e in written[:4]] == [
        ("window_answered", s) if s in answering else ("window_padding", -1) for s in range(4)]
    assert (written[4].type, written[4].seat, done.version) == (SEAT_LEFT, leaver, version + 5)
    assert store.read_staged(match_id) == [] and app.matches.get(match_id).match.staged == []
    _same_fold(app.matches.get(match_id).match, _fresh_fold(app, match_id))
    again = _pass(app, match_id, tokens[answering[0]], f"answer-{answering[0]}")  # a retry: its slot's answer
    assert again.duplicate and [e.envelope.seq for e in again.events] == [version + answering[0] + 1]


def test_an_auto_pass_default_is_the_seats_own_choice_not_a_timeout() -> None:
    """NP-D7's standing auto-pass answers a window through the seat's clock, run out at once: a
    clock default, but one its player chose. Counted as a timeout, a player with auto-pass on
    went to the bots after a few windows (and the table learnt its private setting)."""
    import random

    from famiglia.clocks import timed_out
    from tests.unit.command.test_held_answers import SETTINGS as NP_SETTINGS

    app = bootstrap(store=InMemoryEventStore(), settings=NP_SETTINGS,
                    command_settings=CommandSettings(timeouts_to_bot=1))
    for seed in range(1, 30):
        created = app.create_match("nothing_personal", 3, seed=seed)
        match_id, tokens = created.match_id, created.seat_tokens
        hot, rng, setter = app.matches.get(match_id), random.Random(seed), None
        for step in range(3000):
            m = hot.match
            if m.finished:
                break
            pending = m.engine.pending(m.state)
            quick = [p.seat for p in pending if p.seat == setter and p.timeout_seconds < 1]
            if quick:
                seat = quick[0]
                assert not timed_out(m.engine, m.state, seat)
                bots = app.viewer(match_id, SIGNER.bot_seat_token(match_id, seat))
                app.submit(match_id, bots, f"clock:{match_id}:{m.public_version}:{seat}",
                           m.engine.timeout_command(m.state, seat))
                assert seat not in hot.match.timeouts and seat not in hot.match.away
                return
            seat = rng.choice([p.seat for p in pending])
            viewer = app.viewer(match_id, tokens[seat])
            legal = app.legal_commands(match_id, viewer, limit=32).commands
            auto = [c for c in legal if c.WhichOneof("kind") == "set_auto_pass" and c.set_auto_pass.cards]
            if setter is None and auto:
                setter, command = seat, auto[0]
            else:
                command = rng.choice([c for c in legal if c.WhichOneof("kind") != "set_auto_pass"] or legal)
            app.submit(match_id, viewer, f"walk-{step}", command)
    raise AssertionError("no auto-pass window reached")


def test_a_held_clock_default_is_counted_once_wherever_its_slot_puts_it() -> None:
    """A window's clock default is held (NP-H9) and written out later in its seat's slot, folded
    again there: counted once, by this replica as by a fresh fold. Its seat does not go to the
    bots while it is held (a public seat change would tell the table it had answered)."""
    from tests.unit.command.test_held_answers import SETTINGS as NP_SETTINGS
    from tests.unit.command.test_held_answers import _chat, _fresh_fold, _window_of_every_seat

    store = InMemoryEventStore()
    app = run_out(bootstrap(store=store, settings=NP_SETTINGS, command_settings=CommandSettings(timeouts_to_bot=1)))
    created, window = _window_of_every_seat(app, 3)
    match_id, tokens = created.match_id, created.seat_tokens
    m = app.matches.get(match_id).match
    late = next(p.seat for p in m.engine.pending(m.state) if p.timeout_seconds >= 1)  # (the walk sets auto-passes)
    chatter = next(seat for seat in window.seats if seat != late)
    bots = app.viewer(match_id, SIGNER.bot_seat_token(match_id, late))
    done = app.submit(match_id, bots, f"clock:{match_id}:{m.public_version}:{late}",
                      m.engine.timeout_command(m.state, late), m.public_version)
    assert done.held and m.timeouts == {late: 1} and late not in m.away
    _chat(app, match_id, tokens[chatter], "chat-1", [late])  # public: the held default is written out
    assert m.staged == [] and m.timeouts == {late: 1} == _fresh_fold(app, match_id).timeouts
    assert SEAT_LEFT not in {e.type for e in store.read(match_id)}


def test_a_player_who_left_learns_nothing_of_its_seat_through_a_chains_ask_next() -> None:
    """SubmitCommands' `ask_next` answers a seat's view and legal commands as its own GetView and
    ListLegalCommands would: for a seat its player left, those are the bot's now."""
    from services.command.app import NextSeat

    app = _app()
    match_id = _match(app)
    seat = _turn(app, match_id)[0]
    token = SIGNER.seat_token(match_id, seat, f"p{seat}")
    assert [n.seat for n in app.submit_chain(match_id, [], ask_next=[NextSeat(token)]).next] == [seat]
    app.leave_match(match_id, app.viewer(match_id, token))
    assert app.submit_chain(match_id, [], ask_next=[NextSeat(token)]).next == []
    bots = NextSeat(SIGNER.bot_seat_token(match_id, seat))
    assert [n.seat for n in app.submit_chain(match_id, [], ask_next=[bots]).next] == [seat]


class _SecretPlays(type(HIGHCARD)):  # type: ignore[misc]
    """High Card whose plays only their own seat sees: a secret choice, as GoodCritters' action card."""

    def visibility(self, event):  # type: ignore[no-untyped-def]
        if event.WhichOneof("kind") == "played":
            return private_to(event.played.seat)
        return super().visibility(event)


def test_a_clock_default_some_seat_may_not_see_sends_nobody_to_the_bots() -> None:
    """A public `seat_left` right after a secret choice's default would tell the table that the
    hidden choice was the documented default: the seat goes with a public default only."""
    app = run_out(bootstrap(store=InMemoryEventStore(), registry=Registry({"highcard": _SecretPlays()}),
                            settings=SETTINGS, command_settings=CommandSettings(timeouts_to_bot=1, leave_policy="random")))
    match_id = _match(app)
    for _ in range(2):
        _until(app, match_id, 0)
        _clock(app, match_id, 0)
    assert app.matches.get(match_id).match.timeouts[0] >= 1
    assert SEAT_LEFT not in {e.type for e in app.store.read(match_id)}


def test_with_seat_changes_off_nobody_leaves_and_no_clock_sends_a_seat_to_the_bots() -> None:
    """FAMIGLIA_SEAT_CHANGES=off, while a release that cannot read `seat_left` still runs
    (docs/operations.md, "Upgrading"): nothing writes one."""
    app = run_out(bootstrap(store=InMemoryEventStore(), registry=REGISTRY, settings=SETTINGS,
                            command_settings=CommandSettings(timeouts_to_bot=1, leave_policy="random",
                                                             seat_changes=False)))
    match_id = _match(app)
    assert _refused(lambda: app.leave_match(match_id, _person(app, match_id, 1))) == (
        "FAILED_PRECONDITION", "seat_changes_off")
    for _ in range(2):
        _until(app, match_id, 0)
        _clock(app, match_id, 0)
    assert SEAT_LEFT not in {e.type for e in app.store.read(match_id)}
    assert app.return_to_match(match_id, _person(app, match_id, 0)).duplicate  # nothing to take back


def test_a_player_who_left_cannot_learn_the_bots_moves_by_resending_their_command_ids() -> None:
    """A retried command id is answered from the first answer, before anything else is checked. The
    bots' ids are the seat's own ids too, and guessable (`bot:<match>:<version>:<seat>`): a player
    who left, resending one with each candidate command, learnt the bot's secret choice (the
    right one answered as a duplicate, with the seat's hidden event; the others `command_id_reused`).
    Its own commands from before it left are still answered as they were."""
    app = run_out(bootstrap(store=InMemoryEventStore(), registry=Registry({"highcard": _SecretPlays()}),
                            settings=SETTINGS, command_settings=CommandSettings(leave_policy="random")))
    match_id = _match(app)
    me = _person(app, match_id, 0)
    _until(app, match_id, 0)
    mine = HIGHCARD.legal_commands(_turn(app, match_id)[2], 0)[0]
    own = app.submit(match_id, me, "mine", mine)
    app.leave_match(match_id, me)
    _until(app, match_id, 0)
    _seat, version, state = _turn(app, match_id)
    hand = HIGHCARD.legal_commands(state, 0)
    bot_id = f"bot:{match_id}:{version}:0"
    app.submit(match_id, _bots(app, match_id, 0), bot_id, hand[1], version, omit_events=True)  # its secret card
    for card in hand:
        for omit in (False, True):
            refused = _refused(lambda card=card, omit=omit: app.submit(match_id, me, bot_id, card, omit_events=omit))
            assert refused == ("FAILED_PRECONDITION", "seat_left")
    again = app.submit(match_id, me, "mine", mine)
    assert again.duplicate and again.version == own.version


def test_a_leave_retried_while_seat_changes_are_off_answers_the_leave_already_stored() -> None:
    """A LeaveMatch whose answer was lost, sent again to a replica with FAMIGLIA_SEAT_CHANGES=off
    (a rollout, or one rolled back): the seat left already, so it is answered `duplicate`, not
    refused `seat_changes_off` with "the seat stays yours"."""
    store = InMemoryEventStore()
    on = _app(store=store)
    match_id = _match(on)
    done = on.leave_match(match_id, _person(on, match_id, 1))
    off = run_out(bootstrap(store=store, registry=REGISTRY, settings=SETTINGS,
                            command_settings=CommandSettings(leave_policy="random", seat_changes=False)))
    again = off.leave_match(match_id, _person(off, match_id, 1))
    assert (again.version, again.duplicate) == (done.version, True)
    assert _refused(lambda: off.leave_match(match_id, _person(off, match_id, 0))) == (
        "FAILED_PRECONDITION", "seat_changes_off")
