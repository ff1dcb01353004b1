"""`heuristic`: a generic one-ply player.

For each legal command it samples a few worlds consistent with the seat's view
(`determinize`), applies the command there and scores the seat's resulting View
with the game's small evaluator (evaluate.py; read straight from the sampled state
where the game has a state evaluator giving the same number, since building a View
per candidate cost more than the rest of the choice), plus what the game says pays beyond
one ply (`evaluate.ONE_PLY`: a sealed bid in Nostra City). A move that wins at once scores
above everything; a command the sampled worlds refuse scores below everything.
Ties are broken by the decision's seed, so a retried decision chooses the same.
Past the decision's deadline it answers with the best command scored so far.
"""

from __future__ import annotations

import math
import random
import time

from google.protobuf.message import Message

from famiglia.engine import Engine

from .evaluate import ONE_PLY, StateEvaluator, result_values, state_evaluator
from .policy import Decision, first_of
from .search import SearchRng, sample_world, seats_of, step

WIN_BONUS = 1_000.0


class OnePlyHeuristic:
    name = "heuristic"

    def __init__(self, samples: int = 2, max_candidates: int = 24) -> None:
        self.samples = max(1, samples)
        self.max_candidates = max(1, max_candidates)

    def choose(self, rules: Engine, decision: Decision) -> Message:
        legal = list(decision.legal)
        first_of(legal)
        chooser = random.Random(decision.seed)
        if len(legal) == 1:
            return legal[0]
        if len(legal) > self.max_candidates:
            legal = chooser.sample(legal, self.max_candidates)
        seats = seats_of(decision.view) or 1
        worlds = [w for w in (sample_world(rules, decision.view, decision.seat, SearchRng(chooser.getrandbits(62)))
                              for _ in range(self.samples)) if w is not None]
        if not worlds:
            return legal[chooser.randrange(len(legal))]
        best, best_score = legal[0], float("-inf")
        deadline = decision.deadline
        timed = deadline != math.inf
        seat = decision.seat
        score_of = state_evaluator(decision.game_id, rules)
        beyond = ONE_PLY.get(decision.game_id)
        result_of = rules.result
        draw = chooser.getrandbits
        sampled = len(worlds)
        for command in legal:
            if timed and best_score > float("-inf") and time.monotonic() >= deadline:
                break
            total = 0.0
            for world in worlds:
                after = step(rules, world, seat, command, SearchRng(draw(62)))
                if after is None:
                    total -= WIN_BONUS * 10
                    continue
                result = result_of(after)
                if result is not None:
                    total += WIN_BONUS * result_values(result, seats)[seat]
                else:
                    total += score_of(after, seat) + (_beyond(beyond, after, seat) if beyond else 0.0)
            score = total / sampled + chooser.random() * 1e-6
            if score > best_score:
                best, best_score = command, score
        return best


def _beyond(extra: StateEvaluator, state: object, seat: int) -> float:
    try:
        return extra(state, seat)
    except Exception:  # noqa: BLE001 - a heuristic must never take a bot down
        return 0.0
