"""Influence card plays (NP-C2..C33): checking, resolving and listing them.

The same play resolves in a Commission turn and in a card window (NP-C21, NP-C22, NP-C23);
`window` says which. All parameters travel in the one command (NP-D2).
"""

from __future__ import annotations

from itertools import product
from typing import Any

from famiglia.engine import Rng, RuleViolation
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb

from .board import active, icon_targets
from .data import CARD, CREW_SURCHARGE, InfluenceCard
from .effects import EFFECTS, Ctx
from .state import Phase, State, replace
from .tx import Tx


def ante_available(s: State) -> bool:
    """NP-C16: once every seat has had a turn in this Commission phase."""
    return len(s.had_turn) == s.n


def _check_ante(s: State, seat: int, p: int, window: bool) -> None:
    """NP-C17, NP-C18, NP-C23."""
    if window or not ante_available(s):
        if p != 0:
            raise RuleViolation("NP-C17" if not window else "NP-C23", "no Ante is paid now")
        return
    if p < s.ante:
        raise RuleViolation("NP-C17", f"the Ante is ${s.ante}")
    if p > s.money[seat]:
        raise RuleViolation("NP-M8", "a voluntary payment needs the full amount")


def _card(s: State, seat: int, card_id: str) -> InfluenceCard:
    if card_id not in s.hands[seat]:
        raise RuleViolation("NP-H1", f"{card_id} is not in the seat's hand")
    return CARD[card_id]


def _check_timing(s: State, card: InfluenceCard, window: bool) -> int:
    """NP-C21, NP-C22, NP-C23: in a window only crew cards (Crew windows, +$5) and anytime cards."""
    if not window:
        return 0
    if card.timing == "anytime":
        return 0
    if card.timing == "crew" and s.phase == Phase.CREW:
        return CREW_SURCHARGE
    raise RuleViolation("NP-C23", f"{card.id} cannot be played in this window")


def placeable(s: State, supply: int, card: InfluenceCard, chosen: set[int]) -> list[int]:
    """NP-C8: groups left out that could still be placed in full."""
    used = sum(card.groups[i].count for i in chosen)
    return [i for i, g in enumerate(card.groups)
            if i not in chosen and g.count <= supply - used and icon_targets(s, g.icon)]


def _check_placements(s: State, seat: int, card: InfluenceCard, placements: Any) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    chosen: set[int] = set()
    for p in placements:
        if not 0 <= p.group < len(card.groups) or p.group in chosen:
            raise RuleViolation("NP-C7", "each group is placed once")
        if p.gangster not in icon_targets(s, card.groups[p.group].icon):
            raise RuleViolation("NP-C5", f"{p.gangster} does not match {card.groups[p.group].icon}")
        chosen.add(p.group)
        out.append((p.group, p.gangster))
    if not out:
        raise RuleViolation("NP-C9", "a play for influence places at least one group")
    if sum(card.groups[i].count for i in chosen) > s.supply[seat]:
        raise RuleViolation("NP-C8", "a group is never placed in part")
    if placeable(s, s.supply[seat], card, chosen):
        raise RuleViolation("NP-C9", "the chosen groups must be maximal")
    return out


# Dry runs never keep their events, so one generator serves them all (seeding one costs more than a check).
_SCRATCH_RNG = Rng(0)


def check_play(s: State, seat: int, kind: str, msg: Any, window: bool) -> None:
    """Raise RuleViolation unless the play is legal now; simulates the placement for the effect."""
    resolve_play(Tx(s, _SCRATCH_RNG), seat, kind, msg, window, dry=True)


def resolve_play(tx: Tx, seat: int, kind: str, msg: Any, window: bool, dry: bool = False) -> None:
    s = tx.s
    card = _card(s, seat, msg.card)
    surcharge = _check_timing(s, card, window)
    _check_ante(s, seat, msg.ante, window)
    if msg.ante + surcharge > s.money[seat]:
        raise RuleViolation("NP-C21" if surcharge else "NP-M8", "not enough money for this play")
    if kind == "discard_for_marker":
        if window:
            raise RuleViolation("NP-C23", "discard for one is not available in a window")
        if s.supply[seat] < 1:
            raise RuleViolation("NP-C14", "discard for one needs a marker in the supply")
        if msg.gangster not in s.board[:9] or not msg.gangster:
            raise RuleViolation("NP-C14", "the marker goes on an active gangster")
        _pay(tx, seat, msg.ante, surcharge)
        tx.emit("card_played", seat=seat, card=card.id, mode="discard", window=window)
        tx.emit("markers_placed", gangster=msg.gangster, owner=seat, count=1)
        tx.emit("card_resolved", card=card.id)
        return
    if kind == "play_or_effect":
        if card.keyword != "OR":
            raise RuleViolation("NP-C12", "only an OR card is played for its effect")
        ctx = Ctx(seat, rule="NP-C13")
        EFFECTS[card.effect].check(s, ctx, msg.effect)
        if dry:
            return
        _pay(tx, seat, msg.ante, surcharge)
        tx.emit("card_played", seat=seat, card=card.id, mode="effect", window=window)
        EFFECTS[card.effect].apply(tx, ctx, msg.effect)
        tx.emit("card_resolved", card=card.id)
        return
    placements = _check_placements(s, seat, card, msg.placements)
    _pay(tx, seat, msg.ante, surcharge)
    tx.emit("card_played", seat=seat, card=card.id, mode="influence", window=window)
    for group, gid in placements:
        tx.emit("markers_placed", gangster=gid, owner=seat, count=card.groups[group].count)
    received = tuple(dict.fromkeys(g for _, g in placements))
    ctx = Ctx(seat, received=received, rule="NP-C13")
    eff = EFFECTS.get(card.effect)
    if card.keyword == "blank" and msg.use_effect:
        assert eff is not None
        eff.check(tx.s, ctx, msg.effect)
        eff.apply(tx, ctx, msg.effect)
    elif card.keyword == "AND":
        assert eff is not None
        if eff.options(tx.s, ctx, 1):  # NP-C11: carried out as far as it can be
            eff.check(tx.s, ctx, msg.effect)
            eff.apply(tx, ctx, msg.effect)
    elif msg.use_effect:
        raise RuleViolation("NP-C10", f"{card.id} has no optional effect")
    tx.emit("card_resolved", card=card.id)


def _pay(tx: Tx, seat: int, ante: int, surcharge: int) -> None:
    if ante:
        tx.emit("ante_paid", seat=seat, amount=ante, ante=max(ante, tx.s.ante))
    if surcharge:
        tx.money(seat, -surcharge, "crew surcharge")


# -- listing -------------------------------------------------------------------------------------------
_SIGNATURE: dict[str, tuple] = {c.id: (c.groups, c.keyword, c.timing, c.effect) for c in CARD.values()}


def _group_sets(supply: int, card: InfluenceCard, targets: dict[str, list[str]]) -> list[tuple[int, ...]]:
    """NP-C9: the maximal non-empty sets of placeable groups (`targets`: icon -> eligible gangsters)."""
    k = len(card.groups)
    groups = card.groups
    out = []
    for mask in range(1, 1 << k):
        chosen = [i for i in range(k) if mask >> i & 1]
        if any(not targets[groups[i].icon] for i in chosen):
            continue
        used = sum(groups[i].count for i in chosen)
        if used > supply:
            continue
        if any(i not in chosen and groups[i].count <= supply - used and targets[groups[i].icon] for i in range(k)):
            continue
        out.append(tuple(chosen))
    return out


def play_options(s: State, seat: int, window: bool, per_card: int = 4) -> list[pb.Command]:
    """Representative legal plays: every card and group set, targets rotated, first effect targets."""
    out: list[pb.Command] = []
    seen: set[tuple] = set()
    avail = ante_available(s) and not window
    base_ante = s.ante if avail else 0
    icons: dict[str, list[str]] = {}
    for cid in s.hands[seat]:
        card = CARD[cid]
        sig = _SIGNATURE[cid]
        if sig in seen:
            continue
        seen.add(sig)
        if window and not (card.timing == "anytime" or (card.timing == "crew" and s.phase == Phase.CREW)):
            continue
        surcharge = _check_timing(s, card, window)
        if base_ante + surcharge > s.money[seat]:
            continue
        antes = [base_ante]
        if avail and base_ante + 1 + surcharge <= s.money[seat]:
            antes.append(base_ante + 1)
        for group in card.groups:
            if group.icon not in icons:
                icons[group.icon] = icon_targets(s, group.icon)
        for groups in _group_sets(s.supply[seat], card, icons):
            targets = [icons[card.groups[i].icon] for i in groups]
            combos: list[tuple[str, ...]]
            total = 1
            for t in targets:
                total *= len(t)
            if total <= per_card:
                combos = list(product(*targets))
            else:
                combos = [tuple(t[(k * (j + 1)) % len(t)] for j, t in enumerate(targets)) for k in range(per_card)]
            for n, combo in enumerate(combos):
                placements = [pb.GroupPlacement(group=g, gangster=t) for g, t in zip(groups, combo, strict=True)]
                msg = pb.PlayForInfluence(card=cid, placements=placements, ante=antes[n % len(antes)])
                for variant in _effect_variants(s, seat, card, msg, window):
                    out.append(pb.Command(play_for_influence=variant))
        if card.keyword == "OR":
            ctx = Ctx(seat)
            for effect_targets in EFFECTS[card.effect].options(s, ctx, per_card):
                out.append(pb.Command(play_or_effect=pb.PlayOrEffect(card=cid, ante=base_ante, effect=effect_targets)))
        if not window and s.supply[seat] >= 1:
            act = active(s)
            for g in act[:: max(1, len(act) // 2)][:2]:
                out.append(pb.Command(discard_for_marker=pb.DiscardForMarker(card=cid, gangster=g, ante=base_ante)))
    return out


_MARKER_BLIND = frozenset({"EXTRA_5", "BLACKMAIL_COIN", "INVITE_1"})


def _effect_variants(s: State, seat: int, card: InfluenceCard, msg: pb.PlayForInfluence,
                     window: bool) -> list[pb.PlayForInfluence]:
    if card.keyword not in ("blank", "AND"):
        return [msg]
    surcharge = _check_timing(s, card, window)
    received = tuple(dict.fromkeys(p.gangster for p in msg.placements))
    if card.effect in _MARKER_BLIND:
        # These effects read only money, supply, coins and seats: adjust those instead of simulating.
        placed = sum(card.groups[p.group].count for p in msg.placements)
        after = replace(s, supply=s.supply[:seat] + (s.supply[seat] - placed,) + s.supply[seat + 1:],
                        money=s.money[:seat] + (s.money[seat] - msg.ante - surcharge,) + s.money[seat + 1:])
    else:
        tx = Tx(s, _SCRATCH_RNG)
        _pay(tx, seat, msg.ante, surcharge)
        for p in msg.placements:
            tx.emit("markers_placed", gangster=p.gangster, owner=seat, count=card.groups[p.group].count)
        after = tx.s
    opts = EFFECTS[card.effect].options(after, Ctx(seat, received=received), 2)
    if card.keyword == "AND":
        if not opts:
            return [msg]
        out = []
        for t in opts:
            m = pb.PlayForInfluence()
            m.CopyFrom(msg)
            m.effect.CopyFrom(t)
            out.append(m)
        return out
    out = [msg]
    for t in opts[:1]:
        m = pb.PlayForInfluence()
        m.CopyFrom(msg)
        m.use_effect = True
        m.effect.CopyFrom(t)
        out.append(m)
    return out
