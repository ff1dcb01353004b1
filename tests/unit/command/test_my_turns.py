"""ListMyTurns on the in-memory store (real bootstrap, real engines): a player's live matches,
each seat as its own GetView tells it, the index kept by creation and the match's end, and
cleaned by the reader when a write to it was lost."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from famiglia.config import Settings
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.eventstore.player_matches import InMemoryPlayerMatches
from famiglia.grpcutil.errors import Unauthenticated
from famiglia.matchstate import MatchState
from famiglia.v1 import envelope_pb2
from services.command import app as command_app
from services.command.app import CommandApp, MyTurn, Viewer, ordered_turns
from services.command.bootstrap import bootstrap

SETTINGS = Settings(secret="unit-test-secret")
ANN, BOB = "ann", "bob"


class CountingIndex(InMemoryPlayerMatches):
    """The in-memory index, counting the writes the command path makes."""

    def __init__(self) -> None:
        super().__init__()
        self.removes: list[str] = []

    def remove(self, match_id, player_ids) -> None:
        self.removes.append(match_id)
        super().remove(match_id, player_ids)


@pytest.fixture()
def store() -> InMemoryEventStore:
    return InMemoryEventStore()


@pytest.fixture()
def app(store: InMemoryEventStore) -> CommandApp:
    made = bootstrap(store=store, settings=SETTINGS)
    made.players = CountingIndex()
    return made


def seating(**players: int) -> list[envelope_pb2.SeatInfo]:
    return [envelope_pb2.SeatInfo(seat=seat, player_id=player) for player, seat in players.items()]


def state_of(app: CommandApp, match_id: str) -> MatchState:
    hot = app.matches.get(match_id)
    with hot.lock:
        return app.matches.catch_up(hot)


def asked(app: CommandApp, match_id: str) -> set[int]:
    m = state_of(app, match_id)
    return {p.seat for p in m.engine.pending(m.state)}


def play_until(app: CommandApp, match_id: str, tokens: list[str], done: Callable[[MatchState], bool],
               seed: int = 1, most: int = 600) -> MatchState:
    """Random legal commands of the seats asked, through the app, until `done` (or the end)."""
    rng = random.Random(seed)
    for i in range(most):
        m = state_of(app, match_id)
        if done(m) or m.finished:
            return m
        seat = rng.choice(sorted({p.seat for p in m.engine.pending(m.state)}))
        viewer = app.viewer(match_id, tokens[seat])
        app.submit(match_id, viewer, f"c{i}", rng.choice(app.legal_commands(match_id, viewer).commands))
    raise AssertionError(f"{match_id}: not done after {most} commands")


def as_get_view(app: CommandApp, turn: MyTurn) -> tuple[bool, int, int]:
    """What the seat's own GetView says: (its to_act names it, its deadline, the version)."""
    view = app.get_view(turn.match_id, Viewer(turn.seat))
    return any(p.seat == turn.seat for p in view.to_act), view.deadline_ms, view.version


def told(turns: list[MyTurn]) -> list[tuple[str, int, bool]]:
    return [(t.match_id, t.seat, t.to_act) for t in turns]


# -- what is listed -------------------------------------------------------------------------------
def test_each_seat_comes_with_its_own_seat_token_which_acts_for_that_seat_only(app: CommandApp) -> None:
    """A device that lost a seat token gets it back with the player token: the token CreateMatch
    gave, and it acts for that seat, never for another player's."""
    created = app.create_match("grifters", 2, seed=5, seat_info=seating(ann=0, bob=1))
    (mine,) = app.my_turns(ANN)
    assert mine.seat_token == created.seat_tokens[0]
    assert app.viewer(created.match_id, mine.seat_token).seat == 0
    (bobs,) = app.my_turns(BOB)
    assert bobs.seat_token == created.seat_tokens[1] != mine.seat_token


def test_a_player_in_two_matches_has_the_one_waiting_on_them_first(app: CommandApp) -> None:
    probe = app.create_match("grifters", 2, seed=5)
    first = min(asked(app, probe.match_id))
    other = 1 - first
    waiting = app.create_match("grifters", 2, seed=5, seat_info=seating(ann=first, bob=other)).match_id
    idle = app.create_match("grifters", 2, seed=5, seat_info=seating(ann=other, bob=first)).match_id
    turns = app.my_turns(ANN)
    assert told(turns) == [(waiting, first, True), (idle, other, False)]
    for turn in turns:
        assert (turn.to_act, turn.deadline_ms, turn.version) == as_get_view(app, turn)
        assert turn.game_id == "grifters"
    assert told(app.my_turns(BOB)) == [(idle, first, True), (waiting, other, False)]
    assert told(app.my_turns(ANN, limit=1)) == [(waiting, first, True)]
    assert app.my_turns("carol") == []  # seated nowhere


def test_a_simultaneous_decision_waits_on_every_seat_asked(app: CommandApp) -> None:
    """GoodCritters asks several seats at once early on: each player asked sees its seat waiting."""
    created = app.create_match("goodcritters", 4, seed=3, seat_info=seating(ann=1, bob=2))
    m = play_until(app, created.match_id, created.seat_tokens,
                   lambda m: {1, 2} <= {p.seat for p in m.engine.pending(m.state)})
    assert m.public_version == m.version  # nothing held in between
    for player, seat in ((ANN, 1), (BOB, 2)):
        (turn,) = app.my_turns(player)
        assert (turn.seat, turn.to_act) == (seat, True)
        assert (turn.to_act, turn.deadline_ms, turn.version) == as_get_view(app, turn)


def test_a_private_window_is_waiting_for_its_seat_only_as_each_seats_getview_says(app: CommandApp) -> None:
    """A Nothing Personal window asks the seat holding the card privately (`Pending.private`):
    its player sees it waiting, and the others' entries say what their own GetView says,
    never that another seat is asked."""
    created = app.create_match("nothing_personal", 3, seed=0, seat_info=seating(ann=0, bob=1, cat=2))
    m = play_until(app, created.match_id, created.seat_tokens,
                   lambda m: any(p.private for p in m.engine.pending(m.state)))
    window = {p.seat for p in m.engine.pending(m.state) if p.private}
    public = {p.seat for p in m.engine.pending(m.state) if not p.private}
    hidden_from = [s for s in range(3) if s not in window and s not in public]
    assert window and hidden_from, (window, public)
    for player, seat in ((ANN, 0), (BOB, 1), ("cat", 2)):
        (turn,) = app.my_turns(player)
        assert (turn.to_act, turn.deadline_ms, turn.version) == as_get_view(app, turn)
        assert turn.to_act == (seat in window or seat in public)


def test_a_finished_and_a_cancelled_match_leave_the_players_matches(app: CommandApp) -> None:
    index = app.players
    played = app.create_match("grifters", 2, seed=2, seat_info=seating(ann=0, bob=1))
    cancelled = app.create_match("grifters", 2, seed=3, seat_info=seating(ann=1))
    assert {t.match_id for t in app.my_turns(ANN)} == {played.match_id, cancelled.match_id}
    app.cancel_match(cancelled.match_id, "ops", "stuck")
    assert index.newest(ANN, 10) == [played.match_id]
    play_until(app, played.match_id, played.seat_tokens, lambda m: False)
    assert index.newest(ANN, 10) == index.newest(BOB, 10) == []
    assert app.my_turns(ANN) == app.my_turns(BOB) == []


def test_only_the_command_that_ends_a_match_writes_to_the_index(app: CommandApp) -> None:
    """SubmitCommand pays nothing for the index but at the match's last command."""
    played = app.create_match("grifters", 2, seed=2, seat_info=seating(ann=0, bob=1))
    commands = 0

    def count(m: MatchState) -> bool:
        nonlocal commands
        commands += 1
        return False

    play_until(app, played.match_id, played.seat_tokens, count)
    assert commands > 3
    assert app.players.removes == [played.match_id]


def test_the_reader_drops_what_a_lost_write_left_over_gone_or_not_the_players(
        app: CommandApp, store: InMemoryEventStore) -> None:
    """The index is a hint: a crash between a match's end and its removal (or a stray entry)
    costs the next reading a fold, and it is dropped then."""
    live = app.create_match("grifters", 2, seed=4, seat_info=seating(ann=0)).match_id
    over = app.create_match("grifters", 2, seed=4, seat_info=seating(ann=1)).match_id
    app.cancel_match(over, "ops", "stuck")
    stranger = app.create_match("grifters", 2, seed=4, seat_info=seating(bob=0)).match_id
    for stray in (over, "m" + "0" * 19, stranger):
        app.players.add(stray, [ANN], 1)
    assert [t.match_id for t in app.my_turns(ANN)] == [live]
    assert app.players.newest(ANN, 10) == [live]


def test_bots_seats_are_not_indexed_and_a_retried_creation_adds_nothing(app: CommandApp) -> None:
    bot = envelope_pb2.SeatInfo(seat=1, player_id="bot:random", bot=True, policy="random")
    request_id = "r-0123456789abcdef"
    first = app.create_match("grifters", 2, seed=4, seat_info=[*seating(ann=0), bot], request_id=request_id)
    again = app.create_match("grifters", 2, seed=4, seat_info=[*seating(ann=0), bot], request_id=request_id)
    assert first.match_id == again.match_id
    assert app.players.newest(ANN, 10) == [first.match_id]
    assert app.players.newest("bot:random", 10) == []


def test_a_call_looks_at_the_newest_matches_only_and_answers_at_most_the_cap(
        app: CommandApp, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(command_app, "MY_TURNS_LOOKED_AT", 3)
    monkeypatch.setattr(command_app, "MAX_MY_TURNS", 2)
    made = [app.create_match("grifters", 2, seed=s, seat_info=seating(ann=0)).match_id for s in range(4)]
    for at, match_id in enumerate(made):  # creation times apart, whatever the clock did
        app.players.drop(ANN, [match_id])
        app.players.add(match_id, [ANN], 1000 + at)
    assert app.players.newest(ANN, 3) == made[:0:-1]
    for limit in (0, -1, 2, 50):
        assert len(app.my_turns(ANN, limit)) == 2
    assert {t.match_id for t in app.my_turns(ANN)} <= set(made[1:])  # the oldest is not looked at


def test_the_order_is_asked_by_deadline_then_the_rest_by_their_last_move() -> None:
    def turn(match_id: str, to_act: bool, deadline_ms: int, moved_ms: int) -> MyTurn:
        return MyTurn(match_id, "grifters", 0, 3, to_act, deadline_ms, moved_ms)

    turns = [turn("idle-old", False, 0, 100), turn("asked-no-clock", True, 0, 900),
             turn("asked-late", True, 5000, 50), turn("idle-new", False, 0, 700), turn("asked-soon", True, 2000, 10)]
    assert [t.match_id for t in ordered_turns(turns)] == \
        ["asked-soon", "asked-late", "asked-no-clock", "idle-new", "idle-old"]


def test_the_moved_time_is_the_tables_not_a_held_answers() -> None:
    """A window's answer held back (NP-H9) must not reorder another player's list: its time is
    not the match's until the table sees it."""
    m = MatchState.__new__(MatchState)
    m.staged, m.unstaged, m.last_timestamp_ms = [object()], (None, 1000), 2000
    assert command_app._moved_ms(m) == 1000
    m.staged, m.unstaged = [], None
    assert command_app._moved_ms(m) == 2000


# -- who may ask ----------------------------------------------------------------------------------
def test_only_a_player_token_names_the_player(app: CommandApp) -> None:
    created = app.create_match("grifters", 2, seed=1)
    signer = app.signer
    assert app.player_of(signer.player_token(ANN)) == ANN
    with pytest.raises(Unauthenticated) as exc:
        app.player_of(None)
    assert exc.value.code == "no_token"
    for token in ("", "garbage", created.seat_tokens[0], signer.operator_token(),
                  signer.player_token(ANN)[:-2] + "xx"):
        with pytest.raises(Unauthenticated) as exc:
            app.player_of(token)
        assert exc.value.code == "bad_token", token


def test_an_index_write_lost_to_an_outage_never_fails_the_creation_or_the_last_command(app: CommandApp) -> None:
    """The index is a hint: Redis away for its write (another slot than the match's, on a
    cluster) costs the match its place in ListMyTurns, not the creation or the move the caller
    is answered for (a creation without a request id, failed after it was stored, would be
    made twice by a retry)."""
    import redis

    class Away(CountingIndex):
        def add(self, match_id, player_ids, created_ms) -> None:
            raise redis.ConnectionError("Redis is restarting")

        def remove(self, match_id, player_ids) -> None:
            super().remove(match_id, player_ids)
            raise redis.ConnectionError("Redis is restarting")

    app.players = Away()
    played = app.create_match("grifters", 2, seed=2, seat_info=seating(ann=0, bob=1))
    assert app.my_turns(ANN) == []  # never indexed
    m = play_until(app, played.match_id, played.seat_tokens, lambda m: False)
    assert m.finished and app.players.removes == [played.match_id]
