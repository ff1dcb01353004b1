"""Fixtures of the bots' worker tests."""

from __future__ import annotations

import pytest

from services.bots import handlers


@pytest.fixture(autouse=True)
def _fresh_process() -> None:
    """Each test a fresh worker process: no match versions, and no decision's tries (tries.py),
    remembered from another test."""
    handlers._REACHED.clear()
    handlers._LOCAL_TRIES.clear()


@pytest.fixture(params=[True, False], ids=["one-call", "a-call-each"])
def chained(request: pytest.FixtureRequest) -> bool:
    """With the seats sent in one SubmitCommands call, or against a command service without it."""
    return request.param
