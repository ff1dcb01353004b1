"""The line `make bench` prints under its table: figures with a target, met or missed."""

from famiglia.bench.harness import Figure, Report


def test_the_verdict_counts_judged_figures_and_names_each_miss() -> None:
    report = Report()
    report.add(Figure("append", 68.0, "appends/s", baseline=100.0, target="ratio >= 0.70", ok=False))
    report.add(Figure("engine x", 250.0, "games/s", baseline=200.0, target=">= 200/s", ok=True))
    report.add(Figure("p99", 12.5, "ms", target="< 10 ms", ok=False))
    report.add(Figure("note only", 1.0, "events/s"))  # no target: not counted

    assert report.verdict() == ("targets met: 1 of 3; missed: append (0.68, ratio >= 0.70); "
                                "p99 (12.5 ms, < 10 ms)")


def test_the_verdict_when_every_target_is_met() -> None:
    report = Report()
    report.add(Figure("engine x", 250.0, "games/s", baseline=200.0, target=">= 200/s", ok=True))

    assert report.verdict() == "targets met: 1 of 1"


def test_a_figure_that_failed_to_measure_is_a_miss() -> None:
    report = Report()
    report.add(Figure.failure("tournament bot matches", "matches/min", ">= 100/min", "RuntimeError('stack down')"))

    assert report.figures[0].notes == "failed: RuntimeError('stack down')"
    assert report.verdict() == "targets met: 0 of 1; missed: tournament bot matches (failed, >= 100/min)"
