"""determinize(view, seat, rng): a full State that the seat cannot tell from the real one.

Reads the View only. What the seat cannot see is sampled: the other Stashes (their sizes are
public, GC-H03; the cards come from the unseen ones), the Loot of offers it may not see, the
pile's order with The Fuzz! in a place the public history allows (GC-S11, GC-H07), and the
face-down Action cards of the others (GC-H06). The sample ignores what the event log may have
shown (GC-H04); search bots that want that can condition on it themselves.
"""

from __future__ import annotations

from famiglia.engine import Rng
from famiglia.goodcritters.v1 import goodcritters_pb2 as pb

from . import config as cfg
from .data import ACTION_CARDS, FUZZ, loot_deck
from .state import Offer, State, Step


def determinize(view: pb.View, seat: int, rng: Rng) -> State:
    options = tuple((o.key, o.value) for o in view.options)
    config = cfg.parse(dict(options), view.seats)
    n = view.seats
    over = view.step == Step.OVER
    seat_views = sorted(view.seat_views, key=lambda sv: sv.seat)
    seen: set[str] = set(view.table) | set(view.confiscated)
    for sv in seat_views:
        if sv.seat == seat or over:
            seen.update(sv.stash)
    for ov in view.offers:
        seen.update(ov.loot)
    unseen = [c.id for c in loot_deck(config.copies) if c.id not in seen]
    rng.shuffle(unseen)

    def take(k: int) -> tuple[str, ...]:
        k = min(k, len(unseen))
        out = tuple(unseen[:k])
        del unseen[:k]
        return out

    # what the others hold: exact once over, else sizes from the view (or a fair share)
    stashes: list[tuple[str, ...]] = []
    fuzz_in_pile = not view.fuzz_revealed
    pile_loot = view.pile_count - (1 if fuzz_in_pile else 0)
    hidden_offer_loot = sum(ov.loot_count - len(ov.loot) for ov in view.offers)
    unknown_sizes = (
        [sv.seat for sv in seat_views if sv.seat != seat] if not (over or config.stash_counts_public) else []
    )
    spare = len(unseen) - pile_loot - hidden_offer_loot
    spare -= sum(
        sv.stash_count for sv in seat_views if sv.seat != seat and not over and sv.seat not in unknown_sizes
    )
    share, extra = divmod(max(spare, 0), len(unknown_sizes)) if unknown_sizes else (0, 0)
    for sv in seat_views:
        if sv.seat == seat or over:
            stashes.append(tuple(sv.stash))
        elif sv.seat in unknown_sizes:
            stashes.append(take(share + (unknown_sizes.index(sv.seat) < extra)))
        else:
            stashes.append(take(sv.stash_count))
    offers = []
    for ov in view.offers:
        loot = tuple(ov.loot) if len(ov.loot) == ov.loot_count else take(ov.loot_count)
        offers.append(Offer(ov.briber, ov.target, ov.side, loot, ov.payoff_cards, ov.visibility))
    if over:
        pile = tuple(view.pile)
    else:
        pile_list = list(take(pile_loot))
        if fuzz_in_pile:
            # GC-S11: g cards were above The Fuzz!; `drawn` have left the pile since
            drawn = view.pile_start - view.pile_count
            low = max(view.fuzz_min_above, drawn)
            high = max(low, min(view.fuzz_max_above, drawn + pile_loot))
            pile_list.insert(rng.randint(low, high) - drawn, FUZZ)
        pile = tuple(pile_list)
    cards: list[int] = []
    for sv in seat_views:
        if sv.revealed_card:
            cards.append(sv.revealed_card)
        elif sv.seat == seat or over:
            cards.append(sv.chosen_card)
        elif sv.has_card:
            cards.append(rng.choice(ACTION_CARDS))
        else:
            cards.append(0)
    seat_of = {a.card: a.seat for a in view.assignments}
    return State(
        config=config,
        options=options,
        seats=n,
        boss=view.boss,
        stashes=tuple(stashes),
        payoff_cards=tuple(sv.payoff_cards for sv in seat_views),
        pile=pile,
        pile_start=view.pile_start,
        round=view.round,
        step=Step(view.step),
        turn=view.turn,
        table=tuple(view.table),
        assignment=tuple(seat_of[c] for c in view.table) if view.assignments else (),
        threats=tuple(sv.threat_target for sv in seat_views),
        cards=tuple(cards),
        choices=tuple(sv.choices for sv in seat_views),
        committed=tuple(sv.committed for sv in seat_views),
        changes=tuple(sv.public_changes for sv in seat_views),
        revealed=tuple(sv.revealed_card for sv in seat_views),
        offers=tuple(offers),
        skims=view.skims_revealed,
        fuzz_skimmed=view.fuzz_cause == 3,
        fuzz_out=view.fuzz_revealed,
        fuzz_cause=view.fuzz_cause,
        confiscated=tuple(view.confiscated),
        end_reason=view.end_reason,
    )
