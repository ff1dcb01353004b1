"""Nostra City (rules/nostra-city.md, NC-...): the rules engine.

Modules in reading order: data (cards), config (options, NC-K90), state, queries
(derived facts), flow (the phase table), evolve, setup, decide/ (business, meeting,
trial, reception, verdict, turns, common), effects (Vendetta cards), legal, sampler (compound choices counted and drawn), view,
result, render, determinize.
"""

from __future__ import annotations

from famiglia.engine import Decider
from famiglia.engine.protocol import GameInfo
from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

from . import determinize as _determinize
from . import flow, legal, render, result, view
from .config import OPTIONS
from .decide import decide as _decide
from .decide.business import default_distribution
from .decide.meeting import default_keep, default_title
from .decide.turns import default_rage
from .evolve import evolve as _evolve
from .setup import setup as _setup
from .state import State

INFO = GameInfo(
    game_id="nostra_city",
    title="Nostra City",
    min_players=3,
    max_players=5,
    options=OPTIONS,
    # NC-D01: bids and Corruptions are secret but placed in turn; at most one seat decides at a time.
    simultaneous=False,
    chance=True,
    # NC-D15: per month and seat at most 9 Business, 10 Meeting and 21 Trial commands, plus two
    # per Vendetta card drawn (at most ~190 draws a month): 6 * (5 * 40 + 2 * 200) + 2 < 4000.
    max_steps=4000,
    optional_commands=frozenset(),
    command_type=pb.Command,
    event_type=pb.Event,
    view_type=pb.View,
)

_TIMEOUTS = {
    "distribute": lambda s: pb.Command(distribute_notes=default_distribution(s)),
    "keep": lambda s: pb.Command(keep_notes=default_keep(s)),
    "consigliere": lambda s: pb.Command(assign_title=default_title(s)),
    "primo_capo": lambda s: pb.Command(assign_title=default_title(s)),
    "rage": lambda s: pb.Command(play_rage=default_rage(s)),
}


def _timeout_command(state: State, seat: int) -> pb.Command | None:
    """NC-D02..D12: end the turn, or the documented default of the pending choice."""
    if state.choice is not None:
        return _TIMEOUTS[state.choice.kind](state) if state.choice.seat == seat else None
    if seat == state.turn_seat and not state.draws:
        return pb.Command(end_turn=pb.EndTurn())
    return None


ENGINE = Decider(
    info=INFO,
    setup=_setup,  # NC-S01..S16
    evolve=_evolve,
    decide=_decide,
    pending=flow.pending,
    legal_commands=legal.legal_commands,
    view=view.view,
    visibility=view.visibility,
    redact=view.redact,
    result=result.result,
    timeout_command=_timeout_command,
    render_state=render.render_state,
    render_command=render.render_command,
    render_event=render.render_event,
    determinize=_determinize.determinize,
    clock_key=flow.clock_key,  # NC-D02: a turn's clock is not restarted by its own actions
)

__all__ = ["ENGINE", "INFO"]
