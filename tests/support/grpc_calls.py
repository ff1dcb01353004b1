"""A gRPC call's server context as the `rpc` wrapper uses it, for unit tests of handlers."""

from __future__ import annotations

from typing import Any

import grpc


class Aborted(Exception):
    """What `abort` raises, as grpc's own context does (the handler's code after it never runs)."""


class FakeCall:
    """The metadata a call came with, and the status it was aborted with (`status`)."""

    def __init__(self, *metadata: tuple[str, str]) -> None:
        self.metadata = metadata
        self.status: Any = None

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.metadata

    def abort_with_status(self, status: Any) -> None:
        self.status = status
        raise Aborted

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.status = (code, details)
        raise Aborted
