"""The policy API: what a bot may know when it chooses, and how a policy is named.

A policy sees a `Decision` — its seat's own View proto and the legal commands the
server listed — plus the game's rules (the engine: pure functions, holding no
match). It never gets the true state: information-set search samples states
consistent with the view through `engine.determinize(view, seat, rng)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar
from urllib.parse import parse_qsl

from google.protobuf.message import Message

from famiglia.engine import Engine


@dataclass(frozen=True)
class Decision:
    """One decision of one seat, as that seat sees it."""

    game_id: str
    seat: int
    view: Message
    legal: tuple[Message, ...]
    version: int = 0
    seed: int = 0
    """Seeds the policy's own choices, so a retried decision chooses the same way."""
    deadline: float = math.inf
    """`time.monotonic()` by which to answer: a search still thinking then answers with its
    best so far (the worker interrupts a policy that ignores it, in any thread)."""


class Policy(Protocol):
    name: str

    def choose(self, rules: Engine, decision: Decision) -> Message:
        """One of `decision.legal`."""
        ...


@dataclass(frozen=True)
class PolicySpec:
    """A policy name with parameters: `ismcts?iterations=50&seconds=0.2`."""

    name: str
    params: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> PolicySpec:
        name, _, query = text.strip().partition("?")
        return cls(name.strip().lower() or "random", dict(parse_qsl(query)))

    def __str__(self) -> str:
        if not self.params:
            return self.name
        return self.name + "?" + "&".join(f"{k}={v}" for k, v in sorted(self.params.items()))


PolicyFactory = Callable[[Mapping[str, str]], Policy]
T = TypeVar("T")


def _factories() -> dict[str, PolicyFactory]:
    from .heuristic import OnePlyHeuristic
    from .ismcts import Ismcts
    from .random_policy import RandomPolicy

    return {
        "random": lambda p: RandomPolicy(),
        "heuristic": lambda p: OnePlyHeuristic(samples=int(p.get("samples", 2)),
                                               max_candidates=int(p.get("candidates", 24))),
        "ismcts": lambda p: Ismcts(iterations=int(p.get("iterations", 200)),
                                   seconds=float(p.get("seconds", 1.0)),
                                   rollout_steps=_maybe(p, "rollout", int),
                                   exploration=_maybe(p, "exploration", float),
                                   prior=_maybe(p, "prior", float)),
    }


def _maybe(params: Mapping[str, str], key: str, kind: Callable[[str], T]) -> T | None:
    """A parameter the spec names, or None for the game's own default."""
    return kind(params[key]) if key in params else None


POLICY_NAMES: tuple[str, ...] = ("random", "heuristic", "ismcts")


class UnknownPolicy(ValueError):
    pass


def make_policy(spec: str | PolicySpec) -> Policy:
    """The policy a seat_info.policy string names (unknown names are refused, not guessed)."""
    parsed = spec if isinstance(spec, PolicySpec) else PolicySpec.parse(spec)
    factory = _factories().get(parsed.name)
    if factory is None:
        raise UnknownPolicy(f"no bot policy {parsed.name!r}; known: {', '.join(POLICY_NAMES)}")
    return factory(parsed.params)


def command_key(command: Message) -> bytes:
    """Commands compared by their deterministic bytes (protos have no hash)."""
    return command.SerializeToString(deterministic=True)


def first_of(legal: Sequence[Message]) -> Message:
    if not legal:
        raise ValueError("a policy was asked to choose among no legal commands")
    return legal[0]
