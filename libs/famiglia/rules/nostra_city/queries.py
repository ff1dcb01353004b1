"""Derived facts of the table: Respect, shares, powers, what an Investigation blocks.

Pure functions of the state; both `decide` and `view` read them.
"""

from __future__ import annotations

from .config import Config
from .data import (
    ATLANTIC_CITY,
    BONUS_CARDS,
    INVESTIGATION_BY_ID,
    NOTE_VALUE,
    POWER_HOLDER,
    RACKET_COLOURS,
    RESPECT_CARDS,
    TITLE_RANK,
    TITLE_RESPECT,
    TURF_BY_ID,
    WISEGUY_BY_ID,
)
from .state import Seat, State


def respect(seat: Seat, config: Config) -> int:
    """NC-V11/V12: Respect is computed from the Territory, never accumulated."""
    total = 0
    for card in seat.trophies:
        if card in RESPECT_CARDS:
            total += RESPECT_CARDS[card]
        elif card in INVESTIGATION_BY_ID:
            total += config.investigation_respect  # NC-M10
        elif card in TITLE_RESPECT:
            total += TITLE_RESPECT[card]
        elif card.startswith("ZC"):
            total += config.zealous_respect  # NC-K21
        elif card in BONUS_CARDS:
            total += config.bonus_respect  # NC-V14
    for turf in seat.turfs:
        if TURF_BY_ID[turf].respect:
            total += config.two_colour_respect  # NC-K04 two-colour Turfs
    for w in seat.wiseguys:
        if WISEGUY_BY_ID[w].effect == "respect":
            total += int(WISEGUY_BY_ID[w].param)  # NC-W120
    return total


def seat_respect(state: State, seat: int) -> int:
    return respect(state.players[seat], state.config)


def has_power(seat: Seat, effect: str) -> bool:
    """An always-on power works while its Wiseguy is in the Territory (NC-W01, NC-W04)."""
    return POWER_HOLDER[effect] in seat.wiseguys


def acting_power(wiseguy: str) -> str:
    """The effect code of an on-Busy power (NC-W01)."""
    w = WISEGUY_BY_ID[wiseguy]
    return w.effect if w.trigger == "busy" else ""


def is_racket(declared: str) -> bool:
    return declared in RACKET_COLOURS


def counts_for(turf: str, declared: str) -> bool:
    """NC-B03..B05: does this Turf count for a cash-in of the declared type?"""
    t = TURF_BY_ID[turf]
    return declared in t.colours if is_racket(declared) else declared in t.icons


def shares(state: State, declared: str) -> tuple[int, ...]:
    """NC-B06: every seat's share s(p)."""
    return tuple(sum(1 for t in p.turfs if counts_for(t, declared)) for p in state.players)


def street_investigations(state: State) -> list[str]:
    return [c for c in state.street if c in INVESTIGATION_BY_ID]


def blocked(state: State, declared: str) -> str:
    """NC-B16/K15: the Investigation on the Street that forbids this cash-in type, or ""."""
    for card in street_investigations(state):
        inv = INVESTIGATION_BY_ID[card]
        if inv.effect == "block_racket" and is_racket(declared):
            return card
        if inv.effect == "block_traffic" and inv.param == declared:
            return card
    return ""


def min_bid_notes(state: State) -> int:
    """NC-K15: with I5 on the Street a bid needs 2 Notes."""
    need = 1
    for card in street_investigations(state):
        inv = INVESTIGATION_BY_ID[card]
        if inv.effect == "min_bid_notes":
            need = max(need, int(inv.param))
    return need


def corruption_cap(state: State) -> int:
    """NC-K15: with I6 on the Street at most one Corruption action per Trial (0 = no cap)."""
    for card in street_investigations(state):
        inv = INVESTIGATION_BY_ID[card]
        if inv.effect == "one_corruption":
            return int(inv.param)
    return 0


def free_wiseguys(seat: Seat) -> list[str]:
    return [w for w in seat.wiseguys if w not in seat.busy]


def bank_value(seat: Seat) -> int:
    return sum(NOTE_VALUE[n] for n in seat.bank)


def title_rank(state: State, seat: int) -> int:
    title = state.title_of(seat)
    return TITLE_RANK.get(title, 0)


def cash_in_options(state: State, seat: int) -> list[tuple[str, str, bool]]:
    """(source Turf, declared type, W05 used) for every legal cash-in source (NC-B01..B16)."""
    p = state.players[seat]
    free = free_wiseguys(p)
    if not free:
        return []
    out: list[tuple[str, str, bool]] = []
    w05 = POWER_HOLDER["any_source"] in free  # NC-W105
    for turf in p.turfs:
        if turf == ATLANTIC_CITY:
            continue  # NC-B02
        t = TURF_BY_ID[turf]
        is_free = turf not in p.busy
        for declared in (*t.colours, *t.icons):
            key = "racket" if is_racket(declared) else declared
            if key in p.cashins or blocked(state, declared):
                continue
            if is_free:
                out.append((turf, declared, False))
            if w05:
                out.append((turf, declared, True))
    return out


def cashin_key(declared: str) -> str:
    """NC-B14: one Racket cash-in whatever the colour, one Traffic cash-in per icon."""
    return "racket" if is_racket(declared) else declared


def can_bid(state: State, seat: int) -> bool:
    p = state.players[seat]
    if not free_wiseguys(p) or len(p.bank) < min_bid_notes(state):
        return False
    return any(state.street[loc - 1] for loc in p.locations)


def can_corrupt(state: State, seat: int) -> bool:
    p = state.players[seat]
    free = free_wiseguys(p)
    if not free:
        return False
    cap = corruption_cap(state)
    if cap and p.corruption_actions >= cap:
        return False
    if p.bank:
        return True
    return POWER_HOLDER["deck_corruption"] in free or (POWER_HOLDER["token_move"] in free and not state.w13_spent)


def hit_targets(state: State, seat: int) -> list[tuple[int, str]]:
    """NC-K50, NC-W116: (target, Wiseguy) a Hit may remove."""
    from .state import Phase

    out = []
    carrying = {b.wiseguy for b in state.bids} if state.phase is Phase.MEETING else set()
    for target, p in enumerate(state.players):
        if target == seat or len(p.wiseguys) < 2 or has_power(p, "hit_immune"):
            continue
        for w in p.wiseguys:
            if w not in carrying:
                out.append((target, w))
    return out


def burglary_targets(state: State, seat: int) -> list[int]:
    """NC-K51, NC-W117, NC-X04."""
    return [t for t, p in enumerate(state.players)
            if t != seat and p.bank and not has_power(p, "burglary_immune")]


def tip_off_targets(state: State, seat: int) -> list[tuple[int, str]]:
    """NC-K52: a Free Turf of another player, not Atlantic City."""
    return [(t, turf) for t, p in enumerate(state.players) if t != seat
            for turf in p.turfs if turf != ATLANTIC_CITY and turf not in p.busy]
