"""Nostra City binds the engine contract (STYLE: one line plus its hidden-state perturbation)."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from hypothesis import strategies as st

from famiglia.rules.nostra_city import ENGINE
from famiglia.rules.nostra_city.state import Phase, State
from tests.contracts.engine_contract import EngineContract


def perturb_hidden(state: State, viewer: int | None, rng: random.Random) -> State:
    """A state differing only in what `viewer` may not know (NC-H01..H17): other seats'
    Bank faces, sealed bids' Notes and Location cards, drawn Notes being distributed by
    someone else, Vendetta hands, the Corruption Pile, and every deck's order."""
    if state.phase is Phase.OVER:  # NC-H16: only deck orders stay hidden
        return replace(state, street_deck=tuple(rng.sample(state.street_deck, len(state.street_deck))),
                       note_deck=tuple(rng.sample(state.note_deck, len(state.note_deck))),
                       vendetta_deck=tuple(rng.sample(state.vendetta_deck, len(state.vendetta_deck))))
    # Note slots the viewer cannot see, filled again from their shuffled contents
    slots: list[tuple[str, Any, int]] = []
    pool: list[int] = []
    for i, p in enumerate(state.players):
        if i != viewer:
            slots.append(("bank", i, len(p.bank)))
            pool.extend(p.bank)
    for j, b in enumerate(state.bids):
        if b.seat != viewer:
            slots.append(("bid", j, len(b.notes)))
            pool.extend(b.notes)
    c = state.choice
    if c is not None and c.seat != viewer and c.notes:
        slots.append(("choice", 0, len(c.notes)))
        pool.extend(c.notes)
    deck_notes = [n for n in state.note_deck if n != 80]
    slots.append(("deck", 0, len(deck_notes)))
    pool.extend(deck_notes)
    slots.append(("discard", 0, len(state.note_discard)))
    pool.extend(state.note_discard)
    hidden_pile = [k for k, (n, placer) in enumerate(state.pile) if placer != viewer or placer < 0]
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
            players[key] = replace(players[key], bank=tuple(sorted(part)))
        elif kind == "bid":
            bids[key] = replace(bids[key], notes=tuple(part))
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
    # Vendetta hands of others and the Vendetta deck; Location cards of unrevealed bids
    vslots = [(i, len(p.hand)) for i, p in enumerate(players) if i != viewer]
    vpool = [card for i, _ in vslots for card in players[i].hand] + list(state.vendetta_deck)
    rng.shuffle(vpool)
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
            for j, loc in zip(mine, locs, strict=False):
                bids[j] = replace(bids[j], location=loc)
            players[i] = replace(players[i], locations=tuple(sorted(locs[len(mine):])))
    rng.shuffle(note_deck)
    return replace(state, players=tuple(players), bids=tuple(bids), pile=tuple(pile), choice=c,
                   note_deck=tuple(note_deck), note_discard=discard, vendetta_deck=vendetta_deck,
                   street_deck=tuple(rng.sample(state.street_deck, len(state.street_deck))))


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
