"""Dice Race: a tiny test-only game, so the projection's tests run whatever engines are registered.

Seats take turns rolling a die; the first to reach the target ends the game;
ranks by total, ties share a rank. Messages are `google.protobuf.Value`, whose
oneof is named `kind` like every game's Command and Event.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from typing import Any

from google.protobuf import struct_pb2
from google.protobuf.struct_pb2 import Value

from famiglia.engine import (
    PUBLIC,
    DecisionKind,
    GameInfo,
    MatchConfig,
    Pending,
    Result,
    Rng,
    RuleViolation,
    SeatOutcome,
    Visibility,
)
from famiglia.engine.registry import Registry

GAME_ID = "dice_race"


@dataclass(frozen=True, slots=True)
class State:
    target: int
    totals: tuple[int, ...]
    turn: int = 0
    over: bool = False


def _roll(seat: int, pips: int) -> Value:
    return Value(list_value=struct_pb2.ListValue(values=[Value(number_value=seat), Value(number_value=pips)]))


class DiceRace:
    info = GameInfo(game_id=GAME_ID, title="Dice Race", min_players=2, max_players=4, chance=True, max_steps=500,
                    command_type=Value, event_type=Value, view_type=Value)

    def setup(self, config: MatchConfig, seed: int) -> list[Value]:
        if not 2 <= config.seats <= 4:
            raise RuleViolation("DR-1", "two to four seats")
        target = int(config.options.get("target", "12"))
        start = Value()
        start.struct_value.update({"seats": config.seats, "target": target})
        return [start]

    def evolve(self, state: State | None, event: Value) -> State:
        kind = event.WhichOneof("kind")
        if kind == "struct_value":
            fields = event.struct_value.fields
            return State(target=int(fields["target"].number_value),
                         totals=(0,) * int(fields["seats"].number_value))
        assert state is not None
        seat, pips = (int(v.number_value) for v in event.list_value.values)
        totals = tuple(t + pips if i == seat else t for i, t in enumerate(state.totals))
        return replace(state, totals=totals, turn=(seat + 1) % len(totals), over=totals[seat] >= state.target)

    def decide(self, state: State, seat: int, command: Value, rng: Rng) -> list[Value]:
        if state.over:
            raise RuleViolation("DR-3", "the race is over")
        if seat != state.turn:
            raise RuleViolation("DR-2", "not your turn")
        return [_roll(seat, rng.die(6))]

    def pending(self, state: State) -> list[Pending]:
        return [] if state.over else [Pending(state.turn, DecisionKind.TURN, "roll")]

    def legal_commands(self, state: State, seat: int, limit: int | None = None, *, rng: Any = None) -> list[Value]:
        return [] if state.over or seat != state.turn else [Value(string_value="roll")]

    def view(self, state: State, viewer: int | None) -> Value:
        return Value(string_value=self.render_state(state))

    def visibility(self, event: Value) -> Visibility:
        return PUBLIC

    def redact(self, event: Value, viewer: int | None) -> Value | None:
        return event

    def result(self, state: State) -> Result | None:
        if not state.over:
            return None
        order = sorted(set(state.totals), reverse=True)
        seats = tuple(
            SeatOutcome(seat=i, score=float(t), rank=1 + sum(1 for o in state.totals if o > t),
                        details={"verdict": "first" if t == order[0] else "behind"})
            for i, t in enumerate(state.totals)
        )
        return Result(seats=seats, outcome={"target": str(state.target)})

    def timeout_command(self, state: State, seat: int) -> Value | None:
        return Value(string_value="roll")

    def render_state(self, state: State) -> str:
        return f"turn:{state.turn} totals:{list(state.totals)} over:{state.over}"

    def render_command(self, command: Value) -> str:
        return command.string_value

    def render_event(self, event: Value) -> str:
        return str(event.WhichOneof("kind"))

    def determinize(self, view: Value, seat: int, rng: Rng) -> State:
        raise NotImplementedError


ENGINE = DiceRace()

#: The same race under another game id, for tests that need two games (tournaments, leaderboards).
DUEL_ID = "dice_duel"
DUEL = DiceRace()
DUEL.info = dataclasses.replace(DiceRace.info, game_id=DUEL_ID, title="Dice Duel")


def registry() -> Registry:
    return Registry({GAME_ID: ENGINE, DUEL_ID: DUEL})
