"""The compound choices of Nothing Personal, drawn for `legal_commands(..., rng=...)`.

Without `rng`, `legal` lists representative members (bots choose among them); with it, the members
of each compound choice are drawn so that every legal one can come up (DESIGN.md: "a complete
generator/sampler that covers them all"). A choice is a `Family`: its weight (how many members,
capped) and a draw of one member. A draw picks a family in proportion to its weight, then a member
(nearly) uniformly, so that where the choices are small each member comes up about as often as any.

The families: a card's plays for influence (groups, targets, their order, the Ante, effect targets:
NP-C5..C11, NP-C17, NP-C21..C23), its OR effect (NP-C12), discards for one (NP-C14), an action
ability's targets (NP-W14, Table F), shakedowns (NP-M1) and offers (NP-M3, NP-M4, NP-M6, NP-V2, NP-V5).
Members are canonical commands: a field the rules do not read is left unset. Where the rules set no
bound (money and cards an offer asks for, a contract's amount), a draw keeps to a sensible range most
of the time and goes past it now and then, any distance (`TAIL`), so that every legal member can come up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import perm, prod
from typing import Any, NamedTuple

from famiglia.engine import Draws, Rng, RuleViolation
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb

from .board import active, icon_targets, marker_refs, on_board
from .crew import action_options
from .data import CARD, CREW_SURCHARGE, GIDX, POSITIONS, ROUNDS, G, InfluenceCard
from .decide.negotiation import ACTION_KINDS, CONDITIONS
from .effects import EFFECTS, Ctx
from .plays import ante_available, placeable
from .state import Phase, State
from .tx import Tx

DRAWS = 12
"""Members drawn per listing at most (fewer when `limit` leaves less room)."""
CAP = 64
"""A family's weight at most: a huge choice does not crowd out the others (each is still drawn)."""
ANY_OFFER = 12
"""The weight of offers of every shape, whose space has no useful size (NP-H7: any card may be asked)."""
INITIATIVES = 1 / 3
"""The share of draws that go to the seat's optional commands (NP-R6), which never advance the game."""
TAIL = 1 / 8
"""The share of draws the rules do not bound (an offer's money and cards asked, a contract's amount)
that go past their sensible range (`_past`)."""
INT32_MAX = 2**31 - 1
"""The protocol's bound on amounts (int32 fields): the only one on money asked and a contract's amount."""

COMPOUND_CODES = frozenset({"NEUTRAL_3", "SWAP_2", "REMOVE_1", "REMOVE_2", "MOVE_OWN_1", "MOVE_OWN_2", "JOINT_2"})
"""Table F codes whose targets are too many to list (an action turn lists the others whole)."""

_ALL = 1 << 30   # an `options` limit that never cuts
_SCRATCH = Rng(0)   # dry placements draw nothing


class Family(NamedTuple):
    weight: int
    draw: Callable[[Draws], pb.Command]


def sample(small: list[Any], families: Sequence[Family], initiatives: Sequence[Family], limit: int | None,
           rng: Draws) -> list[Any]:
    """`small` (listed whole, the pending seat's answer first) and members drawn from `families` (the
    open decision's compound choices) and `initiatives` (the seat's optional commands: NP-R6), at
    most `limit`. Of the draws a listing may make, a third go to initiatives (the others to `families`,
    if any), so that random play over the sampler still plays the game; a listing with nothing else
    (a seat not asked, NP-R6) gives them every draw, or it could come back empty. Where `small` does
    not fit (in half of `limit`, when there are draws to make), a random part of it is kept: each
    member keeps a chance."""
    if not families and not initiatives:
        if limit and len(small) > limit:
            return small[:1] + rng.sample(small[1:], limit - 1)
        return small
    budget = DRAWS
    if limit:
        half = max(1, limit // 2)
        if len(small) > half:
            small = small[:1] + rng.sample(small[1:], half - 1)
        budget = min(DRAWS, limit - len(small))
    out = list(small)
    only_initiatives = not (small or families)
    seen: set[bytes] = set()
    for _ in range(budget):
        group = initiatives if initiatives and (only_initiatives or rng.random() < INITIATIVES) else families
        if not group:
            continue
        command = rng.choices(group, [f.weight for f in group])[0].draw(rng)
        key = command.SerializeToString(deterministic=True)
        if key not in seen:
            seen.add(key)
            out.append(command)
    return out


def listed(commands: list[pb.Command]) -> Family | None:
    """A family of a few given commands (withdrawals, auto-pass changes...), each as likely."""
    return Family(len(commands), lambda rng: rng.choice(commands)) if commands else None


# -- effect and ability targets (Table F) -------------------------------------------------------------------
Space = tuple[int, Callable[[Draws], pb.Targets]]


def space(s: State, ctx: Ctx, code: str) -> Space | None:
    """All legal targets of `code` now, as (how many, a draw), or None when there are none
    (Table F: "a code can be chosen only if it has at least one legal resolution")."""
    build = _SPACES.get(code)
    if build is not None:
        return build(s, ctx)
    options = EFFECTS[code].options(s, ctx, _ALL)   # complete for the other codes
    if not options:
        return None
    return len(options), lambda rng: rng.choice(options)


def _neutral(s: State, ctx: Ctx) -> Space | None:
    """NEUTRAL_3 (NP-W29): one entry per neutral marker, any active gangsters, in any order."""
    k = min(3, s.neutral)
    act = active(s)
    if not k or not act:
        return None
    return len(act) ** k, lambda rng: pb.Targets(gangsters=[rng.choice(act) for _ in range(k)])


def _refs(s: State, gangsters: list[str], owner: int | None = None) -> list[pb.MarkerRef]:
    """NP-C31: the distinguishable markers on these gangsters (of `owner` only, if given)."""
    return [pb.MarkerRef(gangster=g, owner=o, coin=c) for g in gangsters
            for o, c in marker_refs(s.gs[GIDX[g]]) if owner is None or o == owner]


def _rejection(s: State, ctx: Ctx, code: str, size: int,
               propose: Callable[[Draws], pb.Targets]) -> Space | None:
    """A space drawn by proposing from a superset and keeping what `check` accepts; the first listed
    option stands in when the proposals keep missing (rare: supersets are mostly legal)."""
    first = EFFECTS[code].options(s, ctx, 1)
    if not first:
        return None
    check = EFFECTS[code].check

    def draw(rng: Draws) -> pb.Targets:
        for _ in range(32):
            t = propose(rng)
            try:
                check(s, ctx, t)
            except RuleViolation:
                continue
            return t
        return first[0]

    return max(1, size), draw


def _swap(s: State, ctx: Ctx) -> Space | None:
    """SWAP_2 (NP-W27): two markers of different owners, in either order."""
    refs = _refs(s, on_board(s))
    return _rejection(s, ctx, "SWAP_2", len(refs) * (len(refs) - 1),
                      lambda rng: pb.Targets(markers=rng.sample(refs, 2)))


def _remove_2(s: State, ctx: Ctx) -> Space | None:
    """REMOVE_2: one or two markers (the same kind twice if there are two) from one active gangster."""
    per = [refs for g in active(s) if (refs := _refs(s, [g]))]
    weights = [len(r) * (len(r) + 1) for r in per]

    def propose(rng: Draws) -> pb.Targets:
        refs = rng.choices(per, weights)[0]
        if rng.randrange(len(refs) + 1) == 0:
            return pb.Targets(markers=[rng.choice(refs)])
        return pb.Targets(markers=[rng.choice(refs), rng.choice(refs)])

    return _rejection(s, ctx, "REMOVE_2", sum(weights), propose) if per else None


def _move_own(most: int) -> Callable[[State, Ctx], Space | None]:
    """MOVE_OWN_1/2: one of the seat's markers (with up to `most` - 1 more alike) to another active
    gangster. MOVE_OWN_1 leaves the count unset (it moves one whatever it says)."""
    code = f"MOVE_OWN_{most}"

    def build(s: State, ctx: Ctx) -> Space | None:
        refs = _refs(s, on_board(s), ctx.seat)
        act = active(s)

        def propose(rng: Draws) -> pb.Targets:
            return pb.Targets(markers=[rng.choice(refs)], destination=rng.choice(act),
                              count=rng.randint(1, most) if most > 1 else 0)

        return _rejection(s, ctx, code, len(refs) * max(0, len(act) - 1) * most, propose) if refs else None

    return build


_SPACES: dict[str, Callable[[State, Ctx], Space | None]] = {
    "NEUTRAL_3": _neutral,
    "SWAP_2": _swap,
    "REMOVE_2": _remove_2,
    "MOVE_OWN_1": _move_own(1),
    "MOVE_OWN_2": _move_own(2),
}


def ability_families(s: State) -> list[Family]:
    """NP-W14: the open action turn's abilities whose targets are too many to list."""
    a = s.act
    assert a is not None
    ctx = Ctx(a.seat, a.gangster, a.position)
    out = []
    for code, own in ((POSITIONS[a.position].ability, False), (G[a.gangster].ability, True)):
        if code in COMPOUND_CODES and (sp := space(s, ctx, code)) is not None:
            out.append(_ability(own, sp))
    return out


def _ability(own: bool, sp: Space) -> Family:
    size, targets = sp

    def draw(rng: Draws) -> pb.Command:
        return pb.Command(use_ability=pb.UseAbility(gangster_ability=own, targets=targets(rng)))

    return Family(min(size, CAP), draw)


def compound_abilities(s: State) -> bool:
    """Whether the open action turn has an ability of `COMPOUND_CODES` with a legal resolution."""
    a = s.act
    assert a is not None
    ctx = Ctx(a.seat, a.gangster, a.position)
    return any(code in COMPOUND_CODES and EFFECTS[code].options(s, ctx, 1)
               for code in (POSITIONS[a.position].ability, G[a.gangster].ability))


def action_small(s: State) -> list[pb.Command]:
    """The open action turn's choices that are listed whole: all but `ability_families` (the other
    codes have at most one target per gangster, within `action_options`' limit)."""
    a = s.act
    assert a is not None
    codes = (POSITIONS[a.position].ability, G[a.gangster].ability)
    return [c for c in action_options(s) if c.WhichOneof("kind") != "use_ability"
            or codes[c.use_ability.gangster_ability] not in COMPOUND_CODES]


# -- card plays (NP-C2, NP-C5..C23) -----------------------------------------------------------------------------
def play_families(s: State, seat: int, window: bool) -> list[Family]:
    """Every card of the hand (cards alike are still other commands): its plays for influence, its OR
    effect, and (in a Commission turn) the discards for one, each with every Ante it may pay."""
    hand = s.hands[seat]
    money = s.money[seat]
    avail = not window and ante_available(s)        # NP-C16, NP-C17
    lo, hi = (s.ante, money) if avail else (0, 0)
    crew_window = window and s.phase == Phase.CREW
    out = []
    discards = []
    for cid in dict.fromkeys(hand):
        card = CARD[cid]
        surcharge = 0
        if window:   # NP-C21..C23: crew cards in Crew windows (+$5), anytime cards in any window
            if card.timing == "crew" and crew_window:
                surcharge = CREW_SURCHARGE
            elif card.timing != "anytime":
                continue
        if lo > hi or lo + surcharge > money:
            continue
        discards.append(cid)
        influence = _influence(s, seat, card, lo, hi, surcharge)
        if influence is not None:
            out.append(influence)
        if card.keyword == "OR" and (sp := space(s, Ctx(seat, rule="NP-C13"), card.effect)) is not None:
            out.append(_or_effect(cid, lo, hi, sp))
    act = active(s)
    if not window and discards and act and s.supply[seat] >= 1:   # NP-C14
        def discard(rng: Draws) -> pb.Command:
            return pb.Command(discard_for_marker=pb.DiscardForMarker(
                card=rng.choice(discards), gangster=rng.choice(act), ante=rng.randint(lo, hi)))

        out.append(Family(min(len(discards) * len(act) * (hi - lo + 1), CAP), discard))
    return out


def _or_effect(cid: str, lo: int, hi: int, sp: Space) -> Family:
    size, targets = sp

    def draw(rng: Draws) -> pb.Command:
        return pb.Command(play_or_effect=pb.PlayOrEffect(card=cid, ante=rng.randint(lo, hi), effect=targets(rng)))

    return Family(min(size * (hi - lo + 1), CAP), draw)


def _influence(s: State, seat: int, card: InfluenceCard, lo: int, hi: int, surcharge: int) -> Family | None:
    """NP-C7..C9: a maximal set of placeable groups, each on any gangster its icon allows, placed in
    any order; then the effect: a `blank` one used or not (NP-C10, NP-C19), an `AND` one whenever
    it can be carried out (NP-C11), its targets read after the placement."""
    supply = s.supply[seat]
    targets = [icon_targets(s, g.icon) for g in card.groups]
    sets: list[tuple[int, ...]] = []
    for mask in range(1, 1 << len(card.groups)):
        chosen = {i for i in range(len(card.groups)) if mask >> i & 1}
        if any(not targets[i] for i in chosen) or sum(card.groups[i].count for i in chosen) > supply:
            continue
        if not placeable(s, supply, card, chosen):   # NP-C9: maximal
            sets.append(tuple(sorted(chosen)))
    if not sets:
        return None
    sizes = [prod(len(targets[i]) for i in groups) for groups in sets]
    factor = 1
    if card.keyword == "blank":
        factor = 2
    elif card.keyword == "AND":
        factor = max(1, (space(s, Ctx(seat), card.effect) or (1,))[0])
    cid = card.id

    def draw(rng: Draws) -> pb.Command:
        groups = rng.choices(sets, sizes)[0]
        combo = [rng.choice(targets[i]) for i in groups]
        ante = rng.randint(lo, hi)
        placements = [pb.GroupPlacement(group=i, gangster=g) for i, g in zip(groups, combo, strict=True)]
        rng.shuffle(placements)
        msg = pb.PlayForInfluence(card=cid, placements=placements, ante=ante)
        if card.keyword in ("blank", "AND"):
            after = _placed(s, seat, card, groups, combo, ante, surcharge)
            sp = space(after, Ctx(seat, received=tuple(dict.fromkeys(combo))), card.effect)
            if sp is not None and (card.keyword == "AND" or rng.randrange(sp[0] + 1)):
                msg.effect.CopyFrom(sp[1](rng))
                if card.keyword == "blank":
                    msg.use_effect = True
        return pb.Command(play_for_influence=msg)

    return Family(min(sum(sizes) * (hi - lo + 1) * factor, CAP), draw)


def _placed(s: State, seat: int, card: InfluenceCard, groups: tuple[int, ...], combo: list[str], ante: int,
            surcharge: int) -> State:
    """The table after the play is paid and placed, before its effect (as `plays.resolve_play`)."""
    tx = Tx(s, _SCRATCH)
    if ante:
        tx.emit("ante_paid", seat=seat, amount=ante, ante=max(ante, s.ante))
    if surcharge:
        tx.money(seat, -surcharge, "crew surcharge")
    for i, gid in zip(groups, combo, strict=True):
        tx.emit_values("markers_placed", gid, seat, card.groups[i].count)
    return tx.s


# -- negotiation (NP-M1, NP-M3, NP-M6, NP-V2, NP-V5) -----------------------------------------------------------------
def negotiation_families(s: State, seat: int) -> list[Family]:
    """Shakedowns of any cards in any order; offers: gifts of money and hand-overs alone (each a
    family of its own, so that a small one comes up often), and offers of every shape.

    Where the rules set no bound, a draw mostly keeps to what could be accepted now (NP-M4) and
    with `TAIL` odds goes past it, so that every legal offer can come up: money asked is mostly at
    most what the other seat has (any amount otherwise, also of a seat with $0: it may gain money
    before it answers); cards asked are mostly ones the seat does not hold, at most as many as the
    other seat holds (otherwise any cards of the game, repeats included, up to one more than it
    has: NP-H7); a contract's amount is mostly at most what its payer would have once the same
    offer is traded (at least $1), any positive amount otherwise. A contract's optional target card
    is one of Table G."""
    out = []
    hand = s.hands[seat]
    if hand:
        def shakedown(rng: Draws) -> pb.Command:   # as many cards as any other number
            return pb.Command(shakedown=pb.Shakedown(cards=rng.sample(hand, rng.randint(1, len(hand)))))

        out.append(Family(min(sum(perm(len(hand), k) for k in range(1, len(hand) + 1)), CAP), shakedown))
    if s.offers_made[seat] >= s.cfg.offers_per_phase:   # NP-M9
        return out
    others = [i for i in range(s.n) if i != seat]
    money = s.money[seat]
    if money >= 1:
        def gift(rng: Draws) -> pb.Command:
            return pb.Command(offer_deal=pb.OfferDeal(to=rng.choice(others), give_money=rng.randint(1, money)))

        out.append(Family(min(len(others) * money, CAP), gift))
    handovers = [(to, g) for to in others for g in _handovers(s, seat, to)]
    if handovers:
        def handover(rng: Draws) -> pb.Command:
            to, g = rng.choice(handovers)
            return pb.Command(offer_deal=pb.OfferDeal(to=to, handover_gangster=g))

        out.append(Family(min(len(handovers), CAP), handover))
    out.append(Family(ANY_OFFER, lambda rng: _any_offer(s, seat, others, rng)))
    return out


def _handovers(s: State, seat: int, to: int) -> list[str]:
    """NP-M6: gangsters where both seats have markers, one of them on the blackmail coin; not the one
    whose coin owner is answering a blackmail proposal now (NP-R6)."""
    a = s.act
    busy = a.gangster if a is not None and a.stage == 1 else ""
    out = []
    for g in on_board(s):
        st = s.gs[GIDX[g]]
        if st.coin in (seat, to) and st.markers[seat] >= 1 and st.markers[to] >= 1 and g != busy:
            out.append(g)
    return out


def _any_offer(s: State, seat: int, others: list[int], rng: Draws) -> pb.Command:
    """An offer of any shape: one part half of the time, otherwise each part with even odds."""
    to = rng.choice(others)
    parts = ["want_cards", "want_money"]   # always possible (NP-H7, NP-M4: checked on acceptance)
    if s.money[seat] >= 1:
        parts.append("give_money")
    if s.hands[seat]:
        parts.append("give_cards")
    handovers = _handovers(s, seat, to)
    if handovers:
        parts.append("handover")
    if s.cfg.keep_your_word:   # NP-V1
        parts.append("contract")
    if rng.random() < 0.5:
        chosen = [rng.choice(parts)]
    else:
        chosen = [p for p in parts if rng.random() < 0.5] or [rng.choice(parts)]
    m = pb.OfferDeal(to=to)
    for part in chosen:   # in the order of `parts`: the contract last, after the money it may be paid from
        if part == "give_money":
            m.give_money = rng.randint(1, s.money[seat])
        elif part == "want_money":
            m.want_money = _amount(rng, 1, s.money[to])
        elif part == "give_cards":
            hand = s.hands[seat]
            m.give_cards.extend(rng.sample(hand, rng.randint(1, len(hand))))
        elif part == "want_cards":
            m.want_cards.extend(_wanted(s, seat, to, rng))
        elif part == "handover":
            m.handover_gangster = rng.choice(handovers)
        else:
            m.contract.CopyFrom(_contract(s, seat, m, rng))
    return pb.Command(offer_deal=m)


def _past(rng: Draws, most: int) -> int:
    """1..`most`, small ones likelier, none impossible: uniform up to 2**k, k = 0, 1, 2... with odds
    1/2, 1/4, 1/8... (three in four draws are 1 or 2; the mean is about log2(most) / 4)."""
    k = 0
    while k < 62 and rng.random() < 0.5:
        k += 1
    return rng.randint(1, min(most, 1 << k))


def _amount(rng: Draws, lo: int, hi: int) -> int:
    """lo..hi, each as likely, save with `TAIL` odds (always, when the range is empty) an amount past
    it (`_past`): every amount from `lo` up to the protocol's bound can come up."""
    hi = min(hi, INT32_MAX)
    if lo <= hi and (hi == INT32_MAX or rng.random() >= TAIL):
        return rng.randint(lo, hi)
    start = max(lo, hi + 1)
    return start - 1 + _past(rng, INT32_MAX - start + 1)


def _wanted(s: State, seat: int, to: int, rng: Draws) -> list[str]:
    """NP-M3, NP-H7: cards asked of `to`, each once (every card is one of a kind). Mostly ones the
    seat does not hold, at most as many as `to` holds (more could not be accepted now, NP-M4); with
    `TAIL` odds any cards of the game, up to all of them (`_past`)."""
    pool = [c for c in CARD if c not in s.hands[seat]]
    if pool and rng.random() >= TAIL:
        return rng.sample(pool, rng.randint(1, max(1, min(len(pool), len(s.hands[to])))))
    return rng.sample(list(CARD), _past(rng, len(CARD)))


def _contract(s: State, seat: int, m: pb.OfferDeal, rng: Draws) -> pb.Contract:
    """NP-V2, NP-V3: a new contract of the two seats, or (NP-V5) the cancellation of one of theirs.
    Its amount is mostly at most what the payer would have once the rest of the offer `m` is traded
    (NP-M4 checks that on acceptance, as `decide.negotiation.acceptable`), any amount otherwise."""
    to = m.to
    theirs = [c.id for c in s.contracts if {c.payer, c.payee} == {seat, to}]
    if theirs and rng.random() < 0.25:
        return pb.Contract(id=rng.choice(theirs), condition="CANCEL")
    ids = list(GIDX)   # every gangster card, expansions' included
    payer, payee = (seat, to) if rng.random() < 0.5 else (to, seat)
    paid, got = (m.give_money, m.want_money) if payer == seat else (m.want_money, m.give_money)
    c = pb.Contract(payer=payer, payee=payee, amount=_amount(rng, 1, max(1, s.money[payer] - paid + got)),
                    condition=rng.choice(CONDITIONS), gangster=rng.choice(ids))
    if c.condition != "GANGSTER_GONE":
        c.seat = rng.randrange(s.n)
    if c.condition == "ACTION_BY":
        c.action = rng.choice(ACTION_KINDS)
        if rng.random() < 0.5:
            c.target = rng.choice(ids)
    if rng.random() < 0.5:
        c.deadline = rng.randint(s.round, ROUNDS)
    return c
