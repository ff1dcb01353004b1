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

    def run_clock(app: BotsApp, match_id: str, seat: int, version: int, again: Any = None) -> str:
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



def test_a_clock_tasks_line_names_the_command_id_its_default_goes_in_under(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command service's `command_accepted` line for a seat's default names its command id:
    the worker's `turn_clock` line names it too, so the two hops' lines meet on it."""
    import structlog

    monkeypatch.setattr(handlers, "run_clock", lambda app, match_id, seat, version, again=None: "submitted")
    with structlog.testing.capture_logs() as captured:
        assert make_celery(_bots_app()).tasks[CLOCK]("m7", 1, 5) == "submitted"
    (line,) = [c for c in captured if c["event"] == "turn_clock"]
    assert (line["match_id"], line["seat"], line["command_id"]) == ("m7", 1, handlers.clock_command_id("m7", 5, 1))


def test_a_task_retried_or_given_up_leaves_a_line_naming_its_match_and_seat() -> None:
    """Celery's own retry and failure lines are plain text that names no match (and its retry
    line is at a level the worker keeps quiet): these say which match waits, and why."""
    from types import SimpleNamespace

    import structlog

    from services.bots.entrypoints import celery_app

    decide = SimpleNamespace(name=celery_app.DECIDE, request=None)
    clock = SimpleNamespace(name=celery_app.CLOCK, request=None)
    with structlog.testing.capture_logs() as captured:
        celery_app._task_retried(sender=decide, reason="UNAVAILABLE: command service away",
                                 request=SimpleNamespace(args=["m1", "grifters", 2, 17, "random"], retries=0,
                                                         task=celery_app.DECIDE))
        celery_app._task_failed(sender=clock, task_id="t-9", exception=ValueError("boom"), args=["m2", 1, 9])
    retry, failed = captured
    assert (retry["event"], retry["match_id"], retry["seat"], retry["version"], retry["attempt"]) == \
        ("bot_task_retry", "m1", 2, 17, 1)
    assert (failed["event"], failed["match_id"], failed["seat"], failed["version"], failed["log_level"]) == \
        ("bot_task_failed", "m2", 1, 9, "error")


def test_a_task_retried_or_given_up_names_the_trace_it_carried() -> None:
    """The retry and failure lines are written by Celery's signals, after the task left its
    trace: they name the trace the task carried (its `famiglia_trace` header), or an operator
    cannot get from the failure to the move that asked for it."""
    from types import SimpleNamespace

    import structlog

    from services.bots.entrypoints import celery_app

    carried = "0af7651916cd43dd8448eb211c80319c"
    header = {celery_app.TRACE_HEADER: {"traceparent": f"00-{carried}-b7ad6b7169203331-01"}}
    request = SimpleNamespace(args=["m1", "grifters", 2, 17, "random"], retries=0, task=celery_app.DECIDE, **header)
    in_headers = SimpleNamespace(args=["m2", 1, 9], task=celery_app.CLOCK, headers=header)
    with structlog.testing.capture_logs() as captured:
        celery_app._task_retried(sender=SimpleNamespace(name=celery_app.DECIDE), reason="UNAVAILABLE",
                                 request=request)
        celery_app._task_failed(sender=SimpleNamespace(name=celery_app.CLOCK, request=in_headers), task_id="t-9",
                                exception=ValueError("boom"), args=["m2", 1, 9])
        celery_app._task_failed(sender=SimpleNamespace(name=celery_app.CLOCK, request=None), task_id="t-10",
                                exception=ValueError("boom"), args=["m3", 1, 9])
    retry, failed, bare = captured
    assert (retry["match_id"], retry["trace_id"]) == ("m1", carried)
    assert (failed["match_id"], failed["trace_id"]) == ("m2", carried)
    assert bare["match_id"] == "m3" and "trace_id" not in bare


def test_a_clock_the_command_service_found_early_is_sent_again_a_few_times_at_most(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`clock_not_run_out` (`run_clock` calls `again` with the seconds the command service says
    are left): the task goes again for then, plus the grace, carrying how often it was early;
    past MAX_EARLY_CLOCKS it is dropped, and the dispatcher queues the overdue clock again, so a
    worker whose clock runs fast does not loop with the service."""
    from services.bots.entrypoints.celery_app import MAX_EARLY_CLOCKS

    def early(app: BotsApp, match_id: str, seat: int, version: int, again: Any = None) -> str:
        again(5.0)
        return "early"

    monkeypatch.setattr(handlers, "run_clock", early)
    bots = _bots_app()
    celery = make_celery(bots)
    sent: list[tuple[Any, ...]] = []
    monkeypatch.setattr(celery, "send_task", lambda name, args, countdown, **kwargs: sent.append(
        (name, args, countdown)))
    assert celery.tasks[CLOCK]("m7", 1, 5) == "early"
    ((name, (match_id, seat, version, due, times), countdown),) = sent
    assert (name, match_id, seat, version, times) == (CLOCK, "m7", 1, 5, 1)
    assert countdown == 5.0 + bots.bots.clock_grace_seconds and due > 0
    sent.clear()
    assert celery.tasks[CLOCK]("m7", 1, 5, 0.0, MAX_EARLY_CLOCKS) == "early"
    assert sent == []
