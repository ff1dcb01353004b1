"""Helpers for Nothing Personal unit tests: real engine, crafted tables, no mocks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from famiglia.engine import MatchConfig, Rng, fold
from famiglia.rules.nothing_personal import ENGINE
from famiglia.rules.nothing_personal.data import GIDX
from famiglia.rules.nothing_personal.events import cmd
from famiglia.rules.nothing_personal.flow import advance
from famiglia.rules.nothing_personal.state import GState, Phase, State, replace
from famiglia.rules.nothing_personal.tx import Tx

PASS = cmd("pass")


def new(n: int = 4, seed: int = 1, **options: str) -> State:
    return fold(ENGINE, ENGINE.setup(MatchConfig(n, options), seed))


def play(state: State, seat: int, command: Any, seed: int = 0) -> tuple[list[Any], State]:
    events = ENGINE.decide(state, seat, command, Rng(seed))
    return events, fold(ENGINE, events, state)


def kinds(events: list[Any]) -> list[str]:
    return [e.WhichOneof("kind") for e in events]


def of(events: list[Any], kind: str) -> list[Any]:
    return [getattr(e, kind) for e in events if e.WhichOneof("kind") == kind]


def drive(state: State, until: Callable[[State], bool], chooser: Callable[[State, int], Any] | None = None,
          limit: int = 5000) -> State:
    """Play the documented timeout defaults (or `chooser`) until `until(state)`."""
    n = 0
    while not until(state):
        p = ENGINE.pending(state)
        assert p, f"nobody pending before the condition held: {ENGINE.render_state(state)}"
        seat = p[0].seat
        command = chooser(state, seat) if chooser else None
        if command is None:
            command = ENGINE.timeout_command(state, seat)
        _, state = play(state, seat, command, seed=n)
        n += 1
        assert n < limit
    return state


def round1(n: int = 4, seed: int = 1, **options: str) -> State:
    """A table whose setup is done: round 1, the Commission, first turn open."""
    return drive(new(n, seed, **options), lambda s: s.phase == Phase.COMMISSION)


def supplies(state: State) -> State:
    """Recompute family and neutral supplies so the 25-marker invariants hold after crafting."""
    supply = tuple(25 - sum(g.markers[i] for g in state.gs) for i in range(state.n))
    neutral = 25 - sum(g.neutral for g in state.gs)
    bm = 8 - sum(1 for g in state.gs if g.coin >= 0)
    om = 2 - sum(1 for g in state.gs if g.omerta)
    return replace(state, supply=supply, neutral=neutral, bm_free=bm, om_free=om)


def mark(state: State, gid: str, seats: dict[int, int] | None = None, neutral: int = 0, coin: int = -1,
         omerta: bool = False, sideways: bool = False) -> State:
    markers = [0] * state.n
    for seat, k in (seats or {}).items():
        markers[seat] = k
    gs = list(state.gs)
    gs[GIDX[gid]] = GState(tuple(markers), neutral, coin, omerta, sideways)
    return supplies(replace(state, gs=tuple(gs)))


def clear(state: State) -> State:
    """No marker anywhere."""
    return supplies(replace(state, gs=tuple(GState((0,) * state.n) for _ in state.gs)))


def place(state: State, spots: dict[int, str]) -> State:
    """Put gangsters on spots (1..9 positions, 10..12 = A1..A3), taking them from wherever they are."""
    board = list(state.board)
    gdeck = list(state.gdeck)
    for spot, gid in spots.items():
        if gid in board:
            board[board.index(gid)] = ""
        if gid in gdeck:
            gdeck.remove(gid)
        old = board[spot - 1]
        if old:
            gdeck.append(old)
        board[spot - 1] = gid
    return replace(state, board=tuple(board), gdeck=tuple(gdeck))


def empty(state: State, *spots: int) -> State:
    board = list(state.board)
    gdeck = list(state.gdeck)
    for spot in spots:
        if board[spot - 1]:
            gdeck.append(board[spot - 1])
        board[spot - 1] = ""
    return replace(state, board=tuple(board), gdeck=tuple(gdeck))


def hand(state: State, seat: int, *cards: str) -> State:
    """Give `seat` exactly these cards, swapping with the deck and other hands to keep 94 cards."""
    hands = [list(h) for h in state.hands]
    deck = list(state.deck)
    discard = list(state.discard)
    pool = hands[seat]
    hands[seat] = []
    deck.extend(pool)
    for c in cards:
        for place_ in [deck, discard, *[h for i, h in enumerate(hands) if i != seat]]:
            if c in place_:
                place_.remove(c)
                break
        hands[seat].append(c)
    return replace(state, hands=tuple(tuple(sorted(h)) for h in hands), deck=tuple(deck), discard=tuple(discard))


def at_stage(state: State, phase: str, stage: str, pos: int = 0, **kw: Any) -> State:
    return replace(state, phase=phase, stage=stage, pos=pos, window=None, roll=None, ruling=None, act=None,
                   invite=None, vacancy=None, **kw)


def step(state: State, seed: int = 0) -> tuple[list[Any], State]:
    """Run the automatic flow from a crafted state until a decision opens."""
    tx = Tx(state, Rng(seed))
    advance(tx)
    return tx.events, tx.s


def money(state: State, *amounts: int) -> State:
    return replace(state, money=tuple(amounts))


def respect(state: State, *amounts: int) -> State:
    return replace(state, respect=tuple(amounts))


STD = {1: "T01", 2: "H02", 3: "C01", 4: "G02", 5: "T03", 6: "H04", 7: "C06", 8: "G05", 9: "M00",
       10: "T07", 11: "H05", 12: "C09"}


def std(n: int = 4, ring: int = 0, cash: int = 50) -> State:
    """Round 1, Commission, seat `ring` to act and holding the ring; a known board with no markers."""
    s = round1(n)
    s = clear(place(s, STD))
    s = replace(s, ring=ring, turn=ring, order=tuple((ring + i) % n for i in range(n)), money=(cash,) * n,
                had_turn=frozenset(), passed=frozenset(), ante=0)
    return s


def pfi(card: str, *targets: str, ante: int = 0, use_effect: bool = False, **effect: Any) -> Any:
    """PlayForInfluence with group i on targets[i] ('' skips the group)."""
    from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb

    placements = [pb.GroupPlacement(group=i, gangster=t) for i, t in enumerate(targets) if t]
    return pb.Command(play_for_influence=pb.PlayForInfluence(
        card=card, placements=placements, ante=ante, use_effect=use_effect, effect=pb.Targets(**effect)))


def por(card: str, ante: int = 0, **effect: Any) -> Any:
    from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb

    return pb.Command(play_or_effect=pb.PlayOrEffect(card=card, ante=ante, effect=pb.Targets(**effect)))


def ref(gangster: str, owner: int, coin: bool = False) -> Any:
    from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb

    return pb.MarkerRef(gangster=gangster, owner=owner, coin=coin)


def markers_of(state: State, gid: str) -> GState:
    return state.gs[GIDX[gid]]


def refused(state: State, seat: int, command: Any) -> str:
    """The rule id `decide` refuses the command with."""
    import pytest

    from famiglia.engine import RuleViolation

    with pytest.raises(RuleViolation) as exc:
        ENGINE.decide(state, seat, command, Rng(0))
    return exc.value.code


def bare(n: int = 4, ring: int = 0) -> State:
    """Round 1, a known board (STD), no markers, empty hands, $50 each."""
    s = std(n, ring)
    return replace(s, hands=((),) * n, deck=s.deck + tuple(c for h in s.hands for c in h))
