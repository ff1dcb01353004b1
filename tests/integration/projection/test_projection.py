"""The projection end to end on a real Redis and SQL (SQLite and PostgreSQL): results, ratings,
archive, tournaments, exactly-once under crashes and redelivery, rebuild equality."""

from __future__ import annotations

import threading
import time

import pytest
from sqlmodel import select

from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.ratings import rate_in_order
from famiglia.readmodels import (
    archived_envelopes,
    leaderboard,
    list_matches,
    match_summary,
    record_tournament,
    tournament_standings,
)
from famiglia.readmodels.db import read_session, write_session
from famiglia.readmodels.tables import Match, Player
from services.projection.app import ProjectionApp

from .support import MatchSpec, Played, dump, real_engines, write_matches

PLAYERS = ["ann", "bob", "cy", "dee", "eve"]


def specs(n: int, *, tournament_every: int = 2, prefix: str = "m") -> list[MatchSpec]:
    out = []
    for i in range(n):
        seats = 2 + i % 3
        players = [PLAYERS[(i + k) % len(PLAYERS)] for k in range(seats)]
        out.append(MatchSpec(match_id=f"{prefix}{i:03d}", players=players, seed=1000 + i,
                             tournament_id="cup" if i % tournament_every == 0 else ""))
    return out


def expected_ratings(played: list[Played], scope: str = "game") -> dict[str, tuple[float, float]]:
    outcomes = [p.outcome() for p in played if scope == "game" or p.tournament_id == scope]
    return {pid: (r.mu, r.sigma) for pid, r in rate_in_order(outcomes).items()}


def drain_app(app: ProjectionApp, consumers: int = 1) -> None:
    from .support import drain

    drain([app.runner(f"c{i}") for i in range(consumers)])


def assert_projected(app: ProjectionApp, played: list[Played]) -> None:
    with read_session(app.sql) as session:
        for p in played:
            summary = match_summary(session, p.match_id)
            assert summary is not None, p.match_id
            assert summary.status == "finished"
            assert summary.version == len(p.envelopes)
            assert summary.finished_ms == p.finished_ms
            for seat in p.result.seats:
                row = summary.seats[seat.seat]
                assert (row.score, row.rank, row.winner) == (seat.score, seat.rank, seat.rank == 1)
                assert row.details == dict(seat.details)
                assert row.player_id == p.players[seat.seat]
            stored = archived_envelopes(session, p.match_id)
            assert [e.SerializeToString(deterministic=True) for e in stored] == \
                   [e.SerializeToString(deterministic=True) for e in p.envelopes]
        by_game: dict[str, list[Played]] = {}
        for p in played:
            by_game.setdefault(p.game_id, []).append(p)
        for game_id, group in by_game.items():
            board = {e.player_id: (e.mu, e.sigma) for e in leaderboard(session, game_id)}
            assert board == expected_ratings(group)


def test_projects_results_ratings_archive_and_players(app: ProjectionApp) -> None:
    played = write_matches(app.store, app.registry, specs(6))
    drain_app(app)
    assert_projected(app, played)
    with read_session(app.sql) as session:
        ann = session.get(Player, "ann")
        assert ann is not None and ann.display_name == "Ann" and ann.bot and ann.policy == "random"
        assert len(list_matches(session, status="finished").matches) == 6
        assert {m.match_id for m in list_matches(session, player_id="ann").matches} == \
            {p.match_id for p in played if "ann" in p.players}


def test_tournament_standings_sum_the_tournament_matches(app: ProjectionApp) -> None:
    played = write_matches(app.store, app.registry, specs(6))
    with write_session(app.sql) as session:
        record_tournament(session, "cup", name="The Cup", games=["dice_race"], config={"rounds": 3})
    drain_app(app)
    cup = [p for p in played if p.tournament_id == "cup"]
    with read_session(app.sql) as session:
        standings = tournament_standings(session, "cup")
        from famiglia.readmodels import get_tournament

        info = get_tournament(session, "cup")
    assert info is not None and info.name == "The Cup" and info.matches_finished == len(cup)
    assert info.config == {"rounds": 3}
    expected_played: dict[str, int] = {}
    for p in cup:
        for player in set(p.players):
            expected_played[player] = expected_played.get(player, 0) + 1
    assert {s.player_id: s.played for s in standings} == expected_played
    ratings = expected_ratings(played, "cup")
    assert {s.player_id: (s.mu, s.sigma) for s in standings} == ratings
    assert [s.rank for s in standings] == list(range(1, len(standings) + 1))
    assert standings == sorted(standings, key=lambda s: -s.ordinal)


def test_tournaments_rank_and_rate_each_game_on_its_own(app: ProjectionApp) -> None:
    from famiglia.readmodels import tournament_scope

    from .dice_race import DUEL_ID

    games = [MatchSpec(match_id=f"g{i:02d}", players=[PLAYERS[(i + k) % 5] for k in range(2 + i % 2)], seed=70 + i,
                       game_id=DUEL_ID if i % 2 else "dice_race", tournament_id="open") for i in range(8)]
    played = write_matches(app.store, app.registry, games)
    drain_app(app)
    with read_session(app.sql) as session:
        standings = tournament_standings(session, "open")
        duel_only = tournament_standings(session, "open", DUEL_ID)
        duel_board = {e.player_id: (e.mu, e.sigma) for e in leaderboard(session, DUEL_ID)}
    assert {s.game_id for s in standings} == {"dice_race", DUEL_ID}
    for game_id in ("dice_race", DUEL_ID):
        rows = [s for s in standings if s.game_id == game_id]
        assert [s.rank for s in rows] == list(range(1, len(rows) + 1))
        expected = expected_ratings([p for p in played if p.game_id == game_id])
        assert {s.player_id: (s.mu, s.sigma) for s in rows} == expected
    assert duel_only == [s for s in standings if s.game_id == DUEL_ID]
    assert duel_board == expected_ratings([p for p in played if p.game_id == DUEL_ID])
    assert tournament_scope("open", DUEL_ID) == "tournament:open:dice_duel"


def test_a_crashed_consumers_entries_are_claimed_and_nothing_counts_twice(app: ProjectionApp) -> None:
    played = write_matches(app.store, app.registry, specs(5))
    # Consumer "dead" reads a batch and dies before committing (never acks).
    dead = PartitionConsumer.for_store(app.store, app.settings.runner.group, "dead")
    dead.ensure_groups("0")
    lost = dead.read(count=5)
    assert lost
    # Consumer "half" commits its batch but dies before acking: a redelivery will follow.
    half = app.runner("half")
    half.start()
    half_entries = half.consumer.read(count=5)
    half.projector.project(half_entries)
    # The survivor takes both over (idle 0 for the test) and finishes the work.
    survivor = app.runner("survivor")
    survivor.config = survivor.config.__class__(**{**survivor.config.__dict__, "claim_idle_ms": 0})
    drain_app_with(survivor)
    assert survivor.consumer.pending_count() == 0
    assert_projected(app, played)
    # The dead consumers hold nothing any more: they are forgotten once idle long enough.
    survivor.config = survivor.config.__class__(**{**survivor.config.__dict__, "forget_idle_ms": 0})
    assert set(survivor.forget_dead_consumers()) == {"dead", "half"}
    with read_session(app.sql) as session:
        from famiglia.readmodels.tables import RatingScope

        scope = session.get(RatingScope, "game:dice_race")
        assert scope is not None and scope.matches == len(played)


def drain_app_with(runner) -> None:  # type: ignore[no-untyped-def]
    from .support import drain

    drain([runner])


def test_redelivered_events_change_nothing(app: ProjectionApp) -> None:
    write_matches(app.store, app.registry, specs(4))
    runner = app.runner("once")
    entries = []
    runner.start()
    while batch := runner.consumer.read(count=50):
        entries.extend(batch)
    first = runner.projector.project(entries)
    assert len(first.applied) == len(entries) and not first.deferred
    before = dump(app.sql)
    again = app.runner("again").projector.project(list(reversed(entries)))
    assert not again.applied and len(again.skipped) == len(entries)
    assert dump(app.sql) == before


def test_two_consumers_sharing_partitions_project_everything_once(app: ProjectionApp) -> None:
    played = write_matches(app.store, app.registry, specs(8))
    runners = [app.runner("left"), app.runner("right")]
    stop = threading.Event()
    errors: list[BaseException] = []

    def work(runner) -> None:  # type: ignore[no-untyped-def]
        try:
            while not stop.is_set():
                runner.run_once(block_ms=20)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(r,)) for r in runners]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with read_session(app.sql) as session:
            done = len(session.exec(select(Match).where(Match.status == "finished")).all())
        if done == len(played) and all(not r.deferred for r in runners):
            break
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join()
    assert not errors
    assert sum(r.projected for r in runners) == sum(len(p.envelopes) for p in played)
    assert_projected(app, played)


def test_racing_projectors_on_the_same_entries_apply_each_event_once(app: ProjectionApp) -> None:
    """Split brain: a slow consumer's entries were claimed while it still worked on them."""
    played = write_matches(app.store, app.registry, specs(6))
    reader = app.runner("reader")
    reader.start()
    entries = []
    while batch := reader.consumer.read(count=100):
        entries.extend(batch)
    projectors = [app.runner(f"racer{i}").projector for i in range(3)]
    barrier = threading.Barrier(len(projectors))
    outcomes: list = []
    errors: list[BaseException] = []

    def race(projector) -> None:  # type: ignore[no-untyped-def]
        try:
            barrier.wait()
            for start in range(0, len(entries), 10):
                outcomes.append(projector.project(entries[start:start + 10]))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=race, args=(p,)) for p in projectors]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sum(len(o.applied) for o in outcomes) == len(entries)
    assert_projected(app, played)


def test_rebuild_gives_the_same_tables_as_incremental(app: ProjectionApp) -> None:
    write_matches(app.store, app.registry, specs(7))
    with write_session(app.sql) as session:
        record_tournament(session, "cup", name="The Cup", status="finished", now_ms=1)
    drain_app(app, consumers=2)
    incremental = dump(app.sql)
    report = app.rebuild()
    assert report.left_deferred == 0 and report.matches_finished == 7
    assert dump(app.sql) == incremental


def test_late_finishers_are_rated_in_canonical_order(app: ProjectionApp) -> None:
    played = write_matches(app.store, app.registry, specs(6, tournament_every=100))
    # Project the matches newest-first, one match per batch: every one lands "in the past".
    entries = []
    runner = app.runner("reverse")
    runner.start()
    while batch := runner.consumer.read(count=100):
        entries.extend(batch)
    for p in reversed(played):
        runner.projector.project([e for e in entries if e.envelope.match_id == p.match_id])
    assert_projected(app, played)
    expected = dump(app.sql)
    app.rebuild()
    assert dump(app.sql) == expected


def test_unknown_games_are_archived_and_listed_without_results(app: ProjectionApp) -> None:
    from famiglia.engine.registry import Registry

    write_matches(app.store, app.registry, specs(2))
    app.registry = Registry({})
    app.projector.registry = app.registry
    runner = app.runner("blind")
    runner.projector.registry = app.registry
    drain_app_with(runner)
    with read_session(app.sql) as session:
        rows = session.exec(select(Match)).all()
        assert {m.status for m in rows} == {"live"}
        assert all("unknown game" in m.fold_error for m in rows)
        assert all(archived_envelopes(session, m.match_id) for m in rows)


@pytest.mark.parametrize("game_id", sorted(real_engines()) or ["<none registered>"])
def test_real_games_project_to_their_results(app: ProjectionApp, game_id: str) -> None:
    if game_id not in app.registry:
        pytest.skip("no real game engine is registered yet")
    engine = app.registry.get(game_id)
    seats = engine.info.min_players
    spec = MatchSpec(match_id=f"real-{game_id}", players=PLAYERS[:seats], seed=7, game_id=game_id)
    played = write_matches(app.store, app.registry, [spec])
    drain_app(app)
    assert_projected(app, played)


# Seeds of random play with ties at several rank positions and a Nostra City match nobody won.
TIED_MATCHES = [
    ("goodcritters", ["ann", "bob", "cy", "dee"], 27),   # ranks 4, 2, 2, 1
    ("grifters", ["ann", "bob", "cy"], 178),              # 1, 2, 2
    ("grifters", ["ann", "ann", "bob", "cy"], 238),       # 1, 4, 2, 2: ann in two seats
    ("nostra_city", ["ann", "bob", "cy"], 3),             # no winner: 3, 3, 3
    ("nostra_city", ["ann", "bob", "cy", "dee", "eve"], 158),  # a shared win: 3, 1, 5, 1, 4
    ("nothing_personal", ["ann", "bob", "cy"], 0),
]


@pytest.mark.parametrize("step_ms", [1000, 0])
def test_rebuild_equals_live_for_every_game_with_ties_no_winner_and_a_rename(app: ProjectionApp,
                                                                             step_ms: int) -> None:
    """Every real game, ties at the top, in the middle and at the bottom, a Nostra City match
    without a winner, a player in two seats and renamed between matches — with every event in
    one millisecond too (step 0: creation, finish and rating order all fall to the match id).
    Two consumers project live; a rebuild from the archive gives the same tables, and the bots'
    own standings rate the tournament as the read model does."""
    from famiglia.bots.standings import MatchRecord, SeatRecord, standings

    from .support import Clock

    if any(game not in app.registry for game, _players, _seed in TIED_MATCHES):
        pytest.skip("the four real games are not all registered")
    specs_ = [MatchSpec(match_id=f"x{i:02d}", players=players, seed=seed, game_id=game, tournament_id="cup",
                        names=[f"{p.title()} {i}" for p in players])
              for i, (game, players, seed) in enumerate(TIED_MATCHES)]
    played = write_matches(app.store, app.registry, specs_, clock=Clock(step_ms=step_ms))
    ranks = {p.match_id: [s.rank for s in p.result.seats] for p in played}
    assert ranks["x03"] == [3, 3, 3] and played[3].result.no_winner
    assert ranks["x00"] == [4, 2, 2, 1] and ranks["x04"] == [3, 1, 5, 1, 4]
    drain_app(app, consumers=2)
    assert_projected(app, played)
    live = dump(app.sql)
    with read_session(app.sql) as session:
        nobody = match_summary(session, "x03")
        table = tournament_standings(session, "cup")
    assert nobody is not None and nobody.outcome.get("no_winner") == "true"
    assert not any(s.winner for s in nobody.seats)
    report = app.rebuild()
    assert report.matches_finished == len(played) and report.left_deferred == 0
    assert dump(app.sql) == live
    bots = standings(MatchRecord(p.match_id, p.game_id, tuple(SeatRecord(s.seat, p.players[s.seat], s.rank, s.score)
                                                                for s in p.result.seats), 0, p.finished_ms)
                     for p in played)
    assert {(s.game_id, s.entrant): (s.mu, s.sigma) for s in bots} == \
        {(s.game_id, s.player_id): (s.mu, s.sigma) for s in table}
