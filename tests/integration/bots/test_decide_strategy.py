"""The `decide` task's own strategy (celery_app.decide_strategy) hands the task the very
request Celery's default strategy would, and leaves unusual messages to Celery."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis
from celery.contrib.testing.worker import start_worker

from famiglia.config import Settings
from services.bots import handlers
from services.bots.bootstrap import BotsSettings, bootstrap
from services.bots.entrypoints.celery_app import DECIDE, DECISIONS_QUEUE, CeleryTasks, make_celery
from services.bots.payload import DecisionPayload

pytestmark = [pytest.mark.redis, pytest.mark.xdist_group("bots")]

TRACE = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}


def _requests_seen(redis_url: str, monkeypatch: pytest.MonkeyPatch, strategy: str | None,
                   messages: list[str]) -> list[dict[str, Any]]:
    """Run a worker with `strategy` (None: ours) over `messages`; the task's request of each."""
    celery = make_celery(bootstrap(settings=Settings(redis_url=redis_url, secret="test"), bots=BotsSettings()))
    task = celery.tasks[DECIDE]
    if strategy is not None:
        task.Strategy = strategy
    seen: list[dict[str, Any]] = []
    done = threading.Event()

    def play(*args: Any, **kwargs: Any) -> str:
        seen.append({key: value for key, value in vars(task.request).items() if not key.startswith("_")})
        if len(seen) == len(messages):
            done.set()
        return "submitted"

    monkeypatch.setattr(handlers, "play_bot_decision", play)
    client = redis.Redis.from_url(redis_url)
    client.delete(DECISIONS_QUEUE)
    client.lpush(DECISIONS_QUEUE, *messages)
    with start_worker(celery, pool="solo", perform_ping_check=False, shutdown_timeout=10) as worker:
        assert done.wait(20), seen
        handler = worker.consumer.strategies[DECIDE]  # the strategy in use
    assert handler.__qualname__.startswith("decide_strategy") == (strategy is None)
    return seen


def test_the_task_sees_the_request_celerys_default_strategy_gives(
        redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    celery = make_celery(bootstrap(settings=Settings(redis_url=redis_url, secret="test"), bots=BotsSettings()))
    tasks = CeleryTasks(celery)
    payload = DecisionPayload(b"\x08\x01view", (b"\x0a\x01a", b"\x0a\x01b"))
    args = ("m1", "highcard", 1, 17, "heuristic")
    messages = [tasks._messages.message(args, {"decision": payload.to_json()}, argsrepr=repr(args),
                                        kwargsrepr="{decision: 2 legal}", headers={"famiglia_trace": TRACE}),
                tasks._messages.message(args, {}, argsrepr=repr(args), kwargsrepr="{}", headers={})]
    ours = _requests_seen(redis_url, monkeypatch, None, messages)
    celerys = _requests_seen(redis_url, monkeypatch, "celery.worker.strategy:default", messages)
    assert len(ours) == 2 and ours == celerys
    assert ours[0]["headers"] == {"famiglia_trace": TRACE} and ours[0]["famiglia_trace"] == TRACE
    assert ours[0]["args"] == list(args) and ours[0]["kwargs"] == {"decision": payload.to_json()}
    assert ours[1]["headers"] is None


def test_a_decide_message_with_an_eta_takes_celerys_own_path_and_still_runs(
        redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    celery = make_celery(bootstrap(settings=Settings(redis_url=redis_url, secret="test"), bots=BotsSettings()))
    task = celery.tasks[DECIDE]
    seen: list[Any] = []
    done = threading.Event()

    def play(*args: Any, **kwargs: Any) -> str:
        seen.append((args[1:6], task.request.eta))
        done.set()
        return "submitted"

    monkeypatch.setattr(handlers, "play_bot_decision", play)
    redis.Redis.from_url(redis_url).delete(DECISIONS_QUEUE)
    with start_worker(celery, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        celery.send_task(DECIDE, args=("m2", "highcard", 0, 3, "random"), countdown=0.2, expires=60,
                         queue=DECISIONS_QUEUE)
        assert done.wait(20)
    assert seen[0][0] == ("m2", "highcard", 0, 3, "random") and seen[0][1] is not None
