"""Grifters (rules/grifters.md, GR-...): a hand-building card game of capers and Jobs for 2-4 players.

Modules in reading order: data (cards, Jobs, constants), config (GR-F01 options), state, events,
flow (the decision table), resolve (emit-and-fold context, end checks), effects (one function per
caper and reward code), decide, setup, evolve, commands (legal commands, pending, timeouts), sampler (Teams drawn by index), view,
result, render, determinize.
"""

from __future__ import annotations

from famiglia.engine import Decider, GameInfo
from famiglia.engine.protocol import Result
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


def _result(state: State) -> Result | None:
    if not state.over:  # asked after every command: answer at once
        return None
    return result.result(state)


ENGINE = Decider(
    info=INFO,
    setup=setup.setup,
    evolve=evolve.evolve,
    decide=decide.decide,
    pending=commands.pending,
    legal_commands=commands.legal_commands,
    view=view.view,
    visibility=view.visibility,
    redact=view.redact,
    result=_result,
    timeout_command=commands.timeout_command,
    render_state=render.render_state,
    render_command=render.render_command,
    render_event=render.render_event,
    determinize=determinize.determinize,
)

__all__ = ["ENGINE", "INFO"]
