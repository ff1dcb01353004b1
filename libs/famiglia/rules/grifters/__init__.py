"""Grifters (rules/grifters.md, GR-...): a hand-building card game of capers and Jobs for 2-4 players.

Modules in reading order: data (cards, Jobs, constants), config (GR-F01 options), state, events,
flow (the decision table), resolve (emit-and-fold context, end checks), effects (one function per
caper and reward code), decide, setup, evolve, commands (legal commands, pending, timeouts), view,
result, render, determinize.
"""

from __future__ import annotations

from famiglia.engine import GameInfo, Rng
from famiglia.engine.protocol import Result, Visibility
from famiglia.grifters.v1 import grifters_pb2 as pb

from . import commands, config, data, decide, determinize, evolve, render, result, setup, view
from .state import State

#: A true bound on accepted commands under random legal play: at most MAX_ROUNDS rounds of 4 turns
#: (GR-E08); a turn is one play decision plus at most two follow-up choices per nested caper, and a
#: chain of nested capers uses up a hand card or a not-yet-swapped Hideout card per level (GR-X21),
#: so at most 48 + 12 levels.
MAX_STEPS = data.MAX_ROUNDS * data.MAX_SEATS * (1 + 2 * (len(data.SPECIALISTS) + 12))

INFO = GameInfo(
    game_id="grifters",
    title="Grifters",
    min_players=data.MIN_SEATS,
    max_players=data.MAX_SEATS,
    options=config.OPTIONS,
    simultaneous=False,
    chance=True,
    max_steps=MAX_STEPS,
    optional_commands=frozenset(),
    command_type=pb.Command,
    event_type=pb.Event,
    view_type=pb.View,
)


class GriftersEngine:
    """The Decider for Grifters."""

    info = INFO

    # The hot methods are the module functions themselves (no extra call per command or event).
    setup = staticmethod(setup.setup)
    evolve = staticmethod(evolve.evolve)
    decide = staticmethod(decide.decide)
    pending = staticmethod(commands.pending)
    legal_commands = staticmethod(commands.legal_commands)

    def view(self, state: State, viewer: int | None) -> pb.View:
        return view.view(state, viewer)

    def visibility(self, event: pb.Event) -> Visibility:
        return view.visibility(event)

    def redact(self, event: pb.Event, viewer: int | None) -> pb.Event | None:
        return view.redact(event, viewer)

    def result(self, state: State) -> Result | None:
        if not state.over:  # asked after every command: answer at once
            return None
        return result.result(state)

    def timeout_command(self, state: State, seat: int) -> pb.Command | None:
        return commands.timeout_command(state, seat)

    def render_state(self, state: State) -> str:
        return render.render_state(state)

    def render_command(self, command: pb.Command) -> str:
        return render.render_command(command)

    def render_event(self, event: pb.Event) -> str:
        return render.render_event(event)

    def determinize(self, view: pb.View, seat: int, rng: Rng) -> State:
        return determinize.determinize(view, seat, rng)


ENGINE = GriftersEngine()

__all__ = ["ENGINE", "INFO", "GriftersEngine"]
