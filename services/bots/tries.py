"""What the tasks of one bot decision learnt the hard way, shared by every worker process.

A decision is (match, version, seat). A task whose listed command the server refused or failed
on writes that command down, so a task queued again for the same decision (the stall timer, a
Celery retry, a redelivery, on whichever worker) passes over it and plays another listed command
rather than the seeded choice's first fallback again, which refused in the same way at every
re-queue. And each time a task cannot move the seat for a reason no retry cures (the server
cannot show the seat its view, every command tried refused) it counts a failure, so that the
seat is given up after `MAX_FAILURES` (handlers.py, `_give_up`) instead of tried for ever. A
give-up that ended with nothing played (no default, or the default refused or failed on too) is
written down (`given_up`): the dispatcher's stall check queues that decision no more. One whose
default met an outage is not: its decision is still queued again, and the next task tries the
default again.

In Redis beside the match's keys (`<prefix>:{pNN}:bots:tries:<match>:<version>:<seat>`, a hash:
`r:<digest>` per command refused, `failed` the count, `given_up`), gone a day after its last write; in the
process's memory where there is no Redis store (the tests' fakes, an in-memory store). The
record only ever saves a wasted call: Redis away, a task goes on as if it held nothing.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

from famiglia.telemetry import get_logger

log = get_logger("famiglia.bots")

MAX_FAILURES = 3
"""Tasks (Celery's retries included) that may fail at one decision before its seat is given up."""
KEPT_SECONDS = 86_400
"""How long a record outlives its last write (a decision is long settled by then)."""


def digest(command: bytes) -> str:
    """A listed command's name in the record (its serialized bytes' BLAKE2b, 8 bytes)."""
    return hashlib.blake2b(command, digest_size=8).hexdigest()


class DecisionTries:
    """The record in one process's memory (the newest 10,000 decisions)."""

    KEPT = 10_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: OrderedDict[tuple[str, int, int], tuple[set[str], int]] = OrderedDict()
        self._given_up: OrderedDict[tuple[str, int, int], None] = OrderedDict()

    def refused(self, match_id: str, version: int, seat: int) -> frozenset[str]:
        """The digests of the commands refused (or failed on) at this decision so far."""
        with self._lock:
            found = self._records.get((match_id, version, seat))
            return frozenset(found[0]) if found else frozenset()

    def refuse(self, match_id: str, version: int, seat: int, command: bytes) -> None:
        with self._lock:
            refused, failed = self._take((match_id, version, seat))
            refused.add(digest(command))
            self._records[match_id, version, seat] = (refused, failed)

    def fail(self, match_id: str, version: int, seat: int) -> int:
        """Count a failure of a task at this decision: the failures so far, this one included."""
        with self._lock:
            refused, failed = self._take((match_id, version, seat))
            self._records[match_id, version, seat] = (refused, failed + 1)
            return failed + 1

    def failures(self, match_id: str, version: int, seat: int) -> int:
        with self._lock:
            found = self._records.get((match_id, version, seat))
            return found[1] if found else 0

    def give_up(self, match_id: str, version: int, seat: int) -> None:
        """Write down that this decision was given up with nothing played: not queued again."""
        with self._lock:
            self._given_up[match_id, version, seat] = None
            while len(self._given_up) > self.KEPT:
                self._given_up.popitem(last=False)

    def given_up(self, match_id: str, version: int, seat: int) -> bool:
        with self._lock:
            return (match_id, version, seat) in self._given_up

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
            self._given_up.clear()

    def _take(self, key: tuple[str, int, int]) -> tuple[set[str], int]:
        found = self._records.pop(key, None)
        while len(self._records) >= self.KEPT:
            self._records.popitem(last=False)
        return found if found is not None else (set(), 0)


class RedisDecisionTries(DecisionTries):
    """The record in Redis, so every worker process (and the dispatcher) reads the same."""

    def __init__(self, client: Any, keys: Any) -> None:
        super().__init__()
        self.client, self.keys = client, keys

    def key(self, match_id: str, version: int, seat: int) -> str:
        return f"{self.keys.prefix}:{self.keys.tag(self.keys.partition_of(match_id))}:bots:tries:" \
               f"{match_id}:{version}:{seat}"

    def refused(self, match_id: str, version: int, seat: int) -> frozenset[str]:
        try:
            fields = self.client.hkeys(self.key(match_id, version, seat))
        except Exception as exc:  # noqa: BLE001 - Redis away: as if nothing was written down
            log.warning("bot_tries_unread", match_id=match_id, seat=seat, version=version, error=repr(exc)[:200])
            return frozenset()
        names = (f.decode() if isinstance(f, bytes) else f for f in fields)
        return frozenset(name[2:] for name in names if name.startswith("r:"))

    def refuse(self, match_id: str, version: int, seat: int, command: bytes) -> None:
        key = self.key(match_id, version, seat)
        try:
            with self.client.pipeline(transaction=False) as pipe:
                pipe.hset(key, f"r:{digest(command)}", 1)
                pipe.expire(key, KEPT_SECONDS)
                pipe.execute()
        except Exception as exc:  # noqa: BLE001 - Redis away: the next task may try it again, no more
            log.warning("bot_tries_unwritten", match_id=match_id, seat=seat, version=version, error=repr(exc)[:200])

    def fail(self, match_id: str, version: int, seat: int) -> int:
        key = self.key(match_id, version, seat)
        try:
            with self.client.pipeline(transaction=False) as pipe:
                pipe.hincrby(key, "failed", 1)
                pipe.expire(key, KEPT_SECONDS)
                count, _ = pipe.execute()
        except Exception as exc:  # noqa: BLE001 - Redis away: this failure is not counted
            log.warning("bot_tries_unwritten", match_id=match_id, seat=seat, version=version, error=repr(exc)[:200])
            return 0
        return int(count)

    def failures(self, match_id: str, version: int, seat: int) -> int:
        try:
            found = self.client.hget(self.key(match_id, version, seat), "failed")
        except Exception as exc:  # noqa: BLE001 - Redis away: as if none were counted
            log.warning("bot_tries_unread", match_id=match_id, seat=seat, version=version, error=repr(exc)[:200])
            return 0
        return int(found or 0)

    def give_up(self, match_id: str, version: int, seat: int) -> None:
        key = self.key(match_id, version, seat)
        try:
            with self.client.pipeline(transaction=False) as pipe:
                pipe.hset(key, "given_up", 1)
                pipe.expire(key, KEPT_SECONDS)
                pipe.execute()
        except Exception as exc:  # noqa: BLE001 - Redis away: queued again, and given up again
            log.warning("bot_tries_unwritten", match_id=match_id, seat=seat, version=version, error=repr(exc)[:200])

    def given_up(self, match_id: str, version: int, seat: int) -> bool:
        try:
            return bool(self.client.hexists(self.key(match_id, version, seat), "given_up"))
        except Exception as exc:  # noqa: BLE001 - Redis away: as if not given up (queued again)
            log.warning("bot_tries_unread", match_id=match_id, seat=seat, version=version, error=repr(exc)[:200])
            return False

    def clear(self) -> None:  # (a test's; the records expire on their own)
        pass


def tries_of(store: Any) -> DecisionTries:
    """The record beside `store`'s keys when it is a Redis store, else one in memory."""
    client, keys = getattr(store, "client", None), getattr(store, "keys", None)
    if client is not None and keys is not None and hasattr(keys, "partition_of"):
        return RedisDecisionTries(client, keys)
    return DecisionTries()
