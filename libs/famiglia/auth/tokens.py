"""HMAC-signed tokens. A seat token names one match and one seat and nothing else, so a
leaked token can act for that seat only; the server keeps no token table.

Kinds (claim `k`): `seat` (one seat of one match), `player` (one player) and `operator`
(operator actions such as ReplayService.ImportMatch, or a CreateMatch naming players or a
tournament; minted from the deployment's secret
by the CLI, and short-lived: it carries an expiry, claim `x`, in unix seconds).

An operator token is read only by the reader's own secret, never by a rollover's accepted one:
seat and player tokens were handed out and must keep working through a rollover, but operator
tokens are minted per call, and the old secret must stop granting operator rights (cancel,
import, sweep, create naming players) as soon as a replica signs with the new one, not days
later when the rollover ends. So that a rolling restart stays safe, whoever mints one during a
rollover signs it with each of its secrets (`body.sig.sig`): a replica on either side of the
roll finds its own secret's signature.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

OPERATOR_TTL_S = 3600
"""How long an operator token minted without an explicit ttl stays valid."""


MAX_ACCEPTED = 3
"""Accepted secrets an operator token is signed with besides the secret (a rollover has one)."""


_SIGNATURE = re.compile(r"[A-Za-z0-9_-]{43}")
"""One signature as `_sign` writes it: a SHA-256 HMAC, base64url without padding."""


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
    seat tokens of matches in play, guests' player tokens) keep working while both are set.
    Operator tokens excepted: read by `secret` only, signed by every one (module docstring)."""

    def __init__(self, secret: str, accepted: Sequence[str] = ()) -> None:
        self._key = _token_key(secret)
        self._accepted = tuple(key for key in dict.fromkeys(_token_key(a) for a in accepted) if key != self._key)

    def _sign(self, body: str, key: bytes | None = None) -> str:
        return _b64(hmac.new(key or self._key, body.encode(), hashlib.sha256).digest())

    def _signed_by(self, body: str, sigs: Sequence[str], key: bytes) -> bool:
        expected = self._sign(body, key)
        return any(hmac.compare_digest(sig, expected) for sig in sigs)

    def issue(self, claims: dict[str, object]) -> str:
        body = _b64(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode())
        return f"{body}.{self._sign(body)}"

    def read(self, token: str) -> dict[str, object]:
        return self._verified(token)[0]

    def _verified(self, token: str) -> tuple[dict[str, object], bool]:
        """The claims, and whether `secret` signed them (not only an accepted one)."""
        # A token is base64url and a dot: anything else (non-ASCII text, which compare_digest
        # refuses with a TypeError) reads as a bad token, never as a server error.
        if not isinstance(token, str) or not token.isascii():
            raise InvalidToken("malformed token")
        body, _, signed = token.partition(".")
        sigs = signed.split(".")
        if not signed or len(sigs) > 1 + MAX_ACCEPTED:
            raise InvalidToken("malformed token")
        # Each of several a signature, once: a segment no secret writes (empty, a dot too many)
        # or one twice is a spelling no minter makes, which one signature never had either.
        if len(sigs) > 1 and (len(set(sigs)) < len(sigs) or not all(_SIGNATURE.fullmatch(s) for s in sigs)):
            raise InvalidToken("malformed token")
        by_secret = self._signed_by(body, sigs, self._key)
        if not by_secret and not any(self._signed_by(body, sigs, key) for key in self._accepted):
            raise InvalidToken("bad token signature")
        try:
            claims = json.loads(_unb64(body))
        except (ValueError, UnicodeDecodeError):
            raise InvalidToken("malformed token body") from None
        if not isinstance(claims, dict):
            raise InvalidToken("malformed token body")
        if len(sigs) > 1 and claims.get("k") != "operator":  # one token, one spelling: seat tokens are cache keys
            raise InvalidToken("malformed token")
        return claims, by_secret

    def _of_kind(self, token: str, kind: str) -> dict[str, object]:
        return self._verified_kind(token, kind)[0]

    def _verified_kind(self, token: str, kind: str) -> tuple[dict[str, object], bool]:
        claims, by_secret = self._verified(token)
        if claims.get("k") != kind:
            raise WrongKind(f"not {'an' if kind[0] in 'aeiou' else 'a'} {kind} token")
        return claims, by_secret

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
        """A token for operator actions (ImportMatch), valid for `ttl_s` seconds, signed with the
        secret and each accepted one: a reader takes it by its own secret alone (`read_operator`),
        which during a rolling restart is either of them."""
        if ttl_s <= 0:
            raise ValueError("an operator token needs a positive ttl")
        issued = time.time() if now is None else now
        token = self.issue({"k": "operator", "o": operator, "x": int(issued + ttl_s)})
        body = token.partition(".")[0]
        return ".".join([token, *(self._sign(body, key) for key in self._accepted[:MAX_ACCEPTED])])

    def read_operator(self, token: str, *, now: float | None = None) -> str:
        """The operator's name; InvalidToken when forged, expired, malformed or signed with a
        rollover's accepted secret alone (the old one, once this replica signs with the new),
        WrongKind for a valid token of another kind."""
        claims, by_secret = self._verified_kind(token, "operator")
        if not by_secret:
            raise InvalidToken("operator token not signed with this server's own secret (FAMIGLIA_SECRET): "
                               "a rollover's accepted secret grants no operator rights")
        name, expires = claims.get("o"), claims.get("x")
        if not isinstance(name, str) or not isinstance(expires, int) or isinstance(expires, bool):
            raise InvalidToken("malformed operator token")
        if (time.time() if now is None else now) >= expires:
            raise InvalidToken("operator token expired")
        return name
