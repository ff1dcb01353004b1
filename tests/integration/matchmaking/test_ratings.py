"""The projection's ratings bound to the rating window (SQLite read models), and the default
when the projection has not written anything yet."""

from __future__ import annotations

from pathlib import Path

import pytest

from famiglia.matchmaking import DEFAULT_RATING, FixedRatings, Rating
from services.matchmaking.ratings import ReadModelRatings, projection_ratings

readmodels = pytest.importorskip("famiglia.readmodels")


def test_rated_players_get_their_projection_rating(tmp_path: Path) -> None:
    from famiglia.readmodels.tables import PlayerRating

    engine = readmodels.make_engine(f"sqlite:///{tmp_path / 'read.db'}")
    readmodels.metadata.create_all(engine)
    with readmodels.write_session(engine) as session:
        session.add(PlayerRating(scope=readmodels.game_scope("grifters"), player_id="strong", mu=38.0,
                                 sigma=2.5, ordinal=30.5))
        session.add(PlayerRating(scope=readmodels.game_scope("nostra_city"), player_id="weak", mu=12.0,
                                 sigma=3.0, ordinal=3.0))
    ratings = ReadModelRatings(engine)
    got = ratings.ratings("grifters", ["strong", "weak", "new"])
    assert got == {"strong": Rating(38.0, 2.5), "weak": DEFAULT_RATING, "new": DEFAULT_RATING}


def test_without_read_models_everyone_has_the_default(tmp_path: Path) -> None:
    ratings = projection_ratings(f"sqlite:///{tmp_path / 'empty.db'}")  # no tables yet
    assert isinstance(ratings, ReadModelRatings)
    assert ratings.ratings("grifters", ["a"]) == {"a": DEFAULT_RATING}
    assert isinstance(projection_ratings(""), FixedRatings)


def _refusing_postgres() -> str:
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens there: refused at once
    return f"postgresql://famiglia@127.0.0.1:{port}/famiglia"


def test_a_database_away_is_the_default_for_a_ticket_and_raised_for_a_strict_read() -> None:
    """A ticket's window rates with the default (a leaderboard away stops no table); a profile's
    read is strict: the database's error, not the default shown as the player's rating."""
    from famiglia.grpcutil.errors import database_away

    ratings = projection_ratings(_refusing_postgres())
    assert ratings.ratings("grifters", ["a"]) == {"a": DEFAULT_RATING}
    with pytest.raises(Exception) as away:  # noqa: PT011 - whatever the driver raises, as @rpc maps it
        ratings.ratings("grifters", ["a"], strict=True)
    assert database_away(away.value)


def test_a_database_without_the_projections_tables_is_the_default_even_strict(tmp_path: Path) -> None:
    """No projection yet (no tables) is no outage: everyone has the default, a profile too."""
    ratings = projection_ratings(f"sqlite:///{tmp_path / 'empty.db'}")
    assert ratings.ratings("grifters", ["a"], strict=True) == {"a": DEFAULT_RATING}


@pytest.mark.redis
def test_get_profile_with_the_database_away_answers_unavailable_not_default_ratings(redis_url: str) -> None:
    """GetProfile showed every game's default rating, silently, while the read models' database was
    away: a rated player saw its ratings reset. Now UNAVAILABLE `store_unavailable`, as every other
    call that reads the database; a registration (whose guest has no rating yet) and a ticket
    (whose window takes the default) go on."""
    import grpc

    from famiglia.grpcutil.errors import error_code
    from famiglia.v1 import matchmaking_service_pb2 as pb
    from famiglia.v1 import matchmaking_service_pb2_grpc as pb_grpc
    from services.matchmaking.entrypoints.grpc_server import serve
    from tests.integration.matchmaking.conftest import GAME, RecordingCreator, make_mm

    mm = make_mm(redis_url, RecordingCreator(), ratings=projection_ratings(_refusing_postgres()))  # type: ignore[arg-type]
    server, port = serve(mm.app, "127.0.0.1:0", workers=4)
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        players, tickets = pb_grpc.PlayerServiceStub(channel), pb_grpc.MatchmakingServiceStub(channel)
        guest = players.RegisterGuest(pb.RegisterGuestRequest(display_name="Ann"), timeout=10)
        assert {r.mu for r in guest.profile.ratings} == {DEFAULT_RATING.mu}
        auth = (("authorization", f"Bearer {guest.player_token}"),)
        for request, metadata in ((pb.GetProfileRequest(), auth), (pb.GetProfileRequest(player_id=guest.player_id), ())):
            with pytest.raises(grpc.RpcError) as away:
                players.GetProfile(request, metadata=metadata, timeout=10)
            assert away.value.code() == grpc.StatusCode.UNAVAILABLE, away.value.details()
            assert error_code(away.value) == "store_unavailable" and "database" in away.value.details()
        created = tickets.CreateTicket(pb.CreateTicketRequest(game_id=GAME), metadata=auth, timeout=10)
        assert created.ticket_id
    finally:
        channel.close()
        server.stop(grace=None)
        mm.close()
