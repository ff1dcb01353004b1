"""The replay service's metrics: exports, imports and verifications by result (docs/metrics.md)."""

from __future__ import annotations

from typing import Any

from opentelemetry.metrics import Meter

from famiglia.telemetry.metrics import meter


class ReplayMetrics:
    """`result`: `ok`; `diverged` (a verification that found a divergence); `unverified` (an
    import stored with `allow_unverified` whose verification failed); or `refused`."""

    def __init__(self, meter: Meter) -> None:
        self._counters = {
            "export": meter.create_counter("famiglia.replay.exports", unit="{match}",
                                           description="matches exported (ExportMatch)"),
            "import": meter.create_counter("famiglia.replay.imports", unit="{match}",
                                           description="exports imported (ImportMatch)"),
            "verify": meter.create_counter("famiglia.replay.verifications", unit="{match}",
                                           description="matches and files verified (VerifyMatch)"),
        }
        self._results: dict[str, dict[str, Any]] = {}

    def done(self, what: str, result: str) -> None:
        """`what`: export, import or verify."""
        attributes = self._results.get(result)
        if attributes is None:
            attributes = self._results[result] = {"result": result}
        self._counters[what].add(1, attributes)


def replay_metrics() -> ReplayMetrics | None:
    """The service's instruments, or None when metrics are off (then nothing is recorded)."""
    found = meter("famiglia.replay")
    return None if found is None else ReplayMetrics(found)
