"""Creation request ids that only their service can spell.

A retried `CreateMatch` with the same request id answers with every seat's token, so a
request id is a secret. The matchmaker and the tournament runner derive theirs from
things players can see (a table's ticket ids, a tournament's id and a match's index), so
that a restart finds the match it had created; keyed with the service's secret, the same
derivation stays repeatable for them and cannot be rebuilt by anyone else.

The key is never the tokens' key (`TokenSigner`'s, SHA-256 of the secret): HMAC hashes a key
longer than its 64-byte block with SHA-256 first, so keyed with a longer secret as it is, a
request id was the signature of a token whose body is the same text. Such a secret keys request
ids with a hash of its own (`_key`); a secret of up to 64 bytes (the generated one, `openssl
rand -hex 32`) keys them as it always did, so the ids stay those of the matches already made."""

from __future__ import annotations

import hashlib
import hmac

_BLOCK = hashlib.sha256().block_size
_PURPOSE = b"famiglia request id key\0"


MIN_SECRET_REQUEST_ID = 16
"""A request id sent again answers with what the first request got (a creation's every seat
token, a guest's player token), so one anybody could guess ("1", "retry") would hand a stranger
the match or the guest: 16 characters at least (a UUID's hex has 32)."""


def guessable(request_id: str) -> bool:
    """True for a request id too short to be a secret (an empty one asks for no retry at all)."""
    return 0 < len(request_id) < MIN_SECRET_REQUEST_ID


def guessable_message(retry_gets: str) -> str:
    """The refusal's text for a `guessable` request id whose retry answers with `retry_gets`."""
    return (f"request_id is a secret (a retry gets {retry_gets}): "
            f"at least {MIN_SECRET_REQUEST_ID} characters, such as a UUID")


def _key(secret: str) -> bytes:
    """The HMAC key of request ids: the secret when HMAC takes it as it is (at most a block),
    else SHA-256 of it under this purpose's label: never SHA-256 of the bare secret, which is
    what HMAC would make of it, and the tokens' key."""
    raw = secret.encode()
    return raw if len(raw) <= _BLOCK else hashlib.sha256(_PURPOSE + raw).digest()


def private_request_id(secret: str, public_id: str) -> str:
    """`public_id` (repeatable, guessable) keyed with `secret`: repeatable, not guessable."""
    if not secret.strip():
        raise ValueError("a private request id needs the service's secret")
    return hmac.new(_key(secret), public_id.encode(), hashlib.sha256).hexdigest()
