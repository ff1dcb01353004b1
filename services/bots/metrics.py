"""The bots service's metrics: what an operator graphs and alerts on (docs/metrics.md).

Labelled by game, policy name (its parameters left out: a client may write any number of
them) and partition, never by match, seat or tournament."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from famiglia.bots.policy import PARAMETERS, PolicySpec
from famiglia.grpcutil.errors import store_away
from famiglia.telemetry.metrics import meter, tally

#: Buckets of a decision's time in ms: a random or heuristic choice takes well under one, a
#: search what its budget gives it, up to the task's time limit.
DECISION_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000)


def policy_name(spec: str, _known: dict[str, str] = {}) -> str:  # noqa: B006 - the cache
    """A policy spec's name (`ismcts` of `ismcts?iterations=500`), the label of its metrics;
    `unknown` for a name the bots do not know (a seat of an imported match may carry any)."""
    name = _known.get(spec)
    if name is None:
        try:
            name = PolicySpec.parse(spec).name
        except ValueError:
            name = "unknown"
        if name not in PARAMETERS:  # the policies there are: a label takes no client's string
            name = "unknown"
        if len(_known) >= 1024:
            _known.clear()
        _known[spec] = name
    return name


class BotsMetrics:
    """Decide tasks queued (the dispatcher), decisions' CPU and wall time and the clock defaults
    submitted (the workers), and the tournaments' matches started, finished and abandoned (the
    runner and the dispatcher's observer)."""

    def __init__(self, meter: Meter) -> None:
        self._meter = meter
        self._tasks = tally(meter, "famiglia.bots.decide_tasks", ("policy",), unit="{task}",
                            description="decide tasks queued by the dispatcher")
        self._cpu = meter.create_histogram("famiglia.bots.decision.cpu", unit="ms",
                                           description="CPU time of a policy's choice",
                                           explicit_bucket_boundaries_advisory=DECISION_BUCKETS)
        self._wall = meter.create_histogram("famiglia.bots.decision.duration", unit="ms",
                                            description="wall time of a policy's choice",
                                            explicit_bucket_boundaries_advisory=DECISION_BUCKETS)
        self._clocks = tally(meter, "famiglia.bots.clock_defaults", ("game",), unit="{command}",
                             description="defaults submitted for seats whose turn clock ran out")
        self._given_up = tally(meter, "famiglia.bots.decisions_given_up", ("game", "reason"), unit="{decision}",
                               description="bot decisions given up after repeated failures (the seat's default played if it has one)")
        self._started = tally(meter, "famiglia.tournament.matches_started", ("game",), unit="{match}",
                              description="tournament matches created")
        self._finished = tally(meter, "famiglia.tournament.matches_finished", ("game",), unit="{match}",
                               description="tournament matches played to their result")
        self._abandoned = tally(meter, "famiglia.tournament.matches_abandoned", ("game", "reason"), unit="{match}",
                                description="tournament matches given up, by why")
        self._decided: dict[tuple[str, str], dict[str, Any]] = {}

    def task_queued(self, policy: str) -> None:
        self._tasks.add((policy_name(policy),))

    def decided(self, game: str, policy: str, cpu_s: float, wall_s: float) -> None:
        """A choice's times, into the SDK's histograms (no asynchronous histogram to hand them
        counted elsewhere); its attributes dict made once per game and policy name."""
        key = (game, policy_name(policy))
        attributes = self._decided.get(key)
        if attributes is None:
            if len(self._decided) >= 4096:
                self._decided.clear()
            attributes = self._decided[key] = {"game": key[0], "policy": key[1]}
        self._cpu.record(cpu_s * 1000.0, attributes)
        self._wall.record(wall_s * 1000.0, attributes)

    def clock_default(self, game: str) -> None:
        self._clocks.add((game,))

    def decision_given_up(self, game: str, reason: str) -> None:
        """`reason`: `unreadable` (the server failed on the seat's view or legal commands, or set
        them aside), `failed` (on its commands), `refused` (its commands refused), `dispatch_failed`
        (the dispatcher failed on the match at a bot's turn: once a bot seat asked, none for a
        person's turn)."""
        self._given_up.add((game, reason))

    def tournament_match_started(self, game: str) -> None:
        self._started.add((game,))

    def tournament_match_finished(self, game: str) -> None:
        self._finished.add((game,))

    def tournament_match_abandoned(self, game: str, reason: str) -> None:
        """`reason`: `stuck`, `cancelled` (the tournament, or an operator) or `not_created`."""
        self._abandoned.add((game, reason))

    def watch_backlog(self, backlog: Callable[[], dict[int, tuple[int | None, int]]], *,
                      max_age_s: float = 1.0) -> None:
        """Gauges of the dispatcher's consumer group per partition: `famiglia.bots.dispatcher.lag`
        (entries not yet read) and `.pending` (read, not yet acknowledged). `backlog()` is read
        once for both, at most every `max_age_s` (each gauge's callback asks at every export)."""
        read = _Cached(backlog, max_age_s)

        def lag(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(behind, {"partition": p}) for p, (behind, _) in read().items() if behind is not None]

        def pending(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(held, {"partition": p}) for p, (_, held) in read().items()]

        self._meter.create_observable_gauge("famiglia.bots.dispatcher.lag", [lag], unit="{entry}",
                                            description="partition entries the dispatcher has not read yet")
        self._meter.create_observable_gauge("famiglia.bots.dispatcher.pending", [pending], unit="{entry}",
                                            description="partition entries read by the dispatcher, not yet acknowledged")


class _Cached:
    """`read()` at most every `max_age_s`; {} while the store is out of reach."""

    def __init__(self, read: Callable[[], dict[int, tuple[int | None, int]]], max_age_s: float) -> None:
        self._read, self._max_age_s = read, max_age_s
        self._lock = threading.Lock()
        self._at = -math.inf
        self._last: dict[int, tuple[int | None, int]] = {}

    def __call__(self) -> dict[int, tuple[int | None, int]]:
        with self._lock:
            now = time.monotonic()
            if now - self._at >= self._max_age_s:
                try:
                    self._last = self._read()
                except Exception as exc:
                    if not store_away(exc):
                        raise
                    self._last = {}
                self._at = now
            return self._last


def group_backlog(client: Any, streams: list[str], group: str) -> dict[int, tuple[int | None, int]]:
    """Partition -> (lag, pending) of consumer group `group` on each partition stream (`streams`,
    by partition), in one round trip of XINFO GROUPS; lag is None before Redis 7 (no such field)."""
    with client.pipeline(transaction=False) as pipe:
        for stream in streams:
            pipe.xinfo_groups(stream)
        replies = pipe.execute(raise_on_error=False)
    found: dict[int, tuple[int | None, int]] = {}
    for partition, groups in enumerate(replies):
        if isinstance(groups, Exception):  # no stream yet: nothing written to that partition
            continue
        for info in groups:
            name = info.get("name")
            if name in (group, group.encode()):
                lag = info.get("lag")
                found[partition] = (None if lag is None else int(lag), int(info.get("pending") or 0))
    return found


def bots_metrics() -> BotsMetrics | None:
    """The service's instruments, or None when metrics are off (then nothing is recorded)."""
    found = meter("famiglia.bots")
    return None if found is None else BotsMetrics(found)
