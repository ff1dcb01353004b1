"""The projection benchmark's measurement code on a tiny workload: figures come out, sane.

No timing is asserted: only that every figure exists with plausible fields."""

from __future__ import annotations

import math

from famiglia.bench.harness import Report
from famiglia.bench.projection import (
    Drain,
    Window,
    add_figures,
    add_projector_figures,
    interleaved_batches,
    measure,
    measure_projector,
    recorded_appends,
)


def test_add_figures_from_windows() -> None:
    report = Report()
    windows = [Window(1.0, 3, [5.0, 7.0, 40.0], [1.0, 2.0, 3.0]), Window(1.0, 2, [6.0, 8.0], [1.0, 1.0])]
    figures = add_figures(report, {"windows": windows, "paced": windows[:1], "drain": Drain(100, 0.5, 0.01),
                                   "clients": 2})
    assert [f.name for f in report.figures] == [f.name for f in figures]
    lag, paced, drain = figures
    assert lag.unit == paced.unit == "ms" and lag.target == "< 100 ms"
    assert lag.spread[0] <= lag.value <= lag.spread[1]
    assert lag.baseline_name == "raw XREADGROUP+XACK" and lag.ok is True
    assert drain.value == 200 and drain.baseline == 10_000 and drain.unit == "events/s"


def test_measure_tiny_workload(redis_server) -> None:  # type: ignore[no-untyped-def]
    result = measure(redis_server.url, seconds=0.5, repeats=1, clients=1, drain_seconds=0.5)
    report = Report()
    lag, paced, drain = add_figures(report, result)
    for figure in (lag, paced):
        assert figure.value > 0 and math.isfinite(figure.value)
        assert figure.baseline is not None and figure.baseline > 0
        assert figure.ok is not None
    (window,) = result["windows"]  # type: ignore[misc]
    assert window.appended > 0 and len(window.raw_lags) >= window.appended
    assert drain.value > 0 and drain.baseline is not None and drain.baseline > 0
    assert "backlog" in drain.name


def test_projector_alone_on_a_tiny_workload() -> None:
    appends = recorded_appends("goodcritters", 2)
    events = sum(len(a) for match in appends for a in match)
    batches = interleaved_batches(appends, 30)
    assert sum(len(b) for b in batches) == events and all(len(b) <= 30 for b in batches)
    moves = interleaved_batches(appends, 0)
    assert len(moves) == sum(len(match) for match in appends)  # one append a batch
    runs = measure_projector(matches=2, events_per_batch=30, repeats=1)
    report = Report()
    load, tournament = add_projector_figures(report, runs)
    for figure, run_batches in ((load, len(batches)), (tournament, len(moves))):
        [run] = runs[figure.name.removeprefix("projector alone, ")]
        assert run.events == events and run.batches == run_batches  # every event applied, once
        assert figure.value > 0 and figure.unit == "events/CPU s"
