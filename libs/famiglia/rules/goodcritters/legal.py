"""legal_commands and timeout_command (GC-D01 to GC-D10, GC-P06 to GC-P08).

Non-optional commands come first, so a `limit` never cuts them off. Three choices are huge
compound choices and are sampled: the Boss's split (N^k assignments of k table cards), gifts
and offers (any subset of a Stash); a listing that holds one is a `Sampled`. Without `rng` the
samples are the same representative ones every time; with `rng` they are drawn from the whole
choice (`sampler`). The complete generators are `all_assignments`, `all_gifts` and
`all_offers`; `decide` accepts everything they yield.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from functools import cache

from famiglia.engine import Draws, Rng, Sampled

from . import commands as cmd
from .commands import Command, listed
from .data import ACTION_CARDS, MAX_PLAYERS, NOBODY
from .flow import ASSIGN_LOOT, GIVE_GIFT, MAKE_OFFER, OPTIONAL
from .sampler import draw_bundles, draw_splits
from .state import ACTIONS, CARD_CHOICE, DISTRIBUTE, OVER, THREAT_TURNS, State, Step

ASSIGNMENT_SAMPLE = 12
"""How many splits `legal_commands` lists for the Boss when no limit is given (at least N + 4;
with a limit, N + 4 and at most half the limit, so the rest of the list still fits)."""
GIFT_SAMPLE = 2
OFFER_SAMPLE = 2
BUNDLE_DRAWS = 16
"""With `rng`: at most this many offers and gifts drawn (fewer when the limit leaves less room)."""
VISIBILITIES = {"open": 1, "peek": 2, "hidden": 3}
COMPOUND = frozenset({ASSIGN_LOOT, GIVE_GIFT, MAKE_OFFER})
"""The kinds whose commands are sampled, not listed in full."""


def round_robin(state: State) -> list[tuple[str, int]]:
    """GC-D02: table order, one card at a time, from the Boss's left, the Boss last in each lap."""
    order = state.clockwise_from(state.left_of(state.boss))
    return [(card, order[i % state.seats]) for i, card in enumerate(state.table)]


def all_assignments(state: State) -> Iterator[list[tuple[str, int]]]:
    """GC-A01, GC-X01: every split of the table loot (N^k of them)."""
    for seats in itertools.product(range(state.seats), repeat=len(state.table)):
        yield list(zip(state.table, seats, strict=True))


def sample_assignments(state: State, count: int) -> list[list[tuple[str, int]]]:
    """A deterministic, representative sample: the timeout deal, everything to one seat
    (each seat), then uniform random splits from a generator seeded by the round, the pile size
    and the Boss, so the same state always lists the same splits."""
    table = state.table
    return [list(zip(table, seats, strict=True)) for seats in sample_splits(state, count)]


def sample_splits(state: State, count: int) -> list[tuple[int, ...]]:
    """`sample_assignments` as the seat of each table card, in table order: the form the
    listing builds its commands from (each (card, seat) pair's bytes are made once)."""
    n, k = state.seats, len(state.table)
    boss = state.boss
    fixed, fixed_set = _fixed_splits(n, k, boss)
    if len(fixed) >= count or k == 0:
        return list(fixed[:count])
    out = list(fixed)
    randrange = Rng(state.round * 7919 + len(state.pile) * 31 + boss).randrange
    seen = set(fixed_set)  # a copy of a set keeps its hashes: no split is hashed again
    space = n**k
    chunk = _digit_chunks(n)
    size = len(chunk)
    chunks = (k + 2) // 3
    for _ in range(4 * count):
        # one draw per split: the digits of a uniform number below N^k, in base N, lowest
        # first (three at a time from a table: the higher digits past k are zeros)
        code = randrange(space)
        split: tuple[int, ...] = ()
        for _ in range(chunks):
            split += chunk[code % size]  # `%` and `//`: no (quotient, remainder) tuple a chunk
            code //= size
        key = split[:k]
        if key not in seen:
            seen.add(key)
            out.append(key)
            if len(out) >= count:
                break
    return out


@cache
def _fixed_splits(n: int, k: int, boss: int) -> tuple[tuple[tuple[int, ...], ...], frozenset[tuple[int, ...]]]:
    """The sample's first splits: the timeout deal (card i to the i-th seat from the Boss's
    left, as `round_robin`), then everything to one seat, each seat from the Boss on; and the
    same as a set (the sample's `seen` starts from it)."""
    left = (boss + 1) % n
    out = [tuple([(left + i) % n for i in range(k)])]
    for i in range(n):
        out.append(((boss + i) % n,) * k)
    return tuple(out), frozenset(out)


@cache
def _digit_chunks(n: int) -> tuple[tuple[int, int, int], ...]:
    """Every number below N^3 as its three base-N digits, lowest first."""
    return tuple((r % n, r // n % n, r // (n * n)) for r in range(n**3))


def all_gifts(state: State, seat: int) -> Iterator[Command]:
    """GC-P06: every gift (any non-empty bundle of own Loot and Payoff cards, open or private)."""
    stash = state.stashes[seat]
    for receiver in range(state.seats):
        if receiver == seat:
            continue
        for k in range(len(stash) + 1):
            for loot in itertools.combinations(stash, k):
                for payoff in range(state.payoff_cards[seat] + 1):
                    if loot or payoff:
                        for open_ in (True, False):
                            yield cmd.give_gift(receiver, loot, payoff, open_)


def all_offers(state: State, seat: int) -> Iterator[Command]:
    """GC-P07, GC-P08, GC-P10: every offer this seat may still make."""
    if state.offers_out(seat) >= state.config.tokens_per_player:
        return
    stash = state.stashes[seat]
    vis = [VISIBILITIES[v] for v in VISIBILITIES if v in state.config.offer_visibilities]
    for target in range(state.seats):
        if target == seat or state.offer(seat, target) is not None:
            continue
        for k in range(len(stash) + 1):
            for loot in itertools.combinations(stash, k):
                for payoff in range(state.payoff_cards[seat] + 1):
                    if loot or payoff:
                        for side in (1, 2):
                            for v in vis:
                                yield cmd.make_offer(target, side, loot, payoff, v)


def _sample_gifts(state: State, seat: int) -> list[Command]:
    stash = state.stashes[seat]
    out = []
    others = [s for s in state.clockwise_from(state.left_of(seat)) if s != seat]
    for i in range(GIFT_SAMPLE):
        receiver = others[(state.round + i) % len(others)]
        if i % 2 == 0 and stash:
            open_ = (state.round + receiver) % 2 == 0
            out.append(cmd.give_gift(receiver, [stash[(state.round + i) % len(stash)]], 0, open_))
        elif state.payoff_cards[seat]:
            out.append(cmd.give_gift(receiver, [], 1, True))
    return out


def _sample_offers(state: State, seat: int) -> list[Command]:
    if state.offers_out(seat) >= state.config.tokens_per_player:
        return []
    stash = state.stashes[seat]
    vis = [VISIBILITIES[v] for v in VISIBILITIES if v in state.config.offer_visibilities]
    targets = [
        t for t in state.clockwise_from(state.left_of(seat)) if t != seat and state.offer(seat, t) is None
    ]
    out = []
    for i, target in enumerate(targets[:OFFER_SAMPLE]):
        side = 1 + (state.round + i) % 2
        v = vis[(state.round + i) % len(vis)]
        if stash and (i % 2 == 0 or not state.payoff_cards[seat]):
            out.append(cmd.make_offer(target, side, [stash[(state.round + target) % len(stash)]], 0, v))
        elif state.payoff_cards[seat]:
            out.append(cmd.make_offer(target, side, [], 1, v))
    return out


@cache
def _simple_commands(
    card_step: bool,
    committed: bool,
    can_choose: bool,
    has_card: bool,
    my_turn: bool,
    can_change: bool,
    seat: int,
    seats: int,
    threat: int,
) -> tuple[Command, ...]:
    """The card, commit, turn and threat commands: few inputs, so computed once per shape."""
    out: list[Command] = []
    # -- non-optional first, so a limit never cuts them off
    if card_step and not committed:
        if can_choose:
            out += [listed(cmd.choose_action_card, c, True) for c in ACTION_CARDS]
            out += [listed(cmd.choose_action_card, c) for c in ACTION_CARDS]
        if has_card:
            out.append(listed(cmd.commit))
    if my_turn:
        out.append(listed(cmd.end_turn))
    # -- optional
    if card_step and committed and can_choose:
        out += [listed(cmd.change_action_card, c) for c in ACTION_CARDS]
    if can_change:
        out += [listed(cmd.place_threat, t) for t in range(seats) if t != seat and t != threat]
        if threat != NOBODY:
            out.append(listed(cmd.withdraw_threat))
    return tuple(out)


_OPEN_STEP: list[list[list[tuple[Command, ...] | None]]] = [
    [[None] * (16 * (MAX_PLAYERS + 1)) for _ in range(seats)] for seats in range(MAX_PLAYERS + 1)
]
"""`_simple_commands` of an open Step 3, as `_OPEN_STEP[seats][seat][code]`, filled as asked:
`code` is 16 * (the seat's threat + 1) plus its flags (committed 8, may choose 4, has a card 2,
may change 1). Asked before most commands; small-int indexes instead of a 7-tuple key to hash
and compare (every code is below 256, so no int is allocated)."""


def legal_commands(state: State, seat: int, limit: int | None = None, rng: Draws | None = None) -> list[Command]:
    """The protocol's `legal_commands`. `rng` is keyword-only there and passed by keyword;
    it is not keyword-only here because CPython 3.11 specialises no call of a function with
    keyword-only parameters, and this one is called before nearly every command."""
    if limit is not None and limit < 0:  # at most a negative number: none
        return []
    if rng is not None:
        return _drawn_listing(state, seat, limit, rng)
    step = state.step
    if step is ACTIONS and 0 <= seat < state.seats:  # most commands: the open Step 3
        conf = state.config
        # the seat's shape code (see _OPEN_STEP), read straight from the state: this runs before
        # nearly every command, so each test is one comparison and no flag is kept
        code = 16 * (state.threats[seat] + 1)
        if state.committed[seat]:
            code += 8
        if state.choices[seat] < conf.card_choice_limit:
            code += 4
        if state.cards[seat]:
            code += 2
        if state.changes[seat] < conf.public_change_limit:
            code += 1
            if conf.payoff:  # offers and gifts, sampled from the Stash
                return _open_step_with_payoff(state, seat, limit, code)
        # the shape made on the first ask (`_open_step_shape`), read here without a call;
        # `shape[:limit]` is the shape itself when nothing is cut (limit None or no shorter)
        shape = _OPEN_STEP[state.seats][seat][code]
        if shape is None:
            shape = _open_step_shape(state.seats, seat, code)
        return list(shape[:limit])
    return _other_steps(state, seat, limit)


def _open_step_shape(seats: int, seat: int, code: int) -> tuple[Command, ...]:
    """`_simple_commands` of an open Step 3 for the shape `code`, made on the first ask."""
    shapes = _OPEN_STEP[seats][seat]
    shape = shapes[code]
    if shape is None:
        shape = shapes[code] = _simple_commands(
            True, bool(code & 8), bool(code & 4), bool(code & 2), False, bool(code & 1), seat, seats, code // 16 - 1
        )
    return shape


def _open_step_with_payoff(state: State, seat: int, limit: int | None, code: int) -> list[Command]:
    """The open Step 3 of a seat that may still make a public change in the Payoff variant."""
    offers = _sample_offers(state, seat)
    gifts = _sample_gifts(state, seat) if 3 in state.config.gift_steps else []
    shape = _open_step_shape(state.seats, seat, code)
    listing = Sampled(shape) if offers or gifts else list(shape)
    listing += offers
    listing += [listed(cmd.withdraw_offer, o.target) for o in state.offers if o.briber == seat]
    listing += gifts
    if limit is not None and len(listing) > limit:
        del listing[limit:]
    return listing


def _other_steps(state: State, seat: int, limit: int | None) -> list[Command]:
    """`legal_commands` outside the open Step 3 (and for a seat out of range)."""
    step = state.step
    if not 0 <= seat < state.seats or step is OVER:
        return []
    conf = state.config
    if step is DISTRIBUTE:
        out: list[Command] = []
        if seat == state.boss:
            out += cmd.listed_splits(state.table, sample_splits(state, _split_count(state, limit)))
        if conf.payoff and 2 in conf.gift_steps and state.changes[seat] < conf.public_change_limit:
            out += _sample_gifts(state, seat)
        if out:  # a split or a gift: both are sampled
            out = Sampled(out)
    else:
        # who may make a public change (GC-D06, GC-D09) and give a gift (GC-P06) now
        if step is THREAT_TURNS:
            can_change = seat == state.turn and state.changes[seat] < conf.public_change_limit
            card_step = False
        else:
            can_change = False
            card_step = step is CARD_CHOICE
        out = list(
            _simple_commands(
                card_step,
                state.committed[seat],
                card_step and state.choices[seat] < conf.card_choice_limit,
                bool(state.cards[seat]),
                step is THREAT_TURNS and seat == state.turn,
                can_change,
                seat,
                state.seats,
                state.threats[seat],
            )
        )
        if can_change and conf.payoff:
            offers = _sample_offers(state, seat)
            gifts = _sample_gifts(state, seat) if 3 in conf.gift_steps else []
            if offers or gifts:
                out = Sampled(out)
            out += offers
            out += [listed(cmd.withdraw_offer, o.target) for o in state.offers if o.briber == seat]
            out += gifts
    if limit is not None and len(out) > limit:
        del out[limit:]
    return out


def _split_count(state: State, limit: int | None) -> int:
    """How many splits the Boss's listing holds (see ASSIGNMENT_SAMPLE)."""
    if limit is None:
        return max(ASSIGNMENT_SAMPLE, state.seats + 4)
    return max(1, min(state.seats + 4, limit // 2))


def _drawn_listing(state: State, seat: int, limit: int | None, rng: Draws) -> list[Command]:
    """`legal_commands` with `rng`: the small commands as listed without it, and each compound
    choice drawn from all its members (`sampler`). Which compound choices are open is read
    from the listing without `rng` (a choice's samples are there exactly when it has a legal
    member), so the two never disagree on it, nor on being a `Sampled`.

    A limit cuts the optional commands, not the non-optional ones, as without `rng`; but the
    drawn offers and gifts keep at least half the room the non-optional commands leave:
    otherwise a tight limit would cut them all, and they are what the draws are for."""
    fixed = legal_commands(state, seat)
    if not isinstance(fixed, Sampled):  # nothing compound: the same list
        return fixed if limit is None else fixed[:limit]
    kinds = [c.WhichOneof("kind") for c in fixed]
    small = [(c, k in OPTIONAL) for c, k in zip(fixed, kinds, strict=True) if k not in COMPOUND]
    out: list[Command] = Sampled(c for c, optional in small if not optional)
    tail = [c for c, optional in small if optional]
    if ASSIGN_LOOT in kinds:  # GC-A01: non-optional, sized as without rng
        representatives = _fixed_splits(state.seats, len(state.table), state.boss)[0]
        splits = draw_splits(state, representatives, _split_count(state, limit), rng)
        out += cmd.listed_splits(state.table, splits)
    room = None if limit is None else max(0, limit - len(out))
    bundles: list[Command] = []
    if MAKE_OFFER in kinds or GIVE_GIFT in kinds:
        count = BUNDLE_DRAWS if room is None else min(BUNDLE_DRAWS, max(room - len(tail), (room + 1) // 2))
        conf = state.config
        targets = [t for t in range(state.seats) if t != seat and state.offer(seat, t) is None]
        others = [r for r in range(state.seats) if r != seat]
        bundles = draw_bundles(
            state,
            seat,
            count,
            rng,
            targets=targets if MAKE_OFFER in kinds else [],
            visibilities=[VISIBILITIES[v] for v in VISIBILITIES if v in conf.offer_visibilities],
            receivers=others if GIVE_GIFT in kinds else [],
        )
    out += tail if room is None else tail[: max(0, room - len(bundles))]
    out += bundles
    if limit is not None and len(out) > limit:
        del out[limit:]
    return out


def timeout_command(state: State, seat: int) -> Command | None:
    """GC-D02 (deal in table order), GC-D05 and GC-D06 (commit; Vote Yes if no card), GC-D06
    (a Step 3a turn ends with what was done). At the Step 3 deadline the clock sends this to
    every uncommitted seat, which closes Step 3 exactly as GC-D05 says."""
    if state.over:
        return None
    step = state.step
    if step is Step.DISTRIBUTE and seat == state.boss:
        return cmd.assign_loot(round_robin(state))
    if step is Step.THREAT_TURNS and seat == state.turn:
        return cmd.end_turn()
    if step in (Step.ACTIONS, Step.CARD_CHOICE) and not state.committed[seat]:
        if state.cards[seat]:
            return cmd.commit()
        return cmd.choose_action_card(state.config.timeout_action, commit=True)
    return None
