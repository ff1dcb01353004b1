"""decide(state, seat, command, rng): route a command to the open decision, then run the flow.

Modules in reading order: turns.py (setup, Commission, Crew actions, rulings, Family, Fence),
windows.py (card and reroll window answers), negotiation.py (shakedowns, trades, contracts, chat).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from famiglia.engine import MalformedCommand, NotYourTurn, Rng, RuleViolation

from ..flow import UNSET, advance, decision
from ..state import Phase, State
from ..tx import Tx
from . import negotiation, turns, windows

Handler = Callable[[Tx, int, Any, Any], None]

# decision kind -> command kind -> handler
DECIDERS: dict[str, dict[str, Handler]] = {
    "setup": {"place_setup_marker": turns.place_setup_marker},
    "commission": {
        "pass": turns.commission_pass,
        "play_for_influence": turns.commission_play,
        "play_or_effect": turns.commission_play,
        "discard_for_marker": turns.commission_play,
    },
    "window": {
        "pass": windows.answer,
        "play_for_influence": windows.answer,
        "play_or_effect": windows.answer,
        "buy_reroll": windows.answer,
    },
    "action": {
        "pass": turns.choose_action,
        "use_ability": turns.choose_action,
        "make_a_move": turns.choose_action,
        "whack": turns.choose_action,
    },
    "blackmail": {"grant_blackmail": turns.grant_blackmail},
    "ruling": {"rule_on_tie": turns.rule_on_tie},
    "invite": {"place_invited_marker": turns.place_invited_marker},
    "vacancy": {"fill_vacancy": turns.fill_vacancy},
    "buy": {"buy": turns.buy},
}

# Commands that never advance the game (NP-R6, NP-M9, NP-M10): any seat, any moment of rounds 1-5.
OPTIONAL: dict[str, Handler] = {
    "shakedown": negotiation.shakedown,
    "offer_deal": negotiation.offer_deal,
    "accept_deal": negotiation.accept_deal,
    "decline_deal": negotiation.decline_deal,
    "withdraw_deal": negotiation.withdraw_deal,
    "cancel_contract": negotiation.cancel_contract,
    "send_chat": negotiation.send_chat,
    "set_auto_pass": negotiation.set_auto_pass,
}

_ENDED = frozenset({Phase.OVER, Phase.FINAL})
_new = object.__new__
_RULE_OF = {
    "setup": "NP-S10", "commission": "NP-C1", "window": "NP-D5", "action": "NP-W14", "blackmail": "NP-W18",
    "ruling": "NP-W4", "invite": "NP-D12", "vacancy": "NP-Y5", "buy": "NP-F4",
}


def decide(state: State, seat: int, command: Any, rng: Rng) -> list[Any]:
    kind = command.WhichOneof("kind")
    if kind is None:
        raise MalformedCommand("NP-X21", "empty command")
    if not 0 <= seat < state.n:
        raise MalformedCommand("NP-X21", f"no seat {seat}")
    if state.phase in _ENDED and kind != "rule_on_tie":
        raise RuleViolation("NP-K3", "the game has ended; only final tie rulings are accepted")
    msg = None if kind == "pass" else getattr(command, kind)   # pass handlers read only the command
    tx = _new(Tx)   # `Tx(state, rng)` without its `__init__` frame: once per command
    tx.s = state
    tx.events = []
    tx.rng = rng
    optional = OPTIONAL.get(kind)
    if optional is not None:
        optional(tx, seat, msg, command)
        return tx.events
    d = state.__dict__.get("_memo", UNSET)   # `decision` written out: asked once per command
    if d is UNSET:
        d = decision(state)
    if d is None or seat not in d.seats:
        raise NotYourTurn("NP-X21", f"seat {seat} has no decision to make now")
    handler = DECIDERS[d.kind].get(kind)
    if handler is None:
        raise RuleViolation(_RULE_OF[d.kind], f"{kind} does not answer the open {d.kind} decision")
    handler(tx, seat, msg, command)
    advance(tx)
    return tx.events
