"""The only source of chance an engine may use.

`decide` gets an `Rng` derived from the match seed and the match version, so the
same command on the same state always gives the same events, and replays never
need a generator: every outcome is written into the events.
"""

from __future__ import annotations

import _random
import hashlib
import random
from collections.abc import Callable, MutableSequence, Sequence
from typing import TypeVar

T = TypeVar("T")
_new = object.__new__
_Random = random.Random
_new_random = random.Random.__new__
_seed_random = _random.Random.seed


def _generator(seed: int) -> random.Random:
    """`random.Random(seed)` without its Python `__init__` and `seed` wrappers (~5 k of the
    ~36 k instructions a seeding costs): for an int seed those only hand it to the C seeding
    and set `gauss_next`, so the object is the same."""
    if type(seed) is not int:
        return _Random(seed)
    rand = _new_random(_Random)
    _seed_random(rand, seed)
    rand.gauss_next = None  # type: ignore[attr-defined]
    return rand


def derive_seed(seed: int, version: int, salt: str = "") -> int:
    digest = hashlib.sha256(f"{seed}:{version}:{salt}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class Rng:
    """A seeded generator with the few draws games need.

    Nothing is computed before the first draw: most commands draw nothing, and hashing the
    seed of a derived generator (`derive`) or seeding a Mersenne Twister costs more than
    deciding many a command. `_seed` holds the seed, or the (seed, version, salt) it derives
    from until the first draw."""

    __slots__ = ("_seed", "_rand")

    def __init__(self, seed: int) -> None:
        self._seed: int | tuple[int, int, str] = seed
        self._rand: random.Random | None = None

    @classmethod
    def derive(cls, seed: int, version: int, salt: str = "") -> Rng:
        """The generator of `derive_seed(seed, version, salt)`, hashed only when first drawn."""
        rng = _new(cls)  # every command derives one: skip __init__'s call
        rng._seed = (seed, version, salt)
        rng._rand = None
        return rng

    @property
    def _r(self) -> random.Random:
        rand = self._rand
        if rand is None:
            rand = self._seeded()
        return rand

    def _seeded(self) -> random.Random:
        seed = self._seed
        rand = self._rand = _generator(derive_seed(*seed) if isinstance(seed, tuple) else seed)
        return rand

    # randint, randrange and choice make the very draws `random.Random` makes for them
    # (`randrange(n)` is `_randbelow(n)`: getrandbits of n's bit length until below n), without
    # its two Python frames and argument checks per draw; anything but a plain int range (an
    # empty one included) goes to `random.Random` itself, for the same answer or error.

    def randint(self, a: int, b: int) -> int:
        """Uniform integer in [a, b], both included."""
        rand = self._rand or self._seeded()
        if type(a) is int and type(b) is int and b >= a:
            return a + _below(rand.getrandbits, b - a + 1)
        return rand.randint(a, b)

    def randrange(self, n: int) -> int:
        rand = self._rand or self._seeded()
        if type(n) is int and n > 0:
            getrandbits = rand.getrandbits
            k = n.bit_length()
            r = getrandbits(k)
            while r >= n:
                r = getrandbits(k)
            return r
        return rand.randrange(n)

    def choice(self, items: Sequence[T]) -> T:
        n = len(items)
        rand = self._rand or self._seeded()
        return items[_below(rand.getrandbits, n) if n > 0 else rand.randrange(n)]

    def shuffle(self, items: MutableSequence[T]) -> None:
        (self._rand or self._seeded()).shuffle(items)

    def shuffled(self, items: Sequence[T]) -> list[T]:
        out = list(items)
        (self._rand or self._seeded()).shuffle(out)
        return out

    def sample(self, items: Sequence[T], k: int) -> list[T]:
        return (self._rand or self._seeded()).sample(list(items), k)

    def random(self) -> float:
        return (self._rand or self._seeded()).random()

    def die(self, faces: int = 6) -> int:
        return self.randint(1, faces)


def _below(getrandbits: Callable[[int], int], n: int) -> int:
    """`random.Random._randbelow(n)` for n >= 1: the same draws."""
    k = n.bit_length()
    r = getrandbits(k)
    while r >= n:
        r = getrandbits(k)
    return r
