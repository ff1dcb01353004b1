"""Figure 2: the event store's Lua append against a raw XADD of the same payload."""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from famiglia.bench.harness import Figure, Report, redis_pid


class Run(NamedTuple):
    """One side's pass: calls per second, and client and server CPU per call (us)."""

    rate: float
    client_us: float
    server_us: float


def _server_cpu(pid: int) -> Callable[[], float]:
    """Nanoseconds the redis-server main thread has run (Linux schedstat, exact rather than
    sampled by ticks); a clock of 0 where it cannot be read (not Linux, a remote server)."""
    path = Path(f"/proc/{pid}/task/{pid}/schedstat")

    def read() -> float:
        try:
            return float(path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return 0.0

    return read


def bench_append(report: Report, redis_url: str, quick: bool) -> None:
    """The Lua append (checks + two XADDs) against a raw XADD of the same payload, same client.

    Like with like: the figure's baseline is an XADD sent the way the store sends its script
    (the store's kept connection, `store._call`), so the ratio is what the script and its
    arguments cost over the plainest write. An XADD through redis-py's `client.xadd`, which
    pays redis-py's per-call machinery the store does not, is kept as a note. Every side
    starts from the same envelopes and serializes them inside its timed loop; the sides take
    turns every 250 calls so drift hits all of them alike, and the figure is the median of
    the rounds' ratios.
    Both sides wait for their reply the same way: the figure's store never polls for it (as
    every store did before session 12); the same pair with the store's default waiting,
    which polls while the machine has idle CPUs (famiglia.spinwait), is a note.
    Client and server CPU per call are noted too: on a shared machine they move less than
    the wall clock, which also counts the waits to be scheduled again."""
    import redis as redis_lib

    from famiglia.eventstore.envelopes import new_event_id
    from famiglia.eventstore.redis_store import RedisEventStore
    from famiglia.v1 import envelope_pb2

    store = RedisEventStore.connect(redis_url, reply_poll_us=0)
    polling = RedisEventStore.connect(redis_url)  # the default: polls while CPUs are idle
    client = redis_lib.Redis.from_url(redis_url)
    server_cpu = _server_cpu(redis_pid(redis_url))
    n = 2000 if quick else 5000
    payload = b"x" * 120

    def envelopes(mid: str) -> list[envelope_pb2.EventEnvelope]:
        return [envelope_pb2.EventEnvelope(event_id=new_event_id(), match_id=mid, seq=i + 1, type="bench",
                                           payload=payload) for i in range(n)]

    def lua_side(store: RedisEventStore) -> Callable[[int, int], None]:
        mid = "bench-" + uuid.uuid4().hex
        envs = envelopes(mid)

        def calls(start: int, stop: int) -> None:
            for i in range(start, stop):
                store.append(mid, i, [envs[i]], command_id=f"c{i}")
        return calls

    def raw_kept_side(store: RedisEventStore) -> Callable[[int, int], None]:
        """XADD on the store's kept connection, packed and sent as the store sends its own
        calls, its reply waited for as the store waits for an append's."""
        key = "bench-raw-" + uuid.uuid4().hex
        envs = envelopes(key)

        def calls(start: int, stop: int) -> None:
            for i in range(start, stop):
                store._call(["XADD", key, f"{i + 1}-0", "e", envs[i].SerializeToString()], store._reply_poll())
        return calls

    def raw_redis_py_side() -> Callable[[int, int], None]:
        key = "bench-raw-" + uuid.uuid4().hex
        envs = envelopes(key)

        def calls(start: int, stop: int) -> None:
            for i in range(start, stop):
                client.xadd(key, {"e": envs[i].SerializeToString()}, id=f"{i + 1}-0")
        return calls

    def round_() -> tuple[Run, ...]:
        """n calls a side, the sides taking turns every `chunk` calls: the load of a shared
        machine changes within a second, and a turn this short puts every side under it."""
        sides = [lua_side(store), raw_kept_side(store), raw_redis_py_side(), lua_side(polling),
                 raw_kept_side(polling)]
        totals = [[0.0, 0.0, 0.0] for _ in sides]  # wall s, client CPU s, server CPU ns
        for start in range(0, n, chunk):
            for side, total in zip(sides, totals, strict=True):
                server0, client0, wall0 = server_cpu(), time.process_time(), time.perf_counter()
                side(start, min(start + chunk, n))
                total[0] += time.perf_counter() - wall0
                total[1] += time.process_time() - client0
                total[2] += server_cpu() - server0
        return tuple(Run(n / wall, client / n * 1e6, server / n / 1e3) for wall, client, server in totals)

    chunk = 250
    round_()  # warm-up: connections, script cache
    runs: list[tuple[Run, ...]] = []
    for _ in range(5 if quick else 11):
        runs.append(round_())
        client.flushall()
    ratios = [r[0].rate / r[1].rate for r in runs]
    # The figure is the round with the median ratio (the count is odd), so the table's
    # ratio column is the median of the rounds' ratios.
    middle = sorted(range(len(ratios)), key=ratios.__getitem__)[len(ratios) // 2]
    ratio = ratios[middle]
    lua_run, kept_run = runs[middle][0], runs[middle][1]

    def cpu(side: int, part: str) -> float:
        return statistics.median(getattr(r[side], part) for r in runs)

    report.add(Figure(
        "append (Lua, checks + 2 streams)", lua_run.rate, "appends/s", baseline=kept_run.rate,
        baseline_name="raw XADD, same connection", target="ratio >= 0.70", ok=ratio >= 0.70,
        spread=(min(r[0].rate for r in runs), max(r[0].rate for r in runs)),
        notes=f"median of {len(ratios)} rounds (turns of {chunk} calls); rounds {min(ratios):.2f}-{max(ratios):.2f}; "
              f"vs redis-py's client.xadd {statistics.median(r[0].rate / r[2].rate for r in runs):.2f}; "
              f"both polling for the reply {statistics.median(r[3].rate / r[4].rate for r in runs):.2f} "
              f"({statistics.median(r[3].rate for r in runs):,.0f} vs {statistics.median(r[4].rate for r in runs):,.0f}/s); "
              f"CPU us/call client {cpu(0, 'client_us'):.0f} vs {cpu(1, 'client_us'):.0f}, "
              f"redis-server {cpu(0, 'server_us'):.0f} vs {cpu(1, 'server_us'):.0f}"))
    store.close()
    polling.close()
    client.close()
