"""End of the game and scoring (GR-E01..GR-E08), ties (GR-T01..GR-T04)."""

from __future__ import annotations

from famiglia.rules.grifters import ENGINE
from famiglia.rules.grifters.result import colour_bonus, score
from famiglia.rules.grifters.state import KEEP, replace_state

from ._helpers import (
    CON,
    MIDDLE,
    RECRUITER,
    SMUGGLER,
    THUG,
    act,
    caper,
    job,
    kinds,
    new_game,
    of_kind,
    sp,
    table,
)


def over(s, **changes):  # type: ignore[no-untyped-def]
    return replace_state(s, over=True, end_reason="test", **changes)


def test_gr_e01_a_coffers_empty_ends_the_game() -> None:
    """GR-E01: a coffers empty ends the game."""
    s = table(2, hands={0: ["R0-TH", CON]}, coffers=1)
    s, events = act(s, caper("R0-TH"))
    assert s.over and s.end_reason == "coffers_empty" and kinds(events)[-1] == "game_ended"


def test_gr_e01_b_every_job_in_play_completed_ends_the_game() -> None:
    """GR-E01: b every job in play completed ends the game."""
    s = table(2, hands={0: ["R0-MM", sp(2, 1), "R0-TH", CON]}, stacks=[("Red", ["J-R1"]), ("Blue", [])])
    s, _ = act(s, job("J-R1", "R0-MM", sp(2, 1), "R0-TH"))
    assert s.over and s.end_reason == "all_jobs_completed"


def test_gr_e01_c_deck_and_discard_empty_after_a_draw_ends_the_game() -> None:
    """GR-E01: c deck and discard empty after a draw ends the game."""
    s = table(2, hands={0: [SMUGGLER, CON]}, deck=[sp(9, 2)], discard=[])
    s, _ = act(s, caper(SMUGGLER))
    assert s.over and s.end_reason == "no_specialists_left"


def test_gr_e01_d_a_draw_from_nothing_ends_the_game() -> None:
    """GR-E01: d a draw from nothing ends the game."""
    s = table(2, hands={0: [RECRUITER, CON]}, deck=[], discard=[])
    s, events = act(s, caper(RECRUITER))
    assert s.over and "card_drawn" not in kinds(events)


def test_gr_e02_the_game_ends_in_the_middle_of_a_text() -> None:
    """GR-E02: the game ends in the middle of a text."""
    s = table(2, hands={0: [SMUGGLER, CON]}, coffers=2)
    s, events = act(s, caper(SMUGGLER))
    assert s.over and "card_drawn" not in kinds(events) and "caper_completed" not in kinds(events)
    assert s.players[0].in_play == (SMUGGLER,)  # cards in play stay with the active player
    assert ENGINE.pending(s) == [] and ENGINE.legal_commands(s, 0) == []


def test_gr_e03_a_mastermind_emptying_the_deck_keeps_every_drawn_card() -> None:
    """GR-E03: a mastermind emptying the deck keeps every drawn card."""
    s = table(2, hands={0: ["R0-MM", CON]}, deck=[sp(9, 1), sp(9, 2), sp(9, 3)], discard=[])
    s, _ = act(s, caper("R0-MM"))
    assert s.over and s.choice != KEEP
    assert {sp(9, 1), sp(9, 2), sp(9, 3)} <= set(s.players[0].hand)
    for seats in (2, 3, 4):
        assert not new_game(seats).over


def test_gr_e04_e05_score_is_stash_plus_colour_bonuses() -> None:
    """GR-E04, GR-E05: score is stash plus colour bonuses."""
    s = over(table(2, stash={0: 7, 1: 3}, jobs={0: ["J-R1", "J-R2", "J-B1", "J-B2", "J-B3"], 1: ["J-G1"]}))
    assert colour_bonus(s, 0) == 2 + 4 and score(s, 0) == 13
    s = over(table(2, jobs={0: ["J-R1", "J-R2", "J-R3", "J-R4"]}))
    assert colour_bonus(s, 0) == 8
    assert ENGINE.result(s).seats[0].score == s.players[0].stash + 8


def test_gr_e06_the_bonus_is_counted_not_paid_and_tokens_score_nothing() -> None:
    """GR-E06: the bonus is counted not paid and tokens score nothing."""
    s = over(table(2, stash={0: 2, 1: 3}, tokens={0: [True, True, False]}, jobs={0: ["J-R1", "J-R2"]}))
    coffers = s.coffers
    assert score(s, 0) == 4 and s.coffers == coffers
    s2 = over(table(2, stash={0: 2, 1: 3}, tokens={0: [True, True, False]},
                    options={"hideout_tokens_score": "true"}))
    assert score(s2, 0) == 4


def test_gr_e07_everything_is_public_when_the_game_ends() -> None:
    """GR-E07: everything is public when the game ends."""
    s = table(2, hands={0: ["R0-TH", CON], 1: [MIDDLE, THUG]}, coffers=1)
    s, events = act(s, caper("R0-TH"))
    ended = of_kind(events, "game_ended")[0]
    assert {h.seat: list(h.cards) for h in ended.hands}[1] == [THUG, MIDDLE]  # SP11, SP12
    v = ENGINE.view(s, 0)
    assert list(v.players[1].hand) == list(s.players[1].hand) and list(v.deck) == list(s.deck)


def test_gr_e08_the_round_limit_ends_the_game_after_the_last_turn_of_the_round() -> None:
    """GR-E08: the round limit ends the game after the last turn of the round."""
    s = table(3, hands={0: [CON], 1: ["R1-TH", MIDDLE], 2: [MIDDLE.replace("-1", "-2")]}, active=1,
              options={"max_rounds": "1"})
    seen = []
    while not s.over:
        seen.append(s.active)
        s, _ = act(s, ENGINE.timeout_command(s, s.active))
    assert seen == [1, 2, 0] and s.end_reason == "round_limit" and s.round == 1


def test_gr_e08_with_defaults_games_end_by_round_100() -> None:
    """GR-E08: with defaults games end by round 100."""
    s = new_game(2)
    assert s.config.max_rounds == 100


def _tied(**kw):  # type: ignore[no-untyped-def]
    return over(table(3, **kw))


def test_gr_t01_highest_score_wins_then_most_jobs() -> None:
    """GR-T01: highest score wins then most jobs."""
    s = _tied(stash={0: 5, 1: 9, 2: 9}, jobs={2: ["J-R1"]})
    r = ENGINE.result(s)
    assert r.winners() == [2] and [x.rank for x in r.seats] == [3, 2, 1]


def test_gr_t02_then_fewest_specialists_ringleaders_not_counted() -> None:
    """GR-T02: then fewest specialists ringleaders not counted."""
    s = _tied(stash={0: 9, 1: 9, 2: 1}, hands={0: ["R0-TH", CON], 1: ["R1-TH"]})
    assert ENGINE.result(s).winners() == [1]


def test_gr_t03_t04_unbroken_ties_share_a_rank_and_skip_the_next() -> None:
    """GR-T03, GR-T04: unbroken ties share a rank and skip the next."""
    s = _tied(stash={0: 9, 1: 9, 2: 1})
    r = ENGINE.result(s)
    assert [x.rank for x in r.seats] == [1, 1, 3] and r.winners() == [0, 1]
    assert ENGINE.result(table(2)) is None
