"""Who asked for a rematch of a finished match, and the request id its creation goes under.

The command service's AskRematch records each person's ask here; once every person of the
table has asked, the first caller to see it fixes the rematch's creation request id (a random
secret, written once: `fix_request_id`) and creates the match under it, so every asker, a
retry, a second replica and a crash between the two writes all find the same rematch, and a
secret rotated meanwhile changes nothing. The request id is a secret, as every creation request
id is (a retried CreateMatch answers with every seat's token): it never leaves the server.

One hash per finished match, beside its match (the match's partition hash tag):

    <prefix>:{p07}:rematch:<match_id>    hash  s<seat> -> "1" (an ask), rid -> the request id

It expires `ttl_s` after its last write (`REMATCH_TTL_S`), and a rematch made is looked up under
it for as long; a match takes a new ask only within a day less of its end
(services/command/rematch.py, `ASKED_WITHIN_S`), so no table begins again once its asks are gone.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

REMATCH_TTL_S = 30 * 86_400
"""How long a finished match's asks (and its rematch's request id) are kept after the last write."""

_RID = "rid"


@dataclass(frozen=True)
class RematchAsks:
    """Where a finished match's rematch stands: the seats that asked, and the creation request id
    once every person had (empty before)."""

    seats: frozenset[int]
    request_id: str = ""
    fresh: bool = False
    """(`ask`'s answer) The seat had not asked before: its ask is news to the table."""


class RematchAsksStore(ABC):
    """The port: the asks of finished matches."""

    @abstractmethod
    def ask(self, match_id: str, seat: int) -> RematchAsks:
        """Record `seat`'s ask (again: nothing new) and answer where the rematch stands."""

    @abstractmethod
    def look(self, match_id: str) -> RematchAsks:
        """Where the rematch stands, asking nothing."""

    @abstractmethod
    def fix_request_id(self, match_id: str, request_id: str) -> str:
        """`request_id` as the rematch's creation request id unless one is already fixed; the one
        fixed (the first writer's)."""


def _asks(fields: dict[str, str]) -> RematchAsks:
    seats = frozenset(int(k[1:]) for k in fields if k.startswith("s") and k[1:].isdigit())
    return RematchAsks(seats, fields.get(_RID, ""))


class InMemoryRematchAsks(RematchAsksStore):
    """The Redis hash's rules in one process (unit tests, an in-memory store)."""

    def __init__(self, ttl_s: float = REMATCH_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._ttl_s = ttl_s
        self._clock = clock
        self._asks: dict[str, tuple[float, dict[str, str]]] = {}

    def _fields(self, match_id: str) -> dict[str, str]:
        held = self._asks.get(match_id)
        if held is None or held[0] <= self._clock():
            return {}
        return held[1]

    def _write(self, match_id: str, fields: dict[str, str]) -> None:
        self._asks[match_id] = (self._clock() + self._ttl_s, fields)

    def ask(self, match_id: str, seat: int) -> RematchAsks:
        with self._lock:
            before = self._fields(match_id)
            fields = {**before, f"s{seat}": "1"}
            self._write(match_id, fields)
            return dataclasses.replace(_asks(fields), fresh=f"s{seat}" not in before)

    def look(self, match_id: str) -> RematchAsks:
        with self._lock:
            return _asks(self._fields(match_id))

    def fix_request_id(self, match_id: str, request_id: str) -> str:
        with self._lock:
            fields = self._fields(match_id)
            fields = {**fields, _RID: fields.get(_RID) or request_id}
            self._write(match_id, fields)
            return fields[_RID]


class RedisRematchAsks(RematchAsksStore):
    """The asks on the event store's Redis client and key layout (`RedisEventStore.client`,
    `.keys`): one round trip a call, a transaction on the match's one key."""

    def __init__(self, client: Any, keys: Any, ttl_s: float = REMATCH_TTL_S) -> None:
        self.client = client
        self.keys = keys
        self.ttl_ms = int(ttl_s * 1000)

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
            wrote, _expired, raw = pipe.execute()
        return wrote, {_text(k): _text(v) for k, v in (raw or {}).items()}

    def ask(self, match_id: str, seat: int) -> RematchAsks:
        added, fields = self._run(match_id, lambda pipe, key: pipe.hset(key, f"s{seat}", "1"))
        return dataclasses.replace(_asks(fields), fresh=bool(added))

    def look(self, match_id: str) -> RematchAsks:
        return _asks(self._run(match_id, None)[1])

    def fix_request_id(self, match_id: str, request_id: str) -> str:
        return _asks(self._run(match_id, lambda pipe, key: pipe.hsetnx(key, _RID, request_id))[1]).request_id


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
