"""Setup (GR-S01..GR-S14) and configuration (GR-F01)."""

from __future__ import annotations

import pytest

from famiglia.engine import MatchConfig, RuleViolation
from famiglia.rules.grifters import ENGINE, INFO
from famiglia.rules.grifters.data import CARDS, IS_RINGLEADER, JOBS, RINGLEADERS, SPECIALISTS
from famiglia.rules.grifters.state import PLAY

from ._helpers import kinds, new_game


@pytest.mark.parametrize("seats", [1, 5, 0])
def test_gr_s01_only_two_to_four_players(seats: int) -> None:
    """GR-S01: only two to four players."""
    with pytest.raises(RuleViolation) as exc:
        ENGINE.setup(MatchConfig(seats), 1)
    assert exc.value.code == "GR-S01"
    assert INFO.min_players == 2 and INFO.max_players == 4


def test_gr_s02_seats_are_numbered_and_clockwise_is_next_seat() -> None:
    """GR-S02: seats are numbered and clockwise is next seat."""
    s = new_game(4)
    assert s.opponents(2) == (3, 0, 1)
    assert s.opponents(0) == (1, 2, 3)


def test_gr_s03_the_box_holds_12_ringleaders_48_specialists_20_jobs() -> None:
    """GR-S03: the box holds 12 ringleaders 48 specialists 20 jobs."""
    assert len(RINGLEADERS) == 12 and len(SPECIALISTS) == 48 and len(JOBS) == 20
    names = [c.name for c in RINGLEADERS]
    assert names.count("Mastermind") == names.count("Thief") == names.count("Pickpocket") == 4


@pytest.mark.parametrize(("seats", "after", "out"), [(2, 44, 25), (3, 56, 10), (4, 63, 0)])
def test_gr_s04_coffers_by_player_count(seats: int, after: int, out: int) -> None:
    """GR-S04: coffers by player count."""
    s = new_game(seats)
    assert s.coffers == after and s.out_of_play == out


@pytest.mark.parametrize(("seats", "stacks", "jobs"), [(2, 3, 12), (3, 4, 16), (4, 5, 20)])
def test_gr_s05_stacks_in_play_by_mark(seats: int, stacks: int, jobs: int) -> None:
    """GR-S05: stacks in play by mark."""
    s = new_game(seats)
    assert len(s.stacks) == stacks and sum(len(j) for _, j in s.stacks) == jobs


def test_gr_s06_stacks_sorted_by_order_number_one_on_top() -> None:
    """GR-S06: stacks sorted by order number one on top."""
    s = new_game(4)
    for colour, jobs in s.stacks:
        assert [j[-1] for j in jobs] == ["1", "2", "3", "4"], colour


def test_gr_s07_s08_each_player_has_three_ringleaders_and_three_isk() -> None:
    """GR-S07, GR-S08: each player has three ringleaders and three isk."""
    s = new_game(3)
    for seat, p in enumerate(s.players):
        rings = [c for c in p.hand if IS_RINGLEADER[c]]
        assert rings == [f"R{seat}-MM", f"R{seat}-TH", f"R{seat}-PP"]
        assert p.stash == 3


@pytest.mark.parametrize(("seats", "deck"), [(2, 42), (3, 39), (4, 36)])
def test_gr_s09_three_specialists_dealt_deck_holds_the_rest(seats: int, deck: int) -> None:
    """GR-S09: three specialists dealt deck holds the rest."""
    s = new_game(seats)
    assert len(s.deck) == deck and s.discard == ()
    assert all(len(p.hand) == 6 for p in s.players)


def test_gr_s09_s10_the_deal_goes_round_one_card_at_a_time() -> None:
    """GR-S09, GR-S10: the deal goes round one card at a time."""
    events = ENGINE.setup(MatchConfig(3, {}), 5)
    assert kinds(events)[:2] == ["match_started", "deck_shuffled"]
    order = list(events[1].deck_shuffled.cards)
    dealt = [e.card_drawn for e in events if e.WhichOneof("kind") == "card_drawn"]
    assert [d.seat for d in dealt] == [0, 1, 2] * 3
    assert [d.card for d in dealt] == order[:9]
    assert all(d.dealt for d in dealt)


def test_gr_s11_s12_first_player_from_config_or_random_and_public() -> None:
    """GR-S11, GR-S12: first player from config or random and public."""
    assert new_game(4, first_player_seat="2").active == 2
    firsts = {new_game(4, seed=seed).first_player for seed in range(40)}
    assert firsts == {0, 1, 2, 3}
    with pytest.raises(RuleViolation) as exc:
        ENGINE.setup(MatchConfig(2, {"first_player_seat": "3"}), 1)
    assert exc.value.code == "GR-F01" and "GR-S12" in exc.value.message
    assert ENGINE.view(new_game(3, first_player_seat="1"), None).first_player == 1


def test_gr_s13_everything_starts_empty_and_nobody_has_had_a_turn() -> None:
    """GR-S13: everything starts empty and nobody has had a turn."""
    s = new_game(4)
    for p in s.players:
        assert p.nights == ((), (), ()) and p.refresh == () and p.jobs == () and not p.had_turn
    assert s.phase == PLAY and s.round == 1 and s.turn == 1


def test_gr_s14_conservation_holds_after_setup() -> None:
    """GR-S14: conservation holds after setup."""
    for seats in (2, 3, 4):
        s = new_game(seats)
        assert s.coffers + sum(p.stash for p in s.players) == {2: 50, 3: 65, 4: 75}[seats]
        cards = list(s.deck) + list(s.discard) + [c for p in s.players for c in p.owned_cards()]
        assert sorted(c for c in cards if not IS_RINGLEADER[c]) == sorted(c.id for c in SPECIALISTS)


def test_gr_f01_every_configuration_key_is_an_option_with_a_rule() -> None:
    """GR-F01: every configuration key is an option with a rule."""
    keys = {o.key for o in INFO.options}
    expected = {
        "players", "coffers_by_players", "isk_tokens", "start_isk_from_coffers", "start_specialists",
        "ringleaders", "specialist_types", "specialist_copies", "job_marks_in_play", "colour_bonus",
        "first_player_seat", "skip_first_advance", "extra_advance_on_first_turn", "empty_hand_token",
        "empty_hand_empty_stash", "hideout_tokens_score", "job_card_moves_before_reward", "job_match",
        "femme_fatale_second_play", "fall_guy_may_copy_fall_guy", "cat_burglar_steal", "discard_pile_public",
        "end_check", "tiebreak", "count_ringleaders_in_tiebreak", "timeouts", "max_rounds", "timeout_play",
        "auto_single_option",
    }
    assert keys == expected
    assert all(o.rule.startswith("GR-") for o in INFO.options)


@pytest.mark.parametrize(("key", "value", "rule"), [
    ("skip_first_advance", "maybe", "GR-R04"),
    ("max_rounds", "0", "GR-E08"),
    ("max_rounds", "many", "GR-E08"),
    ("coffers_by_players", "2:5", "GR-S08"),
    ("job_match", "at_least", "GR-J03"),
    ("cat_burglar_steal", "4-1", "GR-K17"),
    ("tiebreak", "coin_toss", "GR-T01"),
    ("first_player_seat", "north", "GR-S12"),
    ("nonsense", "1", ""),
])
def test_gr_f01_bad_option_values_are_refused_with_their_rule(key: str, value: str, rule: str) -> None:
    """GR-F01: bad option values are refused with their rule."""
    with pytest.raises(RuleViolation) as exc:
        ENGINE.setup(MatchConfig(2, {key: value}), 1)
    assert exc.value.code == "GR-F01" and exc.value.message.startswith(rule)


def test_gr_f01_options_change_setup() -> None:
    """GR-F01: options change setup."""
    s = new_game(2, coffers_by_players="2:40,3:65,4:75", start_isk_from_coffers="5", start_specialists="4")
    assert s.coffers == 30 and s.players[0].stash == 5 and len(s.players[0].hand) == 7
    s = new_game(2, ringleaders="thief")
    assert [c for c in s.players[1].hand if c in CARDS and IS_RINGLEADER[c]] == ["R1-TH"]
