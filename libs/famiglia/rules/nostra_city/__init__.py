"""Nostra City (rules/nostra-city.md, NC-...): the rules engine.

Modules in reading order: data (cards), config (options, NC-K90), state, queries
(derived facts), flow (the phase table), evolve, setup, decide/ (business, meeting,
trial, reception, verdict, turns, common), effects (Vendetta cards), legal, view,
result, render, determinize.
"""

from __future__ import annotations

from famiglia.engine import MatchConfig, Rng
from famiglia.engine.protocol import GameInfo, Pending, Result, Visibility
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


class NostraCityEngine:
    """The Decider for Nostra City."""

    info = INFO

    def setup(self, config: MatchConfig, seed: int) -> list[pb.Event]:
        """NC-S01..S16."""
        return _setup(config, seed)

    def evolve(self, state: State | None, event: pb.Event) -> State:
        return _evolve(state, event)

    def decide(self, state: State, seat: int, command: pb.Command, rng: Rng) -> list[pb.Event]:
        return _decide(state, seat, command, rng)

    def pending(self, state: State) -> list[Pending]:
        return flow.pending(state)

    def legal_commands(self, state: State, seat: int, limit: int | None = None) -> list[pb.Command]:
        return legal.legal_commands(state, seat, limit)

    def view(self, state: State, viewer: int | None) -> pb.View:
        return view.view(state, viewer)

    def visibility(self, event: pb.Event) -> Visibility:
        return view.visibility(event)

    def redact(self, event: pb.Event, viewer: int | None) -> pb.Event | None:
        return view.redact(event, viewer)

    def result(self, state: State) -> Result | None:
        return result.result(state)

    def timeout_command(self, state: State, seat: int) -> pb.Command | None:
        """NC-D02..D12: end the turn, or the documented default of the pending choice."""
        if state.choice is not None:
            return _TIMEOUTS[state.choice.kind](state) if state.choice.seat == seat else None
        if seat == state.turn_seat and not state.draws:
            return pb.Command(end_turn=pb.EndTurn())
        return None

    def render_state(self, state: State) -> str:
        return render.render_state(state)

    def render_command(self, command: pb.Command) -> str:
        return render.render_command(command)

    def render_event(self, event: pb.Event) -> str:
        return render.render_event(event)

    def determinize(self, view: pb.View, seat: int, rng: Rng) -> State:
        return _determinize.determinize(view, seat, rng)


ENGINE = NostraCityEngine()

__all__ = ["ENGINE", "INFO", "NostraCityEngine"]
