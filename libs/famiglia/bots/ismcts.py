"""`ismcts`: single-observer information-set Monte Carlo tree search.

Cowling, Powley and Whitehouse, "Information Set Monte Carlo Tree Search"
(IEEE TCIAIG 2012), SO-ISMCTS: every iteration samples one world consistent
with the seat's view (`engine.determinize`), walks one shared tree whose edges
are (acting seat, command) restricted to the moves legal in that world, expands
one edge, plays random legal moves for at most `rollout_steps` commands and
backs up every seat's value (final rank, or the evaluators' ranking when the
rollout is cut short). Selection is UCB1 over *availability* counts, the
paper's fix for moves that exist only in some worlds.

The budget is both `iterations` and `seconds`; whichever ends first. The root
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

from .evaluate import seat_values
from .policy import Decision, command_key, first_of
from .search import sample_world, seats_of, step

Edge = tuple[int, bytes]


@dataclass
class Node:
    visits: int = 0
    available: int = 0
    rewards: list[float] = field(default_factory=list)
    children: dict[Edge, Node] = field(default_factory=dict)
    commands: dict[Edge, Message] = field(default_factory=dict)

    def mean(self, seat: int) -> float:
        return self.rewards[seat] / self.visits if self.visits and seat < len(self.rewards) else 0.0


class Ismcts:
    name = "ismcts"

    def __init__(self, iterations: int = 200, seconds: float = 1.0, exploration: float = 0.7,
                 rollout_steps: int = 40, branching: int = 24) -> None:
        self.iterations = max(1, iterations)
        self.seconds = max(0.0, seconds)
        self.exploration = exploration
        self.rollout_steps = rollout_steps
        self.branching = branching
        self.last_iterations = 0

    def choose(self, rules: Engine, decision: Decision) -> Message:
        legal = list(decision.legal)
        first_of(legal)
        if len(legal) == 1:
            return legal[0]
        rng = random.Random(decision.seed)
        seats = seats_of(decision.view) or decision.seat + 1
        root = Node(rewards=[0.0] * seats)
        root_moves = {(decision.seat, command_key(c)): c for c in legal}
        deadline = time.perf_counter() + self.seconds
        done = 0
        for done in range(1, self.iterations + 1):  # noqa: B007 - `done` is read after the loop
            world = sample_world(rules, decision.view, decision.seat, Rng(rng.getrandbits(62)))
            if world is None:
                break
            self._iterate(rules, root, world, root_moves, decision.seat, seats, rng)
            if time.perf_counter() >= deadline:
                break
        self.last_iterations = done
        visited = [(node.visits, node.mean(decision.seat), edge) for edge, node in root.children.items()
                   if edge in root_moves and node.visits]
        if not visited:
            return legal[rng.randrange(len(legal))]
        return root_moves[max(visited)[2]]

    # -- one iteration ---------------------------------------------------------------
    def _iterate(self, rules: Engine, root: Node, state: Any, root_moves: dict[Edge, Message],
                 me: int, seats: int, rng: random.Random) -> None:
        node, path = root, [root]
        expanded = False
        while not expanded:
            if rules.result(state) is not None:
                break
            moves = root_moves if node is root else self._moves(rules, state, rng)
            if not moves:
                break
            for edge in moves:
                child = node.children.get(edge)
                if child is not None:
                    child.available += 1
            untried = [e for e in moves if e not in node.children]
            if untried:
                edge = untried[rng.randrange(len(untried))]
                expanded = True
            else:
                edge = max(moves, key=lambda e: self._ucb(node.children[e], e[0]))
            after = step(rules, state, edge[0], moves[edge], Rng(rng.getrandbits(62)))
            if after is None:  # this world refuses the move: score the walk so far
                break
            child = node.children.get(edge)
            if child is None:
                child = Node(available=1, rewards=[0.0] * seats)
                node.children[edge] = child
                node.commands[edge] = moves[edge]
            node, state = child, after
            path.append(node)
        values = self._rollout(rules, state, seats, rng)
        for visited in path:
            visited.visits += 1
            for s in range(seats):
                visited.rewards[s] += values[s]

    def _ucb(self, child: Node, seat: int) -> float:
        return child.mean(seat) + self.exploration * math.sqrt(math.log(max(1, child.available)) / child.visits)

    def _moves(self, rules: Engine, state: Any, rng: random.Random) -> dict[Edge, Message]:
        pendings = rules.pending(state)
        if not pendings:
            return {}
        seat = pendings[rng.randrange(len(pendings))].seat if len(pendings) > 1 else pendings[0].seat
        commands = rules.legal_commands(state, seat, limit=self.branching)
        return {(seat, command_key(c)): c for c in commands}

    def _rollout(self, rules: Engine, state: Any, seats: int, rng: random.Random) -> list[float]:
        for _ in range(self.rollout_steps):
            if rules.result(state) is not None:
                break
            pendings = rules.pending(state)
            if not pendings:
                break
            seat = pendings[rng.randrange(len(pendings))].seat
            commands = rules.legal_commands(state, seat, limit=16)
            if not commands:
                break
            after = step(rules, state, seat, commands[rng.randrange(len(commands))], Rng(rng.getrandbits(62)))
            if after is None:
                break
            state = after
        return seat_values(rules, state, seats)
