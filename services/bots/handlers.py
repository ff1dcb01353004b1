"""What a task does: play one bot decision, or fire one turn clock. Plain functions
over the BotsApp; Celery only calls them (entrypoints/celery_app.py).

Both are idempotent. They act only if the match is still at the version the
task was queued for, submit with that `expected_version` and a deterministic
command id, so a retried, duplicated or late task changes nothing: the server
answers a repeated command id with the first answer and refuses a stale version.
"""

from __future__ import annotations

import ctypes
import math
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.protobuf.message import Message

from famiglia.bots import Decision, make_policy
from famiglia.bots.random_policy import RandomPolicy
from famiglia.client.game_client import VERSION_PLACEHOLDER
from famiglia.engine import Engine, pending_for
from famiglia.engine.rng import derive_seed
from famiglia.grpcutil.errors import error_code, error_metadata, store_away
from famiglia.matchstate import MatchState, StoreWentBack
from famiglia.telemetry import child_span, get_logger
from famiglia.v1 import game_service_pb2 as pb

from .bootstrap import BotsApp
from .metrics import BotsMetrics
from .payload import HELD_FOLLOW_UP, LEGAL_LIMIT, DecisionPayload, bot_command_id, reads_view, turn_order
from .tries import MAX_FAILURES, DecisionTries, digest

log = get_logger("famiglia.bots")

# Statuses a retry may cure: the command service restarting, a deadline, contention.
TRANSIENT_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                             grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INTERNAL,
                             grpc.StatusCode.UNKNOWN, grpc.StatusCode.CANCELLED})


# Of those, the ones a server that failed on the command itself answers (its engine raised
# something no rule refusal is: `@rpc` answers INTERNAL). Sent again, the same command fails
# again, and every task the stall timer queues again chooses it again (the same seed).
FAILED_CODES = frozenset({grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN})


_DIED = frozenset({grpc.StatusCode.UNKNOWN})
"""Of `FAILED_CODES`, the one no famiglia server answers (its `@rpc` answers its own failures
INTERNAL): gRPC's for a call cut short, "Stream removed" from a server killed mid-call (OOM, a
crash loop). Tried with another command as a failure, but no failure of the seat's decision
(`_hopeless`): counted, three crashes at one decision gave a seat up."""


class Transient(Exception):
    """Worth a retry (Celery's autoretry_for)."""


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


_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc


@dataclass
class _Limit:
    thread: int
    at: float
    live: bool = False
    """Set last in `arm`: an interrupt inside `Event.set` (Python code holding the Event's
    lock) would leave that lock held for good."""
    fired: bool = False


class _Watchdog:
    """Interrupts a policy still thinking at its limit, in whichever thread it runs.

    A Celery `threads` pool runs decisions off the main thread, where no SIGALRM
    arrives; so one daemon thread per process raises PolicyTimeout *in* the late
    thread (`PyThreadState_SetAsyncExc`, delivered at its next bytecode, as a
    signal handler's exception would be). Arming costs a dict entry, no system call:
    the watchdog sleeps until the earliest limit and is woken only by an earlier one.
    A limit fires at most once, and under the lock its disarm takes, so an exception
    never arrives after the block: one fired but not yet delivered is cleared there.
    It fires only once `arm` is done (`_Limit.live`): an interrupt inside `arm`'s
    Event.set could leave the Event's lock held, and the next arm would hang on it."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # a forked worker starts its own

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._armed: dict[int, _Limit] = {}
        self._wake = threading.Event()
        self._next = math.inf
        self._pid = 0

    def arm(self, seconds: float) -> _Limit:
        if not self._pid:  # first use in this process
            self._start()
        limit = _Limit(threading.get_ident(), time.monotonic() + seconds)
        self._armed[limit.thread] = limit
        if limit.at < self._next:
            self._wake.set()
        limit.live = True
        return limit

    def disarm(self, limit: _Limit) -> None:
        with self._lock:
            if self._armed.get(limit.thread) is limit:
                del self._armed[limit.thread]
            if limit.fired:
                _set_async_exc(ctypes.c_ulong(limit.thread), None)

    def _start(self) -> None:
        with self._lock:
            if self._pid:
                return
            self._pid = os.getpid()
            threading.Thread(target=self._watch, name="policy-watchdog", daemon=True).start()

    def _watch(self) -> None:
        while True:
            self._wake.clear()
            now = time.monotonic()
            with self._lock:
                for limit in list(self._armed.values()):
                    if limit.live and not limit.fired and limit.at <= now:
                        limit.fired = True
                        _set_async_exc(ctypes.c_ulong(limit.thread), ctypes.py_object(PolicyTimeout))
                # A limit due but not live yet (its thread is still in `arm`): look again in 1 ms.
                self._next = min((x.at if x.live or x.at > now else now + 0.001
                                  for x in self._armed.values() if not x.fired), default=math.inf)
            self._wake.wait(None if self._next == math.inf else self._next - now)


_WATCHDOG = _Watchdog()


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise PolicyTimeout in the block if it is still running after `seconds` (0: no limit).

    Works in any thread and pool (solo, threads, prefork's children). Celery's own hard
    limit exists only in prefork, and it kills the process; this one lets the seat still
    play (random). Like a signal, it interrupts Python code, not a blocking system call."""
    if seconds <= 0:
        yield
        return
    limit = _WATCHDOG.arm(seconds)
    try:
        yield
    finally:
        _WATCHDOG.disarm(limit)


_REACHED: dict[str, int] = {}
"""match -> a version this process knows the match has reached (its own submits told it)."""
_REACHED_CAP = 50_000


def _reached(match_id: str, version: int) -> None:
    if len(_REACHED) >= _REACHED_CAP:
        _REACHED.clear()
    if _REACHED.get(match_id, -1) < version:
        _REACHED[match_id] = version


def _left(budget: float, spent: float) -> float:
    """What is left of a time budget (0: none set, and none after)."""
    return max(budget - spent, 0.001) if budget > 0 else 0.0


def _store_went_back(app: Any, match_id: str, version: int) -> bool:
    """Whether the match is at `version` or before it again though this process moved it past
    (the store lost acknowledged writes, and the dispatcher queued the lost decision again):
    then what this process remembers is forgotten. A store that is away is taken to agree."""
    try:
        back = app.store.version(match_id) <= version
    except Exception:  # noqa: BLE001 - Redis away: the task is stale as far as this process knows
        return False
    if back:
        _REACHED.pop(match_id, None)
    return back


BatchSeat = tuple[int, str, DecisionPayload | None]
"""(seat, policy, payload) of one seat in a decide task: the payload made at the task's version."""


def play_bot_decision(app: BotsApp, match_id: str, game_id: str, seat: int, version: int,
                      policy: str, payload: DecisionPayload | None = None, *, think_seconds: float = 0.0,
                      interrupt_seconds: float = 0.0) -> str:
    """Choose from the seat's view and submit. Returns what happened (for logs and tests).

    With a payload (the dispatcher's: the seat's view and legal commands at `version`)
    the only RPC is SubmitCommand; without one the view and the legal commands are
    read over gRPC first, as any client would. The policy is asked to answer within
    `think_seconds` (its decision's deadline; 0: none); one that raises, or is still
    thinking after `interrupt_seconds` (0: never interrupted), is replaced by `random`
    for this decision.

    A task for a version this process already saw the match leave (a redelivered or
    re-queued duplicate: the dispatcher queues a decision again after its stall time,
    even one a slow worker is still answering) is stale at once, without thinking: on a
    loaded machine thinking for nothing made the duplicates pile up."""
    return play_bot_decisions(app, match_id, game_id, version, [(seat, policy, payload)],
                              think_seconds=think_seconds, interrupt_seconds=interrupt_seconds)[0]


Lease = tuple[int, Mapping[int, str]]
"""(the most commands the task submits, every bot seat of the match -> its policy)."""


def play_bot_decisions(app: BotsApp, match_id: str, game_id: str, version: int, seats: Sequence[BatchSeat], *,
                       think_seconds: float = 0.0, interrupt_seconds: float = 0.0,
                       lease: Lease | None = None) -> list[str]:
    """Play a simultaneous choice of several bot seats, one after another: what each did.

    Every seat's payload is its own view and legal commands at `version` (the dispatcher's);
    each seat's policy sees only its own. The first is submitted with
    `expected_version=version`, each next one with the version the previous answer
    returned, and command id `bot:<match>:<that version>:<seat>` — so anything else that
    moved the match meanwhile (a human, a clock, a re-queued task) makes the rest
    `stale` and the task stops there; so does a seat without a payload found no longer
    asked. A later seat's command refused (the earlier seats' commands changed what it
    may do) is decided again from its view and legal commands read over gRPC at the
    version reached, as a task without a payload would; found asked no more there
    (`not_pending`), it is passed over as a refused one (`_PASSED_OVER`). A redelivered or retried task is answered from the
    first answers: a duplicate's answer carries the version right after that command, and
    the next seat goes on from there. The seats share the task's time budget
    (`think_seconds`, `interrupt_seconds`).

    Several seats with payloads are chosen first and sent in one SubmitCommands call
    (`_submit_chained`), which the command service takes exactly as that many
    SubmitCommand calls in turn; the seats from a refused one on go on one call each. A
    seat refused for good (it has no turn to take after all: its answer given and held
    back by another task, NP-H9) is passed over, and the seats after it still play.

    With a `lease` the task plays on: the call also asks which of the match's bot seats are
    asked next (`ask_next`), and while some are, the task plays their turn as a fresh task
    would have — the same seat order (`turn_order`), payloads (made by the command service
    from the state then), seeds and command ids — up to the lease's number of commands.
    The dispatcher follows it by those command ids (dispatcher.py, `_lease_playing`)."""
    if version < _REACHED.get(match_id, -1) and not _store_went_back(app, match_id, version):
        return ["stale"]
    engine = app.registry.get(game_id)
    crc = zlib.crc32(match_id.encode())
    ask = [] if lease is None else _asking(app, match_id, lease[1])
    outcomes: list[str] = []
    moves, reached, first, follow_ups = 0, -1, True, 0
    policies = dict(lease[1]) if lease is not None else {seat: policy for seat, policy, _ in seats}
    started = time.monotonic()
    while True:
        if lease is not None and lease[0] > moves:
            seats = seats[:lease[0] - moves]
        # The turns share the task's time, as its seats do: a turn played on gets what is left,
        # and none once it is gone (the task's hard limit would kill it half-way through one).
        spent = time.monotonic() - started
        if not first and 0 < think_seconds <= spent:
            log.warning("bot_task_out_of_time", match_id=match_id, version=version, moves=moves,
                        seats=[s for s, _, _ in seats])
            break
        try:
            step, at, upcoming, step_reached, (held, held_last) = _play_step(
                app, engine, match_id, game_id, version, seats, crc, _left(think_seconds, spent),
                _left(interrupt_seconds, spent), ask, HELD_FOLLOW_UP if follow_ups else "")
        except Transient:
            if first:
                raise  # Celery retries the task, from its first answers
            log.warning("bot_lease_interrupted", match_id=match_id, version=version, seats=[s for s, _, _ in seats])
            break  # the dispatcher's stall timer queues the match's next decision again
        first = False
        outcomes += step
        reached = max(reached, step_reached)
        taken = sum(outcome in _TAKEN for outcome in step)
        moves += taken
        if taken < len(seats) or at is None:
            break
        # Past its lease (or with none) a task still plays on while its last turn held answers
        # back (NP-H9): they leave the version, and so the stream the dispatcher reads, where it
        # was, and a seat of the task the game still asks (one that made an optional move in a
        # window, say) would wait for the stall timer. So a task never stops inside a window.
        # Past a lease, only while the turn's last command is held: one written out by a later
        # command of the turn is in the stream, and the dispatcher, which then finds nothing
        # staged (`_held_back`), follows no lease past its moves: it queues the next turn itself.
        if lease is None or moves >= lease[0]:
            if not (held if lease is None else held_last) or follow_ups >= MAX_HELD_FOLLOW_UPS:
                break
            follow_ups += 1
        if upcoming is None or not ask:  # the step went a call a seat, or asked nothing: ask on its own
            upcoming = _ask_next(app, match_id, at, ask or _asking(app, match_id, policies), policies)
        if upcoming is None or not upcoming.next:  # over, a human's turn, or the match moved on
            break
        by_seat = {n.seat: n for n in upcoming.next}
        version = int(upcoming.next_version)
        seats = [(s, policies[s], _payload_of(by_seat[s])) for s in turn_order(list(by_seat), version)]
    if reached >= 0:  # the match is past the task's version now
        _reached(match_id, reached)
    return outcomes


_TAKEN = frozenset({"submitted", "duplicate"})
MAX_HELD_FOLLOW_UPS = 8
"""Turns a task plays on, without a lease or past it, after held-back answers (each asks the server first)."""


def _asking(app: BotsApp, match_id: str, policies: Mapping[int, str]) -> list[tuple[str, bool, int]]:
    """`ask_next` entries for these bot seats of the match."""
    return [(app.seat(match_id, s).token or "", reads_view(p), LEGAL_LIMIT) for s, p in sorted(policies.items())]


def _payload_of(decision: Any) -> DecisionPayload:
    """A SubmitCommands `next` entry as the dispatcher's payload for that seat would be."""
    view = decision.view.value if decision.HasField("view") else b""
    return DecisionPayload(view, tuple(c.value for c in decision.legal))


def _ask_next(app: BotsApp, match_id: str, version: int, ask: Sequence[tuple[str, bool, int]],
              policies: Mapping[int, str]) -> Any:
    """Which of the asked seats the game waits for at `version` (a SubmitCommands call that
    only asks); None if it cannot say (the match moved on, an error). A command service
    without the call is asked as any client would, seat by seat (`_read_next`), so the
    lease goes on and the dispatcher, which cannot tell, never waits for it."""
    try:
        return app.game_client.submit_commands(match_id, [], expected_version=version, omit_events=True,
                                               ask_next=ask)
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
            return _read_next(app, match_id, version, policies)
        if exc.code() in TRANSIENT_CODES and exc.code() not in FAILED_CODES:
            raise Transient(f"{exc.code().name}: {exc.details()}") from None
        # The server failed on the asking (a seat's view it cannot show, say): the task stops, and
        # the dispatcher queues the next decision itself; retried, it failed again and again.
        if exc.code() != grpc.StatusCode.ABORTED:
            log.warning("bot_lease_ask_failed", match_id=match_id, version=version, code=exc.code().name)
        return None


def _read_next(app: BotsApp, match_id: str, version: int, policies: Mapping[int, str]) -> Any:
    """`_ask_next` over GetView and ListLegalCommands, each bot seat with its own token."""
    answer = pb.SubmitCommandsResponse(next_version=version)
    for seat, policy in sorted(policies.items()):
        client = app.seat(match_id, seat)
        view = _read(client.view)
        if view is None:  # the server failed on it: the task stops, as after a failed `ask_next`
            log.warning("bot_lease_ask_failed", match_id=match_id, version=version, seat=seat, read="view")
            return None
        if view.version != version:
            return None  # the match moved on
        if view.finished:
            return answer  # nobody is asked
        if seat not in {p.seat for p in view.to_act}:
            continue
        legal = _read(client.legal_commands, LEGAL_LIMIT)
        if legal is None:
            log.warning("bot_lease_ask_failed", match_id=match_id, version=version, seat=seat, read="legal_commands")
            return None
        if legal.version != version:
            return None
        decision = answer.next.add(seat=seat, complete=legal.complete)
        for command in legal.commands:
            decision.legal.add(value=command.value)
        if reads_view(policy):
            decision.view.value = view.view.value
    return answer


def _play_step(app: BotsApp, engine: Engine, match_id: str, game_id: str, version: int, seats: Sequence[BatchSeat],
               crc: int, think_seconds: float, interrupt_seconds: float,
               ask: Sequence[tuple[str, bool, int]],
               suffix: str = "") -> tuple[list[str], int | None, Any, int, tuple[bool, bool]]:
    """One turn of `play_bot_decisions`: (what each seat did, the version after the last one
    taken or None if the turn stopped short, the SubmitCommands answer with `next` when the
    turn went in one call that asked, the highest version seen, and whether a command taken
    was held back (NP-H9), and the last one: a public command after a held one writes it
    out, so the dispatcher's `_held_back` no longer finds it). `suffix` ends its command ids
    (`HELD_FOLLOW_UP` for a turn played on)."""
    started = time.monotonic()
    deadline = started + think_seconds if think_seconds > 0 else math.inf

    def interrupt() -> float:
        return max(interrupt_seconds - (time.monotonic() - started), 0.001) if interrupt_seconds > 0 else 0.0

    at, reached, held, held_last = version, -1, False, False
    held_answers = bool(engine.info.held_events)  # a seat's answer may have gone in unseen (NP-H9)
    outcomes: list[str] = []
    chosen: dict[int, tuple[Decision, Message]] = {}
    refused = -1  # the index of a seat whose command the chained call refused
    upcoming = None
    if (len(seats) > 1 or ask) and all(payload is not None for _, _, payload in seats):
        for i, (seat, policy, payload) in enumerate(seats):
            assert payload is not None
            view, commands = payload.messages(engine)
            if not commands:
                break
            decision = Decision(game_id, seat, view, commands, version, derive_seed(crc, version, f"seat{seat}"),
                                deadline)
            chosen[i] = (decision, _choose(engine, policy, decision, match_id, interrupt(), _metrics(app)))
        chained = _submit_chained(app, match_id, version, [(seats[i][0], chosen[i][1]) for i in sorted(chosen)],
                                  ask, suffix)
        if chained is not None:
            taken, refusal, reply = chained
            for done in taken:
                outcomes.append(done.outcome)
                if done.version is not None:  # every taken entry has one
                    at = done.version
                reached = max(reached, at)
                held, held_last = held or done.held, done.held
            if refusal == "finished":
                outcomes.append("finished")
                return outcomes, None, None, reached, (held, held_last)
            if refusal == "stale":
                outcomes.append("stale")
                # The first entry names the version: the match is past it. A later one goes in
                # at the version the entry before gave, as a SubmitCommand sent with it would: a
                # public move since made it stale (an answer held meanwhile does not, NP-H9), so
                # the match is past `at` too; `at` is kept as reached, which only asks for less.
                return outcomes, None, None, max(reached, at + 1 if not taken else at), (held, held_last)
            refused = len(taken) if refusal == "refused" else -1
            if not refusal:
                upcoming = reply
    for i in range(len(outcomes), len(seats)):
        seat, policy, payload = seats[i]
        client = app.seat(match_id, seat)
        if i in chosen:
            decision, command = chosen[i]
        else:
            if payload is not None:
                view, commands = payload.messages(engine)
                if not commands:
                    outcomes.append("no_command")
                    break
                decision = Decision(game_id, seat, view, commands, version,
                                    derive_seed(crc, version, f"seat{seat}"), deadline)
            else:
                fetched = _fetch_decision(client, engine, game_id, seat, at, derive_seed(crc, at, f"seat{seat}"),
                                          deadline)
                if isinstance(fetched, str):
                    if fetched in _HOPELESS:
                        given = _hopeless(app, match_id, game_id, seat, at, fetched)
                        fetched = given.outcome
                        reached = max(reached, given.version or -1)
                        if fetched == "given_up":  # nothing can move the seat: passed over
                            outcomes.append(fetched)
                            continue
                    outcomes.append(fetched)
                    break
                decision = fetched
            command = _choose(engine, policy, decision, match_id, interrupt(), _metrics(app))
        command_id = bot_command_id(match_id, at, seat) + suffix
        tried = _Tried(_tries(app), match_id, at, seat)
        # The first seat's payload is at the version it is submitted at: a refused listed
        # command is retried with another once. A later seat's is older: decide it afresh.
        fallback = [c for c in decision.legal if c != command] if i == 0 else []
        if i == refused:  # the chained call's answer already said so
            done = _retry_refused(client, command_id, at, fallback, command=command, tried=tried,
                                  held_answers=held_answers)
        else:
            done = _submit_at(client, command, command_id, at, fallback, afresh=i > 0, tried=tried,
                              held_answers=held_answers)
        if done.outcome == "refused" and i > 0:
            log.info("bot_batch_seat_refused", match_id=match_id, seat=seat, version=at)
            done = _decide_afresh(client, engine, game_id, seat, at, policy, derive_seed(crc, at, f"seat{seat}"),
                                  deadline, interrupt(), command_id, _metrics(app), tried, held_answers=held_answers)
        if done.outcome in _HOPELESS or (done.outcome == "refused" and i == 0):
            given = _hopeless(app, match_id, game_id, seat, at, done.outcome)
            if given.outcome == "default":  # the seat's default went in: a command of no task's, the task stops
                outcomes.append(given.outcome)
                return outcomes, None, None, max(reached, given.version or -1), (held, held_last)
            if given.outcome == "given_up":  # nothing can move the seat: passed over, as a refused one
                outcomes.append(given.outcome)
                continue
            if given.outcome != "not_pending":  # (a seat whose answer is held back was refused: passed over)
                done = given
        outcomes.append(done.outcome)
        held = held or done.held
        if done.outcome in _TAKEN:
            held_last = done.held
        if done.outcome == "stale":
            reached = max(reached, at + 1)
        if done.version is None:
            if done.outcome in _PASSED_OVER:
                # This seat has no turn to take after all (its answer already given, held back
                # from the table: NP-H9); nothing moved, and the other seats' turns still wait.
                continue
            return outcomes, None, None, reached, (held, held_last)
        reached = max(reached, done.version)
        at = done.version
    if len(outcomes) < len(seats) or any(outcome not in _TAKEN for outcome in outcomes):
        return outcomes, None, None, reached, (held, held_last)
    return outcomes, at, upcoming, reached, (held, held_last)


_PASSED_OVER = frozenset({"refused", "answered", "not_pending"})
"""A seat's outcomes that move nothing and leave the task's other seats asked: its command refused
for good, its answer found given (`answered`), or, decided afresh, found asked no more at the
version (`not_pending`: its answer held back from the table by another task, NP-H9). Before, a
`not_pending` stopped the task, and the seats after it waited for another task or the stall timer."""


_HOPELESS = frozenset({"failed", "unreadable"})
"""A seat's task outcomes no retry of the same reads or commands cures: the server failed on the
seat's view or legal commands (`unreadable`), or on its command and the fallback (`failed`). A
first seat's command and fallback both refused count too (`_hopeless`)."""


_NOTHING_PLAYED = frozenset({"no_default", "refused", "failed"})
"""A give-up's ends with nothing played that no retry changes: no default, the default refused
or failed on. Not `stale`, `finished` (the match moved meanwhile), nor `unfoldable`: this
worker's fold failed (one of the old version in a rolling deploy, a newer server's events),
and another worker may read the default."""


def _tries(app: BotsApp) -> DecisionTries:
    """The deployment's record of each decision's tries (tries.py), or this process's own for an
    app that has none (the tests' stand-ins)."""
    found = getattr(app, "tries", None)
    return found if found is not None else _LOCAL_TRIES


_LOCAL_TRIES = DecisionTries()


def _hopeless(app: BotsApp, match_id: str, game_id: str, seat: int, version: int, outcome: str) -> _Submitted:
    """A task that could not move `seat` at `version` for a reason a retry of the same does not
    cure (`outcome`: `refused`, `failed`, `unreadable`) counts a failure at that decision
    (tries.py, shared by every worker): below `MAX_FAILURES` a refusal ends the task (the
    dispatcher's stall timer queues it again, and that task passes over the commands refused)
    and a failure is retried by Celery with its backoff (`Transient`); at `MAX_FAILURES` the
    seat is given up (`_give_up`). Before, a seat whose view the server could not show was
    retried for ever, every stall time, and so was one whose command and fallback were refused."""
    failures = _tries(app).fail(match_id, version, seat)  # (0: the record away, Redis: not counted)
    if failures < MAX_FAILURES:
        if outcome == "refused":
            return _Submitted("refused", None)
        raise Transient(f"{outcome} at {match_id}:{version}:{seat} ({failures} of {MAX_FAILURES})")
    return _give_up(app, match_id, game_id, seat, version, outcome, first=failures == MAX_FAILURES)


def _give_up(app: BotsApp, match_id: str, game_id: str, seat: int, version: int, reason: str, *,
             first: bool = True) -> _Submitted:
    """Give up a bot seat's decision the server cannot let it make: the seat plays its game's
    documented default (`Engine.timeout_command`), as a person's seat whose turn clock ran out,
    under the clock's command id (`clock:<match>:<version>:<seat>`, which the command service
    takes from the bots' token for a bot's seat at once); with none, or one refused or failed
    on too, the seat is left as it is (`given_up`, written down: the dispatcher queues it no
    more, and a tournament abandons the match as stuck). A default that meets an outage is
    `Transient`, not written down: a task queued again tries it again. Logged (`bot_seat_given_up`) and counted
    (`famiglia.bots.decisions_given_up`) once, by the task whose failure reached the bound
    (`first`); a later one (a retry after an outage) only tries the default again."""
    try:
        match = _asked_match(app, match_id, seat, version)
    except Transient:
        raise
    except Exception as exc:  # noqa: BLE001 - the fold failed too (an engine bug): nothing to play
        if store_away(exc):
            raise Transient(f"store away: {exc!r}"[:300]) from None
        log.warning("bot_default_unplayable", match_id=match_id, seat=seat, version=version, error=repr(exc)[:300])
        match = "unfoldable"
    if isinstance(match, str) and match != "unfoldable":
        return _Submitted(match, None)  # moved on meanwhile, or the seat is not asked: nothing to give up
    default = "unavailable"  # (an outage while the default goes in: Celery retries, the line is written now)
    try:
        if isinstance(match, str):
            done = _Submitted(match, None)
        else:
            try:
                command = match.engine.timeout_command(match.state, seat)
            except Exception as exc:  # noqa: BLE001 - an engine bug in the default too
                log.warning("bot_default_unplayable", match_id=match_id, seat=seat, version=version,
                            error=repr(exc)[:300])
                command = None
            done = _Submitted("no_default", None) if command is None else _submit_at(
                app.seat(match_id, seat), command, clock_command_id(match_id, version, seat), version, [],
                afresh=True)
        default = done.outcome
    finally:
        if first:
            log.warning("bot_seat_given_up", match_id=match_id, seat=seat, version=version, game_id=game_id,
                        reason=reason, failures=MAX_FAILURES, default=default)
            metrics = _metrics(app)
            if metrics is not None:
                metrics.decision_given_up(game_id, reason)
    if done.outcome in _TAKEN:
        return _Submitted("default", done.version, done.held)
    if done.outcome in _NOTHING_PLAYED:  # nothing can move the seat: the stall timer stops
        _tries(app).give_up(match_id, version, seat)
    return _Submitted("given_up", None)


MATCH_OVER = "match_over"
"""The refusal of a command to a match that has ended (its last move, or CancelMatch)."""
MATCH_UNREADABLE = "match_unreadable"
"""The refusal of a replica that cannot fold the match (a newer server's events in a rolling
deploy, a game it does not serve): the replica's, not the command's; another, or this one
upgraded, takes the same command."""
CLOCK_NOT_RUN_OUT = "clock_not_run_out"
"""The refusal of a person's clock default before its deadline by the command service's clock
(this host's, or the dispatcher's, runs fast): ErrorInfo.metadata `left_ms` says how long till then."""
CALL_QUARANTINED = "call_quarantined"
"""The refusal of a seat's view or legal commands the command service set aside where the match
stands (services/command/quarantine.py: its engine did not return them): a read the server cannot
answer, as INTERNAL is, until the match moves on. Escaping the task, it was neither retried nor
counted, and the stall timer queued the seat again for as long as the quarantine lasted."""
_REFUSED = frozenset({grpc.StatusCode.FAILED_PRECONDITION.value[0], grpc.StatusCode.INVALID_ARGUMENT.value[0]})


def _submit_chained(app: BotsApp, match_id: str, version: int, commands: Sequence[tuple[int, Message]],
                    ask: Sequence[tuple[str, bool, int]] = (), suffix: str = "",
                    ) -> tuple[list[_Submitted], str, Any] | None:
    """Submit several seats' chosen commands in one SubmitCommands call: what was taken,
    in order, how the chain ended ("" all taken, "stale", "refused" a rule or a
    malformed command, "other"), and the answer (its `next` for the `ask` seats). None:
    nothing was sent (fewer than two commands and nothing to ask, or none) or the call
    itself failed for good (a command service without the call, ...): the caller submits
    them one call each, as before, and meets the same error there."""
    if not commands or (len(commands) < 2 and not ask):
        return None
    entries = [(app.seat(match_id, seat).token or "", command,
                bot_command_id(match_id, VERSION_PLACEHOLDER, seat) + suffix) for seat, command in commands]
    try:
        reply = app.game_client.submit_commands(match_id, entries, expected_version=version, omit_events=True,
                                                ask_next=ask)
    except grpc.RpcError as exc:
        if exc.code() in TRANSIENT_CODES and exc.code() not in FAILED_CODES:
            raise Transient(f"{exc.code().name}: {exc.details()}") from None
        # A call the server failed on (INTERNAL: an entry its engine raised on) goes a call a seat,
        # where the seat whose command fails plays another (`_submit_at`); the entries taken
        # before it answer as duplicates.
        log.warning("bot_chain_failed", match_id=match_id, version=version,
                    seats=[seat for seat, _ in commands], code=exc.code().name)
        return None
    taken = [_Submitted("duplicate" if r.duplicate else "submitted", int(r.version), r.held) for r in reply.results]
    if not reply.HasField("refusal"):
        return taken, "", reply
    status = reply.refusal.status
    if status == grpc.StatusCode.ABORTED.value[0]:
        log.info("bot_chain_stale", match_id=match_id, seat=_entry_seat(commands, reply.refusal.index),
                 version=version, index=reply.refusal.index,
                 command_id=_entry_id(entries, reply.refusal.index), code=reply.refusal.code,
                 reason=reply.refusal.message)
        return taken, "stale", reply
    if reply.refusal.code == MATCH_OVER:  # ended meanwhile (its last move, an operator's cancel)
        log.info("bot_match_over", match_id=match_id, seat=_entry_seat(commands, reply.refusal.index),
                 version=version, index=reply.refusal.index,
                 reason=reply.refusal.message)
        return taken, "finished", reply
    if status in _REFUSED:
        command_id = _entry_id(entries, reply.refusal.index)
        log.warning("bot_command_refused", match_id=match_id, seat=_entry_seat(commands, reply.refusal.index),
                    version=version, index=reply.refusal.index,
                    command_id=command_id, code=reply.refusal.code)
        _refusal_reason(match_id, command_id, reply.refusal.code, reply.refusal.message)
        return taken, "refused", reply
    return taken, "other", reply


def _refusal_reason(match_id: str, command_id: str, code: str, reason: str) -> None:
    """A refusal's text at DEBUG only: a rule tells it from what the seat knows, the bot's own
    hand too, which no line at INFO or above may show (the command service's `command_refused`)."""
    log.debug("bot_command_refused_reason", match_id=match_id, command_id=command_id, code=code, reason=reason)


def _code(exc: grpc.RpcError) -> str:
    """The famiglia code of a refused call, else its status name."""
    try:
        return error_code(exc) or exc.code().name
    except Exception:  # noqa: BLE001 - an error without the call's metadata
        return exc.code().name


def _entry_seat(commands: Sequence[tuple[int, Message]], index: int) -> int | None:
    """The seat of a chain's entry, or None."""
    return commands[index][0] if 0 <= index < len(commands) else None


def _entry_id(entries: Sequence[tuple[str, Message, str]], index: int) -> str:
    """The command id of a chain's entry, as sent ("{version}" unresolved), or ""."""
    return entries[index][2] if 0 <= index < len(entries) else ""


@dataclass(frozen=True)
class _Tried:
    """The decision a submit answers, and the record of what its tasks tried there (tries.py)."""

    tries: DecisionTries
    match_id: str
    version: int
    seat: int

    def refuse(self, command: Message) -> None:
        self.tries.refuse(self.match_id, self.version, self.seat, command.SerializeToString())

    def untried(self, commands: Sequence[Message]) -> list[Message]:
        """`commands` less those a task refused or failed on at this decision before."""
        refused = self.tries.refused(self.match_id, self.version, self.seat)
        if not refused:
            return list(commands)
        return [c for c in commands if digest(c.SerializeToString()) not in refused]


def _retry_refused(client, command_id: str, version: int, fallback: list[Message], *,
                   command: Message | None = None, tried: _Tried | None = None,
                   outcome: str = "refused", held_answers: bool = False) -> _Submitted:
    """A seat whose listed command was refused (a sampled legal set, a racing window, a
    chain's earlier seats) or failed on: another listed command once, or `outcome`. The
    command is written down for the decision (`tried`), and the fallback is the first listed
    command no task refused there yet: before, a task queued again chose the same command
    and the same fallback, and both were refused again at every re-queue. In a game that holds
    answers back (`held_answers`, NP-H9) a command refused by a rule plays no fallback for a seat
    no longer asked (`_answered`)."""
    if held_answers and fallback and _answered(client, command_id, version):
        log.info("bot_seat_answered", match_id=client.match_id, seat=_seat_of(command_id), version=version,
                 command_id=command_id)
        return _Submitted("answered", None)
    if tried is not None and command is not None:
        tried.refuse(command)
        if fallback:
            fallback = tried.untried(fallback)
    if fallback:
        return _submit_at(client, fallback[0], command_id + ":f", version, [], tried=tried)
    return _Submitted(outcome, None)


def _answered(client, command_id: str, version: int) -> bool:
    """Whether the seat whose command was refused is asked no more at `version`, the match still
    there: its answer went in meanwhile, held back from the table (NP-H9), by another task playing
    the same decision under another id (a task playing on after held answers, `:h`, and one the
    dispatcher queued from a stream that still showed the seat asked). A fallback played in its
    place was an optional move no policy chose (NP-D7's `set_auto_pass`, for the rest of the
    match). One GetView, only after a refusal; unknown (a failed read, an outage) is not answered."""
    try:
        view = _read(client.view)
    except Exception:  # noqa: BLE001 - an outage, a refused read: not known, so played as before
        return False
    if view is None or view.finished or view.version != version:
        return False
    return _seat_of(command_id) not in {p.seat for p in view.to_act}


def _metrics(app: BotsApp) -> BotsMetrics | None:
    """The process's bot metrics (None: off, or an app that has none, as the tests' stand-ins)."""
    return getattr(app, "metrics", None)


def _choose(engine: Engine, policy: str, decision: Decision, match_id: str, interrupt_seconds: float,
            metrics: BotsMetrics | None = None) -> Message:
    """The policy's command; its CPU and wall time measured when metrics are on."""
    if metrics is None:
        return _chosen(engine, policy, decision, match_id, interrupt_seconds)
    wall, cpu = time.perf_counter(), time.thread_time()
    try:
        return _chosen(engine, policy, decision, match_id, interrupt_seconds)
    finally:
        metrics.decided(decision.game_id, policy, time.thread_time() - cpu, time.perf_counter() - wall)


def _chosen(engine: Engine, policy: str, decision: Decision, match_id: str, interrupt_seconds: float) -> Message:
    with child_span("bots.choose", {"policy": policy, "game_id": decision.game_id}):
        try:
            with time_limit(interrupt_seconds):
                return make_policy(policy).choose(engine, decision)
        except Exception:  # noqa: BLE001 - a policy bug (or a timeout) must not stall the match
            log.exception("policy_failed", match_id=match_id, seat=decision.seat, version=decision.version,
                          policy=policy, fallback="random")
            return RandomPolicy().choose(engine, decision)


def _decide_afresh(client, engine: Engine, game_id: str, seat: int, version: int, policy: str, seed: int,
                   deadline: float, interrupt_seconds: float, command_id: str,
                   metrics: BotsMetrics | None = None, tried: _Tried | None = None, *,
                   held_answers: bool = False) -> _Submitted:
    """A batch's later seat decided from what it may do at `version`, read over gRPC. Its answer
    may still go in, held back, between those reads and the submit (`held_answers`, NP-H9): a
    refusal then plays no fallback for a seat no longer asked (`_retry_refused`)."""
    fetched = _fetch_decision(client, engine, game_id, seat, version, seed, deadline)
    if isinstance(fetched, str):
        return _Submitted(fetched, None)
    command = _choose(engine, policy, fetched, client.match_id, interrupt_seconds, metrics)
    return _submit_at(client, command, command_id, version, [c for c in fetched.legal if c != command], tried=tried,
                      held_answers=held_answers)


def _read(call, *args):
    """A read the seat's decision needs; `None` when the server failed on it (INTERNAL, its
    `@rpc`'s answer: it cannot show the seat this state, a bug a retry does not cure) or set it
    aside (`CALL_QUARANTINED`: the same, found stuck instead of raising). UNKNOWN is no answer
    of the server's but a call cut short (a server killed mid-call: `_DIED`); a replica that
    cannot read the match (`MATCH_UNREADABLE`, a rolling deploy) is `Transient`, as on a submit."""
    try:
        return call(*args)
    except grpc.RpcError as exc:
        if exc.code() in FAILED_CODES and exc.code() not in _DIED:
            return None
        if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
            code = _code(exc)
            if code == CALL_QUARANTINED:
                return None
            if code == MATCH_UNREADABLE:
                raise Transient(f"{MATCH_UNREADABLE}: {exc.details()}") from None
        if exc.code() in TRANSIENT_CODES:
            raise Transient(f"{exc.code().name}: {exc.details()}") from None
        raise


def _fetch_decision(client, engine: Engine, game_id: str, seat: int, version: int, seed: int,
                    deadline: float) -> Decision | str:
    """The decision read over gRPC (GetView, ListLegalCommands), or why there is none
    (`unreadable`: the server failed on a read)."""
    view = _read(client.view)
    if view is None:
        log.warning("bot_view_failed", match_id=client.match_id, seat=seat, version=version, read="view")
        return "unreadable"
    if view.finished:
        return "finished"
    if view.version != version:
        return "stale"
    if seat not in {p.seat for p in view.to_act}:
        return "not_pending"
    legal = _read(client.legal_commands, LEGAL_LIMIT)
    if legal is None:
        log.warning("bot_view_failed", match_id=client.match_id, seat=seat, version=version, read="legal_commands")
        return "unreadable"
    if legal.version != version:
        return "stale"
    assert engine.info.command_type is not None and engine.info.view_type is not None
    commands = tuple(_unpack(engine.info.command_type, c) for c in legal.commands)
    if not commands:
        return "no_command"
    return Decision(game_id, seat, _unpack(engine.info.view_type, view.view), commands, version, seed, deadline)


@dataclass(frozen=True)
class _Submitted:
    outcome: str
    version: int | None
    """the version the answer carried (a duplicate's: the first answer's); None: refused, stale..."""
    held: bool = False
    """the command was held back from the table (NP-H9): the version did not move"""
    wait: float = 0.0
    """`early`: seconds till the seat's deadline, by the command service's clock"""


def _submit_at(client, command: Message, command_id: str, version: int, fallback: list[Message], *,
               afresh: bool = False, tried: _Tried | None = None, held_answers: bool = False) -> _Submitted:
    """Submit one seat's command at `version`. A command refused by a rule, or one the server
    failed on (`FAILED_CODES`: its engine raised on it), is replaced by the first of `fallback`
    (another listed command, none refused at this decision before: `tried`) under
    `<command_id>:f`; without one a failure is `failed` for a bot's decision (`tried`: the
    caller counts it, `_hopeless`), `Transient` for a clock's (Celery retries the task), or,
    `afresh`, `refused` (the caller decides the seat afresh). The fallback names the same
    expected version: a failed command that went in after all makes it `stale`, so the seat
    still moves once. A replica that cannot read the match (`MATCH_UNREADABLE`) is `Transient`."""
    try:
        # omit_events: a bot never reads the events its command appended (the next
        # decision comes with its own payload), so the server need not render them.
        reply = client.submit(command, command_id=command_id, expected_version=version, omit_events=True)
    except grpc.RpcError as exc:
        if exc.code() in FAILED_CODES and (fallback or afresh or tried is not None):
            log.warning("bot_command_failed", match_id=client.match_id, seat=_seat_of(command_id), version=version,
                        command_id=command_id, code=exc.code().name)
            died = exc.code() in _DIED  # (the command is not written down as tried: nothing says it fails)
            done = _retry_refused(client, command_id, version, fallback, command=None if died else command,
                                  tried=tried, outcome="refused" if afresh else "failed")
            if done.outcome == "failed" and died:  # not the server's failure: not counted
                raise Transient(f"{exc.code().name}: {exc.details()}") from None
            return done
        if exc.code() in TRANSIENT_CODES:
            raise Transient(f"{exc.code().name}: {exc.details()}") from None
        if exc.code() == grpc.StatusCode.ABORTED:
            log.info("bot_command_stale", match_id=client.match_id, seat=_seat_of(command_id), version=version,
                     command_id=command_id,
                     code=_code(exc), reason=exc.details())
            return _Submitted("stale", None)
        if _code(exc) == MATCH_OVER:  # ended meanwhile: nothing to retry, nothing refused
            log.info("bot_match_over", match_id=client.match_id, seat=_seat_of(command_id), version=version,
                     command_id=command_id,
                     reason=exc.details())
            return _Submitted("finished", None)
        if exc.code() == grpc.StatusCode.FAILED_PRECONDITION and _code(exc) == MATCH_UNREADABLE:
            # Not the command refused: written down as tried, or counted, it gave the seat up
            # (`_hopeless`) in a rolling deploy, where the command goes in once it is over.
            raise Transient(f"{MATCH_UNREADABLE}: {exc.details()}") from None
        if exc.code() == grpc.StatusCode.FAILED_PRECONDITION and _code(exc) == CLOCK_NOT_RUN_OUT:
            wait = _left_ms(exc) / 1000
            log.warning("clock_early", match_id=client.match_id, seat=_seat_of(command_id), version=version,
                        command_id=command_id,
                        wait_s=round(wait, 3))
            return _Submitted("early", None, wait=wait)
        if exc.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT):
            log.warning("bot_command_refused", match_id=client.match_id, seat=_seat_of(command_id), version=version,
                        command_id=command_id,
                        code=_code(exc))
            _refusal_reason(client.match_id, command_id, _code(exc), exc.details() or "")
            return _retry_refused(client, command_id, version, fallback, command=command, tried=tried,
                                  held_answers=held_answers)
        raise
    return _Submitted("duplicate" if reply.duplicate else "submitted", int(reply.version), reply.held)


def _seat_of(command_id: str) -> int | None:
    """The seat a bot's or a clock's command id names (`<kind>:<match>:<version>:<seat>`, then
    `:h` or `:f` maybe): read from the end, as a match id may hold a colon."""
    rest = command_id
    while rest.endswith((":f", ":h")):
        rest = rest[:-2]
    seat = rest.rpartition(":")[2]
    return int(seat) if seat.isdigit() else None


def _left_ms(exc: grpc.RpcError) -> int:
    """`clock_not_run_out`'s milliseconds till the deadline (0: unknown, a refusal without them)."""
    try:
        return max(0, int(error_metadata(exc).get("left_ms", "0")))
    except (ValueError, TypeError):  # (from_call: a status whose details disagree with the call's)
        return 0


def _asked_match(app: BotsApp, match_id: str, seat: int, version: int) -> MatchState | str:
    """The match folded from the store (server-side), if it is still at `version` with `seat`
    asked; else why not (`stale`, `finished`, `not_pending`)."""
    # Most clocks find their match moved on: every other seat's command queues the people
    # still asked a clock again at the new version (a GoodCritters Step 3 among bots: tens a
    # deadline, all due at once). The version says so without reading and folding the match.
    if app.store.version(match_id) != version:
        return "stale"
    match = MatchState.from_envelopes(app.registry, app.store.read(match_id))
    if match.finished:
        return "finished"
    if match.version != version:
        return "stale"
    # A seat's answer held back from the table (NP-H9) is an answer all the same.
    try:
        match.catch_up(app.store)
    except StoreWentBack:  # the store lost writes between the two reads: not the match the clock was set on
        return "stale"
    if match.public_version != version:  # the stream moved meanwhile
        return "stale"
    if seat not in {p.seat for p in pending_for(match.engine, match.state, seat)}:
        return "not_pending"
    return match


def run_clock(app: BotsApp, match_id: str, seat: int, version: int,
              again: Callable[[float], None] | None = None) -> str:
    """A human's clock ran out: submit the engine's documented default for the seat,
    unless the match has moved on since the clock was set.

    The command service takes a person's default only once its own fold's deadline passed, by
    its own clock (less `FAMIGLIA_CLOCK_SKEW_S`): one refused as `early` (a fast clock here or at
    the dispatcher) is sent `again` for the seconds the service says are left; without `again`
    it is dropped, and the dispatcher queues the clock again once it is overdue (`_check_clocks`)."""
    match = _asked_match(app, match_id, seat, version)
    if isinstance(match, str):
        return match
    command = match.engine.timeout_command(match.state, seat)
    if command is None:
        return "no_default"
    command_id = clock_command_id(match_id, version, seat)
    log.info("clock_expired", match_id=match_id, seat=seat, version=version, command_id=command_id)
    done = _submit_at(app.seat(match_id, seat), command, command_id, version, [])
    outcome = done.outcome
    if outcome == "early" and again is not None:
        again(done.wait)
    metrics = _metrics(app)
    if metrics is not None and outcome == "submitted":
        metrics.clock_default(match.game_id)
    return outcome
