"""famiglia.v1.QueryService over real gRPC (an in-process server on a free port)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from famiglia.engine.registry import Registry
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
def serving(app: ProjectionApp) -> Iterator[Callable[[Registry], grpc.Channel]]:
    """Start a QueryService over the app's read models that serves the given registry's games."""
    started: list[tuple[grpc.Server, grpc.Channel]] = []

    def start(registry: Registry) -> grpc.Channel:
        server, port = serve(app.sql, "127.0.0.1:0", workers=4, registry=registry)
        server.start()
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        started.append((server, channel))
        return channel

    yield start
    for server, channel in started:
        channel.close()
        server.stop(grace=None)


@pytest.fixture()
def channel(app: ProjectionApp, serving: Callable[[Registry], grpc.Channel]) -> grpc.Channel:
    return serving(app.registry)


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
    assert {m.match_id for m in stub.ListMatches(pb.ListMatchesRequest(game_id="dice_race", page_size=500)).matches} \
        == {p.match_id for p in played if p.game_id == "dice_race"}
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


@pytest.mark.parametrize("request_", [pb.GetLeaderboardRequest(game_id="dice_race", limit=-1),
                                      pb.GetLeaderboardRequest(game_id="dice_race", offset=-5),
                                      pb.GetPlayerHistoryRequest(player_id="bob", page_size=-1)])
def test_negative_sizes_and_offsets_are_refused_as_list_matches_refuses_them(
        played: list[Played], channel: grpc.Channel, request_) -> None:
    stub = pb_grpc.QueryServiceStub(channel)
    call = stub.GetLeaderboard if isinstance(request_, pb.GetLeaderboardRequest) else stub.GetPlayerHistory
    with pytest.raises(grpc.RpcError) as bad:
        call(request_)
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and error_code(bad.value) == "bad_page_size"


def test_health_reports_the_query_service_serving(app: ProjectionApp, channel: grpc.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    reply = health.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME))
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    # Watch too (client-side health checking): it answers through a callback, past the gate
    # that counts the streams holding a thread
    watch = health.Watch(health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=5)
    assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
    watch.cancel()


#: Every QueryService call that takes a game filter, with that filter set to `game_id`.
GAME_FILTERS: dict[str, Callable[[pb_grpc.QueryServiceStub, str], object]] = {
    "ListMatches": lambda stub, game_id: stub.ListMatches(pb.ListMatchesRequest(game_id=game_id)),
    "GetLeaderboard": lambda stub, game_id: stub.GetLeaderboard(pb.GetLeaderboardRequest(game_id=game_id)),
    "GetPlayerHistory": lambda stub, game_id: stub.GetPlayerHistory(
        pb.GetPlayerHistoryRequest(player_id="bob", game_id=game_id)),
    "GetTournamentStandings": lambda stub, game_id: stub.GetTournamentStandings(
        pb.GetTournamentStandingsRequest(tournament_id="cup", game_id=game_id)),
}


@pytest.mark.parametrize("call", sorted(GAME_FILTERS))
@pytest.mark.parametrize("game_id", ["chess", "x" * 300])
def test_game_filters_refuse_games_neither_served_nor_in_the_read_models(
        played: list[Played], channel: grpc.Channel, call: str, game_id: str) -> None:
    stub = pb_grpc.QueryServiceStub(channel)
    with pytest.raises(grpc.RpcError) as bad:
        GAME_FILTERS[call](stub, game_id)
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_code(bad.value) == "unknown_game"
    assert f"no game {game_id[:80]!r}" in (bad.value.details() or "")


def test_game_filters_accept_served_games_without_matches_and_no_game(played: list[Played],
                                                                       channel: grpc.Channel) -> None:
    stub = pb_grpc.QueryServiceStub(channel)
    assert "grifters" not in {p.game_id for p in played}
    assert not stub.ListMatches(pb.ListMatchesRequest(game_id="grifters")).matches
    assert not stub.GetLeaderboard(pb.GetLeaderboardRequest(game_id="grifters")).entries
    assert not stub.GetPlayerHistory(pb.GetPlayerHistoryRequest(player_id="bob", game_id="grifters")).matches
    assert len(stub.ListMatches(pb.ListMatchesRequest(game_id="", page_size=500)).matches) == len(played)
    assert stub.GetPlayerHistory(pb.GetPlayerHistoryRequest(player_id="bob", game_id="")).matches


def test_game_filters_accept_games_the_read_models_hold_but_this_server_no_longer_serves(
        app: ProjectionApp, played: list[Played], serving: Callable[[Registry], grpc.Channel]) -> None:
    with write_session(app.sql) as session:
        record_tournament(session, "retired", name="Old times", games=["old_game"])
    stub = pb_grpc.QueryServiceStub(serving(Registry({})))  # serves no game at all
    dice = {p.match_id for p in played if p.game_id == "dice_race"}
    assert dice
    got = stub.ListMatches(pb.ListMatchesRequest(game_id="dice_race", page_size=500)).matches
    assert {m.match_id for m in got} == dice
    assert stub.GetLeaderboard(pb.GetLeaderboardRequest(game_id="dice_race")).entries
    assert stub.GetPlayerHistory(pb.GetPlayerHistoryRequest(player_id="bob", game_id="dice_race")).matches
    assert stub.GetTournamentStandings(pb.GetTournamentStandingsRequest(tournament_id="cup",
                                                                        game_id="dice_race")).standings
    # a game only a tournament names (no match of it yet) is that tournament's, not a typo
    old = stub.GetTournamentStandings(pb.GetTournamentStandingsRequest(tournament_id="retired", game_id="old_game"))
    assert old.games == ["old_game"] and not old.standings
    with pytest.raises(grpc.RpcError) as bad:
        stub.ListMatches(pb.ListMatchesRequest(game_id="old_game"))
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and error_code(bad.value) == "unknown_game"
    with pytest.raises(grpc.RpcError) as bad:  # the registry's games, not the ones this process lacks
        stub.ListMatches(pb.ListMatchesRequest(game_id="grifters"))
    assert error_code(bad.value) == "unknown_game"


def test_an_id_holding_a_nul_names_nothing_on_every_database(played: list[Played], channel: grpc.Channel) -> None:
    """PostgreSQL text cannot hold a NUL, so a query naming one failed there as INTERNAL (a
    traceback logged) where SQLite answered: every database now answers as for any id that
    names nothing (and a page token holding one is not ours)."""
    stub = pb_grpc.QueryServiceStub(channel)
    nul = "a\x00b"
    refused = [
        (stub.ListMatches, pb.ListMatchesRequest(game_id=nul), "INVALID_ARGUMENT", "unknown_game"),
        (stub.ListMatches, pb.ListMatchesRequest(page_token=base64.urlsafe_b64encode(
            json.dumps([1, nul]).encode()).decode().rstrip("=")), "INVALID_ARGUMENT", "bad_page_token"),
        (stub.GetMatchSummary, pb.GetMatchSummaryRequest(match_id=nul), "NOT_FOUND", "unknown_match"),
        (stub.GetLeaderboard, pb.GetLeaderboardRequest(game_id=nul), "INVALID_ARGUMENT", "unknown_game"),
        (stub.GetPlayerHistory, pb.GetPlayerHistoryRequest(player_id=nul), "NOT_FOUND", "unknown_player"),
        (stub.GetPlayerHistory, pb.GetPlayerHistoryRequest(player_id="ann", game_id=nul), "INVALID_ARGUMENT",
         "unknown_game"),
        (stub.GetTournamentStandings, pb.GetTournamentStandingsRequest(tournament_id=nul), "NOT_FOUND",
         "unknown_tournament"),
        (stub.GetTournamentStandings, pb.GetTournamentStandingsRequest(tournament_id="cup", game_id=nul),
         "INVALID_ARGUMENT", "unknown_game"),
    ]
    for call, request, status, code in refused:
        with pytest.raises(grpc.RpcError) as exc:
            call(request)
        assert (exc.value.code().name, error_code(exc.value)) == (status, code), request
    for request in (pb.ListMatchesRequest(player_id=nul), pb.ListMatchesRequest(tournament_id=nul)):
        assert not stub.ListMatches(request).matches
    assert stub.ListMatches(pb.ListMatchesRequest(player_id="ann")).matches  # the filters still filter


def test_a_page_token_naming_a_lone_surrogate_is_a_bad_page_token(played: list[Played], channel: grpc.Channel) -> None:
    """JSON may escape a lone surrogate ("\\udc00"), which no UTF-8 text, so no database, can
    hold: such a token was sent to the database, which failed the query (INTERNAL, a traceback
    logged), on SQLite and PostgreSQL alike. It is a token this server never made."""
    stub = pb_grpc.QueryServiceStub(channel)
    for raw in (b'[1,"\\udc00"]', b'[1700000000000,"m\\ud800"]'):
        token = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        for call, request in ((stub.ListMatches, pb.ListMatchesRequest(page_token=token)),
                              (stub.GetPlayerHistory, pb.GetPlayerHistoryRequest(player_id="ann", page_token=token))):
            with pytest.raises(grpc.RpcError) as exc:
                call(request)
            assert (exc.value.code(), error_code(exc.value)) == (grpc.StatusCode.INVALID_ARGUMENT, "bad_page_token")
    first = stub.ListMatches(pb.ListMatchesRequest(page_size=1))  # and paging still pages
    assert stub.ListMatches(pb.ListMatchesRequest(page_size=1, page_token=first.next_page_token)).matches
