"""Which CreateMatch failures the matcher retries (services/matchmaking/creator.py)."""

from __future__ import annotations

import grpc
import pytest
import redis

from famiglia.auth import TokenSigner
from famiglia.config import Settings
from famiglia.matchmaking import FixedRatings
from services.matchmaking.bootstrap import bootstrap
from services.matchmaking.creator import CreateFailed, GrpcMatchCreator


class _Refused(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return "refused"


@pytest.mark.parametrize(("code", "permanent"), [
    (grpc.StatusCode.INVALID_ARGUMENT, True), (grpc.StatusCode.FAILED_PRECONDITION, True),
    (grpc.StatusCode.ALREADY_EXISTS, True),  # request_id_reused: the same request can only be refused again
    (grpc.StatusCode.UNAVAILABLE, False), (grpc.StatusCode.DEADLINE_EXCEEDED, False),
])
def test_a_refusal_that_a_retry_cannot_change_is_permanent(code: grpc.StatusCode, permanent: bool) -> None:
    creator = GrpcMatchCreator("127.0.0.1:1")

    def refuse(*_args, **_kwargs):
        raise _Refused(code)

    creator.client.create_match = refuse  # type: ignore[method-assign]
    with pytest.raises(CreateFailed) as exc:
        creator.create_match("goodcritters", 4, options={}, seat_info=[], request_id="r")
    assert exc.value.permanent is permanent and code.name in exc.value.reason
    creator.close()



class _Made:
    match_id = "m1"
    seat_tokens: list[str] = []


def test_the_matchmakers_operator_token_is_read_on_either_side_of_a_secret_rollovers_roll() -> None:
    """A command service takes an operator token by its own secret alone (docs/operations.md,
    "Rotating the secret"): a matchmaker restarted with the new secret must still create the
    tables it asks a command replica not yet restarted (signing with the old) for."""
    settings = Settings(redis_url="redis://127.0.0.1:1/0", secret="new-secret", accepted_secret="old-secret")
    mm = bootstrap(settings=settings, client=redis.Redis.from_url(settings.redis_url), games={},
                   ratings=FixedRatings())
    sent: list[str] = []

    def create_match(*_args, token: str, **_kwargs) -> _Made:
        sent.append(token)
        return _Made()

    mm.matcher.creator.client.create_match = create_match  # type: ignore[attr-defined]
    mm.matcher.creator.create_match("goodcritters", 2, options={}, seat_info=[], request_id="r" * 16)
    for replica in (TokenSigner("old-secret", ["new-secret"]), TokenSigner("new-secret", ["old-secret"])):
        assert replica.read_operator(sent[0]) == "matchmaking"
    mm.close()


def test_the_matcher_waits_out_the_grpc_creators_deadline_before_another_replica_asks_again() -> None:
    """The claims of the deployed matcher wait for CreateMatch's own deadline: a call slower than the
    claim retry (5 s) and within the deadline (10 s) was asked again by another replica."""
    settings = Settings(redis_url="redis://127.0.0.1:1/0", secret="s")
    mm = bootstrap(settings=settings, client=redis.Redis.from_url(settings.redis_url), games={},
                   ratings=FixedRatings())
    assert mm.matcher.creator.client.timeout == 10.0  # type: ignore[attr-defined]
    assert mm.matcher.tuning.create_timeout_ms == 10_000
    assert mm.matcher._wait_ms == 10_000 + 1000 > mm.matcher.tuning.claim_retry_ms
    mm.close()
