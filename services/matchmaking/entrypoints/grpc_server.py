"""famiglia.v1.PlayerService and MatchmakingService over gRPC: requests in, use cases called,
replies or statuses out."""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from famiglia.grpcutil.readiness import Dependency
from famiglia.grpcutil.server import bearer_token, build_server, rpc
from famiglia.grpcutil.tls import Transport
from famiglia.v1 import matchmaking_service_pb2 as pb
from famiglia.v1 import matchmaking_service_pb2_grpc as pb_grpc

from ..app import MatchmakingApp, Profile, TicketStatus

STATES = {
    "searching": pb.TICKET_SEARCHING, "matched": pb.TICKET_MATCHED, "cancelled": pb.TICKET_CANCELLED,
    "expired": pb.TICKET_EXPIRED, "failed": pb.TICKET_FAILED, "pending": pb.TICKET_PENDING_PARTY,
}


def ticket_update(s: TicketStatus) -> pb.TicketUpdate:
    return pb.TicketUpdate(
        ticket_id=s.ticket_id, state=STATES.get(s.state, pb.TICKET_STATE_UNSPECIFIED), game_id=s.game_id,
        waited_seconds=s.waited_s, estimated_wait_seconds=s.estimated_wait_s, match_id=s.match_id,
        seat_token=s.seat_token, seat=s.seat, seats=s.seats, bots=s.bots, reason=s.reason,
        seat_counts=list(s.seat_counts), party=list(s.party), awaiting=list(s.awaiting),
        answer_within_seconds=s.answer_within_s,
    )


def _profile(p: Profile) -> pb.PlayerProfile:
    out = pb.PlayerProfile(player_id=p.player.player_id, display_name=p.player.display_name,
                           guest=p.player.guest, created_at_ms=p.player.created_ms)
    for game_id, r in sorted(p.ratings.items()):
        out.ratings.add(game_id=game_id, mu=r.mu, sigma=r.sigma)
    return out


class PlayerServicer(pb_grpc.PlayerServiceServicer):
    def __init__(self, app: MatchmakingApp) -> None:
        self.app = app

    @rpc
    def RegisterGuest(self, request, context):
        player, token = self.app.register_guest(request.display_name, request.request_id)
        # (Not strict: a registration stored does not fail for the read models' database, away.)
        return pb.RegisterGuestResponse(player_id=player.player_id, player_token=token,
                                        profile=_profile(self.app.profile(player.player_id, strict=False)))

    @rpc
    def GetProfile(self, request, context):
        if request.player_id:  # anyone's: a look, not the guest's own use
            return _profile(self.app.profile(request.player_id))
        return _profile(self.app.profile(self.app.authenticate(bearer_token(context)), own=True))


class MatchmakingServicer(pb_grpc.MatchmakingServiceServicer):
    def __init__(self, app: MatchmakingApp, poll_s: float = 0.2) -> None:
        self.app = app
        self.poll_s = poll_s

    @rpc
    def CreateTicket(self, request, context):
        player_id = self.app.authenticate(bearer_token(context))
        created = self.app.create_ticket(player_id, request.game_id, list(request.seat_counts),
                                         dict(request.options), list(request.party), request.request_id)
        return pb.CreateTicketResponse(ticket_id=created.ticket_id, duplicate=created.duplicate,
                                       ticket=ticket_update(created.status))

    @rpc
    def WatchTicket(self, request, context):
        player_id = self.app.authenticate(bearer_token(context))
        for status in self.app.watch(player_id, request.ticket_id, is_active=context.is_active,
                                     poll_s=self.poll_s):
            yield ticket_update(status)

    @rpc
    def GetTicket(self, request, context):
        player_id = self.app.authenticate(bearer_token(context))
        return ticket_update(self.app.ticket(player_id, request.ticket_id))

    @rpc
    def CancelTicket(self, request, context):
        player_id = self.app.authenticate(bearer_token(context))
        return ticket_update(self.app.cancel(player_id, request.ticket_id))

    @rpc
    def ListInvites(self, request, context):
        player_id = self.app.authenticate(bearer_token(context))
        return pb.ListInvitesResponse(invites=[ticket_update(s) for s in self.app.invites(player_id, request.game_id)])

    @rpc
    def AcceptPartyInvite(self, request, context):
        player_id = self.app.authenticate(bearer_token(context))
        return ticket_update(self.app.accept_invite(player_id, request.ticket_id))

    @rpc
    def DeclinePartyInvite(self, request, context):
        player_id = self.app.authenticate(bearer_token(context))
        return ticket_update(self.app.decline_invite(player_id, request.ticket_id))


def serve(app: MatchmakingApp, address: str, workers: int = 64, *,
          dependencies: Sequence[Dependency] = (),
          transport: Transport | None = None) -> tuple[grpc.Server, int]:
    """Both services on one server bound to `address` (not yet started); health is SERVING
    while `dependencies` answer."""
    return build_server(
        address,
        [
            (pb_grpc.add_MatchmakingServiceServicer_to_server, MatchmakingServicer(app),
             "famiglia.v1.MatchmakingService"),
            (pb_grpc.add_PlayerServiceServicer_to_server, PlayerServicer(app), "famiglia.v1.PlayerService"),
        ],
        workers=workers,
        dependencies=dependencies,
        transport=transport,
    )
