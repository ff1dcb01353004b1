"""GoodCritters binds the engine contract (tests/contracts/engine_contract.py)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from hypothesis import strategies as st

from famiglia.rules.goodcritters import ENGINE
from famiglia.rules.goodcritters import commands as cmd
from famiglia.rules.goodcritters.data import ACTION_CARDS, FUZZ
from famiglia.rules.goodcritters.state import Offer, State, Step
from famiglia.rules.goodcritters.view import offer_loot_seen
from tests.contracts.engine_contract import EngineContract


def perturb_hidden(state: State, viewer: int | None, rng: random.Random) -> State:
    """A state that differs from `state` only in what `viewer` may not know (GC-H02 to GC-H07):
    the cards in the other Stashes and in offers the viewer cannot see are swapped with the
    pile's Loot (sizes kept), the pile is reshuffled with The Fuzz! anywhere in it, and the
    others' face-down Action cards are redrawn; the cards the viewer knows to lie in another
    Stash (`known_loot`) stay. Once the game is over nothing is hidden."""
    if state.over:
        return state
    known = {(holder, card) for knower, holder, card in state.known if knower == viewer}
    hidden_slots: list[tuple[str, int, int]] = []  # (where, index, position)
    pool: list[str] = []
    for seat, stash in enumerate(state.stashes):
        if seat != viewer:
            for pos, card in enumerate(stash):
                if (seat, card) in known:
                    continue
                hidden_slots.append(("stash", seat, pos))
                pool.append(card)
    for i, o in enumerate(state.offers):
        if not offer_loot_seen(o.visibility, o.briber, o.target, viewer):
            for pos, card in enumerate(o.loot):
                hidden_slots.append(("offer", i, pos))
                pool.append(card)
    pile_loot = [c for c in state.pile if c != FUZZ]
    pool += pile_loot
    rng.shuffle(pool)
    stashes = [list(s) for s in state.stashes]
    offers_loot = [list(o.loot) for o in state.offers]
    for (where, index, pos), card in zip(hidden_slots, pool, strict=False):
        if where == "stash":
            stashes[index][pos] = card
        else:
            offers_loot[index][pos] = card
    pile = pool[len(hidden_slots) :]
    if FUZZ in state.pile:
        pile.insert(rng.randrange(len(pile) + 1), FUZZ)
    cards = list(state.cards)
    for seat in range(state.seats):
        if seat != viewer and cards[seat] and not state.revealed[seat]:
            cards[seat] = rng.choice(ACTION_CARDS)
    offers = tuple(
        Offer(o.briber, o.target, o.side, tuple(loot), o.payoff_cards, o.visibility)
        for o, loot in zip(state.offers, offers_loot, strict=True)
    )
    return replace(
        state,
        stashes=tuple(tuple(s) for s in stashes),
        offers=offers,
        pile=tuple(pile),
        cards=tuple(cards),
    )


CANDIDATES_MAX = 512
"""Above this many raw candidates a state is left out of the coverage check, which deciding each
would make slow. It loses nothing the check could take: with the gift steps these options
keep (2 and 3), a seat that may make an offer may give a gift too, and gifts are a quarter of
the raw candidates, so 48 legal members or fewer means at most 4 * 48 candidates (a Step 2
table has N + 2 cards or more, so the Boss's N^k splits are always over)."""


def compound_candidates(state: State, seat: int) -> Iterator[Any]:
    """The Boss's splits in Step 2 (GC-A01: every seat for every table card, N^k) and, with the
    Payoff variant, in Steps 2 and 3, every gift and offer (GC-P06 to GC-P10: to any other seat,
    any non-empty bundle of the seat's Loot, in Stash order, and Payoff cards, either side and
    visibility, open or private), legal or not. Nothing when there are more than
    CANDIDATES_MAX."""
    if state.over:
        return
    others = [s for s in range(state.seats) if s != seat]
    splits = state.step is Step.DISTRIBUTE and seat == state.boss
    payoff = state.config.payoff and state.step in (Step.DISTRIBUTE, Step.ACTIONS, Step.THREAT_TURNS)
    stash, cards = state.stashes[seat], state.payoff_cards[seat]
    bundles = 2 ** len(stash) * (cards + 1) - 1
    size = (state.seats ** len(state.table) if splits else 0) + (len(others) * 8 * bundles if payoff else 0)
    if size > CANDIDATES_MAX:
        return
    if splits:
        for seats in itertools.product(range(state.seats), repeat=len(state.table)):
            yield cmd.assign_loot(zip(state.table, seats, strict=True))
    if not payoff:
        return
    loots = [loot for k in range(len(stash) + 1) for loot in itertools.combinations(stash, k)]
    items = [(loot, n) for loot in loots for n in range(cards + 1) if loot or n]
    for other in others:
        for loot, n in items:
            for open_ in (True, False):
                yield cmd.give_gift(other, loot, n, open_)
            for side in (1, 2):
                for visibility in (1, 2, 3):
                    yield cmd.make_offer(other, side, loot, n, visibility)


OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "payoff.enabled": st.sampled_from(["true", "false"]),
        "step3_mode": st.sampled_from(["open", "turns"]),
        "step3_public_change_limit": st.sampled_from(["0", "1", "3"]),
        "step3_card_choice_limit": st.sampled_from(["1", "2", "5"]),
        "winner_tiebreak": st.sampled_from(["", "more_loot_cards"]),
        "stash_counts_public": st.sampled_from(["true", "false"]),
        "skim_fuzz_failed_vote_extra_cards": st.sampled_from(["true", "false"]),
        "payoff.offer_loot_visibility": st.sampled_from(["open,peek,hidden", "hidden", "peek"]),
    },
)


class TestGoodCrittersContract(EngineContract):
    engine = ENGINE

    @classmethod
    def options_strategy(cls) -> st.SearchStrategy[dict[str, str]]:
        return OPTIONS

    def perturb_hidden(self, state: Any, viewer: int | None, rng: random.Random) -> Any:
        return perturb_hidden(state, viewer, rng)

    def compound_candidates(self, state: Any, seat: int) -> Iterator[Any]:
        return compound_candidates(state, seat)
