"""Which live matches a player sits at: an index beside the event store, for ListMyTurns.

A hint, not the truth: the match's own stream is. The command service adds a match to each
person's entry once its creation is stored, and takes it out once the command that ends it
(its last move, or a cancel) is stored; a crash between the two writes leaves a match that is
over in the index (or, before the add, a live one out of it until the creation is retried),
and the reader, which folds every match it lists, drops what it finds over or gone. Bots'
seats are not indexed.

One sorted set per player, under its own hash tag (a player's matches are in every partition,
so it cannot share a match's slot):

    <prefix>:{pl:<sha256 of the player id, 32 hex>}:live    sorted set: match id -> created (Unix ms)

A sorted set rather than a set, so that a reader bounded to N matches reads the N newest, the
same ones each time, not an arbitrary N of them; `ZADD NX` keeps the first creation's time,
so a creation retried adds nothing. No TTL: every entry leaves when its match ends (or, when
that write was lost, at the next reading).
"""

from __future__ import annotations

import hashlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any


def player_tag(player_id: str) -> str:
    """The hash tag of a player's keys: a digest, since a player id may hold any character
    (braces included) and its own length."""
    return "{pl:" + hashlib.sha256(player_id.encode()).hexdigest()[:32] + "}"


def player_matches_key(prefix: str, player_id: str) -> str:
    return f"{prefix}:{player_tag(player_id)}:live"


class PlayerMatches(ABC):
    """The port: who sits at which live match."""

    @abstractmethod
    def add(self, match_id: str, player_ids: Iterable[str], created_ms: int) -> None:
        """`match_id` to each player's matches; a second add of it changes nothing."""

    @abstractmethod
    def remove(self, match_id: str, player_ids: Iterable[str]) -> None:
        """`match_id` out of each player's matches (none there: nothing)."""

    @abstractmethod
    def newest(self, player_id: str, count: int) -> list[str]:
        """The `count` matches of the player created last, newest first."""

    @abstractmethod
    def drop(self, player_id: str, match_ids: Iterable[str]) -> None:
        """Matches out of one player's: those a reader found over, gone or not the player's."""


class InMemoryPlayerMatches(PlayerMatches):
    """The Redis index's rules in one process (unit tests, an in-memory store)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._matches: dict[str, dict[str, int]] = {}

    def add(self, match_id: str, player_ids: Iterable[str], created_ms: int) -> None:
        with self._lock:
            for player in set(player_ids):
                self._matches.setdefault(player, {}).setdefault(match_id, created_ms)

    def remove(self, match_id: str, player_ids: Iterable[str]) -> None:
        for player in set(player_ids):
            self.drop(player, [match_id])

    def newest(self, player_id: str, count: int) -> list[str]:
        with self._lock:
            held = self._matches.get(player_id, {})
            # As ZREVRANGE orders: by score, then by member, both descending.
            return [m for m, _ms in sorted(held.items(), key=lambda e: (e[1], e[0]), reverse=True)][:max(count, 0)]

    def drop(self, player_id: str, match_ids: Iterable[str]) -> None:
        with self._lock:
            held = self._matches.get(player_id)
            if held is None:
                return
            for match_id in match_ids:
                held.pop(match_id, None)
            if not held:
                del self._matches[player_id]


class RedisPlayerMatches(PlayerMatches):
    """The index on the event store's Redis client and key layout (`RedisEventStore.client`,
    `.keys`): one round trip per call, its commands pipelined (a key each player: no
    transaction, since each may be in another slot of a cluster)."""

    def __init__(self, client: Any, keys: Any) -> None:
        self.client = client
        self.keys = keys

    def key(self, player_id: str) -> str:
        return self.keys.player_matches(player_id)

    def add(self, match_id: str, player_ids: Iterable[str], created_ms: int) -> None:
        players = sorted(set(player_ids))
        if not players:
            return
        pipe = self.client.pipeline(transaction=False)
        for player in players:
            pipe.zadd(self.key(player), {match_id: created_ms}, nx=True)
        pipe.execute()

    def remove(self, match_id: str, player_ids: Iterable[str]) -> None:
        players = sorted(set(player_ids))
        if not players:
            return
        pipe = self.client.pipeline(transaction=False)
        for player in players:
            pipe.zrem(self.key(player), match_id)
        pipe.execute()

    def newest(self, player_id: str, count: int) -> list[str]:
        if count <= 0:
            return []
        return [m.decode() if isinstance(m, bytes) else m
                for m in self.client.zrevrange(self.key(player_id), 0, count - 1)]

    def drop(self, player_id: str, match_ids: Iterable[str]) -> None:
        gone = list(dict.fromkeys(match_ids))
        if gone:
            self.client.zrem(self.key(player_id), *gone)
