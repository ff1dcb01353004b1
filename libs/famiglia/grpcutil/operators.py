"""The one check of an operator token, for the calls that only an operator may make."""

from __future__ import annotations

from famiglia.auth import InvalidToken, TokenSigner
from famiglia.auth.tokens import WrongKind

from .errors import PermissionDenied, Unauthenticated


def operator_of(signer: TokenSigner, token: str | None, what: str) -> str:
    """The operator `token` names. UNAUTHENTICATED without a token or with a forged or expired
    one (`no_token`, `bad_token`), PERMISSION_DENIED for a valid token of another kind, a seat's
    or a player's (`operator_only`); `what` says what the call does, for the message."""
    if not token:
        raise Unauthenticated("no_token", f"{what} needs `authorization: Bearer <operator token>`")
    try:
        return signer.read_operator(token)
    except WrongKind:
        raise PermissionDenied("operator_only", f"only an operator token may {what}") from None
    except InvalidToken as exc:
        raise Unauthenticated("bad_token", str(exc)) from None
