"""A thin, typed wrapper over famiglia.v1.ReplayService (the CLI and tests use it).

    client = ReplayClient("localhost:50053")
    at = client.state_at(event_id, token=seat_token)
    for step in client.stream(match_id=at.match_id): ...
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc

from famiglia.grpcutil.tls import dial
from famiglia.replay.export import MESSAGE_MAX_BYTES
from famiglia.telemetry import inject_context
from famiglia.v1 import replay_service_pb2 as pb
from famiglia.v1 import replay_service_pb2_grpc as pb_grpc


def _metadata(token: str | None) -> list[tuple[str, str]]:
    md = list(inject_context().items())
    if token:
        md.append(("authorization", f"Bearer {token}"))
    return md


class ReplayClient:
    def __init__(self, address: str = "localhost:50053", channel: grpc.Channel | None = None,
                 timeout: float = 60.0) -> None:
        # An ExportMatch reply is its file (up to FILE_MAX_BYTES) and a few fields more: received
        # as the server receives an import (`grpcs://host[:port]`: TLS).
        self.channel = channel or dial(
            address, options=[("grpc.max_receive_message_length", MESSAGE_MAX_BYTES)])
        self.stub = pb_grpc.ReplayServiceStub(self.channel)
        self.timeout = timeout

    def close(self) -> None:
        self.channel.close()

    def wait_ready(self, timeout: float = 15.0) -> None:
        grpc.channel_ready_future(self.channel).result(timeout=timeout)

    def state_at(self, event_id: str, *, token: str | None = None, full: bool = False,
                 match_id: str = "") -> pb.GetStateAtResponse:
        return self.stub.GetStateAt(pb.GetStateAtRequest(event_id=event_id, full=full, match_id=match_id),
                                    metadata=_metadata(token), timeout=self.timeout)

    def stream(self, *, match_id: str = "", event_id: str = "", from_seq: int = 0, to_seq: int = 0,
               token: str | None = None, full: bool = False, recorded_pace: bool = False, speed: float = 0.0,
               without_views: bool = False) -> Iterator[pb.ReplayStep]:
        request = pb.StreamReplayRequest(
            match_id=match_id, event_id=event_id, from_seq=from_seq, to_seq=to_seq, full=full,
            pace=pb.PACE_RECORDED if recorded_pace else pb.PACE_INSTANT, speed=speed,
            without_views=without_views,
        )
        yield from self.stub.StreamReplay(request, metadata=_metadata(token))

    def events(self, match_id: str, *, token: str | None = None, page_size: int = 1000
               ) -> list[pb.MatchEventInfo]:
        """Every event of the match, all pages."""
        out: list[pb.MatchEventInfo] = []
        page_token = ""
        while True:
            page = self.stub.ListMatchEvents(
                pb.ListMatchEventsRequest(match_id=match_id, page_size=page_size, page_token=page_token),
                metadata=_metadata(token), timeout=self.timeout)
            out.extend(page.events)
            page_token = page.next_page_token
            if not page_token:
                return out

    def export(self, match_id: str, *, binary: bool = False, token: str | None = None) -> pb.ExportMatchResponse:
        return self.stub.ExportMatch(pb.ExportMatchRequest(match_id=match_id, binary=binary),
                                     metadata=_metadata(token), timeout=self.timeout)

    def import_file(self, data: bytes, *, token: str | None, new_match_id: str = "",
                    allow_unverified: bool = False) -> pb.ImportMatchResponse:
        """ImportMatch, an operator action: `token` is an operator token
        (`TokenSigner(secret).operator_token()`, see `operator_token` below)."""
        return self.stub.ImportMatch(
            pb.ImportMatchRequest(file=data, new_match_id=new_match_id, allow_unverified=allow_unverified),
            metadata=_metadata(token), timeout=self.timeout)

    def verify(self, *, match_id: str = "", data: bytes | None = None, token: str | None = None
               ) -> pb.VerifyMatchResponse:
        request = pb.VerifyMatchRequest(file=data) if data is not None else pb.VerifyMatchRequest(match_id=match_id)
        return self.stub.VerifyMatch(request, metadata=_metadata(token), timeout=self.timeout)


def operator_token(secret: str, operator: str = "cli", *, accepted_secret: str = "") -> str:
    """A short-lived operator token minted from the deployment's secret (FAMIGLIA_SECRET), signed
    with a rollover's accepted one too (FAMIGLIA_SECRET_ACCEPTED, famiglia.auth.tokens)."""
    from famiglia.auth import TokenSigner

    return TokenSigner(secret, [accepted_secret] if accepted_secret else []).operator_token(operator)
