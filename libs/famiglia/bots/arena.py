"""Play a match on an engine with one policy per seat, no services: for the strength
benchmark and tests. Each policy gets only its seat's view and legal commands."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from famiglia.engine import Engine, MatchConfig, Result, Rng, RuleViolation, fold
from famiglia.engine.rng import derive_seed

from .policy import Decision, Policy


@dataclass
class ArenaMatch:
    result: Result
    commands: int
    seconds: dict[int, float] = field(default_factory=dict)
    """Thinking time per seat."""
    decisions: dict[int, int] = field(default_factory=dict)
    fallbacks: int = 0


def play_match(rules: Engine, policies: Sequence[Policy], seed: int, *,
               options: Mapping[str, str] | None = None, max_commands: int | None = None,
               on_command: Callable[[], None] | None = None) -> ArenaMatch:
    """Play to the end. A refused choice (a policy bug) falls back to a random legal command."""
    seats = len(policies)
    state = fold(rules, rules.setup(MatchConfig(seats, dict(options or {})), seed))
    version = 1 + 1  # match_created + the setup events, as the store counts (approximately)
    chooser = random.Random(seed)
    played = ArenaMatch(result=None, commands=0)  # type: ignore[arg-type]
    limit = max_commands or rules.info.max_steps
    while (result := rules.result(state)) is None:
        if played.commands >= limit:
            raise RuntimeError(f"{rules.info.game_id}: no end after {limit} commands (seed {seed})")
        pendings = rules.pending(state)
        if not pendings:
            raise RuntimeError(f"{rules.info.game_id}: nobody to act and no result (seed {seed})")
        seat = pendings[chooser.randrange(len(pendings))].seat
        legal = tuple(rules.legal_commands(state, seat, limit=64))
        decision = Decision(rules.info.game_id, seat, rules.view(state, seat), legal, version,
                            derive_seed(seed, version, f"seat{seat}"))
        started = time.perf_counter()
        command = policies[seat].choose(rules, decision)
        played.seconds[seat] = played.seconds.get(seat, 0.0) + time.perf_counter() - started
        played.decisions[seat] = played.decisions.get(seat, 0) + 1
        try:
            events = rules.decide(state, seat, command, Rng.derive(seed, version))
        except RuleViolation:
            played.fallbacks += 1
            events = _any_accepted(rules, state, seat, chooser.sample(legal, len(legal)), Rng.derive(seed, version))
        state = fold(rules, events, state)
        version += len(events)
        played.commands += 1
        if on_command is not None:
            on_command()
    played.result = result
    return played


def _any_accepted(rules: Engine, state: object, seat: int, commands: Sequence[object], rng: Rng) -> list:
    """The events of the first command the engine accepts (a listed command it refuses
    is an engine bug; the match plays on, as the service would with another choice)."""
    for command in commands:
        try:
            return rules.decide(state, seat, command, rng)  # type: ignore[arg-type]
        except RuleViolation:
            continue
    raise RuntimeError(f"{rules.info.game_id}: seat {seat} has legal commands but the engine refuses them all")
