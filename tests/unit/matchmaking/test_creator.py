"""Which CreateMatch failures the matcher retries (services/matchmaking/creator.py)."""

from __future__ import annotations

import grpc
import pytest

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
