"""The step table (GC-R01, GC-R06, GC-D01 to GC-D07): who acts in each step, the kind of
decision, its clock, and which commands the step allows.

Step 1 (Show the Loot) and Step 4 (Resolve Actions) have no row: nobody decides there, and
`decide` runs them to the end inside the command that leads into them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from famiglia.engine import DecisionKind, Pending

from .config import Config
from .state import ACTIONS, CARD_CHOICE, DISTRIBUTE, THREAT_TURNS, State, Step

# Command kinds (the Command oneof names).
ASSIGN_LOOT = "assign_loot"
PLACE_THREAT = "place_threat"
WITHDRAW_THREAT = "withdraw_threat"
CHOOSE_ACTION_CARD = "choose_action_card"
CHANGE_ACTION_CARD = "change_action_card"
COMMIT = "commit"
END_TURN = "end_turn"
GIVE_GIFT = "give_gift"
MAKE_OFFER = "make_offer"
WITHDRAW_OFFER = "withdraw_offer"

PUBLIC_CHANGES = frozenset({PLACE_THREAT, WITHDRAW_THREAT, GIVE_GIFT, MAKE_OFFER, WITHDRAW_OFFER})
"""GC-D09: the moves that count against the public change cap and release commitments."""

OPTIONAL = PUBLIC_CHANGES | {CHANGE_ACTION_CARD}
"""Moves that never advance the game (DESIGN: capped, never the only reason to be pending)."""


@dataclass(frozen=True, slots=True)
class StepRow:
    kind: DecisionKind
    label: str
    timeout: Callable[[Config], int]
    actors: Callable[[State], tuple[int, ...]]
    """Seats that must decide now (GC-D01)."""
    commands: frozenset[str]


def _boss(s: State) -> tuple[int, ...]:
    return (s.boss,)


def _uncommitted(s: State) -> tuple[int, ...]:
    return tuple(i for i in range(s.seats) if not s.committed[i])


def _turn(s: State) -> tuple[int, ...]:
    return (s.turn,)


FLOW: dict[Step, StepRow] = {
    # GC-A01 to GC-A03, GC-D02; gifts GC-P06
    Step.DISTRIBUTE: StepRow(
        DecisionKind.DISTRIBUTION,
        "assign_loot",
        lambda c: c.timeout_distribution,
        _boss,
        frozenset({ASSIGN_LOOT, GIVE_GIFT}),
    ),
    # GC-D03 to GC-D05, GC-D09, GC-D10; offers and gifts GC-P06, GC-P08
    Step.ACTIONS: StepRow(
        DecisionKind.SECRET_CHOICE,
        "choose_action",
        lambda c: c.timeout_step3,
        _uncommitted,
        frozenset(
            {
                PLACE_THREAT,
                WITHDRAW_THREAT,
                CHOOSE_ACTION_CARD,
                CHANGE_ACTION_CARD,
                COMMIT,
                GIVE_GIFT,
                MAKE_OFFER,
                WITHDRAW_OFFER,
            }
        ),
    ),
    # GC-D06, Step 3a: one turn each, the Boss first
    Step.THREAT_TURNS: StepRow(
        DecisionKind.TURN,
        "threat_turn",
        lambda c: c.timeout_turn,
        _turn,
        frozenset({PLACE_THREAT, WITHDRAW_THREAT, END_TURN, GIVE_GIFT, MAKE_OFFER, WITHDRAW_OFFER}),
    ),
    # GC-D06, Step 3b: cards only
    Step.CARD_CHOICE: StepRow(
        DecisionKind.SECRET_CHOICE,
        "choose_action",
        lambda c: c.timeout_choose,
        _uncommitted,
        frozenset({CHOOSE_ACTION_CARD, CHANGE_ACTION_CARD, COMMIT}),
    ),
}


def clock_key(state: State, pending: Pending) -> str:
    """The engine's `clock_key` (protocol.clock_key): Step 3 has one deadline for every seat,
    from the step's start, never extended (GC-D05; Step 3b's the same, GC-D06), so a seat asked
    again after another's public change took its commitment back gets what is left of it; a
    Step 3a turn and the Boss's Step 2 each have their own clock, which the seat's threat moves,
    offers and gifts do not restart (GC-D02, GC-D06). A round has each step at most once."""
    step = state.step
    if step is ACTIONS or step is CARD_CHOICE:
        return f"{state.round}:{_STEP_NAMES[step]}"
    if step is THREAT_TURNS:
        return f"{state.round}:{_STEP_NAMES[step]}:{state.turn}"
    if step is DISTRIBUTE:
        return f"{state.round}:{_STEP_NAMES[step]}:{state.boss}"
    return ""


_STEP_NAMES = {step: step.name for step in Step}
"""Each step's name, for `clock_key`, asked of every timed decision at every command: an enum's
`name` is a property, two Python calls a read."""


def step3_opening(config: Config) -> Step:
    """GC-D06: the step Step 3 opens with."""
    return Step.THREAT_TURNS if config.turn_mode else Step.ACTIONS


_TABLES: dict[tuple[Step, int], tuple[Config, dict[object, tuple[Pending, ...]]]] = {}
"""(step, id of the Config) -> (that Config, {who acts: the Pending records}). The entry holds its
Config, so the id is that Config's own; hashing a Config itself would hash all its fields."""
_LAST_TABLE: tuple[object, object, dict[object, tuple[Pending, ...]]] = (None, None, {})
"""The table of the last step asked about: a match stays in one step for many commands."""
_TABLE_MAX = 1024


def pending(state: State) -> tuple[Pending, ...]:
    """GC-D01: who must decide now, as Pending records. Memoised by what they depend on: the
    step and the Config (the step's clock), then who acts in it (the commitments in Step 3, the
    turn in Step 3a, the Boss in Step 2); the shared tuples are read-only."""
    step = state.step
    return _pending_of(state, step, _who_acts(state, step))


def _who_acts(state: State, step: Step) -> object:
    """What the pending records of `step` depend on beyond the step and the Config."""
    if step is ACTIONS or step is CARD_CHOICE:
        return state.committed
    if step is THREAT_TURNS:
        return state.turn
    return state.boss


def _pending_of(state: State, step: Step, who: object) -> tuple[Pending, ...]:
    config = state.config
    last = _LAST_TABLE
    table = last[2] if last[0] is step and last[1] is config else _table(step, config)
    found = table.get(who)
    return found if found is not None else _pending(state, table, who)


def pending_list(state: State) -> list[Pending]:
    """`pending` as the fresh list the engine contract returns (the engine's `pending`), asked
    before every command: the last answer reused while who acts is the very same object (a card
    choice keeps the commitments tuple, every public change shares the all-uncommitted one), so
    the tuple is not hashed again. `_who_acts` and `_pending_of` written out (two calls saved per
    command: most commands change who acts, so the table is looked up for most of them)."""
    step = state.step
    if step is ACTIONS or step is CARD_CHOICE:
        who: object = state.committed
    elif step is THREAT_TURNS:
        who = state.turn
    else:
        who = state.boss
    last = _LAST_WHO[0]
    config = state.config
    if last[0] is who and last[1] is step and last[2] is config:
        return list(last[3])
    tables = _LAST_TABLE
    table = tables[2] if tables[0] is step and tables[1] is config else _table(step, config)
    found = table.get(who)
    if found is None:
        found = _pending(state, table, who)
    _LAST_WHO[0] = (who, step, config, found)
    return list(found)


_LAST_WHO: list[tuple[object, object, object, tuple[Pending, ...]]] = [(None, None, None, ())]
"""[(who acts, step, Config, their Pending records)] of the last `pending_list`: a list, so it is
set by index (a module attribute set is not specialised by CPython and costs several times more)."""


def _table(step: Step, config: Config) -> dict[object, tuple[Pending, ...]]:
    global _LAST_TABLE
    key = (step, id(config))
    hit = _TABLES.get(key)
    if hit is None or hit[0] is not config:
        if len(_TABLES) >= _TABLE_MAX:
            _TABLES.clear()
        hit = _TABLES[key] = (config, {})
    _LAST_TABLE = (step, config, hit[1])
    return hit[1]


def _pending(state: State, table: dict[object, tuple[Pending, ...]], who: object) -> tuple[Pending, ...]:
    row = FLOW.get(state.step)
    if row is None:
        found: tuple[Pending, ...] = ()
    else:
        timeout = float(row.timeout(state.config))
        found = tuple(Pending(seat, row.kind, row.label, False, timeout) for seat in row.actors(state))
    if len(table) >= _TABLE_MAX:
        table.clear()
    table[who] = found
    return found
