"""setup(config, seed): the opening events (NC-S01..S16).

Deals, deck orders and the first player are drawn here with the match's generator and
written into events (deck orders server-only), then the flow runs to the first decision.
"""

from __future__ import annotations

from famiglia.engine import MatchConfig, Rng
from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

from .config import Config
from .data import (
    DEAL_TURFS,
    DEAL_WISEGUYS,
    INVESTIGATION_BY_ID,
    NOTES,
    POLICE_RAID,
    RESPECT_CARDS,
    START_BANK,
    TURFS,
    VENDETTA,
    WISEGUYS,
)
from .decide import Emitter, settle
from .decide.reception import start_phase
from .evolve import evolve
from .state import Phase


def setup(config: MatchConfig, seed: int) -> list[pb.Event]:
    """NC-S01..S16: deal, fill the Street, shuffle the decks, name the first player."""
    options = {str(k): str(v) for k, v in config.options.items()}
    cfg = Config.parse(config.seats, options)
    rng = Rng.derive(seed, 0, "nostra_city.setup")
    n = config.seats
    first = pb.Event(match_set_up=pb.MatchSetUp(seats=n, options=options))
    em = Emitter(evolve(None, first))
    em.events.append(first)
    wiseguys = rng.shuffled([w.id for w in WISEGUYS])  # NC-S04
    turfs = rng.shuffled([t.id for t in TURFS])
    for seat in range(n):
        em(cards_dealt=pb.CardsDealt(seat=seat, wiseguys=wiseguys[seat * DEAL_WISEGUYS:(seat + 1) * DEAL_WISEGUYS],
                                     turfs=turfs[seat * DEAL_TURFS:(seat + 1) * DEAL_TURFS]))
    pool = list(NOTES)
    for seat in range(n):  # NC-S05
        bank = []
        for mark, value in START_BANK:
            note = next(x for x in pool if x.mark == mark and x.value == value)
            pool.remove(note)
            bank.append(note.id)
        em(bank_dealt=pb.BankDealt(seat=seat, notes=sorted(bank)))
    street = [*wiseguys[n * DEAL_WISEGUYS:], *turfs[n * DEAL_TURFS:], *RESPECT_CARDS, *INVESTIGATION_BY_ID]
    em(deck_shuffled=pb.DeckShuffled(deck="street", cards=rng.shuffled(street)))  # NC-S06
    em(deck_shuffled=pb.DeckShuffled(deck="note", notes=rng.shuffled([*(x.id for x in pool), POLICE_RAID])))
    em(deck_shuffled=pb.DeckShuffled(deck="vendetta", cards=rng.shuffled([v.id for v in VENDETTA])))  # NC-S10
    for space in range(1, 5):  # NC-S07
        while True:
            card = em.state.street_deck[0]
            if card in INVESTIGATION_BY_ID:
                em(street_card_set_aside=pb.StreetCardSetAside(space=space, card=card))
                continue
            em(street_card_revealed=pb.StreetCardRevealed(space=space, card=card))
            break
    if em.state.set_aside:  # NC-S08
        deck = rng.shuffled([*em.state.street_deck, *em.state.set_aside])
        em(deck_shuffled=pb.DeckShuffled(deck="street", cards=deck))
    fp = cfg.first_player_seat if cfg.first_player_seat >= 0 else rng.randrange(n)  # NC-S15/S16
    em(first_player_chosen=pb.FirstPlayerChosen(seat=fp))
    start_phase(em, Phase.BUSINESS, 1)  # NC-S14
    settle(em, rng)
    return em.events
