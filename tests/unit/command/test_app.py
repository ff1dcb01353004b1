"""The command service's use cases on the in-memory store (real bootstrap, real engines)."""

from __future__ import annotations

import dataclasses
import random
import threading

import pytest
from google.protobuf import any_pb2

from famiglia.config import Settings
from famiglia.engine import command_kind
from famiglia.engine.errors import RuleViolation
from famiglia.engine.registry import Registry, default_registry
from famiglia.eventstore import ConcurrencyConflict
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.grpcutil.errors import (
    Aborted,
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
)
from famiglia.v1 import envelope_pb2
from services.command import app as command_app
from services.command.app import ChainedCommand, CommandApp, Viewer
from services.command.bootstrap import bootstrap

REGISTRY = default_registry()
GAMES = list(REGISTRY)
pytestmark = pytest.mark.skipif(not GAMES, reason="no game engine registered yet")
SETTINGS = Settings(secret="unit-test-secret")


@pytest.fixture()
def store() -> InMemoryEventStore:
    return InMemoryEventStore()


@pytest.fixture()
def app(store: InMemoryEventStore) -> CommandApp:
    return bootstrap(store=store, settings=SETTINGS)


def _game(game_id: str | None = None):
    engine = REGISTRY.get(game_id or GAMES[0])
    return engine, engine.info.min_players


def _first_move(app: CommandApp, match_id: str, tokens: list[str]):
    """A pending seat (as the server knows it) and one of its legal commands."""
    hot = app.matches.get(match_id)
    with hot.lock:
        app.matches.catch_up(hot)  # another replica may have moved it
    m = hot.match
    seat = m.engine.pending(m.state)[0].seat
    viewer = app.viewer(match_id, tokens[seat])
    return seat, viewer, app.legal_commands(match_id, viewer).commands[0]


def test_create_match_hands_one_token_per_seat_and_writes_setup(app: CommandApp, store) -> None:
    engine, seats = _game()
    created = app.create_match(engine.info.game_id, seats, seed=7)
    assert len(created.seat_tokens) == seats
    assert len(set(created.seat_tokens)) == seats
    assert created.version == store.version(created.match_id) > 1
    first = store.read(created.match_id, limit=1)[0]
    assert first.type == "match_created" and first.visibility.kind == 3  # the seed is server-only


def test_create_match_refuses_bad_seat_counts_unknown_games_and_options(app: CommandApp) -> None:
    engine, _ = _game()
    with pytest.raises(InvalidArgument):
        app.create_match(engine.info.game_id, engine.info.max_players + 1)
    with pytest.raises(InvalidArgument) as exc:
        app.create_match("chess", 2)
    assert exc.value.code == "unknown_game"
    with pytest.raises(InvalidArgument) as exc:
        app.create_match(engine.info.game_id, engine.info.min_players, options={"no_such_option": "1"})
    assert exc.value.code == "unknown_option"
    with pytest.raises(InvalidArgument) as exc:  # as the game lists it, or matchmaking pools it apart
        app.create_match("goodcritters", 4, options={"stash_counts_public": "True"})
    assert exc.value.code == "bad_option" and "'true'" in exc.value.message
    # the tournament runner's and the matchmaker's creations: checked at their own front doors, and
    # made before the check they were promised such options (a running tournament, a queued ticket)
    made = app.create_match("goodcritters", 4, options={"stash_counts_public": "True"}, tournament_id="t1")
    assert made.match_id


def test_create_match_with_the_same_request_id_is_the_same_match(app: CommandApp, store) -> None:
    engine, seats = _game()
    a = app.create_match(engine.info.game_id, seats, request_id="req-1-0123456789ab")
    b = app.create_match(engine.info.game_id, seats, request_id="req-1-0123456789ab")
    assert a.match_id == b.match_id and a.seat_tokens == b.seat_tokens
    assert store.version(a.match_id) == a.version == b.version


def test_a_creation_retried_after_its_match_was_archived_is_refused_naming_the_match(app: CommandApp, store) -> None:
    """Trimming drops the creation with the stream: the retry meets a version conflict, not its
    first answer. It was answered with the archived match's tokens, whatever it asked for (a
    request id reused for another game got them too); now it is `request_id_reused`, naming the
    match, never `match_exists` (found by mutating create_match)."""
    engine, seats = _game()
    first = app.create_match(engine.info.game_id, seats, seed=4, request_id="req-3-0123456789ab")
    store.trim(first.match_id)
    for asked in (dict(seed=4), dict(seed=5)):
        with pytest.raises(AlreadyExists) as exc:
            app.create_match(engine.info.game_id, seats, request_id="req-3-0123456789ab", **asked)  # type: ignore[arg-type]
        assert exc.value.code == "request_id_reused"
        assert exc.value.metadata == {"match_id": first.match_id} and "archived" in exc.value.message


def test_a_request_id_reused_for_another_match_is_refused_not_answered_with_its_tokens(app: CommandApp) -> None:
    engine, seats = _game()
    a = app.create_match(engine.info.game_id, seats, seed=4, request_id="req-2-0123456789ab")
    asked_differently = [dict(seats=seats + 1), dict(seats=seats, seed=5),
                         dict(seats=seats, seat_info=[envelope_pb2.SeatInfo(seat=0, player_id="p-mallory")])]
    if engine.info.max_players == seats:
        asked_differently.pop(0)
    for asked in asked_differently:
        with pytest.raises(AlreadyExists) as exc:
            app.create_match(engine.info.game_id, request_id="req-2-0123456789ab", **asked)  # type: ignore[arg-type]
        assert exc.value.code == "request_id_reused"
    # The same request again (its seed left to the server) is the retry it was meant for.
    assert app.create_match(engine.info.game_id, seats, request_id="req-2-0123456789ab").seat_tokens == a.seat_tokens


def test_a_creation_request_id_anybody_could_guess_is_refused(app: CommandApp) -> None:
    """Sent again, a creation's request id answers with every seat's token: one as short as
    "retry" would hand a stranger who guessed it the whole match."""
    engine, seats = _game()
    for guessable in ("1", "retry", "r" * 15):
        with pytest.raises(InvalidArgument) as exc:
            app.create_match(engine.info.game_id, seats, request_id=guessable)
        assert exc.value.code == "bad_request_id" and "secret" in exc.value.message
    assert app.create_match(engine.info.game_id, seats, request_id="r" * 16).match_id


def test_what_a_creation_writes_besides_the_setup_fits_the_read_models(app: CommandApp) -> None:
    engine, seats = _game()
    bad = [dict(tournament_id="t" * 101), dict(request_id="r" * 257),
           dict(seat_info=[envelope_pb2.SeatInfo(seat=seats)]),
           dict(seat_info=[envelope_pb2.SeatInfo(seat=0), envelope_pb2.SeatInfo(seat=0)]),
           dict(seat_info=[envelope_pb2.SeatInfo(seat=0, player_id="p" * 129)]),
           dict(seat_info=[envelope_pb2.SeatInfo(seat=0, display_name="n" * 201)])]
    for asked in bad:
        with pytest.raises(InvalidArgument) as exc:
            app.create_match(engine.info.game_id, seats, **asked)  # type: ignore[arg-type]
        assert exc.value.code in ("bad_tournament_id", "bad_request_id", "bad_seat_info")
    assert app.create_match(engine.info.game_id, seats, tournament_id="t" * 100,
                            seat_info=[envelope_pb2.SeatInfo(seat=seats - 1, player_id="p" * 128)]).match_id


def test_ids_a_creation_stores_may_not_hold_a_nul_the_read_models_cannot(app: CommandApp, store) -> None:
    """PostgreSQL text cannot hold a NUL: a tournament id or seat info with one would make the
    projection fail on the match again and again (then park it: never in the read models, never
    rated). Refused at the door instead, with the codes their lengths already have."""
    engine, seats = _game()
    bad = [dict(tournament_id="cup\x00"),
           dict(seat_info=[envelope_pb2.SeatInfo(seat=0, player_id="p\x00")]),
           dict(seat_info=[envelope_pb2.SeatInfo(seat=0, display_name="\x00")]),
           dict(seat_info=[envelope_pb2.SeatInfo(seat=0, policy="random\x00")])]
    for asked in bad:
        with pytest.raises(InvalidArgument) as exc:
            app.create_match(engine.info.game_id, seats, **asked)  # type: ignore[arg-type]
        assert exc.value.code in ("bad_tournament_id", "bad_seat_info")


@pytest.mark.parametrize("name", ["\x1b[2J\x1b[31mAdmin", "Vito\rLuca", "two\nlines", "gg \u202eVito", "\u2066x",
                                  "Vito\u2028Admin", "Vito\u2029Admin"])  # a line and a paragraph separator: a new line
def test_a_seat_name_that_could_garble_what_shows_beside_it_is_refused(app: CommandApp, name: str) -> None:
    """Anyone may create a match naming nobody, and its seats' display names go to every reader of
    the read models (QueryService needs no token): a terminal's escape, a lone carriage return or
    a right-to-left override there was stored, as match chat refuses it in a message
    (`famiglia.chat_text`)."""
    engine, seats = _game()
    with pytest.raises(InvalidArgument) as exc:
        app.create_match(engine.info.game_id, seats, seat_info=[envelope_pb2.SeatInfo(seat=0, display_name=name)])
    assert exc.value.code == "bad_seat_info"
    for kept in ("Vito \u3164", "\U0001f469\u200d\U0001f4bb", "\u05e9\u05dc\u05d5\u05dd\u200f", "Bot (heuristic)"):
        assert app.create_match(engine.info.game_id, seats,
                                seat_info=[envelope_pb2.SeatInfo(seat=0, display_name=kept)]).match_id


def test_a_command_id_with_a_nul_is_refused_and_stores_nothing(app: CommandApp, store) -> None:
    """The command id is stored with the command's events (the projection's event archive): one
    with a NUL would keep the match out of PostgreSQL read models for good, which any seat could
    do to a match it is losing, so that it is never rated."""
    engine, seats = _game()
    created = app.create_match(engine.info.game_id, seats, seed=3)
    seat, viewer, cmd = _first_move(app, created.match_id, created.seat_tokens)
    version = store.version(created.match_id)
    with pytest.raises(InvalidArgument) as exc:
        app.submit(created.match_id, viewer, "c-1\x00", cmd)
    assert exc.value.code == "bad_command_id" and "NUL" in exc.value.message
    chained = app.submit_chain(created.match_id, [ChainedCommand(created.seat_tokens[seat], "\x00{version}",
                                                                 "type.googleapis.com/"
                                                                 + cmd.DESCRIPTOR.full_name,
                                                                 cmd.SerializeToString())])
    assert not chained.taken and chained.refusal is not None and chained.refusal.code == "bad_command_id"
    assert store.version(created.match_id) == version


def test_an_option_value_the_game_cannot_read_is_an_invalid_argument(app: CommandApp, monkeypatch) -> None:
    engine, seats = _game()

    def unreadable(config, seed):
        raise ValueError("invalid literal for int() with base 10: 'many'")

    reading = dataclasses.replace(engine, setup=unreadable)
    monkeypatch.setattr(app, "registry", type("OneGame", (), {"get": staticmethod(lambda _game_id: reading)}))
    with pytest.raises(InvalidArgument) as exc:
        app.create_match(engine.info.game_id, seats)
    assert exc.value.code == "bad_option" and "many" in exc.value.message


def test_a_command_id_belongs_to_its_seat(app: CommandApp, store) -> None:
    """Another seat's id neither answers for a seat's command nor tells whether it was used."""
    engine, seats = _game()
    created = app.create_match(engine.info.game_id, seats, seed=3)
    seat, viewer, cmd = _first_move(app, created.match_id, created.seat_tokens)
    done = app.submit(created.match_id, viewer, "shared-id", cmd)
    for n in range(50):  # play on until another seat is asked
        other_seat, other, later = _first_move(app, created.match_id, created.seat_tokens)
        if other_seat != seat:
            break
        app.submit(created.match_id, other, f"more-{n}", later)
    assert other_seat != seat
    theirs = app.submit(created.match_id, other, "shared-id", later)
    assert not theirs.duplicate and theirs.version > done.version  # decided and stored, not deduplicated
    again = app.submit(created.match_id, viewer, "shared-id", cmd)
    assert again.duplicate and again.version == done.version


def test_a_command_id_reused_for_another_command_is_refused(app: CommandApp, store) -> None:
    engine, seats = _game()
    created = app.create_match(engine.info.game_id, seats, seed=3)
    seat, viewer, cmd = _first_move(app, created.match_id, created.seat_tokens)
    app.submit(created.match_id, viewer, "c-1", cmd)
    legal = [c for c in app.legal_commands(created.match_id, viewer).commands
             if c.SerializeToString(deterministic=True) != cmd.SerializeToString(deterministic=True)]
    other = legal[0] if legal else engine.info.command_type()  # any other command: even an empty one
    version = store.version(created.match_id)
    for omit in (True, False):
        with pytest.raises(Aborted) as exc:
            app.submit(created.match_id, viewer, "c-1", other, omit_events=omit)
        assert exc.value.code == "command_id_reused"
    assert store.version(created.match_id) == version


def test_a_match_whose_events_this_server_cannot_read_is_a_failed_precondition(store) -> None:
    app = bootstrap(store=store, settings=SETTINGS)
    engine, seats = _game()
    created = app.create_match(engine.info.game_id, seats, seed=3)
    unreadable = store.read(created.match_id)[-1]
    unreadable.seq, unreadable.payload = created.version + 1, b"\xff\xff\xff"  # no engine parses this
    store.append(created.match_id, created.version, [unreadable])
    fresh = bootstrap(store=store, settings=SETTINGS)  # nothing hot: it folds the stored events
    with pytest.raises(FailedPrecondition) as exc:
        fresh.get_view(created.match_id, Viewer(None))
    assert exc.value.code == "match_unreadable"
    # The decoder's words are the log's (they may quote the record); the asker, a spectator here, gets none.
    assert exc.value.message == (f"match {created.match_id!r} cannot be played here: its events cannot be "
                                 "read by this server's engine; the server's log (match_unreadable) has the details")


def _a_newer_servers_event(store: InMemoryEventStore, match_id: str) -> envelope_pb2.EventEnvelope:
    """Append an event of a kind added after this code (a field number its Event lacks), as a
    newer replica writes it during a deploy, or before a roll-back."""
    last = store.read(match_id)[-1]
    engine = REGISTRY.get(last.game_id)
    number = max(f.number for f in engine.info.event_type.DESCRIPTOR.fields) + 1
    tag, varint = number << 3 | 2, b""
    while tag > 0x7F:
        varint, tag = varint + bytes([tag & 0x7F | 0x80]), tag >> 7
    newer = envelope_pb2.EventEnvelope()
    newer.CopyFrom(last)
    newer.seq, newer.type, newer.event_id, newer.command_id = last.seq + 1, "future_kind", last.event_id + "F", ""
    newer.payload = varint + bytes([tag]) + b"\x00"  # the new kind, an empty message
    newer.ClearField("command")
    store.append(match_id, last.seq, [newer])
    return newer


@pytest.mark.parametrize("game_id", GAMES)
def test_an_event_kind_this_server_does_not_know_makes_the_match_unreadable_not_an_internal_error(
        store, game_id: str) -> None:
    """An older replica folding a newer one's event kind must not fold past it (its state would
    lack what the event did, and its decisions would be stored for good), nor fail the call
    with an internal error: FAILED_PRECONDITION match_unreadable, naming the event, until a
    server that knows the kind serves the match. Hot (it was playing the match) or not."""
    app = bootstrap(store=store, settings=SETTINGS)
    engine, seats = _game(game_id)
    created = app.create_match(game_id, seats, seed=3)
    seat, viewer, cmd = _first_move(app, created.match_id, created.seat_tokens)
    newer = _a_newer_servers_event(store, created.match_id)
    fresh = bootstrap(store=store, settings=SETTINGS)
    for server in (app, fresh):
        with pytest.raises(FailedPrecondition) as exc:
            server.get_view(created.match_id, Viewer(None))
        assert exc.value.code == "match_unreadable"
        assert f"event {newer.seq} is of a kind" in exc.value.message
        assert "future_kind" not in exc.value.message  # a stored type says what happened: hidden from most
        with pytest.raises(FailedPrecondition) as exc:
            server.submit(created.match_id, viewer, "after-the-deploy", cmd)
        assert exc.value.code == "match_unreadable"
    assert store.version(created.match_id) == newer.seq


@pytest.mark.parametrize("game_id", GAMES)
def test_a_stream_reaching_an_event_kind_this_server_does_not_know_is_match_unreadable(store, game_id: str) -> None:
    """StreamEvents reads the stream before its replica folds it: a newer server's event kind
    must end the stream as the fold does (match_unreadable), not with the engine's error on an
    event of no kind (an internal error), nor reach the viewer: who may see a kind this server
    does not know, it cannot tell. From the start and from the event before it; a seat and a
    spectator; on the replica that held the match hot."""
    app = bootstrap(store=store, settings=SETTINGS)
    engine, seats = _game(game_id)
    created = app.create_match(game_id, seats, seed=3)
    seat, viewer, _cmd = _first_move(app, created.match_id, created.seat_tokens)
    newer = _a_newer_servers_event(store, created.match_id)
    for who in (viewer, Viewer(None)):
        for after in (0, newer.seq - 1):
            shown = []
            with pytest.raises(FailedPrecondition) as exc:
                for event, _version, _finished in app.events(created.match_id, who, after, follow=False):
                    shown.append(event)
            assert exc.value.code == "match_unreadable"
            assert f"event {newer.seq} is of a kind" in exc.value.message and "future_kind" not in exc.value.message
            assert all(e is None or e.envelope.seq < newer.seq for e in shown)


def test_a_legal_command_appends_and_a_repeated_command_id_appends_nothing(app: CommandApp, store) -> None:
    engine, seats = _game()
    created = app.create_match(engine.info.game_id, seats, seed=3)
    seat, viewer, cmd = _first_move(app, created.match_id, created.seat_tokens)
    done = app.submit(created.match_id, viewer, "c-1", cmd)
    assert done.version > created.version and not done.duplicate
    again = app.submit(created.match_id, viewer, "c-1", cmd)
    assert again.duplicate and store.version(created.match_id) == done.version
    assert [e.envelope.event_id for e in again.events] == [e.envelope.event_id for e in done.events]


def test_a_repeated_command_id_answers_its_first_version_after_the_match_moved_on(app: CommandApp) -> None:
    engine, seats = _game()
    created = app.create_match(engine.info.game_id, seats, seed=3)
    _seat, viewer, cmd = _first_move(app, created.match_id, created.seat_tokens)
    done = app.submit(created.match_id, viewer, "c-1", cmd)
    _seat, other, later = _first_move(app, created.match_id, created.seat_tokens)
    moved = app.submit(created.match_id, other, "c-2", later)
    assert moved.version > done.version
    for omit in (True, False):
        again = app.submit(created.match_id, viewer, "c-1", cmd, omit_events=omit)
        assert again.duplicate and again.version == done.version  # the first answer, not the match's now


def test_omit_events_answers_with_the_version_only_and_renders_nothing(app: CommandApp, store) -> None:
    engine, seats = _game()
    created = app.create_match(engine.info.game_id, seats, seed=3)
    seat, viewer, cmd = _first_move(app, created.match_id, created.seat_tokens)
    hot = app.matches.get(created.match_id)

    def untouched(*_args):
        raise AssertionError("omit_events must not redact or render the events")

    shown = hot.match.engine
    hot.match.engine = dataclasses.replace(shown, redact=untouched, render_event=untouched)
    done = app.submit(created.match_id, viewer, "c-1", cmd, omit_events=True)
    again = app.submit(created.match_id, viewer, "c-1", cmd, omit_events=True)
    hot.match.engine = shown
    assert done.version == store.version(created.match_id) > created.version
    assert done.events == [] and not done.duplicate
    assert again.duplicate and again.events == [] and again.version == done.version
    # The events were stored all the same: the same command id without the option shows them.
    full = app.submit(created.match_id, viewer, "c-1", cmd)
    assert full.duplicate and full.events
    assert [e.envelope.seq for e in full.events][-1] <= done.version


def test_stale_expected_version_is_aborted_and_changes_nothing(app: CommandApp, store) -> None:
    engine, seats = _game()
    created = app.create_match(engine.info.game_id, seats, seed=4)
    seat, viewer, cmd = _first_move(app, created.match_id, created.seat_tokens)
    with pytest.raises(Aborted) as exc:
        app.submit(created.match_id, viewer, "c-stale", cmd, expected_version=created.version - 1)
    assert exc.value.code == "stale_version"
    assert store.version(created.match_id) == created.version


def test_a_refused_command_carries_the_rule_id_and_changes_nothing(app: CommandApp, store) -> None:
    engine, seats = _game()
    created = app.create_match(engine.info.game_id, seats, seed=5)
    seat, _, cmd = _first_move(app, created.match_id, created.seat_tokens)
    m = app.matches.get(created.match_id).match
    pending = {p.seat for p in engine.pending(m.state)}
    others = [s for s in range(seats) if s not in pending]
    if not others:
        pytest.skip("every seat is pending at the start of this game")
    other = app.viewer(created.match_id, created.seat_tokens[others[0]])
    with pytest.raises(FailedPrecondition) as exc:
        app.submit(created.match_id, other, "c-out-of-turn", cmd)
    prefix = {"goodcritters": "GC-", "nothing_personal": "NP-", "nostra_city": "NC-", "grifters": "GR-"}
    assert exc.value.code.startswith(prefix[engine.info.game_id])
    assert store.version(created.match_id) == created.version


def test_tokens_are_checked(app: CommandApp) -> None:
    engine, seats = _game()
    a = app.create_match(engine.info.game_id, seats, seed=1)
    b = app.create_match(engine.info.game_id, seats, seed=2)
    with pytest.raises(Unauthenticated):
        app.viewer(a.match_id, "not-a-token")
    forged = a.seat_tokens[0][:-2] + ("AA" if not a.seat_tokens[0].endswith("AA") else "BB")
    with pytest.raises(Unauthenticated):
        app.viewer(a.match_id, forged)
    with pytest.raises(PermissionDenied):
        app.viewer(a.match_id, b.seat_tokens[0])
    with pytest.raises(InvalidArgument, match="match_id is required") as empty:  # the proto's no_match_id,
        app.viewer("", a.seat_tokens[0])                                       # not wrong_match
    assert empty.value.code == "no_match_id"
    other_secret = bootstrap(store=InMemoryEventStore(), settings=Settings(secret="another"))
    with pytest.raises(Unauthenticated):
        other_secret.viewer(a.match_id, a.seat_tokens[0])
    spectator = app.viewer(a.match_id, None)
    _, _, cmd = _first_move(app, a.match_id, a.seat_tokens)
    with pytest.raises(Unauthenticated):
        app.submit(a.match_id, spectator, "c-x", cmd)


def test_unknown_match_is_not_found(app: CommandApp) -> None:
    with pytest.raises(NotFound) as refused:
        app.get_view("m-nope", Viewer(None))
    assert refused.value.code == "unknown_match"


def test_a_match_trimmed_from_the_store_is_not_found_as_archived(store: InMemoryEventStore) -> None:
    engine, seats = _game()
    created = bootstrap(store=store, settings=SETTINGS).create_match(engine.info.game_id, seats, seed=3)
    assert store.trim(created.match_id) > 0
    cold = bootstrap(store=store, settings=SETTINGS)  # a process without the match in memory
    with pytest.raises(NotFound) as refused:
        cold.get_view(created.match_id, Viewer(None))
    assert refused.value.code == "match_archived"
    assert "replay" in refused.value.message


def test_malformed_commands_are_invalid_arguments(app: CommandApp, store) -> None:
    engine, seats = _game()
    created = app.create_match(engine.info.game_id, seats, seed=9)
    seat, viewer, _ = _first_move(app, created.match_id, created.seat_tokens)
    with pytest.raises(InvalidArgument):
        app.parse_command(created.match_id, "type.googleapis.com/famiglia.v1.EchoRequest", b"")
    with pytest.raises(InvalidArgument):
        app.parse_command(created.match_id, "type.googleapis.com/" + engine.info.command_type.DESCRIPTOR.full_name,
                          b"\xff\xff\xff")
    with pytest.raises(InvalidArgument):
        app.submit(created.match_id, viewer, "c-empty", engine.info.command_type())
    with pytest.raises(InvalidArgument):
        app.submit(created.match_id, viewer, "", engine.info.command_type())
    assert store.version(created.match_id) == created.version


@pytest.mark.parametrize("game_id", GAMES)
def test_every_registered_game_plays_to_the_end_through_the_app(app: CommandApp, store, game_id: str) -> None:
    engine = REGISTRY.get(game_id)
    rng = random.Random(11)
    created = app.create_match(game_id, engine.info.min_players, seed=11)
    viewers = [app.viewer(created.match_id, t) for t in created.seat_tokens]
    n = 0
    while True:
        spectator_view = app.get_view(created.match_id, Viewer(None))
        if spectator_view.result is not None:
            break
        m = app.matches.get(created.match_id).match
        seat = rng.choice(sorted({p.seat for p in engine.pending(m.state)}))
        legal = app.legal_commands(created.match_id, viewers[seat])
        cmd = rng.choice(legal.commands)
        app.submit(created.match_id, viewers[seat], f"c{n}", cmd, expected_version=legal.version)
        n += 1
        assert n < engine.info.max_steps
    # a fresh process folding the stream finds the same final state
    fresh = bootstrap(store=store, settings=SETTINGS)
    assert fresh.matches.get(created.match_id).match.state == app.matches.get(created.match_id).match.state
    with pytest.raises(FailedPrecondition):
        app.submit(created.match_id, viewers[0], "after-the-end", cmd)


def test_a_replica_behind_the_stream_refuses_only_what_the_latest_state_refuses(store) -> None:
    """A replica's hot state may lag another's appends: a command legal at the stream's
    version, or the retry of one the other replica stored, is not refused on the old state."""
    engine, seats = _game()
    a = bootstrap(store=store, settings=SETTINGS)
    b = bootstrap(store=store, settings=SETTINGS)
    created = a.create_match(engine.info.game_id, seats, seed=21)
    a.matches.get(created.match_id)  # a holds the match at its first version
    played = []
    for i in range(8):  # b moves it on
        _seat, viewer, cmd = _first_move(b, created.match_id, created.seat_tokens)
        played.append((viewer, f"b-{i}", cmd, b.submit(created.match_id, viewer, f"b-{i}", cmd).version))
    for viewer, command_id, cmd, version in reversed(played):  # retried on a: the first answers
        again = a.submit(created.match_id, viewer, command_id, cmd)
        assert again.duplicate and again.version == version
    c = bootstrap(store=store, settings=SETTINGS)
    c.matches.get(created.match_id)  # c falls behind by one move
    _seat, viewer, cmd = _first_move(b, created.match_id, created.seat_tokens)
    b.submit(created.match_id, viewer, "b-last", cmd)
    _seat, viewer, cmd = _first_move(b, created.match_id, created.seat_tokens)  # legal now, by the stream
    done = c.submit(created.match_id, viewer, "c-1", cmd)
    assert not done.duplicate and done.version == store.version(created.match_id)
    # A chain whose id names "{version}" is held at the stream's version, not the lagging one's.
    d = bootstrap(store=store, settings=SETTINGS)
    d.matches.get(created.match_id)
    seat, viewer, cmd = _first_move(b, created.match_id, created.seat_tokens)
    b.submit(created.match_id, viewer, "b-after", cmd)
    seat, viewer, cmd = _first_move(b, created.match_id, created.seat_tokens)
    at = store.version(created.match_id)
    packed = any_pb2.Any()
    packed.Pack(cmd)
    answer = d.submit_chain(created.match_id, [ChainedCommand(created.seat_tokens[seat], "d@{version}",
                                                              packed.type_url, packed.value)])
    assert answer.refusal is None and answer.taken[0].version > at
    assert d.matches.get(created.match_id).match.commands.get(f"{seat}/d@{at}")


class _RefusingEngine:
    """A game's engine that refuses one command on every state, as a rule would."""

    def __init__(self, inner, refused: bytes) -> None:
        self._inner, self._refused = inner, refused

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    def decide(self, state, seat, command, rng):
        if command.SerializeToString(deterministic=True) == self._refused:
            raise RuleViolation("TEST-1", "refused on every state")
        return self._inner.decide(state, seat, command, rng)


class _MovedOnEveryRead(InMemoryEventStore):
    """A store another replica writes to whenever this one reads a match's stream."""

    def __init__(self, inner: InMemoryEventStore, other_move) -> None:
        self.__dict__.update(inner.__dict__)
        self.other_move = other_move
        self.reads = 0

    def read(self, match_id, after=0, limit=None):
        self.reads += 1
        self.other_move()
        return super().read(match_id, after=after, limit=limit)


def test_a_refusal_on_a_state_read_during_the_call_stands_while_another_replica_moves_on(store) -> None:
    """Re-deciding after every move of another replica could go on for as long as it keeps
    moving the match (and end in UNAVAILABLE): a command refused on a state this call read
    from the store is refused, as that state was the latest when it was read."""
    engine, seats = _game()
    b = bootstrap(store=store, settings=SETTINGS)
    created = b.create_match(engine.info.game_id, seats, seed=5)
    seat, _viewer, cmd = _first_move(b, created.match_id, created.seat_tokens)
    refusing = _RefusingEngine(engine, cmd.SerializeToString(deterministic=True))
    moves = iter(range(100))

    def b_moves() -> None:
        _seat, viewer, next_cmd = _first_move(b, created.match_id, created.seat_tokens)
        b.submit(created.match_id, viewer, f"b-{next(moves)}", next_cmd)

    moving = _MovedOnEveryRead(store, lambda: None)
    a = bootstrap(store=moving, settings=SETTINGS, registry=Registry({engine.info.game_id: refusing}))
    a.matches.get(created.match_id)  # a holds the match; b moves it on before a's command
    b_moves()
    moving.other_move, moving.reads = b_moves, 0
    with pytest.raises(FailedPrecondition) as exc:
        a.submit(created.match_id, a.viewer(created.match_id, created.seat_tokens[seat]), "a-1", cmd)
    assert exc.value.code == "TEST-1"
    # Refused on a's old state, read once, refused on the state read, read once more to
    # rule out that the command was stored meanwhile: then the refusal stands.
    assert moving.reads == 2
    assert store.version(created.match_id) == b.matches.get(created.match_id).match.version


def _lose_tail(store: InMemoryEventStore, match_id: str, keep: int) -> None:
    """The store goes back to version `keep`, as a Redis restored from an older AOF would."""
    match = store._matches[match_id]
    del match.events[keep:]
    match.version = keep
    store._commands = {k: v for k, v in store._commands.items() if k[0] != match_id or v[1] <= keep}


def test_a_store_gone_back_is_the_truth_the_hot_state_folds_again(store) -> None:
    """Acknowledged writes lost by the store (a Redis restored from an older AOF): the hot
    state ahead of it made every append conflict, for good (UNAVAILABLE until a restart).
    The service folds the match anew from the store and decides there."""
    engine, seats = _game()
    app = bootstrap(store=store, settings=SETTINGS)
    created = app.create_match(engine.info.game_id, seats, seed=9)
    for i in range(4):
        _seat, viewer, cmd = _first_move(app, created.match_id, created.seat_tokens)
        app.submit(created.match_id, viewer, f"c-{i}", cmd)
    ahead = store.version(created.match_id)
    _lose_tail(store, created.match_id, created.version)  # back to just after setup
    assert app.matches.get(created.match_id).match.version == ahead  # the hot state does not know
    fresh = bootstrap(store=store, settings=SETTINGS)
    seat, _viewer, cmd = _first_move(fresh, created.match_id, created.seat_tokens)  # legal on the store's state
    done = app.submit(created.match_id, app.viewer(created.match_id, created.seat_tokens[seat]), "after-loss", cmd)
    assert not done.duplicate and store.version(created.match_id) == done.version > created.version
    assert app.matches.get(created.match_id).match.state == \
        bootstrap(store=store, settings=SETTINGS).matches.get(created.match_id).match.state
    # A command legal on the state the service folded, made after the store went back again:
    # its append is refused as a conflict from behind, and it is decided anew on the store's
    # state (taken there, or refused by the rules: never UNAVAILABLE).
    for i in range(3):
        _seat, viewer, cmd = _first_move(app, created.match_id, created.seat_tokens)
        app.submit(created.match_id, viewer, f"again-{i}", cmd)
    _lose_tail(store, created.match_id, done.version)
    seat, viewer, cmd = _first_move(app, created.match_id, created.seat_tokens)  # on the state ahead
    try:
        app.submit(created.match_id, viewer, "on-the-state-ahead", cmd)
    except FailedPrecondition:
        pass
    assert app.matches.get(created.match_id).match.state == \
        bootstrap(store=store, settings=SETTINGS).matches.get(created.match_id).match.state


def test_a_store_gone_back_and_written_past_this_replica_is_folded_anew_not_read_on(store) -> None:
    """The store lost acknowledged writes and another replica, folding from it, wrote past where
    this one stands: the events past this replica's version do not follow its fold (the store
    no longer holds the event it last folded, at its seq). This replica folds the match anew
    instead of folding them on top of the lost ones (which decided, and stored, commands on a
    state no store had)."""
    engine, seats = _game()
    app = bootstrap(store=store, settings=SETTINGS)
    created = app.create_match(engine.info.game_id, seats, seed=9)
    for i in range(3):
        _seat, viewer, cmd = _first_move(app, created.match_id, created.seat_tokens)
        app.submit(created.match_id, viewer, f"c-{i}", cmd)
    kept = store.version(created.match_id)
    for i in range(2):
        _seat, viewer, cmd = _first_move(app, created.match_id, created.seat_tokens)
        app.submit(created.match_id, viewer, f"lost-{i}", cmd)
    ahead = store.version(created.match_id)
    _lose_tail(store, created.match_id, kept)
    other = bootstrap(store=store, settings=SETTINGS)  # another replica, on the store as it is now
    for i in range(100):  # other moves than the lost ones, past where this replica stands
        if store.version(created.match_id) > ahead:
            break
        seat, viewer, _cmd = _first_move(other, created.match_id, created.seat_tokens)
        other.submit(created.match_id, viewer, f"other-{i}", other.legal_commands(created.match_id, viewer).commands[-1])
    assert store.version(created.match_id) > ahead
    # A command this replica takes now is decided on the store's state, not on its own: its
    # append conflicts from ahead, and the catch-up that follows folds the match anew.
    seat, _viewer, cmd = _first_move(bootstrap(store=store, settings=SETTINGS), created.match_id, created.seat_tokens)
    done = app.submit(created.match_id, app.viewer(created.match_id, created.seat_tokens[seat]), "after", cmd)
    assert done.version == store.version(created.match_id)
    hot = app.matches.get(created.match_id)
    with hot.lock:
        app.matches.catch_up(hot)
    assert hot.match.version == store.version(created.match_id)
    assert hot.match.state == bootstrap(store=store, settings=SETTINGS).matches.get(created.match_id).match.state


def test_a_store_gone_back_and_written_on_by_a_newer_server_is_match_unreadable(store) -> None:
    """The store lost this replica's last writes and a newer server then wrote an event kind this
    one does not know: folding the match anew (`HotMatches.refold`) meets that kind, and the
    call is FAILED_PRECONDITION match_unreadable as any fold's, not an internal error; the store
    keeps what it has."""
    engine, seats = _game()
    app = bootstrap(store=store, settings=SETTINGS)
    created = app.create_match(engine.info.game_id, seats, seed=9)
    kept = store.version(created.match_id)
    for i in range(2):
        _seat, viewer, cmd = _first_move(app, created.match_id, created.seat_tokens)
        app.submit(created.match_id, viewer, f"lost-{i}", cmd)
    _lose_tail(store, created.match_id, kept)
    newer = _a_newer_servers_event(store, created.match_id)
    seat = engine.pending(app.matches.get(created.match_id).match.state)[0].seat
    viewer = Viewer(seat)
    calls = [lambda: app.get_view(created.match_id, viewer),
             lambda: app.legal_commands(created.match_id, viewer),
             lambda: app.submit(created.match_id, viewer, "after", cmd, expected_version=kept)]
    for call in calls:
        with pytest.raises(FailedPrecondition) as exc:
            call()
        assert exc.value.code == "match_unreadable"
        assert f"event {newer.seq} is of a kind" in exc.value.message and "future_kind" not in exc.value.message
    assert store.version(created.match_id) == newer.seq


def test_a_follower_sees_the_match_end_after_the_store_went_back() -> None:
    """StreamEvents follows the match the service folds anew (HotMatches.refold), not the
    state it started with, or it would wait forever for an end that state never reaches."""

    from famiglia.bots.toy import ENGINE as HIGHCARD
    from famiglia.bots.toy import toy_registry

    store = InMemoryEventStore()
    app = bootstrap(store=store, registry=toy_registry(), settings=SETTINGS)
    match_id = app.create_match("highcard", 2, seed=3, options={"hand": "3"}).match_id
    hot = app.matches.get(match_id)
    moves = iter(range(1000))

    def move() -> None:
        m = hot.match
        seat = HIGHCARD.pending(m.state)[0].seat
        app.submit(match_id, Viewer(seat), f"c{next(moves)}", HIGHCARD.legal_commands(m.state, seat)[0])

    for _ in range(2):
        move()
    kept = store.version(match_id)
    for _ in range(2):
        move()  # acknowledged, then lost
    ended = threading.Event()
    following = threading.Event()

    def follow() -> None:
        for _event, _version, finished in app.events(match_id, Viewer(None), 0, follow=True, poll_ms=20):
            following.set()
            if finished:
                ended.set()
                return

    threading.Thread(target=follow, daemon=True).start()
    assert following.wait(30), "the follower never started"  # it follows before the tail is lost
    _lose_tail(store, match_id, kept)
    while not hot.match.finished:
        move()  # the first one folds the match anew
    assert ended.wait(30), "the follower never saw the match end"


class _AlwaysOvertaken(InMemoryEventStore):
    def __init__(self, inner: InMemoryEventStore) -> None:
        self.__dict__.update(inner.__dict__)

    def append(self, match_id, expected_version, events, command_id=""):
        raise ConcurrencyConflict(match_id, expected_version, expected_version + 1)


def test_a_replica_overtaken_again_and_again_waits_longer_each_time_then_answers_unavailable(
        store, monkeypatch) -> None:
    """Two replicas racing in lockstep would overtake each other on every retry: from the
    second conflict on, a retry waits a random time that grows, so one of them gets through."""
    engine, seats = _game()
    created = bootstrap(store=store, settings=SETTINGS).create_match(engine.info.game_id, seats, seed=5)
    a = bootstrap(store=_AlwaysOvertaken(store), settings=SETTINGS)
    waits: list[float] = []
    monkeypatch.setattr(command_app.time, "sleep", waits.append)
    monkeypatch.setattr(command_app.random, "uniform", lambda low, high: high)
    seat, viewer, cmd = _first_move(a, created.match_id, created.seat_tokens)
    with pytest.raises(Unavailable):
        a.submit(created.match_id, viewer, "a-1", cmd)
    assert len(waits) == command_app.MAX_RETRIES - 1  # none after the first conflict
    assert waits == sorted(waits) and waits[0] < waits[-1] <= 16 * command_app.CONFLICT_BACKOFF_S


def test_two_replicas_racing_on_one_match_never_fork_it(store) -> None:
    """Two command services on one store: each command is decided on the latest state."""
    engine, seats = _game()
    a = bootstrap(store=store, settings=SETTINGS)
    b = bootstrap(store=store, settings=SETTINGS)
    created = a.create_match(engine.info.game_id, seats, seed=21)
    errors: list[Exception] = []
    accepted = {"n": 0}
    lock = threading.Lock()

    def player(app: CommandApp, name: str) -> None:
        rng = random.Random(name)
        for i in range(30):
            hot = app.matches.get(created.match_id)
            with hot.lock:
                app.matches.catch_up(hot)
                m = hot.match
                if m.finished:
                    return
                seat = rng.choice(sorted({p.seat for p in engine.pending(m.state)}))
                cmds = [c for c in engine.legal_commands(m.state, seat, limit=16)
                        if command_kind(c) not in engine.info.optional_commands] or \
                    engine.legal_commands(m.state, seat, limit=16)
            viewer = app.viewer(created.match_id, created.seat_tokens[seat])
            try:
                app.submit(created.match_id, viewer, f"{name}-{i}", rng.choice(cmds))
                with lock:
                    accepted["n"] += 1
            except (FailedPrecondition, Aborted):
                pass  # re-decided on a newer state and refused: fine, nothing written
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)

    threads = [threading.Thread(target=player, args=(app, name)) for app, name in ((a, "a"), (b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    envelopes = store.read(created.match_id)
    assert [e.seq for e in envelopes] == list(range(1, len(envelopes) + 1))
    a.matches.catch_up(a.matches.get(created.match_id))
    b.matches.catch_up(b.matches.get(created.match_id))
    assert a.matches.get(created.match_id).match.state == b.matches.get(created.match_id).match.state
    assert accepted["n"] > 0


def test_a_match_trimmed_while_this_process_holds_it_is_archived_for_every_call(store: InMemoryEventStore) -> None:
    """The retention sweep trims a finished match another replica made and this one still holds
    in memory: its next fold finds no events, and every call is refused as on a process that
    never held it (`match_archived`), not an internal error; ListMyTurns leaves it out."""
    engine, seats = _game()
    app = bootstrap(store=store, settings=SETTINGS)
    info = [envelope_pb2.SeatInfo(seat=0, player_id="ann")]
    created = app.create_match(engine.info.game_id, seats, seed=3, seat_info=info)
    seat_zero = app.viewer(created.match_id, created.seat_tokens[0])
    app.get_view(created.match_id, seat_zero)  # held hot here
    assert store.trim(created.match_id) > 0
    calls = {
        "view": lambda: app.get_view(created.match_id, seat_zero),
        "legal": lambda: app.legal_commands(created.match_id, seat_zero),
        "leave": lambda: app.leave_match(created.match_id, seat_zero),
        "rematch": lambda: app.get_rematch(created.match_id, seat_zero),
    }
    for name, call in calls.items():
        with pytest.raises(NotFound) as refused:
            call()
        assert refused.value.code == "match_archived", name
    assert app.my_turns("ann") == []
