"""Who asked for a rematch of a finished match, and the request id its creation goes under.

The command service's AskRematch records each person's ask here; the ask that completes the
table fixes the rematch's creation request id in the same write (a random secret, written once:
`ask` with the table, or `fix_request_id`) and creates the match under it, so every asker, a
retry, a second replica and a crash between the two writes all find the same rematch, and a
secret rotated meanwhile changes nothing. The request id is a secret, as every creation request
id is (a retried CreateMatch answers with every seat's token): it never leaves the server.

One hash per finished match, beside its match (the match's partition hash tag), and one sorted
set per partition of the creations not known to be done:

    <prefix>:{p07}:rematch:<match_id>    hash  s<seat> -> "1" (an ask), rid -> the request id,
                                               op -> the operator who allowed it (bots past the
                                               public budget: AskRematch with an operator token)
    <prefix>:{p07}:rematches             zset  finished match id -> when its request id was fixed (ms),
                                               or the due time of a sweep that could not make it

A finished match enters the set with its request id, in the same write, and leaves it once
its rematch is created (`drop_pending`): a creation lost in between (the asker's process died) is
named there for the command service's sweep to make (`CommandApp.finish_rematches`), and the
retention sweep keeps the finished match in Redis meanwhile (`creation_pending`, and `trim.lua`
looks again in the write that would drop it), since the rematch is made from it. The other way
round, the ask's script refuses a match trimmed since its caller loaded it (FinishedMatchArchived,
nothing written): of the ask and the trim, whichever writes first wins, and no creation is marked
pending for a match that is gone.

It expires `ttl_s` after its last write (`REMATCH_TTL_S`), and a rematch made is looked up under
it for as long; a match takes a new ask only within a day less of its end
(services/command/rematch.py, `ASKED_WITHIN_S`), so no table begins again once its asks are gone.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

REMATCH_TTL_S = 30 * 86_400
"""How long a finished match's asks (and its rematch's request id) are kept after the last write."""

_RID = "rid"
_OPERATOR = "op"

_ASK = """
-- KEYS[1] the asks, KEYS[2] the partition's pending creations, KEYS[3] the match's stream,
-- KEYS[4] its version key (read only; one slot: the match's tag)
-- ARGV: the seat's field, ttl ms, request id, at ms, match id, the table's seat fields...
-- Returns {added, the asks}, or -1: the match archived (stream trimmed, version kept), nothing
-- written, since a creation marked pending then has nothing left to be made from.
if redis.call('EXISTS', KEYS[3]) == 0 and redis.call('EXISTS', KEYS[4]) == 1 then
  return -1
end
local added = redis.call('HSET', KEYS[1], ARGV[1], '1')
local complete = redis.call('HEXISTS', KEYS[1], 'rid') == 0
for i = 6, #ARGV do
  if complete and redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 then complete = false end
end
if complete then
  redis.call('HSET', KEYS[1], 'rid', ARGV[3])
  redis.call('ZADD', KEYS[2], 'NX', ARGV[4], ARGV[5])
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {added, redis.call('HGETALL', KEYS[1])}
"""


class FinishedMatchArchived(Exception):
    """An ask refused: the finished match was trimmed (archived, `RedisEventStore.trim`) since the
    caller loaded it. Nothing stored: a creation marked pending then could not be made (the rematch
    is made from the finished match), and its table would wait for it in vain."""

    def __init__(self, match_id: str) -> None:
        super().__init__(f"match {match_id}: archived before the ask")
        self.match_id = match_id


@dataclass(frozen=True)
class RematchAsks:
    """Where a finished match's rematch stands: the seats that asked, and the creation request id
    once every person had (empty before)."""

    seats: frozenset[int]
    request_id: str = ""
    allowed_by: str = ""
    """The operator who allowed the rematch (a match whose bots think past the public budget)."""
    fresh: bool = False
    """(`ask`'s answer) The seat had not asked before: its ask is news to the table."""


class RematchAsksStore(ABC):
    """The port: the asks of finished matches."""

    @abstractmethod
    def ask(self, match_id: str, seat: int, table: Collection[int] = (), request_id: str = "",
            at_ms: int | None = None) -> RematchAsks:
        """Record `seat`'s ask (again: nothing new) and answer where the rematch stands. With
        `table` (the seats every person must ask from) and `request_id`: if the asks then hold
        every seat of `table` and no request id, `request_id` is fixed and the match pending
        from `at_ms` (now), in the ask's own write, as `fix_request_id` does: a process killed
        right after the ask that completes the table leaves the sweep a creation to make.
        FinishedMatchArchived, nothing stored, when the match was trimmed since the caller
        loaded it (the Redis adapter, which looks in that write; with `table` and `request_id`)."""

    @abstractmethod
    def look(self, match_id: str) -> RematchAsks:
        """Where the rematch stands, asking nothing."""

    @abstractmethod
    def fix_request_id(self, match_id: str, request_id: str, at_ms: int | None = None) -> str:
        """`request_id` as the rematch's creation request id unless one is already fixed; the one
        fixed (the first writer's). The match is pending (`pending`) from `at_ms` (now) until
        `drop_pending`."""

    @abstractmethod
    def allow(self, match_id: str, operator: str) -> RematchAsks:
        """Record that `operator` allows the rematch (the latest operator's name kept)."""

    @abstractmethod
    def pending(self, due_ms: int, most: int = 100) -> list[str]:
        """Finished matches whose request id was fixed (or put off) at or before `due_ms` and
        whose rematch is not known to be created: at most `most`, the oldest first."""

    @abstractmethod
    def drop_pending(self, match_id: str) -> None:
        """The match's rematch is created (or can be made no more): no sweep need look at it."""

    @abstractmethod
    def put_off(self, match_id: str, at_ms: int) -> None:
        """A pending creation a sweep could not make now: due again from `at_ms`, behind the
        others (still pending: the retention keeps its match). Nothing if it is no longer pending."""


def _asks(fields: dict[str, str]) -> RematchAsks:
    seats = frozenset(int(k[1:]) for k in fields if k.startswith("s") and k[1:].isdigit())
    return RematchAsks(seats, fields.get(_RID, ""), fields.get(_OPERATOR, ""))


class InMemoryRematchAsks(RematchAsksStore):
    """The Redis hash's rules in one process (unit tests, an in-memory store)."""

    def __init__(self, ttl_s: float = REMATCH_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._ttl_s = ttl_s
        self._clock = clock
        self._asks: dict[str, tuple[float, dict[str, str]]] = {}
        self._pending: dict[str, int] = {}

    def _fields(self, match_id: str) -> dict[str, str]:
        held = self._asks.get(match_id)
        if held is None or held[0] <= self._clock():
            return {}
        return held[1]

    def _write(self, match_id: str, fields: dict[str, str]) -> None:
        self._asks[match_id] = (self._clock() + self._ttl_s, fields)

    def ask(self, match_id: str, seat: int, table: Collection[int] = (), request_id: str = "",
            at_ms: int | None = None) -> RematchAsks:
        with self._lock:
            before = self._fields(match_id)
            fields = {**before, f"s{seat}": "1"}
            if table and request_id and not fields.get(_RID) and all(f"s{s}" in fields for s in table):
                fields[_RID] = request_id
                self._pending.setdefault(match_id, _now_ms() if at_ms is None else at_ms)
            self._write(match_id, fields)
            return dataclasses.replace(_asks(fields), fresh=f"s{seat}" not in before)

    def look(self, match_id: str) -> RematchAsks:
        with self._lock:
            return _asks(self._fields(match_id))

    def allow(self, match_id: str, operator: str) -> RematchAsks:
        with self._lock:
            fields = {**self._fields(match_id), _OPERATOR: operator}
            self._write(match_id, fields)
            return _asks(fields)

    def fix_request_id(self, match_id: str, request_id: str, at_ms: int | None = None) -> str:
        with self._lock:
            fields = self._fields(match_id)
            fields = {**fields, _RID: fields.get(_RID) or request_id}
            self._write(match_id, fields)
            self._pending.setdefault(match_id, _now_ms() if at_ms is None else at_ms)
            return fields[_RID]

    def pending(self, due_ms: int, most: int = 100) -> list[str]:
        with self._lock:
            due = sorted((at, m) for m, at in self._pending.items() if at <= due_ms)
            return [m for _at, m in due[:most]]

    def drop_pending(self, match_id: str) -> None:
        with self._lock:
            self._pending.pop(match_id, None)

    def put_off(self, match_id: str, at_ms: int) -> None:
        with self._lock:
            if match_id in self._pending:
                self._pending[match_id] = at_ms


class RedisRematchAsks(RematchAsksStore):
    """The asks on the event store's Redis client and key layout (`RedisEventStore.client`,
    `.keys`): one round trip a call, a transaction on the match's one key."""

    def __init__(self, client: Any, keys: Any, ttl_s: float = REMATCH_TTL_S) -> None:
        self.client = client
        self.keys = keys
        self.ttl_ms = int(ttl_s * 1000)
        self._ask_script = client.register_script(_ASK)

    def _run(self, match_id: str, write: Callable[[Any, str], None] | None) -> tuple[Any, dict[str, str]]:
        """(the write's reply, the hash after it)."""
        key = self.keys.rematch(match_id)
        if write is None:
            wrote, raw = None, self.client.hgetall(key)
        else:
            pipe = self.client.pipeline(transaction=True)
            write(pipe, key)
            pipe.pexpire(key, self.ttl_ms)
            pipe.hgetall(key)
            replies = pipe.execute()
            wrote, raw = replies[0], replies[-1]  # (the write's first reply; the hash after it)
        return wrote, {_text(k): _text(v) for k, v in (raw or {}).items()}

    def ask(self, match_id: str, seat: int, table: Collection[int] = (), request_id: str = "",
            at_ms: int | None = None) -> RematchAsks:
        if not (table and request_id):
            added, fields = self._run(match_id, lambda pipe, key: pipe.hset(key, f"s{seat}", "1"))
            return dataclasses.replace(_asks(fields), fresh=bool(added))
        pending = self.keys.rematches_pending(self.keys.partition_of(match_id))  # (the match's slot)
        reply = self._ask_script(keys=[self.keys.rematch(match_id), pending, self.keys.match_stream(match_id),
                                       self.keys.version(match_id)],
                                 args=[f"s{seat}", self.ttl_ms, request_id, _now_ms() if at_ms is None else at_ms,
                                       match_id, *(f"s{s}" for s in table)])
        if not isinstance(reply, list):  # -1: trimmed since the caller loaded it
            raise FinishedMatchArchived(match_id)
        flat = [_text(v) for v in reply[1]]
        return dataclasses.replace(_asks(dict(zip(flat[::2], flat[1::2], strict=True))), fresh=bool(int(reply[0])))

    def look(self, match_id: str) -> RematchAsks:
        return _asks(self._run(match_id, None)[1])

    def allow(self, match_id: str, operator: str) -> RematchAsks:
        return _asks(self._run(match_id, lambda pipe, key: pipe.hset(key, _OPERATOR, operator))[1])

    def fix_request_id(self, match_id: str, request_id: str, at_ms: int | None = None) -> str:
        pending = self.keys.rematches_pending(self.keys.partition_of(match_id))
        at = _now_ms() if at_ms is None else at_ms

        def fix(pipe: Any, key: str) -> None:  # one slot: the match's partition tag
            pipe.hsetnx(key, _RID, request_id)
            pipe.zadd(pending, {match_id: at}, nx=True)

        return _asks(self._run(match_id, fix)[1]).request_id

    def pending(self, due_ms: int, most: int = 100) -> list[str]:
        pipe = self.client.pipeline(transaction=False)
        for partition in range(self.keys.partitions):
            pipe.zrangebyscore(self.keys.rematches_pending(partition), "-inf", due_ms, start=0, num=most,
                               withscores=True)
        # The oldest of all partitions, not the first partitions' first: entries a sweep cannot
        # make (put off) in the low partitions would otherwise hide the others' for good.
        found = sorted((at, _text(m)) for entries in pipe.execute() for m, at in entries)
        return [m for _at, m in found[:most]]

    def drop_pending(self, match_id: str) -> None:
        self.client.zrem(self.keys.rematches_pending(self.keys.partition_of(match_id)), match_id)

    def put_off(self, match_id: str, at_ms: int) -> None:
        self.client.zadd(self.keys.rematches_pending(self.keys.partition_of(match_id)), {match_id: at_ms}, xx=True)


def creation_pending(client: Any, keys: Any, match_id: str) -> bool:
    """Whether the finished match's rematch has its request id fixed but is not known to be
    created: the retention sweep keeps such a match in Redis, which the rematch is made from. Not
    once its asks expired (nothing can make it then: the sweep drops such an entry, and with no
    sweep running, a release before it, it would keep the match for ever). The asks are read
    only for a pending one: the common look stays one `ZSCORE`."""
    if client.zscore(keys.rematches_pending(keys.partition_of(match_id)), match_id) is None:
        return False
    return bool(client.exists(keys.rematch(match_id)))


def _now_ms() -> int:
    return int(time.time() * 1000)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
