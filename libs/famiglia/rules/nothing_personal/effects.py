"""Effect functions keyed by the codes of Table F (card effects and action abilities).

Each code has `check` (raise RuleViolation unless the targets are a legal resolution), `options`
(legal target sets, at most `limit`) and `apply` (emit the events). "A code can be chosen only if
it has at least one legal resolution" (Table F, NP-C13, NP-W20) is `bool(options(..., 1))`.
Dice abilities, whacks and moves start rolls and are resolved by the Crew (decide/crew.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations, combinations_with_replacement
from typing import NamedTuple

from famiglia.engine import RuleViolation
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb

from .board import active, has_ref, is_active, is_on_board, marker_refs, on_board, passive, snitch_threshold
from .data import EXTRA_PRICE, GIDX, STEAL
from .state import A_SLOTS, GState, State
from .tx import Tx


class Ctx(NamedTuple):
    """Who resolves the effect and what it may refer to. A named tuple, not a frozen dataclass: one is
    made for nearly every play and action listed or resolved, and a tuple is made in one call."""

    seat: int
    gangster: str = ""              # the acting gangster (abilities)
    position: int = 0               # its position (abilities)
    received: tuple[str, ...] = ()  # gangsters that received this play's markers (EXTRA_5, BLACKMAIL_COIN)
    rule: str = "NP-W20"            # the rule cited when a resolution is illegal


@dataclass(frozen=True, slots=True)
class Effect:
    check: Callable[[State, Ctx, pb.Targets], None]
    options: Callable[[State, Ctx, int], list[pb.Targets]]
    apply: Callable[[Tx, Ctx, pb.Targets], None]
    against: tuple[str, ...] = ()
    """the Targets fields naming the gangsters the ability is taken against (NP-V3 contracts):
    only the fields it uses, so a gangster written in another one counts for nothing"""


def _no(ctx: Ctx, msg: str, rule: str | None = None) -> RuleViolation:
    return RuleViolation(rule or ctx.rule, msg)


# Option targets are shared, read-only messages built once per content (listings copy them into
# commands). TARGET_KEYS gives an interned message's content key, so callers key their own caches
# without serializing; both tables are dropped together, and `target_key` falls back to the bytes.
_TARGETS: dict[tuple, pb.Targets] = {}
TARGET_KEYS: dict[int, tuple[pb.Targets, tuple]] = {}   # id -> (the message itself, so the id stays its, key)


def _build(key: tuple) -> pb.Targets:
    kind = key[0]
    if kind == "none":
        return pb.Targets()
    if kind == "seat":
        return pb.Targets(seat=key[1])
    if kind == "gangster":
        return pb.Targets(gangster=key[1])
    if kind == "gangsters":
        return pb.Targets(gangsters=key[1])
    if kind == "markers":
        return pb.Targets(markers=[pb.MarkerRef(gangster=g, owner=o, coin=c) for g, o, c in key[1]])
    if kind == "move":
        (g, o, c), dest, count = key[1], key[2], key[3]
        return pb.Targets(markers=[pb.MarkerRef(gangster=g, owner=o, coin=c)], destination=dest, count=count)
    if kind == "assoc":
        return pb.Targets(slot=key[1], position=key[2])
    if kind == "joint":
        return pb.Targets(gangster=key[1], seat=key[2])
    raise AssertionError(kind)


def targets(*key: object) -> pb.Targets:
    """The shared Targets message of this content key (see _build)."""
    t = _TARGETS.get(key)
    if t is None:
        if len(_TARGETS) >= 20_000:
            _TARGETS.clear()
            TARGET_KEYS.clear()
            _GANGSTER.clear()
            _OTHERS.clear()
        t = _TARGETS[key] = _build(key)
        TARGET_KEYS[id(t)] = (t, key)
    return t


_GANGSTER: dict[str, pb.Targets] = {}   # targets("gangster", g) by g alone: the most frequent targets


def gangster_target(g: str) -> pb.Targets:
    """`targets("gangster", g)`, looked up by the name (its hash is cached) instead of a new tuple."""
    t = _GANGSTER.get(g)
    if t is None:
        t = targets("gangster", g)
        _GANGSTER[g] = t
    return t


def target_key(t: pb.Targets) -> object:
    """A content key of `t`: its interned key, or its bytes."""
    hit = TARGET_KEYS.get(id(t))
    if hit is not None and hit[0] is t:
        return hit[1]
    return t.SerializeToString(deterministic=True)


def _need_active(s: State, ctx: Ctx, gid: str) -> None:
    if not is_active(s, gid):
        raise _no(ctx, f"{gid or '-'} is not an active gangster", "NP-X9")


def _need_other(s: State, ctx: Ctx, t: pb.Targets) -> int:
    if not t.HasField("seat") or not 0 <= t.seat < s.n or t.seat == ctx.seat:
        raise _no(ctx, "choose another seat")
    return t.seat


def _others(s: State, ctx: Ctx, limit: int) -> list[pb.Targets]:
    key = (s.n, ctx.seat)
    others = _OTHERS.get(key)
    if others is None:   # the other seats' targets depend only on these two numbers
        others = _OTHERS[key] = tuple([targets("seat", i) for i in range(s.n) if i != ctx.seat])
    return list(others[:limit])


_OTHERS: dict[tuple[int, int], tuple[pb.Targets, ...]] = {}


def _none_check(s: State, ctx: Ctx, t: pb.Targets) -> None:
    return None


def _none_options(s: State, ctx: Ctx, limit: int) -> list[pb.Targets]:
    return [targets("none")]


def _ref(t: pb.MarkerRef) -> tuple[str, int, bool]:
    return t.gangster, t.owner, t.coin


# -- TAKE_RING (NP-W31, NP-W32) ----------------------------------------------------------------------
def _ring_check(s: State, ctx: Ctx, t: pb.Targets) -> None:
    if s.ring == ctx.seat:
        raise _no(ctx, "the seat already holds the ring", "NP-W32")


def _ring_options(s: State, ctx: Ctx, limit: int) -> list[pb.Targets]:
    return [] if s.ring == ctx.seat else [targets("none")]


def _ring_apply(tx: Tx, ctx: Ctx, t: pb.Targets) -> None:
    tx.emit("ring_moved", seat=ctx.seat, reason="TAKE_RING")


# -- DRAW_1, DRAW_2 (NP-W30, NP-X4) -----------------------------------------------------------------
def _draw_check(s: State, ctx: Ctx, t: pb.Targets) -> None:
    if not (s.deck or s.discard):
        raise _no(ctx, "nothing left to draw", "NP-X4")


def _draw_options(s: State, ctx: Ctx, limit: int) -> list[pb.Targets]:
    return [targets("none")] if (s.deck or s.discard) else []


def _draw(k: int) -> Callable[[Tx, Ctx, pb.Targets], None]:
    def apply(tx: Tx, ctx: Ctx, t: pb.Targets) -> None:
        tx.draw(ctx.seat, k, "effect")

    return apply


# -- NEUTRAL_3 (NP-W29, NP-X1) -----------------------------------------------------------------------
def _neutral_check(s: State, ctx: Ctx, t: pb.Targets) -> None:
    k = min(3, s.neutral)
    if k == 0:
        raise _no(ctx, "the neutral supply is empty", "NP-X1")
    if len(t.gangsters) != k:
        raise _no(ctx, f"place exactly {k} neutral markers", "NP-W29")
    for g in t.gangsters:
        _need_active(s, ctx, g)


def _neutral_options(s: State, ctx: Ctx, limit: int) -> list[pb.Targets]:
    k = min(3, s.neutral)
    if k == 0:
        return []
    out = []
    for combo in combinations_with_replacement(active(s), k):
        out.append(targets("gangsters", combo))
        if len(out) >= limit:
            break
    return out


def _neutral_apply(tx: Tx, ctx: Ctx, t: pb.Targets) -> None:
    for g in sorted(set(t.gangsters), key=list(t.gangsters).index):
        tx.emit_values("markers_placed", g, -1, list(t.gangsters).count(g))


# -- PLACE_OWN_1 / PLACE_OWN_2 (NP-W28, NP-X2) -------------------------------------------------------
def _place_check(s: State, ctx: Ctx, t: pb.Targets) -> None:
    if s.supply[ctx.seat] < 1:
        raise _no(ctx, "no family marker left in the supply", "NP-X2")
    _need_active(s, ctx, t.gangster)


def _place_options(s: State, ctx: Ctx, limit: int) -> list[pb.Targets]:
    if s.supply[ctx.seat] < 1:
        return []
    return [gangster_target(g) for g in active(s)][:limit]


def _place(k: int) -> Callable[[Tx, Ctx, pb.Targets], None]:
    def apply(tx: Tx, ctx: Ctx, t: pb.Targets) -> None:
        tx.emit_values("markers_placed", t.gangster, ctx.seat, min(k, tx.s.supply[ctx.seat]))

    return apply


# -- SWAP_2 (NP-W27, Table F) ---------------------------------------------------------------------------
def _swap_ok(a: pb.MarkerRef, b: pb.MarkerRef) -> bool:
    if a.owner == b.owner:
        return False
    if a.gangster == b.gangster:
        return a.coin != b.coin
    return True


def _swap_check(s: State, ctx: Ctx, t: pb.Targets) -> None:
    if len(t.markers) != 2:
        raise _no(ctx, "a swap names two markers", "NP-W27")
    a, b = t.markers
    for m in (a, b):
        if not is_on_board(s, m.gangster) or not has_ref(s.gs[GIDX[m.gangster]], m.owner, m.coin):
            raise _no(ctx, f"no such marker {m.owner}@{m.gangster}", "NP-C31")
    if not _swap_ok(a, b):
        raise _no(ctx, "swap two markers of different owners, on different gangsters or one the coin marker",
                  "NP-W27")


def _swap_options(s: State, ctx: Ctx, limit: int) -> list[pb.Targets]:
    refs = [(g, owner, coin) for g in on_board(s) for owner, coin in marker_refs(s.gs[GIDX[g]])]
    out = []
    for a, b in combinations(refs, 2):
        if a[1] != b[1] and (a[0] != b[0] or a[2] != b[2]):   # as _swap_ok
            out.append(targets("markers", (a, b)))
            if len(out) >= limit:
                break
    return out


def _swap_apply(tx: Tx, ctx: Ctx, t: pb.Targets) -> None:
    tx.emit("markers_swapped", first=t.markers[0], second=t.markers[1])


# -- STEAL_3, SQUEEZE_4, TAX_EACH_2, SKIM_5, TAKE_6 (NP-W26, NP-X6) ---------------------------------
def _other_check(s: State, ctx: Ctx, t: pb.Targets) -> None:
    _need_other(s, ctx, t)


def _take_from(k: int) -> Callable[[Tx, Ctx, pb.Targets], None]:
    def apply(tx: Tx, ctx: Ctx, t: pb.Targets) -> None:
        tx.take(t.seat, ctx.seat, k, "steal")

    return apply


def _tax_apply(tx: Tx, ctx: Ctx, t: pb.Targets) -> None:
    for i in range(tx.s.n):
        if i != ctx.seat:
            tx.take(i, ctx.seat, 2, "tax")


def _bank(k: int) -> Callable[[Tx, Ctx, pb.Targets], None]:
    def apply(tx: Tx, ctx: Ctx, t: pb.Targets) -> None:
        tx.money(ctx.seat, k, "bank")

    return apply


# -- REMOVE_1, REMOVE_2 (NP-W25, NP-C26, NP-C31) ---------------------------------------------------------
def _remove_check(most: int) -> Callable[[State, Ctx, pb.Targets], None]:
    def check(s: State, ctx: Ctx, t: pb.Targets) -> None:
        if not 1 <= len(t.markers) <= most:
            raise _no(ctx, f"remove 1 to {most} markers", "NP-W25")
        gid = t.markers[0].gangster
        _need_active(s, ctx, gid)
        st = s.gs[GIDX[gid]]
        markers, neutral, coin = list(st.markers), st.neutral, st.coin
        for m in t.markers:
            if m.gangster != gid:
                raise _no(ctx, "the markers come from one gangster", "NP-W25")
            cur = GState(tuple(markers), neutral, coin)
            if not has_ref(cur, m.owner, m.coin):
                raise _no(ctx, f"no such marker {m.owner}@{gid}", "NP-C31")
            if m.owner == -1:
                neutral -= 1
            else:
                markers[m.owner] -= 1
                if m.coin:
                    coin = -1

    return check


def _remove_options(most: int) -> Callable[[State, Ctx, int], list[pb.Targets]]:
    def options(s: State, ctx: Ctx, limit: int) -> list[pb.Targets]:
        out = []
        for g in active(s):
            refs = marker_refs(s.gs[GIDX[g]])
            for owner, coin in refs:
                out.append(targets("markers", ((g, owner, coin),)))
                if len(out) >= limit:
                    return out
            if most == 2 and len(refs) >= 2:
                (o1, c1), (o2, c2) = refs[0], refs[1]
                out.append(targets("markers", ((g, o1, c1), (g, o2, c2))))
                if len(out) >= limit:
                    return out
        return out

    return options


def _remove_apply(tx: Tx, ctx: Ctx, t: pb.Targets) -> None:
    for m in t.markers:
        tx.emit("markers_removed", gangster=m.gangster, owner=m.owner, count=1, coin=m.coin)


# -- OMERTA (NP-W24, NP-X3) ---------------------------------------------------------------------------------
def _omerta_ok(s: State, g: str) -> bool:
    st = s.gs[GIDX[g]]
    return s.board[0] != g and not st.omerta and not passive(s, g, "OMERTA_IMMUNE")


def _omerta_check(s: State, ctx: Ctx, t: pb.Targets) -> None:
    if s.om_free < 1:
        raise _no(ctx, "no free Omerta coin", "NP-X3")
    _need_active(s, ctx, t.gangster)
    if not _omerta_ok(s, t.gangster):
        raise _no(ctx, "not at position 1, no Omerta coin yet, no OMERTA_IMMUNE", "NP-W24")


def _omerta_options(s: State, ctx: Ctx, limit: int) -> list[pb.Targets]:
    if s.om_free < 1:
        return []
    return [gangster_target(g) for g in active(s) if _omerta_ok(s, g)][:limit]


def _omerta_apply(tx: Tx, ctx: Ctx, t: pb.Targets) -> None:
    tx.emit("omerta_coin_placed", gangster=t.gangster)


# -- BLACKMAIL_OWN, BLACKMAIL_COIN (NP-C24, NP-C25, NP-X3) --------------------------------------------------
def _bm_own_ok(s: State, ctx: Ctx, g: str) -> bool:
    st = s.gs[GIDX[g]]
    return st.coin == -1 and st.markers[ctx.seat] >= 1


def _bm_own_check(s: State, ctx: Ctx, t: pb.Targets) -> None:
    if s.bm_free < 1:
        raise _no(ctx, "no free blackmail coin", "NP-X3")
    _need_active(s, ctx, t.gangster)
    if not _bm_own_ok(s, ctx, t.gangster):
        raise _no(ctx, "needs an own marker on a gangster without a coin", "NP-C25")


def _bm_own_options(s: State, ctx: Ctx, limit: int) -> list[pb.Targets]:
    if s.bm_free < 1:
        return []
    return [gangster_target(g) for g in active(s) if _bm_own_ok(s, ctx, g)][:limit]


def _bm_coin_check(s: State, ctx: Ctx, t: pb.Targets) -> None:
    if s.bm_free < 1:
        raise _no(ctx, "no free blackmail coin", "NP-C25")
    if t.gangster not in ctx.received or s.gs[GIDX[t.gangster]].coin != -1:
        raise _no(ctx, "the coin goes under a marker this play placed, on a gangster without a coin", "NP-C24")


def _bm_coin_options(s: State, ctx: Ctx, limit: int) -> list[pb.Targets]:
    if s.bm_free < 1:
        return []
    return [gangster_target(g) for g in ctx.received if s.gs[GIDX[g]].coin == -1][:limit]


def _bm_apply(tx: Tx, ctx: Ctx, t: pb.Targets) -> None:
    tx.emit("blackmail_coin_placed", gangster=t.gangster, owner=ctx.seat)


# -- MOVE_OWN_1, MOVE_OWN_2 (Table F, NP-C26) ----------------------------------------------------------
def _move_own_check(most: int) -> Callable[[State, Ctx, pb.Targets], None]:
    def check(s: State, ctx: Ctx, t: pb.Targets) -> None:
        if len(t.markers) != 1 or t.markers[0].owner != ctx.seat:
            raise _no(ctx, "name one of your own markers to move", "NP-C31")
        m = t.markers[0]
        count = t.count if most == 2 else max(1, t.count)  # the count applied (_move_own_apply)
        if not 1 <= count <= most:
            raise _no(ctx, f"move 1 to {most} markers", "NP-C31")
        if not is_on_board(s, m.gangster):
            raise _no(ctx, "the source must be on the board", "NP-X9")
        st = s.gs[GIDX[m.gangster]]
        if not has_ref(st, ctx.seat, m.coin):
            raise _no(ctx, "no such marker", "NP-C31")
        plain = st.markers[ctx.seat] - (1 if st.coin == ctx.seat else 0)
        if count == 2 and (st.markers[ctx.seat] < 2 if m.coin else plain < 2):
            raise _no(ctx, "not enough markers there", "NP-C31")
        _need_active(s, ctx, t.destination)
        if t.destination == m.gangster:
            raise _no(ctx, "move to a different gangster", "NP-C31")

    return check


def _move_own_options(most: int) -> Callable[[State, Ctx, int], list[pb.Targets]]:
    def options(s: State, ctx: Ctx, limit: int) -> list[pb.Targets]:
        out = []
        dests = active(s)
        for g in on_board(s):
            st = s.gs[GIDX[g]]
            if st.markers[ctx.seat] == 0:
                continue
            for owner, coin in marker_refs(st):
                if owner != ctx.seat:
                    continue
                for d in dests:
                    if d != g:
                        out.append(targets("move", (g, owner, coin), d, 1 if most == 2 else 0))
                        if len(out) >= limit:
                            return out
        return out

    return options


def _move_own_apply(tx: Tx, ctx: Ctx, t: pb.Targets) -> None:
    m = t.markers[0]
    tx.emit("marker_moved", source=m.gangster, destination=t.destination, owner=ctx.seat,
            count=max(1, t.count), coin=m.coin)


# -- EXTRA_5 (NP-C19, NP-C20) ------------------------------------------------------------------------------
def _extra_check(s: State, ctx: Ctx, t: pb.Targets) -> None:
    if s.money[ctx.seat] < EXTRA_PRICE or s.supply[ctx.seat] < 1:
        raise _no(ctx, "extra influence needs $5 and a marker in the supply", "NP-C20")
    if t.gangster not in ctx.received:
        raise _no(ctx, "the extra marker goes on a gangster that received this play's markers", "NP-C19")


def _extra_options(s: State, ctx: Ctx, limit: int) -> list[pb.Targets]:
    if s.money[ctx.seat] < EXTRA_PRICE or s.supply[ctx.seat] < 1:
        return []
    return [gangster_target(g) for g in ctx.received][:limit]


def _extra_apply(tx: Tx, ctx: Ctx, t: pb.Targets) -> None:
    tx.money(ctx.seat, -EXTRA_PRICE, "extra influence")
    tx.emit_values("markers_placed", t.gangster, ctx.seat, 1)


# -- SNITCH (NP-C29, NP-C30) --------------------------------------------------------------------------------
def _snitch_ok(s: State, g: str) -> bool:
    return s.gs[GIDX[g]].total >= snitch_threshold(s, g)


def _snitch_check(s: State, ctx: Ctx, t: pb.Targets) -> None:
    if not is_on_board(s, t.gangster) or not _snitch_ok(s, t.gangster):
        raise _no(ctx, "Snitch needs a gangster on the board with 10 or more markers", "NP-C29")


def _snitch_options(s: State, ctx: Ctx, limit: int) -> list[pb.Targets]:
    return [gangster_target(g) for g in on_board(s) if _snitch_ok(s, g)][:limit]


def _snitch_apply(tx: Tx, ctx: Ctx, t: pb.Targets) -> None:
    tx.gone(t.gangster, "prison", "snitch")


# -- ASSOCIATE_SWAP ----------------------------------------------------------------------------------------
def _assoc_check(s: State, ctx: Ctx, t: pb.Targets) -> None:
    if not (1 <= t.slot <= 3 and 1 <= t.position <= 3):
        raise _no(ctx, "choose a slot A1-A3 and a position 1-3", "NP-C13")
    if not s.board[A_SLOTS[t.slot - 1]] or not s.board[t.position - 1]:
        raise _no(ctx, "both places must be occupied", "NP-X9")


def _assoc_options(s: State, ctx: Ctx, limit: int) -> list[pb.Targets]:
    out = [targets("assoc", a, p) for a in (1, 2, 3) for p in (1, 2, 3)
           if s.board[A_SLOTS[a - 1]] and s.board[p - 1]]
    return out[:limit]


def _assoc_apply(tx: Tx, ctx: Ctx, t: pb.Targets) -> None:
    tx.emit("gangsters_exchanged", first_spot=A_SLOTS[t.slot - 1], second_spot=t.position - 1, sideways=False)


# -- JOINT_2, INVITE_1 (F7, NP-D12) ---------------------------------------------------------------------------
def _joint_check(s: State, ctx: Ctx, t: pb.Targets) -> None:
    other = _need_other(s, ctx, t)
    _need_active(s, ctx, t.gangster)
    if s.supply[ctx.seat] == 0 and s.supply[other] == 0:
        raise _no(ctx, "nobody would place a marker", "NP-X2")


def _joint_options(s: State, ctx: Ctx, limit: int) -> list[pb.Targets]:
    out = []
    for g in active(s):
        for i in range(s.n):
            if i != ctx.seat and (s.supply[ctx.seat] or s.supply[i]):
                out.append(targets("joint", g, i))
                if len(out) >= limit:
                    return out
    return out


def _joint_apply(tx: Tx, ctx: Ctx, t: pb.Targets) -> None:
    for seat in (ctx.seat, t.seat):
        k = min(2, tx.s.supply[seat])
        if k:
            tx.emit_values("markers_placed", t.gangster, seat, k)


def _invite_apply(tx: Tx, ctx: Ctx, t: pb.Targets) -> None:
    if tx.s.supply[t.seat] > 0 and active(tx.s):
        tx.emit("invite_asked", seat=t.seat, by=ctx.seat)


def _dice_double_check(s: State, ctx: Ctx, t: pb.Targets) -> None:
    if s.money[ctx.seat] < 5:
        raise _no(ctx, "DOUBLE_OR_NOTHING costs $5", "NP-W20")


def _dice_double_options(s: State, ctx: Ctx, limit: int) -> list[pb.Targets]:
    return [targets("none")] if s.money[ctx.seat] >= 5 else []


def _unused_apply(tx: Tx, ctx: Ctx, t: pb.Targets) -> None:  # dice codes resolve through rolls
    raise AssertionError("dice abilities resolve in the Crew")


EFFECTS: dict[str, Effect] = {
    "TAKE_RING": Effect(_ring_check, _ring_options, _ring_apply),
    "DRAW_1": Effect(_draw_check, _draw_options, _draw(1)),
    "DRAW_2": Effect(_draw_check, _draw_options, _draw(2)),
    "NEUTRAL_3": Effect(_neutral_check, _neutral_options, _neutral_apply, ("gangsters",)),
    "PLACE_OWN_1": Effect(_place_check, _place_options, _place(1), ("gangster",)),
    "PLACE_OWN_2": Effect(_place_check, _place_options, _place(2), ("gangster",)),
    "SWAP_2": Effect(_swap_check, _swap_options, _swap_apply, ("markers",)),
    "STEAL_3": Effect(_other_check, _others, _take_from(STEAL)),
    "SQUEEZE_4": Effect(_other_check, _others, _take_from(4)),
    "REMOVE_1": Effect(_remove_check(1), _remove_options(1), _remove_apply, ("markers",)),
    "REMOVE_2": Effect(_remove_check(2), _remove_options(2), _remove_apply, ("markers",)),
    "OMERTA": Effect(_omerta_check, _omerta_options, _omerta_apply, ("gangster",)),
    "SKIM_5": Effect(_none_check, _none_options, _bank(5)),
    "TAX_EACH_2": Effect(_none_check, _none_options, _tax_apply),
    "TAKE_6": Effect(_none_check, _none_options, _bank(6)),
    "BLACKMAIL_OWN": Effect(_bm_own_check, _bm_own_options, _bm_apply, ("gangster",)),
    "BLACKMAIL_COIN": Effect(_bm_coin_check, _bm_coin_options, _bm_apply, ("gangster",)),
    "MOVE_OWN_1": Effect(_move_own_check(1), _move_own_options(1), _move_own_apply, ("markers", "destination")),
    "MOVE_OWN_2": Effect(_move_own_check(2), _move_own_options(2), _move_own_apply, ("markers", "destination")),
    "EXTRA_5": Effect(_extra_check, _extra_options, _extra_apply, ("gangster",)),
    "SNITCH": Effect(_snitch_check, _snitch_options, _snitch_apply, ("gangster",)),
    "ASSOCIATE_SWAP": Effect(_assoc_check, _assoc_options, _assoc_apply),
    "JOINT_2": Effect(_joint_check, _joint_options, _joint_apply, ("gangster",)),
    "INVITE_1": Effect(_other_check, _others, _invite_apply),
    "DICE_MONEY": Effect(_none_check, _none_options, _unused_apply),
    "DICE_RESPECT": Effect(_none_check, _none_options, _unused_apply),
    "DOUBLE_OR_NOTHING": Effect(_dice_double_check, _dice_double_options, _unused_apply),
}
DICE_CODES = frozenset({"DICE_MONEY", "DICE_RESPECT", "DOUBLE_OR_NOTHING"})
# Codes resolved elsewhere: whacks and moves (decide/crew.py), passives (board.passive callers).
ROLL_CODES = frozenset({"WHACK_10", "WHACK_5", "WHACK_LOWER_FREE", "MOVE_ANY_HIGHER"})
PASSIVE_CODES = frozenset({"MOVE_BONUS", "PRISON_RESIST", "WHACK_FREE_REROLL", "OMERTA_IMMUNE", "FREE_REROLL"})


def has_resolution(s: State, code: str, ctx: Ctx) -> bool:
    return bool(EFFECTS[code].options(s, ctx, 1))
