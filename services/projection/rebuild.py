"""Rebuild every read model from the SQL archive and the partition streams, from nothing.

The archive holds every event the projection ever committed, also those whose
match streams and partition entries were trimmed from Redis (retention); the
streams hold what came after. The rebuild keeps the archive in a side table
(`event_archive_rebuild`), empties every table, feeds the kept archive to the same
`Projector` as live consumption in event-time order, then every partition entry
merged by entry id (those already applied from the archive are skipped by the
per-match version fence), so a rebuild and an incremental build give equal
tables. Each partition's checkpoint ends at its stream's newest entry, as a
caught-up consumer leaves it. What the bots' runner recorded about tournaments
(name, status, configuration) does not come from events and is kept.

A match flagged as diverged (the store lost acknowledged writes and was written on
since, after the match finished: `divergence.py`) is rebuilt from the store's events:
in the transaction that keeps the archive aside, the kept copy's events of the match
are replaced with the store's stream (never trimmed while the match is flagged). The
rebuilt row carries no flag, and the retention sweep is told to look at the match again
(its new end is usually behind the sweep's watermark).

A match whose archive and store tell different histories without being flagged yet (a Redis
restored to an older point and played on, rebuilt before a consumer met the new history) is met
as the streams are fed over the archive: a live one is projected again from the store there, a
finished one flagged. The archive is fed in batches of its own, so a stream entry is always
checked against what the archive gave (in one batch with it, it was skipped as a redelivery
and the lost history kept); a run that flagged a match is followed by a second one, which takes
it from the store: one `rebuild` leaves no match flagged that the store can tell.

A rebuild that dies leaves the side tables: the next one starts again from them (not
from the half-refilled archive, nor from tournament rows it emptied or rebuilt without
what the runner recorded), and drops them when done.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from sqlalchemy import MetaData, Table, delete, inspect, select, text
from sqlalchemy.engine import Connection, Engine

from famiglia.eventstore import PartitionEntry
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.eventstore.unreadable import UnreadableEntry, tell_unreadable
from famiglia.readmodels.db import write_session
from famiglia.readmodels.tables import TABLES, ArchivedEvent, Tournament
from famiglia.telemetry import get_logger
from famiglia.v1.envelope_pb2 import EventEnvelope

from .divergence import flagged
from .parking import DeadLetters
from .projector import Projector, entry_key, poison_like
from .retention import revisit_later

log = get_logger("famiglia.projection.rebuild")

KEPT_ARCHIVE = "event_archive_rebuild"
"""The archive as it was when a rebuild started (only while one runs, or after one died)."""
KEPT_TOURNAMENTS = "tournaments_rebuild"
"""The tournament rows as they were when a rebuild started (only while one runs, or after one
died): what the runner recorded of them (name, status, configuration) comes from no event."""


@dataclass(frozen=True)
class RebuildReport:
    entries: int
    """Partition stream entries read."""
    applied: int
    matches_finished: int
    left_deferred: int
    """Events whose earlier events are in neither the archive nor the streams: not projected."""
    archived: int = 0
    """Archived events read."""
    parked: int = 0
    """Entries of matches the projector gave up on (poison; logged as projection_match_parked)."""
    diverged: int = 0
    """Flagged matches whose events were taken from the store instead of the archive."""
    flagged: int = 0
    """Matches left flagged at the end (their stream gone: nothing else to take them from)."""
    unreadable: int = 0
    """Partition stream entries no event could be read from (a foreign XADD's): logged, recorded as
    dead letters (once: one a consumer recorded already is not written again), gone past."""
    unrecorded: int = 0
    """Entries parked or unreadable whose dead-letter record Redis refused (out of memory, away):
    logged, and the rebuild goes on (the tables are emptied already); a run once Redis takes writes
    records them."""


def stream_entries(store: RedisEventStore, chunk: int = 1000,
                   on_unreadable: Callable[[list[UnreadableEntry]], None] | None = None) -> Iterator[PartitionEntry]:
    """Every partition's entries, merged into one sequence by entry id (append time). One no event
    can be read from (a foreign XADD's) is logged `partition_entry_unreadable`, handed to
    `on_unreadable` and gone past: each page goes on from the last entry read, readable or not (before
    session 34 one failed the rebuild, and with it every rebuild after it)."""

    def one(partition: int) -> Iterator[tuple[tuple[int, int], int, PartitionEntry]]:
        after = "0-0"
        while True:
            page = store.read_partition_page(partition, after_entry_id=after, count=chunk)
            if page.unreadable:
                tell_unreadable(page.unreadable, reader="projection_rebuild")
                if on_unreadable is not None:
                    on_unreadable(page.unreadable)
            for entry in page.entries:
                yield entry_key(entry.entry_id), partition, entry
            if not page.more:
                return
            after = page.last_entry_id

    for _key, _partition, entry in heapq.merge(*(one(p) for p in range(store.partitions))):
        yield entry


def kept_archive_entries(store: RedisEventStore, engine: Engine, page: int = 2000) -> Iterator[PartitionEntry]:
    """The kept archive's events in (event time, match, seq) order, as entries of their match's
    partition. They carry no stream entry id ("0-0"): the checkpoints come from the streams."""
    order = "ORDER BY timestamp_ms, match_id, seq LIMIT :page"
    after: tuple[int, str, int] | None = None
    while True:
        if after is None:
            query, params = f"SELECT match_id, seq, timestamp_ms, envelope FROM {KEPT_ARCHIVE} {order}", {}
        else:
            query = (f"SELECT match_id, seq, timestamp_ms, envelope FROM {KEPT_ARCHIVE} WHERE timestamp_ms > :t "
                     f"OR (timestamp_ms = :t AND (match_id > :m OR (match_id = :m AND seq > :s))) {order}")
            params = {"t": after[0], "m": after[1], "s": after[2]}
        with engine.connect() as conn:
            rows = conn.execute(text(query), {**params, "page": page}).all()
        for match_id, _seq, _ms, raw in rows:
            yield PartitionEntry(store.partition_of(match_id), "0-0", EventEnvelope.FromString(bytes(raw)))
        if len(rows) < page:
            return
        last = rows[-1]
        after = (int(last[2]), str(last[0]), int(last[1]))


def rebuild(store: RedisEventStore, engine: Engine, projector: Projector, *,
            batch: int = 500, progress: Callable[[int], None] | None = None) -> RebuildReport:
    projector.parked_matches = set()  # every match tried again, also by a projector that rebuilt before
    report = _rebuild_once(store, engine, projector, batch, progress)
    if report.flagged:  # met this run: the next one takes them from the store
        log.warning("projection_rebuild_again", flagged=report.flagged,
                    reason="matches whose store tells another history than the archive")
        again = _rebuild_once(store, engine, projector, batch, progress)
        report = replace(again, diverged=report.diverged + again.diverged)
    log.info("projection_rebuild_done", archived=report.archived, entries=report.entries, applied=report.applied,
             finished=report.matches_finished, left_deferred=report.left_deferred, parked=report.parked,
             diverged=report.diverged, flagged=report.flagged, unreadable=report.unreadable,
             unrecorded=report.unrecorded)
    return report


def _rebuild_once(store: RedisEventStore, engine: Engine, projector: Projector, batch: int,
                  progress: Callable[[int], None] | None) -> RebuildReport:
    kept, diverged = _keep_archive_and_empty(engine, store)
    recorded = _kept_tournaments(engine)
    log.info("projection_rebuild_started", archived=kept)
    projector.cache.clear()
    letters = DeadLetters(store)
    feed = _Feed(projector, batch, progress, letters=letters)
    feed.all(kept_archive_entries(store, engine))
    feed.flush()  # the streams' entries are then checked against what the archive gave (`_went_back`)
    archived = feed.read
    unreadable: list[UnreadableEntry] = []

    def record(found: list[UnreadableEntry]) -> None:
        """As a consumer that meets one records it (`ProjectionRunner._unreadable`): once, however many
        rebuilds or consumers meet it (before session 35 a rebuild only logged them)."""
        feed.record(lambda: letters.record_unreadable(found, "rebuild"), len(found))
        unreadable.extend(found)

    feed.all(stream_entries(store, on_unreadable=record))
    feed.flush()
    for _ in range(projector.park_after):  # a match that failed alone is tried until it is parked
        if not feed.deferred:
            break
        feed.flush()
    _checkpoints_at_the_top(store, engine, projector)
    _restore_tournaments(engine, recorded)
    with engine.begin() as conn:
        conn.execute(text(f"DROP TABLE {KEPT_ARCHIVE}"))
        conn.execute(text(f"DROP TABLE {KEPT_TOURNAMENTS}"))
        left_flagged = len(flagged(conn))
    return RebuildReport(feed.read - archived, feed.applied, feed.finished, len(feed.deferred), archived,
                         feed.parked, diverged, left_flagged, len(unreadable), feed.unrecorded)


@dataclass
class _Feed:
    """Entries to the projector in batches, each with what the last one deferred (an earlier
    event of the match came later), counting as it goes; the entries parked are recorded in the
    dead letters (`letters`) as a consumer records them (before session 35 they were only logged
    and counted: `parked` did not list their match, and the consumers, not knowing it parked,
    left its next entries waiting for a gap)."""

    projector: Projector
    batch: int
    progress: Callable[[int], None] | None
    read: int = 0
    applied: int = 0
    finished: int = 0
    parked: int = 0
    letters: DeadLetters | None = None
    unrecorded: int = 0

    def __post_init__(self) -> None:
        self.pending: list[PartitionEntry] = []
        self.deferred: list[PartitionEntry] = []

    def all(self, entries: Iterable[PartitionEntry]) -> None:
        for entry in entries:
            self.pending.append(entry)
            self.read += 1
            if len(self.pending) >= self.batch:
                self.flush()

    def record(self, write: Callable[[], object], entries: int) -> None:
        """A dead-letter record, best effort: a Redis that refuses it (out of memory: it serves the
        reads) does not end the rebuild, which emptied the tables already (before, it died there,
        and every run after it)."""
        try:
            write()
        except Exception:  # noqa: BLE001 - Redis refusing writes: counted and told, the tables come first
            self.unrecorded += entries
            log.warning("projection_rebuild_dead_letters_unrecorded", entries=entries, exc_info=True,
                        hint="rebuild again once Redis takes writes: the letters and the parked matches are "
                             "written then (the consumers park the entries of a match `parked` names)")

    def flush(self) -> None:
        if not (self.pending or self.deferred):
            return
        entries = self.deferred + self.pending
        for attempt in range(1, self.projector.park_after + 1):
            try:
                outcome = self.projector.project(entries)
                break
            except Exception as exc:
                # A poison match failing in a batch where nothing else moved raises, struck: the
                # runner's next round tries it again until it is parked, and so does the rebuild.
                if attempt == self.projector.park_after or not poison_like(exc):
                    raise
        self.applied += len(outcome.applied)
        self.finished += len(outcome.finished_matches)
        self.parked += len(outcome.parked)
        if outcome.parked and self.letters is not None:
            letters = self.letters
            self.record(lambda: letters.record(outcome.parked, "rebuild"), len(outcome.parked))
        self.deferred, self.pending = outcome.deferred, []
        if self.progress is not None:
            self.progress(self.read)


def _keep_archive_and_empty(engine: Engine, store: RedisEventStore | None = None) -> tuple[int, int]:
    """Copy the archive and the tournament rows aside (unless a rebuild that died left the
    copies: they are the tables as they were), with the store's events in place of the
    archive's for diverged matches, then empty every table, in one transaction; how many
    events are kept, and how many diverged matches were taken from the store."""
    diverged = 0
    with engine.begin() as conn:
        if not inspect(conn).has_table(KEPT_TOURNAMENTS):
            conn.execute(text(f"CREATE TABLE {KEPT_TOURNAMENTS} AS SELECT * FROM {Tournament.__tablename__}"))
        if not inspect(conn).has_table(KEPT_ARCHIVE):
            conn.execute(text(f"CREATE TABLE {KEPT_ARCHIVE} AS SELECT match_id, seq, timestamp_ms, envelope "
                              f"FROM {ArchivedEvent.__tablename__}"))
            conn.execute(text(f"CREATE INDEX ix_{KEPT_ARCHIVE}_order ON {KEPT_ARCHIVE} (timestamp_ms, match_id, seq)"))
            if store is not None:
                diverged = _take_diverged_from_the_store(conn, store)
        for table in reversed(TABLES):
            conn.execute(delete(table))
        return int(conn.execute(text(f"SELECT count(*) FROM {KEPT_ARCHIVE}")).scalar_one()), diverged


def _take_diverged_from_the_store(conn: Connection, store: RedisEventStore) -> int:
    """In the kept copy, each diverged match's events become the store's (the truth since it
    went back: docs/eventstore.md); in the same transaction as the emptying, so a rebuild that
    dies later starts again from the store's history too. The whole stream, not only from the
    recorded seq: a stream is there whole or not at all (only `trim` drops one), and an earlier
    replaced seq may have reached the projection after the flag. A match whose stream is gone
    keeps the archive's events (there is nothing else).

    Each match taken is named for the retention sweep to look at again (`revisit_later`), before
    this transaction commits (so a rebuild that dies after it still has them named): it ends
    where the sweep's watermark has usually passed already, and its stream would stay in Redis."""
    taken: list[str] = []
    for match_id, seq in sorted(flagged(conn).items()):
        events = store.read(match_id)
        if not events:
            log.warning("projection_rebuild_diverged_stream_gone", match_id=match_id, diverged_seq=seq)
            continue
        conn.execute(text(f"DELETE FROM {KEPT_ARCHIVE} WHERE match_id = :m"), {"m": match_id})
        conn.execute(text(f"INSERT INTO {KEPT_ARCHIVE} (match_id, seq, timestamp_ms, envelope) "
                          "VALUES (:m, :s, :t, :e)"),
                     [{"m": match_id, "s": e.seq, "t": e.timestamp.ToMilliseconds(),
                       "e": e.SerializeToString(deterministic=True)} for e in events])
        log.info("projection_rebuild_diverged_from_store", match_id=match_id, diverged_seq=seq, events=len(events))
        taken.append(match_id)
    revisit_later(store, taken)
    return len(taken)


def _kept_tournaments(engine: Engine) -> list[Tournament]:
    """The tournament rows kept aside when the rebuild (or the one that died before it) began."""
    kept = Tournament.__table__.to_metadata(MetaData(), name=KEPT_TOURNAMENTS)  # type: ignore[attr-defined]
    assert isinstance(kept, Table)
    with engine.connect() as conn:
        return [Tournament.model_validate(dict(row)) for row in conn.execute(select(kept)).mappings()]


def _checkpoints_at_the_top(store: RedisEventStore, engine: Engine, projector: Projector) -> None:
    """Each partition's checkpoint at its newest entry, where a caught-up consumer leaves it."""
    newest = {p: (top.entry_id, top.envelope.timestamp.ToMilliseconds())
              for p, top in store.partition_tops().items()}
    if newest:
        with engine.begin() as conn:
            projector.writer.advance_checkpoints(conn, newest, dict.fromkeys(newest, 0))


def _restore_tournaments(engine: Engine, recorded: list[Tournament]) -> None:
    """Put back what the runner recorded; the derived fields stay as rebuilt."""
    with write_session(engine) as session:
        for old in recorded:
            row = session.get(Tournament, old.tournament_id)
            if row is None:
                row = Tournament(tournament_id=old.tournament_id, created_ms=old.created_ms, games=list(old.games),
                                 matches_finished=0)
            row.name, row.status, row.config, row.finished_ms = old.name, old.status, dict(old.config), old.finished_ms
            row.games = sorted(set(row.games) | set(old.games))
            row.created_ms = min(row.created_ms, old.created_ms)
            session.add(row)
