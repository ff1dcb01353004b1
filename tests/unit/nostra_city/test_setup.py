"""Setup (NC-S01..S16) and months, phases and turns (NC-R01..R08)."""

from __future__ import annotations

from collections import Counter

import pytest

from famiglia.engine import MatchConfig, RuleViolation
from famiglia.rules.nostra_city import ENGINE
from famiglia.rules.nostra_city.data import (
    INVESTIGATION_BY_ID,
    NOTE_MARK,
    NOTE_VALUE,
    POLICE_RAID,
    SEAT_COLOURS,
    VENDETTA,
)
from famiglia.rules.nostra_city.flow import clockwise_from, phase_order
from famiglia.rules.nostra_city.state import Phase

from .helpers import END, business_table, cash_in, kinds, run, start, table


@pytest.mark.parametrize("seats", [1, 2, 6])
def test_nc_s01_only_three_to_five_players(seats: int) -> None:
    """NC-S01: only three to five players."""
    with pytest.raises(RuleViolation) as exc:
        ENGINE.setup(MatchConfig(seats=seats), 1)
    assert exc.value.code == "NC-S01"


def test_nc_s02_seats_and_clockwise_order() -> None:
    """NC-S02: seats and clockwise order."""
    assert clockwise_from(3, 5) == (3, 4, 0, 1, 2)
    assert SEAT_COLOURS == ("red", "blue", "green", "yellow", "black")


@pytest.mark.parametrize("seats", [3, 4, 5])
def test_nc_s03_s04_s05_each_player_starts_with_three_wiseguys_a_turf_and_the_bank(seats: int) -> None:
    """NC-S03, NC-S04, NC-S05: each player starts with three wiseguys a turf and the bank."""
    s = start(seats)
    for p in s.players:
        assert len(p.wiseguys) == 3 and len(p.turfs) == 1 and not p.busy  # NC-S04
        assert p.locations == (1, 2, 3, 4) and p.trophies == ()  # NC-S03: Respect 0, 4 Locations
        faces = sorted((NOTE_VALUE[n], NOTE_MARK[n]) for n in p.bank)  # NC-S05
        assert faces == [(5000, ""), (5000, ""), (10000, "G"), (10000, "I")]


@pytest.mark.parametrize("seats,deck", [(3, 34), (4, 30), (5, 26)])
def test_nc_s06_s07_street_deck_size_and_street_filled(seats: int, deck: int) -> None:
    """NC-S06, NC-S07: street deck size and street filled."""
    s = start(seats)
    assert all(s.street) and not any(c in INVESTIGATION_BY_ID for c in s.street)  # NC-S07
    assert len(s.street_deck) + 4 == deck  # NC-S06: 46 - 4N before the fill


def test_nc_s08_setup_investigations_are_shuffled_back() -> None:
    """NC-S08: setup investigations are shuffled back."""
    for seed in range(30):
        events = ENGINE.setup(MatchConfig(seats=4, options={}), seed)
        if "street_card_set_aside" in kinds(events):
            s = start(4, seed=seed)
            assert s.set_aside == ()
            assert sum(1 for c in s.street_deck if c in INVESTIGATION_BY_ID) == 6
            shuffles = [e for e in events if e.WhichOneof("kind") == "deck_shuffled" and e.deck_shuffled.deck == "street"]
            assert len(shuffles) == 2
            return
    raise AssertionError("no seed revealed an Investigation during setup")


def test_nc_s09_s10_note_deck_with_the_police_raid_and_vendetta_deck() -> None:
    """NC-S09, NC-S10: note deck with the police raid and vendetta deck."""
    s = start(4)
    assert POLICE_RAID in s.note_deck and len(s.note_deck) == 80 - 16 + 1
    assert s.note_discard == ()
    assert sorted(s.vendetta_deck) == sorted(v.id for v in VENDETTA)


def test_nc_s11_s12_titles_zealous_and_bonuses_lie_beside_the_board() -> None:
    """NC-S11, NC-S12: titles zealous and bonuses lie beside the board."""
    s = start(3)
    assert s.zealous_left == ("ZC1", "ZC2", "ZC3") and s.titles == () and s.underboss == "later"


@pytest.mark.parametrize("seats,v", [(3, 2), (4, 2), (5, 3)])
def test_nc_s13_verdict_token_start(seats: int, v: int) -> None:
    """NC-S13: verdict token start."""
    assert start(seats).verdict == v


def test_nc_s14_date_token_on_january() -> None:
    """NC-S14: date token on january."""
    s = start(4)
    assert s.month == 1 and s.phase is Phase.BUSINESS


def test_nc_s15_s16_first_player_named_or_random() -> None:
    """NC-S15, NC-S16: first player named or random."""
    assert start(4, first_player_seat="2").first_player == 2
    firsts = {start(4, seed=seed, first_player_seat="random").first_player for seed in range(20)}
    assert len(firsts) > 1


def test_nc_r01_r02_r03_turns_go_clockwise_from_the_first_player() -> None:
    """NC-R01, NC-R02, NC-R03: turns go clockwise from the first player."""
    s = start(4, first_player_seat="2")
    assert s.order == (2, 3, 0, 1) and s.turn_seat == 2


def test_nc_r04_a_turn_is_any_number_of_actions_then_end_turn() -> None:
    """NC-R04: a turn is any number of actions then end turn."""
    s = business_table()
    s, _ = run(s, 0, cash_in("W01", "T01", "queens"))
    assert s.choice is not None and s.choice.kind == "distribute"
    s = table(s, choice=None)
    s, events = run(s, 0, cash_in("W02", "T02", "drugs"))
    s = table(s, choice=None)
    s, events = run(s, 0, END)
    assert s.turn_seat == 1


def test_nc_r05_r06_every_action_makes_a_free_wiseguy_busy() -> None:
    """NC-R05, NC-R06: every action makes a free wiseguy busy."""
    s = business_table()
    s, _ = run(s, 0, cash_in("W01", "T01", "gambling"))
    assert {"W01", "T01"} <= s.players[0].busy


def test_nc_r07_cards_won_enter_free() -> None:
    """NC-R07: cards won enter free."""
    from famiglia.nostra_city.v1 import nostra_city_pb2 as pb
    from famiglia.rules.nostra_city.evolve import evolve

    s = business_table()
    s = evolve(s, pb.Event(card_won=pb.CardWon(seat=0, card="W15", space=1)))
    assert "W15" in s.players[0].wiseguys and "W15" not in s.players[0].busy


def test_nc_r08_atlantic_city_is_never_busy() -> None:
    """NC-R08: atlantic city is never busy."""
    from .helpers import seat

    s = seat(business_table(), 0, turfs=("AC",))
    assert ENGINE.legal_commands(s, 0) and all(c.WhichOneof("kind") != "cash_in" for c in ENGINE.legal_commands(s, 0))
    assert Counter(phase_order(s, Phase.BUSINESS)) == Counter(range(4))
