"""`random`: uniform over the legal commands — the baseline every other policy must beat."""

from __future__ import annotations

from google.protobuf.message import Message

from famiglia.engine import Engine, Rng

from .policy import Decision, first_of


class RandomPolicy:
    name = "random"

    def choose(self, rules: Engine, decision: Decision) -> Message:
        first_of(decision.legal)
        # Rng(seed) draws what random.Random(seed) draws, seeded without its Python wrappers.
        return decision.legal[Rng(decision.seed).randrange(len(decision.legal))]
