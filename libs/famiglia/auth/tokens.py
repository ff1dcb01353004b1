"""HMAC-signed tokens. A seat token names one match and one seat and nothing else, so a
leaked token can act for that seat only; the server keeps no token table.

Kinds (claim `k`): `seat` (one seat of one match), `player` (one player) and `operator`
(operator actions such as ReplayService.ImportMatch, or a CreateMatch naming players or a
tournament; minted from the deployment's secret
by the CLI, and short-lived: it carries an expiry, claim `x`, in unix seconds).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

OPERATOR_TTL_S = 3600
"""How long an operator token minted without an explicit ttl stays valid."""


class InvalidToken(Exception):
    pass


class WrongKind(InvalidToken):
    """A well-signed token of another kind (a seat token where an operator token is needed)."""


@dataclass(frozen=True, slots=True)
class SeatClaim:
    match_id: str
    seat: int
    player_id: str = ""
    bot: bool = False
    """Minted by the bots service for its own play (`TokenSigner.bot_seat_token`): the one
    kind of token a seat whose player left (`seat_left`) still takes commands from."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _token_key(secret: str) -> bytes:
    """The tokens' own key: nothing else keys an HMAC with it, nor with a secret over 64 bytes
    as it is, which HMAC would hash into this very key (famiglia.auth.request_ids)."""
    if not secret.strip():  # blank: a key anyone could guess
        raise ValueError("a token secret is required")
    return hashlib.sha256(secret.encode()).digest()


class TokenSigner:
    """Signs with `secret`; reads tokens signed with it or with one of `accepted`: the secrets of
    a rollover (docs/operations.md, "Rotating the secret"), so tokens given out before it (the
    seat tokens of matches in play, guests' player tokens) keep working while both are set."""

    def __init__(self, secret: str, accepted: Sequence[str] = ()) -> None:
        self._key = _token_key(secret)
        self._accepted = tuple(key for key in dict.fromkeys(_token_key(a) for a in accepted) if key != self._key)

    def _sign(self, body: str, key: bytes | None = None) -> str:
        return _b64(hmac.new(key or self._key, body.encode(), hashlib.sha256).digest())

    def _signed(self, body: str, sig: str) -> bool:
        if hmac.compare_digest(sig, self._sign(body)):
            return True
        return any(hmac.compare_digest(sig, self._sign(body, key)) for key in self._accepted)

    def issue(self, claims: dict[str, object]) -> str:
        body = _b64(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode())
        return f"{body}.{self._sign(body)}"

    def read(self, token: str) -> dict[str, object]:
        # A token is base64url and a dot: anything else (non-ASCII text, which compare_digest
        # refuses with a TypeError) reads as a bad token, never as a server error.
        if not isinstance(token, str) or not token.isascii():
            raise InvalidToken("malformed token")
        try:
            body, sig = token.split(".", 1)
        except ValueError:
            raise InvalidToken("malformed token") from None
        if not self._signed(body, sig):
            raise InvalidToken("bad token signature")
        try:
            claims = json.loads(_unb64(body))
        except (ValueError, UnicodeDecodeError):
            raise InvalidToken("malformed token body") from None
        if not isinstance(claims, dict):
            raise InvalidToken("malformed token body")
        return claims

    def _of_kind(self, token: str, kind: str) -> dict[str, object]:
        claims = self.read(token)
        if claims.get("k") != kind:
            raise WrongKind(f"not {'an' if kind[0] in 'aeiou' else 'a'} {kind} token")
        return claims

    def seat_token(self, match_id: str, seat: int, player_id: str = "") -> str:
        return self.issue({"k": "seat", "m": match_id, "s": seat, "p": player_id})

    def bot_seat_token(self, match_id: str, seat: int) -> str:
        """The bots service's own token of a seat: it differs from every token a client holds
        (a seat's player who left must not play on with the token it was given)."""
        return self.issue({"k": "seat", "m": match_id, "s": seat, "p": "", "b": 1})

    def read_seat(self, token: str) -> SeatClaim:
        claims = self._of_kind(token, "seat")
        m, s, p, b = claims.get("m"), claims.get("s"), claims.get("p", ""), claims.get("b", 0)
        if not isinstance(m, str) or not isinstance(s, int) or not isinstance(p, str) or b not in (0, 1):
            raise InvalidToken("malformed seat token")
        return SeatClaim(m, s, p, bool(b))

    def player_token(self, player_id: str) -> str:
        return self.issue({"k": "player", "p": player_id})

    def read_player(self, token: str) -> str:
        p = self._of_kind(token, "player").get("p")
        if not isinstance(p, str):
            raise InvalidToken("not a player token")
        return p

    def operator_token(self, operator: str = "operator", *, ttl_s: float = OPERATOR_TTL_S,
                       now: float | None = None) -> str:
        """A token for operator actions (ImportMatch), valid for `ttl_s` seconds."""
        if ttl_s <= 0:
            raise ValueError("an operator token needs a positive ttl")
        issued = time.time() if now is None else now
        return self.issue({"k": "operator", "o": operator, "x": int(issued + ttl_s)})

    def read_operator(self, token: str, *, now: float | None = None) -> str:
        """The operator's name; InvalidToken when forged, expired or malformed, WrongKind for
        a valid token of another kind."""
        claims = self._of_kind(token, "operator")
        name, expires = claims.get("o"), claims.get("x")
        if not isinstance(name, str) or not isinstance(expires, int) or isinstance(expires, bool):
            raise InvalidToken("malformed operator token")
        if (time.time() if now is None else now) >= expires:
            raise InvalidToken("operator token expired")
        return name
