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
        return cls(name.strip().lower() or "random", dict(parse_qsl(query, keep_blank_values=True)))

    def __str__(self) -> str:
        if not self.params:
            return self.name
        return self.name + "?" + "&".join(f"{k}={v}" for k, v in sorted(self.params.items()))


PolicyFactory = Callable[[Mapping[str, str]], Policy]
T = TypeVar("T")


@dataclass(frozen=True)
class Parameter:
    """One parameter a policy spec may name: its type and its bounds (both inclusive)."""

    kind: type[int] | type[float]
    low: float
    high: float

    def parse(self, name: str, text: str) -> int | float:
        try:
            value: int | float = self.kind(text.strip())
        except ValueError:
            expected = "a whole number" if self.kind is int else "a number"
            raise BadPolicyParameter(f"{name}={_shown(text)} is not {expected}") from None
        if not (math.isfinite(value) and self.low <= value <= self.high):
            raise BadPolicyParameter(f"{name}={_shown(text)} is outside {self.low:g}..{self.high:g}")
        return value


# Every parameter a policy spec may name, with its bounds: the only place they are set.
# A budget beyond these buys nothing a tournament or a backfilled seat could use (each decision
# also stops at its deadline), and an unbounded one lets a request hold a worker for ever.
PARAMETERS: dict[str, dict[str, Parameter]] = {
    "random": {},
    "heuristic": {
        "samples": Parameter(int, 1, 64),           # sampled worlds per candidate
        "candidates": Parameter(int, 1, 1_000),     # commands scored, the rest sampled away
    },
    "ismcts": {
        "iterations": Parameter(int, 1, 100_000),
        "seconds": Parameter(float, 0.0, 3_600.0),  # thread CPU time per decision
        "rollout": Parameter(int, 0, 1_000),        # random steps after the tree
        "exploration": Parameter(float, 0.0, 100.0),
        "prior": Parameter(float, 0.0, 1_000.0),    # weight of the one-ply prior at the root
        "prune": Parameter(int, 0, 1),              # 1: skip the moves the game's rules rule out
    },
}
PUBLIC_BUDGET: dict[str, dict[str, float]] = {
    "heuristic": {"samples": 8, "candidates": 64},
    "ismcts": {"iterations": 1_000, "seconds": 1.0, "rollout": 100},
}
"""The most a bot seat's policy may ask when the match's creator holds no operator token: one
decision then costs at most about a CPU second (ismcts's default budget, 200 iterations or 1 s),
so an anonymous client cannot hold the deployment's bot workers with matches of hour-long
decisions. An operator (the tournament runner, an admin) may ask up to PARAMETERS' bounds."""
MAX_SPEC_CHARS = 64
"""A policy spec is a short name with a few parameters; it is also a bot seat's `policy`
and player id in a match's seat info, which the read models keep in 64 characters."""


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:40] + "...")


def _params(spec: PolicySpec) -> dict[str, int | float]:
    """The spec's parameters, parsed and checked against PARAMETERS; unknown names are refused."""
    known = PARAMETERS.get(spec.name, {})
    unknown = sorted(set(spec.params) - set(known))
    if unknown:
        allowed = ", ".join(known) or "none"
        raise BadPolicyParameter(f"{spec.name} has no parameter(s) {', '.join(_shown(u) for u in unknown)}; "
                                 f"known: {allowed}")
    return {k: known[k].parse(k, v) for k, v in spec.params.items()}


def _factories() -> dict[str, PolicyFactory]:
    from .heuristic import OnePlyHeuristic
    from .ismcts import Ismcts
    from .random_policy import RandomPolicy

    def ismcts(p: Mapping[str, str]) -> Policy:
        got = _params(PolicySpec("ismcts", p))
        return Ismcts(iterations=int(got.get("iterations", 200)), seconds=float(got.get("seconds", 1.0)),
                      rollout_steps=_maybe(got, "rollout", int), exploration=_maybe(got, "exploration", float),
                      prior=_maybe(got, "prior", float), prune=_maybe(got, "prune", bool))

    def heuristic(p: Mapping[str, str]) -> Policy:
        got = _params(PolicySpec("heuristic", p))
        return OnePlyHeuristic(samples=int(got.get("samples", 2)), max_candidates=int(got.get("candidates", 24)))

    def random_policy(p: Mapping[str, str]) -> Policy:
        _params(PolicySpec("random", p))
        return RandomPolicy()

    return {"random": random_policy, "heuristic": heuristic, "ismcts": ismcts}


def _maybe(params: Mapping[str, int | float], key: str, kind: Callable[[int | float], T]) -> T | None:
    """A parameter the spec names, or None for the game's own default."""
    return kind(params[key]) if key in params else None


POLICY_NAMES: tuple[str, ...] = ("random", "heuristic", "ismcts")


class UnknownPolicy(ValueError):
    pass


class BadPolicyParameter(ValueError):
    """A policy spec's parameter that is unknown, of the wrong type or outside PARAMETERS' bounds."""


def _named(spec: str | PolicySpec) -> PolicySpec:
    """`spec` parsed, of a policy the bots know (UnknownPolicy, BadPolicyParameter for its length)."""
    if isinstance(spec, str) and len(spec) > MAX_SPEC_CHARS:
        raise BadPolicyParameter(f"a policy spec is at most {MAX_SPEC_CHARS} characters")
    parsed = spec if isinstance(spec, PolicySpec) else PolicySpec.parse(spec)
    if parsed.name not in PARAMETERS:
        raise UnknownPolicy(f"no bot policy {parsed.name!r}; known: {', '.join(POLICY_NAMES)}")
    return parsed


def checked_spec(spec: str) -> PolicySpec:
    """`spec` parsed and checked as `make_policy` would (UnknownPolicy, BadPolicyParameter), without
    building the policy: for a service that stores a seat's policy for another to play."""
    parsed = _named(spec)
    named = [k for k, _ in parse_qsl(spec.partition("?")[2], keep_blank_values=True)]
    twice = sorted({k for k in named if named.count(k) > 1})
    if twice:  # the last would win, while the spec shown (an entrant's name, a seat's policy) says both
        raise BadPolicyParameter(f"{parsed.name} names {', '.join(_shown(k) for k in twice)} more than once")
    _params(parsed)
    return parsed


def over_public_budget(spec: PolicySpec) -> list[str]:
    """The parameters of a checked spec that ask more than PUBLIC_BUDGET allows, as "name=value (at
    most limit)"; empty when an anonymous creator may name it."""
    limits = PUBLIC_BUDGET.get(spec.name, {})
    got = _params(spec)
    return [f"{k}={spec.params[k]} (at most {limits[k]:g})" for k in sorted(got) if k in limits and got[k] > limits[k]]


def make_policy(spec: str | PolicySpec) -> Policy:
    """The policy a seat_info.policy string names (unknown names and parameters, and parameters
    outside their bounds, are refused, not guessed)."""
    parsed = _named(spec)
    return _factories()[parsed.name](parsed.params)  # each factory checks its parameters


def command_key(command: Message) -> bytes:
    """Commands compared by their deterministic bytes (protos have no hash)."""
    return command.SerializeToString(deterministic=True)


def first_of(legal: Sequence[Message]) -> Message:
    if not legal:
        raise ValueError("a policy was asked to choose among no legal commands")
    return legal[0]
