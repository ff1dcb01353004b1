"""GoodCritters tables: the Loot deck, the Action cards, the Fuzz table (GC-S05 to GC-S11, GC-A08).

Data only. Card ids run by value, then by type in the table's column order, then by copy
(GC-S07), so the default deck is L001 (a $2,000 cash card) to L140 (a $5,000 sculpture).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

FUZZ = "FUZZ"
"""The Fuzz! card's id in the pile (GC-S10); it is no Loot card."""

NOBODY = -1
"""A seat field that names nobody (a kept Threat marker, no turn)."""

# GC-S05, GC-K01 `loot_values` [seed]
LOOT_VALUES: tuple[int, ...] = (2000, 3000, 4000, 5000)
# GC-S06, GC-K01 `loot_types` [found S1]
LOOT_TYPES: tuple[str, ...] = ("cash", "gems", "jewelry", "painting", "sculpture")
# GC-S07 [default]: 7 copies of each value and type, 140 cards, $490,000
LOOT_COPIES = 7

# GC-A08: the five Action cards, numbered as the proto enum ActionCard.
VOTE_YES, VOTE_NO, SKIM, ROB, GUARD = 1, 2, 3, 4, 5
ACTION_CARDS: tuple[int, ...] = (VOTE_YES, VOTE_NO, SKIM, ROB, GUARD)
ACTION_NAMES: dict[int, str] = {
    0: "-",
    VOTE_YES: "YES",
    VOTE_NO: "NO",
    SKIM: "SKIM",
    ROB: "ROB",
    GUARD: "GUARD",
}
ACTION_KEYS: dict[int, str] = {
    VOTE_YES: "vote_yes",
    VOTE_NO: "vote_no",
    SKIM: "skim",
    ROB: "rob",
    GUARD: "guard",
}

# GC-S10 [seed]: players -> (parts P, Fuzz part F counted from the top)
FUZZ_TABLE: dict[int, tuple[int, int]] = {
    4: (6, 4),
    5: (7, 5),
    6: (5, 4),
    7: (7, 6),
    8: (5, 5),
}

# GC-S01 [found S1]
MIN_PLAYERS, MAX_PLAYERS = 4, 8


@dataclass(frozen=True, slots=True)
class LootCard:
    id: str
    value: int
    type: str


@cache
def loot_deck(copies: int = LOOT_COPIES) -> tuple[LootCard, ...]:
    """GC-S07: the Loot deck in id order."""
    cards: list[LootCard] = []
    for value in LOOT_VALUES:
        for kind in LOOT_TYPES:
            for _ in range(copies):
                cards.append(LootCard(f"L{len(cards) + 1:03d}", value, kind))
    return tuple(cards)


@cache
def card_values(copies: int = LOOT_COPIES) -> dict[str, int]:
    """Card id -> face value, for scoring (GC-E06)."""
    return {c.id: c.value for c in loot_deck(copies)}


def fuzz_gap_range(players: int, pile_size: int) -> tuple[int, int]:
    """GC-S11: the least and the most Loot cards that may lie above The Fuzz!."""
    parts, fuzz_part = FUZZ_TABLE[players]
    return (fuzz_part - 1) * pile_size // parts, fuzz_part * pile_size // parts
