"""The replay benchmark runs end to end on a short match (a smoke test, not a timing)."""

from __future__ import annotations

from famiglia.bench.harness import Report
from famiglia.bench.replay import run


def test_the_replay_benchmark_reports_fold_rates_and_state_at_latency() -> None:
    report = Report()
    run(report, quick=True, events=300, every=16)
    names = [f.name for f in report.figures]
    assert any(n.startswith("replay fold") and "toy" in n for n in names)
    assert any(n.startswith("GetStateAt p50") for n in names)
    assert all(f.value > 0 for f in report.figures if "failed" not in f.notes)
