"""How good a position looks to one seat, from that seat's own View only.

One small function per game (`EVALUATORS`), reading the fields that decide the
winner in the rules (GC-E06 Stash value, GR-T01 ISK, NC-V08 Respect, NP Respect
and money), each written defensively: a field the proto does not have counts 0,
so a changed View degrades a bot, never crashes it. Games without an evaluator
score 0 everywhere (the one-ply heuristic then plays like `random` but still
takes an immediate win).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

from google.protobuf.message import Message

from famiglia.engine import Engine, Result

Evaluator = Callable[[Message, int], float]


def _at(items: Any, seat: int, default: Any = 0) -> Any:
    try:
        return items[seat]
    except (IndexError, TypeError, KeyError):
        return default


def _seat_entry(entries: Any, seat: int) -> Any:
    """The repeated per-seat message whose `seat` is `seat` (or the seat-th one)."""
    for entry in entries or ():
        if getattr(entry, "seat", None) == seat:
            return entry
    return _at(entries, seat, None)


@functools.cache
def _loot_values() -> dict[str, int]:
    try:
        from famiglia.rules.goodcritters.data import card_values

        return dict(card_values())
    except Exception:  # noqa: BLE001 - the engine is someone else's work in progress
        return {}


def goodcritters(view: Message, seat: int) -> float:
    """GC-E06: the face value of the own Stash, in thousands; plus the rule of thumb
    for the split on the table: half of what is assigned to me (it pays out if the
    vote passes), and a vote card that matches whether my share beats an even split."""
    me = _seat_entry(getattr(view, "seat_views", ()), seat)
    if me is None:
        return 0.0
    values = _loot_values()
    stash = list(getattr(me, "stash", ()))
    value = (sum(values.get(card, 3500) for card in stash) / 1000.0 if stash
             else 3.5 * getattr(me, "stash_count", 0))
    assignments = list(getattr(view, "assignments", ()))
    if assignments:
        total = sum(values.get(a.card, 3500) for a in assignments) / 1000.0
        mine = sum(values.get(a.card, 3500) for a in assignments if a.seat == seat) / 1000.0
        edge = mine - total / max(1, getattr(view, "seats", 1) or 1)
        card = getattr(me, "chosen_card", 0)
        value += 0.5 * mine + {1: 0.5 * edge, 2: -0.5 * edge}.get(int(card or 0), 0.0)
    return value


def grifters(view: Message, seat: int) -> float:
    """GR-E04: ISK in the Stash; Jobs lead to colour bonuses (GR-E05) and break ties (GR-T01)."""
    me = _seat_entry(getattr(view, "players", ()), seat)
    if me is None:
        return 0.0
    return float(getattr(me, "stash", 0)) + 1.0 * len(getattr(me, "jobs", ()))


@functools.cache
def _nostra_city_cards() -> tuple[frozenset[str], frozenset[str], dict[int, int]]:
    """Snitch card ids, Investigation ids and each Note's verdict mark (+1 Innocent, -1 Guilty)."""
    try:
        from famiglia.rules.nostra_city.data import INVESTIGATION_BY_ID, NOTES, VENDETTA

        snitches = frozenset(v.id for v in VENDETTA if v.kind == "snitch")
        marks = {n.id: {"I": 1, "G": -1}.get(n.mark, 0) for n in NOTES}
        return snitches, frozenset(INVESTIGATION_BY_ID), marks
    except Exception:  # noqa: BLE001 - the engine is someone else's work in progress
        return frozenset(), frozenset(), {}


def _logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, x))))


def nostra_city_chance(view: Message, seat: int) -> float:
    """NC-V06..V10: the chance to win as the seat sees it. Respect only wins under the
    right verdict: INNOCENT for the loyal, GUILTY for a Snitch (a lone Snitch wins
    whatever its Respect), and GUILTY without any Snitch is a win for nobody (NC-V10):
    every seat ranks last, a loss for a loyal seat too. The verdict is projected from the token, the marks of the
    seat's own bribes and the Guilt the Investigations on the Street will still add;
    the others' Snitch cards from how many Vendetta cards they drew."""
    players = list(getattr(view, "players", ()))
    me = _seat_entry(players, seat)
    if me is None:
        return 0.0
    snitch_ids, investigations, marks = _nostra_city_cards()
    snitch = bool(getattr(me, "snitch", False)) or any(c in snitch_ids for c in getattr(me, "hand", ()))
    month = int(getattr(view, "month", 1) or 1)
    phase = str(getattr(view, "phase", ""))
    receptions_left = max(0, 6 - month + (0 if phase in ("reception", "verdict", "over") else 1))
    open_investigations = sum(1 for c in getattr(view, "street", ()) if c in investigations)
    verdict = (float(getattr(view, "verdict", 0)) + sum(marks.get(n, 0) for n in getattr(me, "corrupted", ()))
               - 0.6 * open_investigations * receptions_left)
    spread = 1.0 + 0.6 * receptions_left
    innocent = _logistic((verdict - 0.5) / spread)
    others = [p for p in players if getattr(p, "seat", -1) != seat]
    respect = float(getattr(me, "respect", 0)) + 0.1 * getattr(me, "bank_size", 0)
    best_other = max((float(getattr(p, "respect", 0)) + 0.1 * getattr(p, "bank_size", 0) for p in others),
                     default=respect)
    ahead = _logistic((respect - best_other) / 1.5)
    no_other_snitch = 1.0
    for p in others:
        if getattr(p, "snitch", False):
            no_other_snitch = 0.0
        no_other_snitch *= 0.9 ** int(getattr(p, "vendetta_drawn", 0))
    if snitch:
        return (1.0 - innocent) * (no_other_snitch + (1.0 - no_other_snitch) * ahead)
    return innocent * ahead


def nostra_city(view: Message, seat: int) -> float:
    """`nostra_city_chance` in tenths, plus a little for Respect and what earns Notes
    (Wiseguys, Turfs, the Bank) so that the one-ply player still builds when the
    chance does not move."""
    me = _seat_entry(getattr(view, "players", ()), seat)
    if me is None:
        return 0.0
    earners = len(getattr(me, "wiseguys", ())) + len(getattr(me, "turfs", ()))
    return (10.0 * nostra_city_chance(view, seat) + 0.2 * float(getattr(me, "respect", 0))
            + 0.05 * getattr(me, "bank_size", 0) + 0.05 * earners)


@functools.cache
def _gangster_respect() -> dict[str, int]:
    try:
        from famiglia.rules.nothing_personal.data import GANGSTERS

        return {g.id: g.respect for g in GANGSTERS}
    except Exception:  # noqa: BLE001 - the engine is someone else's work in progress
        return {}


def nothing_personal(view: Message, seat: int) -> float:
    """NP-E4: Respect decides; every $10 left becomes 1 Respect (NP-E3). Control of a
    gangster (NP-W2: strictly most markers, more than the neutral ones) is what
    earns Respect each round, so it counts at about its printed Respect — else a
    one-ply player would hoard money and cards and never build control."""
    respect = _gangster_respect()
    control = 0.0
    for g in getattr(view, "gangsters", ()):
        markers = list(getattr(g, "markers", ()))
        mine = _at(markers, seat)
        if mine <= 0:
            continue
        others = max((m for i, m in enumerate(markers) if i != seat), default=0)
        if mine > others and mine > getattr(g, "neutral", 0):
            control += 1.0 + respect.get(getattr(g, "id", ""), 2)
        elif mine == others and mine > getattr(g, "neutral", 0):
            control += 0.5
    money = float(_at(getattr(view, "money", ()), seat))
    return float(_at(getattr(view, "respect", ()), seat)) + money / 10.0 + control


def highcard(view: Any, seat: int) -> float:
    """The toy game: own score, plus the hand's strength for the tricks to come."""
    return float(_at(view.scores, seat)) + 0.2 * sum(view.hand)


EVALUATORS: dict[str, Evaluator] = {
    "goodcritters": goodcritters,
    "grifters": grifters,
    "nostra_city": nostra_city,
    "nothing_personal": nothing_personal,
    "highcard": highcard,
}


def _goodcritters_state(state: Any, seat: int) -> float:
    """`goodcritters` of `view(state, seat)`, read from the state: the same fields the
    seat's own View carries (its own Stash and chosen card, the public split)."""
    if not 0 <= seat < state.seats:
        raise IndexError(seat)
    values = _loot_values()
    stash = state.stashes[seat]
    value = _stash_value(stash, values) / 1000.0 if stash else 0.0
    if state.assignment:
        total, shares = _split_values(state.table, state.assignment, values)
        mine = shares.get(seat, 0) / 1000.0
        edge = mine - total / 1000.0 / max(1, state.seats or 1)
        card = state.cards[seat]
        value += 0.5 * mine + {1: 0.5 * edge, 2: -0.5 * edge}.get(int(card or 0), 0.0)
    return value


_SPLITS: dict[int, tuple[tuple[str, ...], tuple[int, ...], int, dict[int, int]]] = {}


def _split_values(table: tuple[str, ...], assignment: tuple[int, ...],
                  values: dict[str, int]) -> tuple[int, dict[int, int]]:
    """The face value of the table and of each seat's share of the split, remembered by the
    identity of both tuples: every candidate move that leaves the split alone shares them
    (sums of ints, so a remembered total is the very number summed again)."""
    known = _SPLITS.get(id(assignment))
    if known is not None and known[0] is table and known[1] is assignment:
        return known[2], known[3]
    if len(table) != len(assignment):
        raise ValueError("a split that does not cover the table")
    if len(_SPLITS) > 4096:
        _SPLITS.clear()
    total = 0
    shares: dict[int, int] = {}
    for card, owner in zip(table, assignment, strict=True):
        worth = values.get(card, 3500)
        total += worth
        shares[owner] = shares.get(owner, 0) + worth
    _SPLITS[id(assignment)] = (table, assignment, total, shares)
    return total, shares


_STASH_VALUES: dict[int, tuple[tuple[str, ...], int]] = {}


def _stash_value(stash: tuple[str, ...], values: dict[str, int]) -> int:
    """The face value of a Stash, remembered by identity: one-ply steps copy the state
    but share the tuples a command did not change, so most sums are asked again."""
    known = _STASH_VALUES.get(id(stash))
    if known is not None and known[0] is stash:
        return known[1]
    if len(_STASH_VALUES) > 4096:
        _STASH_VALUES.clear()
    total = sum(values.get(card, 3500) for card in stash)
    _STASH_VALUES[id(stash)] = (stash, total)
    return total


def _grifters_state(state: Any, seat: int) -> float:
    """`grifters` of `view(state, seat)`, read from the state (public fields only)."""
    if not 0 <= seat < len(state.players):
        raise IndexError(seat)
    me = state.players[seat]
    return float(me.stash) + 1.0 * len(me.jobs)


def _nothing_personal_state(state: Any, seat: int) -> float:
    """`nothing_personal` of `view(state, seat)`, read from the state (public fields only).
    Every term is a whole number or a half, so the sum is exact in any order."""
    from famiglia.rules.nothing_personal.data import GIDX

    if not 0 <= seat < len(state.money) or seat >= len(state.respect):
        raise IndexError(seat)
    respect = _gangster_respect()
    control = 0.0
    gs = state.gs
    for gid in state.board:
        if not gid:
            continue
        g = gs[GIDX[gid]]
        markers = g.markers
        if seat >= len(markers):
            continue
        mine = markers[seat]
        if mine <= 0 or mine <= g.neutral:
            continue
        others = max(markers[:seat] + markers[seat + 1:], default=0)
        if mine > others:
            control += 1.0 + respect.get(gid, 2)
        elif mine == others:
            control += 0.5
    return float(state.respect[seat]) + float(state.money[seat]) / 10.0 + control


def _nostra_city_state(state: Any, seat: int) -> float:
    """`nostra_city` of `view(state, seat)`, read from the state: the public Respect, Bank
    sizes, Vendetta draws and Territory of every seat, the seat's own hand and corrupted
    Notes, and the Snitches only once the match is over — what the seat's View shows.
    The same arithmetic in the same order as `nostra_city_chance`, so the same number."""
    from famiglia.rules.nostra_city.queries import respect as seat_respect

    players = state.players
    if not 0 <= seat < len(players):
        raise IndexError(seat)
    snitch_ids, investigations, marks = _nostra_city_cards()
    config = state.config
    phase = state.phase.value
    over = phase == "over"
    me = players[seat]
    raw = [seat_respect(p, config) for p in players]
    respects = [float(r) + 0.1 * len(p.bank) for r, p in zip(raw, players, strict=True)]
    snitch = (over and seat in state.snitches) or any(c in snitch_ids for c in me.hand)
    month = int(state.month or 1)
    receptions_left = max(0, 6 - month + (0 if phase in ("reception", "verdict", "over") else 1))
    open_investigations = sum(1 for c in state.street if c in investigations)
    verdict = (float(state.verdict) + sum(marks.get(n, 0) for n in me.corrupted)
               - 0.6 * open_investigations * receptions_left)
    spread = 1.0 + 0.6 * receptions_left
    innocent = _logistic((verdict - 0.5) / spread)
    mine = respects[seat]
    best_other = max((r for i, r in enumerate(respects) if i != seat), default=mine)
    ahead = _logistic((mine - best_other) / 1.5)
    no_other_snitch = 1.0
    for i, p in enumerate(players):
        if i == seat:
            continue
        if over and i in state.snitches:
            no_other_snitch = 0.0
        no_other_snitch *= 0.9 ** int(p.vendetta_drawn)
    if snitch:
        chance = (1.0 - innocent) * (no_other_snitch + (1.0 - no_other_snitch) * ahead)
    else:
        chance = innocent * ahead
    earners = len(me.wiseguys) + len(me.turfs)
    return (10.0 * chance + 0.2 * float(raw[seat])
            + 0.05 * len(me.bank) + 0.05 * earners)


StateEvaluator = Callable[[Any, int], float]

STATE_EVALUATORS: dict[str, StateEvaluator] = {
    "goodcritters": _goodcritters_state,
    "grifters": _grifters_state,
    "nothing_personal": _nothing_personal_state,
    "nostra_city": _nostra_city_state,
}
"""Evaluators that read a (sampled) state instead of the View built from it: the very
number `EVALUATORS` gives for `rules.view(state, seat)` (a test holds them equal on
every state of random games), without building that View — for the one-ply player,
building a View per candidate move cost more than the move itself. Each reads only
what the seat's own View shows."""


def state_evaluator(game_id: str, rules: Engine) -> StateEvaluator:
    """Scores a state for `seat`: `evaluate_view(game_id, rules.view(state, seat), seat)`,
    cheaper where the game has a state evaluator (any surprise there falls back to the
    View); the evaluator is looked up once, since a one-ply decision scores some fifty
    sampled states."""
    fast = STATE_EVALUATORS.get(game_id)

    def score(state: Any, seat: int) -> float:
        if fast is not None:
            try:
                return fast(state, seat)
            except Exception:  # noqa: BLE001 - the View path gives the answer (or its own 0.0)
                pass
        return evaluate_view(game_id, rules.view(state, seat), seat)

    return score


def evaluate_view(game_id: str, view: Message, seat: int) -> float:
    evaluator = EVALUATORS.get(game_id)
    if evaluator is None:
        return 0.0
    try:
        return evaluator(view, seat)
    except Exception:  # noqa: BLE001 - a heuristic must never take a bot down
        return 0.0


def rank_value(rank: int, seats: int) -> float:
    """1.0 for first place, 0.0 for last, linear between."""
    if seats <= 1:
        return 1.0
    return max(0.0, min(1.0, (seats - rank) / (seats - 1)))


def result_values(result: Result, seats: int) -> list[float]:
    values = [0.0] * seats
    for outcome in result.seats:
        if 0 <= outcome.seat < seats:
            values[outcome.seat] = rank_value(outcome.rank, seats)
    return values


CHANCES: dict[str, Evaluator] = {"nostra_city": nostra_city_chance}
"""Games whose search value is an estimated chance to win rather than a score margin
(Nostra City: Respect alone does not decide who wins)."""

MARGIN_SCALES: dict[str, float] = {
    "goodcritters": 12.0,
    "grifters": 5.0,
    "nostra_city": 2.0,
    "nothing_personal": 10.0,
    "highcard": 3.0,
}
"""About one standard deviation of (own score − best other score) half-way through a
random game at the strength seat count, in the evaluator's own units: what makes a
lead "clear" for `seat_values`."""


def win_values(result: Result, seats: int) -> list[float]:
    """Search values of a finished game: winning is what counts (rank 1 is 1.0; the
    other places keep a little of `rank_value`, so a search still prefers 2nd to last)."""
    values = [0.0] * seats
    for outcome in result.seats:
        if 0 <= outcome.seat < seats:
            values[outcome.seat] = 1.0 if outcome.rank == 1 else 0.25 * rank_value(outcome.rank, seats)
    return values


def seat_values(rules: Engine, state: Any, seats: int) -> list[float]:
    """Every seat's value in [0, 1] for a (sampled) state, used by search: for a finished
    game `win_values`; otherwise its margin over the best other seat as the evaluators
    see it, squashed (0.5 is level, a lead of one `MARGIN_SCALES` is about 0.88). A margin
    rather than a rank: the rank hides whether a move widened a lead or closed a gap."""
    result = rules.result(state)
    if result is not None:
        return win_values(result, seats)
    game_id = rules.info.game_id
    chance = CHANCES.get(game_id)
    if chance is not None:
        try:
            return [chance(rules.view(state, s), s) for s in range(seats)]
        except Exception:  # noqa: BLE001 - a heuristic must never take a bot down
            return [0.5] * seats
    scores = [evaluate_view(game_id, rules.view(state, s), s) for s in range(seats)]
    return margin_values(scores, MARGIN_SCALES.get(game_id, 1.0))


def margin_values(scores: list[float], scale: float) -> list[float]:
    values = []
    for s, mine in enumerate(scores):
        best_other = max((o for i, o in enumerate(scores) if i != s), default=mine)
        values.append(0.5 + 0.5 * math.tanh((mine - best_other) / scale))
    return values
