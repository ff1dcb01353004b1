"""`random`: uniform over the legal commands — the baseline every other policy must beat."""

from __future__ import annotations

import random

from google.protobuf.message import Message

from famiglia.engine import Engine

from .policy import Decision, first_of


class RandomPolicy:
    name = "random"

    def choose(self, rules: Engine, decision: Decision) -> Message:
        first_of(decision.legal)
        return decision.legal[random.Random(decision.seed).randrange(len(decision.legal))]
