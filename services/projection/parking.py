"""Dead letters: the record of partition entries the projection gave up on (parked).

The projector parks the entries of a match that keeps failing in a transaction of
its own (a poison entry: see `projector.py`); the runner acks them, so they no
longer hold the consumer group, and writes to Redis, next to the retention watermark:

    <prefix>:projection:parked        hash: match id -> JSON of the entry that got it parked
                                      (partition, entry id, seq, event id, reason, consumer, time)
    <prefix>:projection:dead_letters  stream: every parked entry (same fields), capped; also each
                                      partition entry no event could be read from (`match_id` empty,
                                      `reason` "unreadable: ..."), acked after its record
    <prefix>:projection:dead_lettered zset: "partition:entry id" of each letter the stream holds (by
                                      its time): a letter is written once per entry while the stream
                                      holds it
    <prefix>:projection:unparks       counter of `unpark`s,
    <prefix>:projection:unparked      hash: match id -> the counter at its last `unpark`, and
    <prefix>:projection:unparked_at   zset: match id -> the time of its last `unpark` (ms): a mark is
                                      dropped `UNPARKED_KEEP_MS` after it, by a later `unpark`

Every consumer reads the hash when it starts and again every `claim_every_s`, so
later entries of a parked match are parked by whichever consumer gets them. The
events stay in the match's own stream (a parked match never finishes in SQL, so
retention never trims it): after fixing the cause, `python -m services.projection
unpark MATCH_ID` forgets the record and projects the match from that stream.

A record is one script (`_RECORD`): all of it is written or none, and made again (a reply lost,
Redis refusing it until memory is freed, the entries claimed again by another consumer) it writes
no letter twice. The match of an entry that got it parked is named in the hash unless `unpark` let
the match go since the consumer last read the hash (`Parked.unparks_seen`): a record kept while
Redis refused it must not park again a match an operator has projected meanwhile.

A mark matters only to a record made with a count read before it. A consumer reads the count again
every `claim_every_s`, and holds an older one only while the record of its parked entries keeps
failing (Redis away or refusing it), so marks are kept `UNPARKED_KEEP_MS` (a week) and no longer:
the hash held one field for every match ever unparked. A record refused for longer than that names
a match unparked meanwhile parked again, as before the marks: `unpark` it again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.eventstore.unreadable import UnreadableEntry

from .projector import UNREAD, Parked

DEAD_LETTERS_MAXLEN = 100_000
UNPARKED_KEEP_MS = 7 * 24 * 3600 * 1000
"""how long an `unpark`'s mark is kept: far longer than a consumer holds the count it read (its
refresh, `claim_every_s`, unless Redis refuses its record that long)."""

_RECORD = """
-- KEYS: the dead-letter stream, its letters' entries (zset), the parked hash, the unparked hash.
-- ARGV: the cap, then five a letter: its partition entry ("" for one read from no partition: never
-- taken for another), the match it names parked ("" none), the unparks its consumer had seen (""
-- any), the hash record (JSON), the stream fields (JSON array).
-- One script, so all of it is written or none (out of memory refuses its first write); made
-- again, it writes no letter the stream still holds. Answers {letters written, matches not named:
-- unparked since}.
local cap = tonumber(ARGV[1])
local written, unparked = 0, {}
for i = 2, #ARGV, 5 do
  local entry, named, seen = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if named ~= '' then
    local mark = redis.call('HGET', KEYS[4], named)
    if mark and seen ~= '' and tonumber(mark) > tonumber(seen) then
      unparked[#unparked + 1] = named
    else
      redis.call('HSETNX', KEYS[3], named, ARGV[i + 3])
    end
  end
  if entry == '' or not redis.call('ZSCORE', KEYS[2], entry) then
    local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', cap, '*', unpack(cjson.decode(ARGV[i + 4])))
    if entry ~= '' then redis.call('ZADD', KEYS[2], tonumber(string.match(id, '^%d+')), entry) end
    written = written + 1
  end
end
-- An entry is keyed as long as the stream holds its letter (scored by the letter's time): what the
-- stream's trim dropped, and nothing it holds (`MAXLEN ~` drops whole nodes: it keeps more than
-- the cap, and the letters of no partition entry count in it too).
local oldest = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
if oldest then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. string.match(oldest[1], '^%d+'))
else
  redis.call('DEL', KEYS[2])
end
return {written, unparked}
"""

_FORGET = """
-- KEYS: the parked hash, the unparks counter, the unparked hash, its marks' times (zset); ARGV: the
-- match, now (ms), how long a mark is kept (ms).
-- Answers {the record the hash held for the match or false, the unparks counter now}.
local count = redis.call('INCR', KEYS[2])
if redis.call('ZCARD', KEYS[4]) < redis.call('HLEN', KEYS[3]) then
  -- marks written with no time (before the times were kept, or by such a replica): dated now
  for _, marked in ipairs(redis.call('HKEYS', KEYS[3])) do
    redis.call('ZADD', KEYS[4], 'NX', ARGV[2], marked)
  end
end
redis.call('HSET', KEYS[3], ARGV[1], count)
redis.call('ZADD', KEYS[4], ARGV[2], ARGV[1])
local cutoff = string.format('(%d', tonumber(ARGV[2]) - tonumber(ARGV[3]))
for _, old in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', cutoff, 'LIMIT', 0, 1000)) do
  redis.call('HDEL', KEYS[3], old)
  redis.call('ZREM', KEYS[4], old)
end
local record = redis.call('HGET', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[1], ARGV[1])
return {record, count}
"""


@dataclass(frozen=True)
class Recorded:
    """What a record wrote: the letters new to the stream, and the matches it did not name parked
    because `unpark` let them go after the consumer last read the hash."""

    written: int
    unparked: list[str] = field(default_factory=list)


class DeadLetters:
    def __init__(self, store: RedisEventStore) -> None:
        self.store = store
        self._record = store.client.register_script(_RECORD)
        self._forget = store.client.register_script(_FORGET)

    @property
    def parked_key(self) -> str:
        return f"{self.store.keys.prefix}:projection:parked"

    @property
    def stream_key(self) -> str:
        return f"{self.store.keys.prefix}:projection:dead_letters"

    @property
    def lettered_key(self) -> str:
        return f"{self.store.keys.prefix}:projection:dead_lettered"

    @property
    def unparks_key(self) -> str:
        return f"{self.store.keys.prefix}:projection:unparks"

    @property
    def unparked_key(self) -> str:
        return f"{self.store.keys.prefix}:projection:unparked"

    @property
    def unparked_at_key(self) -> str:
        return f"{self.store.keys.prefix}:projection:unparked_at"

    def record(self, parked: Iterable[Parked], consumer: str = "") -> Recorded:
        """Write each parked entry to the stream, once (`_RECORD`), and the match of one that got it
        parked to the hash unless already there (an entry parked because its match was, as this
        consumer last read the hash, must not park again a match `unpark` has just let go) or let go
        by `unpark` since (`Parked.unparks_seen`). Should it fail, the runner keeps the entries
        unacked and records them all again (`ProjectionRunner._record_parked`): the hash never
        misses a match whose entries were acked, nor the stream a letter, and none comes twice."""
        now_ms = int(time.time() * 1000)
        letters = []
        for item in parked:
            env = item.entry.envelope
            fields = {"match_id": env.match_id, "seq": str(env.seq), "event_id": env.event_id,
                      "partition": str(item.entry.partition), "entry_id": item.entry.entry_id,
                      "reason": item.reason, "consumer": consumer, "at_ms": str(now_ms)}
            named = env.match_id if item.first else ""  # the others only follow the one that got it parked
            seen = "" if item.unparks_seen is None else str(item.unparks_seen)
            letters.append(_Letter(item.entry.partition, item.entry.entry_id, fields, named, seen))
        return self._write(letters)

    def record_unreadable(self, entries: Iterable[UnreadableEntry], consumer: str = "") -> int:
        """Write each partition entry no event could be read from to the stream, once (no match to
        park: `match_id` is empty, `reason` starts `unreadable:`), before the consumer acks it, and as
        a rebuild goes past it. The entry itself stays in the partition stream until the retention
        sweep trims what was acked."""
        now_ms = int(time.time() * 1000)
        letters = [_Letter(entry.partition, entry.entry_id,
                           {"match_id": "", "seq": "", "event_id": "", "partition": str(entry.partition),
                            "entry_id": entry.entry_id, "reason": f"unreadable: {entry.reason}",
                            "consumer": consumer, "at_ms": str(now_ms)})
                   for entry in entries]
        return self._write(letters).written

    def _write(self, letters: Sequence[_Letter]) -> Recorded:
        if not letters:
            return Recorded(0)
        args: list[Any] = [DEAD_LETTERS_MAXLEN]
        for letter in letters:
            args += letter.args()
        written, unparked = self._record(keys=[self.stream_key, self.lettered_key, self.parked_key,
                                               self.unparked_key], args=args)
        return Recorded(int(written), sorted({_text(m) for m in unparked}))

    def parked_matches(self) -> set[str]:
        return self.parked()[0]

    def parked(self) -> tuple[set[str], int]:
        """The parked matches, and the unparks counter as they were read (one round trip): a match
        this reader parks later is named in the hash only if no `unpark` of it came since."""
        with self.store.client.pipeline(transaction=True) as pipe:
            pipe.hkeys(self.parked_key)
            pipe.get(self.unparks_key)
            names, unparks = pipe.execute()
        return {_text(k) for k in names}, int(unparks or 0)

    def records(self) -> dict[str, dict[str, str]]:
        """Match id -> the record of the entry that got it parked."""
        raw = self.store.client.hgetall(self.parked_key)
        return {_text(k): json.loads(_text(v)) for k, v in raw.items()}

    def forget(self, match_id: str) -> str | None:
        """Drop a match's record (before projecting it again), marking it let go: a record of its
        strike-out made later by a consumer that read the hash before does not name it again
        (`record`); the marks older than `UNPARKED_KEEP_MS` go. The record dropped (as stored:
        `restore` puts it back), None when it had none."""
        record, _count = self._forget(keys=[self.parked_key, self.unparks_key, self.unparked_key, self.unparked_at_key],
                                      args=[match_id, time.time_ns() // 1_000_000, UNPARKED_KEEP_MS])
        return _text(record) if record else None

    def restore(self, match_id: str, record: str) -> None:
        """Name a match parked again with the record `forget` dropped, unless one was made since:
        an unpark whose projection failed leaves the match as it found it."""
        self.store.client.hsetnx(self.parked_key, match_id, record)


@dataclass(frozen=True)
class _Letter:
    partition: int
    entry_id: str
    fields: dict[str, str]
    named: str = ""
    seen: str = ""

    def args(self) -> list[str]:
        entry = "" if self.entry_id == UNREAD else f"{self.partition}:{self.entry_id}"
        record = json.dumps(self.fields, sort_keys=True) if self.named else ""
        flat = [part for pair in self.fields.items() for part in pair]
        return [entry, self.named, self.seen, record, json.dumps(flat)]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
