"""The engine's fast paths (docs/performance-nothing-personal.md) change nothing a caller can observe."""

from __future__ import annotations

import ast
import random
from collections import defaultdict
from pathlib import Path

import famiglia.rules.nothing_personal as np_package
from famiglia.engine import Rng
from famiglia.rules.nothing_personal import ENGINE, flow, legal, plays
from famiglia.rules.nothing_personal.data import TIMEOUTS
from famiglia.rules.nothing_personal.evolve import evolve
from famiglia.rules.nothing_personal.state import replace
from famiglia.rules.nothing_personal.tx import _BUILT, NEXT, SHARED, folded
from tests.unit.nothing_personal.support import new, play, round1


def _walk(seats: int, seed: int, steps: int) -> list:
    """States of a random game, one per command."""
    s = new(seats, seed)
    chooser = random.Random(seed)
    out = [s]
    for _ in range(steps):
        pendings = ENGINE.pending(s)
        if not pendings:
            break
        seat = pendings[chooser.randrange(len(pendings))].seat
        commands = ENGINE.legal_commands(s, seat, limit=64)
        _, s = play(s, seat, commands[chooser.randrange(len(commands))], chooser.randrange(1000))
        out.append(s)
    return out


def _clear_listing_caches() -> None:
    for cache in (plays._BOARDS, plays._PLAYS, plays._SHAPES, plays._COMMANDS, plays._HANDS, legal._BUILT, flow._WINDOWS):
        cache.clear()


def test_listings_are_the_same_with_cold_and_warm_caches() -> None:
    states = _walk(4, 3, 300)
    warm = {}
    for i, s in enumerate(states):
        for p in ENGINE.pending(s):
            warm[i, p.seat] = [c.SerializeToString(deterministic=True) for c in ENGINE.legal_commands(s, p.seat)]
    for i, s in enumerate(states):
        for p in ENGINE.pending(s):
            _clear_listing_caches()
            cold = [c.SerializeToString(deterministic=True) for c in ENGINE.legal_commands(s, p.seat)]
            assert cold == warm[i, p.seat]


def test_interned_decisions_give_the_pending_rows_of_the_decision() -> None:
    for s in _walk(5, 8, 200):
        d = flow.decision(s)
        rows = ENGINE.pending(s)
        if d is None:
            assert rows == []
            continue
        assert [p.seat for p in rows] == list(d.seats)
        assert all((p.kind, p.label, p.private, p.timeout_seconds)
                   == (d.dk, d.kind, d.private, TIMEOUTS["auto_pass"] if p.seat in d.auto else d.timeout)
                   for p in rows)
        rows.clear()   # callers own the list they get
        assert len(ENGINE.pending(s)) == len(d.seats)


def test_fold_links_are_consumed_and_never_copied() -> None:
    s = round1(4)
    seat = ENGINE.pending(s)[0].seat
    events = ENGINE.decide(s, seat, ENGINE.timeout_command(s, seat), Rng(1))
    assert NEXT in s.__dict__
    assert NEXT not in replace(s, round=s.round).__dict__   # a copy is another state: no link
    after = folded(s, events[0])
    assert after is not None and NEXT not in s.__dict__     # consumed
    assert folded(s, events[0]) is None                     # so a second fold recomputes
    assert evolve(s, events[0]) == after


def test_shared_events_fold_exactly_wherever_they_appear() -> None:
    """An event built once per content may appear in many places; every fold of it is exact."""
    states = _walk(3, 5, 250)
    assert any(SHARED.values()), "scalar events are shared"
    s = states[-1]
    seat = ENGINE.pending(s)[0].seat if ENGINE.pending(s) else None
    if seat is not None:
        events = ENGINE.decide(s, seat, ENGINE.timeout_command(s, seat), Rng(2))
        slow = s
        for e in events:
            slow = evolve(slow, type(e).FromString(e.SerializeToString()))
        fast = s
        for e in events:
            fast = ENGINE.evolve(fast, e)
        assert fast == slow


def test_every_emit_of_a_shared_kind_names_its_fields_in_one_order() -> None:
    """`Tx.emit` keys shared events by kind and field values: two call sites of one kind with the same
    number of fields in different orders would share the wrong event."""
    orders: dict[str, set[tuple[str | None, ...]]] = defaultdict(set)
    for path in Path(np_package.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "emit":
                assert node.args and isinstance(node.args[0], ast.Constant), f"{path}:{node.lineno}: kind not literal"
                orders[node.args[0].value].add(tuple(_names(node.keywords)))
    assert len(orders) > 30  # the scan found the call sites
    for kind, shapes in orders.items():
        if kind in _BUILT:
            continue
        assert all(None not in shape for shape in shapes), f"{kind}: fields passed as **mapping"
        lengths = [len(shape) for shape in shapes]
        assert len(set(lengths)) == len(lengths), f"{kind}: fields named in different orders {shapes}"


def _names(keywords: list[ast.keyword]) -> list[str | None]:
    """Field names in call order; `**{"from": x}` (a reserved word) counts as its literal keys."""
    out: list[str | None] = []
    for k in keywords:
        if k.arg is None and isinstance(k.value, ast.Dict):
            out.extend(key.value if isinstance(key, ast.Constant) else None for key in k.value.keys)
        else:
            out.append(k.arg)
    return out
