"""The read models' queries against the migrated schema: each one a served request makes (or a
match finishing in the past of its scope) is an index seek in the order it wants, never a sort
or a scan of every match, which grow with the matches ever played.

Checked with SQLite's EXPLAIN QUERY PLAN on the statements the queries really send, on a
database without statistics (no ANALYZE: what a deployment's SQLite has)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from famiglia import readmodels
from famiglia.readmodels.queries import list_matches, match_summary
from famiglia.readmodels.tables import Match, MatchSeat
from services.projection import schema
from services.projection.divergence import diverged_matches, flagged
from services.projection.rating_book import RatingBook


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    engine = readmodels.make_engine(f"sqlite:///{tmp_path_factory.mktemp('plans') / 'read.db'}")
    schema.upgrade(engine)
    with readmodels.write_session(engine) as session:
        for i in range(8):
            session.add(Match(match_id=f"m{i}", game_id="grifters", status="finished" if i < 6 else "live", seats=4,
                              created_ms=1000 * i, finished_ms=1000 * i + 500 if i < 6 else None,
                              last_event_ms=1000 * i, version=9, seed=1, options={},
                              tournament_id="t1" if i % 2 else "", outcome={},
                              rematch_of=f"m{i - 1}" if i in (1, 7) else None))
            for seat in range(2):
                session.add(MatchSeat(match_id=f"m{i}", seat=seat, player_id="bot" if seat or i % 3 else "p",
                                      created_ms=1000 * i, details={}))
    yield engine
    engine.dispose()


@contextmanager
def plans_of_matches_queries(engine: Engine) -> Iterator[list[list[str]]]:
    """The query plans of every SELECT on `matches` (or on a player's seats) run inside the block."""
    sent: list[tuple[str, Any]] = []

    def note(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT") and re.search(r"\sFROM (matches|match_seats JOIN)\b", statement):
            sent.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", note)
    plans: list[list[str]] = []
    try:
        yield plans
    finally:
        event.remove(engine, "before_cursor_execute", note)
    with engine.connect() as conn:
        for statement, parameters in sent:
            rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
            plans.append([str(row[-1]) for row in rows])


def _listing(page_token: str = "", **filters: str) -> Callable[[Engine], None]:
    def run(engine: Engine) -> None:
        with readmodels.read_session(engine) as session:
            list_matches(session, page_size=2, page_token=page_token, **filters)
    return run


_FILTERS = [{}, {"game_id": "grifters"}, {"status": "live"}, {"tournament_id": "t1"},
            {"game_id": "grifters", "status": "finished"}]


def _token(engine: Engine, **filters: str) -> str:
    with readmodels.read_session(engine) as session:
        token = list_matches(session, page_size=1, **filters).next_page_token
    assert token
    return token


@pytest.mark.parametrize("filters", _FILTERS, ids=["all", "game", "status", "tournament", "game_status"])
@pytest.mark.parametrize("later", [False, True], ids=["first", "next"])
def test_a_page_of_matches_is_read_in_index_order(engine: Engine, filters: dict[str, str], later: bool) -> None:
    """A later page seeks to its token's created time too: checked row by row from the newest
    down (the OR of the keyset alone), page n read the n - 1 pages before it."""
    token = _token(engine, **filters) if later else ""
    with plans_of_matches_queries(engine) as plans:
        _listing(page_token=token, **filters)(engine)
    plan = plans[0]
    assert not any("TEMP B-TREE" in step for step in plan), plan  # a sort of every match the filter keeps
    seek = [step for step in plan if step.startswith("SEARCH matches USING")]
    if filters:  # a seek on every filter, not a walk past the matches it leaves out
        assert seek and all(f"{column}=?" in seek[0] for column in filters), plan
    if later:
        assert seek and "created_ms<?" in seek[0], plan


@pytest.mark.parametrize("filters", _FILTERS,
                         ids=["player", "player_game", "player_status", "player_tournament", "player_game_status"])
@pytest.mark.parametrize("later", [False, True], ids=["first", "next"])
def test_a_page_of_a_players_matches_is_read_in_index_order(engine: Engine, filters: dict[str, str],
                                                              later: bool) -> None:
    """ListMatches by player and GetPlayerHistory: the player's seats through
    `ix_match_seats_player` in page order, each joined to its match, never every match of the
    player found and sorted (a bot with 50,000 matches paid that for each page)."""
    token = _token(engine, player_id="bot") if later else ""
    with plans_of_matches_queries(engine) as plans:
        _listing(player_id="bot", page_token=token, **filters)(engine)
    plan = plans[0]
    assert not any("TEMP B-TREE" in step for step in plan), plan
    assert not any(step.startswith("SCAN") for step in plan), plan
    seek = [step for step in plan if step.startswith("SEARCH match_seats USING INDEX ix_match_seats_player")]
    assert seek and "(player_id=?" in seek[0], plan
    if later:
        assert "created_ms<?" in seek[0], plan


def test_the_diverged_matches_are_read_from_their_own_index(engine: Engine) -> None:
    """`... diverged` and a rebuild's look-up of them: the few flagged matches, not a walk of every one."""
    with plans_of_matches_queries(engine) as plans, engine.connect() as conn:
        flagged(conn)
        diverged_matches(engine)
    assert len(plans) == 2
    for plan in plans:
        assert not any(step.startswith("SCAN matches") and "ix_matches_diverged" not in step for step in plan), plan
        assert not any("TEMP B-TREE" in step for step in plan), plan


def test_a_match_rated_in_the_past_reads_only_the_matches_after_it(engine: Engine) -> None:
    """A rerate of a game reads the finished matches between the late one and the watermark,
    through the index, not every finished match of the game."""
    with plans_of_matches_queries(engine) as plans, readmodels.write_session(engine) as session:
        RatingBook()._rerate_from(session, "game:grifters", (2500, "m2"), (5500, "m5"))
    (plan,) = plans
    assert any(step.startswith("SEARCH matches USING INDEX") and "finished_ms>" in step for step in plan), plan


def test_the_rematches_of_the_matches_served_are_read_from_their_own_index(engine: Engine) -> None:
    """Each match summary served (a page of ListMatches or GetPlayerHistory, GetMatchSummary)
    names its rematch, the match whose `rematch_of` is its id: a seek among the rematches only
    (`ix_matches_rematch_of`, partial), not a walk of every match for each page."""
    with plans_of_matches_queries(engine) as plans:
        _listing()(engine)
        with readmodels.read_session(engine) as session:
            found = match_summary(session, "m6")
    assert found is not None and (found.rematch_of, found.rematch_id) == ("", "m7")
    looked = [plan for plan in plans if any("rematch_of" in step for step in plan)]
    assert len(looked) == 2, plans
    for plan in looked:
        assert all(step.startswith("SEARCH matches USING") and "INDEX ix_matches_rematch_of (rematch_of=?)" in step
                   for step in plan), plan
