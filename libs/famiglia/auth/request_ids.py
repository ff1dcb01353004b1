"""Creation request ids that only their service can spell.

A retried `CreateMatch` with the same request id answers with every seat's token, so a
request id is a secret. The matchmaker and the tournament runner derive theirs from
things players can see (a table's ticket ids, a tournament's id and a match's index), so
that a restart finds the match it had created; keyed with the service's secret, the same
derivation stays repeatable for them and cannot be rebuilt by anyone else."""

from __future__ import annotations

import hashlib
import hmac


def private_request_id(secret: str, public_id: str) -> str:
    """`public_id` (repeatable, guessable) keyed with `secret`: repeatable, not guessable."""
    if not secret:
        raise ValueError("a private request id needs the service's secret")
    return hmac.new(secret.encode(), public_id.encode(), hashlib.sha256).hexdigest()
