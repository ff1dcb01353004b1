"""Edge cases (GC-X01 to GC-X22)."""

from __future__ import annotations

from dataclasses import replace as dc_replace

from famiglia.rules.goodcritters.result import scores
from famiglia.rules.goodcritters.state import Step

from ._helpers import (
    ENGINE,
    FUZZ,
    GUARD,
    ROB,
    SKIM,
    VOTE_NO,
    VOTE_YES,
    C,
    act,
    assign,
    kinds,
    loot,
    of_kind,
    play_step3,
    round_with,
    table_state,
)

PAYOFF = {"payoff.enabled": "true"}


def test_gc_x01_the_boss_may_keep_everything_or_give_it_all_away() -> None:
    """GC-X01: The boss may keep everything or give it all away."""
    for seats in ([0] * 6, [3] * 6):
        before, after, _ = round_with([VOTE_YES] * 4, assignment=seats)
        assert set(before.table) <= set(after.stashes[seats[0]])


def test_gc_x02_mutual_robbers_resolve_in_reveal_order() -> None:
    """GC-X02: Mutual robbers resolve in reveal order."""
    stashes = [loot(1), loot(2), loot(3), loot(4)]
    _, after, events = round_with([VOTE_YES, ROB, ROB, VOTE_YES], threats={1: 2, 2: 1}, stashes=stashes)
    stolen = of_kind(events, "loot_stolen")
    assert [(s.thief, s.victim, s.card) for s in stolen] == [(1, 2, "L003"), (2, 1, stolen[1].card)]
    assert stolen[1].card in ("L002", "L003")  # may be the card just stolen


def test_gc_x03_several_robbers_against_one_guard() -> None:
    """GC-X03: Several robbers against one guard."""
    stashes = [loot(1), loot(2), loot(3), loot(4)]
    _, after, events = round_with([ROB, VOTE_YES, ROB, GUARD], threats={0: 3, 2: 3}, stashes=stashes)
    stolen = of_kind(events, "loot_stolen")
    assert [(s.thief, s.victim, s.card) for s in stolen] == [(3, 0, "L001"), (3, 2, "L003")]
    assert sorted(after.stashes[3]) == ["L001", "L003", "L004"]


def test_gc_x04_an_empty_robber_against_a_guard_moves_nothing() -> None:
    """GC-X04: An empty robber against a guard moves nothing."""
    stashes = [(), loot(2), loot(3), loot(4)]
    _, after, events = round_with(
        [ROB, GUARD, VOTE_YES, VOTE_YES], threats={0: 1}, stashes=stashes, assignment=[2] * 6
    )
    assert [(r.seat, r.out_of_turn) for r in of_kind(events, "action_revealed")][1] == (1, True)
    assert of_kind(events, "loot_stolen")[0].nothing
    assert after.stashes[1] == loot(2)


def test_gc_x05_a_skimmed_card_is_robbed_only_by_a_later_rob() -> None:
    """GC-X05: A skimmed card is robbed only by a later rob."""
    stashes = [loot(1), (), loot(3), loot(4)]
    pile = loot(20) + (FUZZ,)
    # seat 0 robs seat 1 before seat 1 skims: nothing; seat 2 robs seat 1 after: the card
    _, after, events = round_with(
        [ROB, SKIM, ROB, VOTE_YES], threats={0: 1, 2: 1}, stashes=stashes, pile=pile, assignment=[3] * 6
    )
    stolen = of_kind(events, "loot_stolen")
    assert [(s.thief, s.nothing, s.card) for s in stolen] == [(0, True, ""), (2, False, "L020")]


def test_gc_x06_assigned_loot_is_robbable_from_the_next_round_on() -> None:
    """GC-X06: Assigned loot is robbable from the next round on."""
    stashes = [loot(1), (), loot(3), loot(4)]
    _, after, events = round_with(
        [VOTE_YES, VOTE_YES, ROB, VOTE_YES], threats={2: 1}, stashes=stashes, assignment=[1] * 6
    )
    assert of_kind(events, "loot_stolen")[0].nothing
    state, _ = assign(after, [0] * 6)
    state, events = play_step3(state, [VOTE_YES, VOTE_YES, ROB, VOTE_YES], threats={2: 1})
    assert of_kind(events, "loot_stolen")[0].card in after.stashes[1]


def test_gc_x07_when_the_first_skim_got_nothing_later_skims_get_nothing() -> None:
    """GC-X07: When the first skim got nothing later skims get nothing."""
    _, after, events = round_with([SKIM, SKIM, VOTE_YES, VOTE_YES], pile=())
    assert [e.seat for e in of_kind(events, "skim_came_up_empty")] == [0]
    assert of_kind(events, "loot_skimmed") == []


def test_gc_x08_nobody_votes_and_the_boss_moves_left() -> None:
    """GC-X08: Nobody votes and the boss moves left."""
    before, after, _ = round_with([SKIM, ROB, GUARD, GUARD], boss=2, assignment=[1] * 6)
    assert after.boss == 3 and set(before.table) <= set(after.stashes[1])


def test_gc_x09_the_boss_alone_votes_no_and_keeps_the_job() -> None:
    """GC-X09: The boss alone votes no and keeps the job."""
    before, after, events = round_with([VOTE_NO, SKIM, GUARD, ROB])
    assert after.boss == 0 and after.step is Step.DISTRIBUTE
    assert len(after.table) == len(before.table) + 2
    assert of_kind(events, "round_started")[-1].step == Step.DISTRIBUTE


def test_gc_x10_the_first_other_no_voter_becomes_boss() -> None:
    """GC-X10: The first other no voter becomes boss."""
    _, after, _ = round_with([VOTE_NO, VOTE_YES, VOTE_NO, VOTE_NO], boss=0)
    assert after.boss == 2


def test_gc_x11_failed_votes_in_a_row_grow_the_table() -> None:
    """GC-X11: Failed votes in a row grow the table."""
    pile = loot(*range(20, 30)) + (FUZZ,)
    state = table_state(pile=pile)
    sizes = [len(state.table)]
    for _ in range(3):
        state, _ = assign(state)
        state, _ = play_step3(state, [VOTE_NO] * 4)
        sizes.append(len(state.table))
    assert sizes == [6, 8, 10, 12]


def test_gc_x12_the_fuzz_as_the_first_card_of_step_1() -> None:
    """GC-X12: The fuzz as the first card of step 1."""
    pile = (FUZZ,) + loot(20)
    _, after, events = round_with([VOTE_YES] * 4, pile=pile)
    assert of_kind(events, "loot_confiscated") == []
    assert after.over and after.confiscated == ()


def test_gc_x13_the_fuzz_as_the_second_extra_card() -> None:
    """GC-X13: The fuzz as the second extra card."""
    pile = loot(20) + (FUZZ,)
    before, after, _ = round_with([VOTE_NO] * 4, pile=pile)
    assert after.confiscated == before.table + loot(20)
    assert after.end_reason == 2


def test_gc_x14_a_skimmed_fuzz_then_a_failed_vote() -> None:
    """GC-X14: A skimmed fuzz then a failed vote."""
    pile = (FUZZ,) + loot(20, 21)
    before, after, _ = round_with([VOTE_NO, SKIM, VOTE_NO, VOTE_NO], pile=pile)
    assert after.confiscated == before.table and after.over and after.end_reason == 3


def test_gc_x15_the_fuzz_as_the_last_card_of_the_pile_gives_the_skimmer_nothing() -> None:
    """GC-X15: The fuzz as the last card of the pile gives the skimmer nothing."""
    _, after, events = round_with([VOTE_YES, SKIM, VOTE_YES, VOTE_YES], pile=(FUZZ,))
    k = kinds(events)
    assert k.index("fuzz_revealed") < k.index("skim_came_up_empty")
    assert after.over and after.end_reason == 3
    assert len(after.stashes[1]) == 4


def test_gc_x16_a_player_with_an_empty_stash_plays_normally() -> None:
    """GC-X16: A player with an empty stash plays normally."""
    stashes = [(), loot(2), loot(3), loot(4)]
    before, after, events = round_with([VOTE_NO, VOTE_YES, VOTE_NO, VOTE_NO], boss=0, stashes=stashes)
    assert after.boss == 2
    state = table_state(boss=0, stashes=stashes)
    state, _ = assign(state, [0] * 6)
    state, events = play_step3(state, [VOTE_YES, ROB, VOTE_YES, VOTE_YES], threats={1: 0})
    assert of_kind(events, "loot_stolen")[0].nothing
    assert len(state.stashes[0]) == 6


def test_gc_x17_a_guard_does_not_stop_a_skim_or_count_as_a_vote() -> None:
    """GC-X17: A guard does not stop a skim or count as a vote."""
    _, after, events = round_with([GUARD, SKIM, GUARD, GUARD])
    assert of_kind(events, "loot_skimmed")[0].seat == 1
    count = of_kind(events, "vote_counted")[0]
    assert (count.yes, count.no) == (0, 0)


def test_gc_x18_the_boss_acts_like_everyone_and_skims_first() -> None:
    """GC-X18: The boss acts like everyone and skims first."""
    _, _, events = round_with([SKIM, SKIM, VOTE_YES, VOTE_YES, SKIM], boss=4)
    assert of_kind(events, "loot_skimmed")[0].seat == 4
    state, _ = assign(table_state(boss=1))
    state, _ = act(state, 1, C.place_threat(0))
    assert state.threats[1] == 0


def test_gc_x19_threats_are_independent() -> None:
    """GC-X19: Threats are independent."""
    stashes = [loot(1), loot(2), loot(3), loot(4)]
    _, after, events = round_with([ROB, ROB, VOTE_YES, VOTE_YES], threats={0: 2, 1: 0}, stashes=stashes)
    stolen = of_kind(events, "loot_stolen")
    assert [(s.thief, s.victim) for s in stolen] == [(0, 2), (1, 0)]


def test_gc_x20_a_payoff_in_front_of_a_guard_resolves_at_its_reveal_and_fails() -> None:
    """GC-X20: A payoff in front of a guard resolves at its reveal and fails."""
    state = dc_replace(table_state(options=PAYOFF), stashes=(loot(1), loot(2), loot(3), loot(4)))
    state, _ = assign(state)
    state, _ = act(state, 1, C.make_offer(3, 1, loot(2), 1, 1))
    state, events = play_step3(state, [ROB, VOTE_YES, VOTE_YES, GUARD], threats={0: 3})
    k = kinds(events)
    guard_at = next(
        i
        for i, e in enumerate(events)
        if e.WhichOneof("kind") == "action_revealed" and e.action_revealed.seat == 3
    )
    # GC-P11: the Guard is revealed and resolved (its counter-steal), then its offers resolve
    assert k[guard_at + 1 : guard_at + 3] == ["loot_stolen", "offer_resolved"]
    resolved = of_kind(events, "offer_resolved")[0]
    assert resolved.receiver == 1 and not resolved.paid
    assert "L002" in state.stashes[1]


def test_gc_x21_a_bought_vote_counts_and_a_robbed_briber_keeps_the_offer() -> None:
    """GC-X21: A bought vote counts and a robbed briber keeps the offer."""
    state = dc_replace(table_state(options=PAYOFF), stashes=(loot(1), loot(2), (), loot(4)))
    state, _ = assign(state)
    state, _ = act(state, 1, C.make_offer(2, 1, loot(2), 0, 1))  # seat 1 buys seat 2's Yes
    state, events = play_step3(state, [VOTE_NO, VOTE_NO, VOTE_YES, ROB], threats={3: 1})
    assert of_kind(events, "vote_counted")[0].yes == 1
    assert of_kind(events, "loot_stolen")[0].nothing  # the offer's card was out of reach
    assert "L002" in state.stashes[2]


def test_gc_x22_no_size_limit_and_an_empty_stash_at_the_end() -> None:
    """GC-X22: No size limit and an empty stash at the end."""
    big = tuple(f"L{n:03d}" for n in range(1, 120))
    state = dc_replace(table_state(), step=Step.OVER, stashes=(big, (), (), ()), payoff_cards=(0, 0, 0, 0))
    assert scores(state)[1] == 0
    result = ENGINE.result(state)
    assert result is not None and result.winners() == [0]
