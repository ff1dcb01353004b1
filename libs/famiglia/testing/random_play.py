"""Play a match with random legal commands, straight on an engine (no services)."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from famiglia.engine import Engine, MatchConfig, Rng, fold
from famiglia.engine.protocol import Command, Event, State


@dataclass(slots=True)
class Step:
    seat: int
    command: Command
    events: list[Event]
    version_before: int


@dataclass
class Playthrough:
    engine: Engine
    config: MatchConfig
    seed: int
    setup_events: list[Event]
    steps: list[Step] = field(default_factory=list)
    state: State = None

    @property
    def events(self) -> list[Event]:
        out = list(self.setup_events)
        for s in self.steps:
            out.extend(s.events)
        return out


def choose_actor(engine: Engine, state: State, chooser: random.Random) -> tuple[int, Command] | None:
    """A pending seat picked at random and one of its legal commands picked at random."""
    pendings = engine.pending(state)
    if not pendings:
        return None
    seats = sorted({p.seat for p in pendings})
    seat = seats[chooser.randrange(len(seats))]
    commands = engine.legal_commands(state, seat, limit=64)
    if not commands:
        raise AssertionError(f"pending seat {seat} has no legal command\n{engine.render_state(state)}")
    return seat, commands[chooser.randrange(len(commands))]


def play_random(
    engine: Engine,
    seats: int,
    seed: int,
    options: Mapping[str, str] | None = None,
    *,
    policy_seed: int | None = None,
    max_steps: int | None = None,
    on_step: Callable[[State, Step, State], Any] | None = None,
) -> Playthrough:
    """Random legal play to the end. `on_step(before, step, after)` sees every step.

    The loop is `choose_actor`, `decide` and `fold` written out with the engine's methods
    bound once: it runs once per command of every benchmark and property test, so its own
    cost counts (the draws written out inline). The draws are the same, so the same seeds play the same games."""
    config = MatchConfig(seats=seats, options=dict(options or {}))
    setup_events = engine.setup(config, seed)
    state = fold(engine, setup_events)
    play = Playthrough(engine, config, seed, setup_events, state=state)
    chooser = random.Random(seed if policy_seed is None else policy_seed)
    getrandbits = chooser.getrandbits
    version = len(setup_events) + 1  # + the MatchCreated envelope the store writes first
    limit = max_steps or engine.info.max_steps
    result, pending, legal_commands = engine.result, engine.pending, engine.legal_commands
    decide, evolve, derive = engine.decide, engine.evolve, Rng.derive
    steps = play.steps
    while result(state) is None:
        if len(steps) >= limit:
            raise AssertionError(f"{engine.info.game_id}: no end after {limit} commands (seed {seed})")
        pendings = pending(state)
        # choose_actor's draws, as CPython makes `randrange(n)`: getrandbits of n's bit length
        # until below n (so randrange(1) draws too); first a seat among the sorted pending seats
        if len(pendings) == 1:
            seat = pendings[0].seat
            while getrandbits(1):
                pass
        else:
            if not pendings:
                raise AssertionError(f"{engine.info.game_id}: nobody pending but no result (seed {seed})")
            # the sorted distinct seats, taken in one plain loop (engines list them in order)
            choices: list[int] = []
            in_order = True
            for p in pendings:
                if choices and p.seat <= choices[-1]:
                    in_order = False
                choices.append(p.seat)
            if not in_order:
                choices = sorted(set(choices))
            n = len(choices)
            bits = n.bit_length()
            r = getrandbits(bits)
            while r >= n:
                r = getrandbits(bits)
            seat = choices[r]
        # then one of its legal commands
        commands = legal_commands(state, seat, limit=64)
        n = len(commands)
        if not n:
            raise AssertionError(f"pending seat {seat} has no legal command\n{engine.render_state(state)}")
        bits = n.bit_length()
        r = getrandbits(bits)
        while r >= n:
            r = getrandbits(bits)
        command = commands[r]
        events = decide(state, seat, command, derive(seed, version))
        step = Step(seat, command, events, version)
        before = state
        for event in events:
            state = evolve(state, event)
        version += len(events)
        steps.append(step)
        if on_step is not None:
            on_step(before, step, state)
    play.state = state
    return play
