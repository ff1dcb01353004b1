"""Replay from the projection's SQL event archive (written by the real projection) after the Redis
stream was trimmed: the same answer as from Redis."""

from __future__ import annotations

import pytest

from famiglia.config import Settings
from famiglia.replay.client import ReplayClient, operator_token
from famiglia.replay.sources import EventLocation, sql_archive_source
from famiglia.replay.toy import GAME_ID
from tests.support.postgres import postgres_database, postgres_server, postgres_url  # noqa: F401

from ...unit.replay.games import registry
from .conftest import Stack, play, start_replay

readmodels = pytest.importorskip("famiglia.readmodels", reason="SQL archive binding: no famiglia.readmodels yet")
pytestmark = pytest.mark.redis


def _archive(stack: Stack, url: str, match_id: str) -> None:
    """Run the real projection until it archived the whole match (as it does in production)."""
    from services.projection.bootstrap import bootstrap as projection_bootstrap

    projection = projection_bootstrap(store=stack.store, sql=readmodels.make_engine(url), registry=registry(),
                                      settings=Settings(secret="x", redis_url=stack.redis_url))
    runner = projection.runner("replay-test")
    version = stack.store.version(match_id)
    for _ in range(200):
        runner.run_once(block_ms=50)
        with readmodels.read_session(projection.sql) as session:
            if readmodels.archived_version(session, match_id) == version:
                break
    else:
        raise AssertionError("the projection did not archive the match")
    projection.sql.dispose()


def test_a_replay_from_the_sql_archive_after_trimming_redis_equals_one_from_redis(stack: Stack, tmp_path) -> None:
    played = play(stack.commands, GAME_ID, 3, seed=51, options={"turns": "24"})
    envelopes = stack.store.read(played.match_id)
    url = f"sqlite:///{tmp_path / 'archive.db'}"
    _archive(stack, url, played.match_id)

    def replay(client: ReplayClient) -> list:
        return [
            [s.SerializeToString() for s in client.stream(match_id=played.match_id, full=True)],
            [s.SerializeToString() for s in client.stream(match_id=played.match_id, token=played.tokens[2])],
            [client.state_at(e.event_id, token=played.tokens[0]).SerializeToString() for e in envelopes],
            [(e.event_id, e.seq, e.type) for e in client.events(played.match_id)],
            client.verify(match_id=played.match_id).ok,
        ]

    from_redis = replay(stack.client)
    assert stack.store.trim(played.match_id) == len(envelopes) and not stack.store.read(played.match_id)
    cold = sql_archive_source(url)
    assert cold is not None
    assert cold.find(envelopes[7].event_id) == EventLocation(played.match_id, 8)
    assert cold.read(played.match_id, after=10) == envelopes[10:]
    server, address = start_replay(stack.store, cold)
    client = ReplayClient(address)
    try:
        assert replay(client) == from_redis
    finally:
        client.close()
        server.stop(grace=None)


def test_a_database_without_an_archive_reads_as_empty(tmp_path) -> None:
    cold = sql_archive_source(f"sqlite:///{tmp_path / 'empty.db'}")
    assert cold is not None
    assert cold.read("m-none") == [] and cold.find("01NOSUCHEVENT") is None


def test_an_archive_whose_database_is_away_answers_unavailable_not_unknown_match(stack: Stack) -> None:
    """A trimmed match asked for while the database refuses connections: read as an empty archive,
    it was answered NOT_FOUND `unknown_match`, which a client believes; now UNAVAILABLE
    `store_unavailable`, which it retries. A hot match is still served meanwhile."""
    import socket

    import grpc

    from famiglia.grpcutil.errors import error_code

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens there: refused at once
    trimmed = play(stack.commands, GAME_ID, 2, seed=52)
    assert stack.store.trim(trimmed.match_id)
    hot = play(stack.commands, GAME_ID, 2, seed=53)
    cold = sql_archive_source(f"postgresql://famiglia@127.0.0.1:{port}/famiglia")
    server, address = start_replay(stack.store, cold)
    client = ReplayClient(address)
    try:
        assert client.events(hot.match_id)
        with pytest.raises(grpc.RpcError) as away:
            client.events(trimmed.match_id)
        assert away.value.code() == grpc.StatusCode.UNAVAILABLE, away.value.details()
        assert error_code(away.value) == "store_unavailable"
    finally:
        client.close()
        server.stop(grace=None)


def test_imported_matches_are_projected_beside_their_original_and_rate_no_one(stack: Stack, tmp_path) -> None:
    """An import of a match this server holds (the P1 wedge) and one claiming players and a
    tournament (the P2 forgery): both archived by the real projection, neither rated nor ranked."""
    from famiglia.replay.export import dump, load
    from famiglia.v1.envelope_pb2 import MatchCreated

    from .conftest import SECRET

    played = play(stack.commands, GAME_ID, 2, seed=52, options={"turns": "24"})
    data = stack.client.export(played.match_id, binary=True).file
    forged = load(data)
    created = MatchCreated.FromString(forged.events[0].payload)
    created.seat_info.add(seat=0, player_id="attacker", display_name="Attacker")
    created.seat_info.add(seat=1, player_id="victim", display_name="Victim")
    created.tournament_id = "t-forged"
    forged.events[0].payload = created.SerializeToString(deterministic=True)
    forged.setup.CopyFrom(created)
    token = operator_token(SECRET)
    assert stack.client.import_file(data, token=token, new_match_id="m-again").verification.ok
    assert stack.client.import_file(dump(forged, binary=True), token=token, new_match_id="m-forged").verification.ok
    url = f"sqlite:///{tmp_path / 'archive.db'}"
    for match_id in (played.match_id, "m-again", "m-forged"):
        _archive(stack, url, match_id)
    engine = readmodels.make_engine(url)
    with readmodels.read_session(engine) as session:
        for match_id in ("m-again", "m-forged"):
            summary = readmodels.match_summary(session, match_id)
            assert summary is not None and summary.status == "finished" and summary.tournament_id == ""
            assert all(seat.player_id == "" for seat in summary.seats)
        assert readmodels.leaderboard(session, GAME_ID) == []
        assert readmodels.tournament_standings(session, "t-forged") == []
    engine.dispose()


def test_an_id_holding_a_nul_is_no_archived_match_or_event_on_postgres(postgres_url: str) -> None:  # noqa: F811
    """PostgreSQL text holds no NUL, so no archived match or event id has one: an id that does (a
    client's typo, a fuzzer's) is not in the archive. It was sent to the database anyway, whose
    driver refused it (DataError): INTERNAL for GetStateAt, StreamReplay, ListMatchEvents and the
    rest, where every other unknown id is NOT_FOUND `unknown_event` or `unknown_match`."""
    from famiglia.eventstore.memory_store import InMemoryEventStore
    from famiglia.grpcutil.errors import NotFound
    from services.projection.schema import upgrade
    from services.replay.bootstrap import ReplaySettings
    from services.replay.bootstrap import bootstrap as replay_bootstrap

    upgrade(readmodels.make_engine(postgres_url))
    cold = sql_archive_source(postgres_url)
    assert cold is not None
    assert cold.read("m\x00trimmed") == [] and cold.find("01\x00EVENT") is None
    app = replay_bootstrap(store=InMemoryEventStore(), cold=cold, registry=registry(),
                           settings=Settings(secret="x"), replay_settings=ReplaySettings())
    with pytest.raises(NotFound) as no_event:
        app.state_at("01\x00EVENT", None)
    assert no_event.value.code == "unknown_event"
    with pytest.raises(NotFound) as no_match:
        app.list_events("m\x00trimmed", None)
    assert no_match.value.code == "unknown_match"
