"""The match creator port: matchmaking asks the command service for a table.

Matchmaking never imports the command service; in production it calls GameService
CreateMatch over gRPC with the table's request id (keyed from the proposal's id and written
down with the claim), so a retried (or crash-recovered) creation gets the same match and the
same seat tokens.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import grpc

from famiglia.auth import TokenSigner
from famiglia.client import GameClient
from famiglia.v1 import envelope_pb2


@dataclass(frozen=True)
class CreatedMatch:
    match_id: str
    seat_tokens: list[str]


class CreateFailed(Exception):
    """CreateMatch did not succeed; `permanent` when retrying cannot help (a refused request)."""

    def __init__(self, reason: str, *, permanent: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent


class MatchCreator(Protocol):
    def create_match(self, game_id: str, seats: int, *, options: Mapping[str, str],
                     seat_info: Sequence[envelope_pb2.SeatInfo], request_id: str) -> CreatedMatch: ...


CREATE_TIMEOUT_S = 10.0
"""CreateMatch's deadline: a call still out then fails (DEADLINE_EXCEEDED, no answer) and is retried."""

PERMANENT = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION,
                       grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNIMPLEMENTED,
                       grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.OUT_OF_RANGE})


class GrpcMatchCreator:
    """CreateMatch over gRPC (famiglia.client.GameClient); the channel connects lazily."""

    def __init__(self, address: str, timeout: float = CREATE_TIMEOUT_S, *, secret: str = "",
                 accepted_secret: str = "") -> None:
        self.client = GameClient(address, timeout=timeout)
        # A match naming its players takes an operator token (GameService.CreateMatch), minted
        # from the deployment's secret for each creation (it is short-lived), and signed with a
        # rollover's accepted secret too: the command service reads it by its own secret alone,
        # the old or the new during a roll (famiglia.auth.tokens).
        self._signer = TokenSigner(secret, [accepted_secret] if accepted_secret else []) if secret else None

    def create_match(self, game_id: str, seats: int, *, options: Mapping[str, str],
                     seat_info: Sequence[envelope_pb2.SeatInfo], request_id: str) -> CreatedMatch:
        try:
            handle = self.client.create_match(game_id, seats, options=options, seat_info=seat_info,
                                              request_id=request_id,
                                              token=self._signer.operator_token("matchmaking", ttl_s=300)
                                              if self._signer is not None else None)
        except grpc.RpcError as exc:
            code = exc.code()  # type: ignore[attr-defined]
            raise CreateFailed(f"{code.name}: {exc.details()}",  # type: ignore[attr-defined]
                               permanent=code in PERMANENT) from None
        return CreatedMatch(handle.match_id, list(handle.seat_tokens))

    def close(self) -> None:
        self.client.close()
