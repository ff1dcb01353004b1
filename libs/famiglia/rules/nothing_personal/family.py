"""The Fence (NP-F), the Feds (NP-P), the Family (NP-Y), Bookkeeping (NP-K) and final scoring (NP-E, NP-T)."""

from __future__ import annotations

from .board import active, arrest_limit, at, leaders, ring_order, strict
from .crew import controller
from .data import (
    ARREST_LIMIT,
    CARD_VALUE_AT_END,
    FENCE_DRAWS,
    GIDX,
    MONEY_PER_RESPECT,
    POSITIONS,
    ROUNDS,
    G,
)
from .result import ranking
from .rounds import begin_phase, begin_round
from .state import A_SLOTS, Phase, State
from .tx import Tx


# -- the Fence ---------------------------------------------------------------------------------------------
def fence_counts(s: State) -> list[int]:
    """NP-F1, NP-W5: strictly controlled active gangsters per seat."""
    counts = [0] * s.n
    for gid in active(s):
        seat = strict(s, gid)
        if seat >= 0:
            counts[seat] += 1
    return counts


def fence_draws(tx: Tx) -> None:
    """NP-F2, NP-F3: counts taken once, then draws in ring order."""
    counts = fence_counts(tx.s)
    tx.emit("fence_counted", counts=counts)
    for seat in ring_order(tx.s):
        tx.draw(seat, FENCE_DRAWS[min(counts[seat], 2)], "fence")
    tx.emit_values("step_advanced", "buy", 0, ring_order(tx.s))


def max_buy(s: State, seat: int) -> int:
    """NP-F5: affordable, and no more than the deck and discard pile hold."""
    return min(s.money[seat] // 10, len(s.deck) + len(s.discard))


def fence_done(tx: Tx) -> None:
    begin_phase(tx, Phase.FEDS)


# -- the Feds ----------------------------------------------------------------------------------------------------
def arrests(tx: Tx) -> None:
    """NP-P1..P5."""
    for p in range(9, 0, -1):
        gid = at(tx.s, p)
        if gid and tx.s.gs[_i(gid)].total >= arrest_limit(tx.s, gid):
            tx.gone(gid, "prison", "arrest")
    if tx.s.cfg.arrest_associates:   # NP-P4 switch: an Associate's passive is off (NP-W22)
        for spot in A_SLOTS:
            gid = tx.s.board[spot]
            if gid and tx.s.gs[_i(gid)].total >= ARREST_LIMIT[tx.s.n]:
                tx.gone(gid, "prison", "arrest")
    if any(g.sideways for g in tx.s.gs):
        tx.emit("gangsters_turned_upright")
    begin_phase(tx, Phase.FAMILY)


def _i(gid: str) -> int:
    return GIDX[gid]


# -- the Family ----------------------------------------------------------------------------------------------------
def _promote(tx: Tx, gid: str, to_spot: int) -> None:
    frm = tx.s.board.index(gid) if gid in tx.s.board else -1
    tx.emit_values("gangster_promoted", gid, frm, to_spot)


def capo_first(tx: Tx) -> None:
    """NP-Y1, NP-Y2, NP-Y3."""
    s = tx.s
    if not s.board[8]:
        lower = [at(s, p) for p in range(8, 0, -1) if at(s, p)]
        assoc = [g for g in (s.board[i] for i in A_SLOTS) if g]
        if lower:
            _promote(tx, lower[0], 8)
        elif len(assoc) == 1:
            _promote(tx, assoc[0], 8)
        elif assoc:
            tx.emit("vacancy_choice_asked", spot=8, decider=s.ring, candidates=tuple(assoc))
            return
        elif s.gdeck:
            _promote(tx, s.gdeck[0], 8)
    tx.emit_values("step_advanced", "fill", 8)


def candidates(s: State, p: int) -> list[str]:
    """NP-Y4 tiers 1-3 (never a gangster already promoted in this phase, NP-Y8)."""
    tier1 = [s.board[src - 1] for src in POSITIONS[p].sources]
    tier2 = [at(s, q) for q in range(p - 1, 0, -1)]
    tier3 = [s.board[i] for i in A_SLOTS]
    for tier in (tier1, tier2, tier3):
        found = [g for g in tier if g and g not in s.promoted]
        if found:
            return found
    return []


def decider(tx: Tx, p: int) -> int:
    """NP-Y5, NP-Y6: the decider position's controller (a ruling if tied), else the ring holder."""
    dp = POSITIONS[p].decider
    gid = at(tx.s, dp) if dp else ""
    lead = leaders(tx.s, gid) if gid else ()
    if not lead:
        return tx.s.ring
    return controller(tx, gid, "decider", lead)


def fill(tx: Tx) -> None:
    s = tx.s
    p = s.pos
    while p >= 1 and at(s, p):
        p -= 1
    if p < 1:
        tx.emit_values("step_advanced", "assoc", 0)
        return
    if p != s.pos:
        tx.emit_values("step_advanced", "fill", p)
        s = tx.s
    cands = candidates(s, p)
    if len(cands) == 1:
        _promote(tx, cands[0], p - 1)
    elif cands:
        who = decider(tx, p)
        if who == -2:
            return
        tx.emit("vacancy_choice_asked", spot=p - 1, decider=who, candidates=tuple(cands))
        return
    elif s.gdeck:
        _promote(tx, s.gdeck[0], p - 1)
    tx.emit_values("step_advanced", "fill", p - 1)


def default_candidate(s: State, cands: tuple[str, ...]) -> str:
    """NP-D14: the candidate at the highest-numbered position, else the Associate in the lowest slot."""
    on_pos = [g for g in cands if g in s.board[:9]]
    if on_pos:
        return max(on_pos, key=s.board.index)
    return min(cands, key=s.board.index)


def associates_and_bookkeeping(tx: Tx) -> None:
    """NP-Y9, NP-Y10, then Bookkeeping (NP-K1) and contract deadlines (NP-V4)."""
    for spot in A_SLOTS:
        if not tx.s.board[spot] and tx.s.gdeck:
            tx.emit_values("gangster_promoted", tx.s.gdeck[0], -1, spot)
    r = tx.s.round
    for c in tx.s.contracts:
        if c.deadline <= r:
            paid = c.condition == "NOT_TARGETED"
            tx.emit("contract_settled", id=c.id, to=c.payee if paid else c.payer, how="paid" if paid else "returned")
    if r >= ROUNDS:
        begin_phase(tx, Phase.FINAL)
    else:
        begin_round(tx, r + 1)


# -- final scoring (NP-E, NP-T) -------------------------------------------------------------------------------------
def final_score(tx: Tx) -> None:
    s = tx.s
    p = s.pos
    if p < 1:
        tx.emit_values("step_advanced", "sell", 0)
        return
    gid = at(s, p)
    seat = controller(tx, gid, "final") if gid else -1
    if seat == -2:
        return
    if seat >= 0:
        tx.respect({seat: POSITIONS[p].respect.apply(G[gid].respect)}, "final scoring")   # NP-E1
        tx.emit_values("position_scored", p, gid, seat)
    final_next(tx)


def final_next(tx: Tx) -> None:
    tx.emit_values("step_advanced", "score", tx.s.pos - 1)


def final_sell(tx: Tx) -> None:
    """NP-E2, NP-E3, then the ranking with tie-breakers NP-E4, NP-E5, NP-T1..T7."""
    for seat in range(tx.s.n):
        hand = tx.s.hands[seat]
        if hand:
            tx.emit_values("cards_discarded", seat, hand, "sold at the end")
            tx.money(seat, CARD_VALUE_AT_END * len(hand), "cards sold")
    for seat in range(tx.s.n):
        m = tx.s.money[seat]
        tx.respect({seat: m // MONEY_PER_RESPECT}, "money converted")
        tx.money(seat, -(m - m % MONEY_PER_RESPECT), "money converted")
    tx.emit("final_scored", respect=tx.s.respect, money=tx.s.money)
    tx.emit("game_ended", ranking=ranking(tx))   # result.py: NP-E4, NP-E5, NP-T1..T7
