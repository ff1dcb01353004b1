"""The benchmark harness: each figure is measured beside its baseline in the same run,
repeated, and reported as a median with min-max, the ratio and the target."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Figure:
    name: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    target: str = ""
    ok: bool | None = None
    spread: tuple[float, float] = (0.0, 0.0)
    notes: str = ""
    error: str = ""

    @classmethod
    def failure(cls, name: str, unit: str, target: str, error: str) -> Figure:
        """A figure whose measurement failed: a missed target, with the error in its notes."""
        error = error[:300]
        return cls(name, 0.0, unit, target=target, ok=False, notes=f"failed: {error}", error=error)

    @property
    def ratio(self) -> float | None:
        if self.baseline in (None, 0):
            return None
        return self.value / self.baseline  # type: ignore[operator]


@dataclass
class Report:
    figures: list[Figure] = field(default_factory=list)

    def add(self, figure: Figure) -> Figure:
        self.figures.append(figure)
        return figure

    def verdict(self) -> str:
        """One line under the table: how many figures with a target met it, and which missed,
        each with its measure against the target (an operator's answer without reading rows)."""
        judged = [f for f in self.figures if f.ok is not None]
        missed = [f for f in judged if not f.ok]
        line = f"targets met: {len(judged) - len(missed)} of {len(judged)}"
        if missed:
            line += "; missed: " + "; ".join(f"{f.name} ({_measure(f)}, {f.target})" for f in missed)
        return line

    def to_json(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = []
        for f in self.figures:
            row = asdict(f)
            row["ratio"] = f.ratio
            rows.append(row)
        path.write_text(json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                    "figures": rows}, indent=2))


def _measure(f: Figure) -> str:
    """What a figure measured, as its target speaks of it."""
    if f.error:
        return "failed"
    if f.ratio is not None and f.target.startswith("ratio"):
        return f"{f.ratio:.2f}"
    return f"{f.value:,.1f} {f.unit}"


def repeat(fn: Callable[[], float], times: int, warmup: int = 1) -> tuple[float, float, float]:
    """Median, min and max of `times` runs of fn (which returns a measurement)."""
    for _ in range(warmup):
        fn()
    values = [fn() for _ in range(times)]
    return statistics.median(values), min(values), max(values)


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def redis_pid(redis_url: str) -> int:
    """redis-server's pid, as it reports it (0 when it cannot be asked): on the same machine
    its CPU is part of what a figure's work costs."""
    import redis

    try:
        client = redis.Redis.from_url(redis_url)
        try:
            return int(client.info("server").get("process_id", 0))
        finally:
            client.close()
    except (redis.RedisError, OSError, ValueError):
        return 0
