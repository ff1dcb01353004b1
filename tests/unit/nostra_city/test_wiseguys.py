"""Wiseguy powers (NC-W01..W04, NC-W101..W120)."""

from __future__ import annotations

from collections import Counter

from famiglia.rules.nostra_city.data import POLICE_RAID, WISEGUYS
from famiglia.rules.nostra_city.queries import burglary_targets, hit_targets, seat_respect
from famiglia.rules.nostra_city.state import Phase

from .helpers import (
    END,
    bid,
    business_table,
    cash_in,
    corrupt,
    distribute,
    keep,
    meeting_table,
    notes,
    of_kind,
    refused,
    run,
    seat,
    table,
)

DECK = (*notes(5000, k=10, skip=20), POLICE_RAID)
SAFE_VENDETTA = ("V04", "V05", "V06", "V07", "V08", "V09")


def test_nc_w01_w02_w03_w04_twenty_wiseguys_in_four_families_of_five() -> None:
    """NC-W01, NC-W02, NC-W03, NC-W04: twenty wiseguys in four families of five."""
    assert len(WISEGUYS) == 20
    assert Counter(w.family for w in WISEGUYS) == {"Earners": 5, "Baldini": 5, "Fixers": 5, "Muscle": 5}
    assert all(w.trigger in ("busy", "always") for w in WISEGUYS)  # NC-W01
    assert {w.rule for w in WISEGUYS} == {f"NC-W1{i:02d}" for i in range(1, 21)}  # NC-W03


def test_nc_w101_w102_w103_w104_bonus_note_straight_into_the_bank() -> None:
    """NC-W101, NC-W102, NC-W103, NC-W104: bonus note straight into the bank."""
    s = table(business_table(), note_deck=DECK)
    s2, events = run(s, 0, cash_in("W01", "T01", "gambling"))  # NC-W101
    bonus = [e for e in of_kind(events, "notes_drawn") if e.bonus]
    assert len(bonus) == 1 and bonus[0].notes[0] in s2.players[0].bank
    s3, events = run(s, 0, cash_in("W02", "T02", "drugs"))  # NC-W102
    assert [e for e in of_kind(events, "notes_drawn") if e.bonus]
    s4, events = run(s, 0, cash_in("W02", "T01", "gambling"))  # wrong icon: nothing
    assert not [e for e in of_kind(events, "notes_drawn") if e.bonus]
    s = table(s, order=(1, 0, 2, 3))
    s5, events = run(s, 1, cash_in("W04", "T13", "bronx"))  # NC-W104, any colour
    assert [e for e in of_kind(events, "notes_drawn") if e.bonus]
    s = seat(s, 1, wiseguys=("W03", "W04", "W05"), turfs=("T03",))
    s6, events = run(s, 1, cash_in("W03", "T03", "prostitution"))  # NC-W103
    assert [e for e in of_kind(events, "notes_drawn") if e.bonus]


def test_nc_w105_names_a_busy_source_without_making_it_busy() -> None:
    """NC-W105: names a busy source without making it busy."""
    s = table(business_table(), order=(1, 0, 2, 3), note_deck=DECK)
    s = seat(s, 1, busy=frozenset({"T04"}))
    assert refused(s, 1, cash_in("W03", "T04", "gambling", power=True)) == "NC-W105"
    s2, _ = run(s, 1, cash_in("W05", "T04", "gambling", power=True))
    assert s2.players[1].busy == frozenset({"T04", "W05"})


def _meeting(s, plan):
    s = table(s, vendetta_deck=SAFE_VENDETTA)
    events = []
    for who in s.order:
        for w, loc, ns in plan.get(who, []):
            s, _ = run(s, who, bid(w, loc, ns))
        if s.phase is Phase.MEETING and s.turn_seat == who:
            s, events = run(s, who, END)
    return s, events


def test_nc_w106_w06_wins_a_tie() -> None:
    """NC-W106: W06 wins a tie."""
    s = meeting_table()
    s, _ = _meeting(s, {0: [("W01", 1, [s.players[0].bank[0]])], 2: [("W06", 1, [s.players[2].bank[0]])]})
    assert "R1" in s.players[2].trophies


def test_nc_w107_w07_adds_five_thousand() -> None:
    """NC-W107: W07 adds five thousand."""
    s = meeting_table()
    s, _ = _meeting(s, {0: [("W01", 1, [s.players[0].bank[0]])], 2: [("W07", 1, [s.players[2].bank[0]])]})
    assert "R1" in s.players[2].trophies


def test_nc_w108_w08_keeps_two_notes() -> None:
    """NC-W108: W08 keeps two notes."""
    s = meeting_table()
    b = list(s.players[2].bank[:3])
    s, _ = _meeting(s, {2: [("W08", 1, b)]})
    assert s.choice.kind == "keep" and s.choice.keep == 2
    s, _ = run(s, 2, keep(b[:2]))
    assert set(b[:2]) <= set(s.players[2].bank) and b[2] in s.note_discard


def test_nc_w110_w10_owner_is_never_cheated_in_the_meeting() -> None:
    """NC-W110: W10 owner is never cheated in the meeting."""
    s = meeting_table()  # W10 is seat 3's
    s, events = _meeting(s, {0: [("W01", 1, s.players[0].bank[:2])], 3: [("W11", 1, [s.players[3].bank[0]])]})
    cheated = [c.seat for e in of_kind(events, "players_cheated") for c in e.cheats]
    assert 3 not in cheated


def _trial(**kw):
    s = meeting_table()
    s = table(s, phase=Phase.TRIAL, month=1, **kw)
    return s


def test_nc_w111_w11_places_one_or_two_notes() -> None:
    """NC-W111: W11 places one or two notes."""
    s = table(_trial(), turn=3)
    b = list(s.players[3].bank)
    s2, _ = run(s, 3, corrupt("W11", b[:2]))
    assert len(s2.pile) == 2 and s2.players[3].corruption_actions == 1
    assert refused(s, 3, corrupt("W09", b[:2])) == "NC-T01"


def test_nc_w112_w12_corrupts_from_the_note_deck_unseen() -> None:
    """NC-W112: W12 corrupts from the note deck unseen."""
    s = seat(_trial(note_deck=DECK), 0, wiseguys=("W12",))
    s2, events = run(s, 0, corrupt("W12", deck=True))
    assert s2.pile == ((DECK[0], 0),) and of_kind(events, "notes_corrupted")[0].from_deck
    s3, events = run(table(s, note_deck=(POLICE_RAID, *DECK[:2])), 0, corrupt("W12", deck=True))
    assert s3.pile == () and of_kind(events, "police_raided")


def test_nc_w113_w13_moves_the_token_once_per_game() -> None:
    """NC-W113: W13 moves the token once per game."""
    s = seat(_trial(), 0, wiseguys=("W13", "W01"))
    v = s.verdict
    s2, _ = run(s, 0, corrupt("W13", token=True))
    assert s2.verdict == v + 1 and s2.w13_spent
    assert refused(table(s, w13_spent=True), 0, corrupt("W13", token=True)) == "NC-W113"


def test_nc_w114_w14_peeks_at_pile_notes_of_others() -> None:
    """NC-W114: W14 peeks at pile notes of others."""
    other = notes(50000, "G")[0]
    s = seat(_trial(pile=((other, 2),)), 0, wiseguys=("W14",))
    s2, events = run(s, 0, corrupt("W14", [s.players[0].bank[0]]))
    assert of_kind(events, "pile_notes_peeked")[0].notes == [other]
    assert s2.players[0].peeked == (other,)


def test_nc_w114_w14_looks_at_no_more_than_two_notes() -> None:
    """NC-W114: with three Notes of other seats on the pile, W14 is shown two of them, never more."""
    others = notes(50000, "G", 2) + notes(50000, "I", 1)
    s = seat(_trial(pile=tuple((n, 2) for n in others)), 0, wiseguys=("W14",))
    s2, events = run(s, 0, corrupt("W14", [s.players[0].bank[0]]))
    peeked = of_kind(events, "pile_notes_peeked")[0].notes
    assert len(peeked) == 2 and set(peeked) <= set(others) and len(s2.players[0].peeked) == 2


def test_nc_w114_w14_never_picks_a_note_its_owner_placed_with_w12() -> None:
    """NC-W114, NC-W112, NC-H17: a Note the owner put on the pile unseen with W12 is still
    one the owner placed, so W14 does not show it; another seat's W12 Note it may show."""
    s = seat(_trial(note_deck=DECK), 0, wiseguys=("W12", "W14", "W01"))
    s, _ = run(s, 0, corrupt("W12", deck=True))
    s2, events = run(s, 0, corrupt("W14", [s.players[0].bank[0]]))
    assert not of_kind(events, "pile_notes_peeked") and s2.players[0].peeked == ()
    theirs = table(s, pile=((DECK[0], 2),))  # the same Note, put there by seat 2's W12
    _, events = run(theirs, 0, corrupt("W14", [s.players[0].bank[0]]))
    assert of_kind(events, "pile_notes_peeked")[0].notes == [DECK[0]]


def test_nc_w115_w15_draws_a_note_after_corrupting() -> None:
    """NC-W115: W15 draws a note after corrupting."""
    s = seat(_trial(note_deck=DECK), 0, wiseguys=("W15",))
    s2, _ = run(s, 0, corrupt("W15", [s.players[0].bank[0]]))
    assert DECK[0] in s2.players[0].bank


def test_nc_w116_w117_muscle_protects_against_hit_and_burglary() -> None:
    """NC-W116, NC-W117: muscle protects against hit and burglary."""
    s = seat(business_table(), 1, wiseguys=("W16", "W03"))
    assert 1 not in [t for t, _ in hit_targets(s, 0)]
    s = seat(s, 2, wiseguys=("W17", "W06"))
    assert 2 not in burglary_targets(s, 0) and 1 in burglary_targets(s, 0)


def test_nc_w118_w119_w18_softens_the_cheat_and_w19_hardens_it() -> None:
    """NC-W118, NC-W119: W18 softens the cheat, W19 hardens it."""
    s = table(business_table(), note_deck=DECK, first_player_moved=True, vendetta_deck=SAFE_VENDETTA)
    s = seat(s, 2, wiseguys=("W19", "W06"))
    s, _ = run(s, 0, cash_in("W18", "T01", "gambling"))
    s, events = run(s, 0, distribute({}))
    draws = {c.seat: c.draws for c in of_kind(events, "players_cheated")[0].cheats}
    assert draws == {1: 0, 2: 1}  # one fewer for everyone (W18), one more for W19's owner


def test_nc_w120_w20_is_worth_one_respect() -> None:
    """NC-W120: W20 is worth one respect."""
    s = seat(business_table(), 0, wiseguys=("W20",), turfs=())
    assert seat_respect(s, 0) == 1


def test_nc_w105_a_free_source_stays_free() -> None:
    """NC-W105: with W05 the named source's Free or Busy state does not change, so a Free Turf
    named by W05 can still start another cash-in."""
    s = table(business_table(), order=(1, 0, 2, 3), note_deck=DECK)
    s2, _ = run(s, 1, cash_in("W05", "T04", "gambling", power=True))
    assert "T04" not in s2.players[1].busy and "W05" in s2.players[1].busy


def test_nc_w112_a_raided_deck_corruption_still_counts_as_an_action() -> None:
    """NC-W112: when the top card is the Police Raid no Note is placed, but the action is still
    a Corruption action: under the Grand Jury (NC-K15) no second one is possible, so the turn
    ends itself (NC-D03)."""
    s = table(_trial(note_deck=(POLICE_RAID, *DECK[:2])), street=("I6", "R2", "R3", "R4"))
    s = seat(s, 0, wiseguys=("W12", "W01"))
    s2, events = run(s, 0, corrupt("W12", deck=True))
    assert s2.pile == () and of_kind(events, "police_raided")
    assert s2.players[0].corruption_actions == 1
    assert s2.turn_seat != 0


def test_nc_w120_a_busy_w20_still_gives_its_respect() -> None:
    """NC-W120, NC-W01: an always-on power works Free or Busy."""
    s = seat(business_table(), 0, wiseguys=("W20",), turfs=(), busy=frozenset({"W20"}))
    assert seat_respect(s, 0) == 1


def test_nc_w106_w06_breaks_only_a_tie_it_is_part_of() -> None:
    """NC-W106: W06 wins only when its own bid is among the tied highest; a lower W06 bid under a
    tie of two others leaves the tie result (NC-M09: nobody wins, the card stays)."""
    s = meeting_table()
    s, _ = _meeting(s, {0: [("W01", 1, list(s.players[0].bank[:2]))],
                        1: [("W03", 1, list(s.players[1].bank[:2]))],
                        2: [("W06", 1, [s.players[2].bank[0]])]})
    assert s.street[0] == "R1" and not any("R1" in p.trophies for p in s.players)
