"""Influence card plays (NP-C2..C33): checking, resolving and listing them.

The same play resolves in a Commission turn and in a card window (NP-C21, NP-C22, NP-C23);
`window` says which. All parameters travel in the one command (NP-D2).
"""

from __future__ import annotations

from itertools import product
from typing import Any

from famiglia.engine import Rng, RuleViolation
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb

from .board import active, icon_targets, is_active
from .data import CARD, CREW_SURCHARGE, ICONS, InfluenceCard
from .effects import EFFECTS, Ctx, target_key
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
    icons = _board(s)[0]   # NP-C5, NP-C6: icon_targets per icon, per board
    return [i for i, g in enumerate(card.groups)
            if i not in chosen and g.count <= supply - used and icons[g.icon]]


def _check_placements(s: State, seat: int, card: InfluenceCard, placements: Any) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    chosen: set[int] = set()
    icons = _board(s)[0]   # NP-C5, NP-C6: icon_targets per icon, per board
    for p in placements:
        if not 0 <= p.group < len(card.groups) or p.group in chosen:
            raise RuleViolation("NP-C7", "each group is placed once")
        if p.gangster not in icons[card.groups[p.group].icon]:
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
        if not is_active(s, msg.gangster):
            raise RuleViolation("NP-C14", "the marker goes on an active gangster")
        _pay(tx, seat, msg.ante, surcharge)
        tx.emit_values("card_played", seat, card.id, "discard", window)
        tx.emit_values("markers_placed", msg.gangster, seat, 1)
        tx.emit_values("card_resolved", card.id)
        return
    if kind == "play_or_effect":
        if card.keyword != "OR":
            raise RuleViolation("NP-C12", "only an OR card is played for its effect")
        ctx = Ctx(seat, rule="NP-C13")
        EFFECTS[card.effect].check(s, ctx, msg.effect)
        if dry:
            return
        _pay(tx, seat, msg.ante, surcharge)
        tx.emit_values("card_played", seat, card.id, "effect", window)
        EFFECTS[card.effect].apply(tx, ctx, msg.effect)
        tx.emit_values("card_resolved", card.id)
        return
    placements = _check_placements(s, seat, card, msg.placements)
    _pay(tx, seat, msg.ante, surcharge)
    tx.emit_values("card_played", seat, card.id, "influence", window)
    for group, gid in placements:
        tx.emit_values("markers_placed", gid, seat, card.groups[group].count)
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
    tx.emit_values("card_resolved", card.id)


def _pay(tx: Tx, seat: int, ante: int, surcharge: int) -> None:
    if ante:
        tx.emit("ante_paid", seat=seat, amount=ante, ante=max(ante, tx.s.ante))
    if surcharge:
        tx.money(seat, -surcharge, "crew surcharge")


# -- listing -------------------------------------------------------------------------------------------
# Plain tuples (a slotted dataclass hashes through Python code): (icon, count) per group.
_GROUPS: dict[str, tuple[tuple[str, int], ...]] = {c.id: tuple((g.icon, g.count) for g in c.groups)
                                                   for c in CARD.values()}
_SIGNATURE: dict[str, tuple] = {c.id: (_GROUPS[c.id], c.keyword, c.timing, c.effect) for c in CARD.values()}


def _group_sets(supply: int, card: InfluenceCard, targets: dict[str, list[str]]) -> list[tuple[int, ...]]:
    """NP-C9: the maximal non-empty sets of placeable groups (`targets`: icon -> eligible gangsters)."""
    k = len(card.groups)
    groups = card.groups
    if k == 1:   # most cards: the one group, if it has a target and fits the supply
        return [(0,)] if targets[groups[0].icon] and groups[0].count <= supply else []
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


# Built commands are shared, read-only messages (the engine contract allows it): a listing costs a few
# dictionary look-ups instead of building the same protobuf messages for every state. Keys are contents,
# so dropping a full cache never changes a listing. Per board: every icon's targets (`_BOARDS`); per card
# and targets: its rows (`_PLAYS`, with the Antes) and their shapes (`_SHAPES`, shared by cards with the
# same groups); per content: each command (`_COMMANDS`), which survives board changes and new Antes.
_CACHE_MAX = 50_000
_BOARDS: dict[tuple[str, ...], tuple[dict[str, tuple[str, ...]], tuple[str, ...], dict[tuple, Any]]] = {}
_PLAYS: dict[tuple, tuple[tuple[tuple[tuple[int, ...], tuple[str, ...], int], ...], tuple[pb.Command, ...]]] = {}
_SHAPES: dict[tuple, tuple[tuple[tuple[int, ...], tuple[str, ...], int], ...]] = {}
_COMMANDS: dict[tuple, pb.Command] = {}
_CAP: dict[str, int] = {c.id: sum(g.count for g in c.groups) for c in CARD.values()}
_EFFECT_KEYWORDS = frozenset({"blank", "AND"})


def _bounded(cache: dict, most: int = _CACHE_MAX) -> dict:
    if len(cache) >= most:
        cache.clear()
    return cache


def _board(s: State) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...], dict[tuple, Any]]:
    """Of one board: each icon's targets (NP-C5, NP-C6), the two discard-for-one targets, and a memo of
    the listings that depend only on the board and a few numbers (`play_options`)."""
    board = s.board
    hit = _BOARDS.get(board)
    if hit is None:
        act = active(s)
        hit = _bounded(_BOARDS, 2048)[board] = ({icon: tuple(icon_targets(s, icon)) for icon in ICONS},
                                               tuple(act[:: max(1, len(act) // 2)][:2]), {})
    return hit


def _shapes(card: InfluenceCard, targets: tuple[tuple[str, ...], ...], supply: int,
            per_card: int) -> tuple[tuple[tuple[int, ...], tuple[str, ...], int], ...]:
    """(groups, targets, index) of one card's plays: every maximal group set, targets rotated.
    `targets` holds each group's eligible gangsters."""
    key = (_GROUPS[card.id], targets, supply, per_card)
    shapes = _SHAPES.get(key)
    if shapes is not None:
        return shapes
    icons = {g.icon: list(t) for g, t in zip(card.groups, targets, strict=True)}
    out: list[tuple[tuple[int, ...], tuple[str, ...], int]] = []
    for groups in _group_sets(supply, card, icons):
        chosen = [icons[card.groups[i].icon] for i in groups]
        combos: list[tuple[str, ...]]
        total = 1
        for t in chosen:
            total *= len(t)
        if total <= per_card:
            combos = list(product(*chosen))
        else:
            combos = list(dict.fromkeys(tuple(t[(k * (j + 1)) % len(t)] for j, t in enumerate(chosen))
                                        for k in range(per_card)))
            # the rotation repeats a set where the groups' counts share a factor (3 and 3 gangsters:
            # the fourth is the first again); the first sets it did not name fill in, each listed once
            for combo in product(*chosen):
                if len(combos) >= per_card:
                    break
                if combo not in combos:
                    combos.append(combo)
        out.extend((groups, combo, n) for n, combo in enumerate(combos))
    shapes = _bounded(_SHAPES)[key] = tuple(out)
    return shapes


def _play_command(cid: str, groups: tuple[int, ...], combo: tuple[str, ...], ante: int) -> pb.Command:
    key = ("influence", cid, groups, combo, ante)
    command = _COMMANDS.get(key)
    if command is None:
        placements = [pb.GroupPlacement(group=g, gangster=t) for g, t in zip(groups, combo, strict=True)]
        command = _bounded(_COMMANDS)[key] = pb.Command(
            play_for_influence=pb.PlayForInfluence(card=cid, placements=placements, ante=ante))
    return command


def _influence_plays(card: InfluenceCard, targets: tuple[tuple[str, ...], ...], supply: int,
                     antes: tuple[int, ...], per_card: int
                     ) -> tuple[tuple[tuple[tuple[int, ...], tuple[str, ...], int], ...], tuple[pb.Command, ...]]:
    """The plays for influence of one card as (groups, combo, ante) rows, and their commands (rows hold
    no message, so the garbage collector stops tracking them). They depend only on its groups' targets,
    the seat's supply (up to the card's total) and the Antes."""
    cid = card.id
    supply = min(supply, _CAP[cid])
    key = (cid, targets, supply, antes, per_card)
    hit = _PLAYS.get(key)
    if hit is not None:
        return hit
    k = len(antes)
    rows = tuple((groups, combo, antes[n % k]) for groups, combo, n in _shapes(card, targets, supply, per_card))
    hit = _bounded(_PLAYS)[key] = (rows, tuple(_play_command(cid, *row) for row in rows))
    return hit


def _discards(targets: tuple[str, ...], cid: str, ante: int) -> list[pb.Command]:
    out = []
    for g in targets:
        key = ("discard", cid, g, ante)
        command = _COMMANDS.get(key)
        if command is None:
            command = _bounded(_COMMANDS)[key] = pb.Command(
                discard_for_marker=pb.DiscardForMarker(card=cid, gangster=g, ante=ante))
        out.append(command)
    return out


_HANDS: dict[tuple[tuple[str, ...], bool, bool], tuple[tuple[str, InfluenceCard, int], ...]] = {}


def _hand_cards(hand: tuple[str, ...], window: bool, crew_window: bool) -> tuple[tuple[str, InfluenceCard, int], ...]:
    """The cards of a hand worth listing, one per signature (cards alike list alike), with the
    surcharge of a Crew window; in a window only crew and anytime cards (NP-C21..C23, as
    `_check_timing`). Memoised per hand."""
    key = (hand, window, crew_window)
    hit = _HANDS.get(key)
    if hit is None:
        seen: set[tuple] = set()
        out = []
        for cid in hand:
            sig = _SIGNATURE[cid]
            if sig in seen:
                continue
            seen.add(sig)
            card = CARD[cid]
            surcharge = 0
            if window:
                if card.timing == "crew" and crew_window:
                    surcharge = CREW_SURCHARGE
                elif card.timing != "anytime":
                    continue
            out.append((cid, card, surcharge))
        hit = _bounded(_HANDS, 8192)[key] = tuple(out)
    return hit


def play_options(s: State, seat: int, window: bool, per_card: int = 4) -> list[pb.Command]:
    """Representative legal plays: every card and group set, targets rotated, first effect targets."""
    hand = s.hands[seat]
    if not hand:
        return []
    crew_window = window and s.phase == Phase.CREW
    if window and not _hand_cards(hand, True, crew_window):   # most hands in most windows
        return []
    avail = not window and len(s.had_turn) == s.n   # ante_available
    base_ante = s.ante if avail else 0
    # The listing depends on the money only through the thresholds base Ante (+1) (+ Crew surcharge),
    # and on the supply only up to the largest card: both are capped so alike seats share a plan.
    key = (hand, window, crew_window, avail, base_ante, min(s.money[seat], base_ante + _MONEY_SPAN),
           min(s.supply[seat], _CAP_MAX), per_card)
    board = _board(s)
    plan = board[2].get(key)
    if plan is None:
        plan = board[2][key] = _plan(s, seat, window, per_card, key)
    out: list[pb.Command] = []
    for part in plan:
        if part.__class__ is tuple:   # the commands of one card that depend on the board only
            out.extend(part)
        else:   # [card, rows, commands, surcharge, base ante]: effect targets depend on the table
            card, rows, commands, surcharge, ante = part
            if rows is None:   # an OR card's effect plays
                cid = card.id
                for effect_targets in EFFECTS[card.effect].options(s, Ctx(seat), per_card):
                    k = ("effect", cid, ante, target_key(effect_targets))
                    effect_play = _COMMANDS.get(k)
                    if effect_play is None:
                        effect_play = _bounded(_COMMANDS)[k] = pb.Command(
                            play_or_effect=pb.PlayOrEffect(card=cid, ante=ante, effect=effect_targets))
                    out.append(effect_play)
            else:   # a blank or AND card's plays with their effect targets
                for (groups, combo, row_ante), command in zip(rows, commands, strict=True):
                    out.extend(_effect_variants(s, seat, card, groups, combo, row_ante, surcharge, command))
    return out


_MONEY_SPAN = CREW_SURCHARGE + 1
_CAP_MAX = max(_CAP.values())


def _plan(s: State, seat: int, window: bool, per_card: int, key: tuple) -> tuple[Any, ...]:
    """One hand's listing on one board, in order: tuples of ready commands, and lists naming the parts
    that depend on more of the table (effect targets). Memoised per board by `play_options`."""
    hand, _, crew_window, avail, base_ante, money, supply, _ = key
    parts: list[Any] = []
    static: list[pb.Command] = []
    icons, discard_targets, memo = _board(s)
    for cid, card, surcharge in _hand_cards(hand, window, crew_window):
        if base_ante + surcharge > money:
            continue
        antes = (base_ante, base_ante + 1) if avail and base_ante + 1 + surcharge <= money else (base_ante,)
        plays_key: tuple = (cid, min(supply, _CAP[cid]), antes, per_card)   # small keys hash fast
        hit = memo.get(plays_key)
        if hit is None:   # this board's plays of the card
            targets = tuple([icons[g.icon] for g in card.groups])
            hit = memo[plays_key] = _influence_plays(card, targets, supply, antes, per_card)
        rows, commands = hit
        dynamic: list[Any] = []
        if card.keyword in _EFFECT_KEYWORDS:
            dynamic.append([card, rows, commands, surcharge, base_ante])
        else:
            static.extend(commands)
        if card.keyword == "OR":
            dynamic.append([card, None, None, surcharge, base_ante])
        if dynamic:
            if static:
                parts.append(tuple(static))
                static = []
            parts.extend(dynamic)
        if not window and supply >= 1:
            discards = memo.get((cid, base_ante))
            if discards is None:
                discards = memo[(cid, base_ante)] = tuple(_discards(discard_targets, cid, base_ante))
            static.extend(discards)
    if static:
        parts.append(tuple(static))
    return tuple(parts)


_MARKER_BLIND = frozenset({"EXTRA_5", "BLACKMAIL_COIN", "INVITE_1"})


def _effect_variants(s: State, seat: int, card: InfluenceCard, groups: tuple[int, ...], combo: tuple[str, ...],
                     ante: int, surcharge: int, command: pb.Command) -> list[pb.Command]:
    """A blank or AND play with its effect targets: the state after the placement gives the options."""
    received = tuple(dict.fromkeys(combo))
    if card.effect in _MARKER_BLIND:
        # These effects read only money, supply, coins and seats: adjust those instead of simulating.
        placed = sum(card.groups[g].count for g in groups)
        after = replace(s, supply=s.supply[:seat] + (s.supply[seat] - placed,) + s.supply[seat + 1:],
                        money=s.money[:seat] + (s.money[seat] - ante - surcharge,) + s.money[seat + 1:])
    else:
        tx = Tx(s, _SCRATCH_RNG)
        _pay(tx, seat, ante, surcharge)
        for g, gid in zip(groups, combo, strict=True):
            tx.emit_values("markers_placed", gid, seat, card.groups[g].count)
        after = tx.s
    opts = EFFECTS[card.effect].options(after, Ctx(seat, received=received), 2)
    if card.keyword == "AND":
        if not opts:
            return [command]
        return [_variant(card.id, groups, combo, ante, False, t) for t in opts]
    return [command, *(_variant(card.id, groups, combo, ante, True, t) for t in opts[:1])]


def _variant(cid: str, groups: tuple[int, ...], combo: tuple[str, ...], ante: int, use_effect: bool,
             t: pb.Targets) -> pb.Command:
    key = ("variant", cid, groups, combo, ante, use_effect, target_key(t))
    command = _COMMANDS.get(key)
    if command is None:
        placements = [pb.GroupPlacement(group=g, gangster=gid) for g, gid in zip(groups, combo, strict=True)]
        msg = pb.PlayForInfluence(card=cid, placements=placements, ante=ante, effect=t)
        if use_effect:
            msg.use_effect = True
        command = _bounded(_COMMANDS)[key] = pb.Command(play_for_influence=msg)
    return command
