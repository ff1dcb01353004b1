"""Nothing Personal (rules/nothing-personal.md, rule ids NP-...): the rules engine.

Modules in reading order: data (Tables A-H; data/*.toml hold the placeholder card lists), config
(options), expansions (NP-V7 set files, loaded here at import), state, board (queries), events,
evolve, tx (events applied as emitted), effects (Table F codes), plays (card plays), crew (the
Crew, windows, dice), family (Fence, Feds, Family, final scoring), rounds (phase and round boundaries), flow (the phase table), setup, decide/ (commands),
legal, sampler (draws from compound choices), view, result (tie-breakers), render, determinize.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from famiglia.engine import Decider, GameInfo, Result
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb

from . import determinize as _det
from . import expansions, family, flow, legal, render, result, setup, view
from .board import ring_order
from .config import OPTIONS
from .decide import OPTIONAL, decide
from .evolve import evolve
from .state import Phase, State
from .tx import NEXT
from .view import HELD, HELD_PADDING


def _evolve(state: State | None, event: Any) -> State:
    """`evolve`, reusing the state `decide` computed for this very event after this very state
    (`tx.folded` written out: this runs once per event of every fold). The link is taken out at
    once (a hit consumes it) and put back if it belongs to another event: an engine no-op event
    leaves its state unchanged, so that state's link is the next event's."""
    try:
        d = state.__dict__
    except AttributeError:   # None: the match's first event
        return evolve(state, event)
    link = d.pop(NEXT, None)
    if link is not None:
        if link[0] is event:
            return link[1]   # type: ignore[no-any-return]
        d.setdefault(NEXT, link)   # (`setdefault`: another thread may have linked it meanwhile)
    return evolve(state, event)


INFO = GameInfo(
    game_id="nothing_personal",
    title="Nothing Personal",
    min_players=3,
    max_players=5,
    options=OPTIONS,
    simultaneous=False,
    chance=True,
    max_steps=20_000,
    optional_commands=frozenset(OPTIONAL),
    held_events=HELD,
    held_padding=HELD_PADDING,
    engine_chat="send_chat",
    command_type=pb.Command,
    event_type=pb.Event,
    view_type=pb.View,
)


def _result(state: State) -> Result | None:
    if state.phase != Phase.OVER:   # asked after every command: answer at once
        return None
    return result.result(state)


def _timeout_command(state: State, seat: int) -> Any | None:
    """The documented defaults of NP-D3..NP-D14."""
    d = flow.decision(state)
    if d is None or seat not in d.seats:
        return None
    if d.kind == "setup":
        gid = next(g for g in reversed(state.board[:9]) if g)
        return pb.Command(place_setup_marker=pb.PlaceSetupMarker(gangster=gid))
    if d.kind == "invite":
        gid = next(g for g in reversed(state.board[:9]) if g)
        return pb.Command(place_invited_marker=pb.PlaceInvitedMarker(gangster=gid))
    if d.kind == "blackmail":
        return pb.Command(grant_blackmail=pb.GrantBlackmail(accept=False))
    if d.kind == "ruling":
        assert state.ruling is not None
        first = next(i for i in ring_order(state) if i in state.ruling.seats)
        return pb.Command(rule_on_tie=pb.RuleOnTie(seat=first))
    if d.kind == "vacancy":
        assert state.vacancy is not None
        gid = family.default_candidate(state, state.vacancy.candidates)
        return pb.Command(fill_vacancy=pb.FillVacancy(gangster=gid))
    if d.kind == "buy":
        return pb.Command(buy=pb.Buy(count=0))
    return legal.PASS


ENGINE = Decider(
    info=INFO,
    setup=setup.setup,
    evolve=_evolve,
    decide=decide,
    pending=flow.pending,
    legal_commands=legal.legal_commands,
    view=view.view,
    visibility=view.visibility,
    redact=view.redact,
    result=_result,
    timeout_command=_timeout_command,
    render_state=render.render_state,
    render_command=render.render_command,
    render_event=render.render_event,
    determinize=_det.determinize,
)


expansions.install(expansions.PACKAGE_DIR)   # NP-V7: the set files shipped with the package (none yet)


def engine(expansions_dir: str | Path | None = None) -> Decider:
    """The engine; with `expansions_dir`, the set files found there are installed first (NP-V7).

    Installed sets are process-wide (the cards' marker indices are fixed once installed): install
    at start-up, before matches run."""
    if expansions_dir is not None:
        expansions.install(expansions_dir)
    return ENGINE


__all__ = ["ENGINE", "INFO", "engine"]
