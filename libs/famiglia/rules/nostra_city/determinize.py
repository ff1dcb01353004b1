"""determinize(view, seat, rng): a full State consistent with what `seat` sees.

Built from the View alone (never the true state): everything public is copied; Notes,
Vendetta cards, Street cards and Location cards the seat cannot see are dealt at random
into the hidden places, keeping every public count (NC-H01) and the seat's own secrets.
"""

from __future__ import annotations

from famiglia.engine import Rng
from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

from .config import Config
from .data import (
    ATLANTIC_CARD,
    ATLANTIC_CITY,
    CONSIGLIERE,
    INVESTIGATION_BY_ID,
    NOTES,
    POLICE_RAID,
    PRIMO_CAPO,
    RESPECT_CARDS,
    TURFS,
    UNDERBOSS,
    VENDETTA,
    VENDETTA_BY_ID,
    WISEGUYS,
    ZEALOUS_CARDS,
)
from .state import Bid, Choice, Draw, Phase, Seat, State


def determinize(view: pb.View, seat: int, rng: Rng) -> State:
    n = view.seats
    options = dict(view.options)
    config = Config.parse(n, options)
    pv = list(view.players)
    over = view.phase == Phase.OVER.value  # NC-H16: everything but deck orders is shown

    def mine(i: int) -> bool:
        return over or i == seat

    known_notes: set[int] = set()
    me = pv[seat]
    for i, p in enumerate(pv):
        if mine(i):
            known_notes.update(p.bank, p.corrupted)
    known_notes.update(view.corruption_pile)
    for b in view.bids:
        if mine(b.seat):
            known_notes.update(b.notes)
    choice_v = view.choice if view.HasField("choice") else None
    own_choice = choice_v is not None and choice_v.seat == seat
    if own_choice and choice_v is not None:
        known_notes.update(choice_v.notes)
    peeked = [x for x in me.peeked if x not in known_notes]
    pool = [x.id for x in NOTES if x.id not in known_notes and x.id not in peeked]
    rng.shuffle(pool)

    def take(k: int) -> list[int]:
        out = pool[:k]
        del pool[:k]
        return out

    banks = [list(p.bank) if mine(i) else take(p.bank_size) for i, p in enumerate(pv)]
    bids = []
    for b in view.bids:
        if mine(b.seat):
            bids.append(Bid(b.seat, b.wiseguy, b.count, b.location, tuple(b.notes)))
        else:
            bids.append(Bid(b.seat, b.wiseguy, b.count, b.location, tuple(take(b.count))))
    choice = None
    if choice_v is not None:
        notes = tuple(choice_v.notes) if own_choice else tuple(take(choice_v.note_count))
        choice = Choice(choice_v.kind, choice_v.seat, tuple(choice_v.shares), notes, choice_v.card,
                        choice_v.cause, choice_v.wiseguy, choice_v.declared, choice_v.keep)
    # the Corruption Pile: own Notes, Notes seen with W14, then unknown ones
    hidden_pile = 0 if over else view.corruption_pile_size - len(me.corrupted)
    pile_notes = peeked[:hidden_pile]
    pile_notes += take(hidden_pile - len(pile_notes))
    placers: list[int] = []
    for i, p in enumerate(pv):
        if i != seat:
            placers += [i] * p.corruption_count
    placers += [-1] * hidden_pile
    pile = [(x, seat) for x in me.corrupted] + list(zip(pile_notes, placers, strict=False))
    if over:
        placer = {x: i for i, p in enumerate(pv) for x in p.corrupted}
        pile = [(x, placer.get(x, -1)) for x in view.corruption_pile]
    discard = take(view.note_discard_size)
    deck_notes = take(view.note_deck_size - 1) + pool  # what is left belongs to the deck
    deck_notes.insert(rng.randrange(len(deck_notes) + 1), POLICE_RAID)

    # Vendetta cards
    placed_ac = any(ATLANTIC_CITY in p.turfs for p in pv)
    seen = set(view.vendetta_discard)
    for i, p in enumerate(pv):
        if mine(i):
            seen.update(p.hand)
    if placed_ac:
        seen.add(ATLANTIC_CARD)
    if choice_v is not None and choice_v.kind == "rage":
        seen.add(choice_v.card)
    vpool = [v.id for v in VENDETTA if v.id not in seen]
    rng.shuffle(vpool)
    hands: list[list[str]] = []
    for i, p in enumerate(pv):
        if mine(i):
            hands.append(list(p.hand))
            continue
        holdable = [c for c in vpool if VENDETTA_BY_ID[c].kind in ("snitch", "revenge")]
        hand = holdable[:p.hand_size]
        for c in hand:
            vpool.remove(c)
        hands.append(hand)
    vendetta_deck = vpool[:view.vendetta_deck_size]

    # Street cards
    visible: set[str] = set(view.street) | set(view.removed)
    for p in pv:
        visible.update(p.wiseguys, p.turfs, p.trophies)
    if choice_v is not None and choice_v.kind == "keep":
        visible.add(choice_v.card)
    street_all = [*(w.id for w in WISEGUYS), *(t.id for t in TURFS), *RESPECT_CARDS, *INVESTIGATION_BY_ID]
    spool = [c for c in street_all if c not in visible]
    rng.shuffle(spool)
    set_aside = tuple(spool[:view.set_aside_size])
    street_deck = tuple(spool[view.set_aside_size:view.set_aside_size + view.street_deck_size])

    # Location cards of unrevealed bids
    players = []
    for i, p in enumerate(pv):
        if i == seat or view.locations_revealed or view.phase not in ("meeting", "resolution"):
            locations = tuple(p.locations) if i == seat else tuple(range(5 - p.locations_left, 5))
        else:
            carried = [j for j, b in enumerate(bids) if b.seat == i]
            locs = rng.shuffled([1, 2, 3, 4])
            for j, loc in zip(carried, locs, strict=False):
                old = bids[j]
                bids[j] = Bid(old.seat, old.wiseguy, old.count, loc, old.notes)
            locations = tuple(sorted(locs[len(carried):len(carried) + p.locations_left]))
        if mine(i):
            locations = tuple(p.locations)
        players.append(Seat(
            wiseguys=tuple(p.wiseguys), turfs=tuple(p.turfs), busy=frozenset(p.busy),
            bank=tuple(sorted(banks[i])), hand=tuple(sorted(hands[i])), trophies=tuple(p.trophies),
            locations=locations, vendetta_drawn=p.vendetta_drawn,
            corrupted=tuple(p.corrupted) if mine(i) else (),
            corruption_count=p.corruption_count, corruption_actions=p.corruption_actions,
            cashins=tuple(p.cashins), peeked=tuple(p.peeked) if mine(i) else ()))
    titles = []
    for title in (UNDERBOSS, CONSIGLIERE, PRIMO_CAPO):
        for i, p in enumerate(pv):
            if title in p.trophies:
                titles.append((title, i))
    taken = {c for p in pv for c in p.trophies}
    return State(
        config=config, options=tuple(sorted(options.items())), seats=n, players=tuple(players),
        month=view.month, phase=Phase(view.phase), order=tuple(view.order), turn=view.turn,
        turn_acted=view.turn_acted, first_player=view.first_player,
        first_player_moved=view.first_player_moved, verdict=view.verdict, street=tuple(view.street),
        street_deck=street_deck, set_aside=set_aside, removed=tuple(view.removed),
        note_deck=tuple(deck_notes), note_discard=tuple(discard), vendetta_deck=tuple(vendetta_deck),
        vendetta_discard=tuple(view.vendetta_discard), pile=tuple(pile), bids=tuple(bids),
        locations_revealed=view.locations_revealed, resolution=view.resolution,
        meeting_winners=frozenset(view.meeting_winners), meeting_bidders=frozenset(view.meeting_bidders),
        choice=choice, draws=tuple(Draw(d.seat, d.count, d.cause) for d in view.draws),
        underboss=view.underboss, titles=tuple(titles),
        zealous_left=tuple(z for z in ZEALOUS_CARDS[:config.zealous_cards] if z not in taken), w13_spent=view.w13_spent,
        verdict_result=view.verdict_result,
        snitches=tuple(i for i, p in enumerate(pv) if p.snitch),
    )
