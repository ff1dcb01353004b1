"""The consumer loop: one member of the projection's consumer group.

Each round: entries other consumers left pending too long (XAUTOCLAIM, every
`claim_every_s`), entries deferred earlier whose retry is due, then new entries (XREADGROUP);
one `Projector.project` transaction; XACK only what it committed or found
already done — sent with the next round's XREADGROUP, in one round trip (the
commit always precedes it; a process that dies in between redoes the batch,
which finds its events already done). Deferred entries (an earlier event of the match is in someone
else's hands) stay pending under this consumer and are retried, a match's after 20 ms and then twice
as long each time nothing of it moved, up to `retry_max_ms`, at once when an entry arrives that may be
the one they wait for. While this consumer lives it holds them (`PartitionConsumer.hold`, every third of
`claim_idle_ms`), so no other consumer of the group takes them over, nor does its own XAUTOCLAIM;
should this process die they are XAUTOCLAIMed, once, like any other.

A consumer restarted under its name first holds every entry still pending under it
(`PartitionConsumer.hold_pending`, before its first read or XAUTOCLAIM), then reads them back,
`batch` a partition a round: where such a read comes back full, the next round reads on from its
last id, instead of new entries, until every one is in memory (`_read_pending`), held again every
third of `claim_idle_ms` meanwhile. Before, only the first `batch` were read back, and the rest
waited `claim_idle_ms` for an XAUTOCLAIM (its own, or another replica's); until session 33 those
not read back yet, idle past `claim_idle_ms` while the consumer was down, went to the first
replica whose XAUTOCLAIM came.

A consumer whose connection to Redis broke (or whose groups were gone, or recreated by another
consumer: a read of new entries gives one not past those it gave before) forgets the deferred
entries it kept and reads its pending entries again, every one as after a restart
(`_read_pending_again`, each round until that read succeeds): the server may be one that lost
acknowledged writes, and a kept entry of that lost history would otherwise be applied once
another consumer projected the store's new one up to the seq before it; and a recreated group
delivers the kept entries again, perhaps to another consumer. A deferred entry that the hold
finds pending under another consumer, or under no one past the group's last delivered id (a
recreated group delivers it again), is forgotten too. The batch in hand when
the connection breaks outside a read (while it is projected) is the projector's to tell by its
stream entry ids (`Projector._read_before`).

A round whose batch failed still acks what the batch did before it failed (`partial_outcome`: entries
found done, entries parked), recording the parked ones first.

When the projector refuses a batch for a fault not of its entries (the database away: `poison_like`),
the consumer holds back: it reads nothing new (nor its leftovers, nor XAUTOCLAIMs) and retries every
entry it keeps, each round after the run loop's pause, until a batch commits or it keeps nothing more
(`_hold_back`, `_read_on`).
Before, each failed round read `batch` a partition more into memory, for as long as the outage lasted.

Entries the projector parked (poison: see `projector.py`) are recorded as dead letters
(`parking.py`) and then acked like done ones (a record that fails is made again at the start of
each round, the entries unacked until then: `_record_parked`); the parked matches are read back from
Redis at start and every `claim_every_s`, so every consumer parks their later entries.

Run more processes (distinct consumer names, one group) to scale out.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, replace

from famiglia.eventstore import PartitionEntry
from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.eventstore.port import entry_key, full_partitions
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.eventstore.unreadable import UnreadableEntry
from famiglia.telemetry import get_logger
from famiglia.v1.envelope_pb2 import EventEnvelope

from .lag import LagMonitor
from .parking import DeadLetters
from .projector import BatchOutcome, Parked, Projector, partial_outcome, poison_like
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
    """How long an entry must sit unacked before another consumer takes it over; a live consumer
    holds the entries it keeps waiting more often than that (`hold_every_s`), so only a dead or
    stalled one's move."""
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
    retry_max_ms: int = 5000
    """The longest wait between two tries of a match's deferred entries: the wait starts at
    `RETRY_FIRST_MS` and doubles each time nothing of the match moved, so a gap nothing fills
    costs a try every few seconds, not one every round."""
    gather_ms: int = 20
    """After a read that came back short of `batch`, the next read waits until this long
    after it, so a trickle of events (one bot move at a time) is projected in batches
    rather than one by one: a batch's fixed costs (transaction, checkpoint, the
    XREADGROUP and XACK round trips) dominate a small batch. Adds at most this to the
    lag; 0 reads again at once."""


RETRY_FIRST_MS = 20
"""The first wait before deferred entries are tried again: another consumer holding the event
before them usually commits it within a batch's time."""


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
        self.consumer.on_unreadable = self._unreadable
        self.lag = lag
        self.deferred: dict[tuple[int, str], PartitionEntry] = {}
        self._last_claim = 0.0
        self._last_lag = 0.0
        self._last_cleanup = time.monotonic()
        self._started = False
        self._resumed = False
        """Whether this consumer's own pending entries were held and the first of them read back
        (`_resume`): at start, again after a reconnect, until that succeeds."""
        self._last_hold = 0.0
        self._retry: dict[str, tuple[float, float, int]] = {}
        """Match id -> (when its deferred entries are tried next (`clock`), the wait that was, the
        lowest seq deferred): a match is here from its first try that left entries deferred."""
        self._deferred_since: dict[tuple[int, str], float] = {}
        """When each entry deferred now was first deferred (`clock`): how long its gap has lasted."""
        self._told_stuck_at: float | None = None
        self._told_match = ""
        self._short_read_at: float | None = None
        self.clock = time.monotonic  # the gather window's clock (tests step it)
        """When the last read came back short of `batch` (None: it was full)."""
        self._pending_from: dict[int, str] = {}
        """Partitions where the last read of this consumer's own pending entries came back full,
        each with the last id it gave: the next round reads on from there instead of new entries."""
        self._reconnects = 0
        """The consumer's `reconnects` whose pending entries were read again (`_read_pending_again`)."""
        self.projected = 0
        self.unacked: list[PartitionEntry] = []
        """Committed (or found done) entries, acked with the next read or `flush_acks`."""
        self._unparks_seen = 0
        """`DeadLetters.parked`'s unparks counter at the last `refresh_parked`."""
        self._unrecorded: dict[tuple[int, str], Parked] = {}
        """Parked entries whose dead-letter record failed (`_record_parked`), by (partition, entry id): not
        acked until it is made, nor taken to project again should they come back meanwhile (`_take`)."""
        self._held_back_at: float | None = None
        """When the projector last refused a batch (the database away, `_hold_back`): until it takes
        one again this consumer reads nothing new and retries only what it keeps (None: reading)."""
        self._held_back_on = 0.0
        """`clock` when it was held back: the time held back is no time waiting for a gap (`_read_on`)."""

    @property
    def name(self) -> str:
        return self.consumer.consumer

    def start(self) -> None:
        """Create the group on every partition from the beginning of history (a new group sees everything)."""
        self.consumer.ensure_groups("0")
        self.refresh_parked()
        self._started = True

    def refresh_parked(self) -> None:
        """The parked matches as recorded in Redis (by any consumer, or forgotten by `unpark`), and
        the unparks counted then: what a match this consumer parks is recorded against."""
        recorded, self._unparks_seen = self.dead_letters.parked()
        self.projector.parked_matches = recorded | {
            p.entry.envelope.match_id for p in self._unrecorded.values() if p.first}  # struck out, record pending

    def run_once(self, block_ms: int | None = None) -> BatchOutcome:
        """One round; returns what the batch did."""
        if not self._started:
            self.start()
        if not self._resumed:
            # Our own leftovers first: a consumer restarted under a fixed name redoes what it had read.
            self._resume()
        if self._unrecorded:  # parked entries whose record failed: recorded (and acked) before all else
            self._try_again(self._record_parked([]))
            if not self._unrecorded:
                # Acked now, not with the read: idle since they were parked, this round's claim would
                # take them again, to be parked and recorded once more.
                done, self.unacked = self.unacked, []
                try:
                    self.consumer.ack(done)
                except BaseException:
                    self.unacked = done + self.unacked
                    raise
        now = time.monotonic()
        if (self.deferred or self._pending_from or self._unrecorded) and now - self._last_hold >= self.hold_every_s:
            self._last_hold = now
            if self._pending_from:  # some of our own leftovers are not read back yet
                self.consumer.hold_pending()
            self.hold_deferred()  # before claiming: our own waiting entries are not stale
        if self._held_back_at is not None and not self.deferred:
            self._read_on()  # nothing kept any more (taken over, forgotten on a reconnect): nothing to hold back for
        held_back = self._held_back_at is not None
        if now - self._last_claim >= self.config.claim_every_s:
            self._last_claim = now
            self.refresh_parked()
            # Held back, a dead consumer's entries stay pending under it: taken, they would only wait here.
            claimed = [] if held_back else self._take(
                self.consumer.claim_stale(self.config.claim_idle_ms, count=self.config.batch * 4))
            if claimed:  # only what was not ours already: a state change, told once
                log.info("projection_claimed", entries=len(claimed), consumer=self.name)
        if now - self._last_cleanup >= self.config.cleanup_every_s:
            self._last_cleanup = now
            self.forget_dead_consumers()
        if self.retention is not None and now - self._last_retention >= self.config.retain_every_s:
            self._last_retention = now
            self.sweep_retention()
        wait = self.config.block_ms if block_ms is None else block_ms
        if self.deferred:  # (a read of our own leftovers, `_pending_from`, never waits)
            # Wake for the next retry that is due, and in time to hold the waiting entries.
            hold_in = self._last_hold + self.hold_every_s - time.monotonic()
            wait = max(0, min(wait, round(1000 * min(self._next_retry_in(), hold_in))))
        done, self.unacked = self.unacked, []
        try:
            if held_back:  # the database refused the last try: nothing new until it takes what we keep
                read = []
                if done:
                    self.consumer.ack(done)
            elif self._pending_from:  # the rest of our own leftovers, before anything new
                read = self._read_pending(ack=done)
            else:
                read = self.consumer.read(self.config.batch, block_ms=wait, ack=done)
        except BaseException:
            self.unacked = done + self.unacked  # not acked: try again next round
            raise
        self._short_read_at = self.clock() if read and not full_partitions(read, self.config.batch) else None
        reconnects = self.consumer.reconnects
        if reconnects != self._reconnects:
            self._reconnects = reconnects
            self._read_pending_again()  # should it fail, the next round reads them again (`_resumed`)
        self._take(read)
        # Held back, every entry kept is tried, each round (the run loop's pause after a failure
        # is the backoff): a retry time of one's match must not keep the database's return untold.
        try:
            outcome = self.process(list(self.deferred.values()) if held_back else self._due())
        except Exception:
            if self._held_back_at is not None:  # the database away: the lag is told all the same
                self._measure_lag(now)
            raise
        self._tell_stuck()
        self._measure_lag(now)
        return outcome

    def _measure_lag(self, now: float) -> None:
        """Every `lag_every_s`; with the database away the entries kept count (`LagMonitor.measure`),
        and a round that failed is not failed again by Redis failing the measure too."""
        if self.lag is None or now - self._last_lag < self.config.lag_every_s:
            return
        self._last_lag = now
        if self._held_back_at is None:
            self.lag.measure(self.deferred.values())
            return
        try:
            self.lag.measure(self.deferred.values())
        except Exception:  # noqa: BLE001 - Redis away too: the round's own failure is the one told
            log.debug("projection_lag_unmeasured", consumer=self.name, exc_info=True)

    @property
    def hold_every_s(self) -> float:
        """How often the deferred entries are held: thrice within the idle time after which any
        consumer, this one too, would take them over (a round that fails waits up to 10 s)."""
        return self.config.claim_idle_ms / 3000

    def hold_deferred(self) -> None:
        """Keep the deferred entries ours while we live; forget those another consumer took
        over while this one stalled (it retries them now: two holders would pass them back and forth),
        and those the group delivers again, to whichever consumer (it was recreated: `hold`). Parked
        entries waiting for their record (`_record_parked`) are held too, and kept whatever the hold
        says (parked here, recorded and acked here: an ack of one another consumer has is harmless);
        before, idle past the claim time, another replica took them and struck their match out anew."""
        unrecorded = [p.entry for p in self._unrecorded.values()]
        taken, gone = self.consumer.hold([*self.deferred.values(), *unrecorded])
        if unrecorded:
            taken = [e for e in taken if (e.partition, e.entry_id) in self.deferred]
            gone = [e for e in gone if (e.partition, e.entry_id) in self.deferred]
        if not taken and not gone:
            return
        for entry in taken + gone:
            self.deferred.pop((entry.partition, entry.entry_id), None)
        self._forget_retries()
        if taken:
            log.warning("projection_entries_taken_over", entries=len(taken), consumer=self.name,
                        hint="this consumer did not hold them within FAMIGLIA_PROJECTION_CLAIM_IDLE_MS "
                             "(a round or a stall took that long): the consumer that took them over projects them")
        if gone:
            log.warning("projection_entries_gone", entries=len(gone), consumer=self.name,
                        hint="pending under no consumer and not delivered yet: the group was recreated "
                             "(it delivers them again, to whichever consumer reads)")

    def _due(self) -> list[PartitionEntry]:
        """The deferred entries to try this round: every entry of a match whose retry is due, or
        which was never tried yet."""
        if not self._retry:
            return list(self.deferred.values())
        now = self.clock()
        retry = self._retry
        return [e for e in self.deferred.values()
                if (r := retry.get(e.envelope.match_id)) is None or r[0] <= now]

    def _next_retry_in(self) -> float:
        """Seconds until some deferred entry is to be tried (0: one never tried yet)."""
        retry = self._retry
        if not retry or any(e.envelope.match_id not in retry for e in self.deferred.values()):
            return 0.0
        return min(due for due, _, _ in retry.values()) - self.clock()

    def _back_off(self, tried: list[PartitionEntry], outcome: BatchOutcome) -> None:
        """When each tried match with entries still deferred is tried next: soon after it moved
        (its next event may be committing elsewhere), twice the last wait after it did not."""
        if not outcome.deferred:  # the usual round: nothing waits
            if self._retry:
                for entry in tried:
                    self._retry.pop(entry.envelope.match_id, None)
            return
        moved = {e.envelope.match_id for e in outcome.done} | {p.entry.envelope.match_id for p in outcome.parked}
        waiting: dict[str, int] = {}
        for entry in outcome.deferred:
            match_id, seq = entry.envelope.match_id, entry.envelope.seq
            waiting[match_id] = min(seq, waiting.get(match_id, seq))
        for match_id in {e.envelope.match_id for e in tried} - waiting.keys():
            self._retry.pop(match_id, None)
        now, longest = self.clock(), max(RETRY_FIRST_MS, self.config.retry_max_ms) / 1000
        for match_id, seq in waiting.items():
            last = self._retry.get(match_id)
            wait = RETRY_FIRST_MS / 1000 if last is None or match_id in moved else min(2 * last[1], longest)
            self._retry[match_id] = (now + wait, wait, seq)

    def _forget_retries(self) -> None:
        """Drop the retry times of matches with nothing deferred any more."""
        waiting = {e.envelope.match_id for e in self.deferred.values()}
        self._retry = {m: r for m, r in self._retry.items() if m in waiting}

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
        key, since = min(self._deferred_since.items(), key=lambda item: item[1], default=(None, now))
        if key is None or now - since < self.stuck_after_s:
            if self._told_stuck_at is not None:  # what was told is over: projected, unparked, taken over
                log.info("projection_entries_unstuck", consumer=self.name, match_id=self._told_match,
                         deferred=len(self.deferred))
                self._told_stuck_at = None
            return
        told = self._told_stuck_at
        if told is not None and now - told < self.stuck_after_s:
            return
        self._told_stuck_at = now
        oldest = self.deferred[key].envelope
        self._told_match = oldest.match_id
        log.warning("projection_entries_stuck", deferred=len(self.deferred), match_id=oldest.match_id,
                    seq=oldest.seq, waited_s=round(now - since), partition=key[0],
                    hint="an earlier event of the match is missing from every consumer")

    def process(self, entries: list[PartitionEntry]) -> BatchOutcome:
        """Project `entries` (kept in `deferred`: those due this round); what is done is acked with
        the next read, the rest stays deferred, to be tried again after its wait."""
        if not entries:
            return BatchOutcome()
        parked = self.projector.parked_matches
        if parked and any(e.envelope.match_id in parked for e in entries):
            # Parked as this consumer last read it: `unpark` may have let the match go since, and
            # its entries, once parked, are acked for good. The record in Redis says.
            self.refresh_parked()
        try:
            outcome = self.projector.project(entries)
        except Exception as exc:
            partial = partial_outcome(exc)
            if partial is not None:
                self._settle_partial(partial)
            if not poison_like(exc):  # the database's fault, not the entries': more of them would not help
                self._hold_back(exc)
            elif self._held_back_at is not None:
                # The database answered, and the failure may be the entries' own (a poison match
                # striking out, alone with nothing else to project): read on, as before a hold-back.
                self._read_on()
            raise
        if self._held_back_at is not None:
            self._read_on()
        # Recorded before they are acked: a parked entry is never dropped without a trace.
        again = self._record_parked(outcome.parked)
        self.unacked += outcome.done
        self._count(outcome)
        if len(entries) == len(self.deferred):  # every entry kept was tried (`entries` are some of them)
            self.deferred = {(e.partition, e.entry_id): e for e in outcome.deferred}
        else:  # the others wait for their retry
            for entry in entries:
                self.deferred.pop((entry.partition, entry.entry_id), None)
            self.deferred.update(((e.partition, e.entry_id), e) for e in outcome.deferred)
        self._try_again(again)
        self._back_off(entries, outcome)
        if outcome.applied or outcome.skipped:
            log.debug("projection_batch", applied=len(outcome.applied), skipped=len(outcome.skipped),
                      deferred=len(outcome.deferred), attempts=outcome.attempts)
        return outcome

    def _unreadable(self, entries: list[UnreadableEntry]) -> None:
        """Partition entries no event can be read from (a foreign XADD): recorded as dead letters
        and counted (`famiglia.projection.unreadable_entries`) before the consumer acks them, so
        they fail no read or claim, nor hold the good entries read or claimed with them (before
        session 34 such a claim failed every `claim_idle_ms`, and none of those was projected)."""
        self.dead_letters.record_unreadable(entries, self.name)
        if self.lag is not None:
            self.lag.unreadable(len(entries))
        self._pass_over_unreadable(entries)

    def _pass_over_unreadable(self, entries: list[UnreadableEntry]) -> None:
        """The checkpoints past unreadable entries, as past parked ones (`Projector._pass_over`), at each
        entry id's time: a partition whose newest entry is one is not lagging behind it (before, its lag
        was that entry's time less the last event projected, until another event came to it). Best
        effort, and not tried held back (a connect to a database away could take its whole timeout):
        they only tell the lag."""
        if self._held_back_at is not None:
            return
        passed = []
        for entry in entries:
            envelope = EventEnvelope()
            envelope.timestamp.FromMilliseconds(entry_key(entry.entry_id)[0])
            passed.append(PartitionEntry(entry.partition, entry.entry_id, envelope))
        try:
            self.projector._pass_over(passed)
        except Exception:  # noqa: BLE001 - the lag only: the next event of the partition moves it on
            log.debug("projection_unreadable_checkpoints_unmoved", consumer=self.name, exc_info=True)

    def _record_parked(self, parked: list[Parked]) -> list[PartitionEntry]:
        """Record parked entries as dead letters (with those a failed record left), then ack them
        with the next read. Should the record fail (Redis away), they are kept, unacked and out of
        `deferred`, and recorded again at the start of each round until it is made, their matches
        parked meanwhile though the hash does not name them yet (`refresh_parked`). Before session
        34 the round failed, and its next refresh of the parked matches forgot a match whose
        strike-out went unrecorded: struck all over again, `park_after` more failing rounds each
        time Redis failed the record. Made again, the record writes no letter twice (one script,
        keyed by partition entry: before session 35 a record cut short wrote its letters again), and
        names no match `unpark` let go since the parked matches were read: it is projected again,
        here at once (before, the record parked it again, for every consumer). The entries of such a
        match are not acked but returned, to be tried again (`_try_again`): an unpark after their
        strike-out projected them from the match's stream (they are skipped), one before it (read
        after this consumer's last look) projected none of them (before session 35 they were acked
        unprojected, the match named nowhere, and its next entries waited for a gap for ever);
        struck again, they name the match, the parked matches read again since."""
        todo = dict(self._unrecorded)
        for item in parked:  # each entry once: one kept before is the one recorded (with its `first`)
            key = (item.entry.partition, item.entry.entry_id)
            if key not in todo:  # parked as the parked matches were last read
                todo[key] = replace(item, unparks_seen=self._unparks_seen)
        if not todo:
            return []
        try:
            recorded = self.dead_letters.record(todo.values(), self.name)
        except Exception:  # noqa: BLE001 - Redis away: kept, recorded at the next round's start
            self._unrecorded = todo
            log.warning("projection_dead_letters_unrecorded", consumer=self.name, entries=len(todo), exc_info=True)
            return []
        self._unrecorded = {}
        unparked = set(recorded.unparked)
        again = [p.entry for p in todo.values() if p.entry.envelope.match_id in unparked]
        self.unacked += [p.entry for p in todo.values() if p.entry.envelope.match_id not in unparked]
        for match_id in recorded.unparked:  # `unpark` let it go meanwhile: its entries are projected
            self.projector.parked_matches.discard(match_id)
            log.info("projection_match_unparked_meanwhile", match_id=match_id, consumer=self.name,
                     entries=sum(e.envelope.match_id == match_id for e in again))
        if unparked:
            try:  # the unparks since: should they fail again, the match is named
                self.refresh_parked()
            except Exception:  # noqa: BLE001 - Redis away: the next refresh; struck meanwhile, tried again
                log.debug("projection_parked_unread", consumer=self.name, exc_info=True)
        return again

    def _try_again(self, entries: list[PartitionEntry]) -> None:
        """Parked entries of a match `unpark` let go before their record (`_record_parked`): kept, to
        be projected (or skipped, the unpark having projected them) with the next batch."""
        for entry in entries:
            self.deferred[(entry.partition, entry.entry_id)] = entry

    def _count(self, outcome: BatchOutcome) -> None:
        self.projected += len(outcome.applied)
        if outcome.applied and self.lag is not None:
            self.lag.projected(outcome.newest_event_ms, len(outcome.applied))

    def _settle_partial(self, partial: BatchOutcome) -> None:
        """A failed batch's entries done before it failed (`partial_outcome`): acked with the next
        read, parked ones recorded first (`_record_parked`), none kept to be tried again; the rest
        stays as it was.
        Before session 34 the round's failure dropped them: a redelivery, or an entry of a parked
        match, stayed unacked beside a poison match until a healthy batch came to this consumer."""
        finished = partial.done + [p.entry for p in partial.parked]
        again = self._record_parked(partial.parked)
        self.unacked += partial.done
        for entry in finished:
            self.deferred.pop((entry.partition, entry.entry_id), None)
        self._try_again(again)
        self._forget_retries()
        self._count(partial)

    def _hold_back(self, exc: Exception) -> None:
        """The projector refused a batch for a fault not of its entries (the database away, locked
        or refusing, the store out of reach: `poison_like` says): read nothing new until it takes
        one, so a long outage costs no more memory than what was kept when it began, and the rest
        waits in the streams and the group, undelivered or pending here. A failure that may be the
        entries' own reads on as before: new entries let the projector tell the poison match apart."""
        if self._held_back_at is not None:
            return
        self._held_back_at, self._held_back_on = time.monotonic(), self.clock()
        log.warning("projection_reads_held_back", consumer=self.name, entries=len(self.deferred),
                    reason=f"{type(exc).__name__}: {exc}".replace("\n", " ")[:300],
                    hint="the read models refuse batches: this consumer retries what it holds and reads "
                         "no new entries until one commits")
        if self.lag is not None:
            self.lag.held_back(True)

    def _read_on(self) -> None:
        """The projector took a batch again, or nothing is kept any more: new entries are read
        from the next round, and the gauge says so (before, it stayed at 1 after the kept entries
        were taken over, until a batch committed, which an idle consumer might never have)."""
        assert self._held_back_at is not None
        held_s = time.monotonic() - self._held_back_at
        self._held_back_at = None
        # The entries kept waited through the outage because no consumer could commit, the one
        # they wait for neither: not a gap (`_tell_stuck`, which failed rounds never reach).
        now = self.clock()
        held = now - self._held_back_on
        self._deferred_since = {key: min(now, since + held) for key, since in self._deferred_since.items()}
        log.info("projection_reads_resumed", consumer=self.name, held_s=round(held_s, 1), entries=len(self.deferred))
        if self.lag is not None:
            self.lag.held_back(False)

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
        pending entries are deleted (deleting drops their pending entries), as they are when
        deleted: the look is made again in the delete's script, so a consumer restarted under
        that name that read since keeps its entries (before, they went pending under no one).
        """
        forgotten: list[str] = []
        client = self.store.client
        for partition in self.consumer.partitions:
            key = self.store.keys.partition_stream(partition)
            try:
                consumers = client.xinfo_consumers(key, self.config.group)
            except Exception:  # noqa: BLE001 - no group yet on this stream
                continue
            names = [name for info in consumers
                     if (name := info["name"].decode() if isinstance(info["name"], bytes) else str(info["name"]))
                     != self.name and int(info["pending"]) == 0 and int(info["idle"]) >= self.config.forget_idle_ms]
            if names:  # looked at again, and deleted, in one script a page of them
                forgotten += self.consumer.forget_idle_consumers(partition, names, self.config.forget_idle_ms)
        if forgotten:
            log.info("projection_consumers_forgotten", consumers=sorted(set(forgotten)))
        return forgotten

    def _read_pending_again(self) -> None:
        """After a broken connection: the deferred entries kept in memory again as the store
        holds them, from this consumer's pending list. A Redis that restarted on an AOF missing
        its last writes (or a replica that was behind) holds neither those writes' entries nor
        their pending records, and the store may have been written on since at their seqs. Told
        whether or not the read back succeeds (`read_back`; the next round does it otherwise): a
        Redis restarting often fails it too, and the warning came only after it succeeded."""
        kept = len(self.deferred)
        self.deferred, self._retry, self._pending_from = {}, {}, {}
        self._resumed = False
        try:
            self._resume()
        finally:
            log.warning("projection_reconnected", consumer=self.name, deferred_dropped=kept,
                        pending=len(self.deferred), read_back=self._resumed)

    def _resume(self) -> None:
        """Hold every entry pending under this consumer, then read back the first `batch` of each
        partition (the rest in the next rounds, held meanwhile): none of them is left to another
        replica's XAUTOCLAIM, however long this consumer was away. Done once it succeeds."""
        held = self.consumer.hold_pending()
        self._last_hold = time.monotonic()
        self._take(self._read_pending())
        self._resumed = True
        if held:
            log.info("projection_pending_held", entries=held, consumer=self.name)

    def _read_pending(self, ack: list[PartitionEntry] | None = None) -> list[PartitionEntry]:
        """This consumer's own pending entries, `batch` a partition: from the oldest, or on from
        where the last such read came back full. Where one does, the next round reads on (no new
        entries meanwhile, which would be pending too), so every one is back in memory within a few
        rounds, held with the deferred ones, none left for an XAUTOCLAIM to take after `claim_idle_ms`."""
        read = self.consumer.read_pending(self.config.batch, after=self._pending_from or None, ack=ack or ())
        self._pending_from = full_partitions(read, self.config.batch)
        return read

    def _take(self, entries: list[PartitionEntry]) -> list[PartitionEntry]:
        """Keep `entries` to project; returns those not kept already. One below every seq its
        match has deferred may be what they wait for: the match is tried this round."""
        new = []
        for entry in entries:
            key = (entry.partition, entry.entry_id)
            if key in self.deferred or key in self._unrecorded:  # (parked, its record pending: not again)
                continue
            self.deferred[key] = entry
            new.append(entry)
            retry = self._retry.get(entry.envelope.match_id)
            if retry is not None and entry.envelope.seq < retry[2]:
                del self._retry[entry.envelope.match_id]
        return new

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

