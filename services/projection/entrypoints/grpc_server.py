"""famiglia.v1.QueryService over gRPC: requests in, read-model queries, replies or statuses out."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
from sqlalchemy.engine import Engine
from sqlmodel import Session

from famiglia.engine.registry import Registry, default_registry
from famiglia.grpcutil.errors import InvalidArgument, NotFound
from famiglia.grpcutil.readiness import Dependency
from famiglia.grpcutil.server import build_server, rpc
from famiglia.grpcutil.tls import Transport
from famiglia.readmodels import queries, tournaments
from famiglia.readmodels.db import read_session
from famiglia.v1 import query_service_pb2 as pb
from famiglia.v1 import query_service_pb2_grpc as pb_grpc

SERVICE_NAME = "famiglia.v1.QueryService"
_STATUS = {"live": pb.MATCH_STATUS_LIVE, "finished": pb.MATCH_STATUS_FINISHED, "cancelled": pb.MATCH_STATUS_CANCELLED}
_STATUS_FILTER = {pb.MATCH_STATUS_UNSPECIFIED: "", pb.MATCH_STATUS_LIVE: "live",
                  pb.MATCH_STATUS_FINISHED: "finished", pb.MATCH_STATUS_CANCELLED: "cancelled"}


def _ts(ms: int | None) -> Timestamp | None:
    if ms is None:
        return None
    out = Timestamp()
    out.FromMilliseconds(ms)
    return out


def match_record(m: queries.MatchSummary) -> pb.MatchRecord:
    out = pb.MatchRecord(match_id=m.match_id, game_id=m.game_id,
                         status=_STATUS.get(m.status, pb.MATCH_STATUS_UNSPECIFIED),
                         version=m.version, options=dict(m.options), tournament_id=m.tournament_id,
                         outcome=dict(m.outcome), created_at=_ts(m.created_ms), finished_at=_ts(m.finished_ms),
                         last_event_at=_ts(m.last_event_ms), rematch_of=m.rematch_of, rematch_id=m.rematch_id)
    if m.seed is not None:
        out.seed = m.seed
    for s in m.seats:
        seat = out.seats.add(seat=s.seat, player_id=s.player_id, display_name=s.display_name, bot=s.bot,
                             policy=s.policy, winner=s.winner, details=dict(s.details), away=s.away)
        if s.away_since is not None:
            seat.away_since_version = s.away_since
        if s.score is not None:
            seat.score = s.score
        if s.rank is not None:
            seat.rank = s.rank
    return out


def leaderboard_entry(e: queries.LeaderboardEntry) -> pb.LeaderboardEntry:
    return pb.LeaderboardEntry(rank=e.rank, player_id=e.player_id, display_name=e.display_name, bot=e.bot,
                               policy=e.policy, mu=e.mu, sigma=e.sigma, ordinal=e.ordinal, matches=e.matches,
                               wins=e.wins)


def _player_match(entry: queries.HistoryEntry) -> pb.PlayerMatchRecord:
    out = pb.PlayerMatchRecord(match=match_record(entry.match), seat=entry.seat)
    if entry.rating_before is not None and entry.rating_after is not None:
        out.ordinal_before = entry.rating_before.ordinal
        out.ordinal_after = entry.rating_after.ordinal
    return out


def _unstorable(*values: str) -> bool:
    """Whether any of these request strings holds a NUL, which no row can (PostgreSQL text
    refuses it, the projection stores none): such an id names nothing, on every database, and
    is never sent to one (PostgreSQL would fail the query: INTERNAL instead of an answer)."""
    return any("\x00" in v for v in values)


class QueryServicer(pb_grpc.QueryServiceServicer):
    def __init__(self, engine: Engine, registry: Registry) -> None:
        self.engine = engine
        self.registry = registry

    def _check_game(self, session: Session, game_id: str, also: Collection[str] = ()) -> None:
        """A game filter names a game this server serves (the registry), one whose matches the
        read models hold (they keep games no longer served, archived without results), or one
        of `also`; anything else is a typo, not an empty result. "" (every game) passes."""
        if not game_id or game_id in self.registry or game_id in also or (
                not _unstorable(game_id) and queries.has_game(session, game_id)):
            return
        raise InvalidArgument("unknown_game",
                              f"no game {game_id[:80]!r} on this server or in its read models")

    @rpc
    def ListMatches(self, request: pb.ListMatchesRequest, context: grpc.ServicerContext) -> Any:
        if request.page_size < 0:
            raise InvalidArgument("bad_page_size", "page_size must be >= 0")
        with read_session(self.engine) as session:
            if request.status not in _STATUS_FILTER:  # a newer client's value: not "any status"
                raise InvalidArgument("bad_status", f"unknown match status {request.status}")
            self._check_game(session, request.game_id)
            if _unstorable(request.player_id, request.tournament_id):  # no match has it
                if request.page_token:
                    try:
                        queries.decode_token(request.page_token)
                    except queries.BadPageToken as exc:
                        raise InvalidArgument("bad_page_token", str(exc)) from None
                return pb.ListMatchesResponse()
            try:
                page = queries.list_matches(session, game_id=request.game_id,
                                            status=_STATUS_FILTER[request.status],
                                            player_id=request.player_id, tournament_id=request.tournament_id,
                                            page_size=request.page_size, page_token=request.page_token)
            except queries.BadPageToken as exc:
                raise InvalidArgument("bad_page_token", str(exc)) from None
        return pb.ListMatchesResponse(matches=[match_record(m) for m in page.matches],
                                      next_page_token=page.next_page_token)

    @rpc
    def GetMatchSummary(self, request: pb.GetMatchSummaryRequest, context: grpc.ServicerContext) -> Any:
        if not request.match_id:
            raise InvalidArgument("no_match_id", "match_id is required")
        if _unstorable(request.match_id):
            raise NotFound("unknown_match", f"no match {request.match_id!r} in the read models (yet)")
        with read_session(self.engine) as session:
            found = queries.match_summary(session, request.match_id)
        if found is None:
            raise NotFound("unknown_match", f"no match {request.match_id!r} in the read models (yet)")
        return pb.GetMatchSummaryResponse(match=match_record(found))

    @rpc
    def GetLeaderboard(self, request: pb.GetLeaderboardRequest, context: grpc.ServicerContext) -> Any:
        if not request.game_id:
            raise InvalidArgument("no_game_id", "game_id is required")
        if request.limit < 0 or request.offset < 0:
            raise InvalidArgument("bad_page_size", "limit and offset must be >= 0")
        with read_session(self.engine) as session:
            self._check_game(session, request.game_id)
            entries = queries.leaderboard(session, request.game_id, limit=request.limit, offset=request.offset)
        return pb.GetLeaderboardResponse(game_id=request.game_id, entries=[leaderboard_entry(e) for e in entries])

    @rpc
    def GetPlayerHistory(self, request: pb.GetPlayerHistoryRequest, context: grpc.ServicerContext) -> Any:
        if not request.player_id:
            raise InvalidArgument("no_player_id", "player_id is required")
        if request.page_size < 0:
            raise InvalidArgument("bad_page_size", "page_size must be >= 0")
        with read_session(self.engine) as session:
            self._check_game(session, request.game_id)
            if _unstorable(request.player_id):
                raise NotFound("unknown_player", f"no player {request.player_id!r}")
            try:
                history = queries.player_history(session, request.player_id, game_id=request.game_id,
                                                 page_size=request.page_size, page_token=request.page_token)
            except queries.BadPageToken as exc:
                raise InvalidArgument("bad_page_token", str(exc)) from None
        if history.player is None:
            raise NotFound("unknown_player", f"no player {request.player_id!r}")
        p = history.player
        reply = pb.GetPlayerHistoryResponse(
            player=pb.PlayerRecord(player_id=p.player_id, display_name=p.display_name, bot=p.bot, policy=p.policy,
                                   first_seen=_ts(p.first_seen_ms), last_seen=_ts(p.last_seen_ms)),
            matches=[_player_match(e) for e in history.entries],
            next_page_token=history.next_page_token,
        )
        for game_id, entry in history.ratings.items():
            reply.ratings[game_id].CopyFrom(leaderboard_entry(entry))
        return reply

    @rpc
    def GetTournamentStandings(self, request: pb.GetTournamentStandingsRequest,
                               context: grpc.ServicerContext) -> Any:
        if not request.tournament_id:
            raise InvalidArgument("no_tournament_id", "tournament_id is required")
        with read_session(self.engine) as session:
            info = (None if _unstorable(request.tournament_id)
                    else tournaments.get_tournament(session, request.tournament_id))
            self._check_game(session, request.game_id, info.games if info else ())
            if info is None:
                raise NotFound("unknown_tournament", f"no tournament {request.tournament_id!r}")
            standings = tournaments.tournament_standings(session, request.tournament_id, request.game_id)
        return pb.GetTournamentStandingsResponse(
            tournament_id=info.tournament_id, name=info.name, status=info.status, games=list(info.games),
            created_at=_ts(info.created_ms), finished_at=_ts(info.finished_ms),
            matches_finished=info.matches_finished,
            standings=[pb.StandingEntry(game_id=s.game_id, rank=s.rank, player_id=s.player_id, display_name=s.display_name, bot=s.bot,
                                        policy=s.policy, played=s.played, wins=s.wins, points=s.points,
                                        score_total=s.score_total, average_rank=s.average_rank, mu=s.mu,
                                        sigma=s.sigma, ordinal=s.ordinal) for s in standings],
        )


def serve(engine: Engine, address: str, workers: int = 16, *,
          registry: Registry | None = None, dependencies: Sequence[Dependency] = (),
          transport: Transport | None = None) -> tuple[grpc.Server, int]:
    """A QueryService server bound to `address` (not yet started); `registry` (default: the
    games this process plays) is what its game filters accept, with the read models' games;
    health is SERVING while `dependencies` answer."""
    servicer = QueryServicer(engine, registry if registry is not None else default_registry())
    return build_server(address, [(pb_grpc.add_QueryServiceServicer_to_server, servicer, SERVICE_NAME)],
                        workers=workers, dependencies=dependencies, transport=transport)
