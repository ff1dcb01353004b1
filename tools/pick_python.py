"""Print the fastest build of this Python version found on PATH, for `make` to build .venv with.

    python3 tools/pick_python.py            # prints an interpreter's path

Machines often carry two builds of the same CPython: a distribution's (built with
profile-guided optimisation and LTO, as the official Docker images are) and a
pyenv or hand-made one built without them, which runs famiglia's pure-Python engines
and services 3-10 % slower (more on a busy machine). PATH order says nothing about which is which, and the
build flags are not reliably readable from `sysconfig`, so each candidate runs the
same short pure-Python workload and the one with the least CPU time wins.

Only builds of the version of the interpreter running this script are candidates
(a faster build of the Python asked for, never another Python), and only those that
can make a virtualenv with pip. Standard library only: it runs before .venv exists.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: What a candidate runs: function calls, attribute and dict traffic, small tuples — the
#: shape of an engine's decide/evolve. Prints the least CPU seconds of five repeats.
WORKLOAD = r"""
import time
class S:
    __slots__ = ("a", "b")
    def __init__(self, a, b): self.a, self.b = a, b
def step(s, d, i):
    d[i & 63] = (s.a + i, s.b)
    return S(s.b, s.a + 1)
def run():
    s, d = S(0, 1), {}
    for i in range(100000):
        s = step(s, d, i)
best = None
for _ in range(5):
    t = time.process_time(); run(); t = time.process_time() - t
    best = t if best is None or t < best else best
print(best)
"""

PROBE = "import sys, ensurepip, venv; print(sys.executable); print('%d.%d' % sys.version_info[:2])"


@dataclass(frozen=True)
class Candidate:
    executable: str
    version: str


def names_for(version: str) -> list[str]:
    return [f"python{version}", "python3"]


def on_path(names: Sequence[str], path: str | None = None) -> list[str]:
    """Every executable of these names in every PATH directory, in PATH order."""
    found = []
    for directory in (path if path is not None else os.environ.get("PATH", "")).split(os.pathsep):
        for name in names:
            candidate = os.path.join(directory or ".", name)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                found.append(candidate)
    return found


def _run(executable: str, code: str, timeout: float = 30.0) -> str | None:
    try:
        done = subprocess.run([executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def probe(executable: str) -> Candidate | None:
    """The real interpreter behind `executable` (a pyenv shim names another), or None when
    it cannot make a virtualenv."""
    out = _run(executable, PROBE)
    if out is None:
        return None
    lines = out.split()
    if len(lines) != 2:
        return None
    return Candidate(os.path.realpath(lines[0]), lines[1])


def candidates(version: str, executables: Iterable[str]) -> list[Candidate]:
    seen: dict[str, Candidate] = {}
    for executable in executables:
        found = probe(executable)
        if found is not None and found.version == version and found.executable not in seen:
            seen[found.executable] = found
    return list(seen.values())


def cpu_seconds(candidate: Candidate) -> float | None:
    out = _run(candidate.executable, WORKLOAD)
    try:
        return float(out) if out is not None else None
    except ValueError:
        return None


def fastest(timed: Sequence[tuple[Candidate, float | None]]) -> Candidate | None:
    """The candidate with the least CPU time; the first listed when none could be timed
    (ties keep PATH order)."""
    usable = [(seconds, i, c) for i, (c, seconds) in enumerate(timed) if seconds is not None]
    if usable:
        return min(usable)[2]
    return timed[0][0] if timed else None


def main() -> int:
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    found = candidates(version, [sys.executable, *on_path(names_for(version))])
    chosen = fastest([(c, cpu_seconds(c)) for c in found]) if len(found) > 1 else (found or [None])[0]
    print(chosen.executable if chosen is not None else sys.executable)
    return 0


if __name__ == "__main__":
    sys.exit(main())
