"""The seat token and the trace carrier read from a call's metadata."""

from __future__ import annotations

import pytest

from famiglia.grpcutil.server import _carrier, bearer_token


class _Call:
    def __init__(self, *metadata: tuple[str, str | bytes]) -> None:
        self.metadata = metadata

    def invocation_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return self.metadata


@pytest.mark.parametrize(("metadata", "token"), [
    ((), None),
    ((("user-agent", "grpc-python"),), None),
    ((("authorization", "Bearer abc.def"),), "abc.def"),
    ((("user-agent", "grpc-python"), ("authorization", "Bearer  abc.def ")), "abc.def"),
    ((("authorization", "bearer abc.def"),), "abc.def"),
    ((("Authorization", "BEARER abc.def"),), "abc.def"),
    ((("authorization", b"Bearer abc.def"),), "abc.def"),
    ((("authorization", "Bearer "),), ""),
    ((("authorization", "Bearer    "),), ""),
    ((("authorization", "Basic abc.def"),), ""),
    ((("authorization", "abc.def"),), ""),
    ((("authorization", "Bearer a"), ("authorization", "Bearer b")), "a"),
])
def test_the_bearer_token_is_the_first_authorization_entrys(metadata, token) -> None:
    assert bearer_token(_Call(*metadata)) == token  # type: ignore[arg-type]


def test_the_trace_carrier_is_there_only_when_the_caller_sent_trace_context() -> None:
    assert _carrier(_Call(("authorization", "Bearer x"))) is None  # type: ignore[arg-type]
    sent = _Call(("authorization", "Bearer x"), ("traceparent", "00-" + "1" * 32 + "-" + "2" * 16 + "-01"))
    assert _carrier(sent) == {"authorization": "Bearer x",  # type: ignore[arg-type]
                              "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
