"""The replay service's metrics: exports, imports and verifications by result (docs/metrics.md)."""

from __future__ import annotations

from opentelemetry.metrics import Meter

from famiglia.telemetry.metrics import meter, tally


class ReplayMetrics:
    """`result`: `ok`; `diverged` (a verification that found a divergence); `unverified` (an
    import stored with `allow_unverified` whose verification failed); or `refused`."""

    def __init__(self, meter: Meter) -> None:
        self._tallies = {
            "export": tally(meter, "famiglia.replay.exports", ("result",), unit="{match}",
                            description="matches exported (ExportMatch)"),
            "import": tally(meter, "famiglia.replay.imports", ("result",), unit="{match}",
                            description="exports imported (ImportMatch)"),
            "verify": tally(meter, "famiglia.replay.verifications", ("result",), unit="{match}",
                            description="matches and files verified (VerifyMatch)"),
        }

    def done(self, what: str, result: str) -> None:
        """`what`: export, import or verify."""
        self._tallies[what].add((result,))


def replay_metrics() -> ReplayMetrics | None:
    """The service's instruments, or None when metrics are off (then nothing is recorded)."""
    found = meter("famiglia.replay")
    return None if found is None else ReplayMetrics(found)
