"""What the search policies share: sampling worlds from a view and stepping them."""

from __future__ import annotations

import random
from collections.abc import MutableSequence, Sequence
from typing import Any, TypeVar

from google.protobuf.message import Message

from famiglia.engine import Engine, Rng, RuleViolation, fold

T = TypeVar("T")


class SearchRng(Rng):
    """The `Rng` a search hands to `determinize` and `decide`: the very same draws, but its
    shuffles are `random.Random.shuffle` written out in one loop. Sampling a world shuffles
    every card a seat cannot see (120 in GoodCritters), and the stock shuffle's call per card
    to `_randbelow` was a fifth of a one-ply decision."""

    __slots__ = ()

    def shuffle(self, items: MutableSequence[T]) -> None:
        _shuffle(self._r, items)

    def shuffled(self, items: Sequence[T]) -> list[T]:
        out = list(items)
        _shuffle(self._r, out)
        return out


def _shuffle(rand: random.Random, items: MutableSequence[T]) -> None:
    """`rand.shuffle(items)`: for i from the end, swap with `_randbelow(i + 1)`, which takes
    `i + 1`'s bit length from `getrandbits` until below `i + 1` — the same numbers drawn, so
    the same order and the generator left where it would have been."""
    if type(rand) is not random.Random:  # a subclass may draw differently: ask it
        rand.shuffle(items)
        return
    getrandbits = rand.getrandbits
    for i in range(len(items) - 1, 0, -1):
        n = i + 1
        k = n.bit_length()
        j = getrandbits(k)
        while j >= n:
            j = getrandbits(k)
        items[i], items[j] = items[j], items[i]


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
