"""THE BUSINESS: Cash-in, Police Raid, distribution, Cheating (NC-B01..B16)."""

from __future__ import annotations

from famiglia.rules.nostra_city.data import POLICE_RAID
from famiglia.rules.nostra_city.queries import shares

from .helpers import business_table, cash_in, distribute, notes, of_kind, refused, run, seat, table


def test_nc_b01_cash_in_declares_a_type_printed_on_the_source_turf() -> None:
    """NC-B01: cash in declares a type printed on the source turf."""
    s = business_table()
    s2, events = run(s, 0, cash_in("W01", "T01", "gambling"))
    fact = of_kind(events, "cashed_in")[0]
    assert fact.declared == "gambling" and fact.turf == "T01"
    assert refused(s, 0, cash_in("W01", "T01", "drugs")) == "NC-B01"


def test_nc_b02_busy_turf_cannot_be_a_source_but_still_counts() -> None:
    """NC-B02: busy turf cannot be a source but still counts."""
    s = seat(business_table(), 1, busy=frozenset({"T04"}))
    assert shares(s, "gambling")[1] == 1  # the Busy T04 counts
    s = seat(s, 0, busy=frozenset({"T01"}))
    assert refused(s, 0, cash_in("W01", "T01", "gambling")) == "NC-B02"


def test_nc_b03_b06_every_matching_turf_counts_once() -> None:
    """NC-B03, NC-B06: every matching turf counts once."""
    s = business_table()
    assert shares(s, "gambling") == (1, 1, 1, 0)
    assert shares(s, "queens") == (2, 1, 0, 0)  # T13 Connecticut counts for Queens


def test_nc_b04_two_colour_turfs_count_for_either_racket_and_never_traffic() -> None:
    """NC-B04: two colour turfs count for either racket and never traffic."""
    s = business_table()
    assert shares(s, "bronx")[1] == 1 and shares(s, "queens")[1] == 1
    assert shares(s, "drugs")[1] == 0
    s = table(s, order=(1, 0, 2, 3))
    assert refused(s, 1, cash_in("W03", "T13", "gambling")) == "NC-B04"


def test_nc_b05_atlantic_city_counts_for_every_traffic_cash_in() -> None:
    """NC-B05: atlantic city counts for every traffic cash in."""
    s = seat(business_table(), 3, turfs=("T05", "AC"))
    assert shares(s, "gambling")[3] == 1 and shares(s, "drugs")[3] == 2 and shares(s, "queens")[3] == 0


def test_nc_b07_police_raid_stops_the_draw_and_reshuffles() -> None:
    """NC-B07: police raid stops the draw and reshuffles."""
    s = business_table()
    deck = (notes(20000, "I")[0], POLICE_RAID, *notes(5000, k=10))
    s = table(s, note_deck=deck, note_discard=tuple(notes(50000, "G", 2)))
    s, events = run(s, 0, cash_in("W01", "T01", "gambling"))
    assert "police_raided" in [e.WhichOneof("kind") for e in events]
    assert of_kind(events, "notes_drawn")[0].count == 1
    assert POLICE_RAID in s.note_deck and len(s.note_deck) == 11 + 2 and s.note_discard == ()


def test_nc_b08_b09_distribution_within_shares_and_never_from_the_bank() -> None:
    """NC-B08, NC-B09: distribution within shares and never from the bank."""
    s = business_table()
    s = table(s, note_deck=(*notes(5000, k=3, skip=20), POLICE_RAID))
    s, _ = run(s, 0, cash_in("W01", "T01", "gambling"))  # T = 3: seats 0, 1, 2 have 1 each
    drawn = list(s.choice.notes)
    assert refused(s, 0, distribute({1: drawn[:2]})) == "NC-B09"
    assert refused(s, 0, distribute({1: [s.players[0].bank[0]]})) == "NC-B08"
    s2, events = run(s, 0, distribute({1: drawn[:1], 2: drawn[1:2]}))
    assert drawn[2] in s2.players[0].bank and drawn[0] in s2.players[1].bank
    assert "players_cheated" not in [e.WhichOneof("kind") for e in events]


def test_nc_b10_b11_b15_cheated_players_draw_one_vendetta_per_missing_note() -> None:
    """NC-B10, NC-B11, NC-B15: cheated players draw one vendetta per missing note."""
    s = business_table()
    s = table(s, note_deck=(*notes(5000, k=3, skip=20), POLICE_RAID), first_player_moved=True,
              vendetta_deck=("V04", "V07", "V10"))  # Hit, Burglary, Tip-off: into the hand
    s, _ = run(s, 0, cash_in("W02", "T01", "gambling"))
    s2, events = run(s, 0, distribute({}))
    cheats = of_kind(events, "players_cheated")[0].cheats
    assert [(c.seat, c.shortfall) for c in cheats] == [(1, 1), (2, 1)]  # clockwise from the left
    assert 0 not in [c.seat for c in cheats]  # NC-B11
    assert s2.players[1].hand == ("V04",) and s2.players[2].hand == ("V07",)


def test_nc_b12_first_player_gift_replaces_one_note() -> None:
    """NC-B12: first player gift replaces one note."""
    s = business_table()
    s = table(s, note_deck=(*notes(5000, k=3, skip=20), POLICE_RAID))
    s, _ = run(s, 0, cash_in("W01", "T01", "gambling"))
    drawn = list(s.choice.notes)
    assert refused(s, 0, distribute({1: drawn[:1]}, fp=1)) == "NC-B09"  # s(1) - 1 = 0 Notes
    assert refused(s, 0, distribute({}, fp=3)) == "NC-B12"  # no share
    s2, events = run(s, 0, distribute({2: drawn[:1]}, fp=1))
    assert s2.first_player == 1 and s2.first_player_moved
    assert not of_kind(events, "players_cheated")
    assert s2.order[0] == 0  # NC-R03: this phase's order does not change


def test_nc_b13_first_player_card_moves_once_per_month() -> None:
    """NC-B13: first player card moves once per month."""
    s = table(business_table(), first_player_moved=True,
              note_deck=(*notes(5000, k=3, skip=20), POLICE_RAID))
    s, _ = run(s, 0, cash_in("W01", "T01", "gambling"))
    assert refused(s, 0, distribute({}, fp=1)) == "NC-B13"


def test_nc_b14_one_racket_and_one_cash_in_per_traffic_icon() -> None:
    """NC-B14: one racket and one cash in per traffic icon."""
    s = business_table()
    s = table(s, note_deck=(*notes(5000, k=9, skip=20), POLICE_RAID))
    s, _ = run(s, 0, cash_in("W01", "T01", "queens"))
    s, _ = run(s, 0, distribute({1: [s.choice.notes[0]]}))
    s = seat(s, 0, busy=frozenset({"W01"}))
    assert refused(s, 0, cash_in("W02", "T02", "queens")) == "NC-B14"


def test_nc_b16_investigation_on_the_street_forbids_its_type() -> None:
    """NC-B16: investigation on the street forbids its type."""
    s = table(business_table(), street=("I3", "R2", "R3", "I4"))
    assert refused(s, 0, cash_in("W01", "T01", "gambling")) == "NC-B16"
    assert refused(s, 0, cash_in("W01", "T01", "queens")) == "NC-B16"
    run(s, 0, cash_in("W01", "T02", "drugs"))


def test_nc_r05_r06_a_busy_wiseguy_cannot_cash_in() -> None:
    """NC-R05, NC-R06: a Wiseguy made Busy this month cannot act again, even with a Free Turf at hand."""
    s = seat(business_table(), 0, busy=frozenset({"W01"}))
    assert refused(s, 0, cash_in("W01", "T01", "queens")) == "NC-R05"
    s2, _ = run(s, 0, cash_in("W02", "T01", "queens"))
    assert {"W01", "W02", "T01"} <= s2.players[0].busy


def test_nc_b15_cheated_draws_start_at_the_active_players_left() -> None:
    """NC-B15: the Cheated draw clockwise from the active player's left, not from seat 0,
    each drawing all of their cards before the next."""
    s = business_table()
    s = seat(s, 3, turfs=("T10",))  # Staten Island Casino: seat 3 shares a Gambling cash-in too
    s = table(s, first_player=2, order=(2, 3, 0, 1), first_player_moved=True,
              note_deck=(*notes(5000, k=3, skip=20), POLICE_RAID),
              vendetta_deck=("V04", "V07", "V10"))  # Hit, Burglary, Tip-off: into the hand
    s, _ = run(s, 2, cash_in("W06", "T07", "gambling"))
    assert s.choice.shares == (1, 1, 1, 1)
    s2, events = run(s, 2, distribute({}))
    cheats = of_kind(events, "players_cheated")[0].cheats
    assert [c.seat for c in cheats] == [3, 0, 1]
    drawn = [e.seat for e in of_kind(events, "vendetta_drawn")]
    assert drawn == [3, 0, 1]
    assert s2.players[3].hand == ("V04",) and s2.players[0].hand == ("V07",) and s2.players[1].hand == ("V10",)


def test_nc_b12_the_first_player_card_goes_to_another_player() -> None:
    """NC-B12: the active player cannot give the First Player card to themself, share or not."""
    s = table(business_table(), note_deck=(*notes(5000, k=3, skip=20), POLICE_RAID))
    s, _ = run(s, 0, cash_in("W01", "T01", "gambling"))
    assert s.choice.shares[0] == 1
    assert refused(s, 0, distribute({}, fp=0)) == "NC-B12"
