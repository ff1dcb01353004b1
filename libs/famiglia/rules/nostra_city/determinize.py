"""determinize(view, seat, rng): a full State consistent with what `seat` sees.

Built from the View alone (never the true state): everything public is copied; Notes,
Vendetta cards, Street cards and Location cards the seat cannot see are dealt at random
into the hidden places, keeping every public count (NC-H01), the seat's own secrets, the
Notes it knows are in other seats' Banks (`known_bank`, NC-H03, NC-H14) or in a Bank and its
sealed bids (`known_before_bids`, NC-H04), the Notes of the bids shown this Meeting on the
Note discard pile while nothing can have shuffled it into the deck (NC-H06, NC-M08, NC-M12),
a Vendetta deck of reshuffled cards only after a reshuffle (`vendetta_reshuffled`, NC-K55), and
hidden bids on Street spaces that hold a card (NC-X07).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from famiglia.engine import Rng
from famiglia.engine.readings import ViewReadings
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
    return _deal(_read(view, seat), rng)


_ChoiceRow = tuple[str, int, tuple[int, ...], "tuple[int, ...] | None", str, int, str, str, int]


@dataclass(frozen=True, slots=True)
class _Table:
    """What the View fixes for one seat, before anything hidden is dealt: the cards it cannot
    see (in id order), how many go where, and every public field already as state values."""

    seat: int
    over: bool
    pool: tuple[int, ...]
    """Notes the seat has not seen, in id order."""
    peeked: tuple[int, ...]
    banks: tuple[tuple[int, ...] | int, ...]
    """A known Bank, or how many Notes to deal it (its `known` Notes included)."""
    known: tuple[tuple[int, ...], ...]
    """Per seat, the Notes of its Bank the seat knows are there (NC-H03, NC-H14)."""
    before_bids: tuple[tuple[int, ...], ...]
    """Per seat, the Notes the seat knew in its Bank before its sealed bids: in the Bank or a bid."""
    bids: tuple[tuple[int, str, int, int, tuple[int, ...] | None], ...]
    """(seat, wiseguy, count, location, its Notes or None: deal `count`)."""
    choice: _ChoiceRow | None
    """The Choice's fields with its Notes, or None in their place: deal `choice_notes`."""
    choice_notes: int
    hidden_pile: int
    pile_head: tuple[tuple[int, int], ...]
    placers: tuple[int, ...]
    over_pile: tuple[tuple[int, int], ...] | None
    discard_size: int
    shown: tuple[int, ...]
    """Notes of the Note discard pile everyone saw go there: the bids shown this Meeting."""
    deck_size: int
    vendetta: tuple[str, ...]
    """Vendetta cards the seat has not seen, in id order."""
    hands: tuple[tuple[str, ...] | int, ...]
    vendetta_deck_size: int
    reshuffled: frozenset[str]
    """The cards the last Vendetta reshuffle made the deck (NC-K55): the deck holds none but these."""
    street: tuple[str, ...]
    """Street cards nobody can see, in deck order."""
    set_aside_size: int
    street_deck_size: int
    locations: tuple[tuple[int, ...] | int, ...]
    """Known Location cards, or how many to draw from the four a hidden bid left (-1 - count)."""
    open_spaces: frozenset[int]
    """The Street spaces holding a card: only these can a hidden bid name (NC-X07)."""
    seat_fields: tuple[dict[str, object], ...]
    fields: dict[str, object]
    """Every other State field."""



_STREET_ALL = (*(w.id for w in WISEGUYS), *(t.id for t in TURFS), *RESPECT_CARDS, *INVESTIGATION_BY_ID)
_HOLDABLE = frozenset(v.id for v in VENDETTA if VENDETTA_BY_ID[v.id].kind in ("snitch", "revenge"))


def _read_view(view: pb.View, seat: int) -> _Table:
    n = view.seats
    options = dict(view.options)
    config = Config.parse(n, options)
    pv = list(view.players)
    over = view.phase == Phase.OVER.value  # NC-H16: everything but deck orders is shown

    def mine(i: int) -> bool:
        return over or i == seat

    known_notes: set[int] = set()
    me = pv[seat]
    known = tuple(() if mine(i) else tuple(p.known_bank) for i, p in enumerate(pv))
    before_bids = tuple(() if mine(i) else tuple(p.known_before_bids) for i, p in enumerate(pv))
    for i, p in enumerate(pv):
        if mine(i):
            known_notes.update(p.bank, p.corrupted)
        known_notes.update(known[i], before_bids[i])
    known_notes.update(view.corruption_pile)
    for b in view.bids:
        if mine(b.seat):
            known_notes.update(b.notes)
    choice_v = view.choice if view.HasField("choice") else None
    own_choice = choice_v is not None and choice_v.seat == seat
    if own_choice and choice_v is not None:
        known_notes.update(choice_v.notes)
    shown = _shown_discards(view, known_notes)
    known_notes.update(shown)
    peeked = tuple(x for x in me.peeked if x not in known_notes)
    pool = tuple(x.id for x in NOTES if x.id not in known_notes and x.id not in peeked)
    banks = tuple(tuple(p.bank) if mine(i) else p.bank_size for i, p in enumerate(pv))
    bids = tuple((b.seat, b.wiseguy, b.count, b.location, tuple(b.notes) if mine(b.seat) else None)
                 for b in view.bids)
    choice: _ChoiceRow | None = None
    if choice_v is not None:
        choice = (choice_v.kind, choice_v.seat, tuple(choice_v.shares),
                  tuple(choice_v.notes) if own_choice else None, choice_v.card,
                  choice_v.cause, choice_v.wiseguy, choice_v.declared, choice_v.keep)
    # the Corruption Pile: own Notes, Notes seen with W14, then unknown ones
    hidden_pile = 0 if over else view.corruption_pile_size - len(me.corrupted)
    placers: list[int] = []
    for i, p in enumerate(pv):
        if i != seat:
            placers += [i] * p.corruption_count
    placers += [-1] * hidden_pile
    over_pile = None
    if over:
        placer = {x: i for i, p in enumerate(pv) for x in p.corrupted}
        over_pile = tuple((x, placer.get(x, -1)) for x in view.corruption_pile)

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
    vendetta = tuple(v.id for v in VENDETTA if v.id not in seen)
    hands = tuple(tuple(p.hand) if mine(i) else p.hand_size for i, p in enumerate(pv))

    # Street cards
    visible: set[str] = set(view.street) | set(view.removed)
    for p in pv:
        visible.update(p.wiseguys, p.turfs, p.trophies)
    if choice_v is not None and choice_v.kind == "keep":
        visible.add(choice_v.card)
    street = tuple(c for c in _STREET_ALL if c not in visible)

    # Location cards of unrevealed bids
    locations: list[tuple[int, ...] | int] = []
    for i, p in enumerate(pv):
        if mine(i):
            locations.append(tuple(p.locations))
        elif view.locations_revealed or view.phase not in ("meeting", "resolution"):
            locations.append(tuple(range(5 - p.locations_left, 5)))
        else:
            locations.append(-1 - p.locations_left)
    seat_fields = tuple(dict(
        wiseguys=tuple(p.wiseguys), turfs=tuple(p.turfs), busy=frozenset(p.busy), trophies=tuple(p.trophies),
        vendetta_drawn=p.vendetta_drawn, corrupted=tuple(p.corrupted) if mine(i) else (),
        corruption_count=p.corruption_count, corruption_actions=p.corruption_actions,
        cashins=tuple(p.cashins), peeked=tuple(p.peeked) if mine(i) else (),
        known_by=tuple((seat, x) for x in known[i]),
        known_before_bids=tuple((seat, x) for x in before_bids[i])) for i, p in enumerate(pv))
    titles = []
    for title in (UNDERBOSS, CONSIGLIERE, PRIMO_CAPO):
        for i, p in enumerate(pv):
            if title in p.trophies:
                titles.append((title, i))
    taken = {c for p in pv for c in p.trophies}
    return _Table(
        seat=seat, over=over, pool=pool, peeked=peeked, banks=banks, known=known, before_bids=before_bids,
        bids=bids, choice=choice,
        choice_notes=choice_v.note_count if choice_v is not None else 0, hidden_pile=hidden_pile,
        pile_head=tuple((x, seat) for x in me.corrupted), placers=tuple(placers), over_pile=over_pile,
        discard_size=view.note_discard_size, shown=shown, deck_size=view.note_deck_size, vendetta=vendetta, hands=hands,
        vendetta_deck_size=view.vendetta_deck_size, reshuffled=frozenset(view.vendetta_reshuffled),
        street=street, set_aside_size=view.set_aside_size,
        street_deck_size=view.street_deck_size, locations=tuple(locations),
        open_spaces=frozenset(i + 1 for i, card in enumerate(view.street) if card), seat_fields=seat_fields,
        fields=dict(
            config=config, options=tuple(sorted(options.items())), seats=n,
            month=view.month, phase=Phase(view.phase), order=tuple(view.order), turn=view.turn,
            turn_acted=view.turn_acted, first_player=view.first_player,
            first_player_moved=view.first_player_moved, verdict=view.verdict, street=tuple(view.street),
            removed=tuple(view.removed), vendetta_discard=tuple(view.vendetta_discard),
            vendetta_reshuffled=tuple(view.vendetta_reshuffled),
            locations_revealed=view.locations_revealed, resolution=view.resolution,
            shown_bids=tuple((r.space, b.seat, b.wiseguy, tuple(b.notes), b.value)
                             for r in view.revealed_bids for b in r.bids),
            meeting_winners=frozenset(view.meeting_winners), meeting_bidders=frozenset(view.meeting_bidders),
            draws=tuple(Draw(d.seat, d.count, d.cause) for d in view.draws),
            underboss=view.underboss, titles=tuple(titles),
            zealous_left=tuple(z for z in ZEALOUS_CARDS[:config.zealous_cards] if z not in taken),
            w13_spent=view.w13_spent, verdict_result=view.verdict_result,
            snitches=tuple(i for i, p in enumerate(pv) if p.snitch),
        ),
    )


def _shown_discards(view: pb.View, known: set[int]) -> tuple[int, ...]:
    """NC-M08, NC-M12: every Note of a shown bid goes to the Note discard pile, and stays there
    until a Police Raid shuffles the pile into the deck (NC-B07). Between the Meeting's
    resolution and the end of the Trial only W12 and W15 draw from the deck (NC-W112, NC-W115),
    a Police Raid either turns up empties the pile into it, and nothing is discarded after the
    resolution: a pile smaller than the shown Notes was shuffled."""
    if view.phase not in (Phase.RESOLUTION.value, Phase.TRIAL.value):
        return ()  # from the Business on, cash-ins may have drawn them again
    shown = tuple(dict.fromkeys(n for r in view.revealed_bids for b in r.bids for n in b.notes if n not in known))
    return shown if len(shown) <= view.note_discard_size else ()


def _deal(table: _Table, rng: Rng) -> State:
    """One world: Notes, Vendetta, Street and Location cards dealt into the hidden places,
    with the draws (and in the order) the sample has always used."""
    pool = list(table.pool)
    rng.shuffle(pool)

    def take(k: int) -> list[int]:
        out = pool[:k]
        del pool[:k]
        return out

    placed = _placed_before_bids(table, rng) if any(table.before_bids) else {}
    banks = [list(b) if isinstance(b, tuple) else [*known, *_filled(placed.get((i, -1)), b - len(known), take)]
             for i, (b, known) in enumerate(zip(table.banks, table.known, strict=True))]
    bids = [Bid(s, w, count, loc, notes if notes is not None else tuple(_filled(placed.get((s, j)), count, take)))
            for j, (s, w, count, loc, notes) in enumerate(table.bids)]
    choice = None
    if table.choice is not None:
        kind, cseat, shares, notes, card, cause, wiseguy, declared, keep = table.choice
        choice = Choice(kind, cseat, shares, notes if notes is not None else tuple(take(table.choice_notes)),
                        card, cause, wiseguy, declared, keep)
    pile_notes = list(table.peeked[:table.hidden_pile])
    pile_notes += take(table.hidden_pile - len(pile_notes))
    pile = list(table.pile_head) + list(zip(pile_notes, table.placers, strict=False))
    if table.over_pile is not None:
        pile = list(table.over_pile)
    discard = take(table.discard_size - len(table.shown)) + list(table.shown)
    deck_notes = take(table.deck_size - 1) + pool  # what is left belongs to the deck
    deck_notes.insert(rng.randrange(len(deck_notes) + 1), POLICE_RAID)

    vpool = list(table.vendetta)
    rng.shuffle(vpool)
    if table.reshuffled:
        hands, vendetta_deck = _after_reshuffle(table, vpool, rng)
    else:
        hands = []
        for h in table.hands:
            if isinstance(h, tuple):
                hands.append(list(h))
                continue
            hand = [c for c in vpool if c in _HOLDABLE][:h]
            for c in hand:
                vpool.remove(c)
            hands.append(hand)
        vendetta_deck = vpool[:table.vendetta_deck_size]

    spool = list(table.street)
    rng.shuffle(spool)
    set_aside = tuple(spool[:table.set_aside_size])
    street_deck = tuple(spool[table.set_aside_size:table.set_aside_size + table.street_deck_size])

    players = []
    for i, (known, fields) in enumerate(zip(table.locations, table.seat_fields, strict=True)):
        if isinstance(known, tuple):
            locations = known
        else:
            carried = [j for j, b in enumerate(bids) if b.seat == i]
            locs = rng.shuffled([1, 2, 3, 4])
            named = [loc for loc in locs if loc in table.open_spaces][:len(carried)]  # NC-X07
            for j, loc in zip(carried, named, strict=True):
                old = bids[j]
                bids[j] = Bid(old.seat, old.wiseguy, old.count, loc, old.notes)
            unused = [loc for loc in locs if loc not in named]
            locations = tuple(sorted(unused[:-1 - known]))
        players.append(Seat(bank=tuple(sorted(banks[i])), hand=tuple(sorted(hands[i])), locations=locations,
                            **fields))  # type: ignore[arg-type]
    return State(
        players=tuple(players), street_deck=street_deck, set_aside=set_aside,
        note_deck=tuple(deck_notes), note_discard=tuple(discard), vendetta_deck=tuple(vendetta_deck),
        pile=tuple(pile), bids=tuple(bids), choice=choice, **table.fields)  # type: ignore[arg-type]


def _after_reshuffle(table: _Table, vpool: list[str], rng: Rng) -> tuple[list[list[str]], list[str]]:
    """NC-K55: the deck holds only cards of the last reshuffle (the discard pile everyone saw), so
    every unseen card outside them, a Snitch above all, is in a hidden hand; the hands are filled
    up with the reshuffled Revenge cards, and the deck is what is left. `vpool` is shuffled."""
    slots = sum(h for h in table.hands if isinstance(h, int))
    outside = [c for c in vpool if c not in table.reshuffled]
    inside = [c for c in vpool if c in table.reshuffled and c in _HOLDABLE]
    held = (outside + inside)[:slots]
    rng.shuffle(held)
    hands: list[list[str]] = []
    for h in table.hands:
        if isinstance(h, tuple):
            hands.append(list(h))
        else:
            hands.append(held[:h])
            del held[:h]
    dealt = {c for hand in hands for c in hand}
    return hands, [c for c in vpool if c not in dealt][:table.vendetta_deck_size]


def _placed_before_bids(table: _Table, rng: Rng) -> dict[tuple[int, int], list[int | None]]:
    """NC-H04: each Note a seat knew in another Bank before that seat's sealed bids is dealt
    into one of its places at random: the Bank's places not already known, or a place in one of
    its bids. Keyed (seat, -1) for the Bank, (seat, bid index) for a bid; None is a place to deal."""
    out: dict[tuple[int, int], list[int | None]] = {}
    for i, notes in enumerate(table.before_bids):
        if not notes:
            continue
        bank = table.banks[i]
        assert isinstance(bank, int)
        where: dict[tuple[int, int], list[int | None]] = {(i, -1): [None] * (bank - len(table.known[i]))}
        where.update({(i, j): [None] * count for j, (s, _, count, _, _) in enumerate(table.bids) if s == i})
        flat = [(k, n) for k, places in where.items() for n in range(len(places))]
        for note, (k, n) in zip(notes, rng.sample(flat, len(notes)), strict=True):
            where[k][n] = note
        out.update(where)
    return out


def _filled(places: list[int | None] | None, size: int, take: Callable[[int], list[int]]) -> list[int]:
    """`size` Notes: the places already dealt as they are, the others taken from the pool."""
    if places is None:
        return take(size)
    fresh = iter(take(sum(1 for n in places if n is None)))
    return [next(fresh) if n is None else n for n in places]


_read = ViewReadings(_read_view)  # read once per (View, seat)
