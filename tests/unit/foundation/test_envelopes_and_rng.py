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


def test_rng_generator_is_the_one_random_random_makes() -> None:
    """The generator is seeded without random.Random's Python wrappers: same state, same draws."""
    import random

    for seed in [0, 1, 7, -7, 2**32, 2**64 - 1, 2**70 + 3, derive_seed(3, 40), derive_seed(3, 40, "rob")]:
        rng, plain = Rng(seed), random.Random(seed)
        assert rng._seeded().getstate()[1] == plain.getstate()[1]
        assert [rng.randrange(10), rng.randint(-3, 3), rng.die(), rng.random()] == [
            plain.randrange(10), plain.randint(-3, 3), plain.randint(1, 6), plain.random()]
    derived, plain = Rng.derive(5, 12, "x"), random.Random(derive_seed(5, 12, "x"))
    items = list(range(40))
    plain_items = list(items)
    plain.shuffle(plain_items)
    assert derived.shuffled(items) == plain_items and items == list(range(40))
    assert derived.sample(range(100), 5) == plain.sample(list(range(100)), 5)
    assert derived.choice("abcdefgh") == "abcdefgh"[plain.randrange(8)]


def test_a_batchs_envelopes_are_the_fields_set_one_by_one() -> None:
    """game_envelopes starts each envelope from the batch's shared bytes: the result is the
    envelope built field by field, the shared fields, the event's own and the command."""
    from famiglia.engine import MatchConfig
    from famiglia.engine.registry import default_registry
    from famiglia.eventstore.envelopes import game_envelopes

    engine = default_registry().get("goodcritters")
    events = list(engine.setup(MatchConfig(seats=4, options={}), 5))
    trace = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01", "tracestate": "vendor=x1"}
    command = engine.info.command_type()  # type: ignore[misc]
    out = game_envelopes(engine, "m7", 3, events, command_id="c9", seat=2, trace=trace, now_ms=1_700_000_000_123,
                         command=command)
    for i, (env, event) in enumerate(zip(out, events, strict=True)):
        shown = engine.visibility(event)
        expected = envelope_pb2.EventEnvelope()
        expected.match_id, expected.command_id, expected.seat, expected.game_id = "m7", "c9", 2, "goodcritters"
        expected.timestamp.seconds, expected.timestamp.nanos = 1_700_000_000, 123_000_000
        expected.trace["traceparent"], expected.trace["tracestate"] = trace["traceparent"], trace["tracestate"]
        expected.event_id, expected.seq, expected.type = env.event_id, 4 + i, event.WhichOneof("kind") or ""
        expected.payload_type = event.DESCRIPTOR.full_name
        expected.payload = event.SerializeToString(deterministic=True)
        expected.visibility.kind = int(shown.kind)  # type: ignore[assignment]
        expected.visibility.seats.extend(sorted(shown.seats))
        if i == 0:
            expected.command = command.SerializeToString(deterministic=True)
        assert env == expected


def test_rng_draws_are_random_randoms_for_every_range() -> None:
    """randrange, randint, choice and die skip random.Random's Python frames, not its draws: the
    same numbers for small, power-of-two and huge ranges, the same errors for empty ones."""
    import random

    import pytest

    for seed in [*range(40), -7, 2**64 - 1, derive_seed(3, 40, "rob")]:
        rng, plain = Rng(seed), random.Random(seed)
        for n in [1, 2, 3, 7, 8, 9, 16, 17, 100, 2**30, 2**30 + 1, 8**10, 5**12, 2**64 + 5]:
            assert rng.randrange(n) == plain.randrange(n)
            assert rng.randint(-n, n) == plain.randint(-n, n)
            assert rng.randint(n, n) == plain.randint(n, n)
            items = list(range(n % 50 + 1))
            assert rng.choice(items) == items[plain.randrange(len(items))]
        assert [rng.die(), rng.die(20), rng.random()] == [plain.randint(1, 6), plain.randint(1, 20), plain.random()]
    rng = Rng(1)
    for call in (lambda: rng.randrange(0), lambda: rng.randrange(-3), lambda: rng.randint(3, 2), lambda: rng.choice([])):
        with pytest.raises(ValueError):
            call()
