"""GoodCritters (rules/goodcritters.md, ids GC-...): the rules engine.

Modules in reading order: data (cards, Fuzz table), config (GC-K01 options), state, flow (the
step table), commands and events (message constructors), setup, decide (one function per
command; `decide.rounds` runs the steps nobody decides), effects (what each Action card does),
evolve, legal (legal commands and timeouts), sampler (draws from a compound choice), view (view, visibility, redaction), result,
render, determinize.

Choices the rules leave to the engine, and why:

- Step 3 commits (GC-D04). `choose_action_card` is for an uncommitted seat (with `commit` set
  it commits at once, which the Step 3 timeout uses, GC-D05); a committed seat that changes
  its mind uses `change_action_card`, an optional move that takes its commitment back. So
  `pending` (every uncommitted seat) names exactly the seats with a non-optional move, as the
  engine contract demands, and the choice cap of GC-D10 counts both.
- Step 1 and Step 4 have no decision: the command that leads into them (the Boss's split, the
  last commit) carries every event up to the next decision or the end of the game.
- A Guard revealed out of turn by a Rob (GC-A10) is resolved at once: the Rob's counter-steal
  (GC-A15), then the offers in front of its owner (GC-P11, "right after the target's Action card
  is revealed and resolved"), so Loot going back to a robbing briber is out of that counter-steal's
  reach (GC-P09, GC-P12).
- The Step 3 deadline (GC-D05) is the timeout command of every uncommitted seat: commit the
  chosen card, or play the configured default card (Vote Yes) and commit.
- Secret content travels in events private to the seats that may see it; every other seat
  gets the same event with the content cleared (`view.redact`). The pile is server-only.
"""

from __future__ import annotations

from famiglia.engine import Decider, GameInfo
from famiglia.engine.protocol import Result
from famiglia.goodcritters.v1 import goodcritters_pb2 as pb

from . import config, data, flow, legal, render, result, setup, view
from .decide import decide as _decide
from .determinize import determinize as _determinize
from .evolve import evolve as _evolve
from .state import OVER, State

MAX_ROUNDS = 140 - 4 * data.MIN_PLAYERS + 2
"""Every round takes at least one card from the pile (GC-D10, GC-V06: reveal_after_failed_vote >= 1)."""


def _max_steps() -> int:
    """A true bound on accepted commands under any legal play (GC-D09, GC-D10).

    Per round and player: at most P public changes (gifts included), C card choices, one
    end_turn, and one commit per time the player is uncommitted (at most 1 + C + N*P).
    """
    n = data.MAX_PLAYERS
    p = max(int(c) for c in config.SPECS["step3_public_change_limit"].choices)
    c = max(int(x) for x in config.SPECS["step3_card_choice_limit"].choices)
    per_round = 1 + n * (p + c + 1) + n * (1 + c + n * p)
    return per_round * MAX_ROUNDS


INFO = GameInfo(
    game_id="goodcritters",
    title="GoodCritters",
    min_players=data.MIN_PLAYERS,
    max_players=data.MAX_PLAYERS,
    options=config.OPTIONS,
    simultaneous=True,
    chance=True,
    max_steps=_max_steps(),
    optional_commands=frozenset(flow.OPTIONAL),
    command_type=pb.Command,
    event_type=pb.Event,
    view_type=pb.View,
)


def _result(state: State) -> Result | None:
    if state.step is not OVER:  # asked after every command: answer at once
        return None
    return result.result(state)


ENGINE = Decider(
    info=INFO,
    setup=setup.setup,
    evolve=_evolve,
    decide=_decide,
    pending=flow.pending_list,  # GC-D01: the Boss in Step 2, the uncommitted in Step 3, the turn in 3a
    legal_commands=legal.legal_commands,
    view=view.view,
    visibility=view.visibility,
    redact=view.redact,
    result=_result,
    timeout_command=legal.timeout_command,
    render_state=render.render_state,
    render_command=render.render_command,
    render_event=render.render_event,
    determinize=_determinize,
    clock_key=flow.clock_key,  # GC-D05: one Step 3 deadline for every seat
)

__all__ = ["ENGINE", "INFO", "State"]
