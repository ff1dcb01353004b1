"""Replay benchmark: how fast matches fold, and what GetStateAt costs at the end of a long one.

    python -m famiglia.bench.replay [--events 20000] [--every 64]

Figures, each beside its baseline from the same run:

- events folded per second by a replay timeline (decode + evolve + snapshots),
  against the engine's bare evolve over already decoded events;
- GetStateAt latency (p50/p99) at the end of a long match, through the
  replay use case on an event store, against refolding the match from its
  start (what every question would cost without the snapshot cache);
- the first (cold) GetStateAt, which loads and folds the whole match once.

The long match is Stash (the replay toy game) with as many turns as asked, so
the length is exact; every registered game's random match is folded too.
Not a timed test: `make bench` runs it through `run()`, `main()` prints it.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Sequence

from famiglia.auth import TokenSigner
from famiglia.bench.harness import Figure, Report, percentile, repeat
from famiglia.engine import Engine
from famiglia.engine.registry import Registry, default_registry
from famiglia.eventstore import EventStore
from famiglia.eventstore.envelopes import open_event
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.replay.recorded import random_match
from famiglia.replay.sources import LayeredSource, StoreSource
from famiglia.replay.timeline import DEFAULT_EVERY, MatchTimeline
from famiglia.replay.toy import toy_engine
from famiglia.v1.envelope_pb2 import EventEnvelope

FOLD_TARGET = 200_000
"""Issue 10, figure 5: events folded per second (on one core)."""


def _registry() -> Registry:
    try:
        engines = {e.info.game_id: e for e in default_registry().engines()}
    except Exception:  # noqa: BLE001 - a half-written engine must not stop the benchmark
        engines = {}
    toy = toy_engine()
    engines[toy.info.game_id] = toy
    return Registry(engines)


def long_toy_match(events: int) -> list[EventEnvelope]:
    """A Stash match of about `events` events (a draw adds one; the turn goes on)."""
    _, envelopes = random_match(toy_engine(), 4, 1, {"turns": str(max(events, 10))})
    return envelopes


def fold_rate(registry: Registry, envelopes: Sequence[EventEnvelope], every: int,
              repeats: int = 7) -> tuple[tuple[float, float, float], float]:
    """((median, min, max) timeline events/s, median bare evolve events/s) over the same match, in
    CPU time (one core). Each side runs `repeats` times, each run repeated until it has taken a
    twentieth of a second: the median of short runs lets a burst of load from other work on a
    shared machine move one run rather than the figure (one long run averaged the burst in)."""
    engine: Engine = registry.get(envelopes[0].game_id or envelopes[1].game_id)
    events = [open_event(engine, e) for e in envelopes[1:]]

    def timeline() -> None:
        MatchTimeline(registry, envelopes, every)

    def bare() -> None:
        state = None
        for event in events:
            state = engine.evolve(state, event)

    folded = repeat(lambda: len(envelopes) / _cpu_seconds(timeline, 0.05), repeats, warmup=0)
    evolved, _, _ = repeat(lambda: len(events) / _cpu_seconds(bare, 0.05), repeats, warmup=0)
    return folded, evolved


def _cpu_seconds(work: Callable[[], None], at_least: float = 0.2) -> float:
    """CPU seconds of one call of `work`, averaged over as many calls as fill `at_least`."""
    work()  # warm up
    calls, start = 0, time.process_time()
    while True:
        work()
        calls += 1
        spent = time.process_time() - start
        if spent >= at_least:
            return spent / calls


def state_at_latency(registry: Registry, store: EventStore, envelopes: Sequence[EventEnvelope], every: int,
                     questions: int = 200) -> dict[str, float]:
    """GetStateAt through the replay use case: cold first call, then p50/p99 near the end (ms)."""
    from services.replay.app import ReplayApp  # the bench measures the service's own use case

    match_id = envelopes[0].match_id
    store.append(match_id, 0, list(envelopes))
    app = ReplayApp(source=LayeredSource(StoreSource(store)), registry=registry,
                    signer=TokenSigner("bench"), every=every)
    last = envelopes[-1]
    start = time.perf_counter()
    app.state_at(last.event_id, None, match_id=match_id)
    cold_ms = (time.perf_counter() - start) * 1000
    chooser = random.Random(7)
    tail = [e.event_id for e in envelopes[-4 * every:]]
    samples = []
    for _ in range(questions):
        event_id = chooser.choice(tail)
        start = time.perf_counter()
        app.state_at(event_id, None, match_id=match_id)
        samples.append((time.perf_counter() - start) * 1000)
    engine = registry.get(envelopes[0].game_id)
    events = [open_event(engine, e) for e in envelopes[1:]]
    start = time.perf_counter()
    state = None
    for event in events:
        state = engine.evolve(state, event)
    refold_ms = (time.perf_counter() - start) * 1000
    return {"cold": cold_ms, "p50": percentile(samples, 50), "p99": percentile(samples, 99), "refold": refold_ms}


def run(report: Report, quick: bool, redis_url: str | None = None, *, events: int | None = None,
        every: int = DEFAULT_EVERY) -> None:
    """Add the replay figures to `report` (the `make bench` entry point)."""
    registry = _registry()
    length = events or (5_000 if quick else 20_000)
    long_match = long_toy_match(length)
    repeats = 5 if quick else 7
    (timeline_rate, lo, hi), bare_rate = fold_rate(registry, long_match, every, repeats)
    report.add(Figure(f"replay fold {len(long_match)} events (toy)", timeline_rate, "events/s",
                      baseline=bare_rate, baseline_name="bare evolve", spread=(lo, hi),
                      notes="test game, for length; the target applies to the games below"))
    for engine in registry.engines():
        if engine is toy_engine():
            continue
        try:
            _, envelopes = random_match(engine, engine.info.min_players, 1)
        except Exception as exc:  # noqa: BLE001 - report, do not stop
            report.add(Figure.failure(f"replay fold {engine.info.game_id}", "events/s", f">= {FOLD_TARGET:,}/s",
                                      repr(exc)))
            continue
        (rate, lo, hi), bare = fold_rate(registry, envelopes, every, repeats)
        report.add(Figure(f"replay fold {engine.info.game_id} ({len(envelopes)} events)", rate, "events/s",
                          baseline=bare, baseline_name="bare evolve", target=f">= {FOLD_TARGET:,}/s",
                          ok=rate >= FOLD_TARGET, spread=(lo, hi),
                          notes=f"decode + evolve + snapshots, CPU time, median of {repeats}"))
    stores: list[tuple[str, EventStore]] = [("memory", InMemoryEventStore())]
    if redis_url:
        from famiglia.eventstore.redis_store import RedisEventStore

        stores.append(("redis", RedisEventStore.connect(redis_url, prefix=f"bench-replay-{time.time_ns()}")))
    for name, store in stores:
        lat = state_at_latency(registry, store, long_match, every)
        report.add(Figure(f"GetStateAt p50, end of {len(long_match)} events ({name}, K={every})", lat["p50"],
                          "ms", baseline=lat["refold"], baseline_name="refold from start",
                          target="<< refold", ok=lat["p50"] < lat["refold"] / 5,
                          spread=(lat["p50"], lat["p99"]), notes="spread = p50..p99"))
        report.add(Figure(f"GetStateAt cold, first question ({name})", lat["cold"], "ms",
                          baseline=lat["refold"], baseline_name="refold from start", notes="loads + folds once"))
        store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="famiglia.bench.replay", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=20_000, help="length of the long match")
    parser.add_argument("--every", type=int, default=DEFAULT_EVERY, help="snapshot interval K")
    parser.add_argument("--redis-url", default="", help="also measure over this Redis")
    args = parser.parse_args(argv)
    report = Report()
    run(report, False, args.redis_url or None, events=args.events, every=args.every)
    for f in report.figures:
        base = "" if f.baseline is None else f"   vs {f.baseline:,.2f} ({f.baseline_name})"
        spread = f" [{f.spread[0]:,.2f}..{f.spread[1]:,.2f}]" if f.spread != (0.0, 0.0) else ""
        print(f"{f.name:<58} {f.value:>12,.2f} {f.unit}{spread}{base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
