"""Finished matches leave Redis once archived: the sweep that trims their streams.

The projector writes a match's events to the SQL archive in the same transaction
that moves the match's projected version, so a finished match whose projected
version equals the store's has every event in the archive. Once it has been over
for `retain_ms` (a client may still follow its last events or fetch its final
view), the sweep drops its stream and command records (`RedisEventStore.trim`):
from then on replay reads the archive, and the command service answers
`match_archived`. It also drops the partition stream entries older than that which
every consumer group has acked (`trim_consumed`). Without it Redis keeps every event
of every match ever played, twice.

Before a trim the sweep checks that the store still tells the archive's history: a
store that lost acknowledged writes and was written on since can hold as many events
as were archived, under other ids, and the projection may not have seen them yet (a
late consumer). A match whose event ids differ is flagged (`divergence.py`) and kept,
as is every match the projector flagged: its stream is the only copy of what the store
now says, and `rebuild` reads it.

The sweep walks finished matches in (finished_ms, match_id) order from a watermark
kept in Redis, so each match is looked at once. Several projection processes may
sweep at once: a trim is idempotent, and a watermark written back by a slower
sweep only makes the next sweep look at some matches again.

A finished match whose rematch's creation is pending (its table asked in full, its request id
fixed, the match not created yet: `famiglia.eventstore.rematch_asks`) is kept too, and named for
a revisit: the rematch is made from it (the command service's sweep, `finish_rematches`), and a
trim would lose it. A later sweep trims it once the creation is done, or once its asks expired
(nothing can make it then). The sweep's own look only spares the other checks: a table may
complete between it and the trim, so the trim's script looks again in the write that drops the
stream (`RedisEventStore.trim`, RematchPending), and such a match is kept and named alike.

A flagged match that `rebuild` took from the store finished, in its new history, where
the watermark has usually passed already (the operator rebuilds once the flag shows, long
after the walk kept it). So the rebuild names it in a set beside the watermark
(`revisit_later`), and each sweep looks at the matches named there first, whatever the
watermark, with the same checks: once one is over for `retain_ms` and no longer flagged,
it is looked at (trimmed, or kept as any other) and leaves the set.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import and_, or_
from sqlalchemy.engine import Engine
from sqlmodel import col, select

from famiglia.eventstore.consumer import trim_consumed
from famiglia.eventstore.redis_store import RedisEventStore, RematchPending
from famiglia.eventstore.rematch_asks import creation_pending
from famiglia.readmodels.db import read_session
from famiglia.readmodels.tables import Match
from famiglia.telemetry import get_logger

from .divergence import archived_ids, first_difference, mark_diverged

log = get_logger("famiglia.projection.retention")


def revisit_key(store: RedisEventStore) -> str:
    """The set of matches the sweep looks at whatever its watermark (beside the watermark)."""
    return f"{store.keys.prefix}:retention:revisit"


def revisit_later(store: RedisEventStore, match_ids: list[str]) -> None:
    """Have every sweep look at these matches, wherever the watermark is, until one finds each
    over for the retention period and not flagged: `rebuild` names the diverged matches it takes
    from the store, whose new end the watermark may have passed."""
    if match_ids:
        store.client.sadd(revisit_key(store), *match_ids)


@dataclass(frozen=True)
class SweepReport:
    looked_at: int = 0
    trimmed: int = 0
    """Matches whose streams were dropped."""
    events: int = 0
    """Events dropped from Redis (they stay in the archive)."""
    skipped: int = 0
    """Finished matches left alone: the store version differs from the projected one, the
    store's events from the archive's (flagged), or their rematch's creation is pending."""
    entries: int = 0
    """Partition stream entries dropped."""


@dataclass
class RetentionSweep:
    store: RedisEventStore
    sql: Engine
    retain_ms: int
    group: str = "projection"
    """The projection's consumer group: partition entries go only where it is (it archives)."""
    batch: int = 200
    most: int = 2000
    """Matches one sweep looks at, at most: a first sweep over a long history is spread over
    several rounds of the consumer instead of holding it up."""
    clock: Callable[[], float] = time.time
    _awaiting: set[str] = field(default_factory=set)
    """The matches this sweep kept for their rematch's creation: looked at again by the next."""

    @property
    def watermark_key(self) -> str:
        return f"{self.store.keys.prefix}:retention:watermark"

    def watermark(self) -> tuple[int, str]:
        """(finished_ms, match_id) of the last finished match looked at; (-1, "") at first."""
        raw = self.store.client.get(self.watermark_key)
        if not raw:
            return -1, ""
        finished_ms, _, match_id = (raw.decode() if isinstance(raw, bytes) else str(raw)).partition(" ")
        return int(finished_ms), match_id

    def sweep(self) -> SweepReport:
        """Trim every archived match finished at least `retain_ms` ago and not looked at yet, and
        the partition entries older than that every group is done with."""
        cutoff = int(self.clock() * 1000) - self.retain_ms
        looked = trimmed = events = skipped = 0
        self._awaiting.clear()
        for match_id, projected in self._revisits(cutoff):
            looked += 1
            dropped = self._look_at(match_id, projected, None)
            skipped += dropped is None
            trimmed += bool(dropped)
            events += dropped or 0
            if match_id not in self._awaiting:
                self.store.client.srem(revisit_key(self.store), match_id)
        mark = self.watermark()
        while True:
            rows = self._finished_before(cutoff, mark)
            for match_id, finished_ms, projected, diverged in rows:
                looked += 1
                dropped = self._look_at(match_id, projected, diverged)
                skipped += dropped is None
                trimmed += bool(dropped)
                events += dropped or 0
                mark = (finished_ms, match_id)
            if rows:
                self.store.client.set(self.watermark_key, f"{mark[0]} {mark[1]}")
            if len(rows) < self.batch or looked >= self.most:
                break
        entries = trim_consumed(self.store, self.group, keep_after_ms=cutoff)
        report = SweepReport(looked, trimmed, events, skipped, entries)
        if trimmed or skipped or entries:
            log.info("retention_swept", matches=trimmed, events=events, skipped=skipped, looked_at=looked,
                     partition_entries=entries)
        return report

    def _look_at(self, match_id: str, projected: int, diverged: int | None) -> int | None:
        """Trim the match's stream unless it must stay; the events dropped, None when kept."""
        if self._kept(match_id, projected, diverged):
            return None
        try:
            return self.store.trim(match_id)
        except RematchPending:  # its table completed since `_kept` looked: the trim looks again
            self._keep_for_rematch(match_id)
            return None

    def _keep_for_rematch(self, match_id: str) -> None:
        """Keep a match whose rematch's creation is pending, and name it for a revisit now,
        before the watermark passes it: a sweep that fails later in its walk would otherwise
        leave it behind the watermark and named nowhere, never trimmed."""
        log.info("retention_skipped", match_id=match_id, reason="rematch_pending")
        revisit_later(self.store, [match_id])
        self._awaiting.add(match_id)

    def _revisits(self, cutoff: int) -> list[tuple[str, int]]:
        """(match id, projected version) of the matches named for a revisit that are over by
        `cutoff` and not flagged; the others stay named (not over yet, flagged still — a rebuild
        running now clears the flag once it commits —, or their row not rebuilt yet)."""
        named = sorted(_text(m) for m in self.store.client.smembers(revisit_key(self.store)))
        if not named:
            return []
        query = (select(Match.match_id, Match.version)
                 .where(col(Match.match_id).in_(named), col(Match.status).in_(("finished", "cancelled")),
                        col(Match.finished_ms) <= cutoff, col(Match.diverged_seq).is_(None))
                 .order_by(Match.match_id))
        with read_session(self.sql) as session:
            return [(m, int(v)) for m, v in session.exec(query).all()]

    def _kept(self, match_id: str, projected: int, diverged: int | None) -> bool:
        """Whether the match's stream must stay: flagged, its rematch's creation pending, its
        events other than the archive's (flagged now), or its store version not the projected one."""
        if diverged is not None:
            log.warning("retention_skipped", match_id=match_id, reason="store_diverged", diverged_seq=diverged)
            return True
        if creation_pending(self.store.client, self.store.keys, match_id):  # (the trim looks again)
            self._keep_for_rematch(match_id)
            return True
        stored = self.store.version(match_id)
        events = self.store.read(match_id)
        with read_session(self.sql) as session:
            seq = first_difference(archived_ids(session.connection(), match_id), ((e.seq, e.event_id) for e in events))
        if seq is not None:
            mark_diverged(self.sql, match_id, seq)
            log.error("retention_store_diverged", match_id=match_id, seq=seq, projected_version=projected,
                      store_version=stored, action="flagged and kept: rebuild the read models "
                      "(`python -m services.projection diverged` lists such matches)")
            return True
        if stored != projected:
            # Not every event is in the archive (or the store lost some): keep the stream.
            log.warning("retention_skipped", match_id=match_id, reason="versions_differ",
                        projected_version=projected, store_version=stored)
            return True
        return False

    def _finished_before(self, cutoff: int, mark: tuple[int, str]) -> list[tuple[str, int, int, int | None]]:
        mark_ms, mark_id = mark
        finished_ms, match_id = col(Match.finished_ms), col(Match.match_id)
        query = (
            select(Match.match_id, Match.finished_ms, Match.version, Match.diverged_seq)
            .where(col(Match.status).in_(("finished", "cancelled")), finished_ms <= cutoff,
                   or_(finished_ms > mark_ms, and_(finished_ms == mark_ms, match_id > mark_id)))
            .order_by(finished_ms, match_id)
            .limit(self.batch)
        )
        with read_session(self.sql) as session:
            return [(m, int(f or 0), int(v), d) for m, f, v, d in session.exec(query).all()]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
