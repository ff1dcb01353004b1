"""What a task does: play one bot decision, or fire one turn clock. Plain functions
over the BotsApp; Celery only calls them (entrypoints/celery_app.py).

Both are idempotent. They act only if the match is still at the version the
task was queued for, submit with that `expected_version` and a deterministic
command id, so a retried, duplicated or late task changes nothing: the server
answers a repeated command id with the first answer and refuses a stale version.
"""

from __future__ import annotations

import os
import signal
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.protobuf.message import Message

from famiglia.bots import Decision, make_policy
from famiglia.bots.random_policy import RandomPolicy
from famiglia.engine import Engine, pending_for
from famiglia.engine.rng import derive_seed
from famiglia.matchstate import MatchState
from famiglia.telemetry import child_span, get_logger

from .bootstrap import BotsApp
from .payload import LEGAL_LIMIT, DecisionPayload

log = get_logger("famiglia.bots")

# Statuses a retry may cure: the command service restarting, a deadline, contention.
TRANSIENT_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                             grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INTERNAL,
                             grpc.StatusCode.UNKNOWN, grpc.StatusCode.CANCELLED})


class Transient(Exception):
    """Worth a retry (Celery's autoretry_for)."""


def bot_command_id(match_id: str, version: int, seat: int) -> str:
    return f"bot:{match_id}:{version}:{seat}"


def clock_command_id(match_id: str, version: int, seat: int) -> str:
    return f"clock:{match_id}:{version}:{seat}"


def _unpack(message_type: type[Message], packed: any_pb2.Any) -> Message:
    return message_type.FromString(packed.value)


def _rpc(call, *args, **kwargs):
    try:
        return call(*args, **kwargs)
    except grpc.RpcError as exc:
        if exc.code() in TRANSIENT_CODES:
            raise Transient(f"{exc.code().name}: {exc.details()}") from None
        raise


class PolicyTimeout(Exception):
    """A policy thought past its task's time limit."""


class _PolicyAlarm:
    """The process's SIGALRM handler, installed once: `signal.signal` (and the enum
    conversion of what it returns) twice per decision was 1-2 % of a worker's CPU.

    It raises only while a policy's limit is armed; any other alarm goes to the
    handler that was there before."""

    def __init__(self) -> None:
        self.pid = 0
        self.seconds = 0.0
        self.previous: Any = None

    def __call__(self, signum: int, frame: Any) -> None:
        if self.seconds:
            raise PolicyTimeout(f"no choice after {self.seconds:.1f}s")
        if callable(self.previous):
            self.previous(signum, frame)

    def arm(self, seconds: float) -> None:
        if self.pid != os.getpid() or signal.getsignal(signal.SIGALRM) is not self:
            self.previous = signal.signal(signal.SIGALRM, self)
            self.pid = os.getpid()
        self.seconds = seconds
        signal.setitimer(signal.ITIMER_REAL, seconds)

    def disarm(self) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        self.seconds = 0.0


_ALARM = _PolicyAlarm()


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise PolicyTimeout in the block after `seconds` (SIGALRM; main thread only, else no limit).

    Celery's own hard limit exists only in the prefork pool, and it kills the
    process; this one lets the seat still play (random) in any pool that runs
    tasks on the main thread (solo, prefork's children)."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return
    _ALARM.arm(seconds)
    try:
        yield
    finally:
        _ALARM.disarm()


def play_bot_decision(app: BotsApp, match_id: str, game_id: str, seat: int, version: int,
                      policy: str, payload: DecisionPayload | None = None, *, think_seconds: float = 0.0) -> str:
    """Choose from the seat's view and submit. Returns what happened (for logs and tests).

    With a payload (the dispatcher's: the seat's view and legal commands at `version`)
    the only RPC is SubmitCommand; without one the view and the legal commands are
    read over gRPC first, as any client would. A policy that raises, or thinks longer
    than `think_seconds` (0: no limit), is replaced by `random` for this decision."""
    engine = app.registry.get(game_id)
    client = app.seat(match_id, seat)
    seed = derive_seed(zlib.crc32(match_id.encode()), version, f"seat{seat}")
    if payload is not None:
        view, commands = payload.messages(engine)
        if not commands:
            return "no_command"
        decision = Decision(game_id, seat, view, commands, version, seed)
    else:
        fetched = _fetch_decision(client, engine, game_id, seat, version, seed)
        if isinstance(fetched, str):
            return fetched
        decision = fetched
    with child_span("bots.choose", {"policy": policy, "game_id": game_id}):
        try:
            with time_limit(think_seconds):
                command = make_policy(policy).choose(engine, decision)
        except Exception:  # noqa: BLE001 - a policy bug (or a timeout) must not stall the match
            log.exception("policy_failed", match_id=match_id, policy=policy)
            command = RandomPolicy().choose(engine, decision)
    return _submit(client, command, bot_command_id(match_id, version, seat), version,
                   fallback=[c for c in decision.legal if c != command])


def _fetch_decision(client, engine: Engine, game_id: str, seat: int, version: int, seed: int) -> Decision | str:
    """The decision read over gRPC (GetView, ListLegalCommands), or why there is none."""
    view = _rpc(client.view)
    if view.finished:
        return "finished"
    if view.version != version:
        return "stale"
    if seat not in {p.seat for p in view.to_act}:
        return "not_pending"
    legal = _rpc(client.legal_commands, LEGAL_LIMIT)
    if legal.version != version:
        return "stale"
    assert engine.info.command_type is not None and engine.info.view_type is not None
    commands = tuple(_unpack(engine.info.command_type, c) for c in legal.commands)
    if not commands:
        return "no_command"
    return Decision(game_id, seat, _unpack(engine.info.view_type, view.view), commands, version, seed)


def _submit(client, command: Message, command_id: str, version: int, fallback: list[Message]) -> str:
    try:
        # omit_events: a bot never reads the events its command appended (the next
        # decision comes with its own payload), so the server need not render them.
        reply = _rpc(client.submit, command, command_id=command_id, expected_version=version, omit_events=True)
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.ABORTED:
            return "stale"
        if exc.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT) and fallback:
            # A listed command refused (a sampled legal set, a racing window): try another once.
            log.warning("bot_command_refused", match_id=client.match_id, code=exc.details())
            return _submit(client, fallback[0], command_id + ":f", version, [])
        if exc.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT):
            return "refused"
        raise
    return "duplicate" if reply.duplicate else "submitted"


def run_clock(app: BotsApp, match_id: str, seat: int, version: int) -> str:
    """A human's clock ran out: submit the engine's documented default for the seat,
    unless the match has moved on since the clock was set."""
    match = MatchState.from_envelopes(app.registry, app.store.read(match_id))
    if match.finished:
        return "finished"
    if match.version != version:
        return "stale"
    if seat not in {p.seat for p in pending_for(match.engine, match.state, seat)}:
        return "not_pending"
    command = match.engine.timeout_command(match.state, seat)
    if command is None:
        return "no_default"
    log.info("clock_expired", match_id=match_id, seat=seat, version=version)
    return _submit(app.seat(match_id, seat), command, clock_command_id(match_id, version, seat), version, [])
