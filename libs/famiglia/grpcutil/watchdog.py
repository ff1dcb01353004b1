"""The stuck-call watchdog: a unary call that runs past its bound is taken for one that never ends.

Python cannot stop a thread. An engine bug that makes `decide` (or `evolve`, `view`, the legal
commands) loop for ever holds one of the server's few unary threads, and its match's lock, for
the life of the process; a few such calls and the server answers nothing while its health says
SERVING. So each `@rpc` unary call of a server that runs a watchdog (the others' calls write
nothing: `server._unwatched_on`) notes, in its thread's slot of `RUNNING`, when it began and
what it is (a dict store and `time.monotonic()`, no lock, no syscall: the vDSO reads the clock),
and a `Watchdog`'s own thread reads the slots about once a second. A call past the bound is one
`call_stuck` error line (what the call names, and the innermost frames of its thread: what it
runs), counted once, and the server's health turns NOT_SERVING, liveness too while the
dependencies answer, so the orchestrator takes the replica out of service and restarts it
(docs/operations.md; a Redis that hangs holds calls too, and a restart cannot cure it). A stuck call
that ends after all (slow, not endless) gives its health back (`stuck_call_ended`).
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Collection
from typing import Any, NamedTuple

from famiglia.telemetry import get_logger

log = get_logger("famiglia.grpc")


class Running(NamedTuple):
    """A unary call under way, as `@rpc` notes it in its thread's slot (a plain tuple there,
    whose making costs a fifth of this class's; the watchdog reads it as one of these)."""

    began: float
    """Its `time.monotonic()` when it began."""
    servicer: Any
    rpc: str
    request: Any
    context: Any


#: Thread id -> the unary call it runs (None between calls), as a `Running`'s fields. Written by
#: each call's own thread (a new key once per thread, then values only), read by the watchdogs.
RUNNING: dict[int, tuple[Any, ...] | None] = {}

#: The innermost frames of a stuck call's thread its line shows.
FRAMES = 6

#: Seconds between a watchdog's looks at the calls, at most (a quarter of its bound if less): a
#: call is told stuck this long after its bound at the latest.
ROUND_S = 1.0

#: Seconds between two `stuck_call_hook_failed` lines of one stuck call's hook that keeps raising
#: (its first one has the traceback; each after counts the failures since the one before).
HOOK_FAILED_EVERY_S = 60.0

#: Seconds a stop's last look hands on to its hooks at most (each begun before then runs to its
#: end): with Redis hanging, each lift or set-aside may wait seconds, and the exit waits for it.
LAST_LOOK_S = 2.0


def where(ident: int, frames: int = FRAMES) -> list[str]:
    """The innermost `frames` frames of thread `ident`, innermost last (`path:line function`,
    the path from its package on), as a log line names them; [] for a thread that has ended."""
    frame = sys._current_frames().get(ident)
    if frame is None:
        return []
    summary = traceback.StackSummary.extract(traceback.walk_stack(frame), limit=frames, lookup_lines=False)
    return [f"{_short(f.filename)}:{f.lineno} {f.name}" for f in reversed(summary)]


def _short(path: str) -> str:
    for root in ("/famiglia/", "/services/", "/tests/"):
        at = path.rfind(root)
        if at >= 0:
            return path[at + 1:]
    return path


class _Failing:
    """A stuck call's hook that keeps raising: when it was last logged, and its failures since."""

    __slots__ = ("kind", "logged", "since", "total")

    def __init__(self, kind: str, now: float) -> None:
        self.kind, self.logged, self.since, self.total = kind, now, 0, 1


class Watchdog:
    """Reads `running` every `every` seconds (a quarter of `bound_s`, at most `ROUND_S`) on a thread of
    its own. A call of one of `servicers` that has run `bound_s` or more is stuck: told once,
    in a `call_stuck` error line with `describe(call)`'s fields, `count(call)` and
    `on_change(True)` when the first call is stuck, `on_change(False)` once every stuck call has
    ended (health). Those verdicts (`look`) wait for nothing: the hooks that follow them (`hand`),
    `on_stuck(thread id, call)` (the command service sets its command aside there) and
    `on_ended(thread id, call)` when a stuck call ends after all, run on a second thread, as a
    Redis that hangs may hold each for seconds: on the verdicts' thread they held the next stuck
    call's line and health for as long. An `on_stuck` that raises (Redis away) or returns False
    (the call does not yet do what the hook looks for: it waits for a lock, then loops) is asked
    again each round while its call runs; a hook that keeps raising is logged with its traceback
    the first time, then at most once every `HOOK_FAILED_EVERY_S` with the count meanwhile."""

    def __init__(self, bound_s: float, on_change: Callable[[bool], None], *,
                 servicers: Collection[Any] = (),
                 describe: Callable[[Running], dict[str, Any]] = lambda call: {},
                 count: Callable[[Running], None] = lambda call: None,
                 on_stuck: Callable[[int, Running], bool | None] | None = None,
                 on_ended: Callable[[int, Running], None] | None = None,
                 every: float | None = None,
                 running: dict[int, tuple[Any, ...] | None] = RUNNING,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not bound_s > 0:
            raise ValueError(f"a stuck call's bound is more than 0 seconds, not {bound_s}")
        self.bound_s = bound_s
        self._on_change = on_change
        self._servicers = tuple(servicers)
        self._describe = describe
        self._count = count
        self._on_stuck = on_stuck
        self._on_ended = on_ended
        self._every = every if every is not None else min(ROUND_S, bound_s / 4)
        self._running = running
        self._clock = clock
        self._stuck: dict[int, tuple[Any, ...]] = {}  # written by `look` only
        self._told: deque[tuple[bool, int, tuple[Any, ...]]] = deque()  # (stuck?, thread, call) for `hand`, in order
        self._unhanded: dict[int, tuple[Any, ...]] = {}  # stuck calls `on_stuck` is to be asked about again
        self._failing: dict[tuple[int, str], _Failing] = {}  # (thread, hook) -> a hook that keeps raising
        self._stop = threading.Event()
        self._wake = threading.Event()  # a round looked: the hooks' thread hands on what it told
        self._thread: threading.Thread | None = None
        self._hands: threading.Thread | None = None
        self._looking = threading.Lock()  # one `look` at a time (the last look after a round late)
        self._handing = threading.Lock()  # one `hand` at a time, in the order told
        self._last_look = threading.Lock()  # one `finish` at a time (a server stopped twice)

    @property
    def stuck(self) -> int:
        """Calls stuck now (as of the last `look`)."""
        return len(self._stuck)

    def under_way(self) -> int:
        """Calls of its servicers running now, stuck or not: after the server has stopped, those
        that will never end (`Running`'s thread is not one a process can leave while it runs)."""
        return sum(1 for raw in list(self._running.values())
                   if raw is not None and (not self._servicers or any(raw[1] is s for s in self._servicers)))

    def overdue(self, now: float | None = None) -> int:
        """Calls of its servicers under way that have run `bound_s` or more (at `now`): stuck,
        whether or not a round of `check` has told them yet."""
        now = self._clock() if now is None else now
        return sum(1 for raw in list(self._running.values())
                   if raw is not None and now - raw[0] >= self.bound_s
                   and (not self._servicers or any(raw[1] is s for s in self._servicers)))

    def check(self, now: float | None = None) -> int:
        """One round on the caller's thread (at `now`, a `time.monotonic()`): `look`, then `hand`;
        returns how many calls are stuck."""
        now = self._clock() if now is None else now
        stuck = self.look(now)
        self.hand(now)
        return stuck

    def look(self, now: float | None = None) -> int:
        """The verdicts of one look at the calls under way: the new stuck ones told, those that
        ended forgotten, health told; their hooks left to `hand`. Returns how many are stuck."""
        now = self._clock() if now is None else now
        with self._looking:
            before = bool(self._stuck)
            calls = list(self._running.items())  # one C call under the GIL: no thread adds a key meanwhile
            for ident, raw in calls:
                told = self._stuck.get(ident)
                if told is not None and raw is not told:
                    del self._stuck[ident]
                    ended = Running._make(told)
                    log.warning("stuck_call_ended", rpc=ended.rpc, seconds=round(now - ended.began, 1),
                                **self._fields(ended))
                    self._told.append((False, ident, told))
                if raw is None or raw is told or now - raw[0] < self.bound_s:
                    continue
                call = Running._make(raw)
                if self._servicers and not any(call.servicer is s for s in self._servicers):
                    continue  # another server's, in a process that runs several (the tests)
                self._stuck[ident] = raw
                thread = next((t for t in threading.enumerate() if t.ident == ident), None)
                log.error("call_stuck", rpc=call.rpc, seconds=round(now - call.began, 1), bound_s=self.bound_s,
                          thread=thread.name if thread is not None else str(ident), where=where(ident),
                          **self._fields(call))
                try:
                    self._count(call)
                except Exception:  # noqa: BLE001 - a count lost must not end the watch
                    log.exception("stuck_call_not_counted")
                self._told.append((True, ident, raw))
            if bool(self._stuck) != before:
                self._on_change(bool(self._stuck))
            return len(self._stuck)

    def hand(self, now: float | None = None, until: float | None = None) -> bool:
        """The hooks of what `look` told, in its order (a call's end after its being stuck), then
        `on_stuck` again for the stuck calls it could not hand on yet. None begun once the clock
        is past `until`, nor on the hooks' thread once stopped (the last look's to hand on):
        returns whether it handed on everything."""
        with self._handing:
            return self._handed(now, until)

    def _handed(self, now: float | None, until: float | None) -> bool:
        """`hand`'s work, the caller holding `_handing`."""
        asked: set[int] = set()
        while self._told:
            if self._cut(until):
                return False
            stuck, ident, raw = self._told.popleft()
            call = Running._make(raw)
            if stuck:
                asked.add(ident)
                self._hand(ident, raw, now)
            else:
                if self._unhanded.get(ident) is raw:
                    del self._unhanded[ident]
                for key in [key for key in self._failing if key[0] == ident]:
                    del self._failing[key]  # its hooks' failures end with it
                self._hook(self._on_ended, ident, call, now)
        for ident, raw in list(self._unhanded.items()):
            if ident in asked:
                continue
            if self._cut(until):
                return False
            if self._stuck.get(ident) is not raw:  # ended: its `on_ended` is told, or comes
                if self._unhanded.get(ident) is raw:
                    del self._unhanded[ident]
                continue
            self._hand(ident, raw, now)
        return True

    def _cut(self, until: float | None) -> bool:
        """Whether `hand` stops before its next hook (see there)."""
        if until is not None and self._clock() >= until:
            return True
        return self._stop.is_set() and threading.current_thread() is self._hands

    def _hand(self, ident: int, raw: tuple[Any, ...], now: float | None) -> None:
        """`on_stuck`, and whether to ask it again next round (it raised, or said False)."""
        if self._on_stuck is None:
            return
        self._unhanded[ident] = raw
        if self._hook(self._on_stuck, ident, Running._make(raw), now) is not False:
            del self._unhanded[ident]

    def _hook(self, hook: Callable[[int, Running], bool | None] | None, ident: int, call: Running,
              now: float | None = None) -> bool | None:
        """What `hook` returns; False when it raised. A hook that raises round after round (Redis
        away) is one line with its traceback, then one line every `HOOK_FAILED_EVERY_S` at most
        with the failures meanwhile, or at once if it raises something else; once it answers,
        one `stuck_call_hook_recovered` line. Each names the call as `call_stuck` does."""
        if hook is None:
            return None
        name = getattr(hook, "__name__", "?")
        key = (ident, name)
        try:
            answer = hook(ident, call)
        except Exception as exc:  # noqa: BLE001 - the watch goes on, and health is still told
            now = self._clock() if now is None else now
            kind = type(exc).__name__
            failing = self._failing.get(key)
            if failing is None or failing.kind != kind:
                log.exception("stuck_call_hook_failed", rpc=call.rpc, hook=name,
                              failures=1 if failing is None else failing.since + 1, **self._fields(call))
                if failing is None:
                    self._failing[key] = _Failing(kind, now)
                else:
                    failing.kind, failing.logged, failing.since = kind, now, 0
                    failing.total += 1
                return False
            failing.total += 1
            failing.since += 1
            if now - failing.logged >= HOOK_FAILED_EVERY_S:
                log.error("stuck_call_hook_failed", rpc=call.rpc, hook=name, failures=failing.since,
                          error=f"{kind}: {exc}"[:200], **self._fields(call))
                failing.logged, failing.since = now, 0
            return False
        failing = self._failing.pop(key, None)
        if failing is not None:
            log.info("stuck_call_hook_recovered", rpc=call.rpc, hook=name, failures=failing.total,
                     **self._fields(call))
        return answer

    def _fields(self, call: Running) -> dict[str, Any]:
        """What `describe` says of `call`; nothing when it fails (the line matters more)."""
        try:
            return self._describe(call)
        except Exception as exc:  # noqa: BLE001
            return {"describe_failed": f"{type(exc).__name__}: {exc}"[:200]}

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="stuck-calls", daemon=True)
            self._hands = threading.Thread(target=self._run_hands, name="stuck-call-hooks", daemon=True)
            self._thread.start()
            self._hands.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            try:
                self.look()
            except Exception:  # noqa: BLE001 - a bug here must not end the watch silently
                log.exception("stuck_call_check_failed")
            self._wake.set()

    def _run_hands(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.hand()
            except Exception:  # noqa: BLE001
                log.exception("stuck_call_check_failed")

    def stop(self) -> None:
        self._halt()
        if self._hands is not None and self._hands is not threading.current_thread():
            self._hands.join(timeout=self._every + 1)

    def _halt(self) -> None:
        """The watch stopped (its thread joined), and the hooks' thread told to stop at its next
        hook: what it has not handed on is left in `_told` for the last look."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self._every + 1)

    def finish(self) -> None:
        """Stop, then one last look (a server's drain over): the stuck calls that ended in it are
        told ended (`on_ended`), which the stopped watch would never tell. Its hooks once the
        one under way on the hooks' thread (a set-aside waiting on Redis) has returned, in the
        order told (a lift after its set-aside), and none begun past `LAST_LOOK_S` from the stop
        (the exit waits for them): those left are named in `stuck_call_last_look_skipped` (the
        hook under way outlasted it) or `stuck_call_last_look_cut`."""
        until = self._clock() + LAST_LOOK_S
        self._halt()
        with self._last_look:
            try:
                self.look()
            except Exception:  # noqa: BLE001 - the stop goes on
                log.exception("stuck_call_check_failed")
            # The lock's wait is in real seconds, the deadline in the watch's clock's.
            if not self._handing.acquire(timeout=max(0.0, until - self._clock())):
                log.warning("stuck_call_last_look_skipped", **self._left())
                return
            try:
                if not self._handed(None, until):
                    log.warning("stuck_call_last_look_cut", **self._left())
            except Exception:  # noqa: BLE001 - the stop goes on
                log.exception("stuck_call_check_failed")
            finally:
                self._handing.release()
        if self._hands is not None and self._hands is not threading.current_thread():
            self._hands.join(timeout=max(0.0, until - self._clock()))  # it has nothing more to hand on

    def _left(self) -> dict[str, Any]:
        """The verdicts a last look did not hand on, as its line names them: an operator lifts
        (`ended`) or sets aside by hand what the service would have (docs/operations.md)."""
        left = list(self._told)
        return {"left": len(left),
                "calls": [{"rpc": call.rpc, "ended": not stuck, **self._fields(call)}
                          for stuck, call in ((stuck, Running._make(raw)) for stuck, _, raw in left[:16])]}
