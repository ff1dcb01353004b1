"""Seats whose players left them to the bots (`seat_left`, `seat_returned`) in the read models,
on a real Redis and SQL (SQLite and PostgreSQL): each seat records why it is away and since
when (a seat taken back is its player's again), the query service shows it, and a seat away at
the end is rated last (leavers tied), whatever the bot made of it; the game's ranks stand. A
match that lands in the past re-rates those after it the same way, and a rebuild agrees."""

from __future__ import annotations

import pytest
from sqlmodel import col, select

from famiglia.config import Settings
from famiglia.matchstate import MatchState
from famiglia.ratings import MatchOutcome, Placement, ranks_with_leavers, rate_in_order
from famiglia.readmodels import leaderboard, match_summary
from famiglia.readmodels.db import read_session
from famiglia.readmodels.queries import player_history
from famiglia.readmodels.tables import RatingHistory
from famiglia.v1.envelope_pb2 import SeatLeft, SeatReturned
from services.projection.app import ProjectionApp
from services.projection.entrypoints.grpc_server import match_record

from .support import Clock, MatchSpec, Played, drain, dump, write_matches

LONG = {"target": "40"}
"""A race long enough for every seat change to go in before its end."""


def _specs(prefix: str) -> list[MatchSpec]:
    return [
        # bob leaves for good; cy's clock takes the seat off cy, who takes it back.
        MatchSpec(f"{prefix}-a", ["ann", "bob", "cy"], seed=5, options=LONG, people=frozenset({0, 1, 2}),
                  seat_changes={1: [SeatLeft(seat=1, policy="heuristic", reason="left")],
                                2: [SeatLeft(seat=2, policy="random", reason="timeouts")],
                                3: [SeatReturned(seat=2)]}),
        # ann away by her clock at the end, dee gone for good: both last, tied.
        MatchSpec(f"{prefix}-b", ["ann", "bob", "cy", "dee"], seed=6, options=LONG, people=frozenset(range(4)),
                  seat_changes={1: [SeatLeft(seat=0, policy="random", reason="timeouts")],
                                2: [SeatLeft(seat=3, policy="random", reason="left")]}),
    ]


AWAY = {"a": {1: "left"}, "b": {0: "timeouts", 3: "left"}}


def _left_at(played: Played, seat: int) -> int:
    return [e.seq for e in played.envelopes if e.type == "seat_left" and e.seat == seat][-1]


def _rated(played: Played, away: dict[int, str]) -> MatchOutcome:
    seats = sorted(played.result.seats, key=lambda s: s.seat)
    ranks = ranks_with_leavers([(s.rank, s.seat in away) for s in seats])
    return MatchOutcome(played.match_id, played.finished_ms,
                        tuple(Placement(played.players[s.seat], r) for s, r in zip(seats, ranks, strict=True)))


def test_seats_left_are_recorded_rated_last_and_rebuilt_the_same(app: ProjectionApp) -> None:
    played = write_matches(app.store, app.registry, _specs("late"), clock=Clock(1_700_000_500_000))
    drain([app.runner("c0")])
    # One more, finished earlier than those: it lands in the past, and they are rated again after it.
    played += write_matches(app.store, app.registry, _specs("early"), clock=Clock(1_700_000_000_000))
    drain([app.runner("c0")])

    with read_session(app.sql) as session:
        for p in played:
            away = AWAY[p.match_id[-1]]
            summary = match_summary(session, p.match_id)
            assert summary is not None and summary.status == "finished"
            assert summary.version == len(p.envelopes)
            for seat in summary.seats:
                reason = away.get(seat.seat, "")
                assert (seat.away, seat.away_since) == (reason, _left_at(p, seat.seat) if reason else None)
            # The game's result stands: the seats' ranks are the game's.
            assert [s.rank for s in summary.seats] == [s.rank for s in sorted(p.result.seats, key=lambda s: s.seat)]
            record = match_record(summary)
            for seat in record.seats:
                assert seat.away == away.get(seat.seat, "")
                assert seat.HasField("away_since_version") == (seat.seat in away)
            rated = {h.player_id: h.rank for h in session.exec(select(RatingHistory).where(
                RatingHistory.scope == "game:dice_race", col(RatingHistory.match_id) == p.match_id)).all()}
            expected = {pl.player_id: pl.rank for pl in _rated(p, away).placements}
            assert rated == expected
            stayed = [p.players[s] for s in range(p.seats) if s not in away]
            left = [p.players[s] for s in away]
            assert all(rated[who] > max(rated[s] for s in stayed) for who in left)
            assert len({rated[who] for who in left}) == 1  # leavers tie among themselves
        board = {e.player_id: (e.mu, e.sigma) for e in leaderboard(session, "dice_race")}
        ratings = rate_in_order([_rated(p, AWAY[p.match_id[-1]]) for p in played])
        assert board == {pid: (r.mu, r.sigma) for pid, r in ratings.items()}
        bob = player_history(session, "bob")
        shown = {e.match.match_id: e.match.seats[e.seat].away for e in bob.entries}
        assert shown == {"late-a": "left", "late-b": "", "early-a": "left", "early-b": ""}

    incremental = dump(app.sql)
    report = app.rebuild()
    assert report.left_deferred == 0 and report.matches_finished == len(played)
    assert dump(app.sql) == incremental


def test_a_running_match_shows_who_the_bots_play_for_now(app: ProjectionApp) -> None:
    """A seat away while the match runs says so; taken back, it is its player's again."""
    played = write_matches(app.store, app.registry, _specs("live")[:1])[0]
    returned = next(e.seq for e in played.envelopes if e.type == "seat_returned")
    runner = app.runner("partial")
    runner.start()
    entries = []
    while batch := runner.consumer.read(count=100):
        entries.extend(batch)

    def seats_after(seq: int) -> list[tuple[str, int | None]]:
        runner.projector.project([e for e in entries if e.envelope.seq <= seq])
        with read_session(app.sql) as session:
            summary = match_summary(session, played.match_id)
            assert summary is not None and summary.status == "live" and summary.version == seq
            return [(s.away, s.away_since) for s in summary.seats]

    bob, cy = _left_at(played, 1), _left_at(played, 2)
    assert seats_after(returned - 1) == [("", None), ("left", bob), ("timeouts", cy)]
    assert seats_after(returned) == [("", None), ("left", bob), ("", None)]


def test_a_seat_left_in_a_history_the_store_lost_is_its_players_again(app: ProjectionApp) -> None:
    """A live match projected again from a store that went back (`Projector._went_back`): the
    `seat_left` the archive held is of the lost history, so the seat is its player's again."""
    from .support import _batches
    from .test_store_went_back import _restore, _snapshot

    left = _specs("back")[0]
    left.seat_changes = {2: [SeatLeft(seat=2, policy="random", reason="timeouts")]}
    stayed = _specs("back")[0]
    stayed.seat_changes = {}
    engine = app.registry.get(left.game_id)
    first = [b for b in _batches(engine, left, Clock(1_700_000_500_000)) if b[0] != "done"][:6]
    again = [b for b in _batches(engine, stayed, Clock(1_700_100_000_000)) if b[0] != "done"][:6]
    assert [b[0] for b in first[3:5]] == [f"{left.match_id}-s2.0", f"{left.match_id}-c2"]

    def append(batches: list, version: int) -> int:
        for command_id, envelopes in batches:
            app.store.append(left.match_id, version, envelopes, command_id=command_id)
            version += len(envelopes)
        return version

    version = append(first[:3], 0)
    before_the_loss = _snapshot(app.store)
    append(first[3:], version)
    drain([app.runner("c0")])
    with read_session(app.sql) as session:
        summary = match_summary(session, left.match_id)
        assert summary is not None and summary.seats[2].away == "timeouts"
    _restore(app.store, before_the_loss)
    append(again[3:], version)
    drain([app.runner("c0")])
    with read_session(app.sql) as session:
        summary = match_summary(session, left.match_id)
        assert summary is not None and summary.status == "live"
        assert summary.version == app.store.version(left.match_id)
        assert [(s.away, s.away_since) for s in summary.seats] == [("", None)] * 3


def test_random_matches_with_seat_changes_project_as_a_rebuild_does(app: ProjectionApp) -> None:
    """Matches of the real games played through the command service's use cases on the
    projection's Redis, with seats changing hands at random points (LeaveMatch, a clock run out
    too often, ReturnToMatch) and a match cancelled mid-way, projected as they are appended:
    each seat's `away` is the fold's at the end, and a rebuild gives the same tables."""
    from services.command.bootstrap import bootstrap as command_bootstrap
    from tests.profile import examples
    from tests.support.seat_changes import play_with_seat_changes, seat_change_problems

    games = [g for g in ("grifters", "goodcritters", "nostra_city", "nothing_personal") if g in app.registry]
    if not games:
        pytest.skip("needs a registered real game")
    app.migrate()
    commands = command_bootstrap(store=app.store, registry=app.registry, settings=Settings(secret="test"))
    runner = app.runner("c0")
    people = ["ann", "bob", "cy", "dee", "eve"]
    played = []
    for i in range(examples(quick=2, soak=6 * len(games))):
        game_id = games[i % len(games)]
        seats = app.registry.get(game_id).info.min_players
        played.append(play_with_seat_changes(commands, game_id, seats, seed=70 + i, most=60 if i == 1 else 2000,
                                             players=[people[(i + s) % len(people)] for s in range(seats)]))
        if i == 1:
            commands.cancel_match(played[-1].match_id, "ops", "stopped mid-way")
        runner.run_once(block_ms=0)  # some projected while others are still to come
    drain([runner])
    assert any(e.type in ("seat_left", "seat_returned") for p in played for e in app.store.read(p.match_id))
    with read_session(app.sql) as session:
        for p in played:
            envelopes = app.store.read(p.match_id)
            assert seat_change_problems(app.registry, envelopes) == []
            folded = MatchState.from_envelopes(app.registry, envelopes)
            summary = match_summary(session, p.match_id)
            assert summary is not None and summary.version == len(envelopes)
            assert summary.status == ("cancelled" if folded.cancelled else "finished"), summary.status
            assert [(s.away, s.away_since) for s in summary.seats] == [
                (folded.away[s][0].reason, folded.away[s][1]) if s in folded.away else ("", None)
                for s in range(folded.seats)]
    incremental = dump(app.sql)
    app.rebuild()
    assert dump(app.sql) == incremental
