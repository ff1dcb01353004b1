"""Waiting for a reply on a socket by polling it, while a CPU of the machine is idle.

A thread that sleeps until its reply comes pays for it when it wakes: the switch out and
back in, and on a virtual machine a CPU gone idle meanwhile (whose caches the host may
give to other guests) runs the code after it more slowly. When the reply is due within
tens of microseconds — Redis's answer to an append — polling for it costs less, but only
while some CPU would otherwise be idle: on a busy machine the polling takes CPU time from
the very processes that must answer (Redis) or call next (the clients). So the poll is
bounded, and made only while the machine's idle CPUs over the last tenth of a second, from
/proc/stat and not counting the process's own polling as work, come to at least
`POLL_WHEN_IDLE_CPUS`, and no more threads are ready to run at that instant than there are
CPUs (/proc/loadavg); between two reads it yields its CPU to whatever else is ready there
(Redis, woken by the request, may be queued behind it). Without those files it never
polls. Measured in docs/performance-command.md, "Session 12".
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
_sched_yield = getattr(os, "sched_yield", lambda: None)

POLL_WHEN_IDLE_CPUS = 0.6
"""Poll only while at least this many of the machine's CPUs were idle over the last window:
on the 2-core reference machine one client's commands leave ~0.8 idle, four clients' ~0.3."""


class IdleCpus:
    """How many of the machine's CPUs were idle over the last window, from /proc/stat's
    first line (read again at most once a window: a read costs a few microseconds), with
    the time this process spent polling counted as idle."""

    def __init__(self, path: str = "/proc/stat", running_path: str = "/proc/loadavg", window: float = 0.1,
                 cpus: int | None = None) -> None:
        self.window = window
        self.cpus = cpus or os.cpu_count() or 1
        self.idle = 0.0  # idle CPUs over the last complete window
        self.polled = 0.0  # seconds spent polling in the current window
        self._fd, self._running_fd = _open(path), _open(running_path)
        self._at = time.perf_counter()
        self._ticks = self._read()

    def _read(self) -> tuple[int, int] | None:
        """(idle ticks, all ticks) so far, or None when they cannot be read."""
        if self._fd is None:
            return None
        try:
            line = os.pread(self._fd, 512, 0).split(b"\n", 1)[0].split()
            ticks = [int(x) for x in line[1:9]]  # user nice system idle iowait irq softirq steal
        except (OSError, ValueError):
            return None
        if line[:1] != [b"cpu"] or len(ticks) < 5:
            return None
        return ticks[3] + ticks[4], sum(ticks)

    def spare(self, now: float) -> float:
        """Idle CPUs over the last window that ended before `now` (a perf_counter time)."""
        elapsed = now - self._at
        if elapsed >= self.window:
            ticks = self._read()
            if ticks is None or self._ticks is None:
                self.idle = 0.0
            else:
                idle, total = ticks[0] - self._ticks[0], ticks[1] - self._ticks[1]
                if total > 0:  # else no tick passed: keep the last figure
                    self.idle = self.cpus * idle / total + self.polled / elapsed
            self._at, self._ticks, self.polled = now, ticks, 0.0
        return self.idle

    def running(self) -> int:
        """Threads of the machine running or ready to run this instant (the caller is one),
        from /proc/loadavg's fourth field; a large number when it cannot be read."""
        if self._running_fd is None:
            return 1 << 30
        try:
            return int(os.pread(self._running_fd, 128, 0).split()[3].split(b"/")[0])
        except (OSError, ValueError, IndexError):
            return 1 << 30

    def poll_now(self, now: float) -> bool:
        """Whether a wait starting at `now` should poll: the last window had idle CPUs and
        this instant no more threads are ready to run than there are CPUs (the window alone
        lags a rise of load by up to its length). A poll that runs out of budget does not
        stop the next ones: on a quiet machine one reply in a hundred is slow."""
        return self.spare(now) >= POLL_WHEN_IDLE_CPUS and self.running() <= self.cpus


def _open(path: str) -> int | None:
    try:
        return os.open(path, os.O_RDONLY)
    except OSError:
        return None


_MACHINE: list[IdleCpus] = []


def machine() -> IdleCpus:
    """The process's one reader of the machine's idle CPUs."""
    if not _MACHINE:
        _MACHINE.append(IdleCpus())
    return _MACHINE[0]


def recv_polling(sock: Any, buffer: Any, budget: float) -> int | None:
    """Bytes received into `buffer` by polling `sock` for up to `budget` seconds, or None
    when nothing came in that time (the caller then waits its usual way). A closed peer
    reads as 0, as `recv_into` says it. The time spent counts as idle in `machine()`."""
    if sock.gettimeout() is not None:  # Python would first wait in poll() for the timeout
        return None
    start = time.perf_counter()
    deadline = start + budget
    try:
        while True:
            try:
                return int(sock.recv_into(buffer, 0, _DONTWAIT))
            except (BlockingIOError, InterruptedError):
                if time.perf_counter() >= deadline:
                    return None
                # The send woke Redis as for a caller about to sleep, so the kernel may have
                # queued it on this very CPU: let it run rather than poll in its way.
                _sched_yield()
    finally:
        if _MACHINE:
            _MACHINE[0].polled += time.perf_counter() - start
