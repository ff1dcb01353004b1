"""The Payoff variant's commands: gifts, binding offers and withdrawals (GC-P01 to GC-P10,
GC-D07, GC-D09). Nobody is asked to accept; items move at once."""

from __future__ import annotations

from typing import Any

from famiglia.engine import RuleViolation

from .. import events as ev
from ..emitter import Emitter
from ..state import State, Step
from .rounds import after_public_change
from .step3 import check_public_change

YES, NO = 1, 2
VISIBILITY_KEYS = {1: "open", 2: "peek", 3: "hidden"}


def _check_enabled(s: State) -> None:
    if not s.config.payoff:
        raise RuleViolation("GC-P01", "the Payoff variant is off in this match")


def _check_items(s: State, seat: int, loot: list[str], payoff_cards: int, code: str) -> tuple[str, ...]:
    """Items come from the giver's own Stash and Payoff cards, at least one in all."""
    if len(set(loot)) != len(loot):
        raise RuleViolation(code, "a Loot card is named twice")
    stash = set(s.stashes[seat])
    for card in loot:
        if card not in stash:
            raise RuleViolation(code, f"{card or '(empty)'} is not in your Stash")
    if not 0 <= payoff_cards <= s.payoff_cards[seat]:
        raise RuleViolation(code, f"you hold {s.payoff_cards[seat]} Payoff cards")
    if not loot and not payoff_cards:
        raise RuleViolation(code, "at least one item")
    return tuple(loot)


def _check_other_seat(s: State, seat: int, other: int, code: str) -> None:
    if not 0 <= other < s.seats:
        raise RuleViolation(code, f"there is no seat {other}")
    if other == seat:
        raise RuleViolation(code, "not to yourself")


def give_gift(em: Emitter, seat: int, cmd: Any) -> None:
    """GC-P06: Steps 2 and 3 (in turn mode Step 2 and the giver's own Step 3a turn)."""
    s = em.state
    _check_enabled(s)
    steps = s.config.gift_steps
    if s.step is Step.DISTRIBUTE and 2 in steps:
        if s.changes[seat] >= s.config.public_change_limit:
            raise RuleViolation("GC-D09", "no public change left this round")
    elif s.step in (Step.ACTIONS, Step.THREAT_TURNS) and 3 in steps:
        check_public_change(s, seat, "GC-P06")
    else:
        raise RuleViolation("GC-P06", "gifts are given in Steps " + ",".join(map(str, sorted(steps))))
    _check_other_seat(s, seat, cmd.receiver, "GC-P06")
    loot = _check_items(s, seat, list(cmd.loot), cmd.payoff_cards, "GC-P06")
    em.emit(ev.gift_given(seat, cmd.receiver, loot, cmd.payoff_cards, cmd.open))
    after_public_change(em, seat)


def make_offer(em: Emitter, seat: int, cmd: Any) -> None:
    """GC-P07, GC-P08, GC-P10: a token with items in front of another player."""
    s = em.state
    _check_enabled(s)
    check_public_change(s, seat, "GC-P08")
    _check_other_seat(s, seat, cmd.target, "GC-P07")
    if cmd.side not in (YES, NO):
        raise RuleViolation("GC-P07", "the token shows Yes or No")
    if VISIBILITY_KEYS.get(cmd.visibility) not in s.config.offer_visibilities:
        raise RuleViolation("GC-P10", "offered Loot lies " + ", ".join(sorted(s.config.offer_visibilities)))
    if s.offers_out(seat) >= s.config.tokens_per_player:
        raise RuleViolation("GC-P08", "no Payoff token left")
    if s.offer(seat, cmd.target) is not None:
        raise RuleViolation("GC-P08", f"you already have an offer in front of seat {cmd.target}")
    loot = _check_items(s, seat, list(cmd.loot), cmd.payoff_cards, "GC-P08")
    em.emit(ev.offer_made(seat, cmd.target, cmd.side, loot, cmd.payoff_cards, cmd.visibility))
    after_public_change(em, seat)


def withdraw_offer(em: Emitter, seat: int, cmd: Any) -> None:
    """GC-P08: until Step 3 closes; the items go straight back."""
    s = em.state
    _check_enabled(s)
    check_public_change(s, seat, "GC-P08")
    if s.offer(seat, cmd.target) is None:
        raise RuleViolation("GC-P08", f"you have no offer in front of seat {cmd.target}")
    em.emit(ev.offer_withdrawn(seat, cmd.target))
    after_public_change(em, seat)
