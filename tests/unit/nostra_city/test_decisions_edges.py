"""Decisions (NC-D01..D15) and edge cases (NC-X01..X20)."""

from __future__ import annotations

from famiglia.engine import Rng
from famiglia.engine.protocol import DecisionKind
from famiglia.nostra_city.v1 import nostra_city_pb2 as pb
from famiglia.rules.nostra_city import ENGINE, INFO
from famiglia.rules.nostra_city.data import POLICE_RAID, UNDERBOSS
from famiglia.rules.nostra_city.decide import Emitter, draw_vendetta
from famiglia.rules.nostra_city.decide.common import draw_notes
from famiglia.rules.nostra_city.queries import can_bid, can_corrupt, cash_in_options
from famiglia.rules.nostra_city.state import Draw, Phase

from .helpers import (
    END,
    bid,
    business_table,
    cash_in,
    distribute,
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

DECK3 = (*notes(5000, k=3, skip=20), POLICE_RAID)


def test_nc_d01_at_most_one_seat_decides_at_a_time() -> None:
    """NC-D01: bids are secret but placed in turn."""
    s = meeting_table()
    assert len(ENGINE.pending(s)) == 1 and ENGINE.pending(s)[0].kind is DecisionKind.SECRET_CHOICE
    assert INFO.simultaneous is False
    assert refused(s, 1, bid("W03", 1, [s.players[1].bank[0]])) == "NC-R02"


def test_nc_d02_d04_d08_d12_turn_clocks_and_their_default_end_turn() -> None:
    """NC-D02, NC-D04, NC-D08, NC-D12."""
    s = business_table()
    p = ENGINE.pending(s)[0]
    assert p.timeout_seconds == 120 and p.kind is DecisionKind.TURN
    assert ENGINE.timeout_command(s, 0) == END and ENGINE.timeout_command(s, 1) is None
    s = table(s, note_deck=DECK3)
    s, _ = run(s, 0, cash_in("W01", "T01", "gambling"))
    assert ENGINE.pending(s)[0].timeout_seconds == 45


def test_nc_d03_a_turn_with_nothing_to_do_ends_itself() -> None:
    """NC-D03: no action possible and no Vendetta card: the turn ends automatically."""
    s = business_table()
    s = seat(s, 1, busy=frozenset({"W03", "W04", "W05"}))
    s = table(s, note_deck=DECK3, first_player_moved=True)
    s, _ = run(s, 0, END)
    assert s.turn_seat == 2  # seat 1 could not act
    s = seat(business_table(), 1, busy=frozenset({"W03", "W04", "W05"}), hand=("V01",))
    s, events = run(s, 0, END)
    assert s.turn_seat == 1  # a Vendetta hand keeps the turn open


def test_nc_d05_default_distribution_serves_clockwise_in_draw_order() -> None:
    """NC-D05."""
    s = table(business_table(), note_deck=DECK3)
    s, _ = run(s, 0, cash_in("W02", "T01", "gambling"))
    cmd = ENGINE.timeout_command(s, 0)
    drawn = list(s.choice.notes)
    assert [(g.seat, list(g.notes)) for g in cmd.distribute_notes.gifts] == [(1, drawn[:1]), (2, drawn[1:2])]
    assert not cmd.distribute_notes.HasField("first_player_to")


def test_nc_d06_default_rage_target_and_lowest_free_wiseguy() -> None:
    """NC-D06."""
    s = table(business_table(), note_deck=DECK3, first_player_moved=True, vendetta_deck=("V13",))
    s, _ = run(s, 0, cash_in("W02", "T01", "gambling"))
    s, _ = run(s, 0, distribute({2: [s.choice.notes[1]]}))
    assert ENGINE.timeout_command(s, 1).play_rage == pb.PlayRage(target=0, wiseguy="W01")


def test_nc_d06_x17_default_rage_without_effect_goes_to_the_first_other_player_clockwise() -> None:
    """NC-D06: with no player on whom the card has an effect, the timeout names "the first other
    player" clockwise from the drawer -- seat 3 for seat 2's Meeting draw, not the lowest seat
    (NC-X17: the card is then discarded without effect)."""
    from famiglia.rules.nostra_city.state import Choice

    s = meeting_table()
    for i in range(4):
        s = seat(s, i, bank=(), busy=frozenset(s.players[i].wiseguys))
    for card in ("V17", "V13"):  # Smash the Joint against empty Banks, Beating without a Free Wiseguy
        s = table(s, phase=Phase.RESOLUTION, choice=Choice("rage", 2, card=card, cause=-1))
        assert ENGINE.timeout_command(s, 2).play_rage == pb.PlayRage(target=3), card


def test_nc_d07_revenge_cards_run_on_the_turn_clock() -> None:
    """NC-D07: at the turn's timeout no card is played and the turn ends."""
    s = seat(business_table(), 0, hand=("V04",))
    assert ENGINE.timeout_command(s, 0) == END


def test_nc_d09_d10_d11_defaults_for_kept_notes_and_titles() -> None:
    """NC-D09, NC-D10, NC-D11."""
    s = meeting_table()
    b = [*notes(5000, k=1, skip=25), *notes(20000, "G", 1)]
    s = seat(s, 0, bank=(*s.players[0].bank, *b))
    s = table(s, street=(UNDERBOSS, "R2", "R3", "R4"), underboss="street", vendetta_deck=("V04", "V05"))
    s, _ = run(s, 0, bid("W01", 1, b))
    for who in range(4):
        s, _ = run(s, who, END)
    assert ENGINE.timeout_command(s, 0).keep_notes.notes == [b[1]]
    s, _ = run(s, 0, ENGINE.timeout_command(s, 0))
    assert ENGINE.timeout_command(s, 0).assign_title.seat == 1
    s, _ = run(s, 0, title("consigliere", 1))
    assert ENGINE.timeout_command(s, 1).assign_title.seat == 2


def test_nc_d13_wiseguy_options_are_command_parameters() -> None:
    """NC-D13: W05, W11, W12, W13 are fields of CashIn / Corrupt."""
    assert "use_power" in pb.CashIn.DESCRIPTOR.fields_by_name
    assert {"from_deck", "move_token"} <= set(pb.Corrupt.DESCRIPTOR.fields_by_name)


def test_nc_d14_there_is_no_trading_command() -> None:
    """NC-D14."""
    names = set(pb.Command.DESCRIPTOR.fields_by_name)
    assert not any("trade" in n or "offer" in n for n in names) and not INFO.optional_commands


def test_nc_d15_every_match_ends_within_the_step_bound() -> None:
    """NC-D15."""
    from famiglia.testing.random_play import play_random

    for seed in range(3):
        play = play_random(ENGINE, 5, seed)
        assert len(play.steps) < INFO.max_steps and ENGINE.result(play.state) is not None


def test_nc_x02_raid_first_cheats_everyone_for_the_whole_share() -> None:
    """NC-X02."""
    s = table(business_table(), note_deck=(POLICE_RAID, *notes(5000, k=3, skip=20)), first_player_moved=True,
              vendetta_deck=("V04", "V05", "V06"))
    s, events = run(s, 0, cash_in("W02", "T01", "gambling"))
    cheats = [(c.seat, c.shortfall) for c in of_kind(events, "players_cheated")[0].cheats]
    assert cheats == [(1, 1), (2, 1)]  # no Note and no gift possible: distributed at once (NC-D03)


def test_nc_x03_a_deck_of_only_the_raid_gives_nothing() -> None:
    """NC-X03."""
    em = Emitter(table(business_table(), note_deck=(POLICE_RAID,), note_discard=()))
    got, raided = draw_notes(em, 0, 3, Rng(0), bonus=True)
    assert got == [] and raided and em.state.note_deck == (POLICE_RAID,)


def test_nc_x04_an_empty_bank_cannot_bid_or_corrupt() -> None:
    """NC-X04."""
    s = seat(meeting_table(), 0, bank=())
    assert not can_bid(s, 0)
    s = table(s, phase=Phase.TRIAL)
    assert not can_corrupt(s, 0)
    s = seat(s, 0, wiseguys=("W12",))
    assert can_corrupt(s, 0)


def test_nc_x05_x06_no_free_wiseguy_or_turf_means_no_cash_in() -> None:
    """NC-X05, NC-X06."""
    s = seat(business_table(), 0, busy=frozenset({"W01", "W02", "W18"}))
    assert cash_in_options(s, 0) == []
    s = seat(business_table(), 0, busy=frozenset({"T01", "T02"}), turfs=("T01", "T02", "AC"))
    assert cash_in_options(s, 0) == []


def test_nc_x07_empty_street_spaces_take_no_bids_and_refills_stop() -> None:
    """NC-X07."""
    s = table(meeting_table(), street=("", "", "", ""))
    assert not can_bid(s, 0)


def test_nc_x09_no_underboss_no_titles() -> None:
    """NC-X09."""
    s = meeting_table()
    assert s.titles == () and s.underboss == "later"


def test_nc_x10_empty_vendetta_deck_and_discard_skip_the_draw() -> None:
    """NC-X10."""
    em = Emitter(table(business_table(), vendetta_deck=(), vendetta_discard=(), draws=(Draw(1, 2, 0),)))
    draw_vendetta(em, Rng(0))
    assert kinds(em.events) == ["vendetta_draw_skipped"] and em.state.players[1].vendetta_drawn == 0


def test_nc_x11_a_hit_wiseguy_leaves_the_game_with_its_power() -> None:
    """NC-X11."""
    from .helpers import revenge

    s = seat(business_table(), 0, hand=("V04",))
    s = seat(s, 1, wiseguys=("W20", "W03"))
    s, _ = run(s, 0, revenge("V04", 1, wiseguy="W20"))
    assert "W20" in s.removed and ENGINE.view(s, None).players[1].respect == 1  # Connecticut only


def test_nc_x12_blocked_type_leaves_the_other_type() -> None:
    """NC-X12."""
    s = table(business_table(), street=("I3", "R2", "R3", "R4"))
    assert {d for _, d, _ in cash_in_options(s, 0)} == {"queens", "drugs"}


def test_nc_x13_irs_audit_checks_only_new_bids() -> None:
    """NC-X13."""
    s = meeting_table()
    s, _ = run(s, 0, bid("W01", 2, [s.players[0].bank[0]]))
    s = table(s, street=("I5", *s.street[1:]))
    assert refused(s, 0, bid("W02", 3, [s.players[0].bank[0]])) == "NC-K15"
    assert s.bids[0].count == 1


def test_nc_x14_the_first_player_card_moves_once_a_month() -> None:
    """NC-X14."""
    s = table(business_table(), note_deck=DECK3, first_player=1, first_player_moved=True)
    s, _ = run(s, 0, cash_in("W01", "T01", "gambling"))
    assert refused(s, 0, distribute({}, fp=1)) == "NC-B13"


def test_nc_x15_no_size_limits() -> None:
    """NC-X15."""
    s = seat(business_table(), 0, bank=tuple(range(40)))
    assert ENGINE.view(s, 0).players[0].bank_size == 40


def test_nc_x16_both_snitch_cards_make_one_snitch() -> None:
    """NC-X16."""
    from famiglia.rules.nostra_city.decide.verdict import is_snitch

    s = seat(business_table(), 0, hand=("V01", "V02"))
    assert is_snitch(s.players[0])


def test_nc_x17_rage_without_effect_is_discarded() -> None:
    """NC-X17."""
    s = table(business_table(), note_deck=DECK3, first_player_moved=True, vendetta_deck=("V13",))
    s = seat(s, 0, busy=frozenset({"W01", "W18"}))
    s, _ = run(s, 0, cash_in("W02", "T01", "gambling"))
    s, events = run(s, 0, distribute({2: [s.choice.notes[1]]}))
    played = of_kind(events, "rage_played")[0]
    assert not played.effect and s.vendetta_discard == ("V13",) and s.players[1].vendetta_drawn == 1


def test_nc_x18_only_investigation_bids_lost_is_cheated() -> None:
    """NC-X18."""
    s = table(meeting_table(), street=("I6", "R2", "R3", "R4"), vendetta_deck=("V04",))
    s, _ = run(s, 0, bid("W01", 1, [s.players[0].bank[0]]))
    for who in range(4):
        s, events = run(s, who, END)
    assert [c.seat for c in of_kind(events, "players_cheated")[0].cheats] == [0]


def test_nc_x19_nobody_else_has_a_share_so_no_distribution() -> None:
    """NC-X19."""
    s = table(business_table(), note_deck=DECK3)
    s, events = run(s, 0, cash_in("W02", "T02", "drugs"))  # only seat 3's T05 has Drugs...
    assert s.choice is not None  # ...so seat 3 has a share
    s = table(business_table(), note_deck=DECK3)
    s = seat(s, 3, turfs=("T10",))
    s, events = run(s, 0, cash_in("W02", "T02", "drugs"))
    assert s.choice is None and "notes_banked" in kinds(events)


def test_nc_d01_malformed_or_wrong_commands_are_refusals_never_crashes() -> None:
    """NC-D01..D15: any command from any seat is accepted or refused with an NC rule id."""
    import random

    from famiglia.engine import RuleViolation
    from famiglia.testing.random_play import play_random

    chooser = random.Random(5)
    ids = ["W01", "W05", "W11", "W12", "W13", "T01", "T13", "AC", "V04", "V07", "V10", "V13", "X", ""]
    words = ["queens", "gambling", "drugs", "racket", "consigliere", "primo_capo", ""]

    def garbage() -> pb.Command:
        n = [chooser.randrange(-2, 82) for _ in range(chooser.randrange(0, 3))]
        t = chooser.randrange(-1, 6)
        return chooser.choice([
            pb.Command(),
            pb.Command(cash_in=pb.CashIn(wiseguy=chooser.choice(ids), turf=chooser.choice(ids),
                                         declared=chooser.choice(words), use_power=chooser.random() < 0.3)),
            pb.Command(distribute_notes=pb.DistributeNotes(gifts=[pb.Gift(seat=t, notes=n)],
                                                           first_player_to=chooser.randrange(-1, 6))),
            pb.Command(place_bid=pb.PlaceBid(wiseguy=chooser.choice(ids), location=chooser.randrange(-1, 6),
                                             notes=n)),
            pb.Command(keep_notes=pb.KeepNotes(notes=n)),
            pb.Command(assign_title=pb.AssignTitle(title=chooser.choice(words), seat=t)),
            pb.Command(corrupt=pb.Corrupt(wiseguy=chooser.choice(ids), notes=n, from_deck=chooser.random() < 0.3,
                                          move_token=chooser.random() < 0.3)),
            pb.Command(play_vendetta=pb.PlayVendetta(card=chooser.choice(ids), target=t,
                                                     wiseguy=chooser.choice(ids), turf=chooser.choice(ids))),
            pb.Command(play_rage=pb.PlayRage(target=t, wiseguy=chooser.choice(ids))),
            END,
        ])

    def on_step(before, step, after) -> None:
        for who in range(after.seats):
            for limit in (1, 3, 64):
                listed = ENGINE.legal_commands(after, who, limit=limit)
                assert len(listed) <= limit  # a bounded, representative sample
                for cmd in listed:
                    ENGINE.decide(after, who, cmd, Rng(2))
        for _ in range(6):
            who = chooser.randrange(-1, after.seats + 1)
            try:
                ENGINE.decide(after, who, garbage(), Rng(1))
            except RuleViolation as exc:
                assert exc.code.startswith("NC-") and exc.message

    for seed in range(3):
        play_random(ENGINE, 3 + seed, seed, on_step=on_step)


def test_nc_d10_d11_title_defaults_go_clockwise_from_the_giver() -> None:
    """NC-D10, NC-D11: the defaults count clockwise from the Underboss (the Consigliere), not from
    seat 0."""
    s = table(meeting_table(), street=(UNDERBOSS, "R2", "R3", "R4"), underboss="street",
              vendetta_deck=("V04", "V05", "V06"))
    for who in range(4):
        if who == 2:
            s, _ = run(s, 2, bid("W06", 1, [s.players[2].bank[0]]))  # one Note: kept at once (NC-D03)
        s, _ = run(s, who, END)
    assert s.choice.kind == "consigliere" and s.choice.seat == 2
    assert ENGINE.timeout_command(s, 2).assign_title.seat == 3  # the first other player clockwise
    s, _ = run(s, 2, title("consigliere", 1))
    # clockwise from seat 1: seat 2 is the Underboss, so seat 3
    assert ENGINE.timeout_command(s, 1).assign_title.seat == 3


def test_nc_k15_x13_under_the_irs_audit_a_one_note_bank_cannot_bid() -> None:
    """NC-K15, NC-X04: with I5 on the Street a Bank of one Note cannot make a bid at all, so
    the Meeting turn ends itself (NC-D03); two Notes can."""
    s = table(meeting_table(), street=("I5", "R2", "R3", "R4"))
    one = seat(s, 0, bank=s.players[0].bank[:1])
    assert not can_bid(one, 0) and can_bid(s, 0)
