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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
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
    """NC-V06..V10: the chance to win as the seat sees it (`_nostra_city_odds`)."""
    players = list(getattr(view, "players", ()))
    me = _seat_entry(players, seat)
    if me is None:
        return 0.0
    snitch_ids, investigations, _ = _nostra_city_cards()
    month, phase = int(getattr(view, "month", 1) or 1), str(getattr(view, "phase", ""))
    per_note = _note_respect(month, phase)
    respects = [float(getattr(p, "respect", 0)) + per_note * getattr(p, "bank_size", 0) for p in players]
    seats = [getattr(p, "seat", -1) for p in players]
    return _nostra_city_odds(
        snitch=bool(getattr(me, "snitch", False)) or any(c in snitch_ids for c in getattr(me, "hand", ())),
        month=month, phase=phase, verdict=float(getattr(view, "verdict", 0)),
        open_investigations=sum(1 for c in getattr(view, "street", ()) if c in investigations),
        corrupted=getattr(me, "corrupted", ()), bank=getattr(me, "bank", ()),
        free=len(set(getattr(me, "wiseguys", ())).difference(getattr(me, "busy", ()))),
        bribe_left=_trial_ahead(phase, list(getattr(view, "order", ())), int(getattr(view, "turn", 0)), seat),
        mine=respects[seats.index(seat)],
        others=[(r, bool(getattr(p, "snitch", False)), int(getattr(p, "vendetta_drawn", 0)))
                for r, p, s in zip(respects, players, seats, strict=True) if s != seat])


@dataclass(frozen=True)
class NostraCityWeights:
    """The constants of `_nostra_city_odds`, in one place to tune them (`famiglia.bench.strength`)."""

    mark_now: float = 0.6
    """A marked Note in the Bank that a Free Wiseguy can still bribe with in this month's
    Trial moves the projected verdict this much (1 for one on the Corruption Pile)..."""
    mark_later: float = 0.2
    """...and one that must wait for a later Trial (NC-T01), if the seat keeps it out of
    its bids and distributions, this much."""
    guilt_per_investigation: float = 0.6
    """Expected Guilt an Investigation on the Street still adds per Reception (NC-C04: 1,
    unless a Meeting takes it first)."""
    spread: float = 1.0
    spread_per_reception: float = 0.6
    """The verdict's uncertainty: the others' hidden bribes and the Receptions to come."""
    respect_scale: float = 1.5
    note_respect: float = 0.1
    """A Note in the Bank buys the cards that give Respect, while Meetings are left..."""
    note_tie_break: float = 0.02
    """...and breaks Respect ties at the end (NC-V15)."""
    snitch_odds_per_draw: float = 0.9
    """The chance that one Vendetta card drawn was not an FBI Snitch (NC-K41, NC-K42)."""
    bid: float = 0.3
    """The one-ply score of a sealed bid of the seat's own, per point its card is worth
    (`_card_worth`, `ONE_PLY`): a bid costs its Notes and Wiseguy at once and pays at the
    resolution, which one ply does not reach, so without it the one-ply player seldom bids
    (24% of 480 matches won against random seats; 52% with it, 0.3 of 0.3-2 tried)."""
    investigation_worth: float = 1.5
    """An Investigation won: 1 Respect and the Guilt it no longer adds (NC-M11)."""
    earner_worth: float = 1.0
    """A Wiseguy or a Turf won: more actions and larger shares to come."""
    other_worth: float = 0.5


NOSTRA_CITY = NostraCityWeights()


def _note_respect(month: int, phase: str) -> float:
    """What one Note in a Bank is worth in Respect, as the Meetings run out."""
    meetings_left = max(0, 6 - month + (1 if phase in ("business", "meeting") else 0))
    return NOSTRA_CITY.note_tie_break + NOSTRA_CITY.note_respect * meetings_left / 6


def _trial_ahead(phase: str, order: Sequence[int], turn: int, seat: int) -> bool:
    """Whether the seat's own turn in this month's Trial is still to come or under way."""
    if phase in ("business", "meeting", "resolution"):
        return True
    return phase == "trial" and seat in order and order.index(seat) >= turn


def _nostra_city_odds(*, snitch: bool, month: int, phase: str, verdict: float, open_investigations: int,
                      corrupted: Iterable[int], bank: Iterable[int], free: int, bribe_left: bool, mine: float,
                      others: list[tuple[float, bool, int]]) -> float:
    """Respect only wins under the right verdict: INNOCENT for the loyal, GUILTY for a Snitch
    (a lone Snitch wins whatever its Respect), and GUILTY without any Snitch is a win for
    nobody (NC-V10): every seat ranks last, a loss for a loyal seat too. The verdict is
    projected from the token, the marks of the seat's own bribes, the Notes in its Bank that
    would push the verdict its way, and the Guilt the Investigations on the Street will still
    add; the others' Snitch cards from how many Vendetta cards they drew. `others`: each
    other seat's (Respect with its Bank, revealed Snitch, Vendetta cards drawn)."""
    _, _, marks = _nostra_city_cards()
    receptions_left = max(0, 6 - month + (0 if phase in ("reception", "verdict", "over") else 1))
    wanted = -1 if snitch else 1
    w = NOSTRA_CITY
    in_bank = sum(1 for n in bank if marks.get(n, 0) == wanted)
    now = min(in_bank, free) if bribe_left else 0
    later = in_bank - now if month < 6 else 0
    verdict = (verdict + sum(marks.get(n, 0) for n in corrupted)
               + wanted * (w.mark_now * now + w.mark_later * later)
               - w.guilt_per_investigation * open_investigations * receptions_left)
    spread = w.spread + w.spread_per_reception * receptions_left
    innocent = _logistic((verdict - 0.5) / spread)
    best_other = max((r for r, _, _ in others), default=mine)
    ahead = _logistic((mine - best_other) / w.respect_scale)
    no_other_snitch = 1.0
    for _, revealed, drawn in others:
        if revealed:
            no_other_snitch = 0.0
        no_other_snitch *= w.snitch_odds_per_draw ** drawn
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
def _nostra_city_worths() -> tuple[dict[str, int], frozenset[str], frozenset[str]]:
    """Respect and Title cards' Respect, and the ids of Wiseguys and Turfs (the rules' data)."""
    try:
        from famiglia.rules.nostra_city.data import RESPECT_CARDS, TITLE_RESPECT, TURF_BY_ID, WISEGUY_BY_ID

        return {**RESPECT_CARDS, **TITLE_RESPECT}, frozenset(WISEGUY_BY_ID), frozenset(TURF_BY_ID)
    except Exception:  # noqa: BLE001 - the engine is someone else's work in progress
        return {}, frozenset(), frozenset()


def _card_worth(card: str) -> float:
    """What winning a Street card is worth to the one-ply player, in Respect-like points."""
    respect, wiseguys, turfs = _nostra_city_worths()
    w = NOSTRA_CITY
    if card in respect:
        return float(respect[card])
    if card in _nostra_city_cards()[1]:
        return w.investigation_worth
    if card in wiseguys or card in turfs:
        return w.earner_worth
    return w.other_worth


def _nostra_city_bids(state: Any, seat: int) -> float:
    """`NostraCityWeights.bid` per point of the cards the seat's own sealed bids are on."""
    street = state.street
    total = 0.0
    for bid in state.bids:
        location = bid.location
        if bid.seat == seat and 0 < location <= len(street) and street[location - 1]:
            total += _card_worth(street[location - 1])
    return NOSTRA_CITY.bid * total


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
    sizes, Vendetta draws and Territory of every seat, the seat's own hand, Bank and corrupted
    Notes, and the Snitches only once the match is over — what the seat's View shows.
    The same numbers into the same `_nostra_city_odds` as `nostra_city_chance`."""
    from famiglia.rules.nostra_city.queries import respect as seat_respect

    players = state.players
    if not 0 <= seat < len(players):
        raise IndexError(seat)
    snitch_ids, investigations, _ = _nostra_city_cards()
    config = state.config
    phase = state.phase.value
    over = phase == "over"
    me = players[seat]
    raw = [seat_respect(p, config) for p in players]
    per_note = _note_respect(int(state.month or 1), phase)
    respects = [float(r) + per_note * len(p.bank) for r, p in zip(raw, players, strict=True)]
    chance = _nostra_city_odds(
        snitch=(over and seat in state.snitches) or any(c in snitch_ids for c in me.hand),
        month=int(state.month or 1), phase=phase, verdict=float(state.verdict),
        open_investigations=sum(1 for c in state.street if c in investigations),
        corrupted=me.corrupted, bank=me.bank, free=len(set(me.wiseguys).difference(me.busy)),
        bribe_left=_trial_ahead(phase, state.order, state.turn, seat), mine=respects[seat],
        others=[(respects[i], over and i in state.snitches, int(p.vendetta_drawn))
                for i, p in enumerate(players) if i != seat])
    earners = len(me.wiseguys) + len(me.turfs)
    return (10.0 * chance + 0.2 * float(raw[seat])
            + 0.05 * len(me.bank) + 0.05 * earners)


StateEvaluator = Callable[[Any, int], float]

ONE_PLY: dict[str, StateEvaluator] = {"nostra_city": _nostra_city_bids}
"""What the one-ply player adds to a sampled state's score, for what pays beyond its ply
(Nostra City: a sealed bid pays at the Meeting's resolution). Only the seat's own hidden
facts and public ones, as its View shows them. Not part of the evaluators: the search's
prior and leaves keep them as measured (docs/bots.md, session 21)."""

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
