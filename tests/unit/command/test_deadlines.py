"""`deadline_ms` through the command service: each seat is shown when its own turn clock runs
out (GetView, ListLegalCommands, SubmitCommands' `next`, StreamEvents), the moment the bots'
dispatcher enforces (`MatchState.deadlines`), and nothing a seat may not know (NP-H9)."""

from __future__ import annotations

import random

from famiglia.bots.toy import toy_registry
from famiglia.config import Settings
from famiglia.engine.registry import default_registry
from famiglia.eventstore.memory_store import InMemoryEventStore
from services.command.app import ChainedCommand, CommandApp, NextSeat
from services.command.bootstrap import bootstrap
from tests.unit.command.test_held_answers import _pass, _window_match

SETTINGS = Settings(secret="unit-test-secret")


def _app() -> tuple[CommandApp, InMemoryEventStore]:
    store = InMemoryEventStore()
    return bootstrap(store=store, registry=toy_registry(default_registry()), settings=SETTINGS), store


def _shown(app: CommandApp, match_id: str, token: str | None) -> tuple[int, int]:
    """(GetView's, ListLegalCommands') deadline for the token's seat."""
    viewer = app.viewer(match_id, token)
    view = app.get_view(match_id, viewer).deadline_ms
    return view, (app.legal_commands(match_id, viewer).deadline_ms if viewer.seat is not None else 0)


def _step3(app: CommandApp):
    created = app.create_match("goodcritters", 4, seed=3)
    hot = app.matches.get(created.match_id)
    for step in range(80):
        m = hot.match
        asked = [p.seat for p in m.engine.pending(m.state) if p.timeout_seconds > 0]
        if len(asked) >= 2:
            return created, asked
        seat = asked[0]
        app.submit(created.match_id, app.viewer(created.match_id, created.seat_tokens[seat]), f"walk-{step}",
                   m.engine.timeout_command(m.state, seat))
    raise AssertionError("no Step 3 reached")


def test_each_seat_is_shown_its_own_deadline_the_one_the_fold_enforces_and_no_one_elses() -> None:
    app, _store = _app()
    created, asked = _step3(app)
    match_id, tokens = created.match_id, created.seat_tokens
    m = app.matches.get(match_id).match
    deadlines = m.deadlines()
    assert set(deadlines) == set(asked)
    for seat in range(4):
        expected = round(deadlines[seat] * 1000) if seat in asked else 0
        assert _shown(app, match_id, tokens[seat]) == (expected, expected)
    assert all(d > 0 for d in _shown(app, match_id, tokens[asked[0]]))
    assert _shown(app, match_id, None) == (0, 0)  # a spectator has no clock
    # SubmitCommands' `next`: the same, seat by seat
    ask = [NextSeat(t, view=False, legal_limit=1) for t in tokens]
    answer = app.submit_chain(match_id, [], None, ask_next=ask)
    assert {n.seat: n.deadline_ms for n in answer.next} == {s: round(deadlines[s] * 1000) for s in asked}
    # a chain's entry: its seat's next turn, if asked, comes with its deadline too
    hot = app.matches.get(match_id)
    seat = asked[0]
    command = hot.match.engine.timeout_command(hot.match.state, seat)
    packed = ChainedCommand(tokens[seat], "chain-1", "type.googleapis.com/" + command.DESCRIPTOR.full_name,
                            command.SerializeToString())
    answer = app.submit_chain(match_id, [packed], None, ask_next=ask)
    assert answer.taken and {n.seat: n.deadline_ms for n in answer.next} == {
        s: round(d * 1000) for s, d in app.matches.get(match_id).match.deadlines().items()}


def test_another_seats_held_answer_moves_no_deadline_and_the_answering_seat_has_none_NP_H9() -> None:
    """A window's answer is held back (NP-H9): the other asked seat's deadline must not tell it
    the answer came, and the seat that answered is no longer asked (0)."""
    app, store = _app()
    created, window = _window_match(app)
    match_id, tokens = created.match_id, created.seat_tokens
    first, other = window.seats[0], window.seats[1]
    before = {seat: _shown(app, match_id, tokens[seat]) for seat in range(3)}
    assert before[first][0] > 0 and before[other][0] > 0
    version = store.version(match_id)
    assert _pass(app, match_id, tokens[first], "answer-1").held
    assert store.version(match_id) == version
    for seat in range(3):
        assert _shown(app, match_id, tokens[seat]) == ((0, 0) if seat == first else before[seat])
    # a stream the other seat follows shows it the same deadline (at the match's latest version)
    events = [e for e, _v, _f in app.events(match_id, app.viewer(match_id, tokens[other]), 0, follow=False)
              if e is not None]
    assert events[-1].deadline_ms == before[other][0]
    assert all(e.deadline_ms is None for e in events[:-1])


def test_a_stream_shows_the_deadline_on_the_last_event_of_each_read_at_the_latest_version() -> None:
    app, _store = _app()
    created = app.create_match("highcard", 2, seed=4, options={"hand": "4", "clock_s": "30"})
    match_id, tokens = created.match_id, created.seat_tokens
    hot, rng = app.matches.get(match_id), random.Random(4)
    for step in range(3):
        m = hot.match
        seat = m.engine.pending(m.state)[0].seat
        viewer = app.viewer(match_id, tokens[seat])
        app.submit(match_id, viewer, f"c{step}", rng.choice(app.legal_commands(match_id, viewer).commands))
    for seat in range(2):
        viewer = app.viewer(match_id, tokens[seat])
        shown = [e for e, _v, _f in app.events(match_id, viewer, 0, follow=False) if e is not None]
        assert shown[-1].deadline_ms == app.get_view(match_id, viewer).deadline_ms
        assert [e.deadline_ms for e in shown[:-1]] == [None] * (len(shown) - 1)
    asked = hot.match.engine.pending(hot.match.state)[0].seat
    assert app.get_view(match_id, app.viewer(match_id, tokens[asked])).deadline_ms > 0
    assert app.get_view(match_id, app.viewer(match_id, tokens[1 - asked])).deadline_ms == 0


def test_a_cancelled_match_shows_no_deadline_anywhere_its_stream_included() -> None:
    """A cancel ends the match with nobody asked: no seat has a clock any more. The engine does
    not know the match ended (the cancel is no game event), so a deadline taken from its pending
    decisions would still count down on the stream's last reply, the `match_cancelled` event's
    (here in an open Nothing Personal window, where both asked seats had one)."""
    app, store = _app()
    created, window = _window_match(app)
    match_id, tokens = created.match_id, created.seat_tokens
    asked = window.seats[:2]
    assert all(_shown(app, match_id, tokens[seat])[0] > 0 for seat in asked)
    app.cancel_match(match_id, "cli", "stopped mid-window")
    assert app.matches.get(match_id).match.deadlines() == {}  # what the dispatcher would enforce, too
    for seat in range(3):
        assert _shown(app, match_id, tokens[seat]) == (0, 0)
        shown = [e for e, _v, _f in app.events(match_id, app.viewer(match_id, tokens[seat]), 0, follow=False)
                 if e is not None]
        assert shown[-1].envelope.type == "match_cancelled"
        assert shown[-1].deadline_ms == 0, f"seat {seat} is shown a deadline after the cancel"


def test_a_seat_that_chats_is_shown_the_deadline_of_the_decision_it_was_asked_NP_D1(monkeypatch) -> None:
    """NP-D1, one timeout a decision: a Nothing Personal seat asked may chat, offer or shake down
    meanwhile (NP-R6), answering nothing, so its `deadline_ms` stays the decision's; each of them
    used to restart its clock. Its answer starts the next decision's (here the next seat's) afresh.
    Another replica, folding the match from the store, shows the same moments."""
    from famiglia.eventstore import envelopes as stamping
    from famiglia.nothing_personal.v1 import nothing_personal_pb2 as np

    wall = [1_700_000_000.0]
    monkeypatch.setattr(stamping, "time", type("Clock", (), {"time": staticmethod(lambda: wall[0])}))
    app, store = _app()
    created = app.create_match("nothing_personal", 3, seed=1)
    match_id, tokens = created.match_id, created.seat_tokens
    hot = app.matches.get(match_id)
    for step in range(40):  # the setup's markers, to round 1's first Commission turn
        m = hot.match
        if m.state.phase == "commission" and m.state.round == 1:
            break
        seat = m.engine.pending(m.state)[0].seat
        wall[0] += 1.0
        app.submit(match_id, app.viewer(match_id, tokens[seat]), f"setup-{step}", m.engine.timeout_command(m.state, seat))
    seat = hot.match.engine.pending(hot.match.state)[0].seat
    asked = round(wall[0] * 1000) + 60_000  # NP-D4: 60 s from the command that asked it
    assert _shown(app, match_id, tokens[seat]) == (asked, asked)
    viewer = app.viewer(match_id, tokens[seat])
    other = (seat + 1) % 3
    for i, command in enumerate([np.Command(send_chat=np.SendChat(text="a word")),
                                 np.Command(send_chat=np.SendChat(text="another", to=[other])),
                                 np.Command(offer_deal=np.OfferDeal(to=other, want_money=1))]):
        wall[0] += 15.0
        app.submit(match_id, viewer, f"talk-{i}", command)
        assert _shown(app, match_id, tokens[seat]) == (asked, asked), f"after {command.WhichOneof('kind')}"
    replica = bootstrap(store=store, registry=toy_registry(default_registry()), settings=SETTINGS)
    assert _shown(replica, match_id, tokens[seat]) == (asked, asked)
    wall[0] += 5.0
    app.submit(match_id, viewer, "answer", np.Command(**{"pass": np.Pass()}))
    m = hot.match
    nxt = m.engine.pending(m.state)[0].seat
    assert nxt != seat and _shown(app, match_id, tokens[nxt]) == (round(wall[0] * 1000) + 60_000,) * 2
    assert _shown(app, match_id, tokens[seat]) == (0, 0)
