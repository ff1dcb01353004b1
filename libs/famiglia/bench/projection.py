"""Projection benchmark: lag under the command load, and how fast a backlog drains.

    python -m famiglia.bench.projection [--seconds 8] [--repeats 3] [--clients 4]
    python -m famiglia.bench.projection --projector [--matches 8] [--batch 30] [--repeats 3]

Processes, as in production: the command service (`core.command_service`), the
projection service (`python -m services.projection`, SQLite in a temp dir, its
default batch and block settings), client processes replaying recorded
GoodCritters matches (the command-path benchmark's load, `clients` of them,
unpaced), and a *raw consumer*: its own process, its own consumer group on the
same partition streams, doing nothing but XREADGROUP and XACK.

Figures, each beside the raw consumer measured in the same run:

- lag p99 under load: for every event appended in the window, (time it is
  visible in the SQL `event_archive`, seen by a poller every few ms) minus its
  envelope timestamp (set at append). The raw consumer's lag is (its XACK) minus
  the same timestamp: how soon an event can leave Redis at all. Target < 100 ms.
- events projected per second: both consumers are paused (SIGSTOP) while the
  load builds a backlog, then resumed one after the other (SIGCONT); the drain
  rate is the backlog over the time to catch up (consumer group fully acked).
  The ratio is the projection's own cost per event.

The workload is fixed by seeds (recorded matches replayed with their seeds); the
lag is wall-clock, so it moves with the machine's load. Nothing is asserted.

`--projector` measures the projector alone, in this process, in CPU time (what
moves least on a shared machine): recorded matches fed as partition entries to a
fresh `Projector` on a temp SQLite, in batches of ~30 events over several
interleaved matches (the command load), then one bot move per batch (a
tournament, where the per-batch cost is everything).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from famiglia.bench.harness import Figure, Report, percentile

if TYPE_CHECKING:
    from famiglia.eventstore import PartitionEntry
    from famiglia.v1.envelope_pb2 import EventEnvelope

RAW_GROUP = "bench-raw"
GROUP = "projection"
TARGET_LAG_MS = 100.0


# -- the processes ----------------------------------------------------------------------------
@contextlib.contextmanager
def projection_service(redis_url: str, database_path: Path) -> Iterator[subprocess.Popen]:
    """`python -m services.projection` on a free port; yields the process once it serves."""
    import grpc

    from famiglia.grpcutil import tls
    from famiglia.localstack.redis_server import free_port

    root = Path(__file__).resolve().parents[3]
    port = free_port()
    env = dict(os.environ, FAMIGLIA_REDIS_URL=redis_url, FAMIGLIA_SECRET="bench",
               FAMIGLIA_DATABASE_URL=f"sqlite:///{database_path}", FAMIGLIA_PROJECTION_ADDR=f"127.0.0.1:{port}",
               FAMIGLIA_LOG_LEVEL="info", FAMIGLIA_VAR_DIR=str(database_path.parent),
               PYTHONPATH=f"{root / 'libs'}{os.pathsep}{root}")
    for name in ("OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
                 "FAMIGLIA_PROJECTION_GROUP", "FAMIGLIA_PROJECTION_BATCH", "FAMIGLIA_PROJECTION_BLOCK_MS",
                 *tls.SETTINGS):  # plaintext on loopback, as it is dialled (command_service)
        env.pop(name, None)
    log = open(database_path.parent / "projection.log", "ab")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "services.projection"], env=env, cwd=root,
                            stdout=log, stderr=log)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        grpc.channel_ready_future(channel).result(timeout=60)
        yield proc
    finally:
        channel.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def _raw_consumer_main(redis_url: str, partitions: int, inbox, outbox) -> None:  # type: ignore[no-untyped-def]
    """The baseline process: XREADGROUP + XACK, remembering (event ms, ack ms) per entry."""
    import queue

    from famiglia.eventstore.consumer import PartitionConsumer
    from famiglia.eventstore.redis_store import RedisEventStore

    store = RedisEventStore.connect(redis_url, partitions=partitions)
    consumer = PartitionConsumer.for_store(store, RAW_GROUP, "raw-1")
    consumer.ensure_groups("$")
    outbox.put("ready")
    seen: list[tuple[int, float]] = []
    while True:
        try:
            message = inbox.get_nowait()
        except queue.Empty:
            message = None
        if message == "stop":
            break
        if message == "report":
            outbox.put(seen)
            seen = []
        entries = consumer.read(100, block_ms=50)
        if entries:
            consumer.ack(entries)
            now = time.time() * 1000
            seen.extend((e.envelope.timestamp.ToMilliseconds(), now) for e in entries)
    store.close()


class RawConsumer:
    """The raw consumer process, driven from the benchmark."""

    def __init__(self, redis_url: str, partitions: int) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.inbox, self.outbox = ctx.Queue(), ctx.Queue()
        self.proc = ctx.Process(target=_raw_consumer_main, args=(redis_url, partitions, self.inbox, self.outbox),
                                daemon=True)

    def __enter__(self) -> RawConsumer:
        self.proc.start()
        if self.outbox.get(timeout=60) != "ready":
            raise RuntimeError("raw consumer did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGCONT)  # type: ignore[arg-type]
        self.inbox.put("stop")
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.terminate()

    @property
    def pid(self) -> int:
        return int(self.proc.pid)  # type: ignore[arg-type]

    def take(self) -> list[tuple[int, float]]:
        """(event ms, ack ms) of everything acked since the last call."""
        self.inbox.put("report")
        return self.outbox.get(timeout=60)  # type: ignore[no-any-return]


# -- watching the read model and the groups -----------------------------------------------------
class ArchiveWatcher:
    """Polls the SQL event archive every `interval` s: when each event became visible."""

    def __init__(self, database_path: Path, interval: float = 0.005) -> None:
        self.path = database_path
        self.interval = interval
        self.seen: list[tuple[int, float]] = []  # (event ms, visible ms)
        self._last_rowid = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="archive-watcher", daemon=True)

    def __enter__(self) -> ArchiveWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=5, check_same_thread=False)
        try:
            while not self._stop.is_set():
                try:
                    rows = db.execute("SELECT rowid, timestamp_ms FROM event_archive WHERE rowid > ? "
                                      "ORDER BY rowid", (self._last_rowid,)).fetchall()
                except sqlite3.OperationalError:  # busy, or the table not there yet
                    rows = []
                if rows:
                    now = time.time() * 1000
                    self._last_rowid = rows[-1][0]
                    with self._lock:
                        self.seen.extend((ts, now) for _, ts in rows)
                self._stop.wait(self.interval)
        finally:
            db.close()

    def take(self) -> list[tuple[int, float]]:
        with self._lock:
            seen, self.seen = self.seen, []
        return seen


def group_backlog(client, keys: list[str], group: str) -> int:  # type: ignore[no-untyped-def]
    """Entries of `group` not acked yet: pending plus not yet delivered (XINFO GROUPS, Redis 7)."""
    total = 0
    for key in keys:
        try:
            groups = client.xinfo_groups(key)
        except Exception:  # noqa: BLE001 - no stream yet
            continue
        for g in groups:
            name = g["name"].decode() if isinstance(g["name"], bytes) else g["name"]
            if name == group:
                total += int(g["pending"]) + int(g.get("lag") or 0)
    return total


def wait_drained(client, keys: list[str], group: str, timeout: float = 300.0) -> float:  # type: ignore[no-untyped-def]
    """Seconds until `group` has acked everything in the streams (polled every 5 ms)."""
    start = time.perf_counter()
    while group_backlog(client, keys, group) > 0:
        if time.perf_counter() - start > timeout:
            raise TimeoutError(f"group {group} still behind after {timeout:.0f}s")
        time.sleep(0.005)
    return time.perf_counter() - start


# -- the measurement ------------------------------------------------------------------------------
@dataclass
class Window:
    seconds: float
    appended: int
    lags: list[float] = field(default_factory=list)
    raw_lags: list[float] = field(default_factory=list)


@dataclass
class Drain:
    backlog: int
    seconds: float
    raw_seconds: float

    @property
    def rate(self) -> float:
        return self.backlog / self.seconds if self.seconds else 0.0

    @property
    def raw_rate(self) -> float:
        return self.backlog / self.raw_seconds if self.raw_seconds else 0.0


def _lags(pairs: list[tuple[int, float]], since_ms: float) -> list[float]:
    return [visible - ts for ts, visible in pairs if ts >= since_ms]


def _jobs(clients: int):  # type: ignore[no-untyped-def]
    """The command-path benchmark's recorded GoodCritters matches, one per client."""
    from famiglia.bench.core import record_match
    from famiglia.client.game_client import pack
    from famiglia.engine.registry import default_registry

    registry = default_registry()
    engine = registry.get("goodcritters" if "goodcritters" in registry else next(iter(registry)))
    recordings = [record_match(engine, engine.info.min_players, seed) for seed in range(clients)]
    return [("submit", (r.game_id, r.seats, r.seed, [(seat, pack(c).SerializeToString()) for seat, c in r.commands]))
            for r in recordings]


def measure(redis_url: str | None = None, *, seconds: float = 8.0, repeats: int = 3, clients: int = 4,
            drain_seconds: float | None = None, settle: float = 30.0) -> dict[str, object]:
    """Run the lag windows and the drain; returns the raw results (see `add_figures`)."""
    import redis as redis_lib

    from famiglia.bench.core import _ClientPool, command_service
    from famiglia.eventstore.redis_store import KeyLayout
    from famiglia.localstack.redis_server import RedisServer

    tmp = Path(tempfile.mkdtemp(prefix="famiglia-bench-projection-"))
    server = None
    if redis_url is None:
        server = RedisServer(data_dir=tmp / "redis").start()
        redis_url = server.url
    else:  # a database of its own on the bench's server: nothing else's history to catch up on
        redis_url = redis_url.rsplit("/", 1)[0] + "/7"
    client = redis_lib.Redis.from_url(redis_url)
    client.flushdb()
    partitions = int(os.environ.get("FAMIGLIA_PARTITIONS", "16"))  # as the services read it
    keys = KeyLayout(partitions=partitions).partition_streams()
    jobs = _jobs(clients)
    windows: list[Window] = []
    paced: list[Window] = []
    drain: Drain | None = None
    try:
        with command_service(redis_url) as address, _ClientPool(clients) as pool, \
                projection_service(redis_url, tmp / "famiglia.db") as projection, \
                RawConsumer(redis_url, partitions) as raw, ArchiveWatcher(tmp / "famiglia.db") as watcher:
            def window(length: float, rate: float | None = None) -> tuple[Window, float]:
                since = time.time() * 1000
                done, _ = pool.drive(address, clients, length, jobs, rate=rate)
                wait_drained(client, keys, GROUP, settle)
                wait_drained(client, keys, RAW_GROUP, settle)
                time.sleep(0.05)  # the watcher's last poll
                w = Window(length, 0, _lags(watcher.take(), since), _lags(raw.take(), since))
                w.appended = len(w.lags)
                return w, done

            window(min(seconds, 2.0))  # warm-up: imports, caches, SQLite pages
            commands: list[float] = []
            for _ in range(repeats):
                w, done = window(seconds)
                windows.append(w)
                commands.append(done)
            # The same clients paced at half the commands they managed flat out.
            half = statistics.median(commands) / 2
            for _ in range(repeats):
                paced.append(window(seconds, rate=half / clients)[0])
            # Capacity: a backlog built with both consumers stopped, drained one after the other.
            os.kill(projection.pid, signal.SIGSTOP)
            os.kill(raw.pid, signal.SIGSTOP)
            try:
                pool.drive(address, clients, drain_seconds or seconds, jobs)
            finally:
                os.kill(raw.pid, signal.SIGCONT)
            backlog = group_backlog(client, keys, GROUP)
            raw_seconds = wait_drained(client, keys, RAW_GROUP, 300)
            os.kill(projection.pid, signal.SIGCONT)
            drain = Drain(backlog, wait_drained(client, keys, GROUP, 600), raw_seconds)
            watcher.take(), raw.take()
    finally:
        client.close()
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return {"windows": windows, "paced": paced, "drain": drain, "clients": clients}


# -- the projector alone, in process ----------------------------------------------------------
def recorded_appends(game_id: str, matches: int, *, tournament_id: str = "", start_ms: int = 1_700_000_000_000
                     ) -> list[list[list[EventEnvelope]]]:
    """Per match, its appends (one command's envelopes each, match_created and setup first), random
    legal play fixed by seeds; players are bots `p0`.. so ratings and standings are projected too."""
    from famiglia.engine.registry import default_registry
    from famiglia.eventstore.envelopes import game_envelopes, match_created_envelope
    from famiglia.testing.random_play import play_random
    from famiglia.v1 import envelope_pb2

    engine = default_registry().get(game_id)
    seats = engine.info.min_players
    out: list[list[list[EventEnvelope]]] = []
    for m in range(matches):
        match_id = f"bench-{game_id}-{m:04d}"
        play = play_random(engine, seats, m)
        created = envelope_pb2.MatchCreated(game_id=game_id, seats=seats, seed=m, tournament_id=tournament_id)
        for seat in range(seats):
            player = f"p{(m + seat) % (seats + 2)}"
            created.seat_info.add(seat=seat, player_id=player, display_name=player, bot=True, policy="random")
        now = start_ms + m
        first = [match_created_envelope(match_id, created, now_ms=now)]
        first += game_envelopes(engine, match_id, 1, play.setup_events, now_ms=now)
        appends = [first]
        version = len(first)
        for i, step in enumerate(play.steps):
            now += 7
            envelopes = game_envelopes(engine, match_id, version, step.events, command_id=f"{match_id}-c{i}",
                                       seat=step.seat, command=step.command, now_ms=now)
            version += len(envelopes)
            appends.append(list(envelopes))
        out.append(appends)
    return out


def interleaved_batches(appends: list[list[list[EventEnvelope]]], events_per_batch: int, partitions: int = 16
                        ) -> list[list[PartitionEntry]]:
    """The appends of all matches round-robin (as concurrent clients write them), as partition
    entries, cut into batches of `events_per_batch` (0: one append per batch, a bot's move)."""
    from famiglia.eventstore import PartitionEntry  # noqa: F811 - at run time
    from famiglia.eventstore.port import partition_of

    entries: list[list[PartitionEntry]] = []
    seq = 0
    cursors = [0] * len(appends)
    while any(c < len(a) for c, a in zip(cursors, appends, strict=True)):
        for m, match in enumerate(appends):
            if cursors[m] < len(match):
                run = []
                for env in match[cursors[m]]:
                    seq += 1
                    run.append(PartitionEntry(partition_of(env.match_id, partitions),
                                              f"{1_700_000_000_000 + seq}-0", env))
                entries.append(run)
                cursors[m] += 1
    if events_per_batch <= 0:
        return entries
    flat = [e for run in entries for e in run]
    return [flat[i:i + events_per_batch] for i in range(0, len(flat), events_per_batch)]


@dataclass
class ProjectorRun:
    events: int
    batches: int
    cpu_s: float
    wall_s: float

    @property
    def events_per_cpu_s(self) -> float:
        return self.events / self.cpu_s if self.cpu_s else 0.0

    @property
    def cpu_ms_per_batch(self) -> float:
        return 1000 * self.cpu_s / self.batches if self.batches else 0.0


def project_batches(make_projector, batches: list[list[PartitionEntry]], database_url: str  # type: ignore[no-untyped-def]
                    ) -> ProjectorRun:
    """Feed `batches` to a fresh projector on a fresh database; CPU time of this process for the lot.

    `make_projector(engine, registry)` builds the projector, so two implementations can be compared
    on the same batches in the same session."""
    from famiglia.engine.registry import default_registry
    from famiglia.readmodels.db import make_engine
    from services.projection import schema

    engine = make_engine(database_url)
    schema.upgrade(engine)
    projector = make_projector(engine, default_registry())
    events = 0
    cpu, wall = time.process_time(), time.perf_counter()
    for batch in batches:
        outcome = projector.project(batch)
        events += len(outcome.applied)
    run = ProjectorRun(events, len(batches), time.process_time() - cpu, time.perf_counter() - wall)
    engine.dispose()
    return run


def add_projector_figures(report: Report, runs: dict[str, list[ProjectorRun]]) -> list[Figure]:
    """One figure per workload: events per CPU second of the projector alone (median of the runs)."""
    figures = []
    for name, values in runs.items():
        rates = [r.events_per_cpu_s for r in values]
        per_batch = statistics.median(r.cpu_ms_per_batch for r in values)
        figures.append(report.add(Figure(
            f"projector alone, {name}", statistics.median(rates), "events/CPU s", spread=(min(rates), max(rates)),
            notes=f"{values[0].events} events in {values[0].batches} batches, {per_batch:.2f} ms CPU per batch; "
                  f"SQLite, in process; {len(values)} runs")))
    return figures


def measure_projector(*, matches: int = 8, events_per_batch: int = 30, repeats: int = 3, game_id: str = "",
                      make_projector=None) -> dict[str, list[ProjectorRun]]:  # type: ignore[no-untyped-def]
    """The projector alone on two workloads: batches of ~`events_per_batch` events over `matches`
    interleaved matches (the command load), and one bot move per batch (a tournament)."""
    from famiglia.engine.registry import default_registry

    if make_projector is None:
        from services.projection.projector import Projector as make_projector  # noqa: N813
    registry = default_registry()
    game = game_id or ("goodcritters" if "goodcritters" in registry else next(iter(registry)))
    workloads = {
        f"{game} x{matches} matches, {events_per_batch} events a batch":
            interleaved_batches(recorded_appends(game, matches), events_per_batch),
        f"{game} x{matches} tournament matches, one move a batch":
            interleaved_batches(recorded_appends(game, matches, tournament_id="bench-cup"), 0),
    }
    runs: dict[str, list[ProjectorRun]] = {name: [] for name in workloads}
    tmp = Path(tempfile.mkdtemp(prefix="famiglia-bench-projector-"))
    try:
        for i in range(repeats):
            for w, (name, batches) in enumerate(workloads.items()):
                runs[name].append(project_batches(make_projector, batches, f"sqlite:///{tmp / f'{i}-{w}.db'}"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return runs


def add_figures(report: Report, result: dict[str, object]) -> list[Figure]:
    drain: Drain | None = result["drain"]  # type: ignore[assignment]
    clients = result["clients"]
    figures = []
    for key, label in (("windows", f"x{clients} command load (flat out)"),
                       ("paced", f"x{clients} paced at half that load")):
        windows: list[Window] = result.get(key) or []  # type: ignore[assignment]
        if not windows:
            continue
        p99s = [percentile(w.lags, 99) for w in windows]
        raw_p99s = [percentile(w.raw_lags, 99) for w in windows]
        med = statistics.median(p99s)
        rates = [w.appended / w.seconds for w in windows]
        all_lags = [x for w in windows for x in w.lags]
        figures.append(report.add(Figure(
            f"projection lag p99, {label}", med, "ms",
            baseline=statistics.median(raw_p99s), baseline_name="raw XREADGROUP+XACK", target="< 100 ms",
            ok=med < TARGET_LAG_MS, spread=(min(p99s), max(p99s)),
            notes=f"append -> visible in SQL; p50 {percentile(all_lags, 50):.0f} ms, "
                  f"max {max(all_lags, default=0):.0f} ms; {statistics.median(rates):,.0f} events/s appended; "
                  f"{len(windows)} windows")))
    if drain is not None:
        figures.append(report.add(Figure(
            f"projection events/s (drain a backlog of {drain.backlog:,})", drain.rate, "events/s",
            baseline=drain.raw_rate, baseline_name="raw XREADGROUP+XACK",
            notes=f"SQLite; caught up in {drain.seconds:.1f} s vs raw {drain.raw_seconds:.2f} s")))
    return figures


def run(report: Report, quick: bool, redis_url: str | None = None, *, seconds: float | None = None,
        repeats: int | None = None, clients: int = 4) -> None:
    """Add the projection figures to `report` (the `make bench` entry point)."""
    try:
        result = measure(redis_url, seconds=seconds or (1.0 if quick else 8.0), repeats=repeats or (2 if quick else 5),
                         clients=clients)
    except Exception as exc:  # noqa: BLE001 - report, do not stop the other benchmarks
        report.add(Figure.failure("projection lag p99", "ms", "< 100 ms", repr(exc)))
        return
    add_figures(report, result)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="famiglia.bench.projection", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--redis-url", default="")
    parser.add_argument("--projector", action="store_true",
                        help="only the projector in process: events per CPU second, no services (robust on a busy "
                             "machine)")
    parser.add_argument("--matches", type=int, default=8, help="with --projector: interleaved matches")
    parser.add_argument("--batch", type=int, default=30, help="with --projector: events a batch")
    args = parser.parse_args(argv)
    report = Report()
    if args.projector:
        add_projector_figures(report, measure_projector(matches=args.matches, events_per_batch=args.batch,
                                                        repeats=args.repeats))
    else:
        run(report, False, args.redis_url or None, seconds=args.seconds, repeats=args.repeats, clients=args.clients)
    for f in report.figures:
        base = "" if f.baseline is None else f"   vs {f.baseline:,.1f} ({f.baseline_name})"
        print(f"{f.name}: {f.value:,.1f} {f.unit} [{f.spread[0]:,.1f}..{f.spread[1]:,.1f}]{base}\n  {f.notes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
