"""The Celery app of the bots service and its tasks.

Built by `make_celery(app)` — never at import — with Redis as the broker. Tasks
are acked late and rejected (so requeued) when their worker dies, and an unacked
task comes back after the broker's visibility timeout, so a worker killed mid-task
loses nothing. Every task is idempotent (handlers.py), so a redelivered, retried
or duplicated task is harmless. No task returns a result anyone waits for, so
there is no result backend.

The trace context travels in the `famiglia_trace` message header.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from celery import Celery
from opentelemetry import context as otel_context

from famiglia.telemetry import extract_context, get_logger, inject_context, spans_exported, tracer

from .. import handlers
from ..bootstrap import BotsApp
from ..payload import DecisionPayload
from .broker import TRANSPORT

DECIDE = "famiglia.bots.decide"
CLOCK = "famiglia.bots.clock"
DECISIONS_QUEUE = "famiglia.bots"
CLOCKS_QUEUE = "famiglia.clocks"
TRACE_HEADER = "famiglia_trace"

log = get_logger("famiglia.bots")


def celery_config(app: BotsApp) -> dict[str, Any]:
    return {
        "broker_url": app.settings.redis_url,
        "broker_transport": TRANSPORT,  # kombu's Redis transport, one client per channel (broker.py)
        "broker_transport_options": {"visibility_timeout": app.bots.visibility_timeout},
        "broker_connection_retry_on_startup": True,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_ignore_result": True,
        "task_serializer": "json",
        "accept_content": ["json"],
        "task_default_queue": DECISIONS_QUEUE,
        "task_routes": {CLOCK: {"queue": CLOCKS_QUEUE}},
        "task_time_limit": app.bots.task_time_limit,
        "worker_hijack_root_logger": False,
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        "enable_utc": True,
    }


@contextmanager
def _continued_trace(request: Any, name: str, **attributes: Any) -> Iterator[None]:
    """Continue the dispatcher's trace: a task span when spans are exported; otherwise
    only the dispatcher's context, which is all the logs and SubmitCommand's metadata
    carry on (a span nobody sees cost ~5% of a decision's CPU)."""
    carrier = getattr(request, TRACE_HEADER, None) or (getattr(request, "headers", None) or {}).get(TRACE_HEADER)
    token = otel_context.attach(extract_context(carrier or {}))
    try:
        if spans_exported():
            with tracer().start_as_current_span(name, attributes=attributes):
                yield
        else:
            yield
    finally:
        otel_context.detach(token)


def make_celery(app: BotsApp) -> Celery:
    """The Celery app with its tasks bound to `app` (the worker's composition root)."""
    celery = Celery("famiglia.bots", set_as_current=False)
    celery.conf.update(celery_config(app))
    think = 0.9 * app.bots.task_time_limit  # the seat still plays before any hard limit strikes
    retry = {"autoretry_for": (handlers.Transient, ConnectionError), "retry_backoff": 0.5,
             "retry_backoff_max": 10, "retry_jitter": True, "max_retries": 12}

    @celery.task(name=DECIDE, bind=True, acks_late=True, reject_on_worker_lost=True, **retry)
    def decide(self: Any, match_id: str, game_id: str, seat: int, version: int, policy: str,
               decision: dict[str, Any] | None = None) -> str:
        with _continued_trace(self.request, "bots.decide", match_id=match_id, seat=seat, version=version):
            outcome = handlers.play_bot_decision(app, match_id, game_id, seat, version, policy,
                                                 DecisionPayload.from_json(decision), think_seconds=think)
        log.info("bot_decision", match_id=match_id, seat=seat, version=version, policy=policy, outcome=outcome)
        return outcome

    @celery.task(name=CLOCK, bind=True, acks_late=True, reject_on_worker_lost=True, **retry)
    def clock(self: Any, match_id: str, seat: int, version: int) -> str:
        with _continued_trace(self.request, "bots.clock", match_id=match_id, seat=seat, version=version):
            outcome = handlers.run_clock(app, match_id, seat, version)
        log.info("turn_clock", match_id=match_id, seat=seat, version=version, outcome=outcome)
        return outcome

    return celery


class CeleryTasks:
    """The dispatcher's task sender over Celery (see dispatcher.TaskSender)."""

    def __init__(self, celery: Celery) -> None:
        self.celery = celery
        self._local = threading.local()

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Send the block's tasks together: one producer and one Redis pipeline (kombu's
        publish batch) for a whole dispatcher batch instead of one round trip per task.
        Nothing is sent if the block raises; a failed flush raises here."""
        if getattr(self._local, "producer", None) is not None:
            yield
            return
        with self.celery.producer_or_acquire() as producer, producer.batch():
            self._local.producer = producer
            try:
                yield
            finally:
                self._local.producer = None

    def _headers(self, trace: Mapping[str, str] | None) -> dict[str, Any]:
        return {TRACE_HEADER: dict(trace or inject_context())}

    def decide(self, match_id: str, game_id: str, seat: int, version: int, policy: str,
               trace: Mapping[str, str] | None = None, payload: DecisionPayload | None = None) -> None:
        args = (match_id, game_id, seat, version, policy)
        kwargs = {"decision": payload.to_json()} if payload is not None else {}
        # argsrepr/kwargsrepr given: Celery would otherwise walk the payload with its
        # safe repr for every message (a quarter of send_task's CPU), only for monitors.
        # declare=[]: the queue need not be declared per message (the default exchange
        # routes by name; the workers declare their queues when they start).
        self.celery.send_task(DECIDE, args=args, kwargs=kwargs, queue=DECISIONS_QUEUE,
                              headers=self._headers(trace), ignore_result=True, argsrepr=repr(args),
                              kwargsrepr=f"{{decision: {len(payload.legal)} legal}}" if payload else "{}",
                              declare=[], producer=getattr(self._local, "producer", None))

    def clock(self, match_id: str, seat: int, version: int, countdown: float,
              trace: Mapping[str, str] | None = None) -> None:
        self.celery.send_task(CLOCK, args=(match_id, seat, version), countdown=countdown, queue=CLOCKS_QUEUE,
                              headers=self._headers(trace), producer=getattr(self._local, "producer", None))
