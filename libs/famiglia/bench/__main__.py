"""`make bench` / `make bench-quick`: every figure beside its baseline from the same run.

Results print as one table and are written to bench-results/<time>.json for comparison.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from famiglia.bench import append, core
from famiglia.bench.harness import Report

# Benchmarks of other parts, each a module with `run(report, quick)` (optional).
EXTRA = ("famiglia.bench.replay", "famiglia.bench.projection", "famiglia.bench.tournament", "famiglia.bench.strength")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="famiglia.bench")
    parser.add_argument("--quick", action="store_true", help="fewer, shorter repeats (~1 minute on 2 cores)")
    parser.add_argument("--only", default="", help="comma-separated sections: engines,append,command,flatness,extra")
    args = parser.parse_args(argv)
    only = set(filter(None, args.only.split(",")))
    console = Console(width=max(140, Console().width))
    report = Report()
    server, url = core.redis_for_bench()
    try:
        sections = [
            ("engines", lambda: core.bench_engines(report, args.quick)),
            ("append", lambda: append.bench_append(report, url, args.quick)),
            ("command", lambda: core.bench_command_path(report, url, args.quick)),
            ("flatness", lambda: core.bench_flatness(report, url, args.quick)),
        ]
        for name, run in sections:
            if only and name not in only:
                continue
            console.print(f"[dim]benchmark: {name}…[/]")
            run()
        if not only or "extra" in only:
            for module_name in EXTRA:
                try:
                    module = importlib.import_module(module_name)
                except ModuleNotFoundError:
                    continue
                if hasattr(module, "run"):
                    console.print(f"[dim]benchmark: {module_name}…[/]")
                    module.run(report, args.quick, redis_url=url)
    finally:
        server.stop()  # type: ignore[attr-defined]
    table = Table(title="famiglia benchmarks" + (" (quick)" if args.quick else ""))
    for col in ("figure", "value", "baseline", "ratio", "target", "ok", "notes"):
        table.add_column(col)
    for f in report.figures:
        base = "" if f.baseline is None else f"{f.baseline:,.1f} ({f.baseline_name})"
        ratio = "" if f.ratio is None else f"{f.ratio:.2f}"
        ok = "" if f.ok is None else ("[green]yes[/]" if f.ok else "[red]no[/]")
        spread = f" [{f.spread[0]:,.1f}–{f.spread[1]:,.1f}]" if f.spread != (0.0, 0.0) else ""
        table.add_row(f.name, f"{f.value:,.1f} {f.unit}{spread}", base, ratio, f.target, ok, f.notes)
    console.print(table)
    console.print(report.verdict())
    out = Path("bench-results") / f"{time.strftime('%Y%m%dT%H%M%S')}.json"
    report.to_json(out)
    console.print(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
