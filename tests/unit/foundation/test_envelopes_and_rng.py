"""Event ids, envelopes and derived randomness."""

from __future__ import annotations

from famiglia.engine import Rng, derive_seed
from famiglia.eventstore.envelopes import match_created_envelope, new_event_id, open_match_created
from famiglia.v1 import envelope_pb2


def test_event_ids_are_unique_and_sort_by_time() -> None:
    ids = [new_event_id(1_000 + i) for i in range(200)]
    assert len(set(ids)) == 200
    assert ids == sorted(ids)
    assert all(len(i) == 26 for i in ids)


def test_the_match_created_event_is_server_only_and_round_trips() -> None:
    created = envelope_pb2.MatchCreated(game_id="g", seats=4, seed=99)
    env = match_created_envelope("m1", created, trace={"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"})
    assert env.seq == 1 and env.visibility.kind == envelope_pb2.VISIBILITY_SERVER
    assert open_match_created(env).seed == 99
    assert env.trace["traceparent"].startswith("00-")


def test_rng_is_derived_from_seed_and_version() -> None:
    a = Rng.derive(7, 10).shuffled(range(50))
    b = Rng.derive(7, 10).shuffled(range(50))
    c = Rng.derive(7, 11).shuffled(range(50))
    assert a == b and a != c
    assert derive_seed(1, 2) != derive_seed(2, 1)
