"""The engine's fast paths give exactly what the plain definitions give: the dict-backed
`replace`, the fold memo of the last run, values-evolvers, memoised pending, prebuilt events
and the listed commands."""

from __future__ import annotations

import dataclasses
import inspect
import random
from typing import Any

import pytest

from famiglia.engine import Rng, fold
from famiglia.engine.protocol import DecisionKind, Pending
from famiglia.rules.goodcritters import ENGINE
from famiglia.rules.goodcritters import commands as cmd_mod
from famiglia.rules.goodcritters import events as ev
from famiglia.rules.goodcritters import evolve as fold_mod
from famiglia.rules.goodcritters.flow import FLOW
from famiglia.rules.goodcritters.state import State, Step, replace
from famiglia.testing.random_play import play_random

from ._helpers import new_game

OPTIONS = [{}, {"payoff.enabled": "true"}, {"step3_mode": "turns", "payoff.enabled": "true"}]


def test_replace_is_dataclasses_replace_and_refuses_unknown_fields() -> None:
    state = new_game(5)
    fast = replace(state, round=7, boss=2, cards=(1, 2, 3, 4, 5))
    slow = dataclasses.replace(state, round=7, boss=2, cards=(1, 2, 3, 4, 5))
    assert fast == slow and hash(fast) == hash(slow)
    assert type(fast) is State and fast.round == 7
    assert replace(state) == state and replace(state) is not state
    with pytest.raises(TypeError):
        replace(state, no_such_field=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.round = 3  # type: ignore[misc]


@pytest.mark.parametrize("options", OPTIONS)
def test_folding_afresh_gives_the_states_decide_folded(options: dict[str, str]) -> None:
    """The memo returns decide's own states; evolving every event afresh gives equal ones."""
    seen = {"steps": 0}

    def check(before: State, step: object, after: State) -> None:
        events = step.events  # type: ignore[attr-defined]
        state = before
        for event in events:
            state = fold_mod.apply(state, event)
        assert state == after
        seen["steps"] += 1

    play = play_random(ENGINE, 5, 3, options, on_step=check)
    assert seen["steps"] == len(play.steps) > 0
    assert fold(ENGINE, play.events) == play.state


def test_values_evolvers_match_the_event_evolvers() -> None:
    state = new_game(4)
    state = replace(state, committed=(True, False, True, False), changes=(0, 1, 2, 0))
    cases = [
        (ev.threat_placed(1, 3), fold_mod.threat_placed(state, 1, 3)),
        (ev.threat_withdrawn(2), fold_mod.threat_withdrawn(state, 2)),
        (ev.action_card_chosen(0, 4, 2), fold_mod.action_card_chosen(state, 0, 4, 2)),
        (ev.committed(3), fold_mod.committed(state, 3)),
        (ev.action_revealed(1, 3), fold_mod.action_revealed(state, 1, 3)),
        (ev.loot_revealed(state.pile[0]), fold_mod.loot_revealed(state, state.pile[0])),
    ]
    for event, folded in cases:
        assert fold_mod.apply(state, event) == folded, event.WhichOneof("kind")


def test_round_values_evolvers_match_the_event_evolvers() -> None:
    """The evolvers the round's close folds from values (Step 1, Step 4, the vote, the clean-up)."""
    state = new_game(5)
    stash = state.stashes[2]
    state = replace(
        state, table=("L001", "L002", "L003"), assignment=(0, 4, 0), step=Step.ACTIONS,
        threats=(1, 2, -1, 0, 3), cards=(1, 2, 3, 4, 5), committed=(True,) * 5, revealed=(1, 0, 2, 0, 0),
    )
    pairs = [("L001", 0), ("L002", 4), ("L003", 0)]
    cases = [
        (ev.round_started(7, 3, Step.SHOW_LOOT), fold_mod.round_started(state, 7, 3, Step.SHOW_LOOT)),
        (ev.round_started(2, 1, Step.DISTRIBUTE), fold_mod.round_started(state, 2, 1, Step.DISTRIBUTE)),
        (ev.step_started(Step.DISTRIBUTE), fold_mod.step_started(state, Step.DISTRIBUTE, -1)),
        (ev.step_started(Step.THREAT_TURNS, 2), fold_mod.step_started(state, Step.THREAT_TURNS, 2)),
        (ev.actions_locked(), fold_mod.actions_locked(state)),
        (ev.loot_skimmed(3, state.pile[0]), fold_mod.loot_skimmed(state, 3, state.pile[0])),
        (ev.loot_stolen(0, 2, stash[1], 1), fold_mod.loot_stolen(state, 0, 2, stash[1])),
        (ev.loot_stolen(2, 4, "", 2), fold_mod.loot_stolen(state, 2, 4, "")),
        (ev.loot_handed_out(pairs), fold_mod.loot_handed_out(state, pairs)),
        (ev.loot_returned(), fold_mod.loot_returned(state)),
        (ev.boss_changed(4, 1), fold_mod.boss_changed(state, 4)),
        (ev.round_ended(state.round), fold_mod.round_ended(state)),
    ]
    for event, folded in cases:
        assert fold_mod.apply(state, event) == folded, event.WhichOneof("kind")
    assert fold_mod.loot_stolen(state, 0, 2, stash[1]).stashes[2] == tuple(c for c in stash if c != stash[1])
    assert fold_mod.round_ended(state).committed == (False,) * 5


def test_every_state_field_read_can_be_specialised() -> None:
    """CPython specialises `state.x` only if the class holds no `x` of a mutable type (a dataclass
    default is a class attribute): an enum member there made every `state.step` ~4x slower."""
    immutable = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE
    for f in dataclasses.fields(State):
        held = State.__dict__.get(f.name)
        assert held is None or type(held).__flags__ & immutable, f.name
    assert new_game(4).step is Step.SHOW_LOOT or new_game(4).step is Step.DISTRIBUTE


def test_every_per_command_call_can_be_specialised() -> None:
    """CPython 3.11 specialises no call of a function with keyword-only parameters (or `*args`,
    `**kwargs`): the engine methods `play_random` calls before every command must have none.
    `legal_commands`'s protocol `rng` is keyword-only; here it is positional too, the same answer."""
    for name in ("result", "pending", "legal_commands", "decide", "evolve"):
        code = getattr(ENGINE, name).__code__
        assert code.co_kwonlyargcount == 0, name
        assert not code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS), name
    states: list[State] = []
    play_random(ENGINE, 4, 3, {"payoff.enabled": "true"}, on_step=lambda before, step, after: states.append(before))
    for i, state in enumerate(states[::7]):
        for seat in range(4):
            by_keyword = ENGINE.legal_commands(state, seat, 16, rng=random.Random(i))
            positional = ENGINE.legal_commands(state, seat, 16, random.Random(i))
            assert by_keyword == positional and type(by_keyword) is type(positional)


def test_sampled_splits_are_the_plain_draws() -> None:
    """`sample_splits` (fixed splits memoised, three digits a division) draws what the plain
    definition draws: the timeout deal, everything to each seat, then one uniform number below
    N^k per split read digit by digit, lowest first."""
    from famiglia.rules.goodcritters.legal import sample_splits

    def plain(state: State, count: int) -> list[tuple[int, ...]]:
        n, k, boss = state.seats, len(state.table), state.boss
        out = [tuple((boss + 1 + i) % n for i in range(k))] + [((boss + i) % n,) * k for i in range(n)]
        if len(out) >= count or k == 0:
            return out[:count]
        rng = Rng(state.round * 7919 + len(state.pile) * 31 + boss)
        for _ in range(4 * count):
            code, split = rng.randrange(n**k), []
            for _ in range(k):
                code, seat = divmod(code, n)
                split.append(seat)
            if tuple(split) not in out:
                out.append(tuple(split))
                if len(out) >= count:
                    break
        return out

    checked = 0
    for seats in (4, 6, 8):
        state = new_game(seats, seed=seats)
        for k in (0, 1, 2, 3, 4, 7, 10, 13):
            for boss in range(seats):
                table = tuple(f"L{i:03d}" for i in range(1, k + 1))
                s = replace(state, table=table, boss=boss, round=k + boss)
                for count in (1, seats + 1, 12, 30):
                    assert sample_splits(s, count) == plain(s, count), (seats, k, boss, count)
                    checked += 1
    assert checked > 300


def test_prebuilt_events_equal_fresh_ones() -> None:
    a, b = ev.action_card_chosen(2, 5, 3), ev.action_card_chosen(2, 5, 3)
    assert a is b  # shared, read-only
    fresh = ev.Event()
    body: Any = fresh.action_card_chosen
    body.seat, body.card, body.choices = 2, 5, 3
    assert a == fresh


@pytest.mark.parametrize("options", OPTIONS)
def test_memoised_pending_matches_the_step_table(options: dict[str, str]) -> None:
    def expected(state: State) -> list[Pending]:
        row = FLOW.get(state.step)
        if row is None:
            return []
        timeout = float(row.timeout(state.config))
        return [Pending(s, row.kind, row.label, False, timeout) for s in row.actors(state)]

    def check(before: State, step: object, after: State) -> None:
        assert ENGINE.pending(before) == expected(before)
        assert ENGINE.pending(after) == expected(after)

    play_random(ENGINE, 6, 11, options, on_step=check)
    assert all(p.kind in DecisionKind for p in ENGINE.pending(new_game(4)))


@pytest.mark.parametrize("options", OPTIONS)
def test_every_listed_command_is_accepted_and_lists_are_fresh(options: dict[str, str]) -> None:
    rng = random.Random(5)

    def check(before: State, step: object, after: State) -> None:
        for seat in range(before.seats):
            listed = ENGINE.legal_commands(before, seat, limit=64)
            assert listed is not ENGINE.legal_commands(before, seat, limit=64)  # callers may keep it
            for command in rng.sample(listed, min(3, len(listed))):
                ENGINE.decide(before, seat, command, Rng(1))

    play_random(ENGINE, 4, 2, options, on_step=check)


@pytest.mark.parametrize("options", OPTIONS)
def test_listed_commands_decide_as_their_copies(options: dict[str, str]) -> None:
    """decide reads a shared listed command from its plain fields; a fresh copy of the same
    message (read from the message itself) gives the same events and states."""
    seen = {"listed": 0}

    def check(before: State) -> None:
        for seat in range(before.seats):
            for command in ENGINE.legal_commands(before, seat, limit=64):
                copy = type(command)()
                copy.CopyFrom(command)
                seen["listed"] += id(command) in cmd_mod.LISTED
                fast = ENGINE.decide(before, seat, command, Rng(4))
                plain = ENGINE.decide(before, seat, copy, Rng(4))
                assert fast == plain
                assert fold(ENGINE, fast, before) == fold(ENGINE, plain, before)

    states: list[State] = []
    play_random(ENGINE, 4, 6, options, on_step=lambda b, st, a: states.append(b))
    for state in states[:: max(1, len(states) // 40)]:
        check(state)
    assert seen["listed"] > 50


def test_wire_built_splits_equal_messages_built_field_by_field() -> None:
    pairs = [("A1", 0), ("B2", 3), ("C3", 7), ("Z" * 200, 300), ("", 1)]
    command = cmd_mod.Command()
    event = ev.Event()
    handed = ev.Event()
    event.loot_assigned.SetInParent()
    handed.loot_handed_out.SetInParent()
    for card, seat in pairs:
        for field in (command.assign_loot.assignments, event.loot_assigned.assignments,
                      handed.loot_handed_out.assignments):
            item = field.add()
            item.card, item.seat = card, seat
    assert cmd_mod.assign_loot(pairs) == command
    assert cmd_mod.assign_loot(iter(pairs)) == command
    assert ev.loot_assigned(pairs) == event and ev.loot_handed_out(pairs) == handed
    assert cmd_mod.assign_loot([]) == cmd_mod.Command()
    assert ev.loot_assigned([]).WhichOneof("kind") == "loot_assigned"


QUICK_OPTIONS = [{}, {"step3_mode": "turns"}, {"payoff.enabled": "true", "step3_card_choice_limit": "2"}]


@pytest.mark.parametrize("options", QUICK_OPTIONS)
def test_quick_decisions_decide_as_the_general_path(options: dict[str, str]) -> None:
    """A quick decider answers exactly when the general decider accepts without ending a step,
    with the same events and states; otherwise it leaves the command to the general path."""
    from famiglia.engine import RuleViolation
    from famiglia.rules.goodcritters.decide import DECIDERS
    from famiglia.rules.goodcritters.decide.quick import QUICK
    from famiglia.rules.goodcritters.emitter import Emitter

    seen = {"quick": 0, "general": 0, "refused": 0}

    def general(state: State, seat: int, kind: str, fields: object) -> list[Any] | None:
        em = Emitter(state, Rng(3))
        try:
            DECIDERS[kind](em, seat, fields)
        except RuleViolation:
            return None
        return em.done()

    def check(before: State, step: object, after: State) -> None:
        listed = [entry for entry in cmd_mod.LISTED.values() if entry[1] in QUICK]  # as listed so far
        for seat in range(-1, before.seats + 1):
            for _command, kind, fields in listed:
                quick = QUICK[kind](before, seat, fields)
                plain = general(before, seat, kind, fields) if 0 <= seat < before.seats else None
                if quick is None:
                    seen["general" if plain else "refused"] += 1
                    continue
                seen["quick"] += 1
                assert plain is not None and plain == quick and len(quick) <= 2, (kind, seat)
                # folded through the memo the quick decider left, and afresh event by event
                memo, fresh = before, before
                for event in quick:
                    memo = ENGINE.evolve(memo, event)
                    fresh = fold_mod.apply(fresh, event)
                    assert memo == fresh

    play_random(ENGINE, 5, 4, options, on_step=check)
    assert seen["quick"] > 100 and seen["refused"] > 100


def test_listed_splits_are_the_sampled_assignments() -> None:
    """The Boss's listing (built from seat tuples and per-card wire rows) lists exactly
    `assign_loot(pairs)` for `sample_assignments`, and deciding a listed split is deciding
    its copy."""
    from famiglia.rules.goodcritters.legal import ASSIGNMENT_SAMPLE, sample_assignments

    checked = {"listings": 0}

    def check(before: State, step: object, after: State) -> None:
        if before.step is not Step.DISTRIBUTE:
            return
        for limit in (None, 64, 10):
            listed = ENGINE.legal_commands(before, before.boss, limit=limit)
            count = (
                max(ASSIGNMENT_SAMPLE, before.seats + 4)
                if limit is None
                else max(1, min(before.seats + 4, limit // 2))
            )
            expected = [cmd_mod.assign_loot(pairs) for pairs in sample_assignments(before, count)]
            assert listed[: len(expected)] == expected
        for command in listed[: len(expected)]:
            copy = cmd_mod.Command()
            copy.CopyFrom(command)
            fast = ENGINE.decide(before, before.boss, command, Rng(2))
            plain = ENGINE.decide(before, before.boss, copy, Rng(2))
            assert fast == plain and fold(ENGINE, fast, before) == fold(ENGINE, plain, before)
        checked["listings"] += 1

    for seats in (4, 8):
        play_random(ENGINE, seats, 5, on_step=check)
    assert checked["listings"] > 5


def test_visibility_reads_the_body_only_of_kinds_that_can_be_secret() -> None:
    """`visibility` answers PUBLIC for every kind outside its short list without reading the
    event's body; each kind on the list can be private (or server-only) for some body."""
    from famiglia.rules.goodcritters.view import _NOT_PUBLIC_KINDS

    kinds = [f.name for f in ev.Event.DESCRIPTOR.oneofs_by_name["kind"].fields]
    for kind in kinds:
        event = ev.Event()
        getattr(event, kind).SetInParent()
        if kind not in _NOT_PUBLIC_KINDS:
            assert ENGINE.visibility(event).kind.name == "PUBLIC", kind
    secret = [
        ev.pile_stacked(["L001"], 0),
        ev.stash_dealt(1, ["L001"]),
        ev.action_card_chosen(1, 3, 1),
        ev.loot_skimmed(1, "L001"),
        ev.loot_stolen(0, 1, "L001", 1),
        ev.gift_given(0, 1, ["L001"], 0, False),
        ev.offer_made(0, 1, 1, ["L001"], 0, 3),
        ev.offer_resolved(0, 1, 1, ["L001"], 0, 2),
    ]
    assert {e.WhichOneof("kind") for e in secret} == _NOT_PUBLIC_KINDS
    for event in secret:
        assert ENGINE.visibility(event).kind.name != "PUBLIC", event.WhichOneof("kind")


def test_a_state_made_by_its_init_keeps_a_combined_dict() -> None:
    """A split (key-sharing) instance dict makes every field read ~3x slower; a State made by
    `State(...)` (setup's fold, a sampled world) copies its fields into a combined one."""
    import sys

    state = new_game(5)
    made = State(**state.__dict__)
    assert made == state and hash(made) == hash(state)
    for s in (state, made):
        assert sys.getsizeof(s.__dict__) == sys.getsizeof(dict(s.__dict__))
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.round = 2  # type: ignore[misc]
