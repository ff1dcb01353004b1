"""A gRPC refusal as the command service sends it, for unit tests of its callers."""

from __future__ import annotations

import grpc

from famiglia.grpcutil.errors import AppError, to_status


class Refused(grpc.RpcError):
    """A refusal as the command service sends it (`to_status`: its code, its ErrorInfo and the
    trailing `famiglia-code`), so `error_code` and `error_metadata` read it as a client does."""

    def __init__(self, error: AppError) -> None:
        self.status = to_status(error)

    def code(self) -> grpc.StatusCode:
        return self.status.code

    def details(self) -> str:
        return self.status.details

    def trailing_metadata(self):
        return self.status.trailing_metadata
