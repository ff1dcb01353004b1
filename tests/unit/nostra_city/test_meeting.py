"""THE MEETING: sealed bids in turn and the resolution (NC-M01..M20)."""

from __future__ import annotations

from famiglia.rules.nostra_city.data import CONSIGLIERE, PRIMO_CAPO, UNDERBOSS
from famiglia.rules.nostra_city.flow import phase_order
from famiglia.rules.nostra_city.state import Phase

from .helpers import (
    END,
    bid,
    keep,
    kinds,
    meeting_table,
    notes,
    of_kind,
    refused,
    run,
    seat,
    table,
    title,
)

SAFE_VENDETTA = ("V04", "V05", "V06", "V07", "V08", "V09", "V10", "V11", "V12")  # revenge cards only


def _bids_and_end(s, plan):
    """plan: {seat: [(wiseguy, location, notes)]}; every seat ends its turn in order."""
    s = table(s, vendetta_deck=SAFE_VENDETTA)
    for who in s.order:
        for w, loc, ns in plan.get(who, []):
            s, _ = run(s, who, bid(w, loc, ns))
        if s.phase is Phase.MEETING and s.turn_seat == who:
            s, events = run(s, who, END)
    return s, events


def test_nc_m01_m04_a_bid_is_public_in_count_and_private_in_content() -> None:
    """NC-M01, NC-M04: a bid is public in count and private in content."""
    s = meeting_table()
    mine = list(s.players[0].bank[:2])
    s2, events = run(s, 0, bid("W01", 2, mine))
    assert kinds(events) == ["bid_committed", "bid_content"]
    assert of_kind(events, "bid_committed")[0].count == 2
    assert "W01" in s2.players[0].busy and 2 not in s2.players[0].locations


def test_nc_m02_each_location_card_once_per_meeting() -> None:
    """NC-M02: each location card once per meeting."""
    s = meeting_table()
    s, _ = run(s, 0, bid("W01", 2, [s.players[0].bank[0]]))
    assert refused(s, 0, bid("W02", 2, [s.players[0].bank[0]])) == "NC-M02"


def test_nc_m03_only_spaces_holding_a_card() -> None:
    """NC-M03: only spaces holding a card."""
    s = table(meeting_table(), street=("R1", "", "R3", "R4"))
    assert refused(s, 0, bid("W01", 2, [s.players[0].bank[0]])) == "NC-M03"


def test_nc_m05_m07_single_bidder_keeps_one_note_and_wins() -> None:
    """NC-M05, NC-M07: single bidder keeps one note and wins."""
    s = meeting_table()
    b0 = list(s.players[0].bank[:3])
    s = table(s, vendetta_deck=SAFE_VENDETTA)
    s, _ = run(s, 0, bid("W01", 1, b0))
    s, _ = run(s, 0, END)
    for who in (1, 2):
        s, _ = run(s, who, END)
    s, events = run(s, 3, END)
    assert "locations_revealed" in kinds(events)
    assert s.choice is not None and s.choice.kind == "keep"
    assert "bids_revealed" not in kinds(events)  # NC-H06
    s, events = run(s, 0, keep([b0[1]]))
    assert "R1" in s.players[0].trophies and b0[1] in s.players[0].bank
    assert b0[0] in s.note_discard and b0[2] in s.note_discard


def test_nc_m06_a_space_without_bids_keeps_its_card() -> None:
    """NC-M06: a space without bids keeps its card."""
    s, _ = _bids_and_end(meeting_table(), {})
    assert s.street == ("R1", "R2", "R3", "R4") and s.phase is Phase.TRIAL


def test_nc_m08_highest_bid_wins_and_all_notes_are_discarded() -> None:
    """NC-M08: highest bid wins and all notes are discarded."""
    s = meeting_table()
    hi = notes(20000, "I", 1, skip=5)
    s = seat(s, 1, bank=(*s.players[1].bank, *hi))
    s, events = _bids_and_end(s, {0: [("W01", 1, [s.players[0].bank[0]])], 1: [("W03", 1, hi)]})
    assert "R1" in s.players[1].trophies
    assert hi[0] in s.note_discard  # the winner's Notes too
    assert of_kind(events, "bids_revealed")


def test_nc_m09_tied_highest_bids_win_nothing() -> None:
    """NC-M09: tied highest bids win nothing."""
    s = meeting_table()
    s, _ = _bids_and_end(s, {0: [("W01", 1, [s.players[0].bank[0]])], 1: [("W03", 1, [s.players[1].bank[0]])]})
    assert s.street[0] == "R1" and "R1" not in s.players[0].trophies


def test_nc_m10_respect_card_adds_at_once_and_investigation_adds_one() -> None:
    """NC-M10: respect card adds at once and investigation adds one."""
    from famiglia.rules.nostra_city.queries import seat_respect

    s = seat(meeting_table(), 0, trophies=("R6", "I2"))
    assert seat_respect(s, 0) == 4


def test_nc_m11_m12_investigation_bids_pool_against_the_backhander() -> None:
    """NC-M11, NC-M12: investigation bids pool against the backhander."""
    s = table(meeting_table(), street=("I5", "R2", "R3", "R4"))  # I5 Backhander $20,000
    s = seat(s, 2, bank=(*s.players[2].bank, *notes(20000, "G", 1, skip=3)))
    b0 = list(s.players[0].bank[:2])  # $20,000
    b1 = list(s.players[1].bank[:2])  # $20,000
    s2, events = _bids_and_end(s, {0: [("W01", 1, b0)], 1: [("W03", 1, b1)]})
    assert of_kind(events, "bids_revealed")  # NC-M12: always revealed
    assert s2.street[0] == "" and "I5" in s2.removed  # tie above the Backhander: removed
    assert set(b0) <= set(s2.note_discard)
    s3, events = _bids_and_end(s, {0: [("W01", 1, b0)]})
    assert s3.street[0] == "" and "I5" in s3.players[0].trophies  # a single bid is still pooled
    s4, _ = _bids_and_end(table(s, street=("I6", "R2", "R3", "R4")), {0: [("W01", 1, b0[:1])]})
    assert s4.street[0] == "I6" and b0[0] in s4.note_discard  # below: the card stays


def test_nc_m13_m15_x08_bidders_who_won_nothing_draw_one_vendetta() -> None:
    """NC-M13, NC-M15, NC-X08: bidders who won nothing draw one vendetta."""
    s = meeting_table()
    b1 = list(s.players[1].bank)
    s, events = _bids_and_end(s, {
        0: [("W01", 1, [s.players[0].bank[0]])],
        1: [("W03", 1, b1[:2]), ("W04", 2, b1[2:3]), ("W05", 3, b1[3:4])],
        2: [("W06", 2, s.players[2].bank[:2])],
    })
    cheats = [c for e in of_kind(events, "players_cheated") for c in e.cheats]
    # seat 1 won R1 (and lost R2) -> not Cheated; seat 0 lost -> Cheated once; seat 3 never bid
    assert 3 not in [c.seat for c in cheats] and 1 not in [c.seat for c in cheats]
    assert [(c.seat, c.draws) for c in cheats] == [(0, 1)]


def test_nc_m14_m17_m18_m19_m20_underboss_titles_and_the_untitled() -> None:
    """NC-M14, NC-M17, NC-M18, NC-M19, NC-M20: underboss titles and the untitled."""
    s = table(meeting_table(), street=(UNDERBOSS, "R2", "R3", "R4"), underboss="street")
    s, _ = _bids_and_end(s, {0: [("W01", 1, [s.players[0].bank[0]])]})  # one Note: kept at once (NC-D03)
    assert s.choice.kind == "consigliere" and s.players[0].trophies == (UNDERBOSS,)
    assert refused(s, 0, title("consigliere", 0)) == "NC-M18"
    s, _ = run(s, 0, title("consigliere", 2))
    assert s.choice.kind == "primo_capo" and s.choice.seat == 2
    assert refused(s, 2, title("primo_capo", 0)) == "NC-M18"
    s, events = run(s, 2, title("primo_capo", 3))
    cheated = [c.seat for e in of_kind(events, "players_cheated") for c in e.cheats]
    assert cheated == [1]  # the one player without a Title (NC-M19)
    assert s.holder(CONSIGLIERE) == 2 and s.holder(PRIMO_CAPO) == 3
    assert {2, 3} <= s.meeting_winners  # NC-M14: receiving a Title counts as winning
    assert s.underboss == "won"


def test_nc_m16_location_cards_go_home_and_acting_wiseguys_stay_busy() -> None:
    """NC-M16: location cards go home and acting wiseguys stay busy."""
    s = meeting_table()
    s, _ = _bids_and_end(s, {0: [("W01", 1, [s.players[0].bank[0]])]})
    assert s.phase is Phase.TRIAL and s.players[0].locations == (1, 2, 3, 4)
    assert "W01" in s.players[0].busy


def test_nc_w109_meeting_order_puts_w09_last() -> None:
    """NC-W109: meeting order puts w09 last."""
    s = meeting_table()  # W09 belongs to seat 3
    s = table(s, first_player=3)
    assert phase_order(s, Phase.MEETING) == (0, 1, 2, 3)
    s = table(s, first_player=1)
    assert phase_order(s, Phase.MEETING) == (1, 2, 0, 3)


def test_nc_w109_r02_w09_changes_only_the_meetings_order() -> None:
    """NC-W109 is the Meeting's one exception to NC-R02: the Business and the Trial go plain
    clockwise from the first player, W09's owner in its place."""
    s = table(meeting_table(), first_player=1)  # W09 belongs to seat 3
    for phase in (Phase.BUSINESS, Phase.TRIAL):
        assert phase_order(s, phase) == (1, 2, 3, 0)


def test_nc_m15_meeting_draws_go_clockwise_from_the_first_player() -> None:
    """NC-M15: Cheated bidders draw one at a time, clockwise from the first player."""
    s = table(meeting_table(), first_player=1)
    s = table(s, order=phase_order(s, Phase.MEETING))
    assert s.order == (1, 2, 0, 3)  # W09's owner (seat 3) meets last
    s, events = _bids_and_end(s, {
        2: [("W06", 1, list(s.players[2].bank[:2]))],
        0: [("W01", 1, [s.players[0].bank[0]])],
        1: [("W03", 1, [s.players[1].bank[1]])],
    })
    cheats = [c.seat for e in of_kind(events, "players_cheated") for c in e.cheats]
    assert "R1" in s.players[2].trophies
    assert cheats == [1, 0]  # clockwise from the first player, seat 1


def test_nc_m20_untitled_draws_go_clockwise_from_the_first_player() -> None:
    """NC-M19, NC-M20: the players left without a Title draw one at a time, clockwise from
    the first player (not from seat 0)."""
    s = table(meeting_table(5), street=(UNDERBOSS, "R2", "R3", "R4"), underboss="street", first_player=2)
    s = table(s, order=phase_order(s, Phase.MEETING))
    s, _ = _bids_and_end(s, {0: [("W01", 1, [s.players[0].bank[0]])]})
    s, _ = run(s, 0, title("consigliere", 2))
    s, events = run(s, 2, title("primo_capo", 3))  # seat 3 (W10) would not be Cheated anyway
    cheated = [c.seat for e in of_kind(events, "players_cheated") if e.reason == "titles" for c in e.cheats]
    assert cheated == [4, 1]  # clockwise from seat 2: 3 (titled), 4, 0 (Underboss), 1
    assert [e.seat for e in of_kind(events, "vendetta_drawn")][:2] == [4, 1]


def test_nc_w119_extra_draw_in_the_meeting() -> None:
    """NC-W119: W19's owner draws one extra card when Cheated by NC-M13 and by NC-M19 too."""
    s = meeting_table()
    s = seat(s, 1, wiseguys=("W03", "W04", "W19"))
    s, events = _bids_and_end(s, {0: [("W01", 1, list(s.players[0].bank[:2]))],
                                  1: [("W03", 1, [s.players[1].bank[0]])]})
    assert [(c.seat, c.draws) for e in of_kind(events, "players_cheated") for c in e.cheats] == [(1, 2)]
    s = table(meeting_table(), street=(UNDERBOSS, "R2", "R3", "R4"), underboss="street")
    s = seat(s, 1, wiseguys=("W03", "W04", "W19"))
    s, _ = _bids_and_end(s, {0: [("W01", 1, [s.players[0].bank[0]])]})
    s, _ = run(s, 0, title("consigliere", 2))
    s, events = run(s, 2, title("primo_capo", 3))
    assert [(c.seat, c.draws) for e in of_kind(events, "players_cheated") for c in e.cheats] == [(1, 2)]


def test_nc_d03_the_last_possible_primo_capo_receiver_is_automatic() -> None:
    """NC-D03, NC-M18: with 3 players the Consigliere has one possible receiver, so the Primo
    Capo is given without a decision."""
    s = table(meeting_table(3), street=(UNDERBOSS, "R2", "R3", "R4"), underboss="street")
    s, _ = _bids_and_end(s, {0: [("W01", 1, [s.players[0].bank[0]])]})
    s, events = run(s, 0, title("consigliere", 1))
    assigned = of_kind(events, "title_assigned")
    assert [(t.title, t.to_seat) for t in assigned] == [("consigliere", 1), ("primo_capo", 2)]
    assert s.choice is None or s.choice.kind != "primo_capo"
