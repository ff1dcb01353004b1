"""The SQL event archive: the cold copy of every event, for replay after a Redis trim."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, select

from famiglia.v1.envelope_pb2 import EventEnvelope

from .tables import ArchivedEvent


def archive_row(envelope: EventEnvelope) -> ArchivedEvent:
    """The archive row of one envelope (the envelope's own bytes are kept whole)."""
    return ArchivedEvent(**archive_values(envelope))


def archive_values(envelope: EventEnvelope) -> dict[str, Any]:
    """The archive row as plain column values, for bulk inserts (no ORM object per event)."""
    ts = envelope.timestamp  # in ms as Timestamp.ToMilliseconds, without its validation call (once per event)
    return dict(
        match_id=envelope.match_id,
        seq=envelope.seq,
        event_id=envelope.event_id,
        game_id=envelope.game_id,
        type=envelope.type,
        payload_type=envelope.payload_type,
        visibility=int(envelope.visibility.kind),
        visible_seats=sorted(int(s) for s in envelope.visibility.seats),
        seat=envelope.seat,
        command_id=envelope.command_id,
        timestamp_ms=ts.seconds * 1000 + ts.nanos // 1_000_000,
        payload=envelope.payload,
        envelope=envelope.SerializeToString(deterministic=True),
    )


def archived_envelopes(session: Session, match_id: str, after: int = 0, upto: int | None = None
                       ) -> list[EventEnvelope]:
    """The match's archived envelopes with `after < seq <= upto`, in order (byte-identical to the stream's)."""
    query = select(ArchivedEvent.envelope).where(ArchivedEvent.match_id == match_id, ArchivedEvent.seq > after)
    if upto is not None:
        query = query.where(ArchivedEvent.seq <= upto)
    rows = session.exec(query.order_by(col(ArchivedEvent.seq))).all()  # type: ignore[call-overload]
    return [EventEnvelope.FromString(raw) for raw in rows]


def archived_version(session: Session, match_id: str) -> int:
    """The highest archived seq of a match (0 when none)."""
    from sqlalchemy import func

    value = session.exec(select(func.max(ArchivedEvent.seq)).where(ArchivedEvent.match_id == match_id)).one()
    return int(value or 0)
