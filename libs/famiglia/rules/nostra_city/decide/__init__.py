"""decide(state, seat, command, rng): one function per command kind, then the automatic
flow (draws, auto-ended turns, resolutions, the Reception) until someone must decide.

Split by the game's phases: business, meeting, trial, reception, verdict; `turns` holds
what every turn phase shares and `common` the emitter and the draws.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from famiglia.engine import Rng, RuleViolation
from famiglia.engine.errors import MalformedCommand, NotYourTurn
from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

from ..flow import CHOICES, TURNS, turn_ends_itself
from ..state import Phase, State
from . import business, meeting, trial, turns
from .common import Emitter, draw_vendetta, refuse
from .reception import end_trial, start_phase

Handler = Callable[[Emitter, int, Any, Rng], None]

_TURN_HANDLERS: dict[str, Handler] = {
    "cash_in": business.cash_in,
    "place_bid": meeting.place_bid,
    "corrupt": trial.corrupt,
    "play_vendetta": turns.play_vendetta,
    "end_turn": turns.end_turn,
}
_CHOICE_HANDLERS: dict[str, Handler] = {
    "distribute_notes": business.distribute_notes,
    "keep_notes": meeting.keep_notes,
    "assign_title": meeting.assign_title,
    "play_rage": turns.play_rage,
}
_FORCED: dict[str, Callable[[State], Any]] = {
    "distribute": business.forced_distribution,
    "keep": meeting.forced_keep,
    "consigliere": meeting.forced_title,
    "primo_capo": meeting.forced_title,
    "rage": turns.forced_rage,
}


def decide(state: State, seat: int, command: pb.Command, rng: Rng) -> list[pb.Event]:
    kind = command.WhichOneof("kind")
    if kind is None:
        raise MalformedCommand("NC-D01", "empty command")
    if state.phase is Phase.OVER:
        raise NotYourTurn("NC-V01", "the match is over")
    if not 0 <= seat < state.seats:
        raise MalformedCommand("NC-S02", f"no seat {seat}")
    em = Emitter(state)
    choice = state.choice
    if choice is not None:
        row = CHOICES[choice.kind]
        if seat != choice.seat:
            raise NotYourTurn(row.rule, f"seat {choice.seat} is choosing ({choice.kind})")
        if kind != row.command:
            raise refuse(row.rule, f"answer the pending {choice.kind} choice first")
        _CHOICE_HANDLERS[kind](em, seat, getattr(command, kind), rng)
    else:
        if kind not in _TURN_HANDLERS:
            raise refuse("NC-D01", f"no {kind} choice is pending")
        if seat != state.turn_seat or state.draws:
            raise NotYourTurn("NC-R02", f"it is seat {state.turn_seat}'s turn")
        _TURN_HANDLERS[kind](em, seat, getattr(command, kind), rng)
    settle(em, rng)
    return em.events


def settle(em: Emitter, rng: Rng) -> None:
    """Run everything that needs no decision (NC-D03, NC-K44, NC-M05, NC-C01)."""
    while True:
        s = em.state
        if s.phase is Phase.OVER:
            return
        if s.choice is not None:
            forced = _FORCED[s.choice.kind](s)
            if forced is None:
                return
            kind = CHOICES[s.choice.kind].command
            _CHOICE_HANDLERS[kind](em, s.choice.seat, forced, rng)
            continue
        if s.draws:
            draw_vendetta(em, rng)
            continue
        if s.phase is Phase.RESOLUTION:
            _resolution_step(em, rng)
            continue
        if s.turn < len(s.order):
            seat = s.order[s.turn]
            if not turn_ends_itself(s, seat):
                return
            em(turn_ended=pb.TurnEnded(seat=seat, automatic=True))
            continue
        if s.phase is Phase.TRIAL:
            end_trial(em, rng)
        else:
            start_phase(em, TURNS[s.phase].next, s.month)


def _resolution_step(em: Emitter, rng: Rng) -> None:
    s = em.state
    if not s.locations_revealed:
        meeting.reveal_locations(em)
    elif s.resolution <= 4:
        meeting.resolve_space(em, rng)
    elif s.resolution == 5:
        meeting.meeting_cheats(em)
    else:
        start_phase(em, Phase.TRIAL, s.month)  # NC-M16: Location cards go home at the Trial


__all__ = ["decide", "settle", "Emitter", "draw_vendetta", "RuleViolation"]
