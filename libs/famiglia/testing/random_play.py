"""Play a match with random legal commands, straight on an engine (no services)."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from sys import getrefcount
from typing import Any

from famiglia.engine import Engine, MatchConfig, Rng, fold
from famiglia.engine.protocol import Command, Event, State


@dataclass(slots=True)
class Step:
    seat: int
    command: Command
    events: list[Event]
    version_before: int


Row = tuple[int, Command, list[Event], int]
"""A step as random play keeps it: (seat, command, events, version_before)."""


@dataclass
class Playthrough:
    engine: Engine
    config: MatchConfig
    seed: int
    setup_events: list[Event]
    rows: list[Row] = field(default_factory=list)
    state: State = None
    _steps: list[Step] = field(default_factory=list, repr=False, compare=False)

    @property
    def steps(self) -> list[Step]:
        """The steps as records, made when first asked for: the benchmark never reads them, and
        a plain tuple per command costs a third of a record made by its `__init__`."""
        if len(self._steps) != len(self.rows):
            self._steps = [Step(*row) for row in self.rows]
        return self._steps

    @property
    def events(self) -> list[Event]:
        out = list(self.setup_events)
        for row in self.rows:
            out.extend(row[2])
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
    sampler: random.Random | None = None,
) -> Playthrough:
    """Random legal play to the end. `on_step(before, step, after)` sees every step. With a
    `sampler`, compound choices are drawn from all their legal members (`legal_commands`'s
    `rng`), not only the representative ones bots choose among.

    The loop is `choose_actor`, `decide` and `fold` written out with the engine's methods
    bound once: it runs once per command of every benchmark and property test, so its own
    cost counts. The draws are the very ones `choose_actor` makes, so the same seeds play the
    same games."""
    config = MatchConfig(seats=seats, options=dict(options or {}))
    setup_events = engine.setup(config, seed)
    state = fold(engine, setup_events)
    play = Playthrough(engine, config, seed, setup_events, state=state)
    getrandbits = random.Random(seed if policy_seed is None else policy_seed).getrandbits
    version = len(setup_events) + 1  # + the MatchCreated envelope the store writes first
    limit = max_steps or engine.info.max_steps
    result, pending, legal_commands = engine.result, engine.pending, engine.legal_commands
    decide, evolve, derive = engine.decide, engine.evolve, Rng.derive
    rows = play.rows
    # `decide` gets a lazily derived generator (`Rng.derive`); most commands draw nothing and
    # keep no reference to it, so one object is re-aimed at each version instead of a new one
    # made (a call and an object per command); a new one is made whenever anyone still holds
    # the last, so what an engine kept never changes
    rng = derive(seed, version)
    alone = getrefcount(rng)
    # the last pending list of two or more (our own copy) and its sorted distinct seats: at
    # 6-8 seats ~40% of commands leave the same seats pending (a card choice), and comparing
    # two lists of the same records is cheaper than reading every seat again
    known: list[Any] = [None]
    choices: list[int] = []
    n_choices = bits_choices = 0
    for _ in range(limit):
        if result(state) is not None:
            break
        pendings = pending(state)
        # choose_actor's draws, as CPython makes `randrange(n)`: getrandbits of n's bit length
        # until below n (so randrange(1) draws too); first a seat among the sorted pending seats
        if len(pendings) == 1:
            seat = pendings[0].seat
            while getrandbits(1):
                pass
        else:
            if pendings != known:
                if not pendings:
                    raise AssertionError(f"{engine.info.game_id}: nobody pending but no result (seed {seed})")
                known = pendings.copy()
                # the sorted distinct seats, taken in one plain loop (engines list them in order)
                choices = []
                in_order = True
                last = -1
                for p in pendings:
                    seat = p.seat
                    if seat <= last:
                        in_order = False
                    choices.append(seat)
                    last = seat
                if not in_order:
                    choices = sorted(set(choices))
                n_choices = len(choices)
                bits_choices = n_choices.bit_length()
            r = getrandbits(bits_choices)
            while r >= n_choices:
                r = getrandbits(bits_choices)
            seat = choices[r]
        # then one of its legal commands
        commands = legal_commands(state, seat, 64) if sampler is None else legal_commands(state, seat, 64, rng=sampler)
        n = len(commands)
        if not n:
            raise AssertionError(f"pending seat {seat} has no legal command\n{engine.render_state(state)}")
        bits = n.bit_length()
        r = getrandbits(bits)
        while r >= n:
            r = getrandbits(bits)
        command = commands[r]
        # the generator for this version: the last one, re-aimed, unless the engine kept it
        if getrefcount(rng) > alone:
            rng = derive(seed, version)
        else:
            rng._seed = (seed, version, "")
            rng._rand = None
        events = decide(state, seat, command, rng)
        rows.append((seat, command, events, version))
        if on_step is None:
            for event in events:
                state = evolve(state, event)
        else:
            before = state
            for event in events:
                state = evolve(state, event)
            on_step(before, Step(seat, command, events, version), state)
        version += len(events)
    else:
        if result(state) is None:
            raise AssertionError(f"{engine.info.game_id}: no end after {limit} commands (seed {seed})")
    play.state = state
    return play
