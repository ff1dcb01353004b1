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

import base64
import binascii
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import redis
from celery import Celery, signals
from celery.app.task import Context
from celery.utils.imports import symbol_by_name
from celery.worker import strategy as celery_strategy
from celery.worker.request import create_request_cls
from celery.worker.state import task_reserved
from opentelemetry import context as otel_context

from famiglia.eventstore.consumer import exchange
from famiglia.redis_clients import connect as connect_redis
from famiglia.redis_clients import failover_of, plain_connection_class
from famiglia.telemetry import (
    FOLLOWS_KEY,
    carried_trace_id,
    extract_context,
    flush_spans,
    follows_from,
    get_logger,
    inject_context,
    spans_exported,
    tracer,
)
from famiglia.telemetry.metrics import shutdown_metrics

from .. import handlers
from ..bootstrap import BotsApp
from ..metrics import BotsMetrics
from ..payload import DecisionPayload, bot_command_id
from .broker import TRANSPORT

DECIDE = "famiglia.bots.decide"
CLOCK = "famiglia.bots.clock"
DECISIONS_QUEUE = "famiglia.bots"
CLOCKS_QUEUE = "famiglia.clocks"
MAX_EARLY_CLOCKS = 3
"""Times a clock task is sent again after the command service found its default not due yet."""
TRACE_HEADER = "famiglia_trace"

log = get_logger("famiglia.bots")


class _UuidPool:
    """Random version-4 UUIDs as text (what `str(uuid.uuid4())` gives: 122 random bits,
    lower-case hex), cut from `os.urandom` read 4 kB at a time.

    A decide message takes two (its task id and kombu's delivery tag), and each
    `uuid4()` is an os.urandom system call that lets go of the GIL (the command
    service's event ids come from a pool for the same reason, envelopes.py)."""

    _VARIANT = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}  # the 10xx variant bits

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.hex, self.at = "", 0

    def take(self) -> str:
        with self.lock:
            at = self.at
            if at + 32 > len(self.hex):
                self.hex, at = os.urandom(4096).hex(), 0
            self.at = at + 32
            h = self.hex[at:at + 32]
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{self._VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


_uuids = _UuidPool()


def _fresh_uuids() -> None:
    global _uuids
    _uuids = _UuidPool()  # a forked child must not hand out its parent's ids


os.register_at_fork(after_in_child=_fresh_uuids)


def new_uuid() -> str:
    """A random UUID4 text, as kombu's and Celery's ids are."""
    return _uuids.take()


def _quoted(text: str) -> str:
    """`json.dumps(text)`, without its call for plain printable ASCII (ids, reprs of ids)."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return json.dumps(text)


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
        # No remote control (nothing of famiglia's sends a control command): its pidbox queue
        # binding, one per worker process, stayed in Redis for good after a worker was killed.
        "worker_enable_remote_control": False,
        "enable_utc": True,
    }


def _carrier(request: Any) -> Mapping[str, str] | None:
    """The trace carrier of a task's request (its `famiglia_trace` header), if it has one."""
    carrier = getattr(request, TRACE_HEADER, None) or (getattr(request, "headers", None) or {}).get(TRACE_HEADER)
    return carrier if isinstance(carrier, Mapping) else None


@contextmanager
def _continued_trace(request: Any, name: str, **attributes: Any) -> Iterator[None]:
    """Continue the dispatcher's trace: a task span when spans are exported; otherwise
    only the dispatcher's context, which is all the logs and SubmitCommand's metadata
    carry on (a span nobody sees cost ~5% of a decision's CPU). A decision that follows a
    bot's own move starts a new trace linked to that move's (`follows_from`), so a match of
    bots is a trace per task, not one trace as deep as the match."""
    carrier = _carrier(request)
    if carrier and carrier.get(FOLLOWS_KEY):  # a bot answering a bot: a new trace, linked
        with follows_from(name, extract_context(carrier), **attributes):
            yield
        return
    token = otel_context.attach(extract_context(carrier or {}))
    try:
        if spans_exported():
            with tracer().start_as_current_span(name, attributes=attributes):
                yield
        else:
            yield
    finally:
        otel_context.detach(token)


CELERY_REQUEST_KEYS = frozenset({*Context.__dict__, "lang", "task", "argsrepr", "kwargsrepr", "compression"})
"""The request keys that are Celery's own: the rest of a message's headers are its custom
headers (`Context._get_custom_headers` drops these)."""


def decide_strategy(task: Any, app: Celery, consumer: Any, **options: Any) -> Callable[..., Any]:
    """Celery's default strategy for `decide` messages, with their usual case taken short.

    A protocol-2 message with no ETA, expiry or rate limit, when no task events are sent
    and received tasks are not logged (worker.py quiets that logger): its body, decoded
    once by kombu for the strategy, goes to the request already decoded (the tracer
    decoded it again), and the request carries its custom headers (the message's
    headers that are not Celery's), which the task's Context otherwise works out per
    task from a set of ~40 keys. Anything else takes Celery's own path unchanged."""
    general = celery_strategy.default(task, app, consumer, **options)
    eventer = consumer.event_dispatcher
    if (eventer and eventer.enabled and task.send_events) or celery_strategy.logger.isEnabledFor(logging.INFO):
        return general
    hostname, connection_errors = consumer.hostname, consumer.connection_errors
    request = create_request_cls(symbol_by_name(task.Request), task, consumer.pool, hostname, eventer, app=app)
    revoked, buckets, handle = consumer.controller.state.revoked, consumer.task_buckets, consumer.on_task_request
    utc, name, received = app.uses_utc_timezone(), task.name, signals.task_received

    def task_message_handler(message: Any, body: Any, ack: Any, reject: Any, callbacks: Any, **rest: Any) -> Any:
        headers = message.headers
        if (body is not None or not headers or headers.get("eta") or headers.get("expires")
                or buckets[name] is not None):
            return general(message, body, ack, reject, callbacks, **rest)
        payload = message.payload
        if type(payload) is not list:  # protocol 1 or hybrid: Celery converts those
            return general(message, body, ack, reject, callbacks, **rest)
        custom = {key: value for key, value in headers.items() if key not in CELERY_REQUEST_KEYS}
        req = request(message, on_ack=ack, on_reject=reject, app=app, hostname=hostname, eventer=eventer,
                      task=task, connection_errors=connection_errors, body=payload,
                      headers={**headers, "headers": custom or None}, decoded=True, utc=utc)
        if req.id in revoked and req.revoked():
            return None
        received.send(sender=consumer, request=req)
        task_reserved(req)
        if callbacks:
            for callback in callbacks:
                callback(req)
        handle(req)
        return None

    return task_message_handler


def _task_ids(request: Any) -> dict[str, Any]:
    """The match, seat and version a decide or clock task is about (its first arguments)."""
    args = list(getattr(request, "args", None) or ())
    ids: dict[str, Any] = {"match_id": args[0]} if args else {}
    if getattr(request, "task", "") == CLOCK or len(args) == 3:
        ids.update(zip(("seat", "version"), args[1:3], strict=False))
    elif len(args) >= 4:
        ids.update(seat=args[2], version=args[3])
    # Celery's retry and failure signals come after the task left its trace: the line names the
    # trace the task carried (the move that asked for it), so the operator can follow it there.
    trace_id = carried_trace_id(_carrier(request)) if request is not None else ""
    if trace_id:
        ids["trace_id"] = trace_id
    return ids


@signals.task_retry.connect(dispatch_uid="famiglia-bots-task-retry")
def _task_retried(sender: Any = None, request: Any = None, reason: Any = None, **_: Any) -> None:
    """A task that will be tried again (the command service or Redis away): at WARNING with its
    match, as celery's own retry line (INFO, a logger kept quiet) names none."""
    log.warning("bot_task_retry", task=getattr(sender, "name", ""), attempt=getattr(request, "retries", 0) + 1,
                reason=str(reason)[:300], **_task_ids(request))


@signals.task_failure.connect(dispatch_uid="famiglia-bots-task-failure")
def _task_failed(sender: Any = None, task_id: str = "", exception: BaseException | None = None, args: Any = None,
                 **_: Any) -> None:
    """A task given up (a bug, the retries spent): its match, seat and error, in the JSON lines."""
    request = getattr(sender, "request", None)
    ids = _task_ids(request) if request is not None and getattr(request, "args", None) else \
        _task_ids(type("Args", (), {"args": args, "task": getattr(sender, "name", "")})())
    log.error("bot_task_failed", task=getattr(sender, "name", ""), task_id=task_id, error=repr(exception)[:500], **ids)


@signals.worker_process_shutdown.connect(dispatch_uid="famiglia-bots-metrics-flush")
def _pool_process_leaving(**_: Any) -> None:
    """A prefork pool process leaves by `os._exit` (billiard), which runs no atexit hook: its
    spans still queued and its metrics' last interval are exported now, or lost
    (famiglia.telemetry.flush_spans, famiglia.telemetry.metrics)."""
    flush_spans()
    shutdown_metrics()


def make_celery(app: BotsApp) -> Celery:
    """The Celery app with its tasks bound to `app` (the worker's composition root)."""
    celery = Celery("famiglia.bots", set_as_current=False)
    celery.conf.update(celery_config(app))
    # The policy answers (its best so far) by 0.8 of the limit and is interrupted at 0.9
    # (the seat plays random): the seat still plays before prefork's hard limit strikes.
    think, interrupt = 0.8 * app.bots.task_time_limit, 0.9 * app.bots.task_time_limit
    # Redis away (a restart, a failover): redis-py's errors are not the built-in ConnectionError,
    # and a clock task that gave up would leave its seat waiting for good (nothing queues it again).
    retry = {"autoretry_for": (handlers.Transient, ConnectionError, redis.exceptions.ConnectionError,
                               redis.exceptions.TimeoutError), "retry_backoff": 0.5,
             "retry_backoff_max": 10, "retry_jitter": True, "max_retries": 12}

    # shared=False: Celery's default adds a task to every app finalized later in the process,
    # where its name would reach whichever app's closure registered first (another BotsApp).
    @celery.task(name=DECIDE, bind=True, acks_late=True, reject_on_worker_lost=True, shared=False,
                 Strategy=f"{__name__}:decide_strategy", **retry)
    def decide(self: Any, match_id: str, game_id: str, seat: int, version: int, policy: str,
               decision: dict[str, Any] | None = None, then: list[list[Any]] | None = None,
               lease: list[Any] | None = None) -> str:
        """`then`: the other bot seats asked at `version` (a simultaneous choice), each as
        [seat, policy, decision], played after this one (handlers.play_bot_decisions).
        `lease`: [most commands, [[seat, policy], ...] every bot seat]: play on through the
        bot seats' next turns."""
        with _continued_trace(self.request, "bots.decide", match_id=match_id, seat=seat, version=version):
            if not then and not lease:
                outcomes = [handlers.play_bot_decision(app, match_id, game_id, seat, version, policy,
                                                       DecisionPayload.from_json(decision), think_seconds=think,
                                                       interrupt_seconds=interrupt)]
                seats = [(seat, policy)]
            else:
                batch = [(seat, policy, DecisionPayload.from_json(decision))]
                batch += [(int(s), str(p), DecisionPayload.from_json(d)) for s, p, d in then or ()]
                outcomes = handlers.play_bot_decisions(
                    app, match_id, game_id, version, batch, think_seconds=think, interrupt_seconds=interrupt,
                    lease=None if not lease else (int(lease[0]), {int(s): str(p) for s, p in lease[1]}))
                seats = [(s, p) for s, p, _ in batch]
            # One line per move at INFO was a tenth of a random decision's CPU: the usual
            # outcome is at DEBUG, the unusual ones (stale, refused, duplicate...) at INFO.
            # Inside the task's trace, so the lines carry its trace id.
            for i, ((s, p), outcome) in enumerate(zip(seats, outcomes, strict=False)):
                # The first seat's command id is named for `version`; a later one's for the version
                # the one before it left (the line says which that was not: the first's is enough).
                extra = {"command_id": bot_command_id(match_id, version, s)} if i == 0 else {}
                (log.debug if outcome == "submitted" else log.info)(
                    "bot_decision", match_id=match_id, seat=s, version=version, policy=p, outcome=outcome, **extra)
            if len(outcomes) > len(seats):  # a lease played on: one line for its further turns
                (log.debug if outcomes[-1] == "submitted" else log.info)(
                    "bot_lease", match_id=match_id, version=version, moves=len(outcomes), outcome=outcomes[-1])
        return outcomes[0] if len(outcomes) == 1 else ",".join(outcomes)

    @celery.task(name=CLOCK, bind=True, acks_late=True, reject_on_worker_lost=True, shared=False, **retry)
    def clock(self: Any, match_id: str, seat: int, version: int, due: float = 0.0, early: int = 0) -> str:
        """`due`: the wall-clock time the clock runs out, for one sent ahead of it (`clock_hop`);
        `early`: how many times the command service found the default not due yet (`again`)."""
        with _continued_trace(self.request, "bots.clock", match_id=match_id, seat=seat, version=version):
            left = due - time.time()
            if due and left > 0:  # a hop of a long clock: on again, unless its match moved on
                if app.store.version(match_id) != version:
                    outcome = "stale"
                else:
                    # (`early` only when set: a hop reads as it always did)
                    celery.send_task(CLOCK, args=(match_id, seat, version, due) + ((early,) if early else ()),
                                     countdown=min(left, clock_hop(celery)), queue=CLOCKS_QUEUE,
                                     headers={TRACE_HEADER: dict(_carrier(self.request) or inject_context())})
                    outcome = "rearmed"
                log.debug("turn_clock", match_id=match_id, seat=seat, version=version, outcome=outcome)
                return outcome

            def again(wait: float) -> None:
                """The command service refused the default as early: on again when it says the
                seat's deadline is (plus the grace), a few times at most; then the dispatcher
                queues the clock again once it is overdue (`_check_clocks`): no loop between a
                fast worker and the service, no default lost."""
                if early >= MAX_EARLY_CLOCKS:
                    log.warning("turn_clock_early_dropped", match_id=match_id, seat=seat, version=version,
                                early=early)
                    return
                wait += app.bots.clock_grace_seconds
                celery.send_task(CLOCK, args=(match_id, seat, version, time.time() + wait, early + 1),
                                 countdown=min(wait, clock_hop(celery)), queue=CLOCKS_QUEUE,
                                 headers={TRACE_HEADER: dict(_carrier(self.request) or inject_context())})

            outcome = handlers.run_clock(app, match_id, seat, version, again)
            # The id the seat's default goes in under: the command service's line for it names the same.
            log.info("turn_clock", match_id=match_id, seat=seat, version=version, outcome=outcome,
                     command_id=handlers.clock_command_id(match_id, version, seat))
        return outcome

    return celery


class DecisionMessages:
    """`decide` task messages as Celery's send_task would write them to the broker
    (protocol 2 headers, kombu's Redis envelope, base64 body), built from a template.

    The dispatcher sends one per bot decision (one for all the seats of a simultaneous
    choice), and send_task's general path (routing, option merging, a producer from the
    pool, kombu's publish and envelope) cost more of its CPU than folding the match and
    building the decision. The headers
    come from Celery's own `as_task_v2`, so its fields stay Celery's; a test holds
    the whole message equal to send_task's but for ids."""

    EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}

    def __init__(self, celery: Celery, queue: str = DECISIONS_QUEUE, name: str = DECIDE) -> None:
        self.queue = queue
        self.reply_to = celery.thread_oid
        template = celery.amqp.as_task_v2("", name, (), {}, reply_to=self.reply_to, ignore_result=True,
                                          argsrepr="", kwargsrepr="")
        self.headers: dict[str, Any] = dict(template.headers)
        self._pieces = self._template()
        self._embed = json.dumps(self.EMBED)

    def message(self, args: tuple[Any, ...], kwargs: Mapping[str, Any], *, argsrepr: str, kwargsrepr: str,
                headers: Mapping[str, Any]) -> str:
        """The JSON text kombu's Redis transport would LPUSH for this task."""
        body = json.dumps([list(args), kwargs, self.EMBED]).encode()
        return self.render(body, new_uuid(), new_uuid(), argsrepr=argsrepr, kwargsrepr=kwargsrepr,
                           headers=headers)

    def decide(self, match_id: str, game_id: str, seat: int, version: int, policy: str,
               payload: DecisionPayload | None, extra: str,
               then: Sequence[tuple[int, str, DecisionPayload]] = (),
               lease: tuple[int, Sequence[tuple[int, str]]] | None = None) -> str:
        """A `decide` message (`message` of the dispatcher's arguments), its body written out
        rather than dumped: the legal commands' base64 is plain text, so only the names
        need quoting. `extra` is `headers_text` of its headers (the same for a match's
        every task). `then`: the other seats of a simultaneous choice, as (seat, policy,
        payload), in the `then` keyword argument (their payload needed); `lease`, (most
        commands, every bot seat's (seat, policy)), in `lease` (with a payload). A test holds
        it equal to `message`'s text."""
        names = (_quoted(match_id), _quoted(game_id), _quoted(policy))
        if payload is None:
            decision, kwargsrepr = "{}", "{}"
        else:
            decision = '{"decision": ' + _payload_text(payload)
            kwargsrepr = f"{{decision: {len(payload.legal)} legal"
            if then:
                decision += ', "then": [' + ", ".join(
                    f"[{int(s)}, {_quoted(p)}, {_payload_text(d)}]" for s, p, d in then) + "]"
                kwargsrepr += f", then: {len(then)} seats"
            if lease is not None:
                decision += f', "lease": [{int(lease[0])}, [' + ", ".join(
                    f"[{int(s)}, {_quoted(p)}]" for s, p in lease[1]) + "]]"
                kwargsrepr += f", lease: {int(lease[0])}"
            decision += "}"
            kwargsrepr += "}"
        body = f"[[{names[0]}, {names[1]}, {int(seat)}, {int(version)}, {names[2]}], {decision}, {self._embed}]"
        argsrepr = repr((match_id, game_id, seat, version, policy))
        return self._render(body.encode(), new_uuid(), f'"{new_uuid()}"', _quoted(argsrepr), _quoted(kwargsrepr),
                            extra)

    def headers_text(self, headers: Mapping[str, Any]) -> str | None:
        """The text the caller's extra headers add to the envelope; None when one replaces
        one of the template's (`render` then dumps the whole envelope)."""
        if headers and not headers.keys().isdisjoint(self.headers):
            return None
        return ", " + json.dumps(headers)[1:-1] if headers else ""

    def render(self, body: bytes, task_id: str, delivery_tag: str, *, argsrepr: str, kwargsrepr: str,
               headers: Mapping[str, Any]) -> str:
        """The message's text: the envelope's fixed text (dumped once, in `_pieces`) around
        this task's values — the same characters `render_dumped` writes (a test holds them
        equal), without walking the ~30-key envelope each time. Headers that replace one
        of the template's take the general path (their place in the order differs)."""
        extra = self.headers_text(headers)
        if extra is None:
            return self.render_dumped(body, task_id, delivery_tag, argsrepr=argsrepr, kwargsrepr=kwargsrepr,
                                      headers=headers)
        return self._render(body, task_id, json.dumps(delivery_tag), json.dumps(argsrepr), json.dumps(kwargsrepr),
                            extra)

    def _render(self, body: bytes, task_id: str, tag: str, argsrepr: str, kwargsrepr: str, extra: str) -> str:
        """The template's pieces around this task's values (`tag`, `argsrepr` and `kwargsrepr`
        already JSON text)."""
        quoted_id = f'"{task_id}"'
        values = {"body": f'"{binascii.b2a_base64(body, newline=False).decode("ascii")}"', "id": quoted_id,
                  "argsrepr": argsrepr, "kwargsrepr": kwargsrepr, "tag": tag, "extra": extra}
        pieces = self._pieces.copy()
        pieces[1::2] = [values[slot] for slot in pieces[1::2]]
        return "".join(pieces)

    def render_dumped(self, body: bytes, task_id: str, delivery_tag: str, *, argsrepr: str, kwargsrepr: str,
                      headers: Mapping[str, Any]) -> str:
        """The message's text by one `json.dumps` of the whole envelope."""
        return json.dumps({
            "body": base64.b64encode(body).decode("ascii"),
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": {**self.headers, "id": task_id, "root_id": task_id, "argsrepr": argsrepr,
                        "kwargsrepr": kwargsrepr, **headers},
            "properties": {
                "correlation_id": task_id,
                "reply_to": self.reply_to,
                "argsrepr": argsrepr,
                "kwargsrepr": kwargsrepr,
                "delivery_mode": 2,
                "delivery_info": {"exchange": "", "routing_key": self.queue},
                "priority": 0,
                "body_encoding": "base64",
                "delivery_tag": delivery_tag,
            },
        })

    def _template(self) -> list[str]:
        """`render_dumped`'s text with a marker in each task's slot, split into [fixed text,
        slot name, fixed text, ...]; the caller's extra headers go after the template's."""
        def slot(name: str) -> str:
            return f"\x00{name}\x00"

        text = self.render_dumped(b"", slot("id"), slot("tag"), argsrepr=slot("argsrepr"),
                                  kwargsrepr=slot("kwargsrepr"), headers={slot("extra"): 0})
        marker = json.dumps(slot("extra"))
        text = text.replace(f", {marker}: 0", marker, 1)
        body = json.dumps("")  # an empty body's base64 is empty
        text = text.replace(f'"body": {body}', f'"body": {json.dumps(slot("body"))}', 1)
        pieces = re.split(r'"\\u0000(\w+)\\u0000"', text)
        assert len(pieces) == 2 * 10 + 1 and pieces[1] == "body", pieces
        return pieces


def _payload_text(payload: DecisionPayload) -> str:
    """`json.dumps(payload.to_json())`: base64 is plain text, nothing to escape."""
    as_json = payload.to_json()
    legal = '"' + '", "'.join(as_json["legal"]) + '"' if payload.legal else ""
    return '{"view": "' + as_json["view"] + '", "legal": [' + legal + "]}"


def _bulk(value: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(value), value)


@dataclass(frozen=True)
class HeldTasks:
    """A batch's `decide` messages, not sent yet: `commands` is their one LPUSH, packed, for
    a read to send before its acks (PartitionConsumer.read's `before_ack`)."""

    messages: tuple[str, ...]
    commands: tuple[bytes, ...]


_TARGET = ("host", "port", "path", "db", "username", "password")
"""The connection settings that say which Redis server and database a client talks to."""


def clock_hop(celery: Celery) -> float:
    """The longest a clock message may wait for its time: half the broker's visibility timeout.

    A message taken by a worker and not acknowledged within the visibility timeout is given
    back to the queue (kombu's Redis transport), and a clock waits for its time in a worker,
    unacknowledged: a 24-hour clock (`timeouts` up to 86,400 s) came back every 300 s, each
    copy held in a worker until the deadline, all firing then. A longer clock travels in hops
    (`due`): each fires within this, and sends the next."""
    options = celery.conf.broker_transport_options or {}
    return max(1.0, float(options.get("visibility_timeout", 3600.0)) / 2)


class CeleryTasks:
    """The dispatcher's task sender over Celery (see dispatcher.TaskSender).

    `decide` messages are written straight to the decisions queue (DecisionMessages),
    a batch's in one LPUSH — or, held (`batch(hold=True)`, `take_batch`), in the same
    round trip as the dispatcher's acks and next read; clock tasks, rare, go through
    send_task."""

    def __init__(self, celery: Celery, metrics: BotsMetrics | None = None) -> None:
        self.celery = celery
        self.metrics = metrics
        """Counts the decide tasks queued, by policy (None: metrics off)."""
        self._local = threading.local()
        self._messages = DecisionMessages(celery)
        self._redis: redis.Redis | None = None
        self._own: Any = None  # a broker connection kept for pushes (see _push)
        self._own_pid = 0
        self._own_lock = threading.Lock()
        self._lpush = b"$5\r\nLPUSH\r\n" + _bulk(self._messages.queue.encode())
        self._extras: dict[tuple[tuple[str, str], ...], str] = {}
        """A trace carrier's items -> its header text in a message (a match's tasks share one)."""

    def _broker(self) -> redis.Redis:
        """The pushes' own client, following a failover as the broker's channels do (broker.py):
        a demoted node's READONLY is a lost connection, the push made again on a new one."""
        if self._redis is None:
            self._redis = connect_redis(self.celery.conf.broker_url, as_connection_error=True)
        return self._redis

    def shares_server(self, client: Any) -> bool:
        """Whether `client` (a redis.Redis) talks to the broker's Redis server and database,
        so held batches can travel on its connections; False for any other client."""
        pool = getattr(client, "connection_pool", None)
        if pool is None:
            return False
        mine = self._broker().connection_pool
        return (type(pool) is type(mine)
                and plain_connection_class(pool.connection_class) is plain_connection_class(mine.connection_class)
                and all(pool.connection_kwargs.get(k) == mine.connection_kwargs.get(k) for k in _TARGET))

    @contextmanager
    def batch(self, *, hold: bool = False) -> Iterator[None]:
        """Send the block's tasks together: the decisions in one LPUSH, the clocks through one
        producer. Nothing is sent if the block raises; a failed send raises here. With `hold`
        the decisions are kept for `take_batch` instead (the clocks are sent)."""
        if getattr(self._local, "decisions", None) is not None:
            yield
            return
        decisions: list[str] = []
        clocks: list[Callable[[Any], None]] = []
        self._local.decisions, self._local.clocks = decisions, clocks
        try:
            yield
        finally:
            self._local.decisions = self._local.clocks = None
        if hold:
            held = getattr(self._local, "held", None)
            self._local.held = decisions if held is None else held + decisions
        else:
            self._push(decisions)
        if clocks:
            with self.celery.producer_or_acquire() as producer, producer.batch():
                for send in clocks:
                    send(producer)

    def take_batch(self) -> HeldTasks | None:
        """The decisions held since the last call (None if none): the caller sends them,
        as `commands` before its acks, or through `push_held`."""
        held = getattr(self._local, "held", None)
        self._local.held = None
        if not held:
            return None
        return HeldTasks(tuple(held), (self._packed(held),))

    def push_held(self, held: HeldTasks) -> None:
        """Send held decisions on their own (a round trip that carried them failed: they may
        be queued twice then, which tasks allow)."""
        self._push(list(held.messages))

    def _packed(self, decisions: Sequence[str]) -> bytes:
        """One LPUSH of `decisions`, packed as redis-py packs it."""
        return b"*%d\r\n%s%s" % (2 + len(decisions), self._lpush,
                                 b"".join([_bulk(m.encode()) for m in decisions]))

    def _push(self, decisions: list[str]) -> None:
        """One LPUSH of the whole batch (Redis pushes its values in order, as one LPUSH
        each would, and all or none), on a connection kept for it.

        Through a client pipeline each batch paid a pool checkout, the pipeline's
        bookkeeping and a reply callback per message: more CPU than the round trip.
        A broken kept connection is dropped and the push redone through the client,
        with its retries (a push whose reply was lost may then queue its tasks twice,
        as the client's own retry would: tasks are idempotent)."""
        if not decisions:
            return
        if self._own_lock.acquire(blocking=False):
            try:
                self._push_own(decisions)
                return
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
                pass  # the kept connection broke: once more through the client, which retries
            finally:
                self._own_lock.release()
        self._broker().lpush(self._messages.queue, *decisions)

    def _push_own(self, decisions: list[str]) -> None:
        """The LPUSH packed here and sent on the kept connection's socket, its reply read
        from its hiredis reader (consumer.exchange), without redis-py's layers."""
        if self._own is None or self._own_pid != os.getpid():
            self._own, self._own_pid = self._broker().connection_pool.get_connection(), os.getpid()
        conn = self._own
        try:
            exchange(conn, self._packed(decisions), 1)
        except BaseException as exc:
            self._own = None
            failover = failover_of(self._broker())
            refused = failover.refused(conn, exc) if failover is not None else exc  # read past redis-py
            conn.disconnect()
            self._broker().connection_pool.release(conn)
            if refused is not exc:
                raise refused from exc
            raise

    def _extra(self, trace: Mapping[str, str] | None) -> str:
        """The trace header's text in a message, dumped once per carrier."""
        carrier = trace or inject_context()
        key = tuple(carrier.items())
        extra = self._extras.get(key)
        if extra is None:
            if len(self._extras) >= 4096:
                self._extras.clear()
            extra = self._extras[key] = self._messages.headers_text({TRACE_HEADER: dict(carrier)}) or ""
        return extra

    def _headers(self, trace: Mapping[str, str] | None) -> dict[str, Any]:
        return {TRACE_HEADER: dict(trace or inject_context())}

    def decide(self, match_id: str, game_id: str, seat: int, version: int, policy: str,
               trace: Mapping[str, str] | None = None, payload: DecisionPayload | None = None,
               then: Sequence[tuple[int, str, DecisionPayload]] = (),
               lease: tuple[int, Sequence[tuple[int, str]]] | None = None) -> None:
        message = self._messages.decide(match_id, game_id, seat, version, policy, payload, self._extra(trace),
                                        then, lease)
        if self.metrics is not None:
            self.metrics.task_queued(policy)
        decisions = getattr(self._local, "decisions", None)
        if decisions is None:
            self._push([message])
        else:
            decisions.append(message)

    def clock(self, match_id: str, seat: int, version: int, countdown: float,
              trace: Mapping[str, str] | None = None) -> None:
        hop = clock_hop(self.celery)
        args: tuple[Any, ...] = (match_id, seat, version)
        if countdown > hop:  # sent ahead of its time, in hops (`clock_hop`)
            args, countdown = (match_id, seat, version, time.time() + countdown), hop

        def send(producer: Any) -> None:
            self.celery.send_task(CLOCK, args=args, countdown=countdown, queue=CLOCKS_QUEUE,
                                  headers=self._headers(trace), producer=producer)

        clocks = getattr(self._local, "clocks", None)
        if clocks is None:
            with self.celery.producer_or_acquire() as producer:
                send(producer)
        else:
            clocks.append(send)
