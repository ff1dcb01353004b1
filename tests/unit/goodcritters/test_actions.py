"""Distribution, threats, Action cards and their resolution (GC-A01 to GC-A21)."""

from __future__ import annotations

import pytest

from famiglia.engine import RuleViolation
from famiglia.rules.goodcritters.data import ACTION_CARDS

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

# -- distribution ----------------------------------------------------------------------------


def test_gc_a01_any_split_is_legal_all_to_one_nothing_to_others() -> None:
    """GC-A01: Any split is legal all to one nothing to others."""
    for seats in ([0] * 6, [3] * 6, [0, 1, 2, 3, 0, 1], [2, 2, 2, 2, 2, 1]):
        state, events = assign(table_state(), seats)
        assert state.assignment == tuple(seats)


def test_gc_a01_no_card_may_stay_unassigned() -> None:
    """GC-A01: No card may stay unassigned."""
    state = table_state()
    partial = C.assign_loot(list(zip(state.table, [0] * 6, strict=True))[:5])
    with pytest.raises(RuleViolation) as exc:
        act(state, 0, partial)
    assert exc.value.code == "GC-A01"


def test_gc_a01_only_the_boss_assigns() -> None:
    """GC-A01: Only the boss assigns."""
    state = table_state(boss=2)
    with pytest.raises(RuleViolation) as exc:
        act(state, 1, C.assign_loot((c, 1) for c in state.table))
    assert exc.value.code == "GC-D01"


def test_gc_a02_the_assignment_is_public_final_and_in_nobodys_stash() -> None:
    """GC-A02: The assignment is public final and in nobodys stash."""
    state = table_state()
    stashes = state.stashes
    state, events = assign(state, [1] * 6)
    (assigned,) = of_kind(events, "loot_assigned")
    assert ENGINE.visibility(events[0]).kind.name == "PUBLIC"
    assert [a.seat for a in assigned.assignments] == [1] * 6
    assert state.stashes == stashes
    with pytest.raises(RuleViolation):
        act(state, 0, C.assign_loot((c, 0) for c in state.table))


@pytest.mark.parametrize(
    "pairs",
    [
        [("L060", 0), ("L060", 1)],  # twice
        [("L999", 0)],  # unknown card
        [("L060", 9)],  # unknown seat
        [("L060", 4)],  # the first seat past the last (4 players: seats 0 to 3)
        [("L060", -1)],  # no seat
        [("L001", 0)],  # a Stash card, not table loot
    ],
)
def test_gc_a03_malformed_assignments_are_refused(pairs: list[tuple[str, int]]) -> None:
    """GC-A03: Malformed assignments are refused."""
    state = table_state()
    rest = [(c, 0) for c in state.table if c not in {p[0] for p in pairs}]
    with pytest.raises(RuleViolation) as exc:
        act(state, 0, C.assign_loot(pairs + rest))
    assert exc.value.code == "GC-A03"


# -- threats ---------------------------------------------------------------------------------


def test_gc_a04_threats_go_in_front_of_one_other_player_and_may_pile_up() -> None:
    """GC-A04: Threats go in front of one other player and may pile up."""
    state, _ = assign(table_state())
    for seat in (0, 1, 2):
        state, _ = act(state, seat, C.place_threat(3))
    assert state.threats == (3, 3, 3, -1)
    with pytest.raises(RuleViolation) as exc:
        act(state, 3, C.place_threat(3))
    assert exc.value.code == "GC-A04"
    with pytest.raises(RuleViolation) as exc:
        act(table_state(), 1, C.place_threat(2))  # Step 2: no threats yet
    assert exc.value.code == "GC-A04"


def test_gc_a05_a_threat_without_rob_is_a_bluff() -> None:
    """GC-A05: A threat without rob is a bluff."""
    _, after, events = round_with([VOTE_YES] * 4, threats={1: 2, 3: 0})
    assert of_kind(events, "loot_stolen") == []


def test_gc_a06_markers_can_be_moved_and_withdrawn_and_are_public() -> None:
    """GC-A06: Markers can be moved and withdrawn and are public."""
    state, _ = assign(table_state())
    state, events = act(state, 1, C.place_threat(2))
    assert ENGINE.visibility(events[0]).kind.name == "PUBLIC"
    state, _ = act(state, 1, C.place_threat(3))
    assert state.threats[1] == 3
    with pytest.raises(RuleViolation) as exc:
        act(state, 1, C.place_threat(3))
    assert exc.value.code == "GC-A06"
    state, _ = act(state, 1, C.withdraw_threat())
    assert state.threats[1] == -1
    with pytest.raises(RuleViolation) as exc:
        act(state, 2, C.withdraw_threat())
    assert exc.value.code == "GC-A06"


# -- Action cards ----------------------------------------------------------------------------


def test_gc_a07_every_player_plays_one_card_and_may_change_it() -> None:
    """GC-A07: Every player plays one card and may change it."""
    state, _ = assign(table_state())
    state, _ = act(state, 1, C.choose_action_card(SKIM))
    state, _ = act(state, 1, C.choose_action_card(ROB))
    assert state.cards[1] == ROB and state.choices[1] == 2
    with pytest.raises(RuleViolation) as exc:
        act(table_state(), 1, C.choose_action_card(SKIM))
    assert exc.value.code == "GC-A07"


def test_gc_a08_the_five_action_cards_and_no_other() -> None:
    """GC-A08: The five action cards and no other."""
    assert ACTION_CARDS == (VOTE_YES, VOTE_NO, SKIM, ROB, GUARD)
    state, _ = assign(table_state())
    with pytest.raises(RuleViolation) as exc:
        act(state, 1, C.choose_action_card(9))
    assert exc.value.code == "GC-A08"
    # every card comes back each round (GC-R07): all five are open again
    _, after, _ = round_with([ROB, SKIM, GUARD, VOTE_NO])
    state, _ = assign(after)
    for card in ACTION_CARDS:
        act(state, 0, C.choose_action_card(card))


def test_gc_a09_reveal_order_is_boss_first_then_clockwise() -> None:
    """GC-A09: Reveal order is boss first then clockwise."""
    _, _, events = round_with([VOTE_YES] * 5, boss=3)
    assert [r.seat for r in of_kind(events, "action_revealed")] == [3, 4, 0, 1, 2]


def test_gc_a10_a_guard_is_revealed_out_of_turn_and_skipped_later() -> None:
    """GC-A10: A guard is revealed out of turn and skipped later."""
    _, _, events = round_with([ROB, VOTE_YES, VOTE_YES, GUARD], threats={0: 3})
    revealed = [(r.seat, r.out_of_turn) for r in of_kind(events, "action_revealed")]
    assert revealed == [(0, False), (3, True), (1, False), (2, False)]


def test_gc_a11_votes_do_nothing_until_all_cards_are_revealed() -> None:
    """GC-A11: Votes do nothing until all cards are revealed."""
    _, _, events = round_with([VOTE_NO, VOTE_NO, VOTE_YES, VOTE_YES])
    k = kinds(events)
    last_reveal = max(i for i, x in enumerate(k) if x == "action_revealed")
    assert k.index("vote_counted") > last_reveal
    assert k[last_reveal + 1] == "vote_counted"


def test_gc_a12_only_the_first_skim_takes_a_card() -> None:
    """GC-A12: Only the first skim takes a card."""
    pile = loot(20, 21, 22) + (FUZZ,)
    _, after, events = round_with([VOTE_YES, SKIM, SKIM, VOTE_YES], pile=pile)
    skims = of_kind(events, "loot_skimmed")
    assert [(s.seat, s.card) for s in skims] == [(1, "L020")]
    assert "L020" in after.stashes[1]
    assert len(after.stashes[2]) == 4


def test_gc_a12_a_skim_never_takes_table_loot() -> None:
    """GC-A12: A skim never takes table loot."""
    before, after, events = round_with([SKIM, VOTE_NO, VOTE_NO, VOTE_NO])
    (skim,) = of_kind(events, "loot_skimmed")
    assert skim.card not in before.table


def test_gc_a13_a_skimmed_fuzz_is_shown_and_the_next_card_taken() -> None:
    """GC-A13: A skimmed fuzz is shown and the next card taken."""
    pile = (FUZZ,) + loot(20, 21)
    _, after, events = round_with([VOTE_YES, VOTE_YES, SKIM, VOTE_YES], pile=pile)
    k = kinds(events)
    assert k.index("fuzz_revealed") < k.index("loot_skimmed")
    assert of_kind(events, "fuzz_revealed")[0].cause == 3
    assert of_kind(events, "loot_skimmed")[0].card == "L020"
    assert after.over and after.fuzz_out


def test_gc_a14_rob_takes_a_random_card_from_the_threatened_player() -> None:
    """GC-A14: Rob takes a random card from the threatened player."""
    before, after, events = round_with([VOTE_YES, ROB, VOTE_YES, VOTE_YES], threats={1: 2})
    (stolen,) = of_kind(events, "loot_stolen")
    assert (stolen.thief, stolen.victim, stolen.cause) == (1, 2, 1)
    assert stolen.card in before.stashes[2]
    assert stolen.card in after.stashes[1] and stolen.card not in after.stashes[2]


def test_gc_a14_rob_without_a_marker_does_nothing() -> None:
    """GC-A14: Rob without a marker does nothing."""
    _, _, events = round_with([VOTE_YES, ROB, VOTE_YES, VOTE_YES])
    assert of_kind(events, "loot_stolen") == []


def test_gc_a15_rob_against_a_guard_turns_into_a_counter_steal() -> None:
    """GC-A15: Rob against a guard turns into a counter steal."""
    before, after, events = round_with([VOTE_YES, ROB, GUARD, VOTE_YES], threats={1: 2})
    (stolen,) = of_kind(events, "loot_stolen")
    assert (stolen.thief, stolen.victim, stolen.cause) == (2, 1, 2)
    assert stolen.card in before.stashes[1]
    assert len(after.stashes[2]) == 5 and len(after.stashes[1]) == 3


def test_gc_a16_one_guard_answers_every_rob_in_reveal_order() -> None:
    """GC-A16: One guard answers every rob in reveal order."""
    _, after, events = round_with([ROB, ROB, GUARD, ROB], threats={0: 2, 1: 2, 3: 2})
    stolen = of_kind(events, "loot_stolen")
    assert [(s.thief, s.victim) for s in stolen] == [(2, 0), (2, 1), (2, 3)]
    guards = [r for r in of_kind(events, "action_revealed") if r.seat == 2]
    assert len(guards) == 1 and guards[0].out_of_turn
    assert len(after.stashes[2]) == 7


def test_gc_a17_an_untargeted_guard_is_revealed_on_its_turn_and_does_nothing() -> None:
    """GC-A17: An untargeted guard is revealed on its turn and does nothing."""
    before, after, events = round_with([VOTE_YES, GUARD, VOTE_YES, VOTE_YES])
    assert [(r.seat, r.out_of_turn) for r in of_kind(events, "action_revealed")][1] == (1, False)
    assert of_kind(events, "loot_stolen") == []


def test_gc_a18_the_guard_always_takes_the_card_without_being_asked() -> None:
    """GC-A18: The guard always takes the card without being asked."""
    state, _ = assign(table_state())
    state, _ = act(state, 1, C.place_threat(2))
    for seat, card in enumerate([VOTE_YES, ROB, GUARD]):
        state, _ = act(state, seat, C.choose_action_card(card, commit=True))
    # nobody is asked anything after the last commit: the counter-steal happens by itself
    state, events = act(state, 3, C.choose_action_card(VOTE_YES, commit=True))
    assert of_kind(events, "loot_stolen")[0].cause == 2
    assert ENGINE.pending(state)[0].seat == state.boss  # straight on to the next Step 2


def test_gc_a19_the_picked_card_is_uniform_over_the_stash() -> None:
    """GC-A19: The picked card is uniform over the stash."""
    seen = set()
    for seed in range(60):
        _, _, events = round_with([VOTE_YES, ROB, VOTE_YES, VOTE_YES], threats={1: 2}, seed=seed)
        seen.add(of_kind(events, "loot_stolen")[0].card)
    assert seen == set(table_state().stashes[2])


def test_gc_a20_robs_resolve_against_the_stash_as_it_is_now() -> None:
    """GC-A20: Robs resolve against the stash as it is now."""
    # seat 1 skims, seat 2 then robs seat 1 whose stash now holds the skimmed card
    stashes = [loot(1), (), loot(3), loot(4)]
    pile = loot(20, 21) + (FUZZ,)
    _, after, events = round_with([VOTE_YES, SKIM, ROB, VOTE_YES], threats={2: 1}, stashes=stashes, pile=pile)
    (stolen,) = of_kind(events, "loot_stolen")
    assert stolen.card == "L020"


def test_gc_a20_assigned_loot_of_this_round_cannot_be_robbed() -> None:
    """GC-A20: Assigned loot of this round cannot be robbed."""
    stashes = [loot(1), (), loot(3), loot(4)]
    _, after, events = round_with(
        [VOTE_YES, VOTE_YES, ROB, VOTE_YES], threats={2: 1}, stashes=stashes, assignment=[1] * 6
    )
    (stolen,) = of_kind(events, "loot_stolen")
    assert stolen.nothing and stolen.card == ""
    assert len(after.stashes[1]) == 6  # the assigned loot arrived after the vote


def test_gc_a21_robbing_an_empty_stash_takes_nothing_and_is_public() -> None:
    """GC-A21: Robbing an empty stash takes nothing and is public."""
    stashes = [loot(1), (), loot(3), loot(4)]
    _, after, events = round_with([ROB, GUARD, VOTE_YES, VOTE_YES], threats={0: 1}, stashes=stashes)
    (stolen,) = of_kind(events, "loot_stolen")
    # the Guard is revealed and the counter-steal takes from the robber
    assert stolen.cause == 2 and stolen.card == "L001"
    _, after, events = round_with(
        [ROB, VOTE_YES, VOTE_YES, VOTE_YES], threats={0: 1}, stashes=stashes, assignment=[2] * 6
    )
    (stolen,) = of_kind(events, "loot_stolen")
    assert stolen.nothing
    assert (
        ENGINE.visibility([e for e in events if e.WhichOneof("kind") == "loot_stolen"][0]).kind.name
        == "PUBLIC"
    )
    assert after.stashes[0] == loot(1)


def test_gc_a07_play_step3_helper_commits_every_seat() -> None:
    """GC-A07: Play step3 helper commits every seat."""
    state, _ = assign(table_state())
    state, events = play_step3(state, [VOTE_YES] * 4)
    assert kinds(events).count("committed") == 4


def test_gc_a08_every_action_card_has_an_effect_and_every_effect_is_used() -> None:
    """GC-A08: the effect table covers the five cards, and no effect function is unused."""
    import inspect

    from famiglia.rules.goodcritters import effects

    assert set(effects.EFFECTS) == set(ACTION_CARDS)
    used = {f.__name__ for f in effects.EFFECTS.values()} | {"steal", "resolve_offers"}
    defined = {
        n for n, f in inspect.getmembers(effects, inspect.isfunction) if f.__module__ == effects.__name__
    }
    assert defined <= used
