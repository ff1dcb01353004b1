"""decide(state, seat, command, rng): one function per command kind, dispatched by a dict.

Modules in reading order: `step3` (Step 2 and Step 3 commands), `payoff` (the variant's
commands), `rounds` (what runs by itself: Step 1, Step 4, the vote, the clean-up, the end).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from famiglia.engine import MalformedCommand, Rng, RuleViolation

from ..commands import LISTED, SPLITS, SplitFields
from ..emitter import Emitter
from ..events import Event
from ..flow import FLOW
from ..state import OVER, State, Step
from . import payoff, step3
from .quick import QUICK

Decider = Callable[[Emitter, int, Any], None]

DECIDERS: dict[str, Decider] = {
    "assign_loot": step3.assign_loot,
    "place_threat": step3.place_threat,
    "withdraw_threat": step3.withdraw_threat,
    "choose_action_card": step3.choose_action_card,
    "change_action_card": step3.change_action_card,
    "commit": step3.commit,
    "end_turn": step3.end_turn_command,
    "give_gift": payoff.give_gift,
    "make_offer": payoff.make_offer,
    "withdraw_offer": payoff.withdraw_offer,
}

# the rule that names when each kind may be used, for refusals outside its steps
WINDOW_RULE: dict[str, str] = {
    "assign_loot": "GC-A01",
    "place_threat": "GC-A04",
    "withdraw_threat": "GC-A06",
    "choose_action_card": "GC-A07",
    "change_action_card": "GC-D04",
    "commit": "GC-D04",
    "end_turn": "GC-D06",
    "give_gift": "GC-P06",
    "make_offer": "GC-P08",
    "withdraw_offer": "GC-P08",
}


_ALLOWED: dict[Step, frozenset[str]] = {step: row.commands for step, row in FLOW.items()}


_QUICK_LISTED: dict[int, tuple[Any, Any, Any]] = {}
"""Listed commands of the quick kinds by id: (the command, its quick decider, its fields), filled
as they are first decided (a bounded set: the shared listed commands live for the process)."""


def decide(state: State, seat: int, command: Any, rng: Rng) -> list[Event]:
    quick = _QUICK_LISTED.get(id(command))  # most commands: one look-up to the quick decider
    if quick is not None:
        listed_command, decider, fields = quick
        if listed_command is command:
            events = decider(state, seat, fields)
            if events is not None:
                return events
    listed = LISTED.get(id(command))
    if listed is None:
        split = SPLITS.get(id(command))
        if split is not None:  # a listed split: its fields made now, for the one split played
            listed = (split[0], "assign_loot", SplitFields(split[1], split[2], split[3]))
    if listed is not None and listed[0] is command:  # a listed command: read-only
        kind = listed[1]
        body = listed[2]
        if quick is None and kind in QUICK and id(command) in LISTED:
            _QUICK_LISTED[id(command)] = (command, QUICK[kind], body)
            events = QUICK[kind](state, seat, body)
            if events is not None:
                return events
    else:
        kind = command.WhichOneof("kind")
        if kind is None:
            raise MalformedCommand("GC-D01", "empty command")
        body = getattr(command, kind)
        # A command parsed from the wire (the server's, a worker's) is not listed, but its
        # fields read the same: the quick deciders' guards are the general checks, so any
        # value they do not accept goes the general way and gets its refusal there.
        decider = QUICK.get(kind)
        if decider is not None:
            events = decider(state, seat, body)
            if events is not None:
                return events
    step = state.step
    if step is OVER:
        raise RuleViolation("GC-E06", "the game is over")
    if not 0 <= seat < state.seats:
        raise RuleViolation("GC-S02", f"there is no seat {seat}")
    allowed = _ALLOWED.get(step)
    if allowed is None or kind not in allowed:
        raise RuleViolation(WINDOW_RULE[kind], f"{kind} is not allowed in step {step.name}")
    em = Emitter(state, rng)
    DECIDERS[kind](em, seat, body)
    return em.done()
