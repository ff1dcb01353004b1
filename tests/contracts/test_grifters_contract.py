"""Grifters binds the engine contract (DESIGN.md, "Engine contract")."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from itertools import combinations
from math import comb
from typing import Any

from hypothesis import strategies as st

from famiglia.rules.grifters import ENGINE
from famiglia.rules.grifters import commands as C
from famiglia.rules.grifters.data import BRAIN, BRAWN, IS_RINGLEADER, JOBS_BY_ID, SKILL_OF, SPEED
from famiglia.rules.grifters.flow import awaiting_play
from famiglia.rules.grifters.state import JOB_SWAP, KEEP, State, in_hand_order
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


#: above this many raw candidates a state is left out of the coverage check (it stays cheap)
MAX_CANDIDATES = 3000
_SKILL_RANK = {BRAIN: 0, SPEED: 1, BRAWN: 2}  # the order of a Job's icons (GR-J02)


def compound_candidates(state: State, seat: int) -> Iterator[Any]:
    """Every Team of the hand's cards for every available Job (GR-J01, GR-J03), matching or not,
    and every swap of a Job in a Job area for one in another (GR-K11), legal or not. A Team is a
    set: decide files it in hand order whatever order it comes in, so each set is named once, in
    the order the engine lists Teams (by the Job's skills, then hand order)."""
    if state.over or seat != state.active:
        return
    if awaiting_play(state):
        hand = state.players[seat].hand
        jobs = [(job, sum(n for _, n in JOBS_BY_ID[job].skills)) for job in state.available_jobs()]
        if sum(comb(len(hand), size) for _, size in jobs) > MAX_CANDIDATES:
            return
        for job, size in jobs:
            for cards in combinations(hand, size):
                yield C.complete_job(job, sorted(cards, key=lambda c: _SKILL_RANK[SKILL_OF[c]]))
    elif state.choice == JOB_SWAP:
        done = [job for p in state.players for job in p.jobs]
        for own in done:
            for opponent in range(state.seats):
                for theirs in done:
                    yield C.answer_command(JOB_SWAP, (own, opponent, theirs))


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

    def compound_candidates(self, state: Any, seat: int) -> Iterator[Any]:
        return compound_candidates(state, seat)
