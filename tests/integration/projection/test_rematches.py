"""A series in the read models: a rematch's `match_created` names the match it follows
(`MatchCreated.rematch_of`), the projection writes it (`matches.rematch_of`, migration 0011),
and QueryService answers both ways: GetMatchSummary of the first match names its rematch,
the rematch's names the first, and so do ListMatches and GetPlayerHistory. Played through the
command service's use cases on the projection's Redis, served over real gRPC."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import grpc
import pytest

from famiglia.config import Settings
from famiglia.v1 import query_service_pb2 as pb
from famiglia.v1 import query_service_pb2_grpc as pb_grpc
from famiglia.v1.envelope_pb2 import SeatInfo
from services.command.app import CommandApp, Viewer
from services.command.bootstrap import bootstrap as command_bootstrap
from services.projection.app import ProjectionApp
from services.projection.entrypoints.grpc_server import serve

from . import dice_race
from .support import drain, dump


@pytest.fixture()
def stub(app: ProjectionApp) -> Iterator[pb_grpc.QueryServiceStub]:
    server, port = serve(app.sql, "127.0.0.1:0", workers=2, registry=app.registry)
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield pb_grpc.QueryServiceStub(channel)
    channel.close()
    server.stop(grace=None)


def _play_out(commands: CommandApp, match_id: str, rng: random.Random) -> None:
    """Random legal commands until the match ends, each seat by its creator's token."""
    for i in range(500):
        m = commands.matches.catch_up(commands.matches.get(match_id))
        if m.finished:
            return
        seat = rng.choice(sorted({p.seat for p in m.engine.pending(m.state)}))
        player = m.created.seat_info[seat].player_id
        viewer = commands.viewer(match_id, commands.signer.seat_token(match_id, seat, player))
        legal = commands.legal_commands(match_id, viewer).commands
        commands.submit(match_id, viewer, f"c{i}", rng.choice(legal), m.public_version)
    raise AssertionError("the match did not end")


def _ask_all(commands: CommandApp, match_id: str, players: list[str]) -> str:
    made = ""
    for seat, player in enumerate(players):
        made = commands.ask_rematch(match_id, Viewer(seat, player)).match_id
    assert made
    return made


def test_a_match_and_its_rematch_name_each_other(app: ProjectionApp, stub: pb_grpc.QueryServiceStub) -> None:
    app.migrate()
    commands = command_bootstrap(store=app.store, registry=app.registry, settings=Settings(secret="test"))
    rng = random.Random(11)
    players = ["ann", "bob"]
    first = commands.create_match(dice_race.GAME_ID, 2,
                                  seat_info=[SeatInfo(seat=s, player_id=p) for s, p in enumerate(players)]).match_id
    _play_out(commands, first, rng)
    rematch = _ask_all(commands, first, players)
    drain([app.runner("c0")])
    one = stub.GetMatchSummary(pb.GetMatchSummaryRequest(match_id=first)).match
    two = stub.GetMatchSummary(pb.GetMatchSummaryRequest(match_id=rematch)).match
    assert (one.status, one.rematch_of, one.rematch_id) == (pb.MATCH_STATUS_FINISHED, "", rematch)
    assert (two.status, two.rematch_of, two.rematch_id) == (pb.MATCH_STATUS_LIVE, first, "")
    # The rematch played out has a rematch of its own: a series of three, each naming its neighbours.
    _play_out(commands, rematch, rng)
    moved = [players[1], players[0]]  # every seat moved one on
    third = _ask_all(commands, rematch, moved)
    drain([app.runner("c0")])
    listed = {m.match_id: (m.rematch_of, m.rematch_id)
              for m in stub.ListMatches(pb.ListMatchesRequest(player_id="ann")).matches}
    assert listed == {first: ("", rematch), rematch: (first, third), third: (rematch, "")}
    history = stub.GetPlayerHistory(pb.GetPlayerHistoryRequest(player_id="bob"))
    assert {h.match.match_id: h.match.rematch_of for h in history.matches} == \
        {third: rematch, rematch: first, first: ""}
    incremental = dump(app.sql)
    app.rebuild()
    assert dump(app.sql) == incremental


def test_a_match_with_two_rematches_is_named_alike_by_the_read_models_and_getrematch(
        app: ProjectionApp, stub: pb_grpc.QueryServiceStub) -> None:
    """A server before the rematch's window (session 31) took a table's asks again once the
    first rematch's asks had expired (30 days): a second rematch, whose request id the new
    asks hold, so GetRematch named the second and the read models the first. Both name the
    newest now. (The asks lost here by a delete, as they expired then.)"""
    app.migrate()
    commands = command_bootstrap(store=app.store, registry=app.registry, settings=Settings(secret="test"))
    players = ["ann", "bob"]
    first = commands.create_match(dice_race.GAME_ID, 2,
                                  seat_info=[SeatInfo(seat=s, player_id=p) for s, p in enumerate(players)]).match_id
    _play_out(commands, first, random.Random(3))
    older = _ask_all(commands, first, players)
    since = time.time_ns() // 1_000_000
    while time.time_ns() // 1_000_000 == since:  # the next creation a millisecond later, as weeks were
        pass
    app.store.client.delete(app.store.keys.rematch(first))
    newer = _ask_all(commands, first, players)
    assert newer != older and commands.get_rematch(first, Viewer(None)).match_id == newer
    drain([app.runner("c0")])
    assert stub.GetMatchSummary(pb.GetMatchSummaryRequest(match_id=first)).match.rematch_id == newer
    listed = {m.match_id: (m.rematch_of, m.rematch_id)
              for m in stub.ListMatches(pb.ListMatchesRequest(player_id="ann")).matches}
    assert listed == {first: ("", newer), older: (first, ""), newer: (first, "")}
