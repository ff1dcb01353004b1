"""CancelMatch's use case: an operator ends a match its rules will not end (in-memory store,
real bootstrap, the High Card toy game for a match short enough to finish)."""

from __future__ import annotations

import threading

import pytest

from famiglia.bots.toy import ENGINE as HIGHCARD
from famiglia.bots.toy import toy_registry
from famiglia.config import Settings
from famiglia.eventstore.envelopes import MATCH_CANCELLED
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.grpcutil.errors import Aborted, FailedPrecondition, InvalidArgument, NotFound
from famiglia.matchstate import MatchState
from famiglia.v1 import envelope_pb2
from services.command.app import MAX_CANCEL_REQUEST_ID, CommandApp, Viewer
from services.command.bootstrap import bootstrap

SETTINGS = Settings(secret="unit-test-secret")
REGISTRY = toy_registry()


@pytest.fixture()
def store() -> InMemoryEventStore:
    return InMemoryEventStore()


@pytest.fixture()
def app(store: InMemoryEventStore) -> CommandApp:
    return bootstrap(store=store, registry=REGISTRY, settings=SETTINGS)


def _match(app: CommandApp) -> str:
    return app.create_match("highcard", 2, seed=3, options={"hand": "3"}).match_id


def _move(app: CommandApp, match_id: str, command_id: str):
    m = app.matches.get(match_id).match
    seat = HIGHCARD.pending(m.state)[0].seat
    return seat, app.submit(match_id, Viewer(seat), command_id, HIGHCARD.legal_commands(m.state, seat)[0])


def test_a_cancel_appends_one_public_server_event_and_ends_the_match_with_no_result(app, store) -> None:
    match_id = _match(app)
    _move(app, match_id, "c1")
    before = store.version(match_id)
    done = app.cancel_match(match_id, "cli", "a player reported cheating", request_id="r1")
    assert not done.duplicate
    assert done.version == before + 1 == store.version(match_id)
    last = store.read(match_id)[-1]
    assert (last.type, last.seat, last.visibility.kind) == (MATCH_CANCELLED, -1, envelope_pb2.VISIBILITY_PUBLIC)
    assert envelope_pb2.MatchCancelled.FromString(last.payload).reason == "a player reported cheating"
    assert not last.command  # no game command: verification re-runs nothing for it
    # A fresh process (another replica, a restart) folds the same end.
    folded = MatchState.from_envelopes(REGISTRY, store.read(match_id))
    assert folded.finished and folded.result() is None and folded.cancelled.operator == "cli"


def test_after_a_cancel_views_show_the_end_and_nothing_is_asked_or_legal(app) -> None:
    match_id = _match(app)
    seat, _ = _move(app, match_id, "c1")
    asked = HIGHCARD.pending(app.matches.get(match_id).match.state)[0].seat
    assert app.legal_commands(match_id, Viewer(asked)).commands  # asked before the cancel
    app.cancel_match(match_id, "cli", "stuck")
    view = app.get_view(match_id, Viewer(asked))
    assert view.cancelled is not None and view.cancelled.reason == "stuck"
    assert view.result is None and view.to_act == []
    assert view.text  # the whole state, as for any match over
    legal = app.legal_commands(match_id, Viewer(asked))
    assert legal.commands == [] and legal.complete


def test_commands_after_a_cancel_are_match_over_naming_the_reason(app, store) -> None:
    match_id = _match(app)
    _move(app, match_id, "c1")
    m = app.matches.get(match_id).match
    seat = HIGHCARD.pending(m.state)[0].seat
    command = HIGHCARD.legal_commands(m.state, seat)[0]
    app.cancel_match(match_id, "cli", "orphaned by matchmaking")
    version = store.version(match_id)
    with pytest.raises(FailedPrecondition) as exc:
        app.submit(match_id, Viewer(seat), "c2", command, expected_version=version)
    assert exc.value.code == "match_over" and "orphaned by matchmaking" in exc.value.message
    assert store.version(match_id) == version


def test_another_replica_refuses_commands_once_a_cancel_reached_the_store(store) -> None:
    """The cancel went through one replica; another whose hot state is behind decides the
    command on its old state, loses the append's version check and then refuses it."""
    first = bootstrap(store=store, registry=REGISTRY, settings=SETTINGS)
    other = bootstrap(store=store, registry=REGISTRY, settings=SETTINGS)
    match_id = _match(first)
    m = other.matches.get(match_id).match  # hot in the other replica before the cancel
    seat = HIGHCARD.pending(m.state)[0].seat
    first.cancel_match(match_id, "cli", "stopped")
    with pytest.raises(FailedPrecondition) as exc:
        other.submit(match_id, Viewer(seat), "late", HIGHCARD.legal_commands(m.state, seat)[0])
    assert exc.value.code == "match_over"
    assert store.read(match_id)[-1].type == MATCH_CANCELLED


def test_a_command_sent_at_the_version_before_the_cancel_is_match_over_not_stale(store) -> None:
    """A client whose command raced the cancel learns how the match ended, not only that it
    moved: a stale_version would send it to read the match again to find out."""
    first = bootstrap(store=store, registry=REGISTRY, settings=SETTINGS)
    other = bootstrap(store=store, registry=REGISTRY, settings=SETTINGS)
    match_id = _match(first)
    before = store.version(match_id)
    m = other.matches.get(match_id).match
    seat = HIGHCARD.pending(m.state)[0].seat
    command = HIGHCARD.legal_commands(m.state, seat)[0]
    first.cancel_match(match_id, "cli", "stopped by support")
    for app in (first, other):  # the replica that cancelled and one behind it
        with pytest.raises(FailedPrecondition) as exc:
            app.submit(match_id, Viewer(seat), "raced", command, expected_version=before)
        assert exc.value.code == "match_over" and "stopped by support" in exc.value.message


def test_the_same_request_id_answers_as_the_first_cancel_and_another_is_match_over(app, store) -> None:
    match_id = _match(app)
    done = app.cancel_match(match_id, "cli", "stuck", request_id="r1")
    again = app.cancel_match(match_id, "cli", "stuck", request_id="r1")
    assert again.duplicate and again.version == done.version
    # Another replica, which never saw the first call, answers the retry the same way.
    other = bootstrap(store=store, registry=REGISTRY, settings=SETTINGS)
    assert other.cancel_match(match_id, "cli", "stuck", request_id="r1").version == done.version
    with pytest.raises(FailedPrecondition) as exc:
        app.cancel_match(match_id, "cli", "stuck", request_id="r2")
    assert exc.value.code == "match_over" and "cancelled" in exc.value.message
    assert store.version(match_id) == done.version  # one cancel event, whatever was retried


def test_a_finished_match_cannot_be_cancelled(app, store) -> None:
    match_id = _match(app)
    n = 0
    while not app.matches.get(match_id).match.finished:
        n += 1
        _move(app, match_id, f"c{n}")
    version = store.version(match_id)
    with pytest.raises(FailedPrecondition) as exc:
        app.cancel_match(match_id, "cli", "too late")
    assert exc.value.code == "match_over"
    assert store.version(match_id) == version


def test_a_cancel_checks_its_reason_request_id_and_expected_version(app, store) -> None:
    match_id = _match(app)
    version = store.version(match_id)
    for reason, code in (("", "no_reason"), ("   ", "no_reason"), ("x" * 501, "bad_reason"), ("a\x00b", "bad_reason"),
                         ("stuck\x1b[2J", "bad_reason"), ("stuck \u202egnirts", "bad_reason")):
        with pytest.raises(InvalidArgument) as exc:
            app.cancel_match(match_id, "cli", reason)
        assert exc.value.code == code
    with pytest.raises(InvalidArgument) as exc:
        app.cancel_match(match_id, "cli", "stuck", request_id="r" * 257)
    assert exc.value.code == "bad_request_id"
    with pytest.raises(Aborted) as aborted:
        app.cancel_match(match_id, "cli", "stuck", expected_version=version - 1)
    assert aborted.value.code == "stale_version"
    with pytest.raises(NotFound):
        app.cancel_match("m-nobody", "cli", "stuck")
    assert store.version(match_id) == version  # nothing refused was written
    assert app.cancel_match(match_id, "cli", "stuck", expected_version=version).version == version + 1


def test_a_cancels_request_id_is_held_to_what_its_events_command_id_may_be_stored_as(app, store) -> None:
    """The request id becomes the event's command id ("cancel:<id>"): up to 256 characters were
    taken, a command id of 263 that the archive's column (128) and ImportMatch refuse, so the
    match could be neither archived on PostgreSQL nor exported and imported back."""
    from famiglia.readmodels.tables import ArchivedEvent
    from famiglia.replay.admission import stored_envelopes
    from famiglia.replay.export import build_export

    column = ArchivedEvent.__table__.c.command_id.type.length  # type: ignore[attr-defined]
    match_id = _match(app)
    with pytest.raises(InvalidArgument) as exc:
        app.cancel_match(match_id, "cli", "stuck", request_id="r" * (MAX_CANCEL_REQUEST_ID + 1))
    assert exc.value.code == "bad_request_id"
    app.cancel_match(match_id, "cli", "stuck", request_id="r" * MAX_CANCEL_REQUEST_ID)
    stored = store.read(match_id)
    assert len(stored[-1].command_id) <= column
    stored_envelopes(REGISTRY, build_export(REGISTRY, stored), "m-imported")  # importable: no bad_export


def test_a_follower_sees_the_cancel_then_the_end(app) -> None:
    match_id = _match(app)
    seen: list = []
    ended = threading.Event()

    def follow() -> None:
        for event, version, finished in app.events(match_id, Viewer(0), 0, follow=True, poll_ms=20):
            seen.append((event, version, finished))
            if finished:
                ended.set()
                return

    threading.Thread(target=follow, daemon=True).start()
    app.cancel_match(match_id, "cli", "stopped by support")
    assert ended.wait(30), "the follower never saw the match end"
    cancel, version, finished = seen[-2]
    assert cancel.envelope.type == MATCH_CANCELLED and cancel.event.reason == "stopped by support"
    assert cancel.stored and cancel.foreign and not finished  # shown as stored, no command id
    assert seen[-1][0] is None and seen[-1][2] and seen[-1][1] == version


def test_a_cancel_while_answers_are_held_writes_them_in_seat_order_and_every_fold_agrees() -> None:
    """NP-H9: answers staged out of the version are written out ahead of the cancel in their
    seats' slots, as before any public command, so the stream a fresh process folds is the hot
    state, the events before the cancel still verify, and not even the export of the match tells
    who answered first."""
    from famiglia.replay.verify import verify_envelopes
    from tests.unit.command.test_held_answers import _fresh_fold, _pass, _window_match

    store = InMemoryEventStore()
    app = bootstrap(store=store, settings=SETTINGS)
    created, window = _window_match(app, asked=3)  # two answers held, the third still awaited
    match_id, tokens = created.match_id, created.seat_tokens
    version = store.version(match_id)
    first, second = sorted(window.seats[1:], reverse=True)  # the higher seat answers first
    assert _pass(app, match_id, tokens[first], f"answer-{first}").held
    assert _pass(app, match_id, tokens[second], f"answer-{second}").held
    done = app.cancel_match(match_id, "cli", "stopped mid-window", expected_version=version)
    created_seats = len(tokens)
    assert done.version == version + created_seats + 1  # a slot a seat, then the cancel
    stream = store.read(match_id)
    assert stream[-1].type == MATCH_CANCELLED
    answered = [e.command_id for e in stream[-1 - created_seats:-1] if e.command_id]
    assert answered == [f"answer-{second}", f"answer-{first}"]  # seat order, not the order they came in
    assert store.read_staged(match_id) == []
    hot, fresh = app.matches.get(match_id).match, _fresh_fold(app, match_id)
    assert (hot.state, hot.version, hot.staged, hot.commands) == (fresh.state, fresh.version, fresh.staged,
                                                                   fresh.commands)
    assert fresh.finished and fresh.result() is None
    assert verify_envelopes(app.registry, stream).ok
