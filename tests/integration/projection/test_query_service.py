"""famiglia.v1.QueryService over real gRPC (an in-process server on a free port)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from famiglia.grpcutil.errors import error_code
from famiglia.readmodels import record_tournament
from famiglia.readmodels.db import write_session
from famiglia.v1 import query_service_pb2 as pb
from famiglia.v1 import query_service_pb2_grpc as pb_grpc
from services.projection.app import ProjectionApp
from services.projection.entrypoints.grpc_server import SERVICE_NAME, serve

from .support import Played, drain, write_matches
from .test_projection import specs


@pytest.fixture()
def played(app: ProjectionApp) -> list[Played]:
    played = write_matches(app.store, app.registry, specs(7))
    with write_session(app.sql) as session:
        record_tournament(session, "cup", name="The Cup")
    drain([app.runner("q")])
    return played


@pytest.fixture()
def channel(app: ProjectionApp) -> Iterator[grpc.Channel]:
    server, port = serve(app.sql, "127.0.0.1:0", workers=4)
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield channel
    channel.close()
    server.stop(grace=None)


def test_list_matches_pages_are_stable_and_filtered(played: list[Played], channel: grpc.Channel) -> None:
    stub = pb_grpc.QueryServiceStub(channel)
    seen: list[str] = []
    token = ""
    while True:
        page = stub.ListMatches(pb.ListMatchesRequest(page_size=3, page_token=token))
        seen.extend(m.match_id for m in page.matches)
        token = page.next_page_token
        if not token:
            break
    newest_first = [p.match_id for p in sorted(played, key=lambda p: p.envelopes[0].timestamp.ToMilliseconds(),
                                                  reverse=True)]
    assert seen == newest_first
    ann = stub.ListMatches(pb.ListMatchesRequest(player_id="ann", status=pb.MATCH_STATUS_FINISHED))
    assert {m.match_id for m in ann.matches} == {p.match_id for p in played if "ann" in p.players}
    assert not stub.ListMatches(pb.ListMatchesRequest(game_id="no_such_game")).matches
    assert not stub.ListMatches(pb.ListMatchesRequest(status=pb.MATCH_STATUS_LIVE)).matches
    with pytest.raises(grpc.RpcError) as bad:
        stub.ListMatches(pb.ListMatchesRequest(page_token="garbage!"))
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and error_code(bad.value) == "bad_page_token"
    with pytest.raises(grpc.RpcError) as bad:  # a status this server does not know is not "any status"
        stub.ListMatches(pb.ListMatchesRequest(status=99))  # type: ignore[arg-type]
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and error_code(bad.value) == "bad_status"


def test_match_summary_has_seats_results_and_the_seed_once_finished(played: list[Played],
                                                                    channel: grpc.Channel) -> None:
    stub = pb_grpc.QueryServiceStub(channel)
    p = played[0]
    m = stub.GetMatchSummary(pb.GetMatchSummaryRequest(match_id=p.match_id)).match
    assert m.status == pb.MATCH_STATUS_FINISHED and m.game_id == p.game_id and m.HasField("finished_at")
    assert m.seed == 1000 and m.version == len(p.envelopes) and m.tournament_id == "cup"
    assert m.outcome == dict(p.result.outcome)
    for seat in p.result.seats:
        got = m.seats[seat.seat]
        assert (got.score, got.rank, got.winner, got.player_id) == \
            (seat.score, seat.rank, seat.rank == 1, p.players[seat.seat])
        assert dict(got.details) == dict(seat.details)
    with pytest.raises(grpc.RpcError) as missing:
        stub.GetMatchSummary(pb.GetMatchSummaryRequest(match_id="nope"))
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND


def test_leaderboard_history_and_standings(played: list[Played], channel: grpc.Channel) -> None:
    stub = pb_grpc.QueryServiceStub(channel)
    board = stub.GetLeaderboard(pb.GetLeaderboardRequest(game_id="dice_race"))
    assert [e.rank for e in board.entries] == list(range(1, len(board.entries) + 1))
    assert [e.ordinal for e in board.entries] == sorted((e.ordinal for e in board.entries), reverse=True)
    assert sum(e.matches for e in board.entries) == sum(len(set(p.players)) for p in played)
    history = stub.GetPlayerHistory(pb.GetPlayerHistoryRequest(player_id="bob"))
    assert history.player.display_name == "Bob" and history.player.bot
    assert {h.match.match_id for h in history.matches} == {p.match_id for p in played if "bob" in p.players}
    assert all(h.match.seats[h.seat].player_id == "bob" for h in history.matches)
    rated = [h for h in history.matches if h.HasField("ordinal_after")]
    assert rated and all(h.HasField("ordinal_before") for h in rated)
    newest = max(rated, key=lambda h: (h.match.finished_at.ToMilliseconds(), h.match.match_id))
    assert newest.ordinal_after == pytest.approx(history.ratings["dice_race"].ordinal)
    assert history.ratings["dice_race"].player_id == "bob"
    standings = stub.GetTournamentStandings(pb.GetTournamentStandingsRequest(tournament_id="cup"))
    assert standings.name == "The Cup" and standings.games == ["dice_race"]
    assert standings.matches_finished == sum(1 for p in played if p.tournament_id == "cup")
    assert [s.rank for s in standings.standings] == list(range(1, len(standings.standings) + 1))
    assert {s.game_id for s in standings.standings} == {"dice_race"}
    only = stub.GetTournamentStandings(pb.GetTournamentStandingsRequest(tournament_id="cup", game_id="grifters"))
    assert not only.standings
    with pytest.raises(grpc.RpcError) as missing:
        stub.GetTournamentStandings(pb.GetTournamentStandingsRequest(tournament_id="nope"))
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND


def test_health_reports_the_query_service_serving(app: ProjectionApp, channel: grpc.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    reply = health.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME))
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    # Watch too (client-side health checking): it answers through a callback, past the gate
    # that counts the streams holding a thread
    watch = health.Watch(health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=5)
    assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
    watch.cancel()
