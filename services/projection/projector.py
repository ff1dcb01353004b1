"""Events in, read models out: one SQL transaction per batch, exactly once per event.

The fence is each match's projected `version` (and the archive's primary key
(match_id, seq)): an event is applied only when its seq is the match's version
+ 1, skipped when at or below it (a redelivery), and deferred (left unacked, to
be retried) when an earlier event of the match has not been projected yet —
which happens when consumers of one group split a partition. Match rows are
read FOR UPDATE (PostgreSQL) or under BEGIN IMMEDIATE (SQLite), so two
processes never apply the same event; a losing transaction rolls back and the
batch is retried, finding those events already done.

A store that lost acknowledged writes and was written on since shows as entries at
archived seqs under other event ids (`_went_back`): a live match is projected again
from the store; a finished one (or one whose `match_created` was replaced) is flagged
(`matches.diverged_seq`, `divergence.py`) and nothing more is projected onto it until a
rebuild takes it from the store. An entry read before the store went back, and applied after
another consumer projected the store's new history, is told by its stream entry id: not past
the one the match was last moved on from (`_read_before`); it is checked against the store,
and skipped unless the store holds it (`_stale_past`).

The partition checkpoint (newest entry id committed per partition) commits in
the same transaction. It is not the skip rule: when consumers share a
partition, entries below the newest committed one may still be unprojected.

A poison entry — one whose match fails in a transaction of its own, batch after batch, for a
reason no retry mends (a unique violation, data the database refuses, a record our code cannot
read) — is *parked*: after `park_after` such failures its match's entries are handed back in
`BatchOutcome.parked` (the runner acks them and writes a dead-letter record) and every later
entry of the match follows them, so one bad match never stops the others. A match whose first
event is not `match_created` is parked at once. Failures of the database itself (connection
lost, locked, serialisation) are never parked: they fail the round, which is retried. Several
matches failing alone with nothing else moving are struck only if the read models take a
made-up match, rolled back (`_probe_passes`): otherwise the fault is ours or the database's. A
failed round hands back what it did before it failed (`partial_outcome`), for the caller to ack.

A batch costs little beyond its events: the matches are folded in memory and
what they change is written with one statement per kind of row (`writes.py`),
not per match.

Results are computed by folding each match with `MatchState`; folded states
stay in memory while a match is live and are rebuilt from the archive when the
process restarted, another consumer moved the match, or a transaction rolled back,
and whenever the archive no longer holds the event a fold took last (another consumer
projected the match again from a store that went back: `_state_for`).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Link
from sqlalchemy import delete, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, OperationalError
from sqlmodel import Session

from famiglia.engine import Result
from famiglia.engine.registry import Registry, UnknownGame
from famiglia.eventstore import PartitionEntry
from famiglia.eventstore.envelopes import (
    MATCH_CANCELLED,
    MATCH_CREATED,
    SEAT_CHANGES,
    SEAT_LEFT,
    open_match_cancelled,
    open_match_created,
    open_seat_change,
)
from famiglia.grpcutil.errors import pg_sqlstate, store_away
from famiglia.matchstate import MatchState
from famiglia.ratings import MatchOutcome, Placement, ranks_with_leavers
from famiglia.readmodels import game_scope, tournament_scope
from famiglia.readmodels.archive import archive_values
from famiglia.readmodels.queries import seed_to_db
from famiglia.telemetry import carried_trace_id, extract_context, get_logger, spans_exported, tracer
from famiglia.v1.envelope_pb2 import EventEnvelope, MatchCreated

from .divergence import archived_ids, first_difference
from .rating_book import RatingBook
from .writes import ARCHIVE, BatchWriter, BatchWrites, MatchRow, SeatResult, archived, entry_key

log = get_logger("famiglia.projection")

PROBE_PREFIX = "projection-probe-"
PROBE_GAME = "projection-probe"
PROBE_EVENT = "projection_probe"
"""The made-up match `Projector._probe_passes` projects and rolls back: its id (with a random
suffix), a game no server has, and the type of its second event."""

UNREAD = "0-0"
"""The entry id of an event read from no partition stream (the archive in a rebuild, a match
stream in `unpark`): it tells nothing of when it was read."""


@dataclass
class BatchOutcome:
    """What a batch did; `done` may be acked, `deferred` must stay pending."""

    applied: list[PartitionEntry] = field(default_factory=list)
    skipped: list[PartitionEntry] = field(default_factory=list)
    deferred: list[PartitionEntry] = field(default_factory=list)
    newest_event_ms: int = 0
    finished_matches: list[str] = field(default_factory=list)
    attempts: int = 1
    parked: list[Parked] = field(default_factory=list)
    """Entries given up on (poison): ack them, keep a dead-letter record."""

    @property
    def done(self) -> list[PartitionEntry]:
        return self.applied + self.skipped

    def merge(self, other: BatchOutcome) -> None:
        self.applied += other.applied
        self.skipped += other.skipped
        self.deferred += other.deferred
        self.parked += other.parked
        self.finished_matches += other.finished_matches
        self.newest_event_ms = max(self.newest_event_ms, other.newest_event_ms)
        self.attempts = max(self.attempts, other.attempts)


@dataclass(frozen=True)
class Parked:
    """A poison entry and why it was given up on."""

    entry: PartitionEntry
    reason: str
    first: bool = False
    """The entry that got its match parked (False: a later entry of an already parked match)."""
    unparks_seen: int | None = None
    """The `unpark`s counted when its consumer last read the parked matches (`DeadLetters.parked`),
    set by the runner: the record names the match parked only if no `unpark` of it came since (None:
    whatever came)."""


class RetryBatch(Exception):
    """The transaction lost a race (another consumer got there first): roll back and redo."""


class StoreUnreadable(Exception):
    """The event store could not be reached while a match was projected again from it (a
    connection refused or lost, a timeout, a Redis loading or failing over): the batch fails and
    is redone later, never parked (the events are not at fault)."""


class StoreCorrupt(ValueError):
    """The event store answered, but what it holds of a match cannot be read (an event that does
    not decode, a key of another type): the match's own fault, which no retry mends, so it fails
    like a poison entry and is parked (before session 34 it was `StoreUnreadable`, and the
    consumer held back for good on one corrupt event)."""


def store_unreachable(exc: BaseException) -> bool:
    """Whether reading the event store failed for Redis out of reach or refusing for now, not
    for its data: `famiglia.grpcutil.errors.store_away`, the one classification every service's
    answers use (refused or dropped connections, timeouts, Redis loading its data, a replica
    whose primary is down, a cluster moving slots, READONLY, OOM, MISCONF), and a socket's own
    OSError."""
    return isinstance(exc, OSError) or store_away(exc)


class MatchCache:
    """Folded live matches, least recently used evicted first."""

    def __init__(self, capacity: int = 2000) -> None:
        self.capacity = capacity
        self._states: OrderedDict[str, MatchState] = OrderedDict()

    def get(self, match_id: str) -> MatchState | None:
        state = self._states.get(match_id)
        if state is not None:
            self._states.move_to_end(match_id)
        return state

    def put(self, state: MatchState) -> None:
        self._states[state.match_id] = state
        self._states.move_to_end(state.match_id)
        while len(self._states) > self.capacity:
            self._states.popitem(last=False)

    def drop(self, match_ids: Iterable[str]) -> None:
        for match_id in match_ids:
            self._states.pop(match_id, None)

    def clear(self) -> None:
        self._states.clear()

    def __len__(self) -> int:
        return len(self._states)


class Projector:
    """Applies batches of partition entries to the read models (see the module docstring)."""

    def __init__(self, engine: Engine, registry: Registry, *, cache_size: int = 2000, max_attempts: int = 8,
                 park_after: int = 3, store_events: Callable[[str, int], list[EventEnvelope]] | None = None) -> None:
        self.engine = engine
        self.registry = registry
        self.store_events = store_events
        """A match's events past a seq, read from the event store (`EventStore.read`): what a
        match that the store took back is projected again from (`_went_back`)."""
        self.cache = MatchCache(cache_size)
        self.max_attempts = max_attempts
        self.park_after = park_after
        """Failures of a match in a transaction of its own before its entries are parked."""
        self.parked_matches: set[str] = set()
        """Matches given up on: their entries are parked without being tried (the runner
        loads the dead-letter records of other consumers into it)."""
        self._strikes: dict[str, int] = {}
        self.ratings = RatingBook()
        self.writer = BatchWriter(engine.dialect.name)
        self._conn: Connection | None = None
        self._conn_thread = 0

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Connection]:
        """One transaction on a connection this projector keeps between batches (the thread that
        projects first owns it; others take one from the pool): a pool checkout and return per
        batch cost as much as a small batch's statements. Any error gives the connection back,
        so the retry starts on a fresh one."""
        thread = threading.get_ident()
        if self._conn_thread not in (0, thread):
            with self._connect() as conn, conn.begin():
                yield conn
            return
        self._conn_thread = thread
        kept = self._conn
        if kept is None or kept.closed or kept.invalidated:
            kept = self._conn = self._connect()
        try:
            with kept.begin():
                yield kept
        except BaseException:
            self.release()
            raise

    def _connect(self) -> Connection:
        """A connection; one that cannot be made is marked so (`_not_connected`)."""
        try:
            return self.engine.connect()
        except DBAPIError as exc:
            exc.not_connected = True  # type: ignore[attr-defined]
            raise

    def release(self) -> None:
        """Give the kept connection back to the pool (after an error, or when done)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    # -- the batch ----------------------------------------------------------------------
    def project(self, entries: Sequence[PartitionEntry]) -> BatchOutcome:
        """Apply what can be applied, in one transaction; retried when it loses a race. A batch
        that fails for good is split by match, so a poison match is found and, when it keeps
        failing, parked (module docstring)."""
        unique: dict[tuple[str, int], PartitionEntry] = {}
        for entry in entries:
            unique.setdefault((entry.envelope.match_id, entry.envelope.seq), entry)
        if not unique:
            return BatchOutcome()
        by_match: dict[str, list[PartitionEntry]] = {}
        for (match_id, _seq), entry in sorted(unique.items()):
            by_match.setdefault(match_id, []).append(entry)
        outcome = BatchOutcome()
        try:
            self._project_matches(by_match, outcome)
        except Exception as exc:
            # What was done before the failure is done (committed, or parked without a try): the
            # caller acks it though the round fails. Before, it was dropped with the round, and
            # those entries stayed unacked until a healthy batch came to this consumer.
            exc.batch_outcome = outcome  # type: ignore[attr-defined]
            self._settle_parked(outcome, failing=True, database_away=not poison_like(exc))
            raise
        self._settle_parked(outcome)
        return outcome

    def _project_matches(self, by_match: dict[str, list[PartitionEntry]], outcome: BatchOutcome) -> None:
        """`project`'s work, into `outcome` as it goes: it holds what was done should a raise end it."""
        for match_id in [m for m in by_match if m in self.parked_matches]:
            outcome.parked += [Parked(e, "match_parked") for e in by_match.pop(match_id)]
        # A match that failed before goes alone, so it cannot fail the others' transaction again.
        suspects = [m for m in by_match if m in self._strikes]
        main = {m: group for m, group in by_match.items() if m not in self._strikes}
        failures: list[tuple[str, Exception]] = []
        if main:
            try:
                outcome.merge(self._project(main))
            except Exception as exc:
                if not poison_like(exc):
                    raise
                if len(main) == 1:
                    failures.append((next(iter(main)), exc))
                else:
                    log.warning("projection_batch_split", matches=len(main), reason=_reason(exc))
                    suspects += list(main)
        # Alone in the order their entries were written, not by id: when two claim the same
        # event ids (an import that copied them), the first written is the one projected.
        suspects.sort(key=lambda m: (entry_key(by_match[m][0].entry_id), m))
        for match_id in suspects:
            try:
                # Alone, a lost race is redone at once; a few attempts tell it from a poison entry.
                outcome.merge(self._project({match_id: by_match[match_id]}, attempts=min(3, self.max_attempts)))
                self._strikes.pop(match_id, None)
            except Exception as exc:
                if not poison_like(exc):
                    raise
                failures.append((match_id, exc))
        if failures:
            self._strike(outcome, failures, by_match)

    def _settle_parked(self, outcome: BatchOutcome, *, failing: bool = False, database_away: bool = False) -> None:
        """Checkpoints past the parked entries, their matches parked from now on, each told. In a
        batch that failed (`failing`) the checkpoints are best effort, and not tried for a database
        away (a connect could take its whole timeout): they only tell the lag."""
        if outcome.parked and not database_away:
            try:
                self._pass_over([p.entry for p in outcome.parked])
            except Exception:
                if not failing:
                    raise
                log.debug("projection_parked_checkpoints_unmoved", exc_info=True)
        for parked in outcome.parked:
            env = parked.entry.envelope
            if parked.first:
                self.parked_matches.add(env.match_id)
                log.error("projection_match_parked", match_id=env.match_id, seq=env.seq, event_id=env.event_id,
                          partition=parked.entry.partition, entry_id=parked.entry.entry_id, reason=parked.reason)
            else:
                log.warning("projection_entry_parked", match_id=env.match_id, seq=env.seq, event_id=env.event_id,
                            partition=parked.entry.partition, entry_id=parked.entry.entry_id, reason=parked.reason)

    def _strike(self, outcome: BatchOutcome, failures: list[tuple[str, Exception]],
                by_match: dict[str, list[PartitionEntry]]) -> None:
        """Count a failure against each failing match; park those that reached `park_after`.
        When several matches fail alone at once and nothing else moved, the fault may be ours or
        the database's, not theirs: a made-up match is projected in a transaction rolled back
        (`_probe_passes`). Taken, the fault is the matches' own (poison matches, all a consumer
        keeps) and each is struck; refused too, the round fails and nothing is counted. Before
        session 34 nothing was counted either way, and a consumer that kept only poison matches
        failed its round every few seconds for good."""
        if not outcome.applied and len(failures) > 1 and not self._probe_passes(len(failures)):
            raise failures[0][1]
        if len(self._strikes) > 10_000:  # matches that failed once and never came back
            self._strikes.clear()
        for match_id, exc in failures:
            strikes = self._strikes[match_id] = self._strikes.get(match_id, 0) + 1
            group = by_match[match_id]
            if strikes < self.park_after:
                log.warning("projection_match_failed", match_id=match_id, strikes=strikes,
                            park_after=self.park_after, first_seq=group[0].envelope.seq, reason=_reason(exc))
                outcome.deferred += group
                continue
            del self._strikes[match_id]
            reason = _reason(exc)
            outcome.parked += [Parked(e, reason, first=i == 0) for i, e in enumerate(group)]
        if not outcome.applied and not outcome.parked:
            raise failures[0][1]

    def _probe_passes(self, failing: int) -> bool:
        """Whether the read models take a match now: a made-up one (`match_created` of a game no
        server has, two empty seats, then one more event) projected as any batch is — row lock,
        archive, match and seat rows, the match's progress, checkpoint — in a transaction that is
        rolled back, so no one ever sees it. It fails
        with every match when our code or the database is at fault (a bug in the writes, a table
        refusing everything), and passes when the failing matches are at fault: what another
        match committing in the same round tells, with no other match around."""
        match_id = f"{PROBE_PREFIX}{uuid.uuid4().hex}"
        created = EventEnvelope(match_id=match_id, seq=1, type=MATCH_CREATED, game_id=PROBE_GAME,
                                event_id=uuid.uuid4().hex,
                                payload=MatchCreated(game_id=PROBE_GAME, seats=2).SerializeToString())
        moved = EventEnvelope(match_id=match_id, seq=2, type=PROBE_EVENT, game_id=PROBE_GAME, event_id=uuid.uuid4().hex)
        for envelope in (created, moved):
            envelope.timestamp.FromMilliseconds(int(time.time() * 1000))
        try:
            with self._connect() as conn:
                transaction = conn.begin()
                try:
                    # Created, then moved on, as a match in progress is (its progress row, not an insert):
                    # the failing matches are mostly past their first event.
                    for envelope in (created, moved):
                        self._apply_batch(conn, {match_id: [PartitionEntry(0, UNREAD, envelope)]})
                finally:
                    transaction.rollback()
        except Exception as exc:  # noqa: BLE001 - the probe's failure is the answer
            log.warning("projection_probe_failed", failing_matches=failing, reason=_reason(exc),
                        action="not counted against the matches: the fault is ours or the database's")
            return False
        log.info("projection_probe_passed", failing_matches=failing,
                 action="each failing match is struck: the read models take other matches")
        return True

    def _project(self, by_match: dict[str, list[PartitionEntry]], attempts: int = 0) -> BatchOutcome:
        """One transaction over `by_match`, redone when it loses a race (`attempts` times at most,
        0: `max_attempts`)."""
        traced = spans_exported()
        attempts = attempts or self.max_attempts
        for attempt in range(1, attempts + 1):
            try:
                # A span nobody exports still costs its context switch and attributes on every batch.
                with (tracer().start_as_current_span("projection.batch", links=_batch_links(by_match),
                                                     attributes={"entries": sum(map(len, by_match.values())),
                                                                 "matches": len(by_match), "attempt": attempt})
                      if traced else contextlib.nullcontext()):
                    with self._transaction() as conn:
                        outcome = self._apply_batch(conn, by_match)
                outcome.attempts = attempt
                self.cache.drop(outcome.finished_matches)
                return outcome
            except (RetryBatch, IntegrityError, OperationalError, DBAPIError) as exc:
                self.cache.drop(by_match)
                if attempt == attempts or not _retryable(exc) or _not_connected(exc):
                    raise
                log.info("projection_batch_retry", attempt=attempt, reason=type(exc).__name__)
                time.sleep(min(0.5, 0.01 * 2**attempt))
            except BaseException:
                self.cache.drop(by_match)
                raise
        raise AssertionError("unreachable")

    def _apply_batch(self, conn: Connection, by_match: dict[str, list[PartitionEntry]]) -> BatchOutcome:
        """Fold every match of the batch in memory, then write what it changed in a few statements."""
        outcome = BatchOutcome()
        writes = BatchWrites()
        ids = sorted(by_match)  # one lock order for every process: no deadlocks between consumers
        rows = self.writer.lock_match_rows(conn, ids)
        traced = spans_exported()
        for match_id in ids:
            group = by_match[match_id]
            row = rows.get(match_id)
            if row is not None and row.diverged_seq is not None:
                # The store tells another history than the archive, which the read models cannot
                # follow: nothing more goes onto the lost one. The store keeps the match's stream
                # (retention never trims it) and a rebuild projects the match from there.
                if self._diverged_earlier(conn, row, group):
                    writes.matches.append(row)
                outcome.skipped.extend(group)
                continue
            version = row.version if row is not None else 0
            if row is not None and group[0].envelope.seq <= version:  # a redelivery, or a store gone back
                back = self._went_back(conn, row, group)
                if row.diverged_seq is not None:  # flagged just now: recorded with the batch
                    writes.matches.append(row)
                    outcome.skipped.extend(group)
                    continue
                if back is not None:
                    version = back
                    tail = self._store_tail(match_id, back)
                    if tail:  # the store's events from there on: the group's are among them
                        if self._apply_run(conn, writes, row, tail, traced, _newest_held(group, tail)):
                            outcome.finished_matches.append(match_id)
                        version = tail[-1].seq
                    if self.store_events is not None:
                        group = self._lost_past(group, version, outcome)
            early = row is not None and self._read_before(row, group, version)
            if early:
                group = self._stale_past(match_id, group, version, outcome)
            ready: list[PartitionEntry] = []
            for i, entry in enumerate(group):
                seq = entry.envelope.seq
                if seq <= version:
                    outcome.skipped.append(entry)
                elif seq == version + 1:
                    if seq == 1 and entry.envelope.type != MATCH_CREATED:
                        # Never a match: parked at once (acked with a dead-letter record by the runner).
                        log.error("projection_not_a_match", match_id=match_id, type=entry.envelope.type)
                        outcome.parked += [Parked(e, f"not_a_match: first event is {e.envelope.type!r}",
                                                  first=j == 0) for j, e in enumerate(group[i:])]
                        break
                    ready.append(entry)
                    version = seq
                else:  # an earlier event is elsewhere (another consumer's batch, or not yet claimed)
                    outcome.deferred.extend(group[i:])
                    break
            if ready:
                outcome.applied.extend(ready)
                # The entry the match moves on from, past the one recorded (no comparison: the first
                # of the run was past it unless `early`, and an id that only looked early is left).
                entry_id = None if early or ready[-1].entry_id == UNREAD else ready[-1].entry_id
                if self._apply_run(conn, writes, row, [e.envelope for e in ready], traced, entry_id):
                    outcome.finished_matches.append(match_id)
        self.writer.write(conn, writes)
        if writes.results:
            self._rate(conn, writes)
        self._advance_checkpoints(conn, outcome.applied)
        if writes.archive:
            outcome.newest_event_ms = max(row["timestamp_ms"] for row in writes.archive)
        return outcome

    def _apply_run(self, conn: Connection, writes: BatchWrites, row: MatchRow | None,
                   envelopes: list[EventEnvelope], traced: bool, entry_id: str | None) -> bool:
        """`entry_id`: the partition entry the match is moved on from (None: keep the recorded one)."""
        if traced:
            return self._apply_match_traced(conn, writes, row, envelopes, entry_id)
        return self._apply_events(conn, writes, row, envelopes, entry_id)

    def _went_back(self, conn: Connection, row: MatchRow, group: list[PartitionEntry]) -> int | None:
        """The version to project the match from again, or None (a redelivery: the group's
        entries are at archived seqs under the archived ids). The store lost acknowledged writes
        (a Redis restored from an older AOF, `appendfsync everysec` on a host crash) and was
        written on since when an entry is at an archived seq under another event id. A live
        match then drops the archived events from that seq on, in this batch's transaction, and
        is projected from the store's (`_store_tail`); a finished one was rated and ranked on the
        lost events (and a replaced `match_created` made the row itself), so it is flagged
        (`diverged_seq`, written with the batch) and left for an operator's rebuild, which takes
        its events from the store.

        A live match goes back to the first seq at which the store and the archive differ, which
        may be before the group's first replaced seq (consumers split a partition: the earlier
        replaced entries may be in another consumer's hands)."""
        replaced = self._replaced(conn, row, group)
        if not replaced:
            return None
        stored: list[EventEnvelope] | None = None
        if self.store_events is not None:
            # Only an entry the store holds tells it went back: one it does not hold was read before
            # it went back, and another consumer projected the store's event at that seq since.
            stored = self._store_tail(row.match_id, 0)
            held = {(e.seq, e.event_id) for e in stored}
            stale = [env for env in replaced if (env.seq, env.event_id) not in held]
            if stale:
                _log_stale(row.match_id, row.version, stale)
                replaced = [env for env in replaced if (env.seq, env.event_id) in held]
                if not replaced:
                    return None  # the group's entries at archived seqs are skipped as done
        seq = replaced[0].seq
        if row.status == "live" and seq > 1 and stored is not None:
            seq = min(seq, first_difference(archived_ids(conn, row.match_id),
                                            ((e.seq, e.event_id) for e in stored if e.seq < seq)) or seq)
        if row.status != "live" or seq <= 1:
            row.diverged_seq = seq
            log.error("projection_store_went_back", match_id=row.match_id, seq=seq, version=row.version,
                      status=row.status, action="flagged: rebuild the read models (`python -m services.projection "
                      "diverged` lists such matches)", **_envelope_ids(replaced[0]))
            return None
        log.warning("projection_store_went_back", match_id=row.match_id, seq=seq, version=row.version,
                    action="projected again from the store", **_envelope_ids(replaced[0]))
        conn.execute(delete(ARCHIVE).where(ARCHIVE.c.match_id == row.match_id, ARCHIVE.c.seq >= seq))
        self.cache.drop([row.match_id])
        row.version, row.archived_id = seq - 1, None
        return row.version

    @staticmethod
    def _lost_past(group: list[PartitionEntry], version: int, outcome: BatchOutcome) -> list[PartitionEntry]:
        """The group less its entries past `version`, the store's version when read after the
        group was: those were read before the store went back and are not in it any more (a
        match's stream and its partition entries are written together). Skipped (acked), never
        projected: the next seq is the store's own to write."""
        lost = [e for e in group if e.envelope.seq > version]
        if not lost:
            return group
        log.warning("projection_entries_lost", match_id=lost[0].envelope.match_id, store_version=version,
                    seqs=[e.envelope.seq for e in lost], action="skipped: the store no longer holds them")
        outcome.skipped.extend(lost)
        return [e for e in group if e.envelope.seq <= version]

    def _read_before(self, row: MatchRow, group: list[PartitionEntry], version: int) -> bool:
        """Whether the group's first entry past `version` was read from the partition stream
        before the entry the match was last moved on from (`row.last_entry_id`), which only a
        batch read before the store went back can be: stream ids grow with every write, and a
        match's events are written in seq order. One comparison per match and batch; an entry
        read from no stream (`UNREAD`) is not compared."""
        if row.last_entry_id is None or self.store_events is None:
            return False
        following = next((e for e in group if e.envelope.seq > version), None)
        if following is None:
            return False
        return following.entry_id != UNREAD and entry_key(following.entry_id) <= entry_key(row.last_entry_id)

    def _stale_past(self, match_id: str, group: list[PartitionEntry], version: int,
                    outcome: BatchOutcome) -> list[PartitionEntry]:
        """The group less its entries past `version` that the store does not hold (under their
        event ids at their seqs): read before the store went back, they are of the lost history,
        and another consumer projected the store's new one since. Skipped (acked), never written:
        the store's own events at those seqs reach the projection through their own entries. An
        entry the store holds is applied as ever (a stream id that only looked early)."""
        held = {(e.seq, e.event_id) for e in self._store_tail(match_id, version)}
        stale = [e for e in group
                 if e.envelope.seq > version and (e.envelope.seq, e.envelope.event_id) not in held]
        if not stale:
            return group
        _log_stale(match_id, version, [e.envelope for e in stale])
        outcome.skipped.extend(stale)
        dropped = {id(e) for e in stale}
        return [e for e in group if id(e) not in dropped]

    def _diverged_earlier(self, conn: Connection, row: MatchRow, group: list[PartitionEntry]) -> bool:
        """Lower a flagged match's diverged seq when the group replaces an earlier one (consumers
        split a partition, so the replaced seqs need not all reach the one that flagged it)."""
        replaced = self._replaced(conn, row, [e for e in group if e.envelope.seq < (row.diverged_seq or 0)])
        if not replaced:
            return False
        row.diverged_seq = replaced[0].seq
        log.error("projection_store_went_back", match_id=row.match_id, seq=row.diverged_seq, version=row.version,
                  status=row.status, action="flagged from an earlier seq", **_envelope_ids(replaced[0]))
        return True

    @staticmethod
    def _replaced(conn: Connection, row: MatchRow, group: list[PartitionEntry]) -> list[EventEnvelope]:
        """The group's envelopes at archived seqs under other event ids, by seq."""
        seqs = [e.envelope.seq for e in group if e.envelope.seq <= row.version]
        if not seqs:
            return []
        archived_ids = dict(conn.execute(select(ARCHIVE.c.seq, ARCHIVE.c.event_id).where(
            ARCHIVE.c.match_id == row.match_id, ARCHIVE.c.seq.in_(seqs))).all())
        return sorted((e.envelope for e in group
                       if e.envelope.seq in archived_ids and archived_ids[e.envelope.seq] != e.envelope.event_id),
                      key=lambda env: env.seq)

    def _store_tail(self, match_id: str, after: int) -> list[EventEnvelope]:
        """The match's events past `after` as the store holds them now. Read from the store, not
        waited for from the partition: another consumer of the group may have projected some of
        them on top of the lost events already (a match's entries can be split between consumers)
        and acknowledged them, and those entries come back no more."""
        if self.store_events is None:
            return []
        try:
            return self.store_events(match_id, after)
        except Exception as exc:
            if store_unreachable(exc):
                raise StoreUnreadable(f"{match_id}: {type(exc).__name__}: {exc}") from exc
            # the store answered: what it holds of the match is bad
            raise StoreCorrupt(f"{match_id}: the store's events past seq {after} cannot be read: "
                               f"{type(exc).__name__}: {exc}") from exc

    def _rate(self, conn: Connection, writes: BatchWrites) -> None:
        """Rate this batch's finished matches in canonical order, so a batch never re-rates itself.
        (The rating book works with ORM rows, on the batch's connection and transaction.)"""
        with Session(bind=conn) as session:
            for match, rated in sorted(((m, _rated(m, seats)) for m, seats in writes.results),
                                       key=lambda pair: pair[1].order_key):
                self.ratings.rate(session, game_scope(match.game_id), rated)
                if match.tournament_id:
                    self.ratings.rate(session, tournament_scope(match.tournament_id, match.game_id), rated)
            session.flush()

    # -- one match ----------------------------------------------------------------------
    def _apply_match_traced(self, conn: Connection, writes: BatchWrites, row: MatchRow | None,
                            envelopes: list[EventEnvelope], entry_id: str | None) -> bool:
        """Continue the trace of the command that wrote the events (from the envelope), then apply them."""
        first = envelopes[0]
        parent = extract_context(first.trace) if first.trace else None
        # Its batch (the read models' write and commit) is another trace when the events carry one.
        batch = trace.get_current_span().get_span_context()
        links = [Link(batch)] if parent is not None and batch.is_valid else []
        with tracer().start_as_current_span(
            "projection.apply", context=parent, links=links + _other_commands(envelopes),
            attributes={"match_id": first.match_id, "game_id": first.game_id, "first_seq": first.seq,
                        "events": len(envelopes)},
        ):
            return self._apply_events(conn, writes, row, envelopes, entry_id)

    def _apply_events(self, conn: Connection, writes: BatchWrites, row: MatchRow | None,
                      envelopes: list[EventEnvelope], entry_id: str | None = None) -> bool:
        """Archive, fold and project a run of consecutive events of one match; True when it finished."""
        first = envelopes[0]
        # Projected again from the store (`_went_back` let go of the archive's event at its version):
        # who plays each seat is written anew from the fold, not only for this run's seat changes.
        again = row is not None and row.archived_id is None
        if row is None:
            if first.seq != 1 or first.type != MATCH_CREATED:
                raise ValueError(f"{first.match_id}: the first event is {first.type}@{first.seq}")
            row = self._create_match(writes, first)
            state = self._start_state(row, first)
            rest = envelopes[1:]
        else:
            state = self._state_for(conn, row)
            rest = envelopes
        writes.matches.append(row)
        archive = [archive_values(env) for env in envelopes]
        writes.archive.extend(archive)
        if state is not None and rest:
            try:
                state.apply(rest)
            except Exception as exc:  # noqa: BLE001 - a broken engine must not wedge the projection
                failing = next((e for e in rest if e.seq == state.version + 1), None)
                log.exception("projection_fold_failed", match_id=row.match_id, seq=state.version + 1,
                              **_envelope_ids(failing))
                row.fold_error = f"{type(exc).__name__} at seq {state.version + 1}: {exc}"[:2000]
                self.cache.drop([row.match_id])
                state = None
        if row.status == "live":
            self._seats_away(writes, row, state, envelopes, again)
        row.version, row.archived_id = envelopes[-1].seq, envelopes[-1].event_id
        if entry_id is not None:
            row.last_entry_id = entry_id
        # The latest of the run's times, not its last event's: a stream's times need not grow with its
        # seqs (NP-H9's held answers are written out in seat order with the times they were given), and
        # the row must not depend on where a batch ended (live and a rebuild batch differently).
        played_ms = row.last_event_ms
        row.last_event_ms = max(row.last_event_ms, max(a["timestamp_ms"] for a in archive))
        if row.status != "live":
            return False
        cancel = envelopes[-1] if envelopes[-1].type == MATCH_CANCELLED else None
        result = None if state is None else self._result(row, state)
        if cancel is not None and result is None:
            # Read from the envelope, not the fold: a match no fold can read (an unknown game, a
            # fold error) is cancelled all the same. Nothing follows a cancel in a stream.
            self._cancel(writes, row, cancel)
            return True
        if result is None:
            return False
        assert state is not None
        # Over at its result, whatever follows: a cancel after it (only an imported file holds one:
        # the command service refuses `match_over`) ends nothing, in this run as in a later one.
        finished_ms = max([played_ms, *(a["timestamp_ms"] for a in archive[:-1])]) if cancel else row.last_event_ms
        self._finish(writes, row, state.created, result, finished_ms, set(state.away))
        return True

    @staticmethod
    def _seats_away(writes: BatchWrites, row: MatchRow, state: MatchState | None, envelopes: list[EventEnvelope],
                    again: bool) -> None:
        """Who plays each seat, after a run with a seat change (`seat_left`, `seat_returned`) or
        one projected again (`again`): every seat as the fold has it (a few rows, rarely). A match
        no fold reads takes the run's own changes, those that parse."""
        changed = sorted({env.seat for env in envelopes if env.type in SEAT_CHANGES})
        if not changed and not (again and state is not None):
            return
        if state is not None:
            away = {seat: (left.reason, seq) for seat, (left, seq) in state.away.items()}
            seats: Iterable[int] = range(row.seats)
        else:
            away, touched = {}, set()
            for env in envelopes:
                if env.type not in SEAT_CHANGES:
                    continue
                try:
                    change = open_seat_change(env)
                except Exception:  # noqa: BLE001 - an unreadable payload changes nobody's seat
                    continue
                touched.add(change.seat)
                if env.type == SEAT_LEFT:
                    away[change.seat] = (change.reason, env.seq)  # type: ignore[union-attr]
                else:
                    away.pop(change.seat, None)
            seats = sorted(touched)
        for seat in seats:
            if 0 <= seat < row.seats:
                reason, since = away.get(seat, ("", None))
                writes.seats_away.append(dict(b_match=row.match_id, b_seat=seat, b_away=reason[:16], b_since=since))

    def _result(self, row: MatchRow, state: MatchState) -> Result | None:
        """The folded live match's result (None: not over, or unreadable: `fold_error` says why)."""
        self.cache.put(state)
        try:
            return state.result()
        except Exception as exc:  # noqa: BLE001
            log.exception("projection_result_failed", match_id=row.match_id)
            row.fold_error = f"result: {type(exc).__name__}: {exc}"[:2000]
            return None

    def _create_match(self, writes: BatchWrites, envelope: EventEnvelope) -> MatchRow:
        """The match, its seats, its players and its tournament, as rows to insert; a rematch
        with the match it follows (`rematch_of`, NULL for any other match)."""
        created = open_match_created(envelope)
        ms = envelope.timestamp.ToMilliseconds()
        row = MatchRow(match_id=envelope.match_id, game_id=created.game_id, seats=created.seats,
                       tournament_id=created.tournament_id, version=0, last_event_ms=ms,
                       created=dict(created_ms=ms, seed=seed_to_db(int(created.seed)),
                                    options=dict(sorted(created.options.items())),
                                    rematch_of=created.rematch_of or None))
        infos = {info.seat: info for info in created.seat_info}
        for seat in range(created.seats):
            info = infos.get(seat)
            writes.seats.append(dict(
                match_id=row.match_id, seat=seat, player_id=info.player_id if info else "",
                display_name=info.display_name if info else "", bot=bool(info and info.bot),
                policy=info.policy if info else "", created_ms=ms, score=None, rank=None, winner=False,
                details={}))
        for info in sorted(infos.values(), key=lambda i: i.player_id):
            if info.player_id:
                writes.see_player(info.player_id, info.display_name, info.bot, info.policy, ms, row.match_id)
        if created.tournament_id:
            writes.see_tournament(created.tournament_id, created.game_id, ms)
        return row

    def _start_state(self, row: MatchRow, first: EventEnvelope) -> MatchState | None:
        try:
            state = MatchState.start(self.registry, first)
        except UnknownGame:
            row.fold_error = f"unknown game {row.game_id!r}: events archived, no results until a rebuild"
            if row.game_id != PROBE_GAME:
                log.warning("projection_unknown_game", match_id=row.match_id, game_id=row.game_id)
            return None
        state.last_stream = (first.seq, first.event_id)  # what `_state_for` checks a cached fold by
        return state

    def _state_for(self, conn: Connection, row: MatchRow) -> MatchState | None:
        """The folded match at `row.version`: from the cache, caught up or rebuilt from the archive.

        A cached fold is used only when the archive still holds, at the fold's version, the event
        it folded last (`MatchState.last_stream`): another consumer (or process) may have projected
        the match again from a store that went back (`_went_back`), replacing the archived events
        this fold was made of, to the fold's version or past it. Folding the archive's next events
        onto it would mix two histories."""
        if row.fold_error:
            return None
        state = self.cache.get(row.match_id)
        if state is not None and (state.version > row.version or state.last_stream[0] != state.version):
            state = None  # ahead of the database: a rolled-back batch or a rebuild; start over
        if state is not None and state.version == row.version and state.last_stream[1] != row.archived_id:
            state = None  # the archive's history is another one now: fold it anew
        try:
            if state is not None and state.version < row.version:
                # Read from the fold's own version on: the first must be the event it folded last.
                tail = archived(conn, row.match_id, after=state.version - 1, upto=row.version)
                if tail and tail[0].event_id == state.last_stream[1]:
                    state.apply(tail)  # (the one at its version is skipped)
                else:
                    state = None
            if state is None:
                envelopes = archived(conn, row.match_id, upto=row.version)
                first = envelopes[0]
                state = self._start_state(row, first)
                if state is None:
                    return None
                state.apply(envelopes[1:])
        except Exception as exc:  # noqa: BLE001
            log.exception("projection_refold_failed", match_id=row.match_id)
            row.fold_error = f"refold: {type(exc).__name__}: {exc}"[:2000]
            return None
        return state

    # -- finishing ----------------------------------------------------------------------
    @staticmethod
    def _cancel(writes: BatchWrites, row: MatchRow, envelope: EventEnvelope) -> None:
        """An operator ended the match (GameService.CancelMatch): `cancelled`, over at the cancel's
        time, its reason and operator as the outcome; no seat results, so no ratings, no
        tournament standings and no win or loss in any player's history."""
        try:
            cancelled = open_match_cancelled(envelope)
            outcome = {"reason": cancelled.reason, "cancelled_by": cancelled.operator}
        except Exception:  # noqa: BLE001 - an unreadable payload still ends the match
            outcome = {"reason": ""}
        row.status = "cancelled"
        row.finished_ms = envelope.timestamp.ToMilliseconds()  # the cancel's own time (its clock may be behind)
        row.outcome = outcome
        writes.ended.append(row)

    def _finish(self, writes: BatchWrites, row: MatchRow, created: MatchCreated, result: Result,
                finished_ms: int, away: set[int]) -> None:
        """Seat results, standings, and a place in the batch's rating queue (once per match: the
        live -> finished transition). `away`: the seats left to the bots at the end, rated last."""
        row.status = "finished"
        row.finished_ms = finished_ms
        row.outcome = {str(k): str(v) for k, v in sorted(result.outcome.items())}
        players = {info.seat: info.player_id for info in created.seat_info}
        seats: dict[int, SeatResult] = {}
        for outcome in result.seats:
            if 0 <= outcome.seat < row.seats:
                seats[outcome.seat] = SeatResult(
                    seat=outcome.seat, player_id=players.get(outcome.seat, ""), score=float(outcome.score),
                    rank=int(outcome.rank), details={str(k): str(v) for k, v in sorted(outcome.details.items())},
                    away=outcome.seat in away)
        writes.results.append((row, [seats[s] for s in sorted(seats)]))

    # -- checkpoints ----------------------------------------------------------------------
    def _pass_over(self, parked: list[PartitionEntry]) -> None:
        """The checkpoints move past parked entries too (no event counted): they are done with,
        and a partition whose newest entries were parked is not lagging behind them."""
        with self._transaction() as conn:
            self._advance_checkpoints(conn, parked, count=False)

    def _advance_checkpoints(self, conn: Connection, applied: list[PartitionEntry], *, count: bool = True) -> None:
        newest: dict[int, PartitionEntry] = {}
        counts: dict[int, int] = {}
        for entry in applied:
            counts[entry.partition] = counts.get(entry.partition, 0) + count
            best = newest.get(entry.partition)
            if best is None or entry_key(entry.entry_id) > entry_key(best.entry_id):
                newest[entry.partition] = entry
        self.writer.advance_checkpoints(
            conn, {p: (e.entry_id, e.envelope.timestamp.ToMilliseconds()) for p, e in newest.items()}, counts)


def _rated(match: MatchRow, seats: list[SeatResult]) -> MatchOutcome:
    """A finished match as the ratings need it (seats without a player are not rated; a seat
    its player left to the bots is rated last: `famiglia.ratings.ranks_with_leavers`)."""
    ranks = ranks_with_leavers([(s.rank, s.away) for s in seats])
    return MatchOutcome(match.match_id, match.finished_ms or match.last_event_ms,
                        tuple(Placement(s.player_id, rank) for s, rank in zip(seats, ranks, strict=True) if s.player_id))


def _newest_held(group: list[PartitionEntry], stored: list[EventEnvelope]) -> str | None:
    """The newest stream entry id of the group's entries that the store holds (`stored`, under
    the same event ids at the same seqs): what a match projected again from the store was moved
    on from. None when the group has none (read from no stream, or all of the lost history)."""
    held = {(e.seq, e.event_id) for e in stored}
    ids = [e.entry_id for e in group if (e.envelope.seq, e.envelope.event_id) in held and e.entry_id != UNREAD]
    return max(ids, key=entry_key, default=None)


def _log_stale(match_id: str, version: int, stale: list[EventEnvelope]) -> None:
    log.warning("projection_entries_stale", match_id=match_id, version=version, seqs=[e.seq for e in stale],
                event_ids=[e.event_id for e in stale],
                action="skipped: read before the store went back, which holds other events at these seqs or none")


def partial_outcome(exc: BaseException) -> BatchOutcome | None:
    """What a batch that raised `exc` had done before it failed (`Projector.project`): entries
    applied or skipped in a transaction that committed, and entries parked (of matches parked
    before, or struck out in this batch). The caller acks them, though the round fails."""
    return getattr(exc, "batch_outcome", None)


def poison_like(exc: BaseException) -> bool:
    """Whether a failure may be the data's fault (and so end in parking): a constraint the
    events break, a value the database refuses, an error of our own code reading them — not
    the database being away, locked or in a serialisation conflict."""
    if isinstance(exc, (IntegrityError, DataError)):
        return True
    if isinstance(exc, (DBAPIError, RetryBatch, StoreUnreadable)):
        return False
    return isinstance(exc, Exception)


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".replace("\n", " ")[:500]


def _retryable(exc: BaseException) -> bool:
    """Lost races: unique violations, deadlocks, serialisation failures, a busy SQLite file."""
    if isinstance(exc, (RetryBatch, IntegrityError, OperationalError)):
        return True
    if isinstance(exc, DBAPIError):
        code = pg_sqlstate(getattr(exc, "orig", None)) or ""
        return code in ("40001", "40P01", "55P03")
    return False


def _not_connected(exc: BaseException) -> bool:
    """A connection to the database could not be made (no statement ran): no race lost, and
    trying again at once finds the database as away. The round ends, within one connect's
    bound (FAMIGLIA_DATABASE_TIMEOUT_S), so the runner holds back, holds what it keeps between
    its rounds and retries after its pause; before, eight connects in one round outlasted
    `claim_idle_ms`. A kept connection that broke is tried again, on a new one, and so is an
    error at COMMIT (no statement either: a deferred constraint or a serialisation failure, a
    lost race), which a test of `statement is None` took for a failed connect, and counted as
    a strike of the batch's matches."""
    return getattr(exc, "not_connected", False) is True


def _envelope_ids(envelope: EventEnvelope | None) -> dict[str, Any]:
    """What a failure line names of the event it failed on: who made it, and the trace of the
    command that did (the operator's way from the line to that command's other lines)."""
    if envelope is None:
        return {}
    ids: dict[str, Any] = {"event_id": envelope.event_id, "type": envelope.type, "seat": envelope.seat,
                           "command_id": envelope.command_id}
    trace_id = carried_trace_id(envelope.trace)
    if trace_id:  # its own key: trace_id and span_id are the current span's, another trace's maybe
        ids["event_trace_id"] = trace_id
    return ids


#: The most other commands' traces one projection span links to.
MAX_LINKS = 32


def _other_commands(envelopes: Sequence[EventEnvelope]) -> list[Link]:
    """Links to the traces of the batch's other commands: the span continues the first
    command's trace, and each later command's trace can still be followed to it."""
    first = envelopes[0].trace.get("traceparent", "") if envelopes[0].trace else ""
    return _command_links(envelopes[1:], first)


def _batch_links(by_match: dict[str, list[PartitionEntry]]) -> list[Link]:
    """Links from a batch's span (where the read models are written and committed) to the
    traces of the commands whose events it projects: a trace of its own, as it serves many."""
    return _command_links([entry.envelope for group in by_match.values() for entry in group])


def _command_links(envelopes: Sequence[EventEnvelope], skip: str = "") -> list[Link]:
    """Links to the distinct command traces the envelopes carry (but `skip`'s), MAX_LINKS at most."""
    seen, links = {skip}, []
    for envelope in envelopes:
        parent = envelope.trace.get("traceparent", "") if envelope.trace else ""
        if parent and parent not in seen:
            seen.add(parent)
            context = trace.get_current_span(extract_context(envelope.trace)).get_span_context()
            if context.is_valid:
                links.append(Link(context))
                if len(links) >= MAX_LINKS:
                    break
    return links
