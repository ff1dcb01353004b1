"""A read-model engine's errors name the statement, never its parameters: the projection logs
them (`projection_*` lines, `log.exception`), and the parameters are archived events' bytes,
private events too, and players' names."""

from __future__ import annotations

import pytest
from sqlalchemy import Column, MetaData, String, Table, insert
from sqlalchemy.exc import IntegrityError

from famiglia.readmodels.db import make_engine


def test_a_failed_statement_does_not_quote_its_parameters() -> None:
    engine = make_engine("sqlite://")
    table = Table("archived_events", MetaData(), Column("id", String, primary_key=True), Column("reason", String))
    table.metadata.create_all(engine)
    row = {"id": "e1", "reason": "I39 cannot be played: secret-bid"}
    with engine.begin() as db:
        db.execute(insert(table), row)
    with pytest.raises(IntegrityError) as failed, engine.begin() as db:
        db.execute(insert(table), row)
    assert "secret-bid" not in str(failed.value) and "I39" not in str(failed.value)
    assert "INSERT INTO archived_events" in str(failed.value)  # the statement is still named
