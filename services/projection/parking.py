"""Dead letters: the record of partition entries the projection gave up on (parked).

The projector parks the entries of a match that keeps failing in a transaction of
its own (a poison entry: see `projector.py`); the runner acks them, so they no
longer hold the consumer group, and writes two things to Redis, next to the
retention watermark:

    <prefix>:projection:parked        hash: match id -> JSON of the entry that got it parked
                                      (partition, entry id, seq, event id, reason, consumer, time)
    <prefix>:projection:dead_letters  stream: every parked entry (same fields), capped; also each
                                      partition entry no event could be read from (`match_id` empty,
                                      `reason` "unreadable: ..."), acked after its record

Every consumer reads the hash when it starts and again every `claim_every_s`, so
later entries of a parked match are parked by whichever consumer gets them. The
events stay in the match's own stream (a parked match never finishes in SQL, so
retention never trims it): after fixing the cause, `python -m services.projection
unpark MATCH_ID` forgets the record and projects the match from that stream.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.eventstore.unreadable import UnreadableEntry

from .projector import Parked

DEAD_LETTERS_MAXLEN = 100_000


class DeadLetters:
    def __init__(self, store: RedisEventStore) -> None:
        self.store = store

    @property
    def parked_key(self) -> str:
        return f"{self.store.keys.prefix}:projection:parked"

    @property
    def stream_key(self) -> str:
        return f"{self.store.keys.prefix}:projection:dead_letters"

    def record(self, parked: Iterable[Parked], consumer: str = "") -> int:
        """Write each parked entry to the stream, and the match of one that got it parked to the
        hash unless already there (an entry parked because its match was, as this consumer last
        read the hash, must not park again a match `unpark` has just let go). One round trip, the
        hash first; should it fail, the runner keeps the entries unacked and records them all again
        (`ProjectionRunner._record_parked`): the stream may then hold one twice, the hash never
        misses a match whose entries were acked."""
        now_ms = int(time.time() * 1000)
        named, letters = [], []
        for item in parked:
            env = item.entry.envelope
            fields: dict[Any, Any] = {"match_id": env.match_id, "seq": str(env.seq), "event_id": env.event_id,
                      "partition": str(item.entry.partition), "entry_id": item.entry.entry_id,
                      "reason": item.reason, "consumer": consumer, "at_ms": str(now_ms)}
            if item.first:  # the entry that got its match parked; the others only follow it
                named.append((env.match_id, json.dumps(fields, sort_keys=True)))
            letters.append(fields)
        if letters:
            with self.store.client.pipeline(transaction=False) as pipe:
                for match_id, record in named:
                    pipe.hsetnx(self.parked_key, match_id, record)
                for fields in letters:
                    pipe.xadd(self.stream_key, fields, maxlen=DEAD_LETTERS_MAXLEN, approximate=True)
                pipe.execute()
        return len(letters)

    def record_unreadable(self, entries: Iterable[UnreadableEntry], consumer: str = "") -> int:
        """Write each partition entry no event could be read from to the stream (no match to park:
        `match_id` is empty, `reason` starts `unreadable:`), before the consumer acks it. The entry
        itself stays in the partition stream until the retention sweep trims what was acked."""
        client = self.store.client
        count = 0
        now_ms = str(int(time.time() * 1000))
        for entry in entries:
            fields: dict[Any, Any] = {"match_id": "", "seq": "", "event_id": "", "partition": str(entry.partition),
                                      "entry_id": entry.entry_id, "reason": f"unreadable: {entry.reason}",
                                      "consumer": consumer, "at_ms": now_ms}
            client.xadd(self.stream_key, fields, maxlen=DEAD_LETTERS_MAXLEN, approximate=True)
            count += 1
        return count

    def parked_matches(self) -> set[str]:
        return {_text(k) for k in self.store.client.hkeys(self.parked_key)}

    def records(self) -> dict[str, dict[str, str]]:
        """Match id -> the record of the entry that got it parked."""
        raw = self.store.client.hgetall(self.parked_key)
        return {_text(k): json.loads(_text(v)) for k, v in raw.items()}

    def forget(self, match_id: str) -> bool:
        """Drop a match's record (before projecting it again); False when it had none."""
        return bool(self.store.client.hdel(self.parked_key, match_id))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
