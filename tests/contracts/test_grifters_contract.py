"""Grifters binds the engine contract (DESIGN.md, "Engine contract")."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from hypothesis import strategies as st

from famiglia.rules.grifters import ENGINE
from famiglia.rules.grifters.data import IS_RINGLEADER
from famiglia.rules.grifters.state import KEEP, State, in_hand_order
from tests.contracts.engine_contract import EngineContract


def perturb_hidden(state: State, viewer: int | None, rng: random.Random) -> State:
    """Shuffle what `viewer` cannot see: the Specialists in other hands and in the deck, and the deck
    order (GR-H02, GR-H05). Hand sizes, Ringleaders and the drawn cards the viewer sees stay put."""
    if state.over:
        return state
    others = [s for s in range(state.seats) if s != viewer]
    fixed: set[str] = set()
    if state.choice == KEEP and state.caper is not None:
        fixed.update(state.caper.drawn)  # drawn cards must stay in their drawer's hand
    pool = [c for s in others for c in state.players[s].hand if not IS_RINGLEADER[c] and c not in fixed]
    pool += list(state.deck)
    rng.shuffle(pool)
    players = list(state.players)
    for s in others:
        p = players[s]
        keep = [c for c in p.hand if IS_RINGLEADER[c] or c in fixed]
        k = len(p.hand) - len(keep)
        players[s] = replace(p, hand=in_hand_order(keep + pool[:k]))
        del pool[:k]
    return replace(state, players=tuple(players), deck=tuple(pool))


class TestGriftersContract(EngineContract):
    engine = ENGINE

    @classmethod
    def options_strategy(cls) -> st.SearchStrategy[dict[str, str]]:
        return st.fixed_dictionaries({}, optional={
            "first_player_seat": st.sampled_from(["", "0", "1"]),
            "skip_first_advance": st.sampled_from(["true", "false"]),
            "extra_advance_on_first_turn": st.sampled_from(["true", "false"]),
            "empty_hand_token": st.sampled_from(["true", "false"]),
            "hideout_tokens_score": st.sampled_from(["true", "false"]),
            "job_card_moves_before_reward": st.sampled_from(["true", "false"]),
            "fall_guy_may_copy_fall_guy": st.sampled_from(["true", "false"]),
            "auto_single_option": st.sampled_from(["true", "false"]),
            "cat_burglar_steal": st.sampled_from(["1-4", "0-2"]),
            "max_rounds": st.sampled_from(["100", "5", "20"]),
            "tiebreak": st.sampled_from(["most_jobs,fewest_specialists", "fewest_specialists", ""]),
        })

    def perturb_hidden(self, state: Any, viewer: int | None, rng: random.Random) -> Any:
        return perturb_hidden(state, viewer, rng)
