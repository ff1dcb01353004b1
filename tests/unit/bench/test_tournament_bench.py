"""The tournament benchmark's measurement code on a tiny workload: figures come out, sane.

No timing is asserted. The stack test starts every service for two grifters matches (10-15 s,
most of it starting the stack), so it is marked slow."""

from __future__ import annotations

import os

import pytest

from famiglia.bench.harness import Report
from famiglia.bench.tournament import StackRun, add_figure, engine_only, group_cpu, measure, tournament_spec


def test_spec_covers_every_game_and_baseline_plays_it() -> None:
    spec = tournament_spec(8)
    assert spec.entrants == ("random", "heuristic")
    assert spec.matches_per_game * len(spec.games) >= 8
    small = tournament_spec(1, games=["grifters"])
    seconds, commands = engine_only(small)
    assert seconds > 0 and commands > 0


def test_add_figure_and_cpu_accounting() -> None:
    cpu = group_cpu({"me": os.getpgid(0)})
    assert cpu["me"] > 0
    report = Report()
    run = StackRun(10, 30.0, 900, {"command": 5.0, "bots-worker": 20.0})
    figure = add_figure(report, {"rates": [20.0], "base_rates": [200.0], "runs": [run], "planned": 10,
                                 "base_cpu_per_move": [0.001]})
    assert report.figures == [figure]
    assert figure.value == 20.0 and figure.baseline == 200.0 and figure.ok is False
    assert figure.unit == "matches/min" and figure.target == ">= 100/min"
    assert "bots-worker" in figure.notes
    assert "stack = 27.8x" in figure.notes  # 25 CPU s over 900 moves against 1 ms per move
    cores = os.cpu_count() or 1
    assert f"CPU-bound on {cores} free cores: {60 * cores / (25 / 900 * 90):,.0f} matches/min" in figure.notes


@pytest.mark.slow
def test_measure_on_the_stack() -> None:
    result = measure(2, 1, games=["grifters"], warmup_matches=0)
    report = Report()
    figure = add_figure(report, result)
    (run,) = result["runs"]  # type: ignore[misc]
    assert run.matches == 2 and run.moves > 0
    assert figure.value > 0 and figure.baseline is not None and figure.baseline > 0
    assert sum(run.cpu.values()) > 0


def test_a_stack_whose_free_port_was_taken_meanwhile_starts_again_on_new_ports(monkeypatch) -> None:
    """`free_port` hands out a port that another program (the suite runs two workers) may bind
    before the stack's service does: the bench failed "port ... for projection is taken". It
    starts a new stack on new ports, and gives up only after `PORT_TRIES`."""
    from famiglia.bench import tournament
    from famiglia.localstack.stack import Stack

    tried: list[str] = []
    downs: list[int] = []

    def up(self, *, log=print) -> None:
        tried.append(os.environ["FAMIGLIA_PROJECTION_ADDR"])
        if len(tried) < taken_times:
            raise SystemExit(f"port {tried[-1]} for projection is taken; stop it or set its FAMIGLIA_*_ADDR")

    monkeypatch.setattr(Stack, "up", up)
    monkeypatch.setattr(Stack, "down", lambda self, *, log=print: downs.append(1))
    monkeypatch.setattr(Stack, "running", lambda self: {})
    taken_times = 2
    with tournament.private_stack(1) as env:
        assert env["FAMIGLIA_PROJECTION_ADDR"] == tried[-1]
    assert len(tried) == 2 and tried[0] != tried[1] and len(downs) == 2  # each stack torn down
    tried.clear()
    taken_times = tournament.PORT_TRIES + 1
    with pytest.raises(RuntimeError, match="is taken"):
        with tournament.private_stack(1):
            pass
    assert len(tried) == tournament.PORT_TRIES
