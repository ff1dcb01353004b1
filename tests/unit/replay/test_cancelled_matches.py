"""A match an operator cancelled (GameService.CancelMatch), as replay reads it: the
`match_cancelled` event is the server's and no game's, so folds pass over it; the match is over
(full views, exports), verification re-runs the commands before it, and an import accepts it
only as the last event."""

from __future__ import annotations

import pytest

from famiglia.config import Settings
from famiglia.eventstore.envelopes import MATCH_CANCELLED, match_cancelled_envelope
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.replay.access import Scope
from famiglia.replay.admission import Refused, stored_envelopes
from famiglia.replay.export import build_export
from famiglia.replay.sources import MemorySource
from famiglia.replay.timeline import MatchTimeline
from famiglia.replay.verify import verify_envelopes, verify_export
from famiglia.v1.envelope_pb2 import EventEnvelope, MatchCancelled
from services.replay.bootstrap import ReplaySettings, bootstrap

from .games import copy, game_ids, recorded, registry

SETTINGS = Settings(secret="replay-unit-secret")


def _cancelled(game_id: str) -> list[EventEnvelope]:
    """A recorded match cut after half its commands, then cancelled as the command service does."""
    envelopes = copy(recorded(game_id))
    commands = [e.seq for e in envelopes if e.command]
    cut = copy(envelopes[:commands[len(commands) // 2] - 1])
    created = cut[0]
    cancel = match_cancelled_envelope(created.match_id, len(cut), created.game_id,
                                      MatchCancelled(reason="stuck", operator="cli"), command_id="cancel:r1")
    return [*cut, cancel]


@pytest.mark.parametrize("game_id", game_ids())
def test_folds_pass_over_the_cancel_and_the_match_is_over(game_id: str) -> None:
    envelopes = _cancelled(game_id)
    timeline = MatchTimeline(registry(), envelopes, every=4)
    assert timeline.cancelled and timeline.finished
    assert timeline.engine.result(timeline.head) is None  # over, with no result
    assert timeline.state_at(len(envelopes)) == timeline.state_at(len(envelopes) - 1)
    states = list(timeline.states(1))
    assert states[-1][1] == states[-2][1] and states[-1][0].type == MATCH_CANCELLED


@pytest.mark.parametrize("game_id", game_ids())
def test_the_commands_before_a_cancel_verify_and_the_export_imports(game_id: str) -> None:
    envelopes = _cancelled(game_id)
    report = verify_envelopes(registry(), envelopes)
    assert report.ok, report.describe()
    assert report.events_checked == len(envelopes)
    assert report.commands_checked == sum(1 for e in envelopes if e.command)
    export = build_export(registry(), envelopes)
    assert verify_export(registry(), export).ok
    stored = stored_envelopes(registry(), export, "imported")
    assert stored[-1].type == MATCH_CANCELLED and len(stored) == len(envelopes)


def test_a_cancel_that_is_not_the_last_event_is_refused_by_verify_and_import() -> None:
    game_id = game_ids()[0]
    envelopes = _cancelled(game_id)
    after = copy(recorded(game_id))[len(envelopes) - 1]  # the event the cancel took the place of
    after.seq = len(envelopes) + 1
    tampered = [*envelopes, after]
    report = verify_envelopes(registry(), tampered)
    assert not report.ok and report.divergence.reason == "format" and report.divergence.seq == len(envelopes)
    with pytest.raises(Refused) as exc:
        stored_envelopes(registry(), build_export(registry(), tampered), "imported")
    assert exc.value.code == "bad_export" and "match_cancelled" in exc.value.message


@pytest.mark.parametrize("game_id", game_ids())
def test_a_cancel_after_the_matchs_result_does_not_verify(game_id: str) -> None:
    """CancelMatch refuses a match over (`match_over`), so a file whose cancel follows the
    result was made by hand: verification says so (the projector lets the result stand)."""
    envelopes = copy(recorded(game_id))
    finished = MatchTimeline(registry(), envelopes)
    assert finished.engine.result(finished.head) is not None
    created = envelopes[0]
    cancel = match_cancelled_envelope(created.match_id, len(envelopes), created.game_id,
                                      MatchCancelled(reason="late", operator="cli"), command_id="cancel:r2")
    report = verify_export(registry(), build_export(registry(), [*envelopes, cancel]))
    assert not report.ok and report.divergence.seq == len(envelopes) + 1
    assert "follows the match's end" in report.divergence.detail


def test_the_replay_service_shows_a_cancelled_match_whole_and_its_end() -> None:
    game_id = game_ids()[0]
    envelopes = _cancelled(game_id)
    store = InMemoryEventStore()
    store.append(envelopes[0].match_id, 0, envelopes)
    app = bootstrap(store=store, cold=MemorySource(), registry=registry(), settings=SETTINGS,
                    replay_settings=ReplaySettings())
    match_id, last = envelopes[0].match_id, envelopes[-1]
    page = app.list_events(match_id, None, page_size=len(envelopes))
    assert page.timeline.finished
    assert page.events[-1].type == MATCH_CANCELLED and page.events[-1].envelope.seq == last.seq
    steps = list(app.replay(None, match_id=match_id, full=True))
    assert steps[-1].envelope.type == MATCH_CANCELLED and steps[-1].event is None
    assert steps[-1].event_text == "match cancelled by cli: stuck"
    answer = app.state_at(last.event_id, None, full=True)
    assert answer.access.scope is Scope.FULL and answer.finished  # every seat's view, as for any end
    assert answer.to_act == [] and not answer.game_over
    assert app.export(match_id).events[-1].type == MATCH_CANCELLED
    assert app.verify_match(match_id).ok
