"""Guest players in Redis: who a ticket and a seat belong to.

    mm:player:{<player_id>}   hash   id, name, created_ms, guest
    mm:guest:{<hash>}         string RegisterGuest idempotency: SHA-256 of the request id -> player id

Each player is its own hash tag: players are read one by one, never in a script with
a game's keys.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

import redis

GUEST_REQUEST_TTL_S = 24 * 3600


@dataclass(frozen=True)
class Player:
    player_id: str
    display_name: str
    created_ms: int
    guest: bool = True


class RedisPlayers:
    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    @staticmethod
    def _key(player_id: str) -> str:
        return "mm:player:{" + player_id + "}"

    @staticmethod
    def guest_key(request_id: str) -> str:
        """The key of a RegisterGuest request id: its hash, never the id, which is a secret
        (sent again, it gets the guest's token) that a key's name would keep in clear."""
        return "mm:guest:{" + hashlib.sha256(request_id.encode()).hexdigest() + "}"

    def register_guest(self, display_name: str, now_ms: int, request_id: str = "") -> Player:
        """A new guest, or the one a retried request id already made."""
        player_id = "g" + secrets.token_hex(8)
        self.client.hset(self._key(player_id), mapping={
            "id": player_id, "name": display_name, "created_ms": now_ms, "guest": 1})
        if request_id:
            key = self.guest_key(request_id)
            if not self.client.set(key, player_id, nx=True, ex=GUEST_REQUEST_TTL_S):
                existing = self.get(str(self.client.get(key) or ""))
                if existing is not None:
                    self.client.delete(self._key(player_id))
                    return existing
                # The request id names a player no longer there (the key outlived it, or expired
                # between the two reads): it names this one now, so a retry finds it.
                self.client.set(key, player_id, ex=GUEST_REQUEST_TTL_S)
        return Player(player_id, display_name, now_ms)

    def get(self, player_id: str) -> Player | None:
        if not player_id:
            return None
        raw = self.client.hgetall(self._key(player_id))
        if not raw:
            return None
        return Player(str(raw["id"]), str(raw["name"]), int(raw["created_ms"]), raw.get("guest") == "1")

    def names(self, player_ids: Iterable[str]) -> dict[str, str]:
        ids = list(player_ids)
        pipe = self.client.pipeline(transaction=False)
        for p in ids:
            pipe.hget(self._key(p), "name")
        return {p: (n or p) for p, n in zip(ids, pipe.execute(), strict=True)}

    def missing(self, player_ids: Iterable[str]) -> list[str]:
        """The asked ids that are not registered."""
        ids = list(player_ids)
        pipe = self.client.pipeline(transaction=False)
        for p in ids:
            pipe.exists(self._key(p))
        return [p for p, ok in zip(ids, pipe.execute(), strict=True) if not ok]
