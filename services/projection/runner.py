"""The consumer loop: one member of the projection's consumer group.

Each round: entries other consumers left pending too long (XAUTOCLAIM, every
`claim_every_s`), entries deferred last round, then new entries (XREADGROUP);
one `Projector.project` transaction; XACK only what it committed or found
already done — sent with the next round's XREADGROUP, in one round trip (the
commit always precedes it; a process that dies in between redoes the batch,
which finds its events already done). Deferred entries (an earlier event of the match is in someone
else's hands) stay pending under this consumer and are retried next round;
should this process die they are XAUTOCLAIMed like any other.

A consumer whose connection to Redis broke (or whose groups were gone) forgets the deferred
entries it kept and reads its pending entries again (`_read_pending_again`, each round until
that read succeeds): the server may be one that lost acknowledged writes, and a kept entry of
that lost history would otherwise be applied once another consumer projected the store's new
one up to the seq before it. The batch in hand when the connection breaks outside a read (while
it is projected) is the projector's to tell by its stream entry ids (`Projector._read_before`).

Entries the projector parked (poison: see `projector.py`) are acked like done ones
and recorded as dead letters (`parking.py`); the parked matches are read back from
Redis at start and every `claim_every_s`, so every consumer parks their later entries.

Run more processes (distinct consumer names, one group) to scale out.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass

from famiglia.eventstore import PartitionEntry
from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.telemetry import get_logger

from .lag import LagMonitor
from .parking import DeadLetters
from .projector import BatchOutcome, Projector
from .retention import RetentionSweep

log = get_logger("famiglia.projection.runner")


def default_consumer_name() -> str:
    """Unique per process: a restarted process is a new consumer, its predecessor's entries get claimed."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class RunnerConfig:
    group: str = "projection"
    consumer: str = ""
    batch: int = 100
    """XREADGROUP COUNT, per partition stream."""
    block_ms: int = 1000
    claim_idle_ms: int = 30_000
    """How long an entry must sit unacked before another consumer takes it over."""
    claim_every_s: float = 5.0
    lag_every_s: float = 5.0
    cleanup_every_s: float = 60.0
    forget_idle_ms: int = 3_600_000
    """Consumers idle this long with nothing pending are removed from the group."""
    retain_finished_ms: int = 3_600_000
    """How long a finished, archived match stays in Redis before its stream is trimmed
    (replay then reads the SQL archive); 0 keeps every match in Redis."""
    retain_every_s: float = 60.0
    """How often the retention sweep runs."""
    gather_ms: int = 20
    """After a read that came back short of `batch`, the next read waits until this long
    after it, so a trickle of events (one bot move at a time) is projected in batches
    rather than one by one: a batch's fixed costs (transaction, checkpoint, the
    XREADGROUP and XACK round trips) dominate a small batch. Adds at most this to the
    lag; 0 reads again at once."""


class ProjectionRunner:
    def __init__(self, store: RedisEventStore, projector: Projector, config: RunnerConfig | None = None,
                 lag: LagMonitor | None = None, retention: RetentionSweep | None = None) -> None:
        self.store = store
        self.projector = projector
        self.config = config or RunnerConfig()
        self.retention = retention
        self._last_retention = time.monotonic()
        name = self.config.consumer or default_consumer_name()
        self.consumer = PartitionConsumer.for_store(store, self.config.group, name)
        self.dead_letters = DeadLetters(store)
        self.lag = lag
        self.deferred: dict[tuple[int, str], PartitionEntry] = {}
        self._last_claim = 0.0
        self._last_lag = 0.0
        self._last_cleanup = time.monotonic()
        self._started = False
        self._stuck_rounds = 0
        self._deferred_since: dict[tuple[int, str], float] = {}
        """When each entry deferred now was first deferred (`clock`): how long its gap has lasted."""
        self._told_stuck_at: float | None = None
        self._short_read_at: float | None = None
        self.clock = time.monotonic  # the gather window's clock (tests step it)
        """When the last read came back short of `batch` (None: it was full)."""
        self._reconnects = 0
        """The consumer's `reconnects` whose pending entries were read again (`_read_pending_again`)."""
        self.projected = 0
        self.unacked: list[PartitionEntry] = []
        """Committed (or found done) entries, acked with the next read or `flush_acks`."""

    @property
    def name(self) -> str:
        return self.consumer.consumer

    def start(self) -> None:
        """Create the group on every partition from the beginning of history (a new group sees everything)."""
        self.consumer.ensure_groups("0")
        self.refresh_parked()
        self._started = True

    def refresh_parked(self) -> None:
        """The parked matches as recorded in Redis (by any consumer, or forgotten by `unpark`)."""
        self.projector.parked_matches = self.dead_letters.parked_matches()

    def run_once(self, block_ms: int | None = None) -> BatchOutcome:
        """One round; returns what the batch did."""
        if not self._started:
            self.start()
            # Our own leftovers first: a consumer restarted under a fixed name redoes what it had read.
            self._take(self.consumer.read_pending(self.config.batch))
        now = time.monotonic()
        if now - self._last_claim >= self.config.claim_every_s:
            self._last_claim = now
            self.refresh_parked()
            claimed = self.consumer.claim_stale(self.config.claim_idle_ms, count=self.config.batch * 4)
            if claimed:
                log.info("projection_claimed", entries=len(claimed), consumer=self.name)
            self._take(claimed)
        if now - self._last_cleanup >= self.config.cleanup_every_s:
            self._last_cleanup = now
            self.forget_dead_consumers()
        if self.retention is not None and now - self._last_retention >= self.config.retain_every_s:
            self._last_retention = now
            self.sweep_retention()
        wait = self.config.block_ms if block_ms is None else block_ms
        if self.deferred:
            # Retry deferred entries soon, backing off while they stay stuck (a gap nobody fills).
            wait = min(wait, 20 * 2 ** min(self._stuck_rounds, 6))
        done, self.unacked = self.unacked, []
        try:
            read = self.consumer.read(self.config.batch, block_ms=wait, ack=done)
        except BaseException:
            self.unacked = done + self.unacked  # not acked: try again next round
            raise
        self._short_read_at = self.clock() if read and not _full(read, self.config.batch) else None
        reconnects = self.consumer.reconnects
        if reconnects != self._reconnects:
            self._read_pending_again()  # should it fail, the next round reads them again
            self._reconnects = reconnects
        self._take(read)
        outcome = self.process(list(self.deferred.values()))
        self._stuck_rounds = self._stuck_rounds + 1 if outcome.deferred and not outcome.applied else 0
        self._tell_stuck()
        if self.lag is not None and now - self._last_lag >= self.config.lag_every_s:
            self._last_lag = now
            self.lag.measure()
        return outcome

    @property
    def stuck_after_s(self) -> float:
        """How long an entry may wait for an earlier one before its gap is told: past the time
        another consumer's entry is claimed, twice over (a consumer that died holding it)."""
        return 2 * self.config.claim_idle_ms / 1000 + self.config.claim_every_s

    def _tell_stuck(self) -> None:
        """`projection_entries_stuck` once an entry has waited `stuck_after_s`, and again each
        `stuck_after_s` while one does: by how long the oldest waited, not by rounds that projected
        nothing else, which never come while other matches are played."""
        now = self.clock()
        self._deferred_since = {key: self._deferred_since.get(key, now) for key in self.deferred}
        if not self._deferred_since:
            self._told_stuck_at = None
            return
        key, since = min(self._deferred_since.items(), key=lambda item: item[1])
        told = self._told_stuck_at
        if now - since < self.stuck_after_s or (told is not None and now - told < self.stuck_after_s):
            return
        self._told_stuck_at = now
        oldest = self.deferred[key].envelope
        log.warning("projection_entries_stuck", deferred=len(self.deferred), match_id=oldest.match_id,
                    seq=oldest.seq, waited_s=round(now - since), partition=key[0],
                    hint="an earlier event of the match is missing from every consumer")

    def process(self, entries: list[PartitionEntry]) -> BatchOutcome:
        """Project `entries`; what is done is acked with the next read, the rest stays deferred."""
        if not entries:
            return BatchOutcome()
        parked = self.projector.parked_matches
        if parked and any(e.envelope.match_id in parked for e in entries):
            # Parked as this consumer last read it: `unpark` may have let the match go since, and
            # its entries, once parked, are acked for good. The record in Redis says.
            self.refresh_parked()
        outcome = self.projector.project(entries)
        if outcome.parked:
            # Recorded before they are acked: a parked entry is never dropped without a trace.
            self.dead_letters.record(outcome.parked, self.name)
        self.unacked += outcome.done + [p.entry for p in outcome.parked]
        self.deferred = {(e.partition, e.entry_id): e for e in outcome.deferred}
        self.projected += len(outcome.applied)
        if outcome.applied and self.lag is not None:
            self.lag.projected(outcome.newest_event_ms, len(outcome.applied))
        if outcome.applied or outcome.skipped:
            log.debug("projection_batch", applied=len(outcome.applied), skipped=len(outcome.skipped),
                      deferred=len(outcome.deferred), attempts=outcome.attempts)
        return outcome

    def flush_acks(self) -> int:
        """Ack now what is done (before stopping, or to see the group caught up)."""
        done, self.unacked = self.unacked, []
        return self.consumer.ack(done) if done else 0

    def gather_pause(self) -> float:
        """Seconds to wait before the next read: what is left of `gather_ms` after a short read."""
        if self._short_read_at is None or self.config.gather_ms <= 0:
            return 0.0
        return self.config.gather_ms / 1000 - (self.clock() - self._short_read_at)

    def sweep_retention(self) -> None:
        """Trim the streams of matches over and archived long enough; a failure is logged and
        the sweep tried again next time (projecting goes on either way)."""
        assert self.retention is not None
        try:
            self.retention.sweep()
        except Exception:  # noqa: BLE001 - Redis or the database away: the next sweep retries
            log.exception("retention_sweep_failed", consumer=self.name)

    def forget_dead_consumers(self) -> list[str]:
        """XGROUP DELCONSUMER for consumers that hold nothing and have not read for a long time.

        Consumer names are unique per process, so every restart would otherwise leave
        one more name in the group forever. A live consumer reads at least every
        `block_ms`; one idle for `forget_idle_ms` is gone. Only consumers without
        pending entries are deleted (deleting drops their pending entries).
        """
        forgotten: list[str] = []
        client = self.store.client
        for partition in self.consumer.partitions:
            key = self.store.keys.partition_stream(partition)
            try:
                consumers = client.xinfo_consumers(key, self.config.group)
            except Exception:  # noqa: BLE001 - no group yet on this stream
                continue
            for info in consumers:
                name = info["name"].decode() if isinstance(info["name"], bytes) else str(info["name"])
                if name != self.name and int(info["pending"]) == 0 and int(info["idle"]) >= self.config.forget_idle_ms:
                    client.xgroup_delconsumer(key, self.config.group, name)
                    forgotten.append(name)
        if forgotten:
            log.info("projection_consumers_forgotten", consumers=sorted(set(forgotten)))
        return forgotten

    def _read_pending_again(self) -> None:
        """After a broken connection: the deferred entries kept in memory again as the store
        holds them, from this consumer's pending list. A Redis that restarted on an AOF missing
        its last writes (or a replica that was behind) holds neither those writes' entries nor
        their pending records, and the store may have been written on since at their seqs."""
        kept = len(self.deferred)
        self.deferred = {}
        self._take(self.consumer.read_pending(self.config.batch))
        log.warning("projection_reconnected", consumer=self.name, deferred_dropped=kept, pending=len(self.deferred))

    def _take(self, entries: list[PartitionEntry]) -> None:
        for entry in entries:
            self.deferred.setdefault((entry.partition, entry.entry_id), entry)

    def run(self, stop: threading.Event) -> None:
        """Until `stop` is set; a failing round is logged and retried after a pause."""
        log.info("projection_consumer_started", consumer=self.name, group=self.config.group)
        failures = 0
        while not stop.is_set():
            try:
                self.run_once()
                failures = 0
                pause = self.gather_pause()
                if pause > 0:
                    stop.wait(pause)
            except Exception:  # noqa: BLE001 - keep consuming: Redis or the database may come back
                failures += 1
                log.exception("projection_round_failed", consumer=self.name, failures=failures)
                stop.wait(min(10.0, 0.2 * 2**min(failures, 6)))
        try:
            self.flush_acks()
        except Exception:  # noqa: BLE001 - Redis away: the entries stay pending and are redone (found done)
            log.exception("projection_final_ack_failed", consumer=self.name)
        self.projector.release()
        self.consumer.close()
        log.info("projection_consumer_stopped", consumer=self.name, projected=self.projected)

    def caught_up(self) -> bool:
        """Nothing pending in the group and nothing new for this consumer (tests, rebuild checks)."""
        self.flush_acks()
        return not self.deferred and self.consumer.pending_count() == 0


def _full(entries: list[PartitionEntry], count: int) -> bool:
    """Whether some partition gave a full `count` (so more is probably waiting there)."""
    if len(entries) < count:
        return False
    per_partition: dict[int, int] = {}
    for entry in entries:
        per_partition[entry.partition] = per_partition.get(entry.partition, 0) + 1
    return max(per_partition.values()) >= count
