"""Nostra City binds the engine contract (STYLE: one line plus its hidden-state perturbation and
its compound choices brute-forced for the sampler's coverage check)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from itertools import combinations, groupby, permutations, product
from math import perm, prod
from typing import Any

from hypothesis import strategies as st

from famiglia.nostra_city.v1 import nostra_city_pb2 as pb
from famiglia.rules.nostra_city import ENGINE
from famiglia.rules.nostra_city.data import NOTE_VALUE, TURF_BY_ID, VENDETTA_BY_ID
from famiglia.rules.nostra_city.state import Phase, State
from tests.contracts.engine_contract import EngineContract


def perturb_hidden(state: State, viewer: int | None, rng: random.Random) -> State:
    """A state differing only in what `viewer` may not know (NC-H01..H17): other seats'
    Bank faces, sealed bids' Notes and Location cards, drawn Notes being distributed by
    someone else, Vendetta hands, the Corruption Pile, and every deck's order. What the viewer
    knows stays put: the Notes it knows in other Banks (NC-H03, NC-H14) and those it peeked at on
    the Pile (NC-W114); other seats' such knowledge follows their Notes (it is hidden too)."""
    if state.phase is Phase.OVER:  # NC-H16: only deck orders stay hidden
        return replace(state, street_deck=tuple(rng.sample(state.street_deck, len(state.street_deck))),
                       note_deck=tuple(rng.sample(state.note_deck, len(state.note_deck))),
                       vendetta_deck=tuple(rng.sample(state.vendetta_deck, len(state.vendetta_deck))))
    # Note slots the viewer cannot see, filled again from their shuffled contents
    slots: list[tuple[str, Any, int]] = []
    pool: list[int] = []
    # (a Note the viewer knew in a Bank before that seat's sealed bids stays where it is, in the
    # Bank or a bid: the viewer's `known_before_bids` lists it either way)
    aside = [{n for k, n in p.known_before_bids if k == viewer} for p in state.players]
    pinned = [tuple(n for k, n in p.known_by if k == viewer) + tuple(n for n in p.bank if n in aside[i])
              for i, p in enumerate(state.players)]
    for i, p in enumerate(state.players):
        if i != viewer:
            slots.append(("bank", i, len(p.bank) - len(pinned[i])))
            pool.extend(n for n in p.bank if n not in pinned[i])
    for j, b in enumerate(state.bids):
        if b.seat != viewer:
            slots.append(("bid", j, sum(n not in aside[b.seat] for n in b.notes)))
            pool.extend(n for n in b.notes if n not in aside[b.seat])
    c = state.choice
    if c is not None and c.seat != viewer and c.notes:
        slots.append(("choice", 0, len(c.notes)))
        pool.extend(c.notes)
    deck_notes = [n for n in state.note_deck if n != 80]
    slots.append(("deck", 0, len(deck_notes)))
    pool.extend(deck_notes)
    slots.append(("discard", 0, len(state.note_discard)))
    pool.extend(state.note_discard)
    seen = set() if viewer is None else set(state.players[viewer].peeked)
    hidden_pile = [k for k, (n, placer) in enumerate(state.pile) if (placer != viewer or placer < 0) and n not in seen]
    slots.append(("pile", 0, len(hidden_pile)))
    pool.extend(state.pile[k][0] for k in hidden_pile)
    rng.shuffle(pool)
    players = list(state.players)
    bids = list(state.bids)
    pile = list(state.pile)
    note_deck = list(state.note_deck)
    at = 0
    for kind, key, size in slots:
        part = pool[at:at + size]
        at += size
        if kind == "bank":
            bank = tuple(sorted((*pinned[key], *part)))
            players[key] = replace(players[key], bank=bank,
                                   known_by=tuple(k for k in players[key].known_by if k[1] in bank))
        elif kind == "bid":
            fresh = iter(part)
            bids[key] = replace(bids[key], notes=tuple(n if n in aside[bids[key].seat] else next(fresh)
                                                       for n in bids[key].notes))
        elif kind == "choice":
            c = replace(c, notes=tuple(part))
        elif kind == "deck":
            it = iter(part)
            note_deck = [n if n == 80 else next(it) for n in note_deck]
        elif kind == "discard":
            discard = tuple(part)
        else:
            for k, n in zip(hidden_pile, part, strict=True):
                pile[k] = (n, pile[k][1])
    # what others knew in a Bank before its sealed bids follows its Notes into that seat's bids
    for i, p in enumerate(players):
        if p.known_before_bids:
            held = {*p.bank, *(n for b in bids if b.seat == i for n in b.notes)}
            players[i] = replace(p, known_before_bids=tuple(k for k in p.known_before_bids if k[1] in held))
    # Vendetta hands of others and the Vendetta deck; Location cards of unrevealed bids
    vslots = [(i, len(p.hand)) for i, p in enumerate(players) if i != viewer]
    vpool = [card for i, _ in vslots for card in players[i].hand] + list(state.vendetta_deck)
    rng.shuffle(vpool)
    if state.vendetta_reshuffled:
        # NC-K55: the deck holds only reshuffled cards (a Rage card among them, never a hand's),
        # but who holds a card outside them, a Snitch above all, stays hidden (NC-H08, NC-H09)
        inside = sorted((c for c in vpool if c in state.vendetta_reshuffled),
                        key=lambda c: VENDETTA_BY_ID[c].kind in ("snitch", "revenge"))
        deck = inside[:len(state.vendetta_deck)]
        rng.shuffle(deck)
        vpool = [c for c in vpool if c not in deck] + deck
    at = 0
    for i, size in vslots:
        players[i] = replace(players[i], hand=tuple(sorted(vpool[at:at + size])))
        at += size
    vendetta_deck = tuple(vpool[at:])
    if not state.locations_revealed:
        for i in range(len(players)):
            if i == viewer:
                continue
            mine = [j for j, b in enumerate(bids) if b.seat == i]
            locs = [bids[j].location for j in mine] + list(players[i].locations)
            rng.shuffle(locs)
            named = [loc for loc in locs if state.street[loc - 1]][:len(mine)]  # NC-X07: a space with a card
            for j, loc in zip(mine, named, strict=True):
                bids[j] = replace(bids[j], location=loc)
            players[i] = replace(players[i], locations=tuple(sorted(loc for loc in locs if loc not in named)))
    on_pile = {n for n, _ in pile}
    players = [p if i == viewer else replace(p, peeked=tuple(n for n in p.peeked if n in on_pile))
               for i, p in enumerate(players)]
    rng.shuffle(note_deck)
    return replace(state, players=tuple(players), bids=tuple(bids), pile=tuple(pile), choice=c,
                   note_deck=tuple(note_deck), note_discard=discard, vendetta_deck=vendetta_deck,
                   street_deck=tuple(rng.sample(state.street_deck, len(state.street_deck))))


BRUTE_FORCE = 2000
"""The most candidates one state may try (each a `decide`); a larger choice is skipped."""


def compound_candidates(state: State, seat: int) -> Iterator[pb.Command]:
    """Every cash-in, bid, Corruption, distribution and Note kept that `seat` could try now,
    legal or not (any own Wiseguy, Turf, type, Location, set of Notes, receiver), in the form
    the sampler lists them where the order changes nothing: a bid's Notes by value, pairs in
    Bank order, gifts clockwise from the distributor's left in draw order. A bid's Notes of one
    value come in every order: the keep choice's timeout keeps the earliest placed (NC-D09).
    Nothing where that passes BRUTE_FORCE."""
    choice = state.choice
    p = state.players[seat]
    if state.phase is Phase.OVER or (choice is not None and choice.seat != seat):
        return
    if choice is not None and choice.kind == "distribute":
        yield from _distributions(state)
    elif choice is not None and choice.kind == "keep":
        notes = choice.notes
        yield from (pb.Command(keep_notes=pb.KeepNotes(notes=sorted(k)))
                    for size in (1, 2) for k in combinations(notes, size))
    elif choice is not None:
        return
    elif state.phase is Phase.BUSINESS:
        for w, turf, power in product(p.wiseguys, p.turfs, (False, True)):
            t = TURF_BY_ID[turf]
            for declared in (*t.colours, *t.icons):
                yield pb.Command(cash_in=pb.CashIn(wiseguy=w, turf=turf, declared=declared, use_power=power))
    elif state.phase is Phase.MEETING:
        by_value = sorted(p.bank, key=lambda n: (NOTE_VALUE[n], n))
        equals = [list(g) for _, g in groupby(by_value, key=NOTE_VALUE.__getitem__)]
        orders = prod(sum(perm(len(f), k) for k in range(len(f) + 1)) for f in equals)
        if len(p.wiseguys) * len(p.locations) * orders > BRUTE_FORCE:
            return
        arranged = [[a for k in range(len(f) + 1) for a in permutations(f, k)] for f in equals]
        bids = [[n for part in parts for n in part] for parts in product(*arranged)]
        for w, loc, notes in product(p.wiseguys, p.locations, [b for b in bids if b]):
            yield pb.Command(place_bid=pb.PlaceBid(wiseguy=w, location=loc, notes=notes))
    elif state.phase is Phase.TRIAL:
        sets = [list(c) for size in (1, 2) for c in combinations(p.bank, size)]
        if len(p.wiseguys) * (len(sets) + 2) > BRUTE_FORCE:
            return
        for w in p.wiseguys:
            yield from (pb.Command(corrupt=pb.Corrupt(wiseguy=w, notes=notes)) for notes in sets)
            yield pb.Command(corrupt=pb.Corrupt(wiseguy=w, from_deck=True))
            yield pb.Command(corrupt=pb.Corrupt(wiseguy=w, move_token=True))


def _distributions(state: State) -> Iterator[pb.Command]:
    """NC-B08/B12: each drawn Note to the distributor or any other seat, with or without the
    First Player card to any other seat."""
    choice = state.choice
    assert choice is not None
    others = [(choice.seat + i) % state.seats for i in range(1, state.seats)]
    if state.seats ** len(choice.notes) * state.seats > BRUTE_FORCE:
        return
    for owners in product([-1, *others], repeat=len(choice.notes)):
        gifts = [pb.Gift(seat=o, notes=[n for n, to in zip(choice.notes, owners, strict=True) if to == o])
                 for o in others if o in owners]
        for fp in [-1, *others]:
            msg = pb.DistributeNotes(gifts=gifts)
            if fp >= 0:
                msg.first_player_to = fp
            yield pb.Command(distribute_notes=msg)


class TestNostraCityContract(EngineContract):
    engine = ENGINE

    @classmethod
    def options_strategy(cls) -> st.SearchStrategy[dict[str, str]]:
        return st.fixed_dictionaries({}, optional={
            "first_player_seat": st.sampled_from(["random", "0", "1", "2"]),
            "verdict_count_mode": st.sampled_from(["icons", "value_weighted"]),
            "verdict_tie_result": st.sampled_from(["guilty", "innocent"]),
            "zealous_needs_titles_given": st.sampled_from(["true", "false"]),
            "turfs_free_in_reception": st.sampled_from(["true", "false"]),
            "title_counts_as_meeting_win": st.sampled_from(["true", "false"]),
            "zealous_cards": st.sampled_from(["0", "1", "3"]),
            "zealous_from_month": st.sampled_from(["1", "4", "6"]),
            "two_colour_turf_respect": st.sampled_from(["0", "1", "2"]),
            "verdict_start_3": st.sampled_from(["-3", "2"]),
            "verdict_start_5": st.sampled_from(["-5", "3"]),
        })

    def perturb_hidden(self, state: Any, viewer: int | None, rng: random.Random) -> Any:
        return perturb_hidden(state, viewer, rng)

    def compound_candidates(self, state: Any, seat: int) -> Iterator[pb.Command]:
        return compound_candidates(state, seat)
