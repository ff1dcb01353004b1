"""`ismcts`: single-observer information-set Monte Carlo tree search.

Cowling, Powley and Whitehouse, "Information Set Monte Carlo Tree Search"
(IEEE TCIAIG 2012), SO-ISMCTS: every iteration samples one world consistent
with the seat's view (`engine.determinize`), walks one shared tree whose edges
are (acting seat, command) restricted to the moves legal in that world, expands
one edge, plays random legal moves for at most `rollout_steps` commands and
backs up every seat's value (`evaluate.seat_values`: winning when the game ended,
else the seat's margin over the best other seat as the game's evaluator sees it).
Selection is UCB1 over *availability* counts, the paper's fix for moves that
exist only in some worlds.

The root's moves also get a prior: the one-ply heuristic's score of each command
in a couple of sampled worlds, added as progressive bias (Chaslot et al. 2008,
`prior / (1 + visits)`), which fades as the search gathers its own evidence. The
evaluators know what each game rewards; random rollouts alone need far more
iterations than a second of CPU buys to see it.

The budget is both `iterations` and `seconds` of this thread's CPU time
(`time.thread_time`: on a shared machine wall time would buy fewer iterations
under load); whichever ends first, or the decision's wall-clock `deadline`. Per-game defaults (`TUNING`) set the rollout
length, exploration and prior weight; a policy spec may override each. The root
only considers the commands the server listed, so the answer is always legal.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message

from famiglia.engine import Engine, Rng

from .evaluate import evaluate_view, seat_values, win_values
from .policy import Decision, command_key, first_of
from .pruning import PRUNERS, pruned
from .search import sample_world, seats_of, step

Edge = tuple[int, bytes]


@dataclass(frozen=True)
class Tuning:
    """How one game is searched (measured with `famiglia.bench.strength`)."""

    rollout_steps: int = 20
    exploration: float = 0.5
    prior: float = 1.0
    """Weight of the one-ply prior at the root (0 turns it off)."""
    prior_worlds: int = 2
    prune: bool = False
    """Skip the searching seat's moves the game's rules show no better than another
    (`pruning.PRUNERS`), at the root, in the tree and in its rollout steps."""


TUNING: dict[str, Tuning] = {
    # Short rollouts: the chance-to-win evaluator reads the verdict better than 20 random
    # steps do, and low exploration lets its small differences decide (session 20, 160
    # matches, 60 iterations: 62% wins against random seats; 4 or 16 steps 53-58%,
    # exploration 0.05 or 0.5 52-54%: docs/bots.md).
    # Session 26: the seat's own Trial moves pruned to the bribes its verdict needs (`pruning`):
    # 55% -> 60% on 320 matches of seeds 2-9, still under the 67% bar (docs/bots.md).
    "nostra_city": Tuning(rollout_steps=8, exploration=0.2, prune=True),
}
DEFAULT_TUNING = Tuning()


@dataclass
class Node:
    visits: int = 0
    available: int = 0
    rewards: list[float] = field(default_factory=list)
    children: dict[Edge, Node] = field(default_factory=dict)

    def mean(self, seat: int) -> float:
        return self.rewards[seat] / self.visits if self.visits and seat < len(self.rewards) else 0.0


class Ismcts:
    name = "ismcts"

    def __init__(self, iterations: int = 200, seconds: float = 1.0, exploration: float | None = None,
                 rollout_steps: int | None = None, branching: int = 24, prior: float | None = None,
                 prune: bool | None = None) -> None:
        self.iterations = max(1, iterations)
        self.seconds = max(0.0, seconds)
        self.exploration = exploration
        self.rollout_steps = rollout_steps
        self.branching = branching
        self.prior = prior
        self.prune = prune
        self.last_iterations = 0

    def tuning(self, game_id: str) -> Tuning:
        """The game's defaults, overridden by what the policy spec names."""
        base = TUNING.get(game_id, DEFAULT_TUNING)
        return Tuning(
            rollout_steps=base.rollout_steps if self.rollout_steps is None else self.rollout_steps,
            exploration=base.exploration if self.exploration is None else self.exploration,
            prior=base.prior if self.prior is None else self.prior,
            prior_worlds=base.prior_worlds,
            prune=base.prune if self.prune is None else self.prune,
        )

    def choose(self, rules: Engine, decision: Decision) -> Message:
        legal = list(decision.legal)
        first_of(legal)
        if len(legal) == 1:
            return legal[0]
        started = time.thread_time()
        rng = random.Random(decision.seed)
        tune = self.tuning(decision.game_id)
        seats = seats_of(decision.view) or decision.seat + 1
        me = decision.seat
        root = Node(rewards=[0.0] * seats)
        worlds = (sample_world(rules, decision.view, me, Rng(rng.getrandbits(62))) for _ in iter(int, 1))
        prune = tune.prune and decision.game_id in PRUNERS
        if prune and (world := next(worlds)) is not None:  # the seat's own facts are the same in every world
            legal = pruned(decision.game_id, world, me, legal)
            if len(legal) == 1:
                return legal[0]
        root_moves = {(me, command_key(c)): c for c in legal}
        priors = self._priors(rules, decision, root_moves, worlds, tune, rng) if tune.prior > 0 else {}
        search = _Search(rules, tune, seats, self.branching, root, root_moves, priors, rng, me if prune else -1)
        done = 0
        deadline = decision.deadline
        for done in range(1, self.iterations + 1):  # noqa: B007 - `done` is read after the loop
            world = next(worlds)
            if world is None:
                break
            search.iterate(world)
            if time.thread_time() - started >= self.seconds or time.monotonic() >= deadline:
                break
        self.last_iterations = done
        visited = [(node.visits, node.mean(me), priors.get(edge, 0.0), edge) for edge, node in root.children.items()
                   if edge in root_moves and node.visits]
        if not visited:
            if priors:
                return root_moves[max(priors, key=lambda e: priors[e])]
            return legal[rng.randrange(len(legal))]
        return root_moves[max(visited)[3]]

    @staticmethod
    def _priors(rules: Engine, decision: Decision, root_moves: dict[Edge, Message], worlds: Any, tune: Tuning,
                rng: random.Random) -> dict[Edge, float]:
        """One ply per root move in `prior_worlds` worlds, scored by the game's evaluator
        (a win first), scaled to [0, 1] over the moves."""
        me, seats = decision.seat, seats_of(decision.view) or decision.seat + 1
        totals = dict.fromkeys(root_moves, 0.0)
        sampled = 0
        for _ in range(tune.prior_worlds):
            if sampled and time.monotonic() >= decision.deadline:
                break
            world = next(worlds)
            if world is None:
                break
            sampled += 1
            for edge, command in root_moves.items():
                after = step(rules, world, me, command, Rng(rng.getrandbits(62)))
                if after is None:
                    totals[edge] -= 1_000.0
                    continue
                result = rules.result(after)
                if result is not None:
                    totals[edge] += 1_000.0 * win_values(result, seats)[me]
                else:
                    totals[edge] += evaluate_view(decision.game_id, rules.view(after, me), me)
        if not sampled:
            return {}
        low, high = min(totals.values()), max(totals.values())
        if high - low < 1e-9:
            return dict.fromkeys(root_moves, 0.5)
        return {edge: (total - low) / (high - low) for edge, total in totals.items()}


class _Search:
    """One decision's tree and the walks over it."""

    def __init__(self, rules: Engine, tune: Tuning, seats: int, branching: int, root: Node,
                 root_moves: dict[Edge, Message], priors: dict[Edge, float], rng: random.Random,
                 pruned_seat: int = -1) -> None:
        self.rules = rules
        self.tune = tune
        self.seats = seats
        self.branching = branching
        self.root = root
        self.root_moves = root_moves
        self.priors = priors
        self.rng = rng
        self.pruned_seat = pruned_seat
        """The seat whose moves `pruning` thins out beyond the root (-1: nobody's)."""
        self.game_id = rules.info.game_id

    def iterate(self, state: Any) -> None:
        rules, rng, root = self.rules, self.rng, self.root
        node, path = root, [root]
        expanded = False
        while not expanded:
            if rules.result(state) is not None:
                break
            moves = self.root_moves if node is root else self._moves(state)
            if not moves:
                break
            for edge in moves:
                child = node.children.get(edge)
                if child is not None:
                    child.available += 1
            untried = [e for e in moves if e not in node.children]
            if untried:
                if node is root and self.priors:
                    edge = max(untried, key=lambda e: (self.priors.get(e, 0.0), rng.random()))
                else:
                    edge = untried[rng.randrange(len(untried))]
                expanded = True
            elif node is root and self.priors:
                edge = max(moves, key=lambda e: self._ucb(node.children[e], e[0])
                           + self.tune.prior * self.priors.get(e, 0.0) / (1 + node.children[e].visits))
            else:
                edge = max(moves, key=lambda e: self._ucb(node.children[e], e[0]))
            after = step(rules, state, edge[0], moves[edge], Rng(rng.getrandbits(62)))
            if after is None:  # this world refuses the move: score the walk so far
                break
            child = node.children.get(edge)
            if child is None:
                child = Node(available=1, rewards=[0.0] * self.seats)
                node.children[edge] = child
            node, state = child, after
            path.append(node)
        values = self._rollout(state)
        for visited in path:
            visited.visits += 1
            rewards = visited.rewards
            for s in range(self.seats):
                rewards[s] += values[s]

    def _ucb(self, child: Node, seat: int) -> float:
        return child.mean(seat) + self.tune.exploration * math.sqrt(math.log(max(1, child.available)) / child.visits)

    def _moves(self, state: Any) -> dict[Edge, Message]:
        pendings = self.rules.pending(state)
        if not pendings:
            return {}
        seat = pendings[self.rng.randrange(len(pendings))].seat if len(pendings) > 1 else pendings[0].seat
        commands = self.rules.legal_commands(state, seat, limit=self.branching)
        if seat == self.pruned_seat:
            commands = pruned(self.game_id, state, seat, commands)
        return {(seat, command_key(c)): c for c in commands}

    def _rollout(self, state: Any) -> list[float]:
        rules, rng = self.rules, self.rng
        for _ in range(self.tune.rollout_steps):
            if rules.result(state) is not None:
                break
            pendings = rules.pending(state)
            if not pendings:
                break
            seat = pendings[rng.randrange(len(pendings))].seat
            commands = rules.legal_commands(state, seat, limit=16)
            if not commands:
                break
            if seat == self.pruned_seat:
                commands = pruned(self.game_id, state, seat, commands)
            after = step(rules, state, seat, commands[rng.randrange(len(commands))], Rng(rng.getrandbits(62)))
            if after is None:
                break
            state = after
        return seat_values(rules, state, self.seats)
