"""A match played straight on an engine, stored as the command service stores it.

Tests and the benchmark need whole recorded matches without running the
command service; this builds the very envelopes it would write (same builders,
same seq numbering, the command on the first envelope of its events).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping

from famiglia.engine import Engine
from famiglia.eventstore.envelopes import game_envelopes, match_created_envelope
from famiglia.testing.random_play import Playthrough, play_random
from famiglia.v1 import envelope_pb2


def envelopes_of(play: Playthrough, match_id: str | None = None, *, start_ms: int = 1_700_000_000_000,
                 step_ms: int = 1000) -> list[envelope_pb2.EventEnvelope]:
    """Every envelope of a played match, match_created first; command k is stamped start + k*step."""
    match_id = match_id or "m" + secrets.token_hex(10)[:19]
    engine = play.engine
    created = envelope_pb2.MatchCreated(game_id=engine.info.game_id, seats=play.config.seats, seed=play.seed)
    created.options.update(play.config.options)
    out = [match_created_envelope(match_id, created, now_ms=start_ms)]
    out += game_envelopes(engine, match_id, 1, play.setup_events, seat=-1, now_ms=start_ms)
    for k, step in enumerate(play.steps, start=1):
        if len(out) != step.version_before:
            raise AssertionError(f"step {k}: version {step.version_before}, but {len(out)} envelopes")
        out += game_envelopes(engine, match_id, step.version_before, step.events, command_id=f"c{k}",
                              seat=step.seat, command=step.command, now_ms=start_ms + k * step_ms)
    return out


def random_match(engine: Engine, seats: int, seed: int, options: Mapping[str, str] | None = None,
                 match_id: str | None = None, **kwargs: int) -> tuple[Playthrough, list[envelope_pb2.EventEnvelope]]:
    """Random legal play to the end, and its envelopes."""
    play = play_random(engine, seats, seed, options)
    return play, envelopes_of(play, match_id, **kwargs)
