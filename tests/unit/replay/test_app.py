"""The replay service's use cases on the in-memory store and an in-memory archive (real bootstrap)."""

from __future__ import annotations

import pytest

from famiglia.auth import TokenSigner
from famiglia.config import Settings
from famiglia.engine import fold, pending_for
from famiglia.eventstore.envelopes import open_event
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.grpcutil.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)
from famiglia.replay.access import Scope
from famiglia.replay.export import dump, load
from famiglia.replay.sources import MemorySource
from services.replay.app import ReplayApp
from services.replay.bootstrap import ReplaySettings, bootstrap

from .games import copy, engine, game_ids, recorded, registry

SETTINGS = Settings(secret="replay-unit-secret")
SIGNER = TokenSigner(SETTINGS.secret)
TOY = "replay_toy"


def _app(store: InMemoryEventStore, cold: MemorySource | None = None, **knobs) -> ReplayApp:
    return bootstrap(store=store, cold=cold or MemorySource(), registry=registry(), settings=SETTINGS,
                     replay_settings=ReplaySettings(**knobs))


def _stored(game_id: str, *, upto: int | None = None, seed: int = 3) -> tuple[InMemoryEventStore, list]:
    envelopes = copy(recorded(game_id, seed))[:upto]
    store = InMemoryEventStore()
    store.append(envelopes[0].match_id, 0, envelopes)
    return store, envelopes


def _token(envelopes, seat: int) -> str:
    return SIGNER.seat_token(envelopes[0].match_id, seat)


def _running_cut(game_id: str) -> int:
    """A seq in the middle of the commands: the match is running there."""
    envelopes = recorded(game_id)
    commands = [e.seq for e in envelopes if e.command]
    return commands[len(commands) // 2]


@pytest.mark.parametrize("game_id", game_ids())
def test_state_at_every_event_is_the_askers_view_of_the_fold_up_to_it(game_id: str) -> None:
    store, envelopes = _stored(game_id)
    app = _app(store)
    eng = engine(game_id)
    seat = eng.info.min_players - 1
    token = _token(envelopes, seat)
    events = [open_event(eng, e) for e in envelopes[1:]]
    step = max(1, len(envelopes) // 60)
    for env in envelopes[1::step]:
        state = fold(eng, events[: env.seq - 1])
        spectator = app.state_at(env.event_id, None)
        assert spectator.access.scope is Scope.SPECTATOR
        assert spectator.view == eng.view(state, None), f"seq {env.seq}"
        mine = app.state_at(env.event_id, token)
        assert mine.access.scope is Scope.SEAT and mine.view == eng.view(state, seat)
        assert mine.to_act == pending_for(eng, state, seat)
        assert spectator.to_act == pending_for(eng, state, None)
        full = app.state_at(env.event_id, None, full=True)
        assert full.text == eng.render_state(state)
        assert full.seat_views == [eng.view(state, s) for s in range(eng.info.min_players)]
        assert app.timelines.get(envelopes[0].match_id).folded_last < app.timelines.every


@pytest.mark.parametrize("game_id", game_ids())
def test_a_seat_token_never_sees_another_seats_secrets_while_the_match_runs(game_id: str) -> None:
    store, envelopes = _stored(game_id, upto=_running_cut(game_id))
    app = _app(store)
    eng = engine(game_id)
    match_id = envelopes[0].match_id
    assert not app.timeline(match_id).finished
    for seat in range(eng.info.min_players):
        token = _token(envelopes, seat)
        with pytest.raises(PermissionDenied):
            app.state_at(envelopes[-1].event_id, token, full=True)
        state = None
        shown = 0
        steps = {s.envelope.seq: s for s in app.replay(token, match_id=match_id)}
        for env in envelopes[1:]:
            event = open_event(eng, env)
            state = eng.evolve(state, event)
            expected = eng.redact(event, seat)
            if expected is None:
                assert env.seq not in steps, f"seat {seat} was shown hidden event {env.seq}"
                continue
            shown += 1
            assert steps[env.seq].event == expected
            assert steps[env.seq].view == eng.view(state, seat)
            assert steps[env.seq].view_text != eng.render_state(state)
        assert shown == len(steps) - 1  # + match_created, whose payload (the seed) is never shown
        assert "seed" not in steps[1].event_text


def test_toy_seat_streams_hold_no_other_seats_cards() -> None:
    store, envelopes = _stored(TOY, upto=_running_cut(TOY))
    app = _app(store)
    for seat in range(2):
        for step in app.replay(_token(envelopes, seat), match_id=envelopes[0].match_id):
            if step.event is not None and step.event.WhichOneof("kind") in ("hand_dealt", "card_taken"):
                assert getattr(step.event, step.event.WhichOneof("kind")).seat == seat
            assert step.event is None or step.event.WhichOneof("kind") != "deck_shuffled"


def test_everyone_may_see_everything_once_the_match_is_over_unless_configured_otherwise() -> None:
    store, envelopes = _stored(TOY)
    assert _app(store).state_at(envelopes[5].event_id, None, full=True).access.scope is Scope.FULL
    with pytest.raises(PermissionDenied):
        _app(store, full_after_finish=False).state_at(envelopes[5].event_id, None, full=True)
    running, cut = _stored(TOY, upto=_running_cut(TOY))
    assert _app(running, full_while_running=True).state_at(cut[-1].event_id, None, full=True).seat_views


def test_tokens_are_bound_to_their_match_and_unknown_ids_are_not_found() -> None:
    store, envelopes = _stored(TOY)
    app = _app(store)
    with pytest.raises(PermissionDenied):
        app.state_at(envelopes[4].event_id, SIGNER.seat_token("another-match", 0))
    with pytest.raises(Unauthenticated):
        app.state_at(envelopes[4].event_id, "forged.token")
    with pytest.raises(PermissionDenied):
        app.state_at(envelopes[4].event_id, _token(envelopes, 9))
    with pytest.raises(NotFound):
        app.state_at("01NOSUCHEVENT0000000000000", None)
    with pytest.raises(NotFound):
        app.timeline("no-such-match")
    with pytest.raises(InvalidArgument):
        app.state_at("", None)


def test_the_match_created_event_shows_the_setup_but_the_seed_only_in_full() -> None:
    store, envelopes = _stored(TOY)
    app = _app(store)
    public = app.state_at(envelopes[0].event_id, None)
    assert public.view is None and "replay_toy" in public.text and "seed" not in public.text
    assert "seed 3" in app.state_at(envelopes[0].event_id, None, full=True).text


def test_a_trimmed_match_replays_from_the_archive_exactly_as_from_the_store() -> None:
    store, envelopes = _stored(TOY)
    cold = MemorySource()
    cold.add(envelopes)  # what the projection archived
    match_id = envelopes[0].match_id

    def replay(app: ReplayApp) -> list:
        steps = [(s.envelope, s.event, s.view, s.view_text) for s in app.replay(None, match_id=match_id, full=True)]
        states = [app.state_at(e.event_id, _token(envelopes, 1)).view for e in envelopes]
        return [steps, states]

    hot = replay(_app(store, cold))
    assert store.trim(match_id) == len(envelopes) and store.read(match_id) == []
    assert replay(_app(store, cold)) == hot
    with pytest.raises(NotFound):
        _app(store, MemorySource()).timeline(match_id)


def test_a_replay_can_start_after_an_event_and_stop_at_a_seq() -> None:
    store, envelopes = _stored(TOY)
    app = _app(store)
    steps = list(app.replay(None, event_id=envelopes[9].event_id, to_seq=20, full=True))
    assert [s.envelope.seq for s in steps] == list(range(11, 21))
    without = list(app.replay(None, match_id=envelopes[0].match_id, from_seq=5, to_seq=6, with_views=False))
    assert all(s.view is None for s in without)


def test_recorded_pace_waits_as_the_match_did_scaled_and_capped() -> None:
    store, envelopes = _stored(TOY)  # one command per second
    waits: list[float] = []
    app = _app(store)
    app._sleep = waits.append
    list(app.replay(None, match_id=envelopes[0].match_id, full=True, recorded_pace=True, speed=4.0,
                    max_gap_ms=60_000))
    commands = len({e.command_id for e in envelopes if e.command_id})
    assert waits and all(w == pytest.approx(0.25) for w in waits) and len(waits) == commands
    waits.clear()
    list(app.replay(None, match_id=envelopes[0].match_id, full=True, recorded_pace=True, max_gap_ms=100))
    assert all(w == pytest.approx(0.1) for w in waits)


def test_list_match_events_pages_through_every_event_and_hides_what_the_asker_may_not_see() -> None:
    store, envelopes = _stored(TOY, upto=_running_cut(TOY))
    app = _app(store)
    match_id = envelopes[0].match_id
    seen, token = [], ""
    while True:
        page = app.list_events(match_id, None, page_size=10, page_token=token)
        assert len(page.events) <= 10
        seen.extend(page.events)
        token = page.next_token
        if not token:
            break
    assert [i.envelope.event_id for i in seen] == [e.event_id for e in envelopes]
    hidden = {i.envelope.seq for i in seen if i.hidden}
    assert hidden == {e.seq for e in envelopes[1:] if e.type in ("deck_shuffled", "hand_dealt", "card_taken")}
    assert all(i.type == "" for i in seen if i.hidden)
    # A hidden event shows neither who acted nor when (H2): seat -1 and time 0, as for nothing.
    assert any(i.envelope.seat >= 0 for i in seen if i.hidden), "the toy hides some seat's own action"
    assert all((i.seat, i.timestamp_ms, i.command_id) == (-1, 0, "") for i in seen if i.hidden)
    # Nor its id, whose first part is the millisecond it was made (a ULID).
    assert all(i.event_id == "" for i in seen if i.hidden)
    assert all(i.event_id == i.envelope.event_id for i in seen if not i.hidden)
    shown = [i for i in seen if not i.hidden]
    assert all(i.timestamp_ms == i.envelope.timestamp.ToMilliseconds() for i in shown)
    # ... and a shown event of a command with a hidden part is not attributed either.
    partly = {(i.envelope.seat, i.envelope.command_id) for i in seen if i.hidden and i.envelope.command_id}
    for i in shown:
        attributed = (i.envelope.seat, i.envelope.command_id) not in partly
        # (a spectator is shown no command id: each is its own seat's, NP-H9)
        assert (i.seat, i.command_id) == ((i.envelope.seat, "") if attributed else (-1, ""))
    assert any((i.envelope.seat, i.envelope.command_id) in partly for i in shown)
    mine = app.list_events(match_id, _token(envelopes, 0), page_size=1000)
    assert {i.envelope.seq for i in mine.events if i.hidden} < hidden
    with pytest.raises(InvalidArgument):
        app.list_events(match_id, None, page_token="x")


def test_export_import_and_verify_round_trip() -> None:
    store, envelopes = _stored(TOY)
    app = _app(store)
    match_id = envelopes[0].match_id
    export = app.export(match_id)
    assert app.verify_match(match_id).ok
    data = dump(export)
    assert app.verify_file(data).ok

    target = InMemoryEventStore()
    other = _app(target)
    op = SIGNER.operator_token()
    new_id, version, report = other.import_file(data, token=op, new_match_id="m-imported")
    assert (new_id, version, report.ok) == ("m-imported", len(envelopes), True)
    copied = target.read("m-imported")
    assert [e.payload for e in copied] == [e.payload for e in envelopes]
    assert not {e.event_id for e in copied} & {e.event_id for e in envelopes}
    assert other.import_file(data, token=op)[0] == match_id
    assert not {e.event_id for e in target.read(match_id)} & {e.event_id for e in envelopes}  # fresh ids always
    with pytest.raises(AlreadyExists):
        other.import_file(data, token=op)

    tampered = load(data)
    tampered.events[20].payload += b"\x08\x01"
    with pytest.raises(FailedPrecondition, match="seq 21"):
        other.import_file(dump(tampered), token=op, new_match_id="m-tampered")
    assert other.import_file(dump(tampered), token=op, new_match_id="m-tampered",
                             allow_unverified=True)[2].divergence.seq == 21
    with pytest.raises(InvalidArgument):
        other.import_file(b"not an export", token=op)
    with pytest.raises(FailedPrecondition):
        _app(InMemoryEventStore(), imports=False).import_file(data, token=op)


def test_a_running_match_is_neither_exported_nor_verified_by_id() -> None:
    store, envelopes = _stored(TOY, upto=_running_cut(TOY))
    app = _app(store)
    with pytest.raises(PermissionDenied):
        app.export(envelopes[0].match_id)
    with pytest.raises(PermissionDenied):
        app.verify_match(envelopes[0].match_id)


def test_a_running_match_is_caught_up_between_questions() -> None:
    envelopes = copy(recorded(TOY))
    cut = _running_cut(TOY)
    store = InMemoryEventStore()
    store.append(envelopes[0].match_id, 0, envelopes[:cut])
    app = _app(store)
    assert app.timeline(envelopes[0].match_id).last_seq == cut
    store.append(envelopes[0].match_id, cut, envelopes[cut:])
    assert app.state_at(envelopes[-1].event_id, None).finished


def test_export_and_verify_by_id_check_the_askers_token_as_every_other_call_does() -> None:
    """ExportMatch and VerifyMatch(match_id) show the whole match: they are granted as a full
    view is (docs/replay.md, "Who sees what"), token included, never answered past a token
    that is forged or of another match, nor with `match_running` for a match that is over."""
    store, envelopes = _stored(TOY)
    app = _app(store)
    match_id = envelopes[0].match_id
    assert app.export(match_id, token=None).match_id == match_id
    assert app.export(match_id, token=_token(envelopes, 1)).match_id == match_id
    assert app.verify_match(match_id, token=_token(envelopes, 0)).ok
    for call in (app.export, app.verify_match):
        with pytest.raises(Unauthenticated):
            call(match_id, token="forged.token")
        with pytest.raises(PermissionDenied, match="wrong_match"):
            call(match_id, token=SIGNER.seat_token("another-match", 0))
    closed = _app(store, full_after_finish=False)
    for call in (closed.export, closed.verify_match):
        with pytest.raises(PermissionDenied, match="full_view_disabled"):
            call(match_id, token=None)
