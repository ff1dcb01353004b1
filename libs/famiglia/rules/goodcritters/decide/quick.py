"""Quick decisions: the listed commands that make most of a Step 3 (a card, a commit, a threat),
decided and folded in one call when they change nothing but the acting seat's own fields.

Each quick decider answers only when every check of the general decider (`step3`) passes and
the command ends no step (not the last commit, not in Step 3a); otherwise it answers None and
`decide` goes the general way, which gives the refusal or runs the round on. So the rules keep
one definition: the guards here are the general checks read as conditions, and the states come
from evolve's own value functions. Why: a Step 3 is most of a match's commands, and the
general way (an Emitter, a dispatch, a check function per rule, a run for the fold memo) cost
about as much again as the change itself. `tests/unit/goodcritters/test_fast_paths.py` decides
every listed command both ways.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import events as ev
from .. import evolve as fold
from ..config import SPECS
from ..data import ACTION_CARDS, MAX_PLAYERS, NOBODY
from ..events import Event
from ..state import ACTIONS, CARD_CHOICE, State

Quick = Callable[[State, int, Any], "list[Event] | None"]

# `_LAST[0] = (before, event, after)` is `evolve.remember_one` written out (a call saved per
# command): the fold that follows finds the state these deciders already made. The fold's value
# functions and the events are bound here once: most commands are one of these deciders, and a
# module attribute read or a cached constructor call costs more than a tuple index.
_LAST = fold.LAST
_chosen = fold.action_card_chosen
_committed = fold.committed
_threat_placed = fold.threat_placed
_threat_withdrawn = fold.threat_withdrawn
_SEATS = range(MAX_PLAYERS)
_CHOICES = range(1 + max(int(c) for c in SPECS["step3_card_choice_limit"].choices))
_CHOSEN_EVENT = tuple(
    tuple(
        tuple(ev.action_card_chosen(seat, card, n) for n in _CHOICES) if card in ACTION_CARDS else ()
        for card in range(max(ACTION_CARDS) + 1)
    )
    for seat in _SEATS
)
"""ev.action_card_chosen(seat, card, choices) as [seat][card][choices]: the very shared events."""
_COMMITTED_EVENT = tuple(ev.committed(seat) for seat in _SEATS)
_THREAT_EVENT = tuple(tuple(ev.threat_placed(seat, target) for target in _SEATS) for seat in _SEATS)
_WITHDRAWN_EVENT = tuple(ev.threat_withdrawn(seat) for seat in _SEATS)
_IS_ACTION_CARD = frozenset(ACTION_CARDS)
"""ACTION_CARDS as a set: a card is checked on every card choice, and `in` scans a tuple."""


def choose_action_card(s: State, seat: int, cmd: Any) -> list[Event] | None:
    """GC-A07, GC-D10; with `commit`, GC-D04 unless it is the last commitment."""
    step = s.step
    if (step is ACTIONS or step is CARD_CHOICE) and 0 <= seat < s.seats:
        committed = s.committed
        choices = s.choices[seat] + 1
        card = cmd.card
        if not committed[seat] and choices <= s.config.card_choice_limit and card in _IS_ACTION_CARD:
            event = _CHOSEN_EVENT[seat][card][choices]
            after = _chosen(s, seat, card, choices)
            if not cmd.commit:
                _LAST[0] = (s, event, after)
                return [event]
            if committed.count(False) > 1:  # the last commitment closes Step 3: the general way
                second = _COMMITTED_EVENT[seat]
                _LAST[0] = (s, event, after)
                _LAST[1] = (after, second, _committed(after, seat))
                return [event, second]
    return None


def change_action_card(s: State, seat: int, cmd: Any) -> list[Event] | None:
    """GC-D04: a committed seat chooses again (and so is no longer committed)."""
    step = s.step
    if (step is ACTIONS or step is CARD_CHOICE) and 0 <= seat < s.seats and s.committed[seat]:
        choices = s.choices[seat] + 1
        card = cmd.card
        if choices <= s.config.card_choice_limit and card in _IS_ACTION_CARD:
            event = _CHOSEN_EVENT[seat][card][choices]
            _LAST[0] = (s, event, _chosen(s, seat, card, choices))
            return [event]
    return None


def commit(s: State, seat: int, cmd: Any) -> list[Event] | None:
    """GC-D04, unless it is the last commitment (which closes Step 3)."""
    step = s.step
    if (step is ACTIONS or step is CARD_CHOICE) and 0 <= seat < s.seats:
        committed = s.committed
        if not committed[seat] and s.cards[seat] and committed.count(False) > 1:
            event = _COMMITTED_EVENT[seat]
            _LAST[0] = (s, event, _committed(s, seat))
            return [event]
    return None


def place_threat(s: State, seat: int, cmd: Any) -> list[Event] | None:
    """GC-A04, GC-A06, GC-D09 in open mode (a Step 3a turn may end with it: the general way)."""
    if s.step is ACTIONS and 0 <= seat < s.seats and s.changes[seat] < s.config.public_change_limit:
        target = cmd.target
        if 0 <= target < s.seats and target != seat and s.threats[seat] != target:
            event = _THREAT_EVENT[seat][target]
            _LAST[0] = (s, event, _threat_placed(s, seat, target))
            return [event]
    return None


def withdraw_threat(s: State, seat: int, cmd: Any) -> list[Event] | None:
    """GC-A06, GC-D09 in open mode."""
    if (
        s.step is ACTIONS
        and 0 <= seat < s.seats
        and s.changes[seat] < s.config.public_change_limit
        and s.threats[seat] != NOBODY
    ):
        event = _WITHDRAWN_EVENT[seat]
        _LAST[0] = (s, event, _threat_withdrawn(s, seat))
        return [event]
    return None


QUICK: dict[str, Quick] = {
    "choose_action_card": choose_action_card,
    "change_action_card": change_action_card,
    "commit": commit,
    "place_threat": place_threat,
    "withdraw_threat": withdraw_threat,
}
