"""Each Celery app that make_celery builds runs its own tasks, bound to its own BotsApp.

Celery's `app.task` is shared by default: the decorated function is also added to every
app finalized later in the process, and the name then reaches the first one registered.
Two apps in one process (tests, tools, a dispatcher beside a worker) would run the
first app's closures."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from celery.exceptions import DuplicateTaskNameWarning

from famiglia.config import Settings
from famiglia.eventstore.memory_store import InMemoryEventStore
from services.bots import handlers
from services.bots.bootstrap import BotsApp, BotsSettings, bootstrap
from services.bots.entrypoints.celery_app import CLOCK, DECIDE, make_celery


def _bots_app() -> BotsApp:
    return bootstrap(settings=Settings(redis_url="redis://127.0.0.1:1/0", secret="test"),
                     store=InMemoryEventStore(), bots=BotsSettings())


def test_each_app_runs_its_own_tasks_bound_to_its_own_bots_app(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, BotsApp]] = []

    def run_clock(app: BotsApp, match_id: str, seat: int, version: int) -> str:
        seen.append((match_id, app))
        return "played"

    def play_bot_decision(app: BotsApp, match_id: str, *args: Any, **kwargs: Any) -> str:
        seen.append((match_id, app))
        return "submitted"

    monkeypatch.setattr(handlers, "run_clock", run_clock)
    monkeypatch.setattr(handlers, "play_bot_decision", play_bot_decision)
    first, second = _bots_app(), _bots_app()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        apps = [(make_celery(first), first), (make_celery(second), second)]
        for celery, bots in apps:
            assert celery.tasks[CLOCK](f"clock-{id(bots)}", 1, 5) == "played"
            assert celery.tasks[DECIDE](f"decide-{id(bots)}", "highcard", 0, 5, "random") == "submitted"
    assert [(match_id, app is first) for match_id, app in seen] == [
        (f"clock-{id(first)}", True), (f"decide-{id(first)}", True),
        (f"clock-{id(second)}", False), (f"decide-{id(second)}", False)]
    assert not [w for w in caught if issubclass(w.category, DuplicateTaskNameWarning)]

