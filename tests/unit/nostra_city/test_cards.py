"""Card tables and Vendetta cards (NC-K01..K90)."""

from __future__ import annotations

from collections import Counter

import pytest

from famiglia.engine import MatchConfig, RuleViolation
from famiglia.rules.nostra_city import ENGINE, INFO
from famiglia.rules.nostra_city import effects as effects_module
from famiglia.rules.nostra_city.config import OPTIONS
from famiglia.rules.nostra_city.data import (
    BONUS_CARDS,
    BONUS_RESPECT,
    INVESTIGATIONS,
    NOTES,
    POLICE_RAID,
    RACKET_COLOURS,
    RESPECT_CARDS,
    TITLE_RESPECT,
    TRAFFIC_ICONS,
    TURFS,
    VENDETTA,
    WISEGUYS,
    ZEALOUS_CARDS,
)
from famiglia.rules.nostra_city.effects import EFFECTS
from famiglia.rules.nostra_city.queries import seat_respect
from famiglia.rules.nostra_city.state import Phase

from .helpers import (
    END,
    bid,
    business_table,
    cash_in,
    corrupt,
    distribute,
    meeting_table,
    notes,
    of_kind,
    rage,
    refused,
    revenge,
    run,
    seat,
    table,
)


def test_nc_k01_k02_k03_k04_k05_the_fourteen_turfs() -> None:
    """NC-K01, NC-K02, NC-K03, NC-K04, NC-K05: 14 Turfs, 3 icons, 4 colours, two two-colour Turfs."""
    assert len(TURFS) == 14
    assert TRAFFIC_ICONS == ("gambling", "drugs", "prostitution")
    assert RACKET_COLOURS == ("queens", "brooklyn", "bronx", "staten_island")
    two = [t for t in TURFS if len(t.colours) == 2]
    assert [t.name for t in two] == ["Connecticut", "New Jersey"] and all(not t.icons and t.respect for t in two)
    for colour in RACKET_COLOURS:  # each colour has one Turf of each icon
        assert sorted(i for t in TURFS if t.colours == (colour,) for i in t.icons) == sorted(TRAFFIC_ICONS)


def test_nc_k10_k11_k12_k13_k14_street_deck_cards() -> None:
    """NC-K10, NC-K11, NC-K12, NC-K13, NC-K14: Respect and Investigation cards; no Underboss in the deck."""
    assert RESPECT_CARDS == {"R1": 1, "R2": 1, "R3": 1, "R4": 2, "R5": 2, "R6": 3}
    assert [i.backhander for i in INVESTIGATIONS] == [30000, 30000, 30000, 40000, 20000, 50000]
    assert all(i.guilt == 1 for i in INVESTIGATIONS)
    s = ENGINE.setup(MatchConfig(seats=3), 1)
    assert "UB" not in str(s[:12])


def test_nc_k15_investigation_effects_apply_only_on_the_street() -> None:
    """NC-K15: I5 needs 2-Note bids; I6 allows one Corruption; in a Territory they do nothing."""
    s = table(meeting_table(), street=("I5", "R2", "R3", "R4"))
    assert refused(s, 0, bid("W01", 2, [s.players[0].bank[0]])) == "NC-K15"
    run(s, 0, bid("W01", 2, list(s.players[0].bank[:2])))
    s = table(meeting_table(), phase=Phase.TRIAL, street=("I6", "R2", "R3", "R4"))
    s2, _ = run(s, 0, corrupt("W01", [s.players[0].bank[0]]))
    assert s2.turn_seat == 1  # no second Corruption possible: the turn ended itself (NC-D03)
    s2 = table(s2, turn=0)
    assert refused(s2, 0, corrupt("W02", [s2.players[0].bank[0]])) == "NC-K15"
    s3 = seat(table(s, street=("R1", "R2", "R3", "R4")), 1, trophies=("I6",))
    s3, _ = run(s3, 0, corrupt("W01", [s3.players[0].bank[0]]))
    run(s3, 0, corrupt("W02", [s3.players[0].bank[0]]))


def test_nc_k20_k21_k22_titles_zealous_and_bonus_cards() -> None:
    """NC-K20, NC-K21, NC-K22."""
    assert TITLE_RESPECT == {"UB": 3, "CG": 2, "PC": 1}
    assert ZEALOUS_CARDS == ("ZC1", "ZC2", "ZC3")
    assert BONUS_CARDS == {"B1": "most_vendetta_drawn", "B2": "most_wiseguys", "B3": "most_turfs"}
    assert BONUS_RESPECT == 2


def test_nc_k23_every_vendetta_card_drawn_counts() -> None:
    """NC-K23: Atlantic City drawn still counts for B1."""
    s = table(business_table(), note_deck=(*notes(5000, k=3, skip=20), POLICE_RAID), first_player_moved=True,
              vendetta_deck=("V03", "V04"))
    s, _ = run(s, 0, cash_in("W02", "T01", "gambling"))
    s, _ = run(s, 0, distribute({}))
    assert s.players[1].vendetta_drawn == 1 and "AC" in s.players[1].turfs  # NC-K45
    assert s.players[2].vendetta_drawn == 1 and s.players[2].hand == ("V04",)


def test_nc_k30_k31_k32_k33_the_note_set() -> None:
    """NC-K30, NC-K31, NC-K32, NC-K33: 80 Notes and one Police Raid."""
    assert len(NOTES) == 80 and POLICE_RAID == 80
    faces = Counter((n.value, n.mark) for n in NOTES)
    assert faces == {(5000, ""): 30, (10000, "I"): 15, (10000, "G"): 15, (20000, "I"): 8, (20000, "G"): 8,
                     (50000, "I"): 2, (50000, "G"): 2}


def test_nc_k34_k35_discarded_notes_return_only_by_the_raid() -> None:
    """NC-K34, NC-K35: the discard pile is face up but only its size is viewable (NC-H11)."""
    s = table(business_table(), note_discard=tuple(notes(20000, "G", 2)))
    v = ENGINE.view(s, 0)
    assert v.note_discard_size == 2 and "note_discard" not in str(v.ListFields())


def test_nc_k40_k41_k42_the_vendetta_deck() -> None:
    """NC-K40, NC-K41, NC-K42: 20 cards, two FBI Snitches."""
    assert len(VENDETTA) == 20
    assert Counter(v.name for v in VENDETTA) == {"FBI Snitch": 2, "Atlantic City": 1, "Hit": 3, "Burglary": 3,
                                                   "Tip-off": 3, "Beating": 4, "Smash the Joint": 4}


def test_nc_k43_k44_k46_cards_drawn_only_when_cheated_and_resolved_one_by_one() -> None:
    """NC-K43, NC-K44, NC-K46: a Snitch goes secretly into the hand; nobody draws without Cheating."""
    s = table(business_table(), note_deck=(*notes(5000, k=3, skip=20), POLICE_RAID), first_player_moved=True,
              vendetta_deck=("V01", "V12"))
    s0, events = run(s, 0, cash_in("W02", "T01", "gambling"))
    s1, events = run(s0, 0, distribute({1: [s0.choice.notes[0]], 2: [s0.choice.notes[1]]}))
    assert not of_kind(events, "vendetta_drawn")
    s2, events = run(s0, 0, distribute({2: [s0.choice.notes[1]]}))
    assert s2.players[1].hand == ("V01",) and of_kind(events, "vendetta_drawn")[0].card == ""


def test_nc_k45_k48_k53_rage_beating_against_the_active_player() -> None:
    """NC-K45, NC-K48, NC-K53: a drawn Beating goes at once against the cash-in's active player."""
    s = table(business_table(), note_deck=(*notes(5000, k=3, skip=20), POLICE_RAID), first_player_moved=True,
              vendetta_deck=("V13",))
    s, _ = run(s, 0, cash_in("W02", "T01", "gambling"))
    s, _ = run(s, 0, distribute({2: [s.choice.notes[1]]}))
    assert s.choice.kind == "rage" and s.choice.seat == 1 and s.choice.cause == 0
    assert refused(s, 1, rage(2, "W06")) == "NC-K48"
    s, events = run(s, 1, rage(0, "W18"))
    assert "W18" in s.players[0].busy and s.vendetta_discard == ("V13",)


def test_nc_k54_smash_the_joint_discards_a_random_bank_note() -> None:
    """NC-K54: one fixed target, so it resolves at once (NC-D03)."""
    s = table(business_table(), note_deck=(*notes(5000, k=3, skip=20), POLICE_RAID), first_player_moved=True,
              vendetta_deck=("V17",))
    s, _ = run(s, 0, cash_in("W02", "T01", "gambling"))
    before = len(s.players[0].bank)
    s, events = run(s, 0, distribute({2: [s.choice.notes[1]]}))
    assert len(s.players[0].bank) == before + 2 - 1 and len(s.note_discard) == 1  # kept 2, lost 1


def test_nc_k47_k50_k51_k52_revenge_cards_at_the_start_of_ones_own_turn() -> None:
    """NC-K47, NC-K50 (Hit), NC-K51 (Burglary), NC-K52 (Tip-off)."""
    s = seat(business_table(), 0, hand=("V04", "V07", "V10"))
    s, _ = run(s, 0, revenge("V04", 1, wiseguy="W03"))
    assert "W03" not in s.players[1].wiseguys and "W03" in s.removed
    s, events = run(s, 0, revenge("V07", 2))
    assert len(s.players[2].bank) == 2 and len(s.players[0].bank) == 6
    assert of_kind(events, "notes_stolen")[0].count == 2
    s, _ = run(s, 0, revenge("V10", 3, turf="T05"))
    assert "T05" in s.players[3].busy
    s = seat(s, 0, hand=("V05",))
    s, _ = run(s, 0, cash_in("W01", "T01", "queens"))
    s = table(s, choice=None)
    assert refused(s, 0, revenge("V05", 1, wiseguy="W04")) == "NC-K47"


def test_nc_k50_hit_spares_a_wiseguy_carrying_a_bid() -> None:
    """NC-K50: in the Meeting a Wiseguy with a bid cannot be hit."""
    s = meeting_table()
    s, _ = run(s, 0, bid("W01", 1, [s.players[0].bank[0]]))
    s, _ = run(s, 0, END)
    s = seat(s, 1, hand=("V04",))
    assert refused(s, 1, revenge("V04", 0, wiseguy="W01")) == "NC-K50"
    run(s, 1, revenge("V04", 0, wiseguy="W02"))


def test_nc_k55_discards_are_reshuffled_when_the_vendetta_deck_runs_out() -> None:
    """NC-K55."""
    s = table(business_table(), note_deck=(*notes(5000, k=3, skip=20), POLICE_RAID), first_player_moved=True,
              vendetta_deck=(), vendetta_discard=("V05",))
    s, _ = run(s, 0, cash_in("W02", "T01", "gambling"))
    s, events = run(s, 0, distribute({2: [s.choice.notes[1]]}))
    assert s.players[1].hand == ("V05",) and of_kind(events, "deck_shuffled")


def test_nc_k60_four_location_cards_per_player() -> None:
    """NC-K60."""
    assert all(p.locations == (1, 2, 3, 4) for p in business_table().players)


def test_nc_k90_options_are_described_and_validated() -> None:
    """NC-K90: every option has a default and a rule id; bad values are refused."""
    assert INFO.options == OPTIONS and all(o.rule.startswith("NC-") for o in OPTIONS)
    for bad in ({"verdict_count_mode": "dice"}, {"nonsense": "1"}, {"verdict_start_4": "x"}):
        with pytest.raises(RuleViolation) as exc:
            ENGINE.setup(MatchConfig(seats=4, options=bad), 1)
        assert exc.value.code == "NC-K90"
    s = ENGINE.setup(MatchConfig(seats=4, options={"verdict_start_4": "-1"}), 1)
    assert s[0].match_set_up.options["verdict_start_4"] == "-1"


def test_every_effect_code_has_a_function_and_every_function_is_used() -> None:
    """STYLE: data effect codes and effects.EFFECTS match; every Wiseguy power is referenced."""
    assert {v.effect for v in VENDETTA} == set(EFFECTS)
    import pathlib

    root = pathlib.Path(effects_module.__file__).parent
    code = "".join(p.read_text() for p in root.rglob("*.py") if p.name != "data.py")
    for w in WISEGUYS:
        assert f'"{w.effect}"' in code, w.effect


def test_respect_helper_reads_the_territory() -> None:
    """NC-V12 via NC-K12."""
    assert seat_respect(seat(business_table(), 2, trophies=("R5",)), 2) == 2


def test_nc_k90_respect_values_come_from_configuration() -> None:
    """NC-K90 with NC-K04, NC-M10, NC-K21: Respect defaults are options, not code."""
    s = business_table(two_colour_turf_respect="2", investigation_win_respect="3", zealous_respect="2",
                       zealous_cards="1")
    s = seat(s, 1, trophies=("I1", "ZC1"))
    assert seat_respect(s, 1) == 2 + 3 + 2 and s.zealous_left == ("ZC1",)
    with pytest.raises(RuleViolation):
        ENGINE.setup(MatchConfig(seats=4, options={"months": "7"}), 1)


def test_nc_k45_k52_tip_off_never_makes_atlantic_city_busy() -> None:
    """NC-K45, NC-K52: Atlantic City is never Busy, so a Tip-off cannot name it even when it is the
    target's only Free Turf."""
    s = seat(business_table(), 0, hand=("V10",))
    s = seat(s, 3, turfs=("T05", "AC"), busy=frozenset({"T05"}))
    assert refused(s, 0, revenge("V10", 3, turf="AC")) == "NC-K52"


def test_nc_k52_tip_off_names_only_a_free_turf() -> None:
    """NC-K52: the chosen Turf must be Free; a target whose Turfs are all Busy (or Atlantic City)
    is no Tip-off target at all (NC-K47: only against a player on whom it has an effect)."""
    s = seat(business_table(), 0, hand=("V10",))
    s = seat(s, 1, busy=frozenset({"T04"}))  # T13 still Free
    assert refused(s, 0, revenge("V10", 1, turf="T04")) == "NC-K52"
    s2, _ = run(s, 0, revenge("V10", 1, turf="T13"))
    assert {"T04", "T13"} <= s2.players[1].busy
    s = seat(s, 3, turfs=("T05", "AC"), busy=frozenset({"T05"}))
    assert refused(s, 0, revenge("V10", 3, turf="T05")) == "NC-K52"
    assert not [c for c in ENGINE.legal_commands(s, 0) if c.WhichOneof("kind") == "play_vendetta"
                and c.play_vendetta.target == 3]
