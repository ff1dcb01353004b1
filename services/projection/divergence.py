"""Matches whose event store and archive tell different histories, recorded for an operator.

A store that lost acknowledged writes (`appendfsync everysec` on a host crash, a Redis
restored from an older AOF) and was written on since holds other events than the archive
at the same seqs, and it is the truth from then on (docs/eventstore.md). The projector
follows it for a live match; a match that finished on the lost events (ranked and rated on
them), or whose `match_created` was replaced, cannot be followed event by event. Such a
match is flagged: `matches.diverged_seq` is the first seq at which the two differ. Nothing
more is projected onto it, the retention sweep never trims its stream (the only copy of
what the store now says), `python -m services.projection diverged` lists it, and `rebuild`
takes its events from the store instead of the archive, which clears the flag.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import or_, select, update
from sqlalchemy.engine import Connection, Engine

from famiglia.readmodels.db import read_session

from .writes import ARCHIVE, MATCHES


@dataclass(frozen=True)
class DivergedMatch:
    match_id: str
    status: str
    diverged_seq: int
    version: int
    """The projected version (of the archive's history)."""


def first_difference(archived_ids: dict[int, str], stored: Iterable[tuple[int, str]]) -> int | None:
    """The first seq both hold under different event ids (None: they agree wherever both
    have an event). Event ids are new for every write, so a store that went back and was
    written on differs from the archive at its first rewritten seq and every one after."""
    return min((seq for seq, event_id in stored if archived_ids.get(seq, event_id) != event_id), default=None)


def archived_ids(conn: Connection, match_id: str) -> dict[int, str]:
    """seq -> event id of a match's archived events."""
    query = select(ARCHIVE.c.seq, ARCHIVE.c.event_id).where(ARCHIVE.c.match_id == match_id)
    return {int(seq): str(event_id) for seq, event_id in conn.execute(query)}


def mark_diverged(engine: Engine, match_id: str, seq: int) -> None:
    """Flag a match from `seq` on (an earlier seq already recorded stays)."""
    with engine.begin() as conn:
        conn.execute(update(MATCHES).where(
            MATCHES.c.match_id == match_id,
            or_(MATCHES.c.diverged_seq.is_(None), MATCHES.c.diverged_seq > seq)).values(diverged_seq=seq))


def flagged(conn: Connection) -> dict[str, int]:
    """Match id -> diverged seq of every flagged match."""
    query = select(MATCHES.c.match_id, MATCHES.c.diverged_seq).where(MATCHES.c.diverged_seq.is_not(None))
    return {str(match_id): int(seq) for match_id, seq in conn.execute(query)}


def diverged_matches(engine: Engine) -> list[DivergedMatch]:
    """Every flagged match, by match id (what `python -m services.projection diverged` lists)."""
    query = (select(MATCHES.c.match_id, MATCHES.c.status, MATCHES.c.diverged_seq, MATCHES.c.version)
             .where(MATCHES.c.diverged_seq.is_not(None)).order_by(MATCHES.c.match_id))
    with read_session(engine) as session:
        return [DivergedMatch(str(m), str(s), int(d), int(v)) for m, s, d, v in session.connection().execute(query)]
