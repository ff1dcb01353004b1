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
from famiglia.readmodels.queries import list_matches
from famiglia.readmodels.tables import Match
from services.projection import schema
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
                              tournament_id="t1" if i % 2 else "", outcome={}))
    yield engine
    engine.dispose()


@contextmanager
def plans_of_matches_queries(engine: Engine) -> Iterator[list[list[str]]]:
    """The query plans of every SELECT on `matches` run inside the block."""
    sent: list[tuple[str, Any]] = []

    def note(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT") and re.search(r"\sFROM matches\b", statement):
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


def _listing(**filters: str) -> Callable[[Engine], None]:
    def run(engine: Engine) -> None:
        with readmodels.read_session(engine) as session:
            list_matches(session, page_size=2, **filters)
    return run


@pytest.mark.parametrize("filters", [{}, {"game_id": "grifters"}, {"status": "live"}, {"tournament_id": "t1"},
                                     {"game_id": "grifters", "status": "finished"}],
                         ids=["all", "game", "status", "tournament", "game_status"])
def test_a_page_of_matches_is_read_in_index_order(engine: Engine, filters: dict[str, str]) -> None:
    with plans_of_matches_queries(engine) as plans:
        _listing(**filters)(engine)
    plan = plans[0]
    assert not any("TEMP B-TREE" in step for step in plan), plan  # a sort of every match the filter keeps
    if filters:  # a seek on every filter, not a walk past the matches it leaves out
        seek = [step for step in plan if step.startswith("SEARCH matches USING")]
        assert seek and all(f"{column}=?" in seek[0] for column in filters), plan


def test_a_match_rated_in_the_past_reads_only_the_matches_after_it(engine: Engine) -> None:
    """A rerate of a game reads the finished matches between the late one and the watermark,
    through the index, not every finished match of the game."""
    with plans_of_matches_queries(engine) as plans, readmodels.write_session(engine) as session:
        RatingBook()._rerate_from(session, "game:grifters", (2500, "m2"), (5500, "m5"))
    (plan,) = plans
    assert any(step.startswith("SEARCH matches USING INDEX") and "finished_ms>" in step for step in plan), plan
