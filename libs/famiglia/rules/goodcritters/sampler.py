"""Draws from the whole of a compound choice, for `legal_commands(..., rng=...)` (GC-A01, GC-X01,
GC-P06 to GC-P10).

Without `rng`, `legal_commands` lists the same representative splits, gifts and offers every
time, so most of them never come up. Here every member has a positive chance: each is one
uniform number below the size of its choice, read as digits (a split's seat per card; a
bundle's Payoff cards and Loot cards; the receiver or target, side and visibility), and the
draws of one listing are distinct. A choice that fits its room is listed whole. Loot is named in
Stash order and splits in table order: other orders are the same gift, offer or split.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from famiglia.engine import Draws

from . import commands as cmd
from .commands import Command
from .state import State


def draw_splits(
    state: State, representatives: Sequence[tuple[int, ...]], count: int, rng: Draws
) -> list[tuple[int, ...]]:
    """GC-A01, GC-X01: `count` distinct splits of the table (the seat of each card, in table order):
    the first half from `representatives` (the timeout deal, everything to one seat), the rest
    uniform among all N^k, so any split may come up however small `count` is."""
    n, k = state.seats, len(state.table)
    space = n**k
    if space <= count:  # it fits: every split
        return list(itertools.product(range(n), repeat=k))
    out = list(dict.fromkeys(representatives))[: count // 2]
    seen = set(out)
    for _ in range(4 * count):  # bounded: a draw already listed is simply dropped
        if len(out) >= count:
            break
        code = rng.randrange(space)
        split = []
        for _ in range(k):
            code, seat = divmod(code, n)
            split.append(seat)
        key = tuple(split)
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


def draw_bundles(
    state: State,
    seat: int,
    count: int,
    rng: Draws,
    *,
    targets: Sequence[int],
    visibilities: Sequence[int],
    receivers: Sequence[int],
) -> list[Command]:
    """GC-P06 to GC-P10: at most `count` distinct offers (to `targets`) and gifts (to
    `receivers`), uniform over all of them together: any non-empty bundle of the seat's Loot
    and Payoff cards, each side and visibility, open or private. Offers first, as listed
    without `rng`."""
    bundles = (1 << len(state.stashes[seat])) * (state.payoff_cards[seat] + 1) - 1
    offers = len(targets) * 2 * len(visibilities) * bundles
    total = offers + len(receivers) * 2 * bundles
    if total <= count:  # it fits: every offer and gift
        codes = list(range(total))
    else:
        chosen: set[int] = set()
        for _ in range(4 * count):  # bounded: a draw already listed is simply dropped
            if len(chosen) >= count:
                break
            chosen.add(rng.randrange(total))
        codes = sorted(chosen)
    out = []
    for code in codes:
        if code < offers:
            code, bundle = divmod(code, bundles)
            code, side = divmod(code, 2)
            target, vis = divmod(code, len(visibilities))
            loot, payoff = _bundle(state, seat, bundle + 1)
            out.append(cmd.make_offer(targets[target], side + 1, loot, payoff, visibilities[vis]))
        else:
            code, bundle = divmod(code - offers, bundles)
            receiver, private = divmod(code, 2)
            loot, payoff = _bundle(state, seat, bundle + 1)
            out.append(cmd.give_gift(receivers[receiver], loot, payoff, not private))
    return out


def _bundle(state: State, seat: int, number: int) -> tuple[list[str], int]:
    """Bundle `number` (1 to 2^s * (p + 1) - 1; 0 would be empty) of a Stash of s cards and p
    Payoff cards: its Loot cards, in Stash order, and how many Payoff cards."""
    mask, payoff = divmod(number, state.payoff_cards[seat] + 1)
    stash = state.stashes[seat]
    return [card for i, card in enumerate(stash) if mask >> i & 1], payoff
