"""Replay from the projection's SQL event archive after the Redis stream was trimmed."""

from __future__ import annotations

import pytest

from famiglia.replay.client import ReplayClient
from famiglia.replay.sources import EventLocation, sql_archive_source
from famiglia.replay.toy import GAME_ID

from .conftest import Stack, play, start_replay

readmodels = pytest.importorskip("famiglia.readmodels", reason="SQL archive binding: no famiglia.readmodels yet")
pytestmark = pytest.mark.redis


def _archive(url: str, envelopes) -> None:
    """What the projection does for every event: one archive row, in one transaction."""
    from famiglia.readmodels.archive import archive_row

    engine = readmodels.make_engine(url)
    readmodels.metadata.create_all(engine)
    with readmodels.write_session(engine) as session:
        session.add_all(archive_row(e) for e in envelopes)
    engine.dispose()


def test_a_replay_from_the_sql_archive_after_trimming_redis_equals_one_from_redis(stack: Stack, tmp_path) -> None:
    played = play(stack.commands, GAME_ID, 3, seed=51, options={"turns": "24"})
    envelopes = stack.store.read(played.match_id)
    url = f"sqlite:///{tmp_path / 'archive.db'}"
    _archive(url, envelopes)

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
