"""The whole of each compound choice, for `legal_commands` with an rng: how many legal
commands it holds and a uniform draw of one, so that every one of them can come up
(DESIGN.md: "a complete generator/sampler that covers them all").

A member is a command in a canonical form wherever the form changes nothing: a bid's Notes
in value order, a Corruption's two Notes in Bank order, a distribution's gifts clockwise
from the distributor's left, each in draw order and none empty. `decide` also takes the
other orders; they change nothing but how the record reads (Banks are kept sorted, the
Corruption Pile is summed, the discard pile reshuffled, a KeepNotes sorted), so they are not
counted apart. The one order that matters is that of a bid's Notes of one value: the bid
keeps its placement order into the keep choice, whose timeout keeps the highest Notes and,
among equals, the earliest placed (NC-D09). So Notes of one value come in every order, each
order a member of its own (an Innocent and a Guilty $10,000 Note either way round), while
Notes of different values stay in value order: the timeout ranks by value first.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from itertools import groupby
from math import comb, perm, prod
from typing import NamedTuple

from famiglia.engine import Draws, draw_in_order
from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

from .data import NOTE_VALUE, POWER_HOLDER, WISEGUY_BY_ID
from .decide.business import may_give_first_player
from .state import State


class Members(NamedTuple):
    """Every legal command of one compound choice: how many, and a uniform draw of one."""

    size: int
    draw: Callable[[Draws], pb.Command]


def _pick(rng: Draws, sizes: list[int]) -> tuple[int, int]:
    """A uniform member of parts of these sizes: (its part, its rank in the part)."""
    r = rng.randrange(sum(sizes))
    for i, size in enumerate(sizes):
        if r < size:
            return i, r
        r -= size
    raise AssertionError("a draw past the last part")


def sample(fixed: list[pb.Command], members: Members, room: int, rng: Draws) -> list[pb.Command]:
    """At most `room` commands of a compound choice. While the representatives leave members
    out, half of the room goes to a random few of them (what a bot would weigh) and the rest
    to uniform draws of the whole choice; otherwise they are the whole choice, cut at random."""
    if members.size <= len(fixed):
        return draw_in_order(fixed, room, rng)
    out = draw_in_order(fixed, room // 2, rng)
    seen = {c.SerializeToString(deterministic=True) for c in out}
    room = min(room, members.size)
    for _ in range(2 * room):  # bounded: a small choice runs out of new members
        if len(out) >= room:
            break
        command = members.draw(rng)
        key = command.SerializeToString(deterministic=True)
        if key not in seen:
            seen.add(key)
            out.append(command)
    return out


# -- the compound choices ---------------------------------------------------------------------
def cash_ins(free: list[str], options: list[tuple[str, str, bool]]) -> Members | None:
    """NC-B01, NC-R05: any Free Wiseguy with any legal (source, type, W05 option) of
    `cash_in_options`; W05's option (NC-W105) has one acting Wiseguy."""
    sizes = [1 if power else len(free) for _, _, power in options]

    def draw(rng: Draws) -> pb.Command:
        i, r = _pick(rng, sizes)
        turf, declared, power = options[i]
        w = POWER_HOLDER["any_source"] if power else free[r]
        return pb.Command(cash_in=pb.CashIn(wiseguy=w, turf=turf, declared=declared, use_power=power))

    return Members(sum(sizes), draw) if options else None


def bids(free: list[str], locations: list[int], by_value: list[int], need: int) -> Members | None:
    """NC-M01..M03, NC-K15: any Free Wiseguy x unused Location on a filled space x any set of
    at least `need` Bank Notes (two under I5), listed in value order, and Notes of one value
    in any order (NC-D09: which of them the timeout keeps). `by_value` is the Bank sorted by
    value. Each value's part of a member is one of its arrangements (an ordered choice of
    its Notes), drawn uniformly and independently of the other values'."""
    n = len(by_value)
    equals = [list(g) for _, g in groupby(by_value, key=NOTE_VALUE.__getitem__)]
    arrangements = [[perm(len(f), k) for k in range(len(f) + 1)] for f in equals]  # by length

    def draw(rng: Draws) -> pb.Command:
        w = free[rng.randrange(len(free))]
        loc = locations[rng.randrange(len(locations))]
        while True:  # a uniform member, drawn again while too small (at worst 1 in 4 is kept)
            notes: list[int] = []
            for same, sizes in zip(equals, arrangements, strict=True):
                k, _ = _pick(rng, sizes)
                notes += rng.sample(same, k)
            if len(notes) >= need:
                return pb.Command(place_bid=pb.PlaceBid(wiseguy=w, location=loc, notes=notes))

    # fewer than `need` (at most 2) Notes have one order each: comb counts them
    orders = prod(sum(sizes) for sizes in arrangements) - sum(comb(n, k) for k in range(need))
    size = len(free) * len(locations) * orders
    return Members(size, draw) if size > 0 else None


def corruptions(free: list[str], bank: tuple[int, ...], w13_spent: bool) -> Members | None:
    """NC-T01: any Free Wiseguy with any one Bank Note; and the Fixers' options: any two Notes
    with W11, the deck with W12, the token with W13 while unspent (NC-W111..W113). A
    Wiseguy's members are ranked: singles, then pairs, then its one option."""
    n = len(bank)
    effects = [WISEGUY_BY_ID[w].effect for w in free]
    sizes = [n + (comb(n, 2) if e == "two_notes" else 0)
             + (1 if e == "deck_corruption" or (e == "token_move" and not w13_spent) else 0) for e in effects]

    def draw(rng: Draws) -> pb.Command:
        i, r = _pick(rng, sizes)
        w, effect = free[i], effects[i]
        if r < n:
            return pb.Command(corrupt=pb.Corrupt(wiseguy=w, notes=[bank[r]]))
        r -= n
        if effect == "two_notes":
            for a in range(n - 1):  # the r-th pair (a, b), a < b
                if r < n - 1 - a:
                    return pb.Command(corrupt=pb.Corrupt(wiseguy=w, notes=[bank[a], bank[a + 1 + r]]))
                r -= n - 1 - a
        if effect == "deck_corruption":
            return pb.Command(corrupt=pb.Corrupt(wiseguy=w, from_deck=True))
        return pb.Command(corrupt=pb.Corrupt(wiseguy=w, move_token=True))

    size = sum(sizes)
    return Members(size, draw) if size else None


def distributions(state: State) -> Members:
    """NC-B08, NC-B09, NC-B12: every split of the drawn Notes among the other seats within
    their shares, the rest kept; with each First Player gift the holder may make (its
    receiver then takes one Note fewer). Keeping them all is always one. A uniform split is
    drawn seat by seat, each count weighted by the ways to complete it (`_ways`)."""
    choice = state.choice
    assert choice is not None
    seat, notes = choice.seat, choice.notes
    n = len(notes)
    others = [(seat + i) % state.seats for i in range(1, state.seats)]
    fp_to = [-1]  # no First Player gift, then each receiver it may have
    if may_give_first_player(state, seat):
        fp_to += [p for p in others if choice.shares[p] >= 1]
    caps = [tuple(choice.shares[p] - (1 if p == fp else 0) for p in others) for fp in fp_to]
    sizes = [_ways(c, n)[0][n] for c in caps]

    def draw(rng: Draws) -> pb.Command:
        g, _ = _pick(rng, sizes)
        ways = _ways(caps[g], n)
        left = list(range(n))  # the Notes not given yet, by their place in the draw
        msg = pb.DistributeNotes()
        for i, p in enumerate(others):
            m = len(left)
            r = rng.randrange(ways[i][m])
            k = 0
            while r >= (w := comb(m, k) * ways[i + 1][m - k]):
                r -= w
                k += 1
            given = sorted(rng.sample(left, k))
            if given:
                msg.gifts.append(pb.Gift(seat=p, notes=[notes[j] for j in given]))
                left = [j for j in left if j not in given]
        if fp_to[g] >= 0:
            msg.first_player_to = fp_to[g]
        return pb.Command(distribute_notes=msg)

    return Members(sum(sizes), draw)


@lru_cache(maxsize=1024)
def _ways(caps: tuple[int, ...], n: int) -> tuple[tuple[int, ...], ...]:
    """ways[i][m]: how many ways seats i.. may receive some of m distinct Notes within their
    caps, the distributor keeping the rest. Few (caps, n) ever occur: cached."""
    ways = [tuple([1] * (n + 1))]
    for cap in reversed(caps):
        after = ways[0]
        ways.insert(0, tuple(sum(comb(m, k) * after[m - k] for k in range(min(cap, m) + 1)) for m in range(n + 1)))
    return tuple(ways)
