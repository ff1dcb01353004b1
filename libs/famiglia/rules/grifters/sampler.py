"""Drawing the compound choices of `legal_commands` at random, over every legal member.

Two Grifters choices are compound: which cards make a Job's Team (GR-J03, GR-D02), hundreds of
Teams for one Job once a hand holds a dozen cards, and the Forger's pair of Jobs (GR-K11), one
own Job by one Job of an opponent. Without a random generator `legal_commands` lists the same
representative members every time; with one it lists members drawn here, so that every legal
member can come up (DESIGN.md, "a complete generator/sampler that covers them all").

The Teams of a Job are counted and indexed without listing them: `team_at(skills, job, i)` is the
i-th Team of `commands.teams` (a product, one combination per skill), so a draw costs the same
for ten Teams as for ten thousand.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb
from typing import TypeVar

from famiglia.engine import Draws

from .data import BRAIN, BRAWN, JOBS_BY_ID, SPEED

T = TypeVar("T")

#: team_count's answers: asked at every play decision with a Job in reach, from a small table
#: (at most 51 cards of a skill, 20 Jobs)
_COUNTS: dict[tuple[int, int, int, str], int] = {}


def team_count(brain: int, speed: int, brawn: int, job: str) -> int:
    """How many Teams match `job` (GR-J03) in a hand with that many cards of each skill."""
    key = (brain, speed, brawn, job)
    n = _COUNTS.get(key)
    if n is None:
        needs = dict(JOBS_BY_ID[job].skills)
        n = comb(brain, needs.get(BRAIN, 0)) * comb(speed, needs.get(SPEED, 0)) * comb(brawn, needs.get(BRAWN, 0))
        _COUNTS[key] = n
    return n


def _combination_at(items: Sequence[str], k: int, rank: int) -> list[str]:
    """The `rank`-th k-combination of `items` in `itertools.combinations` order."""
    out: list[str] = []
    i = 0
    while k:
        first = comb(len(items) - i - 1, k - 1)  # combinations that start with items[i]
        if rank < first:
            out.append(items[i])
            k -= 1
        else:
            rank -= first
        i += 1
    return out


def team_at(skills: dict[str, list[str]], job: str, index: int) -> tuple[str, ...]:
    """The `index`-th Team of `commands.teams(hand, job)`: the last skill's combination varies
    fastest, as in `itertools.product`."""
    parts = [(skills[skill], n) for skill, n in JOBS_BY_ID[job].skills if n]
    picks: list[list[str]] = []
    for cards, n in reversed(parts):
        index, rank = divmod(index, comb(len(cards), n))
        picks.append(_combination_at(cards, n, rank))
    return tuple(card for pick in reversed(picks) for card in pick)


def draw_teams(skills: dict[str, list[str]], jobs: Sequence[tuple[str, int]], budget: int,
               rng: Draws) -> list[tuple[str, tuple[str, ...]]]:
    """`budget` distinct (job, Team) pairs out of `jobs` ((job, how many Teams), in stack order),
    listed by Job and then in `teams` order. Each Job gets one uniform Team first while the
    budget lasts (the Jobs served picked at random), so every available Job shows; the rest are
    uniform over all the Teams. Every Team has a positive chance whenever `budget` > 0."""
    total = sum(n for _, n in jobs)
    budget = min(budget, total)
    starts = []  # the global index of each Job's first Team
    at = 0
    for _, n in jobs:
        starts.append(at)
        at += n
    chosen: set[int] = set()
    for j in rng.sample(range(len(jobs)), min(budget, len(jobs))):
        chosen.add(starts[j] + rng.randrange(jobs[j][1]))
    rest = budget - len(chosen)
    if rest:
        # one sample over the whole range (a range is never listed): dropping those already
        # chosen leaves enough, since at most len(chosen) of them can be
        extra = [i for i in rng.sample(range(total), min(total, rest + len(chosen))) if i not in chosen]
        chosen.update(extra[:rest])
    out = []
    j = 0
    for i in sorted(chosen):
        while j + 1 < len(jobs) and starts[j + 1] <= i:
            j += 1
        job = jobs[j][0]
        out.append((job, team_at(skills, job, i - starts[j])))
    return out


