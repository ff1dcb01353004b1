"""Seat tokens: signed, bound to one match and one seat."""

from __future__ import annotations

import pytest

from famiglia.auth import InvalidToken, TokenSigner
from famiglia.auth.tokens import WrongKind


def test_a_seat_token_names_its_match_and_seat() -> None:
    signer = TokenSigner("s3cret")
    claim = signer.read_seat(signer.seat_token("m1", 3, "p9"))
    assert (claim.match_id, claim.seat, claim.player_id) == ("m1", 3, "p9")


def test_a_token_signed_with_another_secret_is_refused() -> None:
    token = TokenSigner("one").seat_token("m1", 0)
    with pytest.raises(InvalidToken):
        TokenSigner("two").read_seat(token)


@pytest.mark.parametrize("token", ["", "abc", "a.b", "....", "eyJ9.x"])
def test_malformed_tokens_are_refused(token: str) -> None:
    with pytest.raises(InvalidToken):
        TokenSigner("k").read_seat(token)


def test_a_tampered_body_is_refused() -> None:
    signer = TokenSigner("k")
    body, sig = signer.seat_token("m1", 0).split(".")
    other_body = signer.seat_token("m1", 1).split(".")[0]
    with pytest.raises(InvalidToken):
        signer.read_seat(f"{other_body}.{sig}")
    assert body != other_body


def test_a_player_token_is_not_a_seat_token() -> None:
    signer = TokenSigner("k")
    with pytest.raises(InvalidToken):
        signer.read_seat(signer.player_token("p1"))
    assert signer.read_player(signer.player_token("p1")) == "p1"


@pytest.mark.parametrize("token", ["x.é", "é.x", "é", "abc.\u00ff", "\u2603.\u2603", "a\udcff.b"])
def test_non_ascii_tokens_are_invalid_tokens_for_every_kind(token: str) -> None:
    signer = TokenSigner("k")
    for read in (signer.read_seat, signer.read_player, signer.read_operator):
        with pytest.raises(InvalidToken):
            read(token)


def test_an_operator_token_is_only_an_operator_token_and_expires() -> None:
    signer = TokenSigner("k")
    token = signer.operator_token("ops", ttl_s=10, now=100.0)
    assert signer.read_operator(token, now=109.0) == "ops"
    with pytest.raises(InvalidToken, match="expired"):
        signer.read_operator(token, now=110.0)
    for read in (signer.read_seat, signer.read_player):
        with pytest.raises(InvalidToken):
            read(token)
    with pytest.raises(InvalidToken):
        signer.read_operator(signer.seat_token("m1", 0))
    with pytest.raises(InvalidToken):
        TokenSigner("other").read_operator(token, now=101.0)


def test_a_token_of_one_kind_is_never_read_as_another_even_where_its_claims_would_fit() -> None:
    """A seat token carries its player's id in the claim a player token has: only the kind
    keeps it from acting as that player (and a player token from acting for a seat)."""
    signer = TokenSigner("k")
    seat = signer.seat_token("m1", 0, "p9")
    with pytest.raises(WrongKind):
        signer.read_player(seat)
    with pytest.raises(WrongKind):
        signer.read_operator(seat)
    with pytest.raises(WrongKind):
        signer.read_seat(signer.player_token("p9"))
    with pytest.raises(WrongKind):
        signer.read_player(signer.operator_token("p9"))


def test_a_signature_changed_anywhere_is_refused() -> None:
    signer = TokenSigner("k")
    body, sig = signer.seat_token("m1", 0).split(".")
    for at in range(len(sig)):
        forged = sig[:at] + ("A" if sig[at] != "A" else "B") + sig[at + 1:]
        with pytest.raises(InvalidToken):
            signer.read_seat(f"{body}.{forged}")


@pytest.mark.parametrize("secret", ["", " ", "\t\n"])
def test_a_signer_needs_a_secret(secret: str) -> None:
    """An empty (or blank) secret would sign tokens anyone can forge: refused, not used."""
    with pytest.raises(ValueError):
        TokenSigner(secret)


@pytest.mark.parametrize("ttl_s", [0, -1])
def test_an_operator_token_needs_a_positive_ttl(ttl_s: float) -> None:
    with pytest.raises(ValueError):
        TokenSigner("k").operator_token("ops", ttl_s=ttl_s, now=100.0)


def test_a_rollover_reads_the_tokens_of_both_secrets_and_signs_with_the_new_one_only() -> None:
    """docs/operations.md, "Rotating the secret": while FAMIGLIA_SECRET_ACCEPTED holds the old
    secret, the seat tokens of matches in play and guests' player tokens still work; new tokens
    are the new secret's, so they keep working once the old one is dropped."""
    old, new = TokenSigner("old"), TokenSigner("new", accepted=["old"])
    assert new.read_seat(old.seat_token("m1", 2)).seat == 2
    assert new.read_player(old.player_token("p1")) == "p1"
    minted = new.seat_token("m1", 0)
    assert TokenSigner("new").read_seat(minted).seat == 0
    with pytest.raises(InvalidToken):
        TokenSigner("old").read_seat(minted)
    with pytest.raises(InvalidToken):  # a third secret is not read
        new.read_seat(TokenSigner("other").seat_token("m1", 0))
    with pytest.raises(ValueError):  # a blank accepted secret is a key anyone could guess
        TokenSigner("new", accepted=[" "])


def test_an_operator_token_of_the_old_secret_alone_is_refused_once_a_replica_signs_with_the_new() -> None:
    """It worked for the whole rollover, which lasts until the last match of step 2 is over and
    guests registered again: days of operator rights (cancel, import, sweep, a creation naming
    players) for whoever still held the old secret, and a cron job left on it went unnoticed
    until step 3. Operator tokens are minted per call, so they need not outlive the roll."""
    old, new = TokenSigner("old"), TokenSigner("new", accepted=["old"])
    token = old.operator_token("ops", now=100.0)
    assert TokenSigner("old", accepted=["new"]).read_operator(token, now=101.0) == "ops"  # step 1: its own secret
    with pytest.raises(InvalidToken, match="own secret"):
        new.read_operator(token, now=101.0)
    with pytest.raises(InvalidToken):  # a second signature of another secret makes it no better
        new.read_operator(token + "." + TokenSigner("other").operator_token("ops", now=100.0).rsplit(".", 1)[1],
                          now=101.0)
    assert new.read_seat(old.seat_token("m1", 2)).seat == 2  # what was handed out still works


def test_operator_tokens_minted_during_a_roll_are_read_by_replicas_on_either_side_of_it() -> None:
    """A rolling restart mixes replicas signing with the old secret and with the new, each
    accepting the other's: an operator token read by the own secret alone must then carry both
    signatures, or the matchmaker's and the tournament runner's calls would be refused until the
    roll ends. Without an accepted secret it is signed as before, once."""
    step1, step2 = TokenSigner("old", accepted=["new"]), TokenSigner("new", accepted=["old"])
    for minter in (step1, step2):
        token = minter.operator_token("matchmaking", now=100.0)
        assert token.count(".") == 2
        for reader in (step1, step2, TokenSigner("old"), TokenSigner("new")):
            assert reader.read_operator(token, now=101.0) == "matchmaking"
    assert TokenSigner("new").operator_token("cli", now=100.0).count(".") == 1
    with pytest.raises(InvalidToken, match="malformed"):  # a seat token has one spelling (the command service caches it)
        step2.read_seat(step2.seat_token("m1", 0) + "." + "x")



def test_an_operator_tokens_signatures_are_each_a_signature_once() -> None:
    """A token of several signatures read any extra segment as one that may be another secret's:
    a trailing dot, an empty segment, the own signature twice or a segment no HMAC could write
    were all taken (`body.sig.`, `body..sig`), where a token of one signature with a dot too many
    was always refused. Segments of another secret's shape still pass: no reader can tell them."""
    minter = TokenSigner("new", accepted=["old"])
    body, _, signed = minter.operator_token("ops", now=100.0).partition(".")
    own, old = signed.split(".")
    reader = TokenSigner("new")
    assert reader.read_operator(f"{body}.{old}.{own}", now=101.0) == "ops"  # either order
    for token in (f"{body}.{own}.", f"{body}..{own}", f"{body}.{own}.{own}", f"{body}.{own}.x",
                  f"{body}.{own}.{old}=", f"{body}.{own}.{old}.", f"{body}.{own}.{old[:-1]}+"):
        with pytest.raises(InvalidToken, match="malformed"):
            reader.read_operator(token, now=101.0)

def test_the_command_service_reads_the_tokens_of_a_rollovers_accepted_secret() -> None:
    """The composition root hands the service `Settings.signer()`, not a signer of the secret alone."""
    from famiglia.config import Settings
    from famiglia.eventstore.memory_store import InMemoryEventStore
    from services.command.bootstrap import bootstrap

    app = bootstrap(store=InMemoryEventStore(), settings=Settings(secret="new-secret", accepted_secret="old-secret"))
    assert app.signer.read_seat(TokenSigner("old-secret").seat_token("m1", 1)).seat == 1


@pytest.mark.parametrize("claims", [
    ["seat", "m1", 0],  # not an object
    {"k": "seat", "m": "m1", "s": "0", "p": ""},  # a seat that is no number
    {"k": "seat", "m": "m1", "s": 0.5, "p": ""},
    {"k": "seat", "m": 7, "s": 0, "p": ""},
])
def test_a_well_signed_token_of_the_wrong_shape_is_an_invalid_token_not_a_crash(claims: object) -> None:
    """A signature proves who signed, not what: a body of another shape (another release's,
    another tool's with the same secret) is refused as malformed (found by mutating
    TokenSigner.read and read_seat)."""
    signer = TokenSigner("k")
    token = signer.issue(claims)  # type: ignore[arg-type]
    with pytest.raises(InvalidToken):
        signer.read_seat(token)
