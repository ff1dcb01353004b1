"""Vote outcomes (GC-V01 to GC-V06), the end of the game (GC-E01 to GC-E07), ties (GC-T01 to GC-T05)."""

from __future__ import annotations

from dataclasses import replace as dc_replace

from famiglia.rules.goodcritters.data import card_values
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
    kinds,
    loot,
    of_kind,
    round_with,
    table_state,
)

# -- votes -----------------------------------------------------------------------------------


def test_gc_v01_more_yes_passes_equal_ties_more_no_fails() -> None:
    """GC-V01: More yes passes equal ties more no fails."""
    cases = [
        ([VOTE_YES, VOTE_YES, VOTE_NO, SKIM], 1),
        ([VOTE_YES, VOTE_NO, ROB, GUARD], 2),
        ([SKIM, ROB, GUARD, GUARD], 2),
        ([VOTE_NO, VOTE_NO, VOTE_YES, SKIM], 3),
    ]
    for cards, outcome in cases:
        _, _, events = round_with(cards)
        (count,) = of_kind(events, "vote_counted")
        assert count.outcome == outcome, cards


def test_gc_v02_a_passed_vote_pays_out_and_keeps_the_boss() -> None:
    """GC-V02: A passed vote pays out and keeps the boss."""
    before, after, events = round_with(
        [VOTE_YES, VOTE_YES, VOTE_YES, VOTE_NO], boss=2, assignment=[0, 0, 1, 1, 3, 3]
    )
    table = before.table
    assert set(table[:2]) <= set(after.stashes[0]) and set(table[4:]) <= set(after.stashes[3])
    assert after.boss == 2
    assert of_kind(events, "round_started")[-1].step == Step.SHOW_LOOT


def test_gc_v03_a_tie_pays_out_then_the_boss_marker_moves_left() -> None:
    """GC-V03: A tie pays out then the boss marker moves left."""
    before, after, events = round_with([VOTE_YES, VOTE_NO, SKIM, SKIM], boss=3, assignment=[2] * 6)
    k = kinds(events)
    assert k.index("loot_handed_out") < k.index("boss_changed")
    assert after.boss == 0
    assert set(before.table) <= set(after.stashes[2])


def test_gc_v04_a_failed_vote_returns_the_loot_and_the_first_no_voter_after_the_boss_leads() -> None:
    """GC-V04: A failed vote returns the loot and the first no voter after the boss leads."""
    before, after, events = round_with(
        [VOTE_NO, VOTE_YES, VOTE_YES, VOTE_NO, VOTE_NO], boss=1, assignment=[1] * 7
    )
    assert after.boss == 3  # seats 2 (yes), 3 (no): the first No voter clockwise from the Boss's left
    assert after.table[: len(before.table)] == before.table
    assert after.assignment == ()
    assert all(c not in after.stashes[1] for c in before.table)


def test_gc_v04_the_search_wraps_round_the_table() -> None:
    """GC-V04: The search wraps round the table."""
    _, after, _ = round_with([VOTE_NO, VOTE_YES, VOTE_YES, VOTE_NO, VOTE_NO], boss=4)
    assert after.boss == 0


def test_gc_v05_the_boss_keeps_the_job_when_the_only_no_is_their_own() -> None:
    """GC-V05: The boss keeps the job when the only no is their own."""
    _, after, events = round_with([SKIM, GUARD, VOTE_NO, ROB], boss=2)
    assert of_kind(events, "vote_counted")[0].outcome == 3
    assert after.boss == 2
    assert of_kind(events, "boss_changed") == []


def test_gc_v06_after_a_failed_vote_two_more_cards_join_the_table() -> None:
    """GC-V06: After a failed vote two more cards join the table."""
    pile = loot(20, 21, 22) + (FUZZ,)
    before, after, events = round_with([VOTE_NO] * 4, pile=pile)
    assert [e.card for e in of_kind(events, "loot_revealed")] == ["L020", "L021"]
    assert after.table == before.table + loot(20, 21)
    assert after.step is Step.DISTRIBUTE and after.boss == 1


# -- end of the game ---------------------------------------------------------------------------


def test_gc_e01_the_fuzz_in_step_1_ends_the_game_and_confiscates_the_table() -> None:
    """GC-E01: The fuzz in step 1 ends the game and confiscates the table."""
    pile = loot(20, 21, 22) + (FUZZ,) + loot(23, 24)
    _, after, events = round_with([VOTE_YES] * 4, pile=pile)
    assert of_kind(events, "fuzz_revealed")[0].cause == 1
    assert of_kind(events, "loot_confiscated")[0].cards == list(loot(20, 21, 22))
    assert after.over and after.end_reason == 1 and after.table == ()
    assert after.confiscated == loot(20, 21, 22)


def test_gc_e02_the_fuzz_among_the_extra_cards_confiscates_everything_on_the_table() -> None:
    """GC-E02: The fuzz among the extra cards confiscates everything on the table."""
    pile = (FUZZ,) + loot(20)
    before, after, events = round_with([VOTE_NO] * 4, pile=pile)
    assert of_kind(events, "fuzz_revealed")[0].cause == 2
    assert set(after.confiscated) == set(before.table)
    assert after.end_reason == 2 and "round_ended" not in kinds(events)


def test_gc_e03_a_skimmed_fuzz_lets_the_round_finish_and_pays_out_first() -> None:
    """GC-E03: A skimmed fuzz lets the round finish and pays out first."""
    pile = (FUZZ,) + loot(20, 21)
    before, after, events = round_with([SKIM, VOTE_YES, VOTE_YES, VOTE_NO], pile=pile, assignment=[3] * 6)
    k = kinds(events)
    assert k.index("fuzz_revealed") < k.index("loot_handed_out") < k.index("game_ended")
    assert set(before.table) <= set(after.stashes[3])
    assert after.end_reason == 3 and after.confiscated == ()


def test_gc_e04_a_skimmed_fuzz_and_a_failed_vote_confiscate_without_new_boss_or_cards() -> None:
    """GC-E04: A skimmed fuzz and a failed vote confiscate without new boss or cards."""
    pile = (FUZZ,) + loot(20, 21, 22)
    before, after, events = round_with([SKIM, VOTE_NO, VOTE_NO, VOTE_NO], pile=pile)
    assert of_kind(events, "boss_changed") == []
    assert of_kind(events, "loot_revealed") == []
    assert after.confiscated == before.table
    assert after.boss == 0 and after.over


def test_gc_e04_the_option_still_names_a_boss_and_shows_the_cards() -> None:
    """GC-E04: The option still names a boss and shows the cards."""
    pile = (FUZZ,) + loot(20, 21, 22)
    options = {"skim_fuzz_failed_vote_extra_cards": "true"}
    before, after, events = round_with([SKIM, VOTE_NO, VOTE_NO, VOTE_NO], pile=pile, options=options)
    assert of_kind(events, "boss_changed")[0].boss == 1
    assert after.confiscated == before.table + loot(21, 22)  # L020 went to the skimmer
    assert after.over


def test_gc_e05_an_empty_pile_at_a_reveal_ends_the_game() -> None:
    """GC-E05: An empty pile at a reveal ends the game."""
    pile = loot(20, 21)
    _, after, events = round_with([VOTE_YES] * 4, pile=pile)
    assert after.over and after.end_reason == 4
    assert after.confiscated == loot(20, 21)


def test_gc_e05_a_skim_of_an_empty_pile_gets_nothing() -> None:
    """GC-E05: A skim of an empty pile gets nothing."""
    _, after, events = round_with([SKIM, VOTE_NO, VOTE_NO, VOTE_NO], pile=())
    assert of_kind(events, "skim_came_up_empty")[0].seat == 0
    assert after.over and after.end_reason == 4


def test_gc_e06_the_score_is_the_face_value_of_the_stash() -> None:
    """GC-E06: The score is the face value of the stash."""
    state = dc_replace(table_state(), step=Step.OVER, stashes=(loot(1, 36), loot(140), (), loot(71, 72, 73)))
    assert scores(state) == [5000, 5000, 0, 12000]
    result = ENGINE.result(state)
    assert result is not None and result.winners() == [3]
    assert card_values()["L071"] == 4000


def test_gc_e07_once_over_every_stash_and_the_pile_are_public() -> None:
    """GC-E07: Once over every stash and the pile are public."""
    pile = loot(20) + (FUZZ,) + loot(23, 24)
    _, after, events = round_with([VOTE_YES] * 4, pile=pile)
    (revealed,) = of_kind(events, "stashes_revealed")
    assert [list(s.cards) for s in revealed.stashes] == [list(s) for s in after.stashes]
    view = ENGINE.view(after, 1)
    assert [list(sv.stash) for sv in view.seat_views] == [list(s) for s in after.stashes]
    assert list(view.pile) == list(loot(23, 24))


# -- ties --------------------------------------------------------------------------------------


def _over(stashes: tuple[tuple[str, ...], ...], **options: str):  # type: ignore[no-untyped-def]
    return dc_replace(table_state(len(stashes), options=options), step=Step.OVER, stashes=stashes)


def test_gc_t01_gc_t02_tied_scores_share_the_win_and_ranks_skip() -> None:
    """GC-T01, GC-T02: Tied scores share the win and ranks skip."""
    state = _over((loot(106), loot(1, 36), loot(71), loot(106)))
    result = ENGINE.result(state)
    assert result is not None
    assert [s.rank for s in sorted(result.seats, key=lambda s: s.seat)] == [1, 1, 4, 1]  # 1, 1, 1, 4
    assert result.winners() == [0, 1, 3]
    assert result.outcome["winners"] == "0,1,3"


def test_gc_t03_more_loot_cards_breaks_the_tie_when_switched_on() -> None:
    """GC-T03: More loot cards breaks the tie when switched on."""
    stashes = (loot(106), loot(1, 36), loot(71), loot(106))
    result = ENGINE.result(_over(stashes, winner_tiebreak="more_loot_cards"))
    assert result is not None
    assert [s.rank for s in sorted(result.seats, key=lambda s: s.seat)] == [2, 1, 4, 2]
    assert result.winners() == [1]


def test_gc_t04_a_vote_without_vote_cards_is_a_tie_not_broken() -> None:
    """GC-T04: A vote without vote cards is a tie not broken."""
    _, after, events = round_with([SKIM, GUARD, GUARD, GUARD])
    assert of_kind(events, "vote_counted")[0].outcome == 2
    assert after.boss == 1


def test_gc_t05_seating_settles_first_skim_and_new_boss() -> None:
    """GC-T05: Seating settles first skim and new boss."""
    _, after, events = round_with([VOTE_NO, SKIM, VOTE_NO, SKIM, VOTE_NO], boss=3)
    assert of_kind(events, "loot_skimmed")[0].seat == 3  # the Boss's Skim is revealed first
    assert after.boss == 4  # first No after the Boss's left
