"""A rematch of a finished match (AskRematch, GetRematch): the command service's use cases on an
in-memory store, High Card. Over gRPC and Redis: tests/integration/test_rematch.py."""

from __future__ import annotations

import secrets
import threading
import time

import pytest

from famiglia.auth import TokenSigner
from famiglia.bots.toy import ENGINE as HIGHCARD
from famiglia.bots.toy import toy_registry
from famiglia.config import Settings
from famiglia.engine.registry import Registry
from famiglia.eventstore.envelopes import open_match_created
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.eventstore.rematch_asks import REMATCH_TTL_S, InMemoryRematchAsks, RematchAsks
from famiglia.eventstore.turn_notices import MATCH_OVER, STALE_SECONDS, TurnNotice
from famiglia.grpcutil.errors import AppError
from famiglia.v1 import envelope_pb2, game_service_pb2
from services.command.app import CommandApp, Viewer
from services.command.bootstrap import CommandSettings, bootstrap
from services.command.rematch import ASKED_WITHIN_S, REMATCH_GRACE_S, moved_on, seating
from tests.support.clocks import clocks_run_out

SETTINGS = Settings(secret="unit-test-secret")
REGISTRY = toy_registry()
SIGNER = TokenSigner(SETTINGS.secret)
OPTIONS = {"hand": "3", "clock_s": "30"}


def _app(store: InMemoryEventStore | None = None, secret: str = SETTINGS.secret,
         asks: InMemoryRematchAsks | None = None) -> CommandApp:
    app = bootstrap(store=store or InMemoryEventStore(), registry=REGISTRY, settings=Settings(secret=secret),
                    command_settings=CommandSettings(leave_policy="random"))
    if asks is not None:
        app.rematches = asks
    return app


def _match(app: CommandApp, seats: int = 2, *, bot_seat: int | None = None, tournament_id: str = "") -> str:
    info = [envelope_pb2.SeatInfo(seat=s, player_id=f"p{s}", display_name=f"P{s}", bot=s == bot_seat,
                                  policy="random" if s == bot_seat else "")
            for s in range(seats)]
    return app.create_match("highcard", seats, seed=5, options=OPTIONS, seat_info=info,
                            tournament_id=tournament_id).match_id


def _person(app: CommandApp, match_id: str, seat: int) -> Viewer:
    return app.viewer(match_id, SIGNER.seat_token(match_id, seat, f"p{seat}"))


def _bots(app: CommandApp, match_id: str, seat: int) -> Viewer:
    return app.viewer(match_id, SIGNER.bot_seat_token(match_id, seat))


def _play_out(app: CommandApp, match_id: str, *, bots: frozenset[int] = frozenset()) -> None:
    """Every seat plays its first legal command until the match ends (the bots' token for `bots`)."""
    for i in range(200):
        m = app.matches.catch_up(app.matches.get(match_id))
        if m.finished:
            return
        seat = HIGHCARD.pending(m.state)[0].seat
        viewer = _bots(app, match_id, seat) if seat in bots else _person(app, match_id, seat)
        app.submit(match_id, viewer, f"c{i}", HIGHCARD.legal_commands(m.state, seat)[0], m.public_version)
    raise AssertionError("the match did not end")


def _created(app: CommandApp, match_id: str) -> envelope_pb2.MatchCreated:
    created = open_match_created(app.store.read(match_id, limit=1)[0])
    assert created is not None
    return created


def _refused(call) -> tuple[str, str]:
    with pytest.raises(AppError) as raised:
        call()
    return raised.value.status.name, raised.value.code


def test_a_match_in_play_has_no_rematch() -> None:
    app = _app()
    match_id = _match(app)
    assert _refused(lambda: app.ask_rematch(match_id, _person(app, match_id, 0))) == \
        ("FAILED_PRECONDITION", "match_not_over")
    assert _refused(lambda: app.get_rematch(match_id, Viewer(None))) == ("FAILED_PRECONDITION", "match_not_over")


def test_the_rematch_is_made_once_every_person_asked_each_seat_moved_one_on() -> None:
    app = _app()
    match_id = _match(app, 3)
    _play_out(app, match_id)
    first = app.ask_rematch(match_id, _person(app, match_id, 1))
    assert (first.asked, first.waiting_for, first.match_id, first.seat_token) == ((1,), (0, 2), "", "")
    assert first.seat == moved_on(1, 3) == 2  # the seat it will be, known before the match is made
    again = app.ask_rematch(match_id, _person(app, match_id, 1))
    assert again == first  # idempotent
    looked = app.get_rematch(match_id, Viewer(None))
    assert (looked.asked, looked.waiting_for, looked.match_id, looked.seat) == ((1,), (0, 2), "", -1)
    assert app.get_rematch(match_id, _person(app, match_id, 0)).seat == 1  # asked or not

    app.ask_rematch(match_id, _person(app, match_id, 2))
    made = app.ask_rematch(match_id, _person(app, match_id, 0))
    assert made.asked == (0, 1, 2) and made.waiting_for == ()
    assert made.match_id and made.match_id != match_id
    assert made.seat == moved_on(0, 3) == 1
    claim = SIGNER.read_seat(made.seat_token)
    assert (claim.match_id, claim.seat, claim.player_id, claim.bot) == (made.match_id, 1, "p0", False)

    old, new = _created(app, match_id), _created(app, made.match_id)
    assert (new.game_id, new.seats, dict(new.options), new.tournament_id) == ("highcard", 3, OPTIONS, "")
    assert [(i.seat, i.player_id, i.display_name, i.bot) for i in new.seat_info] == \
        [(0, "p2", "P2", False), (1, "p0", "P0", False), (2, "p1", "P1", False)]
    assert new.seed != old.seed  # a new deal (the server's draw; the first match's was asked for)

    # Every other seat finds the same rematch, and its own seat there.
    for seat in (1, 2):
        answer = app.ask_rematch(match_id, _person(app, match_id, seat))
        assert (answer.match_id, answer.seat) == (made.match_id, moved_on(seat, 3))
        assert SIGNER.read_seat(answer.seat_token).seat == moved_on(seat, 3)
        looked = app.get_rematch(match_id, _person(app, match_id, seat))
        assert (looked.match_id, looked.seat, looked.seat_token) == (answer.match_id, answer.seat, answer.seat_token)
    spectator = app.get_rematch(match_id, Viewer(None))
    assert (spectator.match_id, spectator.seat, spectator.seat_token) == (made.match_id, -1, "")
    # The rematch is in play, its players' live match, and it has a rematch of its own at its end.
    assert {t.match_id for t in app.my_turns("p0")} == {made.match_id}
    _play_out(app, made.match_id)
    second = app.ask_rematch(made.match_id, _person(app, made.match_id, 1))
    assert second.asked == (1,) and second.match_id == ""


def test_a_bot_seat_asks_nothing_and_stays_the_bots() -> None:
    app = _app()
    match_id = _match(app, bot_seat=1)
    _play_out(app, match_id, bots=frozenset({1}))
    assert _refused(lambda: app.ask_rematch(match_id, _bots(app, match_id, 1))) == ("FAILED_PRECONDITION",
                                                                                     "seat_is_bot")
    # The creator's token of the bot's seat is no person's either.
    assert _refused(lambda: app.ask_rematch(match_id, app.viewer(match_id, SIGNER.seat_token(match_id, 1)))) == \
        ("FAILED_PRECONDITION", "seat_is_bot")
    made = app.ask_rematch(match_id, _person(app, match_id, 0))  # the one person: made at once
    assert made.match_id and made.waiting_for == () and made.seat == 1
    assert [(i.seat, i.player_id, i.bot, i.policy) for i in _created(app, made.match_id).seat_info] == \
        [(0, "p1", True, "random"), (1, "p0", False, "")]


def test_a_seat_its_player_left_is_the_bots_in_the_rematch() -> None:
    app = _app()
    match_id = _match(app, 3)
    app.leave_match(match_id, _person(app, match_id, 2))
    _play_out(app, match_id, bots=frozenset({2}))
    assert _refused(lambda: app.ask_rematch(match_id, _person(app, match_id, 2))) == ("FAILED_PRECONDITION",
                                                                                       "seat_left")
    app.ask_rematch(match_id, _person(app, match_id, 0))
    made = app.ask_rematch(match_id, _person(app, match_id, 1))
    assert made.match_id and made.asked == (0, 1)
    seated = {i.seat: i for i in _created(app, made.match_id).seat_info}
    assert (seated[0].bot, seated[0].policy, seated[0].player_id, seated[0].display_name) == (True, "random", "", "")
    # The player who left reads where it stands, and gets no seat there.
    gone = app.get_rematch(match_id, _person(app, match_id, 2))
    assert (gone.match_id, gone.seat, gone.seat_token) == (made.match_id, -1, "")


def _away_by_clock(app: CommandApp) -> str:
    """A finished two-seat match whose seat 1 the bots played at the end (its clock ran out too often)."""
    info = [envelope_pb2.SeatInfo(seat=s, player_id=f"p{s}") for s in range(2)]
    match_id = app.create_match("highcard", 2, seed=5, options={"hand": "6", "clock_s": "30"},
                                seat_info=info).match_id
    with clocks_run_out(app):  # (only while it plays: its rematch is asked now, soon after its end)
        _time_out_seat_1(app, match_id)
    assert app.matches.catch_up(app.matches.get(match_id)).away[1][0].reason == "timeouts"
    return match_id


def _time_out_seat_1(app: CommandApp, match_id: str) -> None:
    for i in range(200):
        m = app.matches.catch_up(app.matches.get(match_id))
        if m.finished:
            break
        seat = HIGHCARD.pending(m.state)[0].seat
        if seat == 1 and 1 not in m.away:
            app.submit(match_id, _bots(app, match_id, 1), f"clock:{match_id}:{m.public_version}:1",
                       HIGHCARD.timeout_command(m.state, 1), m.public_version)
        else:
            viewer = _bots(app, match_id, seat) if seat == 1 else _person(app, match_id, seat)
            app.submit(match_id, viewer, f"c{i}", HIGHCARD.legal_commands(m.state, seat)[0], m.public_version)


def test_a_seat_away_by_its_clock_at_the_end_is_the_bots_in_the_rematch() -> None:
    app = _app()
    match_id = _away_by_clock(app)
    assert _refused(lambda: app.ask_rematch(match_id, _person(app, match_id, 1))) == ("FAILED_PRECONDITION",
                                                                                       "seat_away")
    made = app.ask_rematch(match_id, _person(app, match_id, 0))
    assert made.match_id and made.seat == 1
    assert [(i.seat, i.player_id, i.bot, i.policy) for i in _created(app, made.match_id).seat_info] == \
        [(0, "", True, "random"), (1, "p0", False, "")]


def test_a_cancelled_or_a_tournament_match_has_no_rematch() -> None:
    app = _app()
    cancelled = _match(app)
    app.cancel_match(cancelled, "ops", "a test")
    assert _refused(lambda: app.ask_rematch(cancelled, _person(app, cancelled, 0))) == \
        ("FAILED_PRECONDITION", "match_cancelled")
    planned = _match(app, tournament_id="t1")
    _play_out(app, planned)
    assert _refused(lambda: app.ask_rematch(planned, _person(app, planned, 0))) == \
        ("FAILED_PRECONDITION", "tournament_match")


def test_asking_needs_a_seat_token() -> None:
    app = _app()
    match_id = _match(app)
    _play_out(app, match_id)
    assert _refused(lambda: app.ask_rematch(match_id, Viewer(None))) == ("UNAUTHENTICATED", "no_token")
    assert _refused(lambda: app.ask_rematch("", _person(app, match_id, 0))) == ("INVALID_ARGUMENT", "no_match_id")


def test_two_replicas_with_other_secrets_make_one_rematch() -> None:
    """The request id is the first writer's, kept with the asks: a replica signing with another
    secret (a rotation under way) finds the same match, never a second one."""
    store, asks = InMemoryEventStore(), InMemoryRematchAsks()
    a = _app(store, asks=asks)
    b = _app(store, secret="the-next-secret", asks=asks)
    b.signer = TokenSigner("the-next-secret", accepted=[SETTINGS.secret])
    match_id = _match(a)
    _play_out(a, match_id)
    a.ask_rematch(match_id, _person(a, match_id, 0))
    made = b.ask_rematch(match_id, _person(b, match_id, 1))
    assert made.match_id
    assert a.ask_rematch(match_id, _person(a, match_id, 0)).match_id == made.match_id
    assert a.get_rematch(match_id, Viewer(None)).match_id == made.match_id


def test_asks_expire_after_their_last_write() -> None:
    now = [0.0]
    asks = InMemoryRematchAsks(ttl_s=10, clock=lambda: now[0])
    asks.ask("m1", 0)
    now[0] = 9
    assert asks.ask("m1", 1).seats == {0, 1}
    now[0] = 18
    assert asks.fix_request_id("m1", "a") == "a" and asks.fix_request_id("m1", "b") == "a"
    now[0] = 28.5
    assert asks.look("m1").seats == frozenset() and asks.look("m1").request_id == ""


def test_a_seat_away_at_the_end_gets_no_token_of_the_bots_seat_in_the_rematch() -> None:
    """The bots play the seat in the rematch: its player's token there would read the bot's
    hidden cards and command the seat (a person's token of a bot's seat is taken), for a
    player who never asked. GetRematch answered it with one."""
    app = _app()
    match_id = _away_by_clock(app)
    made = app.ask_rematch(match_id, _person(app, match_id, 0))
    assert made.match_id
    away = app.get_rematch(match_id, _person(app, match_id, 1))
    assert (away.match_id, away.seat, away.seat_token) == (made.match_id, -1, "")


def test_the_creators_token_of_a_bot_seat_gets_no_token_in_the_rematch() -> None:
    """A seat's token is given only to a person's seat: the creator's token of a bot's seat
    (not the bots' own) is refused by AskRematch, and GetRematch gave it the bots' seat there."""
    app = _app()
    match_id = _match(app, bot_seat=1)
    _play_out(app, match_id, bots=frozenset({1}))
    made = app.ask_rematch(match_id, _person(app, match_id, 0))
    creators = app.viewer(match_id, SIGNER.seat_token(match_id, 1))
    looked = app.get_rematch(match_id, creators)
    assert (looked.match_id, looked.seat, looked.seat_token) == (made.match_id, -1, "")


def test_a_rematch_made_before_its_match_was_archived_is_still_found() -> None:
    """The retention sweep trims a finished match's stream (an hour after its end by default):
    a player who asked and comes back later still finds the rematch made meanwhile, and its
    seat there, whose clock runs for it. The asks (and the request id) outlive the trim."""
    store, asks = InMemoryEventStore(), InMemoryRematchAsks()
    a = _app(store, asks=asks)
    match_id = _match(a, 3, bot_seat=2)
    _play_out(a, match_id, bots=frozenset({2}))
    a.ask_rematch(match_id, _person(a, match_id, 0))
    made = a.ask_rematch(match_id, _person(a, match_id, 1))
    assert made.match_id
    store.trim(match_id)
    b = _app(store, asks=asks)  # a replica that never held the match: it reads the store
    for answer in (b.get_rematch(match_id, _person(b, match_id, 0)), b.ask_rematch(match_id, _person(b, match_id, 0))):
        assert (answer.asked, answer.waiting_for, answer.match_id, answer.seat) == ((0, 1), (), made.match_id, 1)
        claim = SIGNER.read_seat(answer.seat_token)
        assert (claim.match_id, claim.seat, claim.player_id, claim.bot) == (made.match_id, 1, "p0", False)
    spectator = b.get_rematch(match_id, Viewer(None))
    assert (spectator.match_id, spectator.seat, spectator.seat_token) == (made.match_id, -1, "")
    # The bots' seat is nobody's there either; a match archived before its rematch takes no asks.
    creators = b.get_rematch(match_id, b.viewer(match_id, SIGNER.seat_token(match_id, 2, "p2")))
    assert (creators.match_id, creators.seat_token) == (made.match_id, "")
    unasked = _match(a)
    _play_out(a, unasked)
    a.ask_rematch(unasked, _person(a, unasked, 0))
    store.trim(unasked)
    assert _refused(lambda: b.ask_rematch(unasked, _person(b, unasked, 1))) == ("NOT_FOUND", "match_archived")
    assert _refused(lambda: b.get_rematch(unasked, Viewer(None))) == ("NOT_FOUND", "match_archived")


def test_the_replica_that_held_the_matches_finds_the_rematch_after_the_trim() -> None:
    """A replica keeps a finished match in memory after the retention sweep trimmed it (until
    evicted): its catch-up found the stream gone, and AskRematch and GetRematch there failed as
    an internal error (an UnknownMatch raised through), where a replica that never held it
    found the rematch (above). The rematch archived too, an ask there was an internal error as
    well, not the archived rematch's answer nor `match_archived`."""
    store, asks = InMemoryEventStore(), InMemoryRematchAsks()
    a = _app(store, asks=asks)
    match_id = _match(a)
    _play_out(a, match_id)
    a.ask_rematch(match_id, _person(a, match_id, 0))
    made = a.ask_rematch(match_id, _person(a, match_id, 1))
    _play_out(a, made.match_id)
    store.trim(made.match_id)  # the rematch archived first (a sweep): the finished match still asks
    again = a.ask_rematch(match_id, _person(a, match_id, 0))
    assert (again.match_id, again.seat) == (made.match_id, 1)
    store.trim(match_id)
    assert _refused(lambda: a.get_rematch(match_id, _person(a, match_id, 0))) == ("NOT_FOUND", "match_archived")
    b = _app(store, asks=asks)  # a replica that never held them answers alike
    assert _refused(lambda: b.get_rematch(match_id, _person(b, match_id, 0))) == ("NOT_FOUND", "match_archived")
    live = _match(a)
    _play_out(a, live)
    a.ask_rematch(live, _person(a, live, 0))
    second = a.ask_rematch(live, _person(a, live, 1))
    store.trim(live)  # the rematch in play: found from the same replica
    for answer in (a.get_rematch(live, _person(a, live, 0)), a.ask_rematch(live, _person(a, live, 1))):
        assert answer.match_id == second.match_id and answer.seat_token


def test_a_look_makes_a_rematch_whose_creation_was_lost() -> None:
    """Every person asked and the request id is fixed, but the creation was lost (the last
    asker's process killed between the two): the others, who look with GetRematch to learn
    whether it is made, would wait for it for ever; the look makes it, as an ask would."""
    app = _app()
    match_id = _match(app)
    _play_out(app, match_id)
    app.ask_rematch(match_id, _person(app, match_id, 0))
    app.rematches.ask(match_id, 1)
    app.rematches.fix_request_id(match_id, secrets.token_hex(32))
    looked = app.get_rematch(match_id, _person(app, match_id, 0))
    assert looked.match_id and looked.seat == 1 and looked.waiting_for == ()
    assert app.store.version(looked.match_id) > 0
    assert app.ask_rematch(match_id, _person(app, match_id, 1)).match_id == looked.match_id


def test_an_ask_after_the_rematch_ended_leaves_it_out_of_its_players_live_matches() -> None:
    """Asking again is how a client learns the rematch (the SDK says so): each ask created it
    again under its request id, and a creation again indexes its people's live matches, so
    an ask after the rematch ended put the ended match back into every player's live index
    (ListMyTurns then reads it, finds it over and drops it: a write and a read for nothing)."""
    app = _app()
    match_id = _match(app)
    _play_out(app, match_id)
    app.ask_rematch(match_id, _person(app, match_id, 0))
    made = app.ask_rematch(match_id, _person(app, match_id, 1))
    _play_out(app, made.match_id)
    assert app.players.newest("p0", 10) == []
    again = app.ask_rematch(match_id, _person(app, match_id, 0))
    assert again.match_id == made.match_id and again.seat_token
    assert app.players.newest("p0", 10) == [] and app.players.newest("p1", 10) == []


def test_bots_past_the_public_budget_are_not_made_again_without_an_operator() -> None:
    """Their creation needed an operator token (`check_creator`); a rematch asks nobody's."""
    app = _app()
    dear = "ismcts?iterations=100000&seconds=60"
    info = [envelope_pb2.SeatInfo(seat=0, player_id="p0"), envelope_pb2.SeatInfo(seat=1, bot=True, policy=dear)]
    match_id = app.create_match("highcard", 2, seed=5, options=OPTIONS, seat_info=info).match_id
    _play_out(app, match_id, bots=frozenset({1}))
    assert _refused(lambda: app.ask_rematch(match_id, _person(app, match_id, 0))) == ("PERMISSION_DENIED",
                                                                                       "operator_only")
    assert app.get_rematch(match_id, Viewer(None)).asked == ()


def _told(app: CommandApp, player_id: str) -> list[tuple[str, str, int]]:
    """The rematch notices of a player (each comes after the match's `match_over`: below)."""
    return [(n.kind, n.match_id, n.seat) for n in app.notices.read(player_id) if n.kind != MATCH_OVER]


def test_a_player_told_of_a_rematch_was_told_first_that_the_match_is_over_and_once() -> None:
    """The dispatcher tells `match_over` when it folds the end; an ask made in that moment was
    posted first, so a player's stream told of a rematch of a match it had not been told was
    over. The command service tells it first now, under the same told mark: the dispatcher's own
    notice, told after, writes nothing."""
    app = _app()
    match_id = _match(app, 3, bot_seat=2)
    _play_out(app, match_id, bots=frozenset({2}))
    app.ask_rematch(match_id, _person(app, match_id, 1))
    kinds = [(n.kind, n.match_id, n.seat) for n in app.notices.read("p0")]
    assert kinds == [(MATCH_OVER, match_id, 0), ("rematch_asked", match_id, 0)]
    m = app.matches.catch_up(app.matches.get(match_id))
    over = app.notices.read("p0")[0]
    assert (over.version, over.at_ms) == (m.version, m.last_timestamp_ms)
    dispatchers = TurnNotice("p0", match_id, m.game_id, 0, MATCH_OVER, m.version, at_ms=m.last_timestamp_ms,
                             asked_at=m.version)
    assert app.notices.tell([dispatchers]) == 0  # told already: once
    assert [n.kind for n in app.notices.read("p1")] == []  # the asker: its own answer told it (the dispatcher tells it the end)


def test_a_rematch_asked_days_after_the_end_does_not_tell_the_end_again() -> None:
    """A rematch may be asked up to 29 days after the end; the `match_over` told mark lives 7
    (TTL_SECONDS), which is why the dispatcher tells no end older than STALE_SECONDS: told
    then, its mark may be gone since. The rematch's `match_over`, told under that mark whatever
    the end's age, was told a second time to a player the dispatcher had told a week before."""
    app = _app()
    match_id = _match(app, 3, bot_seat=2)
    _play_out(app, match_id, bots=frozenset({2}))
    m = app.matches.catch_up(app.matches.get(match_id))
    late_s = m.last_timestamp_ms / 1000 + STALE_SECONDS + 3600  # the dispatcher's mark may be gone
    app.wall = lambda: late_s
    app.ask_rematch(match_id, _person(app, match_id, 1))
    assert [(n.kind, n.match_id, n.seat) for n in app.notices.read("p0")] == [("rematch_asked", match_id, 0)]


def test_the_table_is_told_of_each_first_ask_and_of_the_rematch_made() -> None:
    """`rematch_asked` to each other person at the table at a seat's first ask (not again, not to
    the asker, not to a bot's seat); `rematch_made` to all but the seat whose ask made it."""
    app = _app()
    match_id = _match(app, 3, bot_seat=2)
    _play_out(app, match_id, bots=frozenset({2}))
    app.ask_rematch(match_id, _person(app, match_id, 1))
    app.ask_rematch(match_id, _person(app, match_id, 1))  # again: nothing new to tell
    assert _told(app, "p0") == [("rematch_asked", match_id, 0)]
    assert _told(app, "p1") == [] and _told(app, "p2") == []
    made = app.ask_rematch(match_id, _person(app, match_id, 0))
    assert made.match_id
    assert _told(app, "p1") == [("rematch_made", match_id, 1)]
    assert _told(app, "p0") == [("rematch_asked", match_id, 0)]  # its own answer told it
    app.ask_rematch(match_id, _person(app, match_id, 1))  # asked again after: nothing more
    assert len(_told(app, "p1")) == 1 and app.notices.read("p1")[0].at_ms > 0


def test_no_rematch_notice_when_notifications_are_off() -> None:
    app = bootstrap(store=InMemoryEventStore(), registry=REGISTRY, settings=SETTINGS,
                    command_settings=CommandSettings(leave_policy="random", turn_notifications=False))
    match_id = _match(app)
    _play_out(app, match_id)
    app.ask_rematch(match_id, _person(app, match_id, 0))
    assert app.ask_rematch(match_id, _person(app, match_id, 1)).match_id
    assert _told(app, "p0") == [] and _told(app, "p1") == []


def test_the_rematch_names_the_match_it_follows_and_a_plain_creation_names_none() -> None:
    """The series is in the events: the rematch's `match_created` holds the finished match's id
    (`rematch_of`), set by the server's rematch creation only. CreateMatchRequest has no such
    field, and a creation under a rematch's request id that names no series is another match."""
    app = _app()
    match_id = _match(app)
    _play_out(app, match_id)
    app.ask_rematch(match_id, _person(app, match_id, 0))
    request_id = app.rematches.fix_request_id(match_id, secrets.token_hex(32))
    made = app.ask_rematch(match_id, _person(app, match_id, 1))
    assert (_created(app, made.match_id).rematch_of, _created(app, match_id).rematch_of) == (match_id, "")
    # Its creation again (the next ask, a look) names the same match; a plain one is refused.
    assert app.ask_rematch(match_id, _person(app, match_id, 0)).match_id == made.match_id
    m = app.matches.catch_up(app.matches.get(match_id))
    assert _refused(lambda: app.create_match("highcard", 2, options=dict(m.created.options),
                                             seat_info=list(_created(app, made.match_id).seat_info),
                                             request_id=request_id)) == ("ALREADY_EXISTS", "request_id_reused")
    assert "rematch_of" not in game_service_pb2.CreateMatchRequest.DESCRIPTOR.fields_by_name


def test_a_rematch_made_before_the_link_is_found_again_by_an_ask() -> None:
    """A rematch made by a server from before `rematch_of` (a rolling deploy, a roll-back) was
    created without it: an ask on the new server creates it again under the same request id,
    and that creation must find it, not refuse the table its rematch as request_id_reused."""
    app = _app()
    match_id = _match(app)
    _play_out(app, match_id)
    request_id = app.rematches.fix_request_id(match_id, secrets.token_hex(32))
    m = app.matches.catch_up(app.matches.get(match_id))
    before = app.create_match("highcard", 2, options=dict(m.created.options), seat_info=seating(m),
                              request_id=request_id)  # as the server before the link made it
    app.rematches.ask(match_id, 0)
    made = app.ask_rematch(match_id, _person(app, match_id, 1))
    assert made.match_id == before.match_id and made.seat == 0 and made.seat_token
    assert _created(app, made.match_id).rematch_of == ""  # as it was made: the events are not rewritten


def test_a_player_at_two_seats_is_not_told_of_its_own_ask_nor_of_the_rematch_its_ask_made() -> None:
    """`rematch_asked` tells "another person at the table asked" and `rematch_made` goes to every
    person but the one whose ask made it: a player at two seats asking at one is not told of it
    at the other (it was told each other person's ask at both, one notice a seat)."""
    app = _app()
    info = [envelope_pb2.SeatInfo(seat=s, player_id=p, display_name=p.upper())
            for s, p in enumerate(("p0", "p0", "p2"))]
    match_id = app.create_match("highcard", 3, seed=5, options=OPTIONS, seat_info=info).match_id

    def seat(s: int) -> Viewer:
        return app.viewer(match_id, SIGNER.seat_token(match_id, s, info[s].player_id))

    for i in range(200):
        m = app.matches.catch_up(app.matches.get(match_id))
        if m.finished:
            break
        s = HIGHCARD.pending(m.state)[0].seat
        app.submit(match_id, seat(s), f"c{i}", HIGHCARD.legal_commands(m.state, s)[0], m.public_version)
    app.ask_rematch(match_id, seat(2))
    assert _told(app, "p0") == [("rematch_asked", match_id, 0), ("rematch_asked", match_id, 1)]
    app.ask_rematch(match_id, seat(0))
    assert _told(app, "p2") == [("rematch_asked", match_id, 2)]
    assert len(_told(app, "p0")) == 2  # not told at seat 1 of its own ask at seat 0
    made = app.ask_rematch(match_id, seat(1))
    assert made.match_id
    assert _told(app, "p2") == [("rematch_asked", match_id, 2), ("rematch_made", match_id, 2)]
    assert len(_told(app, "p0")) == 2  # its own ask made it: not told at seat 0 either


def test_a_match_kept_past_its_asks_life_has_no_second_rematch() -> None:
    """A finished match stays in Redis until the retention trims it (for ever with
    FAMIGLIA_PROJECTION_RETAIN_FINISHED_MS=0, or while the projection is down), its asks 30 days
    after their last write: past them, GetRematch forgot the rematch made and the table's asks
    made a second rematch of the same match. A rematch is asked within ASKED_WITHIN_S of the
    end, a day less than the asks live: the one made is found while its asks last, and once
    they are gone no new one begins (`rematch_too_late`)."""
    days = [0.0]
    asks = InMemoryRematchAsks(clock=lambda: days[0] * 86_400)
    app = _app(asks=asks)
    start = time.time()
    app.wall = lambda: start + days[0] * 86_400
    match_id = _match(app)
    _play_out(app, match_id)
    app.ask_rematch(match_id, _person(app, match_id, 0))
    made = app.ask_rematch(match_id, _person(app, match_id, 1)).match_id
    assert made
    days[0] = 28  # asked again within the window: found, its asks kept 30 days more
    assert app.ask_rematch(match_id, _person(app, match_id, 0)).match_id == made
    days[0] = 40  # past the window, its asks still kept: found
    assert app.get_rematch(match_id, Viewer(None)).match_id == made
    assert app.ask_rematch(match_id, _person(app, match_id, 1)).match_id == made
    days[0] = 71  # the asks gone (30 days after the last write): nothing begins again
    assert _refused(lambda: app.get_rematch(match_id, Viewer(None))) == ("FAILED_PRECONDITION", "rematch_too_late")
    for seat in (0, 1):
        assert _refused(lambda s=seat: app.ask_rematch(match_id, _person(app, match_id, s))) == \
            ("FAILED_PRECONDITION", "rematch_too_late")
    assert ASKED_WITHIN_S <= REMATCH_TTL_S - 86_400  # a day's margin for the hosts' clocks


def test_a_table_that_asks_a_month_after_the_end_has_no_rematch() -> None:
    """The window counts from the match's end, not from the first ask."""
    days = [0.0]
    app = _app(asks=InMemoryRematchAsks(clock=lambda: days[0] * 86_400))
    start = time.time()
    app.wall = lambda: start + days[0] * 86_400
    match_id = _match(app)
    _play_out(app, match_id)
    days[0] = 20
    assert app.ask_rematch(match_id, _person(app, match_id, 0)).waiting_for == (1,)
    days[0] = 30
    assert _refused(lambda: app.ask_rematch(match_id, _person(app, match_id, 1))) == \
        ("FAILED_PRECONDITION", "rematch_too_late")
    assert _refused(lambda: app.get_rematch(match_id, Viewer(None))) == ("FAILED_PRECONDITION", "rematch_too_late")


def _lost_creation(app: CommandApp, match_id: str) -> None:
    """Seat 1's ask completes the table and fixes the request id, and its process dies before
    it creates the rematch."""
    app.ask_rematch(match_id, _person(app, match_id, 0))
    app.rematches.ask(match_id, 1)
    app.rematches.fix_request_id(match_id, secrets.token_hex(32), int(app.wall() * 1000))


def test_a_rematch_whose_creation_was_lost_is_made_without_a_later_ask() -> None:
    """It was made only by somebody's next ask or look: a table that waits for its notice asks
    nothing, and once the retention archived the finished match (an hour after its end) the
    rematch, made from it, was lost for good. Each command process's sweep makes it."""
    now = [time.time()]
    app = _app()
    app.wall = lambda: now[0]
    match_id = _match(app)
    _play_out(app, match_id)
    _lost_creation(app, match_id)
    assert app.finish_rematches() == 0  # within the grace: an ask may be making it now
    now[0] += REMATCH_GRACE_S
    assert app.finish_rematches() == 1
    made = app.get_rematch(match_id, _person(app, match_id, 1))
    assert made.match_id and app.store.version(made.match_id) > 0
    assert _created(app, made.match_id).rematch_of == match_id
    assert _told(app, "p0")[-1] == ("rematch_made", match_id, 0)  # the table is told, as by an ask
    assert _told(app, "p1") == [("rematch_asked", match_id, 1), ("rematch_made", match_id, 1)]
    assert app.finish_rematches() == 0 and app.rematches.pending(int(now[0] * 1000)) == []


def test_a_rematch_made_by_its_ask_leaves_nothing_for_the_sweep() -> None:
    app = _app()
    match_id = _match(app)
    _play_out(app, match_id)
    app.ask_rematch(match_id, _person(app, match_id, 0))
    assert app.ask_rematch(match_id, _person(app, match_id, 1)).match_id
    assert app.rematches.pending(int(app.wall() * 1000) + 10**9) == []


def test_a_lost_creation_whose_match_was_archived_is_given_up() -> None:
    """The retention keeps such a match in Redis; one trimmed all the same (a projection from
    before it, which did not look: asks bound to no store) makes nothing: the sweep says so and
    looks at it no more."""
    app = _app(asks=InMemoryRematchAsks())
    match_id = _match(app)
    _play_out(app, match_id)
    _lost_creation(app, match_id)
    app.store.trim(match_id)
    assert app.finish_rematches(grace_s=0) == 1
    assert app.rematches.pending(int(app.wall() * 1000) + 10**9) == []


def test_the_command_process_sweeps_until_stopped_and_past_a_failed_round() -> None:
    from services.command.__main__ import sweep_rematches

    stop, rounds = threading.Event(), []

    class _App:
        def finish_rematches(self) -> int:
            rounds.append(1)
            if len(rounds) == 1:
                raise ConnectionError("Redis away")
            stop.set()
            return 0

    sweep_rematches(_App(), stop, every_s=0)  # type: ignore[arg-type]
    assert len(rounds) == 2


def test_an_operator_allows_the_rematch_of_bots_past_the_public_budget_and_the_table_asks() -> None:
    """Such a match's rematch was refused `operator_only`, "only an operator creates such a match
    again", and an operator could not: AskRematch took a seat token only. An operator's token on
    AskRematch allows it now (the bots' time is the operator's to give, as at its creation), and
    the persons ask as at any match: nobody is sat at a table they did not ask for."""
    app = _app()
    dear = "ismcts?iterations=100000&seconds=60"
    info = [envelope_pb2.SeatInfo(seat=0, player_id="p0"), envelope_pb2.SeatInfo(seat=1, player_id="p1"),
            envelope_pb2.SeatInfo(seat=2, bot=True, policy=dear)]
    match_id = app.create_match("highcard", 3, seed=5, options=OPTIONS, seat_info=info).match_id
    _play_out(app, match_id, bots=frozenset({2}))
    operator = SIGNER.operator_token("alice")
    assert app.rematch_operator(SIGNER.seat_token(match_id, 0, "p0")) == ""  # a seat's token asks as a seat
    assert app.rematch_operator(None) == ""
    assert app.rematch_operator(operator) == "alice"
    expired = SIGNER.operator_token("alice", ttl_s=1, now=time.time() - 10)
    assert _refused(lambda: app.rematch_operator(expired)) == ("UNAUTHENTICATED", "bad_token")

    allowed = app.allow_rematch(match_id, "alice")
    assert (allowed.asked, allowed.waiting_for, allowed.match_id, allowed.seat) == ((), (0, 1), "", -1)
    assert app.ask_rematch(match_id, _person(app, match_id, 0)).waiting_for == (1,)
    made = app.ask_rematch(match_id, _person(app, match_id, 1))
    assert made.match_id and made.seat == 2 and made.seat_token
    assert [(i.seat, i.bot, i.policy) for i in _created(app, made.match_id).seat_info if i.bot] == [(0, True, dear)]
    assert app.allow_rematch(match_id, "alice").match_id == made.match_id  # again: where it stands
    # A match with no such bots needs no operator: allowing it changes nothing.
    plain = _match(app)
    _play_out(app, plain)
    assert app.allow_rematch(plain, "alice").waiting_for == (0, 1)


def test_a_write_to_the_asks_after_the_trim_stores_nothing_and_answers_match_archived(monkeypatch) -> None:
    """The retention sweep trims the finished match between a call's load and its write: an
    operator's allow, and the `fix_request_id` of a table completed without a request id (by a
    release before the ask fixed it), wrote the asks of a match gone, the latter marking a
    creation pending that no sweep could make, and made the rematch of an archived match. Refused
    in the write now, as the ask is: answered as a call that came after the trim."""
    store = InMemoryEventStore()
    app = _app(store)
    asks = app.rematches

    def trimmed_first(write):
        def call(match_id, *args, **kwargs):
            store.trim(match_id)  # (the sweep, between the load and the write)
            return write(match_id, *args, **kwargs)
        return call

    allowed = _match(app)
    _play_out(app, allowed)
    monkeypatch.setattr(asks, "allow", trimmed_first(asks.allow))
    assert _refused(lambda: app.allow_rematch(allowed, "alice")) == ("NOT_FOUND", "match_archived")
    assert asks.look(allowed) == RematchAsks(frozenset())

    completed = _match(app)
    _play_out(app, completed)
    asks.ask(completed, 0)  # the table asked in full by a release that fixed no request id
    ask = asks.ask
    monkeypatch.setattr(asks, "ask", lambda match_id, seat, *_args: ask(match_id, seat))
    monkeypatch.setattr(asks, "fix_request_id", trimmed_first(asks.fix_request_id))
    assert _refused(lambda: app.ask_rematch(completed, _person(app, completed, 1))) == ("NOT_FOUND", "match_archived")
    assert asks.look(completed) == RematchAsks(frozenset({0, 1})) and asks.pending(10**15) == []


def test_a_creation_done_but_not_dropped_from_the_pending_is_dropped_by_the_sweep() -> None:
    """The asker's process died after the creation, before it dropped the pending entry, and the
    rematch is over since: the sweep creates nothing (an ended match is not indexed again) and
    drops it, so the retention does not keep the finished match for ever."""
    app = _app()
    match_id = _match(app)
    _play_out(app, match_id)
    app.ask_rematch(match_id, _person(app, match_id, 0))
    made = app.ask_rematch(match_id, _person(app, match_id, 1)).match_id
    _play_out(app, made)
    app.rematches.fix_request_id(match_id, "ignored: one is fixed", at_ms=0)  # pending again, as left
    assert app.finish_rematches() == 1
    assert app.rematches.pending(int(app.wall() * 1000)) == [] and app.players.newest("p0", 10) == []


def test_a_creation_that_fails_for_now_stays_pending_and_the_others_are_made() -> None:
    app = _app()
    first, second = _match(app), _match(app)
    for match_id in (first, second):
        _play_out(app, match_id)
        _lost_creation(app, match_id)
    create, failed = app.create_match, []

    def away_once(*args, **kwargs):  # the store away for the first creation the sweep tries
        if not failed:
            failed.append(1)
            raise ConnectionError("Redis away")
        return create(*args, **kwargs)

    app.create_match = away_once  # type: ignore[method-assign]
    assert app.finish_rematches(grace_s=0) == 2
    assert len(app.rematches.pending(int(app.wall() * 1000))) == 1  # the one that failed, for the next round
    assert app.finish_rematches(grace_s=0) == 1
    assert app.rematches.pending(int(app.wall() * 1000)) == []
    assert all(app.get_rematch(m, Viewer(None)).match_id for m in (first, second))


def _replica(app: CommandApp, registry: Registry = REGISTRY) -> CommandApp:
    """A second command process on the same store, asks and notices (`registry`: the games it serves)."""
    other = bootstrap(store=app.store, registry=registry, settings=SETTINGS,
                      command_settings=CommandSettings(leave_policy="random"))
    other.rematches, other.notices, other.players, other.wall = app.rematches, app.notices, app.players, app.wall
    return other


def test_a_replica_that_does_not_serve_the_game_leaves_a_lost_creation_to_one_that_does() -> None:
    """Every command process sweeps every partition's pending creations, FAMIGLIA_GAMES or not. A
    replica that does not serve the game read the finished match as `match_unreadable`, gave the
    rematch up (`rematch_lost`) and dropped it: the replicas that serve the game never made it,
    and the retention trimmed the finished match it is made from."""
    app = _app()
    match_id = _match(app)
    _play_out(app, match_id)
    _lost_creation(app, match_id)
    elsewhere = _replica(app, Registry({}))
    assert elsewhere.finish_rematches(grace_s=0) == 1
    assert app.rematches.pending(int(app.wall() * 1000)) == [match_id]  # not this replica's to give up
    assert app.finish_rematches(grace_s=0) == 1
    assert app.rematches.pending(int(app.wall() * 1000)) == []
    assert app.store.version(app.get_rematch(match_id, Viewer(None)).match_id) > 0


def test_a_lost_creation_nobody_serves_is_given_up_once_its_asks_are_gone() -> None:
    """Left pending for the replicas that serve the game, it is not kept for ever (the retention
    keeps its finished match meanwhile): once the asks expired, nothing tells what to make."""
    asks = InMemoryRematchAsks(clock=lambda: now[0])
    now = [0.0]
    app = _app(asks=asks)
    match_id = _match(app)
    _play_out(app, match_id)
    _lost_creation(app, match_id)
    elsewhere = _replica(app, Registry({}))
    elsewhere.finish_rematches(grace_s=0)
    assert asks.pending(int(app.wall() * 1000)) == [match_id]
    now[0] += REMATCH_TTL_S
    assert elsewhere.finish_rematches(grace_s=0) == 1
    assert asks.pending(int(app.wall() * 1000)) == []


def test_two_replicas_sweeping_at_once_tell_the_table_once() -> None:
    """Every replica sweeps the same pending set every 30 s: two that both found the rematch not
    made yet both created it (idempotent) and both told the table `rematch_made`. Only the
    creation that wrote the match tells it."""
    app = _app()
    match_id = _match(app)
    _play_out(app, match_id)
    _lost_creation(app, match_id)
    other = _replica(app)
    create = other.create_match

    def meanwhile(*args, **kwargs):  # the first replica's round runs whole between the look and the write
        app.finish_rematches(grace_s=0)
        return create(*args, **kwargs)

    other.create_match = meanwhile  # type: ignore[method-assign]
    other.finish_rematches(grace_s=0)
    assert [kind for kind, _m, _s in _told(app, "p1")] == ["rematch_asked", "rematch_made"]
    assert [kind for kind, _m, _s in _told(app, "p0")] == ["rematch_made"]


def test_two_asks_completing_the_table_at_once_tell_it_once() -> None:
    """A retried ask racing the one it retries: both see no rematch yet, both create it."""
    app = _app()
    match_id = _match(app, 3)
    _play_out(app, match_id)
    for seat in (0, 1):
        app.ask_rematch(match_id, _person(app, match_id, seat))
    other = _replica(app)
    create = other.create_match

    def meanwhile(*args, **kwargs):
        app.ask_rematch(match_id, _person(app, match_id, 2))
        return create(*args, **kwargs)

    other.create_match = meanwhile  # type: ignore[method-assign]
    assert other.ask_rematch(match_id, _person(app, match_id, 2)).match_id
    assert [kind for kind, _m, _s in _told(app, "p0")].count("rematch_made") == 1


def test_creations_the_sweep_cannot_make_do_not_hide_the_others() -> None:
    """A round looks at the `most` oldest pending creations; one it could not make stayed the
    oldest, so `most` of them (a game no replica serves, the store failing for them) were every
    round's whole look, and a creation lost after them was never made. It is put off behind."""
    app = _app()
    stuck, lost = _match(app), _match(app)
    for match_id in (stuck, lost):
        _play_out(app, match_id)
        app.ask_rematch(match_id, _person(app, match_id, 0))
        app.rematches.ask(match_id, 1)
        app.rematches.fix_request_id(match_id, secrets.token_hex(32), at_ms=0 if match_id == stuck else 1)
    finished = app._finished

    def failing(match_id, viewer):  # the store fails for `stuck`, every time
        if match_id == stuck:
            raise ConnectionError("Redis away for it")
        return finished(match_id, viewer)

    app._finished = failing  # type: ignore[method-assign]
    assert app.finish_rematches(grace_s=0, most=1) == 1
    assert app.finish_rematches(grace_s=0, most=1) == 1
    assert app.rematches.pending(int(app.wall() * 1000)) == [stuck]  # `lost` made in the second round
    assert _told(app, "p0")[-1] == ("rematch_made", lost, 0)  # by the sweep, nobody looking


class _Died(BaseException):
    """The process killed: nothing after it runs."""


def test_a_death_right_after_the_last_ask_is_written_leaves_the_sweep_a_creation_to_make() -> None:
    """The last ask was one write and the request id (with the pending entry) the next: a process
    killed between the two left a table that had asked in full, with no request id and nothing
    pending, which no sweep ever made (a look makes none without a request id) and the retention
    trimmed an hour after the end. The ask that completes the table fixes both in its own write."""
    now = [time.time()]
    app = _app()
    app.wall = lambda: now[0]
    match_id = _match(app)
    _play_out(app, match_id)
    app.ask_rematch(match_id, _person(app, match_id, 0))
    asks = app.rematches

    class _DiesAfterTheAsk:
        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(asks, name)

        def ask(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            asks.ask(*args, **kwargs)
            raise _Died

    app.rematches = _DiesAfterTheAsk()  # type: ignore[assignment]
    with pytest.raises(_Died):
        app.ask_rematch(match_id, _person(app, match_id, 1))
    app.rematches = asks
    now[0] += REMATCH_GRACE_S
    assert asks.pending(int(now[0] * 1000)) == [match_id]
    assert app.finish_rematches() == 1
    assert _told(app, "p1")[-1] == ("rematch_made", match_id, 1)


def test_a_replica_that_does_not_serve_the_game_does_not_keep_it_from_the_one_that_does() -> None:
    """A creation a sweep cannot make is put off behind the others; put off to the sweep's own
    time, it was not due again for a replica sweeping within the grace after, and a replica that
    does not serve the game, sweeping every round just before the one that does, hid it from
    that one for ever."""
    now = [time.time()]
    app = _app()
    app.wall = lambda: now[0]
    match_id = _match(app)
    _play_out(app, match_id)
    _lost_creation(app, match_id)
    elsewhere = _replica(app, Registry({}))
    now[0] += REMATCH_GRACE_S
    for _round in range(3):  # each 30 s, the one that does not serve it 10 s before the other
        elsewhere.finish_rematches()
        now[0] += REMATCH_GRACE_S / 3
        app.finish_rematches()
        now[0] += REMATCH_GRACE_S * 2 / 3
    assert app.rematches.pending(int(now[0] * 1000)) == []
    assert app.store.version(app.get_rematch(match_id, Viewer(None)).match_id) > 0
