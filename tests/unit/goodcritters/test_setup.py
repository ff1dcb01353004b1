"""Setup (GC-S01 to GC-S14) and configuration (GC-K01)."""

from __future__ import annotations

from collections import Counter

import pytest

from famiglia.engine import MatchConfig, RuleViolation
from famiglia.rules.goodcritters import INFO, config
from famiglia.rules.goodcritters.data import FUZZ, LOOT_VALUES, card_values, fuzz_gap_range, loot_deck
from famiglia.rules.goodcritters.state import Step

from ._helpers import ENGINE, kinds, new_game, of_kind


@pytest.mark.parametrize("seats", [3, 9, 0])
def test_gc_s01_refuses_fewer_than_4_or_more_than_8_players(seats: int) -> None:
    """GC-S01: Refuses fewer than 4 or more than 8 players."""
    with pytest.raises(RuleViolation) as exc:
        ENGINE.setup(MatchConfig(seats), 1)
    assert exc.value.code == "GC-S01"


@pytest.mark.parametrize("seats", range(4, 9))
def test_gc_s01_plays_4_to_8_players(seats: int) -> None:
    """GC-S01: Plays 4 to 8 players."""
    assert new_game(seats).seats == seats


def test_gc_s02_clockwise_and_left_go_to_the_next_seat() -> None:
    """GC-S02: Clockwise and left go to the next seat."""
    state = new_game(5)
    assert state.left_of(4) == 0
    assert state.left_of(1) == 2
    assert state.clockwise_from(3) == [3, 4, 0, 1, 2]


def test_gc_s03_critters_have_no_powers_every_seat_starts_alike() -> None:
    """GC-S03: Critters have no powers every seat starts alike."""
    state = new_game(8)
    view = ENGINE.view(state, None)
    shapes = {(sv.stash_count, sv.threat_target, sv.has_card, sv.payoff_cards) for sv in view.seat_views}
    assert shapes == {(4, -1, False, 0)}


def test_gc_s04_each_player_has_5_action_cards_1_threat_marker_and_payoff_items() -> None:
    """GC-S04: Each player has 5 action cards 1 threat marker and payoff items."""
    state = new_game(4, options={"payoff.enabled": "true"})
    assert state.payoff_cards == (5, 5, 5, 5)
    assert state.config.tokens_per_player == 2
    assert all(t == -1 for t in state.threats)  # the marker is at hand
    assert len(ENGINE.legal_commands(state, state.boss)) > 0
    assert new_game(4).payoff_cards == (0, 0, 0, 0)


def test_gc_s05_gc_s06_gc_s07_the_loot_deck_is_the_table() -> None:
    """GC-S05, GC-S06, GC-S07: The loot deck is the table."""
    deck = loot_deck()
    assert len(deck) == 140
    assert Counter(c.value for c in deck) == {2000: 35, 3000: 35, 4000: 35, 5000: 35}
    assert Counter(c.type for c in deck) == {
        t: 28 for t in ("cash", "gems", "jewelry", "painting", "sculpture")
    }
    assert sum(c.value for c in deck) == 490_000
    assert deck[0].id == "L001" and deck[0].value == 2000 and deck[0].type == "cash"
    assert deck[7].type == "gems"  # by value, then type, then copy
    assert deck[34].id == "L035" and deck[35].value == 3000
    assert deck[-1].id == "L140" and deck[-1].value == 5000 and deck[-1].type == "sculpture"


@pytest.mark.parametrize("seats", range(4, 9))
def test_gc_s08_gc_s09_every_stash_holds_one_card_of_each_value(seats: int) -> None:
    """GC-S08, GC-S09: Every stash holds one card of each value."""
    state = new_game(seats, seed=seats)
    values = card_values()
    for stash in state.stashes:
        assert sorted(values[c] for c in stash) == list(LOOT_VALUES)
    dealt = {c for s in state.stashes for c in s}
    pile_loot = [c for c in state.pile if c != FUZZ]
    # GC-S09: the pile holds the other 140 - 4N cards, minus what Step 1 showed
    assert len(pile_loot) + len(state.table) == 140 - 4 * seats
    assert dealt.isdisjoint(pile_loot) and dealt.isdisjoint(state.table)


def test_gc_s09_the_deal_is_random_and_private() -> None:
    """GC-S09: The deal is random and private."""
    a, b = new_game(4, seed=1), new_game(4, seed=2)
    assert a.stashes != b.stashes
    events = ENGINE.setup(MatchConfig(4), 1)
    dealt = [e for e in events if e.WhichOneof("kind") == "stash_dealt"]
    assert [ENGINE.visibility(e).seats for e in dealt] == [frozenset({s}) for s in range(4)]


@pytest.mark.parametrize(
    ("seats", "pile", "low", "high"),
    [(4, 124, 62, 82), (5, 120, 68, 85), (6, 116, 69, 92), (7, 112, 80, 96), (8, 108, 86, 108)],
)
def test_gc_s10_gc_s11_the_fuzz_lies_in_its_part_of_the_pile(
    seats: int, pile: int, low: int, high: int
) -> None:
    """GC-S10, GC-S11: The fuzz lies in its part of the pile."""
    assert fuzz_gap_range(seats, pile) == (low, high)
    assert high - low + 1 in (21, 18, 24, 17, 23)
    for seed in range(40):
        events = ENGINE.setup(MatchConfig(seats), seed)
        (stacked,) = of_kind(events, "pile_stacked")
        assert len(stacked.cards) == pile + 1
        assert stacked.cards[stacked.fuzz_position] == FUZZ
        assert low <= stacked.fuzz_position <= high


def test_gc_s10_the_fuzz_position_varies_over_its_range() -> None:
    """GC-S10: The fuzz position varies over its range."""
    positions = set()
    for seed in range(200):
        (stacked,) = of_kind(ENGINE.setup(MatchConfig(4), seed), "pile_stacked")
        positions.add(stacked.fuzz_position)
    assert min(positions) == 62 and max(positions) == 82


def test_gc_s12_gc_s13_the_configured_first_boss_takes_the_marker() -> None:
    """GC-S12, GC-S13: The configured first boss takes the marker."""
    assert new_game(6, options={"first_boss_seat": "4"}).boss == 4
    with pytest.raises(RuleViolation) as exc:
        new_game(4, options={"first_boss_seat": "6"})
    assert exc.value.code == "GC-K01" and "GC-S13" in exc.value.message


@pytest.mark.parametrize("seat", [0, 3])
def test_gc_s13_a_configured_first_boss_holds_for_every_seed_seat_0_included(seat: int) -> None:
    """GC-S13: seat 0 is a configured seat like any other, not "no configuration"; the match's
    generator never overrides it."""
    for seed in range(12):
        assert new_game(4, seed=seed, options={"first_boss_seat": str(seat)}).boss == seat


def test_gc_s13_without_configuration_the_first_boss_is_random_and_public() -> None:
    """GC-S13: Without configuration the first boss is random and public."""
    bosses = {new_game(5, seed=s).boss for s in range(40)}
    assert bosses == set(range(5))
    events = ENGINE.setup(MatchConfig(5), 3)
    assert events[0].game_set_up.first_boss == new_game(5, seed=3).boss
    assert ENGINE.visibility(events[0]).kind.name == "PUBLIC"


def test_gc_s14_the_first_round_starts_at_step_1_with_an_empty_table() -> None:
    """GC-S14: The first round starts at step 1 with an empty table."""
    events = ENGINE.setup(MatchConfig(4), 9)
    k = kinds(events)
    assert k[:1] == ["game_set_up"] and k.count("stash_dealt") == 4
    started = of_kind(events, "round_started")[0]
    assert started.round == 1 and started.step == Step.SHOW_LOOT
    # nothing is on the table before Step 1 turns the cards up
    assert k.index("round_started") < k.index("loot_revealed")
    state = new_game(4, seed=9)
    assert all(t == -1 for t in state.threats)


def test_gc_k01_every_configuration_key_is_an_option_with_its_rule() -> None:
    """GC-K01: Every configuration key is an option with its rule."""
    keys = {o.key for o in INFO.options}
    for key in (
        "loot_copies_per_value_and_type",
        "first_boss_seat",
        "step3_mode",
        "step3_public_change_limit",
        "step3_card_choice_limit",
        "winner_tiebreak",
        "payoff.enabled",
        "timeouts.step3_s",
        "stash_counts_public",
        "skim_fuzz_failed_vote_extra_cards",
    ):
        assert key in keys
    assert all(o.rule.startswith("GC-") for o in INFO.options)
    assert INFO.defaults()["step3_public_change_limit"] == "3"


@pytest.mark.parametrize(
    ("key", "value", "rule"),
    [
        ("step3_mode", "sometimes", "GC-D06"),
        ("step3_card_choice_limit", "0", "GC-D10"),
        ("payoff.enabled", "maybe", "GC-P01"),
        ("no_such_key", "1", "GC-K01"),
        ("timeouts.step3_s", "-5", "GC-D05"),
        ("loot_values", "1,2", "GC-S05"),
    ],
)
def test_gc_k01_bad_options_are_refused_with_their_rule_id(key: str, value: str, rule: str) -> None:
    """GC-K01: Bad options are refused with their rule id."""
    with pytest.raises(RuleViolation) as exc:
        ENGINE.setup(MatchConfig(4, {key: value}), 1)
    assert exc.value.code == "GC-K01"
    assert rule in exc.value.message


def test_gc_k01_options_are_normalized_into_the_first_event() -> None:
    """GC-K01: Options are normalized into the first event."""
    events = ENGINE.setup(MatchConfig(4, {"payoff.enabled": "1"}), 1)
    options = {o.key: o.value for o in events[0].game_set_up.options}
    assert options["payoff.enabled"] == "true"
    assert set(options) == {o.key for o in config.OPTIONS}


def test_gc_k01_a_small_test_deck_deals_and_plays() -> None:
    """GC-K01: A small test deck deals and plays."""
    state = new_game(5, options={"loot_copies_per_value_and_type": "1"})
    assert len(loot_deck(1)) == 20
    assert len([c for c in state.pile if c != FUZZ]) + len(state.table) == 0
    assert state.over  # GC-E01: The Fuzz! is the only card of the pile
    with pytest.raises(RuleViolation):
        new_game(6, options={"loot_copies_per_value_and_type": "1"})


def test_gc_s10_the_seeds_five_player_example() -> None:
    """GC-S10, the seed's own example: with five players the pile is cut into 7 parts and The
    Fuzz! is shuffled into the fifth, so 4 parts lie above it and 2 below."""
    pile = 140 - 4 * 5
    part = pile / 7
    for seed in range(60):
        (stacked,) = of_kind(ENGINE.setup(MatchConfig(5), seed), "pile_stacked")
        above = stacked.fuzz_position
        below = len(stacked.cards) - 1 - above
        assert above >= int(4 * part) and below >= int(2 * part), (seed, above, below)
