"""setup(config, seed): the opening events (GC-S01 to GC-S14) and the first Step 1.

All chance happens here, with the match's generator, and lands in the events: the shuffle in
the dealt Stashes and in the server-only pile, The Fuzz!'s position, the first Boss.
"""

from __future__ import annotations

from famiglia.engine import MatchConfig, Rng, RuleViolation

from . import config as cfg
from . import events as ev
from .data import FUZZ, LOOT_VALUES, MAX_PLAYERS, MIN_PLAYERS, fuzz_gap_range, loot_deck
from .decide.rounds import start_round
from .emitter import Emitter
from .events import Event


def setup(config: MatchConfig, seed: int) -> list[Event]:
    seats = config.seats
    if not MIN_PLAYERS <= seats <= MAX_PLAYERS:
        raise RuleViolation(
            "GC-S01", f"GoodCritters needs {MIN_PLAYERS} to {MAX_PLAYERS} players, not {seats}"
        )
    options = cfg.normalize(config.options)
    items = tuple(sorted(options.items()))
    conf = cfg.parse_items(items, seats)
    rng = Rng.derive(seed, 0, "goodcritters-setup")
    em = Emitter(None, rng)
    # GC-S13: the configured first Boss, else a seat at random
    boss = conf.first_boss_seat if conf.first_boss_seat is not None else rng.randrange(seats)
    em.emit(ev.game_set_up(seats, items, boss))
    # GC-S09: shuffle, then each seat takes the topmost card of each value
    deck = rng.shuffled(loot_deck(conf.copies))
    # the topmost card of a value not taken yet is the next one of that value in deck order
    of_value: dict[int, list[str]] = {value: [] for value in LOOT_VALUES}
    for c in deck:
        of_value[c.value].append(c.id)
    taken: set[str] = set()
    for seat in range(seats):
        stash = [of_value[value][seat] for value in LOOT_VALUES]
        taken.update(stash)
        em.emit(ev.stash_dealt(seat, stash))
    pile = [c.id for c in deck if c.id not in taken]
    # GC-S10, GC-S11: The Fuzz! goes uniformly into a gap of its part of the pile
    low, high = fuzz_gap_range(seats, len(pile))
    gap = rng.randint(low, high)
    pile.insert(gap, FUZZ)
    em.emit(ev.pile_stacked(pile, gap))
    start_round(em, boss, show_loot=True)  # GC-S14, GC-R02
    return em.done()
