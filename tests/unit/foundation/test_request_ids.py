"""Creation request ids keyed with a service's secret (famiglia.auth.request_ids)."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from famiglia.auth import TokenSigner
from famiglia.auth.request_ids import MIN_SECRET_REQUEST_ID, guessable, guessable_message, private_request_id
from famiglia.auth.tokens import _unb64


def test_a_private_request_id_is_repeatable_with_the_secret_and_differs_without_it() -> None:
    public = "mm:p-some-table"
    assert private_request_id("s3cret", public) == private_request_id("s3cret", public)
    assert private_request_id("another", public) != private_request_id("s3cret", public)
    assert public not in private_request_id("s3cret", public)
    assert private_request_id("s3cret", "mm:p-other-table") != private_request_id("s3cret", public)


@pytest.mark.parametrize("secret", ["", " \n"])
def test_no_secret_no_private_id(secret: str) -> None:
    with pytest.raises(ValueError):
        private_request_id(secret, "t1:0")


@pytest.mark.parametrize("length", [6, 32, 64, 65, 100, 1000])
def test_a_request_id_is_never_a_token_signature_whatever_the_secret_length(length: int) -> None:
    """HMAC hashes a key longer than its 64-byte block with SHA-256, which is the key
    TokenSigner signs with: under a FAMIGLIA_SECRET over 64 bytes, the request id of a text was
    the signature of a token with that text as body, and every token handed out (a player's
    seat token) the request id of its body."""
    secret = ("k3y-" * length)[:length]
    signer = TokenSigner(secret)
    for token in (signer.seat_token("m1", 0, "p9"), signer.player_token("p9"), signer.operator_token("ops")):
        body, sig = token.split(".")
        assert private_request_id(secret, body) != _unb64(sig).hex()
    assert private_request_id(secret, "t1:0") != private_request_id(secret + "!", "t1:0")


@pytest.mark.parametrize("secret", ["s3cret", "0123456789abcdef" * 4])
def test_a_request_id_under_a_secret_of_a_block_or_less_is_what_it_always_was(secret: str) -> None:
    """The matchmaker and the tournament runner find the matches they had created by
    spelling their request ids again: across an upgrade too, for the secrets that never
    collided (up to 64 bytes, such as the generated one or `openssl rand -hex 32`)."""
    assert private_request_id(secret, "mm:p1") == hmac.new(secret.encode(), b"mm:p1", hashlib.sha256).hexdigest()


def test_a_request_id_shorter_than_a_secret_is_guessable_and_an_empty_one_is_none_at_all() -> None:
    """One floor for every request id whose retry hands out tokens (CreateMatch, RegisterGuest);
    the private ids the services derive (64 hex characters) and a UUID clear it."""
    assert not guessable("")
    assert guessable("1") and guessable("r" * (MIN_SECRET_REQUEST_ID - 1))
    assert not guessable("r" * MIN_SECRET_REQUEST_ID)
    assert not guessable(private_request_id("s3cret", "mm:p1"))
    assert str(MIN_SECRET_REQUEST_ID) in guessable_message("the guest's token")
