"""Step 2 and Step 3 commands: the Boss's split, threats, Action cards, commits, turns
(GC-A01 to GC-A07, GC-D01 to GC-D06, GC-D09, GC-D10)."""

from __future__ import annotations

from typing import Any

from famiglia.engine import RuleViolation

from .. import events as ev
from .. import evolve as fold
from ..commands import SplitFields
from ..data import ACTION_CARDS, NOBODY
from ..emitter import Emitter
from ..state import ACTIONS, THREAT_TURNS, State, Step
from .rounds import after_public_change, close_if_all_committed, end_turn, open_step3, skip_spent_turns

CARD_STEPS = frozenset({Step.ACTIONS, Step.CARD_CHOICE})


def assign_loot(em: Emitter, seat: int, cmd: Any) -> None:
    """GC-A01 to GC-A03: one command maps every table card to one seat; then Step 3 opens."""
    s = em.state
    if s.step is not Step.DISTRIBUTE:
        raise RuleViolation("GC-A01", "loot is assigned in Step 2")
    if seat != s.boss:
        raise RuleViolation("GC-D01", f"only the Boss (seat {s.boss}) assigns the loot")
    if type(cmd) is SplitFields and cmd.table is s.table and cmd.seats:
        # listed for this very table: every card once, in table order, by construction
        seats = cmd.seats
        if len(seats) == len(s.table) and min(seats) >= 0 and max(seats) < s.seats:
            event = ev.remember_split(ev.loot_assigned_wire(cmd.body), "LootAssigned ", s.table, seats)
            em.emit_folded(event, fold.loot_assigned(s, seats))  # GC-A02
            open_step3(em)
            return
    seat_of: dict[str, int] = {}
    table = set(s.table)
    pairs = cmd.pairs if type(cmd) is SplitFields else [(a.card, a.seat) for a in cmd.assignments]
    for card, to in pairs:
        if card not in table:
            raise RuleViolation("GC-A03", f"{card or '(empty)'} is not table loot")
        if card in seat_of:
            raise RuleViolation("GC-A03", f"{card} is assigned twice")
        if not 0 <= to < s.seats:
            raise RuleViolation("GC-A03", f"there is no seat {to}")
        seat_of[card] = to
    missing = [c for c in s.table if c not in seat_of]
    if missing:
        raise RuleViolation("GC-A01", f"every table card must be assigned; missing {' '.join(missing)}")
    seats = tuple(seat_of[c] for c in s.table)
    event = ev.remember_split(ev.loot_assigned(zip(s.table, seats, strict=True)), "LootAssigned ", s.table, seats)
    em.emit_folded(event, fold.loot_assigned(s, seats))  # GC-A02
    open_step3(em)


def check_public_change(s: State, seat: int, code: str) -> None:
    """GC-A06, GC-D06, GC-D09: who may make a public change now."""
    if s.step is THREAT_TURNS:
        if seat != s.turn:
            raise RuleViolation("GC-D06", f"in Step 3a only seat {s.turn} acts now")
    elif s.step is not ACTIONS:
        raise RuleViolation(code, "threats and offers are made in Step 3 (in Step 3a in turn mode)")
    if s.changes[seat] >= s.config.public_change_limit:
        raise RuleViolation(
            "GC-D09", f"no public change left this round ({s.config.public_change_limit} made)"
        )


def place_threat(em: Emitter, seat: int, cmd: Any) -> None:
    """GC-A04, GC-A06: place or move the marker in front of one other player."""
    s = em.state
    check_public_change(s, seat, "GC-A04")
    if not 0 <= cmd.target < s.seats:
        raise RuleViolation("GC-A04", f"there is no seat {cmd.target}")
    if cmd.target == seat:
        raise RuleViolation("GC-A04", "nobody can threaten themselves")
    target = cmd.target
    if s.threats[seat] == target:
        raise RuleViolation("GC-A06", f"the marker already stands in front of seat {target}")
    em.emit_folded(ev.threat_placed(seat, target), fold.threat_placed(s, seat, target))
    after_public_change(em, seat)


def withdraw_threat(em: Emitter, seat: int, cmd: Any) -> None:
    """GC-A06."""
    s = em.state
    check_public_change(s, seat, "GC-A06")
    if s.threats[seat] == NOBODY:
        raise RuleViolation("GC-A06", "the marker is not out")
    em.emit_folded(ev.threat_withdrawn(seat), fold.threat_withdrawn(s, seat))
    after_public_change(em, seat)


def _check_card_choice(s: State, seat: int, card: int) -> None:
    if s.step not in CARD_STEPS:
        raise RuleViolation("GC-A07", "Action cards are chosen in Step 3 (Step 3b in turn mode)")
    if card not in ACTION_CARDS:
        raise RuleViolation("GC-A08", f"no such Action card {card}")
    if s.choices[seat] >= s.config.card_choice_limit:
        raise RuleViolation("GC-D10", f"all {s.config.card_choice_limit} card choices of this round are used")


def choose_action_card(em: Emitter, seat: int, cmd: Any) -> None:
    """GC-A07, GC-D10, GC-H06: the card lies face down; only the number of choices is public."""
    s = em.state
    card = cmd.card
    _check_card_choice(s, seat, card)
    if s.committed[seat]:
        raise RuleViolation("GC-D04", "a committed player changes the card with change_action_card")
    choices = s.choices[seat] + 1
    em.emit_folded(
        ev.action_card_chosen(seat, card, choices), fold.action_card_chosen(s, seat, card, choices)
    )
    if cmd.commit:
        em.emit_folded(ev.committed(seat), fold.committed(em.state, seat))
        close_if_all_committed(em)


def change_action_card(em: Emitter, seat: int, cmd: Any) -> None:
    """GC-D04: choosing again takes a committed player's commitment back."""
    s = em.state
    card = cmd.card
    _check_card_choice(s, seat, card)
    if not s.committed[seat]:
        raise RuleViolation("GC-D04", "an uncommitted player chooses with choose_action_card")
    choices = s.choices[seat] + 1
    em.emit_folded(
        ev.action_card_chosen(seat, card, choices), fold.action_card_chosen(s, seat, card, choices)
    )


def commit(em: Emitter, seat: int, cmd: Any) -> None:
    """GC-D04: a player with a card chosen commits; when all are committed Step 3 closes."""
    s = em.state
    if s.step not in CARD_STEPS:
        raise RuleViolation("GC-D04", "players commit in Step 3 (Step 3b in turn mode)")
    if s.committed[seat]:
        raise RuleViolation("GC-D04", "already committed")
    if not s.cards[seat]:
        raise RuleViolation("GC-D04", "choose an Action card before committing")
    em.emit_folded(ev.committed(seat), fold.committed(s, seat))
    close_if_all_committed(em)


def end_turn_command(em: Emitter, seat: int, cmd: Any) -> None:
    """GC-D06: the player ends their Step 3a turn."""
    s = em.state
    if s.step is not Step.THREAT_TURNS:
        raise RuleViolation("GC-D06", "turns exist only in Step 3a of turn mode")
    if seat != s.turn:
        raise RuleViolation("GC-D06", f"it is seat {s.turn}'s turn")
    end_turn(em, seat)
    skip_spent_turns(em)
