"""QueryService paging over real gRPC and SQL (SQLite and PostgreSQL): pages serve every row once
while matches keep arriving, and the sizes are those the proto documents (default 50, at most 500)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from famiglia.eventstore.envelopes import match_created_envelope
from famiglia.v1 import envelope_pb2
from famiglia.v1 import query_service_pb2 as pb
from famiglia.v1 import query_service_pb2_grpc as pb_grpc
from services.projection.app import ProjectionApp
from services.projection.entrypoints.grpc_server import serve

from .support import Clock, MatchSpec, drain, write_matches

START_MS = 1_700_000_000_000


def create(app: ProjectionApp, match_id: str, created_ms: int, players: tuple[str, ...] = ("ann", "bob")) -> None:
    """A match that has only begun (its `match_created`), projected at once."""
    created = envelope_pb2.MatchCreated(game_id="dice_race", seats=len(players), seed=1)
    for seat, player in enumerate(players):
        created.seat_info.add(seat=seat, player_id=player, display_name=player.title())
    app.store.append(match_id, 0, [match_created_envelope(match_id, created, now_ms=created_ms)])


@pytest.fixture()
def stub(app: ProjectionApp) -> Iterator[pb_grpc.QueryServiceStub]:
    server, port = serve(app.sql, "127.0.0.1:0", workers=2, registry=app.registry)
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield pb_grpc.QueryServiceStub(channel)
    channel.close()
    server.stop(grace=None)


def test_pages_serve_every_match_once_while_matches_arrive(app: ProjectionApp,
                                                           stub: pb_grpc.QueryServiceStub) -> None:
    # Twelve matches, three of them created in one millisecond (ordered by match id there).
    for i in range(12):
        create(app, f"m{i:02d}", START_MS + 1000 * min(i, 9))
    drain([app.runner("q")])
    before = [m.match_id for m in stub.ListMatches(pb.ListMatchesRequest(page_size=100)).matches]
    assert before == sorted(before, key=lambda m: (START_MS + 1000 * min(int(m[1:]), 9), m), reverse=True)
    seen: list[str] = []
    token = ""
    for page_number in range(100):
        page = stub.ListMatches(pb.ListMatchesRequest(page_size=4, page_token=token))
        seen += [m.match_id for m in page.matches]
        token = page.next_page_token
        if not token:
            break
        # Meanwhile: a newer match (ahead of the cursor: on no later page), one created in the
        # millisecond of m09..m11 (ahead of the cursor once the first page served them) and one
        # older than all (behind the cursor: on a later page).
        create(app, f"new{page_number}", START_MS + 60_000 + page_number)
        create(app, f"l{page_number}", START_MS + 1000 * 9)
        create(app, f"a{page_number}", START_MS - 1000 - page_number)
        drain([app.runner("q")])
    assert len(seen) == len(set(seen)), "a match served twice"
    assert [m for m in seen if m in before] == before, "a match missing or out of order"
    assert not [m for m in seen if m.startswith("new")]
    # Of those that arrived meanwhile, exactly the ones behind the cursor, each once.
    late = [m for m in seen if m not in before]
    assert sorted(late) == sorted(f"a{n}" for n in range(page_number))


def test_page_sizes_are_fifty_by_default_and_five_hundred_at_most(app: ProjectionApp,
                                                                  stub: pb_grpc.QueryServiceStub) -> None:
    for i in range(503):
        create(app, f"m{i:03d}", START_MS + i, players=(f"p{i % 7}", "bob"))
    drain([app.runner("q")], timeout=120)
    default = stub.ListMatches(pb.ListMatchesRequest())
    assert len(default.matches) == 50 and default.next_page_token
    widest = stub.ListMatches(pb.ListMatchesRequest(page_size=10_000))
    assert len(widest.matches) == 500 and widest.next_page_token
    rest = stub.ListMatches(pb.ListMatchesRequest(page_size=10_000, page_token=widest.next_page_token))
    assert [m.match_id for m in widest.matches] + [m.match_id for m in rest.matches] == \
        [f"m{i:03d}" for i in reversed(range(503))]
    assert not rest.next_page_token
    history = stub.GetPlayerHistory(pb.GetPlayerHistoryRequest(player_id="bob"))
    assert len(history.matches) == 50 and history.next_page_token
    bob: list[str] = []
    token = ""
    while True:
        page = stub.GetPlayerHistory(pb.GetPlayerHistoryRequest(player_id="bob", page_size=10_000, page_token=token))
        assert len(page.matches) <= 500
        bob += [m.match.match_id for m in page.matches]
        token = page.next_page_token
        if not token:
            break
    assert bob == [f"m{i:03d}" for i in reversed(range(503))]


def test_leaderboard_pages_by_offset_cover_the_board_once_ranked_from_the_top(
        app: ProjectionApp, stub: pb_grpc.QueryServiceStub) -> None:
    specs = [MatchSpec(f"d{i:02d}", [f"p{2 * i:03d}", f"p{2 * i + 1:03d}"], seed=500 + i) for i in range(28)]
    write_matches(app.store, app.registry, specs, Clock())
    drain([app.runner("q")], timeout=120)
    whole = stub.GetLeaderboard(pb.GetLeaderboardRequest(game_id="dice_race", limit=500)).entries
    assert len(whole) == 56
    default = stub.GetLeaderboard(pb.GetLeaderboardRequest(game_id="dice_race")).entries
    assert list(default) == list(whole[:50])
    paged = []
    for offset in range(0, 60, 9):
        paged += stub.GetLeaderboard(pb.GetLeaderboardRequest(game_id="dice_race", limit=9, offset=offset)).entries
    assert paged == list(whole)
    assert [e.rank for e in paged] == list(range(1, 57))


def test_a_players_pages_serve_each_match_once_whatever_time_its_seats_hold(database_url: str) -> None:
    """A player's matches are paged in their seats' order (created time, match id; migration
    0009). An old projection replica of a rolling deploy writes seats without the time, and the
    column's default (0) sorts them last: the page token held the match's time instead, and
    the page after such a match went back over every match of the player before it, for ever.
    Ties on the created time and a player in two seats of one match page once each too."""
    from famiglia import readmodels
    from famiglia.readmodels.queries import list_matches
    from famiglia.readmodels.tables import Match, MatchSeat
    from services.projection import schema

    engine = readmodels.make_engine(database_url)
    schema.upgrade(engine)
    old_replica = {"m6", "m7"}  # projected by a replica of the code before 0009: its seats hold 0
    with readmodels.write_session(engine) as session:
        for n in range(8):
            created = START_MS + 1000 * min(n, 4)  # m4..m7 created in one millisecond
            session.add(Match(match_id=f"m{n}", game_id="dice_race", status="live", seats=3, created_ms=created,
                              last_event_ms=created, version=1, seed=1, options={}, outcome={}))
            for seat, player in enumerate(("ann", "bob", "ann" if n % 3 == 0 else "cy")):
                session.add(MatchSeat(match_id=f"m{n}", seat=seat, player_id=player, details={},
                                      created_ms=0 if f"m{n}" in old_replica else created))
    expected = ["m5", "m4", "m3", "m2", "m1", "m0", "m7", "m6"]  # by the seats' time, then match id
    with readmodels.read_session(engine) as session:
        assert [m.match_id for m in list_matches(session, player_id="ann", page_size=100).matches] == expected
        for size in (1, 2, 3):
            seen: list[str] = []
            token = ""
            for _ in range(len(expected) + 1):
                page = list_matches(session, player_id="ann", page_size=size, page_token=token)
                seen += [m.match_id for m in page.matches]
                token = page.next_page_token
                if not token:
                    break
            assert seen == expected, f"pages of {size}"
    engine.dispose()
