"""THE TRIAL (NC-T01..T04), THE RECEPTION (NC-C01..C11) and THE FINAL VERDICT (NC-V01..V16)."""

from __future__ import annotations

from famiglia.engine import Rng
from famiglia.rules.nostra_city import ENGINE
from famiglia.rules.nostra_city.data import NOTE_MARK, UNDERBOSS
from famiglia.rules.nostra_city.decide import Emitter
from famiglia.rules.nostra_city.decide.reception import end_trial
from famiglia.rules.nostra_city.decide.verdict import pile_delta
from famiglia.rules.nostra_city.state import Phase

from .helpers import END, corrupt, kinds, meeting_table, notes, of_kind, refused, run, seat, table


def trial_table(**options: str):
    s = meeting_table(**options)
    return table(s, phase=Phase.TRIAL, month=4, vendetta_deck=("V04", "V05", "V06"))


def _end_all(s):
    events = []
    while s.phase is Phase.TRIAL:
        s, events = run(s, s.turn_seat, END)
    return s, events


def test_nc_t01_corruption_puts_exactly_one_bank_note_on_the_pile() -> None:
    """NC-T01: corruption puts exactly one bank note on the pile."""
    s = trial_table()
    n = s.players[0].bank[0]
    assert refused(s, 0, corrupt("W01", list(s.players[0].bank[:2]))) == "NC-T01"
    s, events = run(s, 0, corrupt("W01", [n]))
    assert s.pile == ((n, 0),) and "W01" in s.players[0].busy
    assert of_kind(events, "corrupted")[0].count == 1


def test_nc_t02_t03_zealous_corruptor_for_the_only_corruptor_from_april() -> None:
    """NC-T02, NC-T03: zealous corruptor for the only corruptor from april."""
    s = trial_table()
    s, _ = run(s, 0, corrupt("W01", [s.players[0].bank[0]]))
    s, events = _end_all(s)
    assert "ZC1" in s.players[0].trophies
    s = trial_table()
    s, _ = run(s, 0, corrupt("W01", [s.players[0].bank[0]]))
    s, _ = run(s, 0, END)
    s, _ = run(s, 1, corrupt("W03", [s.players[1].bank[0]]))
    s, events = _end_all(s)
    assert "zealous_corruptor_taken" not in kinds(events)
    s = table(trial_table(), month=3)
    s, _ = run(s, 0, corrupt("W01", [s.players[0].bank[0]]))
    s, events = _end_all(s)
    assert "zealous_corruptor_taken" not in kinds(events)


def test_nc_s12_zealous_corruptor_may_wait_for_the_titles() -> None:
    """NC-S12: zealous corruptor may wait for the titles."""
    s = trial_table(zealous_needs_titles_given="true")
    s, _ = run(s, 0, corrupt("W01", [s.players[0].bank[0]]))
    s, events = _end_all(s)
    assert "zealous_corruptor_taken" not in kinds(events)


def test_nc_t04_pile_notes_never_come_back() -> None:
    """NC-T04: pile notes never come back."""
    s = trial_table()
    n = s.players[0].bank[0]
    s, _ = run(s, 0, corrupt("W01", [n]))
    s, _ = _end_all(s)
    assert (n, 0) in s.pile and n not in s.note_deck


def test_nc_c01_c02_c03_c09_c10_reception_frees_cards_and_starts_the_next_month() -> None:
    """NC-C01, NC-C02, NC-C03, NC-C09, NC-C10: reception frees cards and starts the next month."""
    s = seat(trial_table(), 0, busy=frozenset({"W01", "T01"}))
    s = table(s, first_player_moved=True)
    s, events = _end_all(s)
    assert "reception_held" in kinds(events)
    assert s.month == 5 and s.phase is Phase.BUSINESS and not s.first_player_moved
    assert not s.players[0].busy or s.turn_seat != 0
    s2 = seat(trial_table(turfs_free_in_reception="false"), 0, busy=frozenset({"W01", "T01"}))
    s2 = table(s2, street_deck=())
    em = Emitter(table(s2, order=()))
    end_trial(em, Rng(0))
    assert em.state.players[0].busy == frozenset({"T01"})  # NC-C03 off: Turfs stay Busy


def test_nc_c04_c05_x20_investigations_on_the_street_add_guilt() -> None:
    """NC-C04, NC-C05, NC-X20: investigations on the street add guilt."""
    s = table(trial_table(), street=("I1", "I2", "R3", "R4"))
    v = s.verdict
    s, events = _end_all(s)
    moved = of_kind(events, "verdict_moved")[0]
    assert moved.delta == -2 and s.verdict == v - 2


def test_nc_c06_c07_underboss_enters_the_street_after_february() -> None:
    """NC-C06, NC-C07: underboss enters the street after february."""
    s = table(trial_table(), month=2, street=("R1", "", "R3", "R4"))
    s, events = _end_all(s)
    assert s.street[1] == UNDERBOSS and of_kind(events, "underboss")[0].space == 2
    s = table(trial_table(), month=2, street=("R1", "I1", "R3", "I2"))
    s, events = _end_all(s)
    assert s.street[2] == UNDERBOSS and "R3" in s.removed  # highest non-Investigation
    s = table(trial_table(), month=2, street=("I3", "I1", "I4", "I2"))
    s, _ = _end_all(s)
    assert s.underboss == "waiting"


def test_nc_c08_refill_in_order_from_the_street_deck() -> None:
    """NC-C08: refill in order from the street deck."""
    s = table(trial_table(), street=("", "R2", "", "R4"), street_deck=("W15", "I3", "T09"))
    s, events = _end_all(s)
    assert s.street == ("W15", "R2", "I3", "R4") and s.street_deck == ("T09",)


def test_nc_c11_v01_month_six_ends_with_the_final_verdict() -> None:
    """NC-C11, NC-V01: month six ends with the final verdict."""
    s = table(trial_table(), month=6, street=("I1", "R2", "R3", "R4"))
    s, events = _end_all(s)
    assert s.phase is Phase.OVER
    order = [k for k in kinds(events) if k in ("verdict_moved", "bonus_awarded", "corruption_revealed",
                                               "verdict_reached")]
    assert order == ["verdict_moved", "bonus_awarded", "bonus_awarded", "bonus_awarded",
                     "corruption_revealed", "verdict_reached"]
    assert ENGINE.result(s) is not None


def test_nc_v02_v03_v05_v06_pile_moves_the_token_and_zero_is_guilty() -> None:
    """NC-V02, NC-V03, NC-V05, NC-V06: pile moves the token and zero is guilty."""
    inn = notes(10000, "I", 2) + notes(5000, k=1) + notes(20000, "G", 1)
    assert [NOTE_MARK[n] for n in inn] == ["I", "I", "", "G"]
    assert pile_delta(inn, False) == 1
    assert pile_delta(inn, True) == 0  # 1 + 1 - 2
    s = table(trial_table(), month=6, street=("R1", "R2", "R3", "R4"), verdict=0)
    s, _ = _end_all(s)
    assert s.verdict_result == "guilty"  # NC-V06: V = 0 is Guilty
    s = table(trial_table(verdict_tie_result="innocent"), month=6, street=("R1", "R2", "R3", "R4"), verdict=0)
    s, _ = _end_all(s)
    assert s.verdict_result == "innocent"


def test_nc_v04_marked_notes_from_ten_thousand() -> None:
    """NC-V04: marked notes from ten thousand."""
    from famiglia.rules.nostra_city.data import NOTES

    assert all((n.mark == "") == (n.value == 5000) for n in NOTES)


def _over(s, verdict: str, snitch_hands: dict[int, tuple[str, ...]]):
    for i, hand in snitch_hands.items():
        s = seat(s, i, hand=hand)
    snitches = tuple(sorted(i for i, h in snitch_hands.items() if "V01" in h or "V02" in h))
    return table(s, phase=Phase.OVER, verdict_result=verdict, snitches=snitches)


def test_nc_v07_v08_innocent_the_most_respected_loyal_player_wins() -> None:
    """NC-V07, NC-V08: innocent the most respected loyal player wins."""
    s = meeting_table()
    s = seat(s, 0, trophies=("R6",))
    s = seat(s, 1, trophies=("R6", "R5"))
    r = ENGINE.result(_over(s, "innocent", {1: ("V01",)}))
    assert r.winners() == [0] and r.outcome["verdict"] == "innocent"
    ranks = {o.seat: o.rank for o in r.seats}
    assert ranks[1] == 4  # a Snitch ranks after every eligible player (NC-V16)


def test_nc_v09_v10_guilty_only_a_snitch_can_win() -> None:
    """NC-V09, NC-V10: guilty only a snitch can win."""
    s = seat(meeting_table(), 0, trophies=("R6",))
    r = ENGINE.result(_over(s, "guilty", {2: ("V02",)}))
    assert r.winners() == [2]
    r = ENGINE.result(_over(s, "guilty", {}))
    assert r.outcome.get("no_winner") == "true" and {o.rank for o in r.seats} == {s.seats}
    assert r.winners() == []  # nobody is first: no reader counts a win (standings, ratings)


def test_nc_v09_guilty_the_snitch_with_the_most_respect_wins() -> None:
    """NC-V09: between two Snitches Respect decides, not the seat order."""
    s = seat(meeting_table(), 2, trophies=("R6",))   # seat 1 holds Connecticut: 1 Respect
    r = ENGINE.result(_over(s, "guilty", {1: ("V01",), 2: ("V02",)}))
    assert r.winners() == [2]
    assert {o.seat: o.rank for o in r.seats}[1] == 2   # NC-V16: the other eligible player comes next


def test_nc_v11_v12_respect_from_the_territory() -> None:
    """NC-V11, NC-V12: respect from the territory."""
    from famiglia.rules.nostra_city.queries import seat_respect

    s = seat(meeting_table(), 0, trophies=("R1", "I3", UNDERBOSS, "ZC1", "B2"), turfs=("T13", "T14"),
             wiseguys=("W20",))
    assert seat_respect(s, 0) == 1 + 1 + 3 + 1 + 2 + 2 + 1


def test_nc_v13_v14_end_of_game_bonuses_to_the_strict_leader() -> None:
    """NC-V13, NC-V14: end of game bonuses to the strict leader."""
    s = table(trial_table(), month=6, street=("R1", "R2", "R3", "R4"))
    s = seat(s, 2, vendetta_drawn=5, wiseguys=("W06", "W07", "W08", "W15"))
    s = seat(s, 1, vendetta_drawn=5)
    s = seat(s, 0, turfs=("T01", "T02", "AC"))
    s, events = _end_all(s)
    awarded = {b.card: b.seat for b in of_kind(events, "bonus_awarded")}
    assert awarded["B1"] == -1 and awarded["B2"] == 2 and awarded["B3"] == 0  # Atlantic City counts as a Turf


def test_nc_v16_players_equal_on_respect_title_and_bank_share_a_rank() -> None:
    """NC-V16: below the winners, players equal on Respect, Title and Bank share a rank, and the
    next rank skips past them."""
    s = meeting_table(5)   # every Bank: two $10,000 Innocent and two $10,000 Guilty
    s = seat(s, 0, trophies=("R6",))   # 3 Respect: the winner
    # seat 1 holds Connecticut (1 Respect); seats 2, 3 and 4 have none
    r = ENGINE.result(_over(s, "innocent", {}))
    ranks = {o.seat: o.rank for o in r.seats}
    assert r.winners() == [0] and ranks[1] == 2
    assert ranks[2] == ranks[3] == ranks[4] == 3

def test_nc_v15_v16_ties_broken_by_title_then_bank() -> None:
    """NC-V15, NC-V16: ties broken by title then bank."""
    s = meeting_table()
    s = seat(s, 0, trophies=("R4",))
    s = seat(s, 1, trophies=("PC",))  # + Connecticut: 2 Respect
    s = seat(s, 2, trophies=("R4",), bank=(*s.players[2].bank, *notes(50000, "I")))
    r = ENGINE.result(_over(table(s, titles=(("PC", 1),)), "innocent", {}))
    ranks = {o.seat: o.rank for o in r.seats}
    assert r.winners() == [1] and ranks[2] == 2 and ranks[0] == 3 and ranks[3] == 4
    s = seat(s, 2, bank=s.players[0].bank)
    r = ENGINE.result(_over(table(s, titles=()), "innocent", {}))
    assert sorted(r.winners()) == [0, 1, 2]  # shared win (NC-V15 (3))


def test_nc_c06_underboss_takes_the_lowest_numbered_empty_space() -> None:
    """NC-C06: with two empty spaces the Underboss goes into the lower one; the refill (NC-C08,
    step 4) fills the other afterwards. A waiting Underboss (NC-C07) is placed the same way later."""
    s = table(trial_table(), month=2, street=("R1", "", "R3", ""), street_deck=("W15", "T09"))
    s, events = _end_all(s)
    assert of_kind(events, "underboss")[0].space == 2
    assert s.street == ("R1", UNDERBOSS, "R3", "W15")
    s = table(trial_table(), month=4, underboss="waiting", street=("", "I1", "I3", ""), street_deck=("W15", "T09"))
    s, events = _end_all(s)
    assert s.street == (UNDERBOSS, "I1", "I3", "W15") and s.underboss == "street"


def test_nc_t02_the_card_goes_to_the_only_corruptor() -> None:
    """NC-T02: the Zealous Corruptor card goes to the one player who corrupted, here not the
    first player."""
    s = trial_table()
    s, _ = run(s, 0, END)
    s, _ = run(s, 1, corrupt("W03", [s.players[1].bank[0]]))
    s, events = _end_all(s)
    assert of_kind(events, "zealous_corruptor_taken")[0].seat == 1
    assert "ZC1" in s.players[1].trophies and "ZC1" not in s.players[0].trophies


def test_nc_c04_guilt_counts_from_the_first_month() -> None:
    """NC-C04, NC-C05: every month's Reception, January's included, moves the token one space
    toward Guilty per Investigation on the Street."""
    s = table(trial_table(), month=1, street=("I1", "R2", "I3", "R4"))
    v = s.verdict
    s, events = _end_all(s)
    assert s.verdict == v - 2 and of_kind(events, "verdict_moved")[0].delta == -2
