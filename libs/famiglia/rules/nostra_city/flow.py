"""The phase table (STYLE: the flow is configuration).

Each turn phase names its decision kind, its commands and the phase that follows;
each in-turn choice names its command and clock. `pending()` and `legal_commands()`
read these rows instead of repeating `if phase == ...` chains.
"""

from __future__ import annotations

from dataclasses import dataclass

from famiglia.engine.protocol import DecisionKind, Pending

from .queries import can_bid, can_corrupt, cash_in_options, has_power
from .state import Phase, State


@dataclass(frozen=True, slots=True)
class TurnRow:
    kind: DecisionKind
    action: str  # the phase's action command (NC-R04)
    next: Phase
    rule: str


@dataclass(frozen=True, slots=True)
class ChoiceRow:
    kind: DecisionKind
    command: str
    rule: str


# NC-R01/R02: Business, Meeting, Trial turns; bids and Corruption are secret (NC-H04, NC-H10).
TURNS: dict[Phase, TurnRow] = {
    Phase.BUSINESS: TurnRow(DecisionKind.TURN, "cash_in", Phase.MEETING, "NC-B01"),
    Phase.MEETING: TurnRow(DecisionKind.SECRET_CHOICE, "place_bid", Phase.RESOLUTION, "NC-M01"),
    Phase.TRIAL: TurnRow(DecisionKind.SECRET_CHOICE, "corrupt", Phase.RECEPTION, "NC-T01"),
}
TURN_COMMANDS = frozenset({"cash_in", "place_bid", "corrupt", "play_vendetta", "end_turn"})

CHOICES: dict[str, ChoiceRow] = {
    "distribute": ChoiceRow(DecisionKind.DISTRIBUTION, "distribute_notes", "NC-D05"),
    "keep": ChoiceRow(DecisionKind.SECRET_CHOICE, "keep_notes", "NC-D09"),
    "consigliere": ChoiceRow(DecisionKind.TURN, "assign_title", "NC-D10"),
    "primo_capo": ChoiceRow(DecisionKind.TURN, "assign_title", "NC-D11"),
    "rage": ChoiceRow(DecisionKind.RESPONSE, "play_rage", "NC-D06"),
}


def clockwise_from(first: int, seats: int) -> tuple[int, ...]:
    """NC-S02/R02: clockwise order starting at `first`."""
    return tuple((first + i) % seats for i in range(seats))


def phase_order(state: State, phase: Phase) -> tuple[int, ...]:
    """NC-R03 (holder of the First Player card at the phase's start), NC-W109 (W09 meets last)."""
    order = clockwise_from(state.first_player, state.seats)
    if phase is Phase.MEETING:
        last = [s for s in order if has_power(state.players[s], "meets_last")]
        order = tuple(s for s in order if s not in last) + tuple(last)
    return order


def can_act(state: State, seat: int) -> bool:
    """Whether the phase action is possible for `seat` now (NC-R05, NC-X05, NC-X06)."""
    if state.phase is Phase.BUSINESS:
        return bool(cash_in_options(state, seat))
    if state.phase is Phase.MEETING:
        return can_bid(state, seat)
    if state.phase is Phase.TRIAL:
        return can_corrupt(state, seat)
    return False


def turn_ends_itself(state: State, seat: int) -> bool:
    """NC-D03: no command but ending the turn, and no Vendetta card in hand (public: hand size)."""
    return not state.players[seat].hand and not can_act(state, seat)


def clock_key(state: State, pending: Pending) -> str:
    """The engine's `clock_key` (protocol.clock_key): a phase turn has one clock of
    `turn_s` (NC-D02), which the seat's own cash-ins, bids, Revenge plays and Corruptions do not
    restart; it stands still while a choice inside the turn (`choice_s`, its own clock) is
    asked. (month, phase, turn) names one turn: each phase comes once a month."""
    if state.choice is not None or pending.seat != state.turn_seat:
        return ""
    return f"{state.month}:{_PHASE_VALUES[state.phase]}:{state.turn}"


_PHASE_VALUES = {phase: phase.value for phase in Phase}
"""Each phase's value, for `clock_key`, asked at every command: an enum's `value` is a property,
two Python calls a read."""


def pending(state: State) -> list[Pending]:
    phase = state.phase
    if phase is _OVER:
        return []
    choice = state.choice
    if choice is not None:
        return [_asked(choice.seat, CHOICES[choice.kind].kind, choice.kind, state.config.choice_timeout)]
    seat = state.turn_seat
    if seat < 0 or state.draws:
        return []
    return [_asked(seat, TURNS[phase].kind, _PHASE_VALUES[phase], state.config.turn_timeout)]


_OVER = Phase.OVER  # (read once: an enum's member read from its class costs a Python call)

_ASKED: dict[tuple[int, DecisionKind, str, float], Pending] = {}
"""(seat, kind, label, clock) -> the Pending record with those fields"""
_ASKED_MAX = 1024


def _asked(seat: int, kind: DecisionKind, label: str, timeout: float) -> Pending:
    """The Pending record of these fields, made once: records are read-only, and `pending` is
    asked at every command (the turn clocks, the bots' dispatcher), where building a frozen
    record cost more than the rest of it."""
    key = (seat, kind, label, timeout)
    found = _ASKED.get(key)
    if found is None:
        if len(_ASKED) >= _ASKED_MAX:  # clocks are options: bounded whatever the matches ask
            _ASKED.clear()
        found = _ASKED[key] = Pending(seat, kind, label, timeout_seconds=timeout)
    return found
