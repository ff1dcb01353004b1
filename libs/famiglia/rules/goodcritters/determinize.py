"""determinize(view, seat, rng): a full State that the seat cannot tell from the real one.

Reads the View only. What the seat cannot see is sampled: the other Stashes (their sizes are
public, GC-H03; the cards come from the unseen ones), the Loot of offers it may not see, the
pile's order with The Fuzz! in a place the public history allows (GC-S11, GC-H07), and the
face-down Action cards of the others (GC-H06). The cards the View says the seat knows to lie in
another Stash (`known_loot`: GC-H10, GC-P06, GC-P15) stay there. The sample ignores what the
public event log may have shown (GC-H04); search bots that want that can condition on it themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from itertools import filterfalse

from famiglia.engine import Rng
from famiglia.engine.readings import ViewReadings
from famiglia.goodcritters.v1 import goodcritters_pb2 as pb

from . import config as cfg
from .data import ACTION_CARDS, FUZZ, loot_deck
from .state import Known, Offer, State, Step, Vote


def determinize(view: pb.View, seat: int, rng: Rng) -> State:
    return _deal(_read(view, seat), rng)


@dataclass(frozen=True, slots=True)
class _Table:
    """What the View fixes for one seat, before any card is dealt: the cards the seat cannot
    see (in deck order), how many go where, and every public field already as state values."""

    unseen: tuple[str, ...]
    stashes: tuple[tuple[tuple[str, ...], int], ...]
    """Each Stash's cards the seat knows (its own: all of them) and how many unseen cards to deal it."""
    offers: tuple[tuple[tuple[int, int, int, int, int], tuple[str, ...] | int], ...]
    """Each Offer's (briber, target, side, payoff cards, visibility) and its known Loot or how
    many cards to deal it."""
    pile: tuple[str, ...] | None
    """The pile once over; None: deal `pile_loot` cards and place The Fuzz! as GC-S11 allows."""
    pile_loot: int
    fuzz: tuple[int, int, int] | None
    """(drawn, low, high) while The Fuzz! is in the pile."""
    cards: tuple[int | None, ...]
    """A known Action card (0: none), or None: a face-down card the seat cannot see."""
    fields: dict[str, object]
    """Every other State field."""


@cache
def _loot_ids(copies: int) -> tuple[str, ...]:
    return tuple(c.id for c in loot_deck(copies))


def _read_view(view: pb.View, seat: int) -> _Table:
    options = tuple((o.key, o.value) for o in view.options)
    config = cfg.parse_items(options, view.seats)  # the cached parse: one Config per options
    n = view.seats
    over = view.step == Step.OVER
    seat_views = sorted(view.seat_views, key=lambda sv: sv.seat)
    seen: set[str] = set(view.table) | set(view.confiscated)
    for sv in seat_views:
        if sv.seat == seat or over:
            seen.update(sv.stash)
        else:
            seen.update(sv.known_loot)
    for ov in view.offers:
        seen.update(ov.loot)
    unseen = tuple(filterfalse(seen.__contains__, _loot_ids(config.copies)))

    # what the others hold: exact once over, else sizes from the view (or a fair share)
    fuzz_in_pile = not view.fuzz_revealed
    pile_loot = view.pile_count - (1 if fuzz_in_pile else 0)
    hidden_offer_loot = sum(ov.loot_count - len(ov.loot) for ov in view.offers)
    unknown_sizes = (
        [sv.seat for sv in seat_views if sv.seat != seat] if not (over or config.stash_counts_public) else []
    )
    spare = len(unseen) - pile_loot - hidden_offer_loot
    spare -= sum(
        sv.stash_count - len(sv.known_loot)
        for sv in seat_views
        if sv.seat != seat and not over and sv.seat not in unknown_sizes
    )
    share, extra = divmod(max(spare, 0), len(unknown_sizes)) if unknown_sizes else (0, 0)
    stashes: list[tuple[tuple[str, ...], int]] = []
    known: list[Known] = []
    for sv in seat_views:
        if sv.seat == seat or over:
            stashes.append((tuple(sv.stash), 0))
            continue
        mine = tuple(sv.known_loot)
        known.extend((seat, sv.seat, card) for card in mine)
        if sv.seat in unknown_sizes:
            stashes.append((mine, share + (unknown_sizes.index(sv.seat) < extra)))
        else:
            stashes.append((mine, max(sv.stash_count - len(mine), 0)))
    offers = tuple(((ov.briber, ov.target, ov.side, ov.payoff_cards, ov.visibility),
                    tuple(ov.loot) if len(ov.loot) == ov.loot_count else ov.loot_count) for ov in view.offers)
    fuzz = None
    if not over and fuzz_in_pile:
        # GC-S11: g cards were above The Fuzz!; `drawn` have left the pile since
        drawn = view.pile_start - view.pile_count
        low = max(view.fuzz_min_above, drawn)
        high = max(low, min(view.fuzz_max_above, drawn + pile_loot))
        fuzz = (drawn, low, high)
    cards: list[int | None] = []
    for sv in seat_views:
        if sv.revealed_card:
            cards.append(sv.revealed_card)
        elif sv.seat == seat or over:
            cards.append(sv.chosen_card)
        elif sv.has_card:
            cards.append(None)
        else:
            cards.append(0)
    seat_of = {a.card: a.seat for a in view.assignments}
    return _Table(
        unseen=unseen,
        stashes=tuple(stashes),
        offers=offers,
        pile=tuple(view.pile) if over else None,
        pile_loot=pile_loot,
        fuzz=fuzz,
        cards=tuple(cards),
        fields=dict(
            config=config,
            options=options,
            seats=n,
            boss=view.boss,
            payoff_cards=tuple(sv.payoff_cards for sv in seat_views),
            pile_start=view.pile_start,
            round=view.round,
            step=Step(view.step),
            turn=view.turn,
            table=tuple(view.table),
            assignment=tuple(seat_of[c] for c in view.table) if view.assignments else (),
            threats=tuple(sv.threat_target for sv in seat_views),
            choices=tuple(sv.choices for sv in seat_views),
            committed=tuple(sv.committed for sv in seat_views),
            changes=tuple(sv.public_changes for sv in seat_views),
            revealed=tuple(sv.revealed_card for sv in seat_views),
            skims=view.skims_revealed,
            fuzz_skimmed=view.fuzz_cause == 3,
            fuzz_out=view.fuzz_revealed,
            fuzz_cause=view.fuzz_cause,
            confiscated=tuple(view.confiscated),
            end_reason=view.end_reason,
            last_vote=_vote(view),
            known=tuple(known),
        ),
    )


def _vote(view: pb.View) -> Vote | None:
    """The latest vote, public (GC-H05), as the View shows it."""
    if not view.HasField("last_vote"):
        return None
    v = view.last_vote
    return Vote(v.round, v.boss, tuple(v.cards), tuple(v.threats), v.yes, v.no, v.outcome)


def _deal(table: _Table, rng: Rng) -> State:
    """One world: the unseen cards shuffled and dealt where the table says, in the order
    (and with the draws) the seat's sample has always used."""
    unseen = list(table.unseen)
    rng.shuffle(unseen)
    at = 0

    def take(k: int) -> tuple[str, ...]:
        nonlocal at
        k = min(k, len(unseen) - at)
        out = tuple(unseen[at:at + k])
        at += k
        return out

    stashes = tuple(mine + take(k) if k else mine for mine, k in table.stashes)
    offers = tuple(Offer(briber, target, side, loot if isinstance(loot, tuple) else take(loot), cards, seen)
                   for (briber, target, side, cards, seen), loot in table.offers)
    if table.pile is not None:
        pile = table.pile
    else:
        pile_list = list(take(table.pile_loot))
        if table.fuzz is not None:
            drawn, low, high = table.fuzz
            pile_list.insert(rng.randint(low, high) - drawn, FUZZ)
        pile = tuple(pile_list)
    cards = tuple(rng.choice(ACTION_CARDS) if c is None else c for c in table.cards)
    return State(stashes=stashes, pile=pile, cards=cards, offers=offers, **table.fields)  # type: ignore[arg-type]


_read = ViewReadings(_read_view)  # read once per (View, seat)
