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


def nostra_city(view: Message, seat: int) -> float:
    """NC-V08: Respect wins. Notes (the Bank holds note ids, so count them) buy Street
    cards and jurors; Wiseguys and Turfs earn Notes every Business phase."""
    me = _seat_entry(getattr(view, "players", ()), seat)
    if me is None:
        return 0.0
    earners = len(getattr(me, "wiseguys", ())) + len(getattr(me, "turfs", ()))
    return float(getattr(me, "respect", 0)) + 0.25 * getattr(me, "bank_size", 0) + 0.3 * earners


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


def seat_values(rules: Engine, state: Any, seats: int) -> list[float]:
    """Every seat's value in [0, 1] for a (sampled) state: its rank, final or as the
    evaluators see it now. Used by search, which owns the sampled state."""
    result = rules.result(state)
    if result is not None:
        return result_values(result, seats)
    game_id = rules.info.game_id
    scores = [evaluate_view(game_id, rules.view(state, s), s) for s in range(seats)]
    values = []
    for mine in scores:
        below = sum(1 for o in scores if o < mine)
        ties = sum(1 for o in scores if o == mine) - 1
        values.append((below + 0.5 * ties) / max(1, seats - 1))
    return values
