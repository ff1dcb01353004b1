"""The composition root of the bots service: nothing connects at import time.

Clients (Redis, gRPC) are made lazily and per process, because the Celery
prefork pool forks after bootstrap and neither gRPC channels nor Redis sockets
survive a fork.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from famiglia.auth import TokenSigner
from famiglia.bots.games import playable_registry
from famiglia.client import GameClient, SeatClient
from famiglia.config import Settings, choice, flag, number, whole
from famiglia.engine.registry import Registry
from famiglia.eventstore import EventStore
from famiglia.grpcutil.tls import client_credentials, dial_target

if TYPE_CHECKING:
    from celery import Celery

    from .metrics import BotsMetrics
    from .tries import DecisionTries


_TOKEN_CACHE = 20_000  # seat tokens kept per process
POOLS = ("solo", "prefork", "threads")


@dataclass(frozen=True)
class BotsSettings:
    """The bots service's own knobs (FAMIGLIA_BOTS_*)."""

    pool: str = "solo"
    """`solo`: one single-process Celery worker per core (worker.py); `prefork`, `threads`."""
    concurrency: int = 0
    """Worker processes/threads; 0 = one per core."""
    visibility_timeout: float = 300.0
    """Seconds before Redis hands an unacked task (a worker killed mid-task) to another worker."""
    stall_seconds: float = 30.0
    """A bot decision not answered for this long is queued again (idempotent, so harmless)."""
    task_time_limit: float = 120.0
    clock_grace_seconds: float = 0.5
    """Added to every human clock so the last instant still belongs to the human."""
    seats_per_task: int = 0
    """Bot seats one `decide` task may carry when several are asked at once (a simultaneous
    choice): 0 = all of them, played one after another (docs/bots.md); 1 = one task per
    decision, the next queued when the version moves."""
    lease_moves: int = 32
    """Most commands one `decide` task plays on through a match's bot turns when every bot
    seat plays a quick policy (`random`, `heuristic`): the worker asks the command service
    for the next decisions in its own calls instead of a round of the dispatcher and the
    broker each turn (docs/bots.md, "Leases"). 0: off; off with `seats_per_task`."""
    turn_notifications: bool = True
    """The dispatcher writes each person's turn notifications (FAMIGLIA_TURN_NOTIFICATIONS):
    GameService.WatchMyTurns and push gateways read them (docs/architecture.md)."""
    threads_per_worker: int = 2
    """With `solo`: tasks each per-core worker process runs at once (>1: a `threads` pool),
    so one decision's SubmitCommand round trip overlaps another's choice. 2 played ~10 %
    more matches a minute than 1 over seven alternating tournament pairs, most of it
    under heavy load (docs/performance-tournament.md, fifth pass); the policy time
    limit holds in pool threads."""

    @classmethod
    def from_env(cls) -> BotsSettings:
        return cls(
            pool=choice("FAMIGLIA_BOTS_POOL", "solo", POOLS),
            concurrency=whole("FAMIGLIA_BOTS_CONCURRENCY", 0, low=0),
            visibility_timeout=number("FAMIGLIA_BOTS_VISIBILITY_TIMEOUT", 300.0, above=True),
            stall_seconds=number("FAMIGLIA_BOTS_STALL_SECONDS", 30.0, above=True),
            task_time_limit=number("FAMIGLIA_BOTS_TASK_TIME_LIMIT", 120.0, above=True),
            clock_grace_seconds=number("FAMIGLIA_BOTS_CLOCK_GRACE", 0.5),
            seats_per_task=whole("FAMIGLIA_BOTS_SEATS_PER_TASK", 0, low=0),
            threads_per_worker=whole("FAMIGLIA_BOTS_THREADS_PER_WORKER", 2),
            lease_moves=whole("FAMIGLIA_BOTS_LEASE_MOVES", 32, low=0),
            turn_notifications=flag("FAMIGLIA_TURN_NOTIFICATIONS", True),
        )

    @property
    def workers(self) -> int:
        return self.concurrency or os.cpu_count() or 1


@dataclass
class BotsApp:
    settings: Settings
    bots: BotsSettings
    registry: Registry
    signer: TokenSigner
    _store: EventStore | None = None
    _celery: Any = None
    _per_process: dict[int, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _tokens: dict[tuple[str, int], str] = field(default_factory=dict)

    def _mine(self) -> dict[str, Any]:
        return self._per_process.setdefault(os.getpid(), {})

    @property
    def store(self) -> EventStore:
        """The event store (a given one, or a Redis store of this process)."""
        if self._store is not None:
            return self._store
        with self._lock:
            mine = self._mine()
            if "store" not in mine:
                from famiglia.eventstore.redis_store import RedisEventStore

                mine["store"] = RedisEventStore.connect(self.settings.redis_url,
                                                        partitions=self.settings.partitions)
            return mine["store"]

    @property
    def metrics(self) -> BotsMetrics | None:
        """This process's instruments (None: metrics off), made on first use: a worker forked
        after start-up records into a meter provider of its own (famiglia.telemetry.metrics)."""
        mine = self._mine()
        if "metrics" not in mine:
            from .metrics import bots_metrics

            with self._lock:
                if "metrics" not in mine:
                    mine["metrics"] = bots_metrics()
        return mine["metrics"]

    @property
    def tries(self) -> DecisionTries:
        """What this deployment's tasks learnt of each bot decision (tries.py): in Redis beside
        the event store's keys, so a task queued again on another worker process reads it too."""
        mine = self._mine()
        if "tries" not in mine:
            from .tries import tries_of

            store = self.store
            with self._lock:
                if "tries" not in mine:
                    mine["tries"] = tries_of(store)
        return mine["tries"]

    @property
    def game_client(self) -> GameClient:
        with self._lock:
            mine = self._mine()
            if "game" not in mine:
                mine["game"] = GameClient(self.settings.command_addr)
            return mine["game"]

    def seat(self, match_id: str, seat: int) -> SeatClient:
        """A client acting as `seat`: the bots service mints the seat token with the shared secret.

        A token never changes meaning, so each (match, seat) is signed once per process
        (a match's every decision would otherwise pay an HMAC)."""
        key = (match_id, seat)
        token = self._tokens.get(key)
        if token is None:
            if len(self._tokens) >= _TOKEN_CACHE:
                self._tokens.clear()
            token = self._tokens[key] = self.signer.bot_seat_token(match_id, seat)
        return self.game_client.seat(match_id, token)

    @property
    def celery(self) -> Celery:
        if self._celery is None:
            from .entrypoints.celery_app import make_celery

            self._celery = make_celery(self)
        return self._celery

    def close(self) -> None:
        for mine in self._per_process.values():
            if "game" in mine:
                mine["game"].close()
            if "store" in mine:
                mine["store"].close()
        self._per_process.clear()


def bootstrap(*, settings: Settings | None = None, registry: Registry | None = None,
              store: EventStore | None = None, bots: BotsSettings | None = None) -> BotsApp:
    settings = settings or Settings.from_env()
    if dial_target(settings.command_addr)[1]:
        client_credentials()  # the workers dial it lazily: a bad TLS setting is raised now, not in a task
    return BotsApp(settings=settings, bots=bots or BotsSettings.from_env(),
                   registry=registry or playable_registry(), signer=settings.signer(),
                   _store=store)
