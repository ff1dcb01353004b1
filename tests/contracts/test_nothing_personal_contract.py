"""Nothing Personal binds the engine contract (STYLE.md, "The engine contract suite")."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from hypothesis import strategies as st

from famiglia.rules.nothing_personal import ENGINE
from tests.contracts.engine_contract import EngineContract


def perturb_hidden(state: Any, viewer: int | None, rng: random.Random) -> Any:
    """Other hands re-dealt from the cards the viewer cannot see, and both decks reordered (NP-H1, NP-H2)."""
    if state.phase == "over":   # NP-H10: once the game has ended everything is revealed
        return state
    hidden = [i for i in range(state.n) if i != viewer]
    pool = [c for i in hidden for c in state.hands[i]] + list(state.deck)
    rng.shuffle(pool)
    hands = list(state.hands)
    for i in hidden:
        k = len(state.hands[i])
        hands[i], pool = tuple(sorted(pool[:k])), pool[k:]
    gdeck = list(state.gdeck)
    rng.shuffle(gdeck)
    # NP-H7, NP-D7: other seats' offers, chats and auto-pass settings are private too
    secret = [i for i in range(state.n) if i != viewer]
    counts = {name: list(getattr(state, name)) for name in ("offers_made", "chats_made", "ap_changes")}
    autopass = list(state.autopass)
    for i in secret:
        for values in counts.values():
            values[i] = rng.randrange(3)
        autopass[i] = (rng.random() < 0.5, rng.random() < 0.5)
    offers = tuple(o for o in state.offers if viewer in (o.frm, o.to))
    return replace(state, hands=tuple(hands), deck=tuple(pool), gdeck=tuple(gdeck), offers=offers,
                   offers_made=tuple(counts["offers_made"]), chats_made=tuple(counts["chats_made"]),
                   ap_changes=tuple(counts["ap_changes"]), autopass=tuple(autopass))


class TestNothingPersonalContract(EngineContract):
    engine = ENGINE

    @classmethod
    def options_strategy(cls) -> st.SearchStrategy[dict[str, str]]:
        flag = st.sampled_from(["false", "true"])
        return st.fixed_dictionaries({}, optional={
            "random_setup": flag,          # NP-V6
            "reroll_tokens": flag,         # NP-V9
            "keep_your_word": flag,        # NP-V1
            "arrest_associates": flag,     # NP-P4
            "commission_turns": st.sampled_from(["0", "2", "30"]),   # NP-C33
            "offers_per_phase": st.sampled_from(["0", "3"]),         # NP-M9
        })

    def perturb_hidden(self, state: Any, viewer: int | None, rng: random.Random) -> Any:
        return perturb_hidden(state, viewer, rng)
