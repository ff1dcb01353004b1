"""HMAC-signed tokens. A seat token names one match and one seat and nothing else, so a
leaked token can act for that seat only; the server keeps no token table."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass


class InvalidToken(Exception):
    pass


@dataclass(frozen=True, slots=True)
class SeatClaim:
    match_id: str
    seat: int
    player_id: str = ""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenSigner:
    def __init__(self, secret: str) -> None:
        if not secret:
            raise ValueError("a token secret is required")
        self._key = hashlib.sha256(secret.encode()).digest()

    def _sign(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())

    def issue(self, claims: dict[str, object]) -> str:
        body = _b64(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode())
        return f"{body}.{self._sign(body)}"

    def read(self, token: str) -> dict[str, object]:
        try:
            body, sig = token.split(".", 1)
        except ValueError:
            raise InvalidToken("malformed token") from None
        if not hmac.compare_digest(sig, self._sign(body)):
            raise InvalidToken("bad token signature")
        try:
            claims = json.loads(_unb64(body))
        except (ValueError, UnicodeDecodeError):
            raise InvalidToken("malformed token body") from None
        if not isinstance(claims, dict):
            raise InvalidToken("malformed token body")
        return claims

    def seat_token(self, match_id: str, seat: int, player_id: str = "") -> str:
        return self.issue({"k": "seat", "m": match_id, "s": seat, "p": player_id})

    def read_seat(self, token: str) -> SeatClaim:
        claims = self.read(token)
        if claims.get("k") != "seat":
            raise InvalidToken("not a seat token")
        m, s, p = claims.get("m"), claims.get("s"), claims.get("p", "")
        if not isinstance(m, str) or not isinstance(s, int) or not isinstance(p, str):
            raise InvalidToken("malformed seat token")
        return SeatClaim(m, s, p)

    def player_token(self, player_id: str) -> str:
        return self.issue({"k": "player", "p": player_id})

    def read_player(self, token: str) -> str:
        claims = self.read(token)
        p = claims.get("p")
        if claims.get("k") != "player" or not isinstance(p, str):
            raise InvalidToken("not a player token")
        return p
