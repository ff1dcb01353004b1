"""Setup and data tables: NP-S1..S12, NP-X5, NP-X15, NP-C32, NP-V6, NP-V7 and Tables A-H."""

from __future__ import annotations

import pytest

from famiglia.engine import MatchConfig, Rng, RuleViolation
from famiglia.rules.nothing_personal import INFO
from famiglia.rules.nothing_personal.data import (
    ARREST_LIMIT,
    CARD,
    CODE_KINDS,
    DICE,
    GANGSTERS,
    INFLUENCE,
    POSITIONS,
    START_CAPO,
    G,
    load_gangsters,
    load_influence,
)
from famiglia.rules.nothing_personal.effects import DICE_CODES, EFFECTS, PASSIVE_CODES, ROLL_CODES
from famiglia.rules.nothing_personal.setup import deal_board

from .support import ENGINE, Phase, kinds, new, of, play, round1


def test_np_s1_three_to_five_seats_with_25_markers_0_respect_and_5_dollars() -> None:
    """NP-S1."""
    for bad in (2, 6):
        with pytest.raises(RuleViolation) as exc:
            ENGINE.setup(MatchConfig(bad), 1)
        assert exc.value.code == "NP-S1"
    s = new(5)
    assert s.supply == (25,) * 5 and s.respect == (0,) * 5 and s.money == (5,) * 5


def test_np_s2_colours_in_seat_order_unless_configured() -> None:
    """NP-S2."""
    assert new(3).cfg.colours == ("purple", "brown", "orange")
    assert new(3, colours="red,green,blue").cfg.colours == ("red", "green", "blue")
    with pytest.raises(RuleViolation) as exc:
        new(3, colours="red,red,blue")
    assert exc.value.code == "NP-S2"


def test_np_s3_shared_supplies_and_table_a_constants() -> None:
    """NP-S3."""
    s = new(4)
    assert (s.neutral, s.bm_free, s.om_free) == (25, 8, 2)
    assert set(DICE) == {"move", "whack", "number"}                         # Table E
    assert ARREST_LIMIT == {3: 9, 4: 10, 5: 11}                                # Table A
    assert len(GANGSTERS) == 50 and len(INFLUENCE) == 94


def test_np_s4_loader_rejects_bad_data() -> None:
    """NP-S4."""
    good = [{"id": "M00", "name": "x", "types": [], "respect": 1, "money": 1, "ability": "", "start_capo": True}]
    load_gangsters(good)
    with pytest.raises(RuleViolation):
        load_gangsters([dict(good[0], start_capo=False)])                      # no starting Capo
    with pytest.raises(RuleViolation):
        load_gangsters([dict(good[0], types=["banker"])])                      # unknown type
    card = {"id": "I1", "set": "A", "groups": ["thug:2"], "keyword": "none", "timing": "commission", "effect": ""}
    load_influence([card])
    for bad in ({"groups": []}, {"groups": ["cop:2"]}, {"keyword": "maybe"}, {"timing": "never"},
                {"keyword": "AND", "effect": "FLY"}):
        with pytest.raises(RuleViolation):
            load_influence([dict(card, **bad)])


def test_np_c32_pairing_rules_are_enforced_by_the_loader() -> None:
    """NP-C32."""
    card = {"id": "I1", "set": "A", "groups": ["thug:2"], "keyword": "OR", "timing": "commission",
            "effect": "EXTRA_5"}
    with pytest.raises(RuleViolation) as exc:
        load_influence([card])
    assert exc.value.code == "NP-C32"
    with pytest.raises(RuleViolation):
        load_gangsters([{"id": "M00", "name": "x", "types": [], "respect": 1, "money": 1,
                         "ability": "SNITCH", "start_capo": True}])   # a card code on a gangster
    with pytest.raises(RuleViolation) as exc:
        load_influence([dict(card, keyword="none", effect="TAKE_6")])   # NP-C10: none has no effect
    assert exc.value.code == "NP-C10"


def test_table_f_every_code_has_a_function_and_every_function_is_used() -> None:
    used = {g.ability for g in GANGSTERS if g.ability} | {c.effect for c in INFLUENCE if c.effect} \
        | {p.ability for p in POSITIONS.values()}
    handled = set(EFFECTS) | ROLL_CODES | PASSIVE_CODES
    assert used <= handled
    assert set(EFFECTS) <= used and DICE_CODES <= used
    assert set(CODE_KINDS) == handled


def test_tables_g_and_h_have_the_documented_composition() -> None:
    counts = {t: sum(1 for g in GANGSTERS if t in g.types) for t in ("thug", "hitman", "conman", "gambler")}
    assert counts == {"thug": 12, "hitman": 12, "conman": 12, "gambler": 13}
    sets = {}
    for c in INFLUENCE:
        sets[c.set] = sets.get(c.set, 0) + 1
    assert sets == {"A": 20, "B": 8, "C": 12, "D": 7, "E": 9, "F": 8, "G": 3, "H": 8, "I": 4, "J": 15}
    assert CARD["I93"].keyword == "AND" and CARD["I93"].effect == "INVITE_1"


def test_np_s5_the_starting_capo_goes_to_position_9() -> None:
    """NP-S5."""
    assert START_CAPO == "M00" and G["M00"].types == frozenset()
    assert new(4, seed=7).board[8] == "M00"


@pytest.mark.parametrize("seed", range(25))
def test_np_s6_positions_8_to_5_show_all_four_types(seed: int) -> None:
    """NP-S6."""
    spots, aside, deck = deal_board(Rng(seed), random_setup=False)
    shown = set().union(*(G[g].types for g in spots[4:8]))
    assert shown == {"thug", "hitman", "conman", "gambler"}
    for i, gid in enumerate(spots[4:8]):   # each kept card adds a type no card kept before showed
        before = set().union(*[G[g].types for g in spots[4:8][:i]]) if i else set()
        assert G[gid].types - before


def test_np_s7_remaining_cards_deal_4_to_1_then_associates_and_the_rest_is_the_deck() -> None:
    """NP-S7."""
    spots, aside, deck = deal_board(Rng(3), random_setup=False)
    assert all(spots) and len(deck) == 50 - 12
    assert set(aside) <= set(spots[:4]) | set(spots[9:]) | set(deck)   # set-aside cards were reshuffled in


def test_np_x5_a_short_deck_keeps_the_next_card_anyway() -> None:
    """NP-X5."""
    # With only thugs left in the deck no card shows a missing type, so the next card is kept.
    from famiglia.rules.nothing_personal import setup as setup_mod

    thugs = tuple(g for g in GANGSTERS if "thug" in g.types or g.start_capo)
    spots, aside, deck = setup_mod.deal_board(Rng(1), False, thugs)
    assert all(spots[4:8]) and aside == []


def test_np_x15_a_card_with_several_types_matches_each() -> None:
    """NP-X15."""
    from famiglia.rules.nothing_personal.board import icon_targets
    from famiglia.rules.nothing_personal.data import Gangster

    from .support import place, replace

    s = place(new(4), {1: "T01"})
    G["ZZ1"] = Gangster("ZZ1", "two-type", frozenset({"thug", "hitman"}), 1, 1, "")
    try:
        s2 = replace(s, board=("ZZ1",) + s.board[1:])
        assert "ZZ1" in icon_targets(s2, "thug") and "ZZ1" in icon_targets(s2, "hitman")
    finally:
        del G["ZZ1"]


def test_np_s8_four_cards_each_rest_is_the_deck_discard_empty() -> None:
    """NP-S8."""
    s = new(5)
    assert [len(h) for h in s.hands] == [4] * 5 and len(s.deck) == 94 - 20 and s.discard == ()


def test_np_s9_first_ring_holder_drawn_with_the_match_rng() -> None:
    """NP-S9."""
    holders = {new(4, seed=seed).ring for seed in range(30)}
    assert holders == {0, 1, 2, 3}


def test_np_s10_three_laps_in_ring_order_each_seat_places_3_on_active_gangsters() -> None:
    """NP-S10."""
    s = new(4, seed=2)
    assert s.phase == Phase.SETUP and len(s.order) == 12
    assert s.order[:4] == tuple((s.ring + i) % 4 for i in range(4))
    assert [p.seat for p in ENGINE.pending(s)] == [s.ring]
    with pytest.raises(RuleViolation) as exc:
        play(s, s.ring, ENGINE.timeout_command(s, s.ring).__class__(
            place_setup_marker={"gangster": s.board[9]}))   # an Associate is not active
    assert exc.value.code == "NP-S10"
    done = round1(4, seed=2)
    assert all(25 - sup == 3 for sup in done.supply)


def test_np_s11_setup_order_is_fixed_even_if_the_ring_moves() -> None:
    """NP-S11."""
    from .support import cmd

    s = new(3, seed=4)
    first = s.ring
    order = s.order
    # the first seat takes the Capo alone: the ring moves to it at once (NP-S12), the order stays
    _, s = play(s, order[0], cmd("place_setup_marker", gangster="M00"))
    assert s.order == order
    assert s.ring == order[0] == first


def test_np_s12_ring_rule_applies_from_the_first_setup_marker_then_round_1_begins() -> None:
    """NP-S12."""
    from .support import cmd

    s = new(3, seed=5)
    second = s.order[1]
    _, s = play(s, s.order[0], cmd("place_setup_marker", gangster=s.board[0]))
    events, s = play(s, second, cmd("place_setup_marker", gangster="M00"))
    assert of(events, "ring_moved")[0].seat == second
    s = round1(3, seed=5)
    assert s.round == 1 and s.phase == Phase.COMMISSION


def test_np_v6_random_setup_deals_every_card_including_the_capo() -> None:
    """NP-V6."""
    starts = {deal_board(Rng(seed), random_setup=True)[0][8] for seed in range(40)}
    assert len(starts) > 5
    assert new(4, random_setup="true").board[8] in {g.id for g in GANGSTERS}


def test_np_v7_expansion_sets_are_refused_since_no_data_is_shipped() -> None:
    """NP-V7."""
    with pytest.raises(RuleViolation) as exc:
        new(4, expansions="Young Turks")
    assert exc.value.code == "NP-V7"


def test_options_are_validated_and_listed_with_rule_ids() -> None:
    assert all(o.rule.startswith("NP-") for o in INFO.options)
    for bad in ({"commission_turns": "many"}, {"reroll_tokens": "yes"}, {"nonsense": "1"}):
        with pytest.raises(RuleViolation):
            ENGINE.setup(MatchConfig(4, bad), 1)


def test_setup_events_are_public_except_deck_orders() -> None:
    events = ENGINE.setup(MatchConfig(4), 9)
    vis = {k: ENGINE.visibility(e).kind.name for k, e in zip(kinds(events), events, strict=True)}
    assert vis["gangster_deck_ordered"] == "SERVER" and vis["influence_deck_ordered"] == "SERVER"
    assert vis["cards_received"] == "PRIVATE" and vis["board_dealt"] == "PUBLIC"
