"""Sequential decisions: setup markers (NP-S10), Commission turns (NP-C), Crew action turns and
blackmail (NP-W14, NP-W18), tie rulings (NP-W4), invitations (INVITE_1), vacancies (NP-Y), the Fence (NP-F4)."""

from __future__ import annotations

from typing import Any

from famiglia.engine import RuleViolation

from .. import crew
from ..board import is_active
from ..data import BLACKMAIL_PROPOSALS, FENCE_PRICE
from ..family import max_buy
from ..plays import resolve_play
from ..rounds import next_commission_turn
from ..tx import Tx


def place_setup_marker(tx: Tx, seat: int, msg: Any, cmd: Any) -> None:
    """NP-S10: one marker on any active gangster."""
    if not is_active(tx.s, msg.gangster):
        raise RuleViolation("NP-S10", "setup markers go on active gangsters (positions 1-9)")
    tx.emit("setup_marker_placed", seat=seat, gangster=msg.gangster)


def commission_pass(tx: Tx, seat: int, msg: Any, cmd: Any) -> None:
    """NP-C3: a pass is final for this round's Commission."""
    tx.emit_values("commission_passed", seat)
    next_commission_turn(tx)


def commission_play(tx: Tx, seat: int, msg: Any, cmd: Any) -> None:
    """NP-C2 (a)-(c); NP-C33 caps non-pass turns."""
    if tx.s.nonpass[seat] >= tx.s.cfg.commission_turns:
        raise RuleViolation("NP-C33", "no more non-pass Commission turns this phase")
    resolve_play(tx, seat, cmd.WhichOneof("kind"), msg, window=False)
    if tx.s.invite is None:
        next_commission_turn(tx)
    else:   # the next turn waits for the invited placement (INVITE_1)
        tx.emit_values("step_advanced", "after", 0)


def choose_action(tx: Tx, seat: int, msg: Any, cmd: Any) -> None:
    """NP-W14; NP-W18: under another seat's blackmail coin every choice but a pass is a proposal."""
    crew.check_action(tx.s, cmd)
    if cmd.WhichOneof("kind") != "pass" and crew.blackmailed(tx.s):
        tx.emit("blackmail_proposed", seat=seat, coin_owner=crew.coin_owner(tx.s), action=cmd)
        return
    tx.emit("action_chosen", seat=seat, action=cmd)
    crew.resolve_action(tx, cmd)


def grant_blackmail(tx: Tx, seat: int, msg: Any, cmd: Any) -> None:
    """NP-W18, NP-W19, NP-X22: acceptance resolves the proposal if still legal; 3 refusals force a pass."""
    act = tx.s.act
    assert act is not None
    proposal = crew.proposal(tx.s)
    accept = msg.accept
    if accept:
        try:
            crew.check_action(tx.s, proposal)
        except RuleViolation:
            accept = False
    tx.emit("blackmail_answered", seat=seat, accept=accept)
    if accept:
        crew.resolve_action(tx, proposal)
    elif tx.s.act is not None and tx.s.act.refusals >= BLACKMAIL_PROPOSALS:
        tx.emit_values("action_turn_ended", act.position, "forced pass")


def rule_on_tie(tx: Tx, seat: int, msg: Any, cmd: Any) -> None:
    """NP-W4, NP-X19: the ring holder names one of the tied seats, itself included."""
    r = tx.s.ruling
    assert r is not None
    if msg.seat not in r.seats:
        raise RuleViolation("NP-W4", f"seat {msg.seat} is not among the tied seats {list(r.seats)}")
    tx.emit_values("tie_ruled", r.gangster, msg.seat, r.use)


def place_invited_marker(tx: Tx, seat: int, msg: Any, cmd: Any) -> None:
    """INVITE_1 (NP-D12): the invited seat places one of its markers on an active gangster."""
    if not is_active(tx.s, msg.gangster):
        raise RuleViolation("NP-D12", "the invited marker goes on an active gangster")
    tx.emit("invited_marker_placed", seat=seat, gangster=msg.gangster)


def fill_vacancy(tx: Tx, seat: int, msg: Any, cmd: Any) -> None:
    """NP-Y2, NP-Y5, NP-Y7: the decider picks one of the candidates."""
    v = tx.s.vacancy
    assert v is not None
    if msg.gangster not in v.candidates:
        raise RuleViolation("NP-Y5", f"{msg.gangster} is not a candidate")
    tx.emit_values("gangster_promoted", msg.gangster, tx.s.board.index(msg.gangster), v.spot)


def buy(tx: Tx, seat: int, msg: Any, cmd: Any) -> None:
    """NP-F4, NP-F5: n fixed before drawing, $10 each."""
    n = msg.count
    if not 0 <= n <= max_buy(tx.s, seat):
        raise RuleViolation("NP-F5", f"buy between 0 and {max_buy(tx.s, seat)} cards")
    if n:
        tx.money(seat, -FENCE_PRICE * n, "fence purchase")
    tx.emit_values("cards_bought", seat, n)
    if n:
        tx.draw(seat, n, "fence purchase")
