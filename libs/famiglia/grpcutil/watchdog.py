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


class Watchdog:
    """Reads `running` every `every` seconds (a quarter of `bound_s`, at most `ROUND_S`) on a thread of
    its own. A call of one of `servicers` that has run `bound_s` or more is stuck: told once,
    in a `call_stuck` error line with `describe(call)`'s fields, `count(call)` and
    `on_stuck(thread id, call)` (the command service sets its command aside there, before
    health tells anyone); `on_ended(thread id, call)` when a stuck call ends after all;
    `on_change(True)` when the first call is stuck, `on_change(False)` once every stuck call has
    ended. An `on_stuck` that raises (Redis away) or returns False (the call does not yet do what
    the hook looks for: it waits for a lock, then loops) is asked again each round while its call
    runs: told once, it was never asked again, and the command it missed went on to stall the
    next replica."""

    def __init__(self, bound_s: float, on_change: Callable[[bool], None], *,
                 servicers: Collection[Any] = (),
                 describe: Callable[[Running], dict[str, Any]] = lambda call: {},
                 count: Callable[[Running], None] = lambda call: None,
                 on_stuck: Callable[[int, Running], bool | None] | None = None,
                 on_ended: Callable[[int, Running], None] | None = None,
                 every: float | None = None,
                 running: dict[int, tuple[Any, ...] | None] = RUNNING) -> None:
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
        self._stuck: dict[int, tuple[Any, ...]] = {}
        self._unhanded: set[int] = set()  # stuck calls `on_stuck` is to be asked about again
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_look = threading.Lock()  # one `finish` at a time (a server stopped twice)

    @property
    def stuck(self) -> int:
        """Calls stuck now (as of the last `check`)."""
        return len(self._stuck)

    def under_way(self) -> int:
        """Calls of its servicers running now, stuck or not: after the server has stopped, those
        that will never end (`Running`'s thread is not one a process can leave while it runs)."""
        return sum(1 for raw in list(self._running.values())
                   if raw is not None and (not self._servicers or any(raw[1] is s for s in self._servicers)))

    def overdue(self, now: float | None = None) -> int:
        """Calls of its servicers under way that have run `bound_s` or more (at `now`): stuck,
        whether or not a round of `check` has told them yet."""
        now = time.monotonic() if now is None else now
        return sum(1 for raw in list(self._running.values())
                   if raw is not None and now - raw[0] >= self.bound_s
                   and (not self._servicers or any(raw[1] is s for s in self._servicers)))

    def check(self, now: float | None = None) -> int:
        """One look at the calls under way (at `now`, a `time.monotonic()`): the new stuck ones
        told, those that ended forgotten; returns how many are stuck."""
        now = time.monotonic() if now is None else now
        before = bool(self._stuck)
        calls = list(self._running.items())  # one C call under the GIL: no thread adds a key meanwhile
        for ident, raw in calls:
            told = self._stuck.get(ident)
            if told is not None and raw is not told:
                del self._stuck[ident]
                self._unhanded.discard(ident)
                ended = Running._make(told)
                log.warning("stuck_call_ended", rpc=ended.rpc, seconds=round(now - ended.began, 1),
                            **self._fields(ended))
                self._hook(self._on_ended, ident, ended)
            if raw is not None and raw is told and ident in self._unhanded:
                self._hand(ident, Running._make(raw))
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
            self._hand(ident, call)
        if bool(self._stuck) != before:
            self._on_change(bool(self._stuck))
        return len(self._stuck)

    def _hand(self, ident: int, call: Running) -> None:
        """`on_stuck`, and whether to ask it again next round (it raised, or said False)."""
        if self._on_stuck is None:
            return
        self._unhanded.add(ident)
        if self._hook(self._on_stuck, ident, call) is not False:
            self._unhanded.discard(ident)

    @staticmethod
    def _hook(hook: Callable[[int, Running], bool | None] | None, ident: int, call: Running) -> bool | None:
        """What `hook` returns; False when it raised."""
        if hook is None:
            return None
        try:
            return hook(ident, call)
        except Exception:  # noqa: BLE001 - the watch goes on, and health is still told
            log.exception("stuck_call_hook_failed", rpc=call.rpc, hook=getattr(hook, "__name__", "?"))
            return False

    def _fields(self, call: Running) -> dict[str, Any]:
        """What `describe` says of `call`; nothing when it fails (the line matters more)."""
        try:
            return self._describe(call)
        except Exception as exc:  # noqa: BLE001
            return {"describe_failed": f"{type(exc).__name__}: {exc}"[:200]}

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="stuck-calls", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            try:
                self.check()
            except Exception:  # noqa: BLE001 - a bug here must not end the watch silently
                log.exception("stuck_call_check_failed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self._every + 1)

    def finish(self) -> None:
        """Stop, then one last look (a server's drain over): the stuck calls that ended in it are
        told ended (`on_ended`), which the stopped watch would never tell. Not while a round of
        its own is still under way (a hook waiting on Redis): two looks at once would tell twice."""
        self.stop()
        if self._thread is not None and self._thread.is_alive():
            log.warning("stuck_call_last_look_skipped")
            return
        with self._last_look:
            try:
                self.check()
            except Exception:  # noqa: BLE001 - the stop goes on
                log.exception("stuck_call_check_failed")
