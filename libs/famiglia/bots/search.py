"""What the search policies share: sampling worlds from a view and stepping them."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from famiglia.engine import Engine, Rng, RuleViolation, fold


def seats_of(view: Message) -> int:
    """Every game's View names its seat count (`seats`)."""
    return int(getattr(view, "seats", 0) or 0)


def sample_world(rules: Engine, view: Message, seat: int, rng: Rng) -> Any | None:
    """A state consistent with `view`, or None where the engine cannot sample one."""
    try:
        return rules.determinize(view, seat, rng)
    except Exception:  # noqa: BLE001 - a search bot degrades to random, never fails a decision
        return None


def step(rules: Engine, state: Any, seat: int, command: Message, rng: Rng) -> Any | None:
    """The state after `command` in a sampled world, or None if that world refuses it
    (a sample can be inconsistent with what the real table allows)."""
    try:
        return fold(rules, rules.decide(state, seat, command, rng), state)
    except RuleViolation:
        return None
    except Exception:  # noqa: BLE001 - an engine error in a sampled world only loses that sample
        return None
