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
round, every write here (an ask, `fix_request_id`, `allow`) refuses a match trimmed since its
caller loaded it (FinishedMatchArchived, nothing written), looked at in the write itself: of the
write and the trim, whichever comes first wins, so no creation is marked pending for a match that
is gone, and a trimmed match gets no asks of its own that nothing needs. The in-memory adapter
bound to an in-memory store (`InMemoryRematchAsks(store=...)`) keeps both rules, the store's
trim (RematchPending) included, under the store's lock.

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
from typing import Any, Protocol, TypeVar

_T = TypeVar("_T")

REMATCH_TTL_S = 30 * 86_400
"""How long a finished match's asks (and its rematch's request id) are kept after the last write."""

_RID = "rid"
_OPERATOR = "op"

_LIVE = """
-- KEYS[1] the asks, KEYS[2] the partition's pending creations, KEYS[3] the match's stream,
-- KEYS[4] its version key (read only; one slot: the match's tag)
-- -1, nothing written, for a match archived (its stream trimmed, its version kept): a creation
-- marked pending then has nothing left to be made from, and asks of it are a key nothing needs.
if redis.call('EXISTS', KEYS[3]) == 0 and redis.call('EXISTS', KEYS[4]) == 1 then
  return -1
end
"""

_ASK = _LIVE + """
-- ARGV: the seat's field, ttl ms, request id ("": no table), at ms, match id, the table's seat
-- fields... Returns {added, the asks}.
local added = redis.call('HSET', KEYS[1], ARGV[1], '1')
local complete = #ARGV >= 6 and ARGV[3] ~= '' and redis.call('HEXISTS', KEYS[1], 'rid') == 0
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

_FIX = _LIVE + """
-- ARGV: the request id, ttl ms, at ms, match id. Returns the request id fixed (the first writer's).
redis.call('HSETNX', KEYS[1], 'rid', ARGV[1])
redis.call('ZADD', KEYS[2], 'NX', ARGV[3], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('HGET', KEYS[1], 'rid')
"""

_ALLOW = _LIVE + """
-- ARGV: the operator, ttl ms. Returns the asks.
redis.call('HSET', KEYS[1], 'op', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('HGETALL', KEYS[1])
"""


class FinishedMatchArchived(Exception):
    """An ask, `fix_request_id` or `allow` refused: the finished match was trimmed (archived,
    `RedisEventStore.trim`) since the caller loaded it. Nothing stored: a creation marked pending
    then could not be made (the rematch is made from the finished match), its table would wait for
    it in vain, and the asks would be a key of a match gone."""

    def __init__(self, match_id: str) -> None:
        super().__init__(f"match {match_id}: archived before the ask")
        self.match_id = match_id


class RematchPending(Exception):
    """A trim refused: the finished match's rematch's creation is pending (its table asked in
    full, the match not made yet), and the rematch is made from it. Nothing was dropped."""

    def __init__(self, match_id: str) -> None:
        super().__init__(f"match {match_id}: its rematch's creation is pending")
        self.match_id = match_id


class ArchivingStore(Protocol):
    """What an in-memory adapter needs of the in-memory event store it is bound to
    (`famiglia.eventstore.memory_store.InMemoryEventStore`)."""

    def unless_archived(self, match_id: str, write: Callable[[], _T]) -> _T:
        """`write()` under the store's lock, or FinishedMatchArchived for a match trimmed."""
        ...

    def keep_rematches(self, pending: Callable[[str], bool]) -> None:
        """What the store's trim asks, under its lock: whether a match's rematch is pending."""
        ...


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
        loaded it (looked at in that write)."""

    @abstractmethod
    def look(self, match_id: str) -> RematchAsks:
        """Where the rematch stands, asking nothing."""

    @abstractmethod
    def fix_request_id(self, match_id: str, request_id: str, at_ms: int | None = None) -> str:
        """`request_id` as the rematch's creation request id unless one is already fixed; the one
        fixed (the first writer's). The match is pending (`pending`) from `at_ms` (now) until
        `drop_pending`. FinishedMatchArchived, nothing stored, for a match trimmed (as `ask`)."""

    @abstractmethod
    def allow(self, match_id: str, operator: str) -> RematchAsks:
        """Record that `operator` allows the rematch (the latest operator's name kept).
        FinishedMatchArchived, nothing stored, for a match trimmed (as `ask`)."""

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
    """The Redis hash's rules in one process (unit tests, an in-memory store). Bound to the
    in-memory event store its matches are in (`store`), it keeps the rules the Redis scripts keep
    between the asks and the trim, each looked at under the store's lock: a write refuses a match
    trimmed (FinishedMatchArchived), the store's trim a match whose rematch's creation is pending
    (RematchPending). Unbound, it knows of no trim."""

    def __init__(self, ttl_s: float = REMATCH_TTL_S, clock: Callable[[], float] = time.monotonic,
                 store: ArchivingStore | None = None) -> None:
        self._lock = threading.Lock()
        self._ttl_s = ttl_s
        self._clock = clock
        self._asks: dict[str, tuple[float, dict[str, str]]] = {}
        self._pending: dict[str, int] = {}
        self._store = store
        if store is not None:
            store.keep_rematches(self.creation_pending)

    def _live(self, match_id: str, write: Callable[[], _T]) -> _T:
        """`write()`, unless the bound store trimmed the match (FinishedMatchArchived)."""
        if self._store is None:
            return write()
        return self._store.unless_archived(match_id, write)

    def creation_pending(self, match_id: str) -> bool:
        """As `creation_pending` on Redis: pending, and its asks not expired."""
        with self._lock:
            return match_id in self._pending and bool(self._fields(match_id))

    def _fields(self, match_id: str) -> dict[str, str]:
        held = self._asks.get(match_id)
        if held is None or held[0] <= self._clock():
            return {}
        return held[1]

    def _write(self, match_id: str, fields: dict[str, str]) -> None:
        self._asks[match_id] = (self._clock() + self._ttl_s, fields)

    def ask(self, match_id: str, seat: int, table: Collection[int] = (), request_id: str = "",
            at_ms: int | None = None) -> RematchAsks:
        def ask() -> RematchAsks:
            with self._lock:
                before = self._fields(match_id)
                fields = {**before, f"s{seat}": "1"}
                if table and request_id and not fields.get(_RID) and all(f"s{s}" in fields for s in table):
                    fields[_RID] = request_id
                    self._pending.setdefault(match_id, _now_ms() if at_ms is None else at_ms)
                self._write(match_id, fields)
                return dataclasses.replace(_asks(fields), fresh=f"s{seat}" not in before)

        return self._live(match_id, ask)

    def look(self, match_id: str) -> RematchAsks:
        with self._lock:
            return _asks(self._fields(match_id))

    def allow(self, match_id: str, operator: str) -> RematchAsks:
        def allow() -> RematchAsks:
            with self._lock:
                fields = {**self._fields(match_id), _OPERATOR: operator}
                self._write(match_id, fields)
                return _asks(fields)

        return self._live(match_id, allow)

    def fix_request_id(self, match_id: str, request_id: str, at_ms: int | None = None) -> str:
        def fix() -> str:
            with self._lock:
                fields = self._fields(match_id)
                fields = {**fields, _RID: fields.get(_RID) or request_id}
                self._write(match_id, fields)
                self._pending.setdefault(match_id, _now_ms() if at_ms is None else at_ms)
                return fields[_RID]

        return self._live(match_id, fix)

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
    `.keys`): one round trip a call, each write a script on the match's slot that looks at the
    match's stream first (`_LIVE`)."""

    def __init__(self, client: Any, keys: Any, ttl_s: float = REMATCH_TTL_S) -> None:
        self.client = client
        self.keys = keys
        self.ttl_ms = int(ttl_s * 1000)
        self._ask_script = client.register_script(_ASK)
        self._fix_script = client.register_script(_FIX)
        self._allow_script = client.register_script(_ALLOW)

    def _write(self, script: Any, match_id: str, args: list[Any]) -> Any:
        """The script's reply; FinishedMatchArchived for its -1 (trimmed since the caller loaded it)."""
        keys = [self.keys.rematch(match_id), self.keys.rematches_pending(self.keys.partition_of(match_id)),
                self.keys.match_stream(match_id), self.keys.version(match_id)]  # one slot: the match's tag
        reply = script(keys=keys, args=args)
        if isinstance(reply, int) and reply == -1:
            raise FinishedMatchArchived(match_id)
        return reply

    def ask(self, match_id: str, seat: int, table: Collection[int] = (), request_id: str = "",
            at_ms: int | None = None) -> RematchAsks:
        with_table = bool(table and request_id)
        reply = self._write(self._ask_script, match_id,
                            [f"s{seat}", self.ttl_ms, request_id if with_table else "",
                             _now_ms() if at_ms is None else at_ms, match_id,
                             *(f"s{s}" for s in table if with_table)])
        return dataclasses.replace(_asks(_hash(reply[1])), fresh=bool(int(reply[0])))

    def look(self, match_id: str) -> RematchAsks:
        return _asks(_hash(self.client.hgetall(self.keys.rematch(match_id))))

    def allow(self, match_id: str, operator: str) -> RematchAsks:
        return _asks(_hash(self._write(self._allow_script, match_id, [operator, self.ttl_ms])))

    def fix_request_id(self, match_id: str, request_id: str, at_ms: int | None = None) -> str:
        at = _now_ms() if at_ms is None else at_ms
        return _text(self._write(self._fix_script, match_id, [request_id, self.ttl_ms, at, match_id]))

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


def _hash(raw: Any) -> dict[str, str]:
    """A hash as HGETALL answers it: a dict (redis-py's reply) or a script's flat list."""
    if isinstance(raw, dict):
        return {_text(k): _text(v) for k, v in raw.items()}
    flat = [_text(v) for v in raw or ()]
    return dict(zip(flat[::2], flat[1::2], strict=True))
