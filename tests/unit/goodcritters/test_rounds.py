"""Rounds and steps (GC-R01 to GC-R08)."""

from __future__ import annotations

from famiglia.rules.goodcritters.state import Step

from ._helpers import (
    FUZZ,
    GUARD,
    SKIM,
    VOTE_NO,
    VOTE_YES,
    assign,
    kinds,
    loot,
    new_game,
    of_kind,
    play_step3,
    round_with,
    table_state,
)


def test_gc_r01_a_round_runs_step_1_to_step_4_then_the_vote() -> None:
    """GC-R01: A round runs step 1 to step 4 then the vote."""
    _, after, events = round_with([VOTE_YES] * 4)
    k = kinds(events)
    assert k.index("actions_locked") < k.index("action_revealed") < k.index("vote_counted")
    assert k.index("vote_counted") < k.index("round_ended") < k.index("round_started")
    started = of_kind(events, "round_started")[-1]
    assert started.step == Step.SHOW_LOOT
    assert after.step is Step.DISTRIBUTE and after.round == 2


def test_gc_r02_after_a_failed_vote_the_next_round_starts_at_step_2() -> None:
    """GC-R02: After a failed vote the next round starts at step 2."""
    before, after, events = round_with([VOTE_NO] * 4)
    started = of_kind(events, "round_started")[-1]
    assert started.step == Step.DISTRIBUTE
    # the returned loot plus 2 extra cards, no Step 1 reveal of N + 2
    assert len(after.table) == len(before.table) + 2
    assert after.step is Step.DISTRIBUTE


def test_gc_r02_after_a_tied_vote_the_next_round_starts_at_step_1() -> None:
    """GC-R02: After a tied vote the next round starts at step 1."""
    _, after, events = round_with([VOTE_YES, VOTE_NO, VOTE_YES, VOTE_NO])
    assert of_kind(events, "round_started")[-1].step == Step.SHOW_LOOT
    assert len(after.table) == 6


def test_gc_r03_rounds_are_counted_and_a_step_2_round_counts() -> None:
    """GC-R03: Rounds are counted and a step 2 round counts."""
    before, after, _ = round_with([VOTE_NO] * 4)
    assert after.round == before.round + 1
    state, _ = assign(after)
    state, _ = play_step3(state, [VOTE_YES] * 4)
    assert state.round == before.round + 2


def test_gc_r04_step_1_shows_n_plus_2_cards_one_at_a_time() -> None:
    """GC-R04: Step 1 shows n plus 2 cards one at a time."""
    for seats in (4, 8):
        state = new_game(seats, seed=3)
        assert len(state.table) == seats + 2
    _, after, events = round_with([VOTE_YES] * 4)
    shown = of_kind(events, "loot_revealed")
    assert len(shown) == 6
    assert tuple(c.card for c in shown) == after.table


def test_gc_r04_the_fuzz_in_step_1_stops_the_reveal() -> None:
    """GC-R04: The fuzz in step 1 stops the reveal."""
    pile = loot(20, 21) + (FUZZ,) + loot(22, 23, 24, 25)
    _, after, events = round_with([VOTE_YES] * 4, pile=pile)
    assert [c.card for c in of_kind(events, "loot_revealed")] == list(loot(20, 21))
    assert after.over and after.pile == loot(22, 23, 24, 25)


def test_gc_r05_table_order_is_reveal_order_and_returned_loot_comes_first() -> None:
    """GC-R05: Table order is reveal order and returned loot comes first."""
    table = loot(61, 62, 63, 64, 65, 66)
    pile = loot(20, 21, 22) + (FUZZ,)
    _, after, _ = round_with([VOTE_NO] * 4, table=table, pile=pile)
    assert after.table == table + loot(20, 21)


def test_gc_r06_steps_follow_each_other() -> None:
    """GC-R06: Steps follow each other."""
    state = table_state()
    assert state.step is Step.DISTRIBUTE
    state, events = assign(state)
    assert of_kind(events, "step_started")[-1].step == Step.ACTIONS
    assert state.step is Step.ACTIONS
    state, events = play_step3(state, [VOTE_YES] * 4)
    assert "actions_locked" in kinds(events)
    # Step 4 ended once every card was revealed
    assert len(of_kind(events, "action_revealed")) == 4


def test_gc_r07_clean_up_returns_cards_markers_and_tokens() -> None:
    """GC-R07: Clean up returns cards markers and tokens."""
    _, after, _ = round_with([VOTE_YES, VOTE_YES, SKIM, GUARD], threats={0: 1, 2: 3})
    assert after.threats == (-1, -1, -1, -1)
    assert after.cards == (0, 0, 0, 0) and after.revealed == (0, 0, 0, 0)
    assert after.choices == (0, 0, 0, 0) and after.changes == (0, 0, 0, 0)
    assert after.offers == ()


def test_gc_r08_the_end_of_the_round_runs_in_order() -> None:
    """GC-R08: The end of the round runs in order."""
    _, _, events = round_with([VOTE_NO, VOTE_NO, VOTE_YES, VOTE_YES, VOTE_NO])
    k = kinds(events)
    order = ["vote_counted", "loot_returned", "boss_changed", "loot_revealed", "round_ended", "round_started"]
    positions = [k.index(x, k.index("vote_counted")) for x in order]
    assert positions == sorted(positions)


def test_gc_r08_a_skimmed_fuzz_ends_the_game_after_the_clean_up() -> None:
    """GC-R08: A skimmed fuzz ends the game after the clean up."""
    pile = (FUZZ,) + loot(20, 21)
    _, after, events = round_with([SKIM, VOTE_YES, VOTE_YES, VOTE_YES], pile=pile)
    k = kinds(events)
    assert k.index("round_ended") < k.index("game_ended")
    assert "round_started" not in k[k.index("round_ended") :]
    assert after.over
