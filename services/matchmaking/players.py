"""Guest players in Redis: who a ticket and a seat belong to.

    mm:player:{<player_id>}   hash   id, name, created_ms, guest       (expires: `guest_ttl_s` after its last use)
    mm:guest:{<hash>}         string RegisterGuest idempotency: SHA-256 of the request id -> player id

Each player is its own hash tag: players are read one by one, never in a script with
a game's keys.

A guest's record expires `guest_ttl_s` after its last use (registering, GetProfile with its
token, a ticket it creates or is invited to, a table proposed with it), each use refreshing the
TTL in the round trip that reads or writes the record; `None` (FAMIGLIA_MM_GUEST_TTL_DAYS=off)
keeps records for good and each use takes a TTL set before off. Nothing else needs the record:
ratings and history live in the read models under the player id, tokens are signed, tickets
and holds carry the id. A record written before TTLs were kept has none until its next use.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

import redis

GUEST_REQUEST_TTL_S = 24 * 3600
GUEST_TTL_S = 180 * 24 * 3600
"""An unused guest's record is dropped after 180 days (FAMIGLIA_MM_GUEST_TTL_DAYS)."""


@dataclass(frozen=True)
class Player:
    player_id: str
    display_name: str
    created_ms: int
    guest: bool = True


class RedisPlayers:
    def __init__(self, client: redis.Redis, guest_ttl_s: int | None = GUEST_TTL_S) -> None:
        self.client = client
        self.guest_ttl_s = guest_ttl_s

    @staticmethod
    def _key(player_id: str) -> str:
        return "mm:player:{" + player_id + "}"

    @staticmethod
    def guest_key(request_id: str) -> str:
        """The key of a RegisterGuest request id: its hash, never the id, which is a secret
        (sent again, it gets the guest's token) that a key's name would keep in clear."""
        return "mm:guest:{" + hashlib.sha256(request_id.encode()).hexdigest() + "}"

    def _touch(self, pipe: redis.client.Pipeline, player_id: str) -> None:
        """Queue the refresh of a guest's lifetime (every record PlayerService writes is a guest's):
        EXPIRE, or with TTLs off PERSIST, so a TTL set before off no longer drops a guest in use."""
        if self.guest_ttl_s is None:
            pipe.persist(self._key(player_id))
        else:
            pipe.expire(self._key(player_id), self.guest_ttl_s)

    def register_guest(self, display_name: str, now_ms: int, request_id: str = "") -> Player:
        """A new guest, or the one a retried request id already made."""
        player_id = "g" + secrets.token_hex(8)
        pipe = self.client.pipeline(transaction=True)  # one slot: the record never lives without its TTL
        pipe.hset(self._key(player_id), mapping={
            "id": player_id, "name": display_name, "created_ms": now_ms, "guest": 1})
        self._touch(pipe, player_id)
        pipe.execute()
        if request_id:
            key = self.guest_key(request_id)
            if not self.client.set(key, player_id, nx=True, ex=GUEST_REQUEST_TTL_S):
                existing = self.get(str(self.client.get(key) or ""), touch=True)
                if existing is not None:
                    self.client.delete(self._key(player_id))
                    return existing
                # The request id names a player no longer there (the key outlived it, or expired
                # between the two reads): it names this one now, so a retry finds it.
                self.client.set(key, player_id, ex=GUEST_REQUEST_TTL_S)
        return Player(player_id, display_name, now_ms)

    def get(self, player_id: str, *, touch: bool = False) -> Player | None:
        """The player, or None (never registered, or expired); `touch`: the guest's own use,
        which refreshes its lifetime in the same round trip."""
        if not player_id:
            return None
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self._key(player_id))
        if touch:
            self._touch(pipe, player_id)
        raw = pipe.execute()[0]
        if not raw:
            return None
        return Player(str(raw["id"]), str(raw["name"]), int(raw["created_ms"]), raw.get("guest") == "1")

    def names(self, player_ids: Iterable[str], *, touch: bool = False) -> dict[str, str]:
        """Display names (the id of a player whose record is gone); `touch`: a table is being
        made with them, which refreshes their lifetimes in the same round trip."""
        ids = list(player_ids)
        pipe = self.client.pipeline(transaction=False)
        for p in ids:
            pipe.hget(self._key(p), "name")
            if touch:
                self._touch(pipe, p)
        replies = pipe.execute()[::2] if touch else pipe.execute()
        return {p: (n or p) for p, n in zip(ids, replies, strict=True)}

    def missing(self, player_ids: Iterable[str], *, touch: bool = False) -> list[str]:
        """The asked ids that are not registered (or expired); `touch`: refresh the others'
        lifetimes in the same round trip (a ticket made with them)."""
        ids = list(player_ids)
        pipe = self.client.pipeline(transaction=False)
        for p in ids:
            pipe.exists(self._key(p))
            if touch:
                self._touch(pipe, p)
        replies = pipe.execute()[::2] if touch else pipe.execute()
        return [p for p, ok in zip(ids, replies, strict=True) if not ok]
