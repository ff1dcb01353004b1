"""Building GoodCritters tables by hand and acting on them (pure, no services)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from famiglia.engine import MatchConfig, Rng, fold
from famiglia.rules.goodcritters import ENGINE
from famiglia.rules.goodcritters import commands as C
from famiglia.rules.goodcritters.data import FUZZ, GUARD, ROB, SKIM, VOTE_NO, VOTE_YES
from famiglia.rules.goodcritters.events import Event
from famiglia.rules.goodcritters.state import State, Step, replace

__all__ = ["C", "ENGINE", "FUZZ", "GUARD", "ROB", "SKIM", "VOTE_NO", "VOTE_YES", "State", "Step"]


def new_game(seats: int = 4, seed: int = 1, options: Mapping[str, str] | None = None) -> State:
    return fold(ENGINE, ENGINE.setup(MatchConfig(seats, dict(options or {})), seed))


def loot(*numbers: int) -> tuple[str, ...]:
    """Card ids by number: loot(1, 36) == ("L001", "L036")."""
    return tuple(f"L{n:03d}" for n in numbers)


def act(state: State, seat: int, command: object, seed: int = 0) -> tuple[State, list[Event]]:
    events = ENGINE.decide(state, seat, command, Rng(seed))
    return fold(ENGINE, events, state), events


def kinds(events: Sequence[Event]) -> list[str]:
    return [e.WhichOneof("kind") for e in events]


def of_kind(events: Sequence[Event], kind: str) -> list[object]:
    return [getattr(e, kind) for e in events if e.WhichOneof("kind") == kind]


def table_state(
    seats: int = 4,
    *,
    boss: int = 0,
    table: Sequence[str] = (),
    pile: Sequence[str] | None = None,
    stashes: Sequence[Sequence[str]] | None = None,
    options: Mapping[str, str] | None = None,
    payoff_cards: Sequence[int] | None = None,
) -> State:
    """A table in Step 2 with exactly these cards (cards not named are simply out of play)."""
    state = new_game(seats, 1, options)
    if stashes is None:
        stashes = [loot(1 + i, 36 + i, 71 + i, 106 + i) for i in range(seats)]
    if pile is None:
        pile = loot(*range(20, 30)) + (FUZZ,) + loot(*range(50, 60))
    if not table:
        table = loot(*range(60, 60 + seats + 2))
    return replace(
        state,
        boss=boss,
        table=tuple(table),
        pile=tuple(pile),
        pile_start=len(pile),
        stashes=tuple(tuple(s) for s in stashes),
        step=Step.DISTRIBUTE,
        round=1,
        fuzz_out=FUZZ not in pile,
        payoff_cards=tuple(payoff_cards) if payoff_cards is not None else state.payoff_cards,
    )


def assign(state: State, seats: Sequence[int] | None = None) -> tuple[State, list[Event]]:
    """The Boss assigns the table cards to these seats in table order (default: all to the Boss)."""
    seats = seats if seats is not None else [state.boss] * len(state.table)
    return act(state, state.boss, C.assign_loot(zip(state.table, seats, strict=True)))


def play_step3(
    state: State,
    cards: Mapping[int, int] | Sequence[int],
    threats: Mapping[int, int] | None = None,
    seed: int = 0,
) -> tuple[State, list[Event]]:
    """Threats first, then every seat chooses and commits its card; Step 3 closes."""
    if not isinstance(cards, Mapping):
        cards = dict(enumerate(cards))
    events: list[Event] = []
    for seat, target in (threats or {}).items():
        state, evs = act(state, seat, C.place_threat(target), seed)
        events += evs
    for seat in range(state.seats):
        state, evs = act(state, seat, C.choose_action_card(cards[seat], commit=True), seed)
        events += evs
    return state, events


def round_with(
    cards: Sequence[int],
    threats: Mapping[int, int] | None = None,
    assignment: Sequence[int] | None = None,
    seed: int = 0,
    **kwargs: object,
) -> tuple[State, State, list[Event]]:
    """A whole round from a hand-built Step 2: (state after Step 2, final state, Step 3+4 events)."""
    state = table_state(len(cards), **kwargs)  # type: ignore[arg-type]
    state, _ = assign(state, assignment)
    after, events = play_step3(state, cards, threats, seed)
    return state, after, events
