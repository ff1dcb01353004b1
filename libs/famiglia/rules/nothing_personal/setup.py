"""setup(config, seed): the opening events (NP-S1..S12)."""

from __future__ import annotations

from famiglia.engine import MatchConfig, Rng, RuleViolation

from .board import ring_order
from .config import parse_options
from .data import GANGSTERS, INFLUENCE, SETUP_LAPS, START_CAPO, START_HAND, G, Gangster, match_gangsters
from .events import ev
from .evolve import evolve
from .state import Phase
from .tx import Tx


def deal_board(rng: Rng, random_setup: bool, gangsters: tuple[Gangster, ...] = GANGSTERS,
               ) -> tuple[list[str], list[str], list[str]]:
    """NP-S5..S7 (NP-V6 random setup, NP-V7 expansion cards shuffled in, NP-X5 short decks).
    Returns (12 spots, set aside, deck)."""
    spots = [""] * 12
    if random_setup:
        deck = rng.shuffled([g.id for g in gangsters])
        order = [8, 7, 6, 5, 4, 3, 2, 1, 0, 9, 10, 11]
        for spot in order:
            if deck:
                spots[spot] = deck.pop(0)
        return spots, [], deck
    spots[8] = START_CAPO
    deck = rng.shuffled([g.id for g in gangsters if g.id != START_CAPO])
    aside: list[str] = []
    shown: set[str] = set()
    for spot in (7, 6, 5, 4):   # positions 8, 7, 6, 5
        while deck:
            card = deck.pop(0)
            new_type = bool(G[card].types - shown)
            rest_can = any(G[c].types - shown for c in deck)
            if new_type or not rest_can:   # NP-X5: kept anyway when no card left shows a missing type
                spots[spot] = card
                shown |= G[card].types
                break
            aside.append(card)
    deck = rng.shuffled(deck + aside)
    for spot in (3, 2, 1, 0, 9, 10, 11):
        if deck:
            spots[spot] = deck.pop(0)
    return spots, aside, deck


def setup(config: MatchConfig, seed: int) -> list:
    n = config.seats
    if not 3 <= n <= 5:
        raise RuleViolation("NP-S1", "Nothing Personal is for 3 to 5 seats")
    options = {str(k): str(v) for k, v in dict(config.options).items()}
    cfg = parse_options(options, n)
    rng = Rng.derive(seed, 0, "nothing_personal/setup")
    first = ev("match_set_up", seats=n, options=options, colours=cfg.colours)
    tx = Tx(evolve(None, first), rng)
    tx.events.append(first)
    spots, aside, gdeck = deal_board(rng, cfg.random_setup, match_gangsters(cfg.expansions))
    tx.emit("board_dealt", spots=spots, set_aside=aside, gangster_deck_size=len(gdeck))
    tx.emit("gangster_deck_ordered", cards=gdeck)
    tx.emit("influence_deck_ordered", cards=rng.shuffled([c.id for c in INFLUENCE]))   # NP-S8
    for seat in range(n):
        tx.draw(seat, START_HAND, "setup")
    tx.emit("ring_holder_chosen", seat=rng.randrange(n))                               # NP-S9
    tx.emit_values("phase_began", Phase.SETUP, ring_order(tx.s) * SETUP_LAPS)       # NP-S10, NP-S11
    return tx.events
