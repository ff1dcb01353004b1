"""The turn clocks' shortcuts (`famiglia.clocks`: a wind that finds the same timed decisions
under the same keys, and no person's answer, leaves everything as it was; named clocks touched
only when their keys change) give the deadlines of winding every step in full, as the clocks
did before them (docs/performance.md, "Session 26"): random play of every game through the
command service, with people and bot seats, optional moves and pauses, compared at every step."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from famiglia import clocks as turn_clocks
from famiglia.bots.toy import toy_registry
from famiglia.clocks import KEPT_STILL_CLOCKS, KeyedClock, answers
from famiglia.config import Settings
from famiglia.engine import Engine, clock_key
from famiglia.engine.registry import default_registry
from famiglia.eventstore import envelopes as stamping
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.matchstate import MatchState
from famiglia.v1 import envelope_pb2
from services.command.bootstrap import bootstrap

REGISTRY = toy_registry(default_registry())


@dataclass
class WoundInFull:
    """The turn clocks as they were wound before their shortcuts: every step's deadlines
    computed afresh from the timed decisions, every named clock visited at every wind. The
    reference the shortcuts must agree with; `MatchState` takes it in place of its TurnClocks."""

    people: frozenset[int]
    keyed: dict[str, KeyedClock] = field(default_factory=dict)
    own: dict[int, tuple[tuple[Any, ...], float]] = field(default_factory=dict)
    runs_out: dict[int, float] = field(default_factory=dict)
    at: float = 0.0
    acted: dict[int, bytes] = field(default_factory=dict)
    step: tuple[int, str] | None = None
    last: tuple[tuple[int, str], bytes] = ((-1, ""), b"")

    def note(self, engine: Engine, before: Any, seat: int, command_id: str, stamp_ms: int,
             command: bytes = b"") -> None:
        step = (seat, command_id)
        if self.step is not None and self.step != step:
            self.wind(engine, before)
        self.step = step
        if command_id:
            last = self.last
            if command:
                self.last = (step, command)
            elif last[0] == step:
                command = last[1]
            self.acted[seat] = command
        self.at = max(self.at, stamp_ms / 1000)

    def deadlines(self, engine: Engine, state: Any) -> dict[int, float]:
        if self.step is not None:
            self.wind(engine, state)
        return self.runs_out

    def wind(self, engine: Engine, state: Any) -> None:
        at, people = self.at, self.people
        timed = [p for p in engine.pending(state) if p.timeout_seconds > 0] if state is not None else []
        keys = [clock_key(engine, state, p) for p in timed]
        asked = {key for key in keys if key}
        for key, clock in list(self.keyed.items()):
            if key not in asked and clock.since is not None:
                clock.used, clock.since = clock.spent(at), None
                self.keyed[key] = self.keyed.pop(key)
        for key in asked:
            known = self.keyed.get(key)
            if known is None:
                self.keyed[key] = KeyedClock(since=at)
            elif known.since is None:
                known.since = at
        still = [key for key, clock in self.keyed.items() if clock.since is None]
        for key in still[:max(0, len(still) - KEPT_STILL_CLOCKS)]:
            del self.keyed[key]
        own: dict[int, tuple[tuple[Any, ...], float]] = {}
        runs_out: dict[int, float] = {}
        for pending, key in zip(timed, keys, strict=True):
            seat = pending.seat
            if seat not in people or seat in runs_out:
                continue
            if key:
                clock = self.keyed[key]
                began = (clock.since if clock.since is not None else at) - clock.used
            else:
                decision = (pending.kind, pending.label, pending.timeout_seconds)
                known = self.own.get(seat)
                goes_on = known is not None and known[0] == decision and (
                    seat not in self.acted or not answers(engine, self.acted[seat]))
                began = known[1] if known is not None and goes_on else at
                own[seat] = (decision, began)
            runs_out[seat] = began + pending.timeout_seconds
        self.own, self.runs_out, self.acted, self.step = own, runs_out, {}, None


def _named(match: MatchState) -> list[tuple[str, KeyedClock]]:
    """The match's named clocks, in the order they are forgotten in."""
    assert match.clocks is not None
    return list(match.clocks.keyed.items())


def _replica(store: InMemoryEventStore, match_id: str, reference: bool) -> MatchState:
    """The match folded from the store as another process would (the staged events too), with
    the clocks wound in full (`reference`) or with their shortcuts."""
    match = MatchState.from_envelopes(REGISTRY, store.read(match_id, after=0), clocks=True)
    if reference:
        assert match.clocks is not None
        clocks = WoundInFull(match.clocks.people)
        match = MatchState.start(REGISTRY, store.read(match_id, after=0, limit=1)[0])
        match.clocks = clocks
        match.apply(store.read(match_id, after=0))
    if match.may_hold:
        match.catch_up(store)
    return match


GAMES = [  # (game, seats, options, the bots' seats, what comes up in the walks)
    ("goodcritters", 4, {}, (), {"shortcut"}),
    ("goodcritters", 5, {"step3_mode": "turns"}, (2,), {"shortcut", "forgotten"}),
    ("nothing_personal", 5, {}, (), {"shortcut"}),
    ("nothing_personal", 3, {}, (1,), {"shortcut"}),
    ("nostra_city", 5, {}, (), {"shortcut", "forgotten"}),
    ("nostra_city", 3, {}, (0,), {"shortcut", "forgotten"}),
    ("grifters", 4, {}, (), set()),  # every command passes the turn: each wind asks anew
    ("highcard", 2, {"hand": "6", "clock_s": "30"}, (), set()),
]
"""What comes up: "shortcut", a command that leaves the same decisions asked (another seat's
or an optional move, a public change in Step 3); "forgotten", more named clocks standing still
than are kept (a turn's each)."""


@pytest.mark.parametrize(("game", "seats", "options", "bots", "comes_up"), GAMES)
@pytest.mark.parametrize("seed", [1, 2])
def test_the_clocks_shortcuts_give_the_deadlines_of_winding_every_step_in_full(
        game: str, seats: int, options: dict[str, str], bots: tuple[int, ...], comes_up: set[str], seed: int,
        monkeypatch) -> None:
    wall = [1_700_000_000.0]
    monkeypatch.setattr(stamping, "time", type("Clock", (), {"time": staticmethod(lambda: wall[0])}))
    winds = {"all": 0, "in full": 0}
    timed_decisions, wind_keyed = turn_clocks.timed_decisions, turn_clocks.wind_keyed

    def counted_winds(engine: Engine, state: Any) -> list:
        winds["all"] += 1
        return timed_decisions(engine, state)

    def counted_keyed(*args: Any) -> None:
        winds["in full"] += 1
        wind_keyed(*args)

    monkeypatch.setattr(turn_clocks, "timed_decisions", counted_winds)
    monkeypatch.setattr(turn_clocks, "wind_keyed", counted_keyed)
    store = InMemoryEventStore()
    app = bootstrap(store=store, registry=REGISTRY, settings=Settings(secret="unit-test-secret"))
    created = app.create_match(game, seats, seed=seed, options=options,
                               seat_info=[envelope_pb2.SeatInfo(seat=s, bot=True, policy="random") for s in bots])
    match_id, tokens = created.match_id, created.seat_tokens
    hot = app.matches.get(match_id)
    full = _replica(store, match_id, reference=True)  # caught up at every step
    behind = _replica(store, match_id, reference=False)  # caught up now and then: several steps a fold
    pick = random.Random(seed)
    compared, seen, forgotten = 0, set[str](), set[str]()
    for step in range(260):
        m = hot.match
        if m.finished:
            break
        engine = m.engine
        asked = sorted({p.seat for p in engine.pending(m.state)})
        others = [s for s in range(seats) if s not in asked and engine.legal_commands(m.state, s, limit=1)]
        seat = pick.choice(others) if others and pick.random() < 0.2 else pick.choice(asked)
        command = pick.choice(engine.legal_commands(m.state, seat, limit=64))
        wall[0] += pick.choice([0.0, 0.25, 3.0, 17.0])
        app.submit(match_id, app.viewer(match_id, tokens[seat]), f"c{step}", command)
        full.catch_up(store)
        deadlines = dict(full.deadlines())
        if pick.random() < 0.7:  # the hot match asked (a wind by `deadlines`) or not (by the next fold)
            assert dict(hot.match.deadlines()) == deadlines, step
            assert _named(hot.match) == _named(full), step
            compared += 1
        if pick.random() < 0.25:
            behind.catch_up(store)
            assert dict(behind.deadlines()) == deadlines, step
            assert _named(behind) == _named(full), step
        named = {key for key, _clock in _named(full)}
        forgotten |= seen - named
        seen |= named
        if step % 40 == 0:
            assert dict(_replica(store, match_id, reference=False).deadlines()) == deadlines, step
    assert dict(hot.match.deadlines()) == dict(full.deadlines())
    assert compared > 0
    assert winds["in full"] > 0, winds
    if "shortcut" in comes_up:
        assert winds["all"] - winds["in full"] > 0, winds
    if "forgotten" in comes_up:
        assert forgotten
