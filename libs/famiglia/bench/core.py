"""Benchmarks of the foundation: engines, the Lua append, the command path, flatness.

Every workload is fixed by seeds: matches are played offline with the engine first and
their commands replayed on the server with the same seed, so the server decides exactly
the same (legal) commands in every run.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from google.protobuf.message import Message

from famiglia.bench.harness import Figure, Report, percentile, repeat
from famiglia.engine import Engine
from famiglia.engine.registry import default_registry
from famiglia.testing.random_play import play_random

ENGINE_TARGETS = {"goodcritters": 200, "grifters": 200, "nothing_personal": 50, "nostra_city": 50}


def bench_engines(report: Report, quick: bool) -> None:
    """Complete random games per second on one core, per game and seat count."""
    registry = default_registry()
    for engine in registry.engines():
        info = engine.info
        target = ENGINE_TARGETS.get(info.game_id, 50)
        for seats in range(info.min_players, info.max_players + 1):
            games = 5 if quick else 30

            def run(seats: int = seats, engine: Engine = engine, games: int = games) -> float:
                start = time.perf_counter()
                for seed in range(games):
                    play_random(engine, seats, seed)
                return games / (time.perf_counter() - start)

            med, lo, hi = repeat(run, 1 if quick else 3, warmup=0 if quick else 1)
            report.add(Figure(f"engine {info.game_id} {seats}p", med, "games/s", baseline=float(target),
                              baseline_name="target", target=f">= {target}/s", ok=med >= target, spread=(lo, hi)))


@dataclass
class RecordedMatch:
    game_id: str
    seats: int
    seed: int
    commands: list[tuple[int, Message]]


def record_match(engine: Engine, seats: int, seed: int) -> RecordedMatch:
    play = play_random(engine, seats, seed)
    return RecordedMatch(engine.info.game_id, seats, seed, [(s.seat, s.command) for s in play.steps])


def longest_match(engine: Engine, seats: int, tries: int) -> RecordedMatch:
    best = None
    for seed in range(tries):
        rec = record_match(engine, seats, seed)
        if best is None or len(rec.commands) > len(best.commands):
            best = rec
    assert best is not None
    return best


def bench_append(report: Report, redis_url: str, quick: bool) -> None:
    """The Lua append (checks + two XADDs) against a raw XADD of the same payload, same client.

    Like with like: both sides start from the same envelopes and serialize them inside the
    timed loop, through the same redis-py client; runs alternate so drift hits both."""
    import redis as redis_lib

    from famiglia.eventstore.envelopes import new_event_id
    from famiglia.eventstore.redis_store import RedisEventStore
    from famiglia.v1 import envelope_pb2

    store = RedisEventStore.connect(redis_url)
    client = redis_lib.Redis.from_url(redis_url)
    n = 2000 if quick else 5000
    payload = b"x" * 120

    def envelopes(mid: str) -> list[envelope_pb2.EventEnvelope]:
        return [envelope_pb2.EventEnvelope(event_id=new_event_id(), match_id=mid, seq=i + 1, type="bench",
                                           payload=payload) for i in range(n)]

    def lua() -> float:
        mid = "bench-" + uuid.uuid4().hex
        envs = envelopes(mid)
        start = time.perf_counter()
        for i, env in enumerate(envs):
            store.append(mid, i, [env], command_id=f"c{i}")
        return n / (time.perf_counter() - start)

    def raw() -> float:
        key = "bench-raw-" + uuid.uuid4().hex
        envs = envelopes(key)
        start = time.perf_counter()
        for i, env in enumerate(envs):
            client.xadd(key, {"e": env.SerializeToString()}, id=f"{i + 1}-0")
        return n / (time.perf_counter() - start)

    lua_rates, raw_rates, ratios = [], [], []
    lua(), raw()  # warm-up: connections, script cache
    for _ in range(5 if quick else 11):
        a, b = lua(), raw()
        lua_rates.append(a)
        raw_rates.append(b)
        ratios.append(a / b)
        client.flushall()
    ratio = statistics.median(ratios)
    lua_med, raw_med = statistics.median(lua_rates), statistics.median(raw_rates)
    report.add(Figure("append (Lua, checks + 2 streams)", lua_med, "appends/s", baseline=raw_med,
                      baseline_name="raw XADD", target="ratio >= 0.70", ok=ratio >= 0.70,
                      spread=(min(lua_rates), max(lua_rates)),
                      notes=f"median of paired ratios {ratio:.2f} [{min(ratios):.2f}-{max(ratios):.2f}]"))
    store.close()
    client.close()


def bench_command_path(report: Report, redis_url: str, quick: bool) -> None:
    """SubmitCommand throughput and latency with 1, 4 and 16 clients vs the Echo RPC of the
    same server: the command service runs as its own process, as in production."""
    import grpc

    from famiglia.client import GameClient
    from famiglia.client.game_client import pack
    from famiglia.v1 import game_service_pb2 as pb

    registry = default_registry()
    if not list(registry):
        return
    engine = registry.get("goodcritters" if "goodcritters" in registry else next(iter(registry)))
    seconds = 2.0 if quick else 6.0
    recordings = [record_match(engine, engine.info.min_players, seed) for seed in range(16)]
    with command_service(redis_url) as address:
        try:
            for clients in (1, 4, 16):
                sample = pack(recordings[0].commands[0][1]).SerializeToString()
                echo_rate, _ = _drive(address, clients, seconds, lambda c, i, payload=sample: c.stub.Echo(
                    pb.EchoRequest(payload=payload)))
                matches = [_start(GameClient(address), r) for r in recordings[:clients]]
                cmd_rate, lat = _drive(address, clients, seconds, lambda c, i, ms=matches: _submit_next(c, ms[i]))
                p50, p99 = percentile(lat, 50) * 1000, percentile(lat, 99) * 1000
                ratio = cmd_rate / echo_rate if echo_rate else 0
                report.add(Figure(f"SubmitCommand x{clients}", cmd_rate, "cmds/s", baseline=echo_rate,
                                  baseline_name="Echo RPC", target="ratio >= 0.50", ok=ratio >= 0.5,
                                  notes=f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"))
                if clients == 4:
                    # p99 at half the echo throughput: paced clients.
                    matches = [_start(GameClient(address), r) for r in recordings[:clients]]
                    _, lat = _drive(address, clients, seconds,
                                    lambda c, i, ms=matches: _submit_next(c, ms[i]), rate=echo_rate * 0.5 / clients)
                    p99 = percentile(lat, 99) * 1000
                    report.add(Figure("SubmitCommand p99 at half echo load", p99, "ms", target="< 10 ms",
                                      ok=p99 < 10))
        except grpc.RpcError as exc:
            report.add(Figure("SubmitCommand", 0, "", notes=f"failed: {exc}"))


@contextlib.contextmanager
def command_service(redis_url: str) -> Iterator[str]:
    """`python -m services.command` on a free port against `redis_url`; yields its address."""
    import grpc

    from famiglia.localstack.redis_server import free_port

    root = Path(__file__).resolve().parents[3]
    port = free_port()
    env = dict(os.environ, FAMIGLIA_REDIS_URL=redis_url, FAMIGLIA_SECRET="bench",
               FAMIGLIA_COMMAND_ADDR=f"127.0.0.1:{port}", FAMIGLIA_LOG_LEVEL="warning", OTEL_SDK_DISABLED="true",
               PYTHONPATH=f"{root / 'libs'}{os.pathsep}{root}")
    proc = subprocess.Popen([sys.executable, "-m", "services.command"], env=env, cwd=root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        grpc.channel_ready_future(channel).result(timeout=30)
        yield f"127.0.0.1:{port}"
    finally:
        channel.close()
        proc.terminate()
        proc.wait(timeout=10)


class _Replayer:
    def __init__(self, match_id: str, tokens: list[str], rec: RecordedMatch) -> None:
        self.match_id, self.tokens, self.rec, self.i = match_id, tokens, rec, 0


def _start(client, rec: RecordedMatch) -> _Replayer:
    handle = client.create_match(rec.game_id, rec.seats, seed=rec.seed)
    return _Replayer(handle.match_id, handle.seat_tokens, rec)


def _submit_next(client, rep: _Replayer) -> None:
    from famiglia.client.game_client import pack
    from famiglia.v1 import game_service_pb2 as pb

    if rep.i >= len(rep.rec.commands):  # match over: start the same one again
        handle = client.create_match(rep.rec.game_id, rep.rec.seats, seed=rep.rec.seed)
        rep.match_id, rep.tokens, rep.i = handle.match_id, handle.seat_tokens, 0
    seat, command = rep.rec.commands[rep.i]
    rep.i += 1
    client.stub.SubmitCommand(
        pb.SubmitCommandRequest(match_id=rep.match_id, command_id=uuid.uuid4().hex, command=pack(command)),
        metadata=[("authorization", f"Bearer {rep.tokens[seat]}")])


def _drive(address: str, clients: int, seconds: float, call, rate: float | None = None
           ) -> tuple[float, list[float]]:
    """Run `call(client, i)` from `clients` threads for `seconds`; (calls/s, latencies)."""
    from famiglia.client import GameClient

    latencies: list[list[float]] = [[] for _ in range(clients)]
    stop = time.perf_counter() + seconds
    gclients = [GameClient(address) for _ in range(clients)]

    def worker(i: int) -> None:
        interval = 1.0 / rate if rate else 0.0
        nxt = time.perf_counter()
        while time.perf_counter() < stop:
            if interval:
                nxt += interval
                delay = nxt - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            t0 = time.perf_counter()
            call(gclients[i], i)
            latencies[i].append(time.perf_counter() - t0)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    for c in gclients:
        c.close()
    flat = [x for lat in latencies for x in lat]
    return len(flat) / elapsed, flat


def bench_flatness(report: Report, redis_url: str, quick: bool) -> None:
    """Command cost early in a long match vs late in it (the hot state must keep it flat)."""
    from famiglia.config import Settings
    from famiglia.eventstore.redis_store import RedisEventStore
    from services.command.bootstrap import bootstrap

    registry = default_registry()
    if not list(registry):
        return
    engine = registry.get("goodcritters" if "goodcritters" in registry else next(iter(registry)))
    rec = longest_match(engine, engine.info.max_players, 6 if quick else 20)
    store = RedisEventStore.connect(redis_url)
    app = bootstrap(store=store, settings=Settings(redis_url=redis_url, secret="bench"))
    created = app.create_match(rec.game_id, rec.seats, seed=rec.seed)
    viewers = [app.viewer(created.match_id, t) for t in created.seat_tokens]
    costs: list[tuple[int, float]] = []
    for i, (seat, command) in enumerate(rec.commands):
        version = app.matches.get(created.match_id).match.version
        t0 = time.perf_counter()
        app.submit(created.match_id, viewers[seat], f"c{i}", command)
        costs.append((version, time.perf_counter() - t0))
    store.close()
    n = max(5, len(costs) // 10)
    early = percentile([c for _, c in costs[:n]], 50)
    late = percentile([c for _, c in costs[-n:]], 50)
    report.add(Figure(f"command cost at v~{costs[-n][0]} vs v~{costs[n][0]}", late * 1e6, "us",
                      baseline=early * 1e6, baseline_name="early in the match", target="ratio <= 1.2",
                      ok=late / early <= 1.2))


def redis_for_bench() -> tuple[object, str]:
    from famiglia.localstack.redis_server import RedisServer

    server = RedisServer(data_dir=Path(tempfile.mkdtemp(prefix="famiglia-bench-"))).start()
    return server, server.url
