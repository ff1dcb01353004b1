"""Queries on the table: where gangsters are, control (NP-W2..W6), icons (NP-C5, NP-C6), thresholds."""

from __future__ import annotations

from .data import ARREST_LIMIT, GIDX, RESIST_THRESHOLD, SNITCH_THRESHOLD, G
from .state import GState, State


def spot_of(s: State, gid: str) -> int:
    """Spot index 0..11 of a gangster on the board, -1 elsewhere."""
    try:
        return s.board.index(gid)
    except ValueError:
        return -1


def at(s: State, position: int) -> str:
    return s.board[position - 1]


def gstate(s: State, gid: str) -> GState:
    return s.gs[GIDX[gid]]


def is_active(s: State, gid: str) -> bool:
    """At a position 1-9. An empty spot holds "", which names no gangster: never active."""
    return bool(gid) and gid in s.board[:9]


def is_on_board(s: State, gid: str) -> bool:
    """At a position or in an Associate slot; "" (an empty spot) is never on the board."""
    return bool(gid) and gid in s.board


def active(s: State) -> list[str]:
    return [g for g in s.board[:9] if g]


def on_board(s: State) -> list[str]:
    return [g for g in s.board if g]


def associates(s: State) -> list[str]:
    return [g for g in s.board[9:] if g]


def leaders(s: State, gid: str) -> tuple[int, ...]:
    """NP-W2: the seats with the most family markers, when they beat the neutral markers; NP-W3."""
    if not is_active(s, gid):
        return ()
    st = s.gs[GIDX[gid]]
    markers = st.markers
    m = max(markers)
    if m == 0 or st.neutral >= m:
        return ()
    if markers.count(m) == 1:
        return (markers.index(m),)
    return tuple([i for i, c in enumerate(markers) if c == m])   # (a list comprehension: no generator)


def strict(s: State, gid: str) -> int:
    """NP-W2, NP-W5: the seat with strict control, or -1."""
    lead = leaders(s, gid)
    return lead[0] if len(lead) == 1 else -1


def passive(s: State, gid: str, code: str) -> bool:
    """NP-W21, NP-W22: a passive ability works only while its card is active."""
    return is_active(s, gid) and G[gid].ability == code


_RING_ORDERS = {(n, start): tuple((start + i) % n for i in range(n)) for n in range(1, 9) for start in range(n)}


def ring_order(s: State, first: int | None = None) -> tuple[int, ...]:
    """NP-R2: the ring holder first, then clockwise."""
    start = s.ring if first is None else first
    order = _RING_ORDERS.get((s.n, start))
    if order is None:
        order = tuple((start + i) % s.n for i in range(s.n))
    return order


def icon_targets(s: State, icon: str) -> list[str]:
    """NP-C5, NP-C6: the gangsters an icon may target."""
    if icon.startswith("pos"):
        g = s.board[int(icon[3:]) - 1]
        return [g] if g else []
    if icon == "any":
        return on_board(s)
    return [g for g in s.board if g and icon in G[g].types]


def snitch_threshold(s: State, gid: str) -> int:
    """NP-C29, NP-C30."""
    return RESIST_THRESHOLD if passive(s, gid, "PRISON_RESIST") else SNITCH_THRESHOLD


def arrest_limit(s: State, gid: str) -> int:
    """NP-P1, NP-P2."""
    base = ARREST_LIMIT[s.n]
    return max(base, RESIST_THRESHOLD) if passive(s, gid, "PRISON_RESIST") else base


def marker_refs(st: GState) -> list[tuple[int, bool]]:
    """NP-C31: the distinguishable markers on one gangster as (owner, coin)."""
    out: list[tuple[int, bool]] = []
    for seat, c in enumerate(st.markers):
        if not c:
            continue
        if st.coin == seat:
            out.append((seat, True))
            if c >= 2:
                out.append((seat, False))
        else:
            out.append((seat, False))
    if st.neutral:
        out.append((-1, False))
    return out


def has_ref(st: GState, owner: int, coin: bool) -> bool:
    if owner == -1:
        return not coin and st.neutral > 0
    if owner < 0 or owner >= len(st.markers):
        return False
    c = st.markers[owner]
    if coin:
        return st.coin == owner and c >= 1
    return c - (1 if st.coin == owner else 0) >= 1


def can_draw(s: State) -> bool:
    return bool(s.deck or s.discard)


def markers_on_board(s: State, seat: int) -> int:
    """NP-T5 and NP-X16: positions and Associates."""
    return sum(s.gs[GIDX[g]].markers[seat] for g in s.board if g)
