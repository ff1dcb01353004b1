"""Turn clocks and the count of clocks run out in a row, over seat changes (`seat_left`,
`seat_returned`): a seat the bots play has no clock, and its player's clock starts afresh when
it takes the seat back, on a clock of its own or a named one (`TurnClocks.returned`)."""

from __future__ import annotations

from typing import Any

from famiglia.clocks import TurnClocks, is_clock_default
from famiglia.engine import DecisionKind, Pending


class _Info:
    optional_commands: frozenset[str] = frozenset()
    command_type = None


class _OwnClocks:
    """A stub engine: `state` is (the seat asked, its clock key), one decision of 60 s, each on
    a clock of its own."""

    info = _Info()

    def pending(self, state: Any) -> list[Pending]:
        return [Pending(state[0], DecisionKind.TURN, "turn", timeout_seconds=60.0)]


class _NamedClocks(_OwnClocks):
    """The same, each decision on the named clock its state gives (a turn's, NC-D02)."""

    def clock_key(self, state: Any, pending: Pending) -> str:
        return state[1]


def test_a_returned_seats_own_clock_runs_from_its_return() -> None:
    engine = _OwnClocks()
    clocks = TurnClocks(frozenset({0, 1}))
    clocks.note(engine, None, -1, "", 1_000_000)  # the server asks seat 0 at t=1000 s
    assert clocks.deadlines(engine, (0, "")) == {0: 1060.0}
    clocks.returned(engine, (0, ""), 0, 1_050_000)
    assert clocks.deadlines(engine, (0, "")) == {0: 1110.0}
    clocks.note(engine, (0, ""), 1, "c1", 1_055_000)  # another seat's move: its deadline stands
    assert clocks.deadlines(engine, (0, "")) == {0: 1110.0}


def test_a_returned_seat_on_a_named_clock_gets_it_afresh_until_the_key_changes() -> None:
    engine = _NamedClocks()
    clocks = TurnClocks(frozenset({0, 1}))
    clocks.note(engine, None, -1, "", 1_000_000)
    assert clocks.deadlines(engine, (0, "turn-1")) == {0: 1060.0}
    clocks.returned(engine, (0, "turn-1"), 0, 1_030_000)
    assert clocks.deadlines(engine, (0, "turn-1")) == {0: 1090.0}
    clocks.note(engine, (0, "turn-1"), 0, "choice", 1_040_000)  # a choice inside its turn: the key goes on
    assert clocks.deadlines(engine, (0, "turn-1")) == {0: 1090.0}
    clocks.note(engine, (0, "turn-1"), 0, "end-turn", 1_045_000)  # its next turn: a clock of its own
    assert clocks.deadlines(engine, (0, "turn-2")) == {0: 1105.0}
    assert clocks.fresh == {}


def test_a_clock_default_is_known_by_its_command_id() -> None:
    assert is_clock_default("clock:m1:12:0")
    assert not is_clock_default("bot:m1:12:0") and not is_clock_default("c12")
