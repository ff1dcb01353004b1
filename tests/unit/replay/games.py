"""The games replay tests run on: every registered engine, plus Stash (the replay toy game).

Stash keeps the suite meaningful before (and whatever) the real engines land;
each real engine joins automatically once `default_registry()` finds it.
"""

from __future__ import annotations

import functools

from famiglia.engine import Engine
from famiglia.engine.registry import Registry, default_registry
from famiglia.replay.recorded import random_match
from famiglia.replay.toy import toy_engine
from famiglia.v1.envelope_pb2 import EventEnvelope


def _registered() -> dict[str, Engine]:
    """`default_registry()`: an engine that fails to load fails the tests, it is not left out."""
    return {e.info.game_id: e for e in default_registry().engines()}


@functools.cache
def registry() -> Registry:
    engines = _registered()
    toy = toy_engine()
    engines[toy.info.game_id] = toy
    return Registry(engines)


def game_ids() -> list[str]:
    return list(registry())


def engine(game_id: str) -> Engine:
    return registry().get(game_id)


def toy_options(game_id: str) -> dict[str, str]:
    return {"turns": "30"} if game_id == toy_engine().info.game_id else {}


@functools.cache
def recorded(game_id: str, seed: int = 3, seats: int | None = None) -> tuple[EventEnvelope, ...]:
    """A whole random match of the game, stored as the command service stores it (cached per session)."""
    eng = engine(game_id)
    _, envelopes = random_match(eng, seats or eng.info.min_players, seed, toy_options(game_id))
    return tuple(envelopes)


def copy(envelopes: tuple[EventEnvelope, ...] | list[EventEnvelope]) -> list[EventEnvelope]:
    return [EventEnvelope.FromString(e.SerializeToString()) for e in envelopes]
