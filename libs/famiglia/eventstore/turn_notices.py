"""Turn notifications: a stream per player of "your turn" and "match over" notices, beside the
event store, so a client (GameService.WatchMyTurns) or a push gateway learns a player is asked
in any of its matches without polling them.

The bots' dispatcher writes them (services/bots/notices.py decides who is told what); readers
only read. Per player, under the player's own hash tag (`player_matches.player_tag`, as its
live matches), so a player's keys share a cluster slot:

    <prefix>:{pl:<digest>}:notify                  stream, capped ~MAXLEN, TTL refreshed on write
    <prefix>:{pl:<digest>}:told:<match id>:<seat>   "<asked at>:<kind rank>", same TTL: what was told

An entry's fields (bytes, UTF-8): match_id, game_id, seat, kind (`your_turn` | `match_over`, told
by the dispatcher; `rematch_asked` | `rematch_made`, posted by the command service: `POSTED`),
version (the match's, as GetView's), deadline_ms (the seat's turn clock in Unix ms; absent
without one) and at_ms (when the match moved so, Unix ms, the event's time).

A notice is written at most once per told mark: one Lua script reads the mark, writes the entry
and the mark together. A seat's ask is known by where it began (`asked_at`), a match's
end by kind: a dispatcher that folds a match again (a restart, a second dispatcher) offers the
same notices again and writes nothing more. A mark outlives what it stops: the dispatcher
offers no notice of an ask begun, or a match ended, more than STALE_SECONDS ago (a match idle
for a week, folded again after a restart, tells nothing again).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .player_matches import player_tag

YOUR_TURN = "your_turn"
MATCH_OVER = "match_over"
KINDS = (YOUR_TURN, MATCH_OVER)
"""The kinds the dispatcher tells once a mark (`tell`), in the order a mark ranks them."""
REMATCH_ASKED = "rematch_asked"
REMATCH_MADE = "rematch_made"
POSTED = (REMATCH_ASKED, REMATCH_MADE)
"""The kinds the command service posts (`post`), no mark: a finished match's rematch (AskRematch),
`match_id` the finished match, `seat` the player's seat there."""

#: Entries a player's stream keeps (XADD MAXLEN ~): its newest; a reader further behind starts over.
MAXLEN = 200
#: Seconds a player's stream and told marks live after their last write (7 days).
TTL_SECONDS = 7 * 24 * 3600
#: An ask that began (a match that ended) longer ago than this is not told (services/bots/notices.py):
#: told when it began, its mark may be gone since (TTL_SECONDS, a day's margin for the hosts'
#: clocks); never told, it is a week old, news to nobody. So no mark's expiry tells anything twice.
STALE_SECONDS = TTL_SECONDS - 24 * 3600

_TELL = """
local told = redis.call('GET', KEYS[2])
local at, rank = tonumber(ARGV[1]), tonumber(ARGV[2])
if told then
  local v, r = string.match(told, '^(%d+):(%d+)$')
  if v and (tonumber(r) >= 1 or (rank == 0 and at <= tonumber(v))) then
    return false
  end
end
redis.call('SET', KEYS[2], ARGV[1] .. ':' .. ARGV[2], 'EX', ARGV[4])
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], '*', unpack(ARGV, 5))
redis.call('EXPIRE', KEYS[1], ARGV[4])
return id
"""
"""KEYS: the player's stream, the (match, seat) told mark. ARGV: asked_at, kind rank (0 your
turn, 1 over), maxlen, ttl, then the entry's field/value pairs. A mark of the match's end
stops everything; a your-turn mark stops an ask that began no later than it."""


def notify_key(prefix: str, player_id: str) -> str:
    return f"{prefix}:{player_tag(player_id)}:notify"


def told_key(prefix: str, player_id: str, match_id: str, seat: int) -> str:
    return f"{prefix}:{player_tag(player_id)}:told:{match_id}:{seat}"


@dataclass(frozen=True)
class TurnNotice:
    """One notice to one player about one of its seats."""

    player_id: str
    match_id: str
    game_id: str
    seat: int
    kind: str
    version: int
    deadline_ms: int = 0
    at_ms: int = 0
    asked_at: int = 0
    """What makes it the same notice again: where the seat's ask began, the first seq of the
    command after which it stands (a match's end: its version). Not written in the entry."""

    def fields(self) -> dict[str, str]:
        out = {"match_id": self.match_id, "game_id": self.game_id, "seat": str(self.seat), "kind": self.kind,
               "version": str(self.version), "at_ms": str(self.at_ms)}
        if self.deadline_ms:
            out["deadline_ms"] = str(self.deadline_ms)
        return out


@dataclass(frozen=True)
class StoredNotice:
    """A notice as read back, with its stream entry id (the reader's cursor)."""

    id: str
    match_id: str
    game_id: str
    seat: int
    kind: str
    version: int
    deadline_ms: int
    at_ms: int


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def stored(entry_id: Any, fields: dict[Any, Any]) -> StoredNotice:
    f = {_text(k): _text(v) for k, v in fields.items()}
    return StoredNotice(_text(entry_id), f.get("match_id", ""), f.get("game_id", ""), int(f.get("seat", "0")),
                        f.get("kind", ""), int(f.get("version", "0")), int(f.get("deadline_ms", "0")),
                        int(f.get("at_ms", "0")))


def _rank(kind: str) -> int:
    return KINDS.index(kind)


class TurnNotices(ABC):
    """The port: the dispatcher tells, WatchMyTurns reads."""

    @abstractmethod
    def tell(self, notices: Sequence[TurnNotice]) -> int:
        """Write the notices not told yet (their marks say); how many were written."""

    @abstractmethod
    def post(self, notices: Sequence[TurnNotice]) -> None:
        """Write each notice (a `POSTED` kind) to its player's stream, no told mark: the caller
        posts a notice once what it tells happened (a seat's first ask for a rematch, a rematch
        made), and a crash between the two loses it rather than repeating it."""

    @abstractmethod
    def read(self, player_id: str, after_id: str = "", count: int = 100) -> list[StoredNotice]:
        """The player's notices after `after_id` ("": from the oldest kept), oldest first."""

    @abstractmethod
    def wait(self, player_id: str, after_id: str, timeout_ms: int) -> list[StoredNotice]:
        """The notices after `after_id`, waiting up to `timeout_ms` for one ([] then)."""

    @abstractmethod
    def newest(self, player_id: str) -> tuple[str, int]:
        """The newest notice's id ("" for none) and the store's clock in Unix ms."""


def _told_before(told: tuple[int, int] | None, notice: TurnNotice) -> bool:
    """The script's rule, in Python (the in-memory store)."""
    if told is None:
        return False
    at, rank = told
    return rank >= 1 or (_rank(notice.kind) == 0 and notice.asked_at <= at)


class InMemoryTurnNotices(TurnNotices):
    """The Redis layout's rules in one process (unit tests, an in-memory stack)."""

    def __init__(self, maxlen: int = MAXLEN) -> None:
        self.maxlen = maxlen
        self._changed = threading.Condition()
        self._streams: dict[str, list[StoredNotice]] = {}
        self._told: dict[tuple[str, str, int], tuple[int, int]] = {}
        self._last = (0, 0)

    def _next_id(self) -> str:
        ms = int(time.time() * 1000)
        last_ms, n = self._last
        self._last = (ms, 0) if ms > last_ms else (last_ms, n + 1)
        return f"{self._last[0]}-{self._last[1]}"

    def tell(self, notices: Sequence[TurnNotice]) -> int:
        written = 0
        with self._changed:
            for n in notices:
                mark = (n.player_id, n.match_id, n.seat)
                if _told_before(self._told.get(mark), n):
                    continue
                self._told[mark] = (n.asked_at, _rank(n.kind))
                stream = self._streams.setdefault(n.player_id, [])
                stream.append(StoredNotice(self._next_id(), n.match_id, n.game_id, n.seat, n.kind, n.version,
                                           n.deadline_ms, n.at_ms))
                del stream[:-self.maxlen]
                written += 1
            if written:
                self._changed.notify_all()
        return written

    def post(self, notices: Sequence[TurnNotice]) -> None:
        with self._changed:
            for n in notices:
                stream = self._streams.setdefault(n.player_id, [])
                stream.append(StoredNotice(self._next_id(), n.match_id, n.game_id, n.seat, n.kind, n.version,
                                           n.deadline_ms, n.at_ms))
                del stream[:-self.maxlen]
            if notices:
                self._changed.notify_all()

    def read(self, player_id: str, after_id: str = "", count: int = 100) -> list[StoredNotice]:
        after = _key(after_id) if after_id else (-1, -1)
        with self._changed:
            return [n for n in self._streams.get(player_id, []) if _key(n.id) > after][:count]

    def wait(self, player_id: str, after_id: str, timeout_ms: int) -> list[StoredNotice]:
        with self._changed:
            self._changed.wait_for(lambda: self.read(player_id, after_id, 1), timeout=max(timeout_ms, 0) / 1000)
            return self.read(player_id, after_id)

    def newest(self, player_id: str) -> tuple[str, int]:
        with self._changed:
            stream = self._streams.get(player_id, [])
            return (stream[-1].id if stream else ""), int(time.time() * 1000)


def _key(entry_id: str) -> tuple[int, int]:
    ms, _, n = entry_id.partition("-")
    return int(ms), int(n or 0)


class RedisTurnNotices(TurnNotices):
    """On the event store's Redis client and prefix (`RedisEventStore.client`, `.keys.prefix`)."""

    def __init__(self, client: Any, prefix: str, *, maxlen: int = MAXLEN, ttl_seconds: int = TTL_SECONDS) -> None:
        self.client, self.prefix = client, prefix
        self.maxlen, self.ttl_seconds = maxlen, ttl_seconds
        self._script = client.register_script(_TELL)

    def tell(self, notices: Sequence[TurnNotice]) -> int:
        """One pipelined round trip (no transaction: each player may be in another slot): EVALSHA
        straight into it, as `holds.py` does (redis-py's Script asks SCRIPT EXISTS first, one more
        round trip each batch). A NOSCRIPT (Redis restarted) fails every one alike: loaded, resent
        (after a failover, twice: `famiglia.redis_clients.load_script`)."""
        if not notices:
            return 0
        from redis.exceptions import NoScriptError  # the Redis adapter's alone (the in-memory one needs none)

        from famiglia.redis_clients import LOADS, load_script, script_lost

        for attempt in range(LOADS + 1):
            pipe = self.client.pipeline(transaction=False)
            for n in notices:
                args: list[Any] = [n.asked_at, _rank(n.kind), self.maxlen, self.ttl_seconds]
                for name, value in n.fields().items():
                    args += [name, value]
                pipe.evalsha(self._script.sha, 2, notify_key(self.prefix, n.player_id),
                             told_key(self.prefix, n.player_id, n.match_id, n.seat), *args)
            try:
                return sum(1 for reply in pipe.execute() if reply)
            except NoScriptError as exc:
                if attempt == LOADS:
                    raise script_lost(exc) from exc
                load_script(self.client, self._script, again=attempt > 0)
        return 0

    def post(self, notices: Sequence[TurnNotice]) -> None:
        """One pipelined round trip: each entry added (MAXLEN ~) and its stream's TTL refreshed, as
        `tell` writes them."""
        if not notices:
            return
        pipe = self.client.pipeline(transaction=False)
        for n in notices:
            key = notify_key(self.prefix, n.player_id)
            pipe.xadd(key, n.fields(), maxlen=self.maxlen, approximate=True)
            pipe.expire(key, self.ttl_seconds)
        pipe.execute()

    def read(self, player_id: str, after_id: str = "", count: int = 100) -> list[StoredNotice]:
        if after_id and _key(after_id) == (2**64 - 1, 2**64 - 1):  # Redis refuses a range past the last id
            return []
        rows = self.client.xrange(notify_key(self.prefix, player_id), min=f"({after_id}" if after_id else "-",
                                  count=count)
        return [stored(eid, fields) for eid, fields in rows or ()]

    def wait(self, player_id: str, after_id: str, timeout_ms: int) -> list[StoredNotice]:
        """XREAD BLOCK from the explicit id: a notice written between a read and this call is
        never missed. A non-positive timeout is a plain read."""
        if timeout_ms <= 0:
            return self.read(player_id, after_id)
        reply = self.client.xread({notify_key(self.prefix, player_id): after_id or "0-0"}, block=timeout_ms)
        return [stored(eid, fields) for eid, fields in reply[0][1]] if reply else []

    def newest(self, player_id: str) -> tuple[str, int]:
        pipe = self.client.pipeline(transaction=False)
        pipe.xrevrange(notify_key(self.prefix, player_id), count=1)
        pipe.time()
        top, (seconds, micros) = pipe.execute()
        return (_text(top[0][0]) if top else ""), int(seconds) * 1000 + int(micros) // 1000


def turn_notices_of(store: Any) -> TurnNotices:
    """The notices beside `store`: on its Redis when it has one, else in memory."""
    client, keys = getattr(store, "client", None), getattr(store, "keys", None)
    if client is not None and keys is not None:
        return RedisTurnNotices(client, keys.prefix)
    return InMemoryTurnNotices()
