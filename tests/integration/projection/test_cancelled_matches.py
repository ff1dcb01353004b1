"""Cancelled matches in the read models, on a real Redis and SQL (SQLite and PostgreSQL): the
command service cancels (GameService.CancelMatch), the projection records `cancelled` with the
reason, no seat results, no ratings and no tournament standings."""

from __future__ import annotations

from famiglia.config import Settings
from famiglia.readmodels import archived_envelopes, get_tournament, leaderboard, list_matches, match_summary
from famiglia.readmodels.db import read_session
from famiglia.readmodels.queries import player_history
from famiglia.v1 import envelope_pb2
from famiglia.v1 import query_service_pb2 as pb
from services.command.app import Viewer
from services.command.bootstrap import bootstrap as command_bootstrap
from services.projection.app import ProjectionApp
from services.projection.entrypoints.grpc_server import match_record

from .dice_race import GAME_ID
from .support import MatchSpec, drain, write_matches


def _drain(app: ProjectionApp) -> None:
    drain([app.runner("c0")])


def test_a_cancelled_match_is_recorded_cancelled_without_results_or_ratings(app: ProjectionApp) -> None:
    command = command_bootstrap(store=app.store, registry=app.registry, settings=Settings(secret="test"))
    info = [envelope_pb2.SeatInfo(seat=s, player_id=p, display_name=p.title(), bot=True, policy="random")
            for s, p in enumerate(["ann", "bob"])]
    # One the projection saw live before its cancel, one created and cancelled within a batch.
    seen_live = command.create_match(GAME_ID, 2, seed=41, seat_info=info, tournament_id="cup").match_id
    engine = app.registry.get(GAME_ID)
    hot = command.matches.get(seen_live).match
    seat = engine.pending(hot.state)[0].seat
    command.submit(seen_live, Viewer(seat), "c1", engine.legal_commands(hot.state, seat)[0])
    _drain(app)
    with read_session(app.sql) as session:
        assert match_summary(session, seen_live).status == "live"
    command.cancel_match(seen_live, "cli", "a player reported cheating")
    at_once = command.create_match(GAME_ID, 2, seed=42, seat_info=info, tournament_id="cup").match_id
    command.cancel_match(at_once, "tournaments", "stuck")
    finished = write_matches(app.store, app.registry, [MatchSpec("fin", ["cy", "dee"], seed=43)])[0]
    _drain(app)

    with read_session(app.sql) as session:
        for match_id, reason, operator in ((seen_live, "a player reported cheating", "cli"),
                                           (at_once, "stuck", "tournaments")):
            summary = match_summary(session, match_id)
            assert summary is not None and summary.status == "cancelled"
            assert summary.outcome == {"reason": reason, "cancelled_by": operator}
            events = archived_envelopes(session, match_id)
            assert events[-1].type == "match_cancelled" and summary.version == events[-1].seq
            assert summary.finished_ms == events[-1].timestamp.ToMilliseconds()
            assert summary.seed is not None  # over: nothing left for the seed to predict
            assert all(s.rank is None and s.score is None and not s.winner for s in summary.seats)
            record = match_record(summary)
            assert record.status == pb.MATCH_STATUS_CANCELLED and record.HasField("finished_at")
        assert {m.match_id for m in list_matches(session, status="cancelled").matches} == {seen_live, at_once}
        assert [m.match_id for m in list_matches(session, status="finished").matches] == [finished.match_id]
        # Rated: only the finished match's players; the cup counts no finished match.
        assert {e.player_id for e in leaderboard(session, GAME_ID)} == {"cy", "dee"}
        cup = get_tournament(session, "cup")
        assert cup is not None and cup.matches_finished == 0
        ann = player_history(session, "ann")
        assert {e.match.match_id for e in ann.entries} == {seen_live, at_once}
        assert all(e.rating_after is None for e in ann.entries) and not ann.ratings


def test_a_cancelled_match_leaves_redis_an_hour_after_its_cancel_as_a_finished_one_does(app: ProjectionApp) -> None:
    """Retention trims finished matches only: a cancelled match's stream would stay in Redis
    for good, though it is over and archived like one."""
    from services.projection.retention import RetentionSweep

    command = command_bootstrap(store=app.store, registry=app.registry, settings=Settings(secret="test"))
    match_id = command.create_match(GAME_ID, 2, seed=44).match_id
    command.cancel_match(match_id, "cli", "orphaned")
    _drain(app)
    with read_session(app.sql) as session:
        summary = match_summary(session, match_id)
        archived = archived_envelopes(session, match_id)
    assert summary is not None and summary.finished_ms is not None
    hour_ms = 3_600_000
    early = RetentionSweep(app.store, app.sql, hour_ms, clock=lambda: (summary.finished_ms + hour_ms - 1000) / 1000)
    assert early.sweep().trimmed == 0 and len(app.store.read(match_id)) == len(archived)
    late = RetentionSweep(app.store, app.sql, hour_ms, clock=lambda: (summary.finished_ms + hour_ms) / 1000)
    assert late.sweep().trimmed == 1
    assert app.store.read(match_id) == [] and app.store.version(match_id) == len(archived)
