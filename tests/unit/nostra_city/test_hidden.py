"""Hidden information (NC-H01..H17): views, visibility and redacted events."""

from __future__ import annotations

from famiglia.engine.protocol import VisibilityKind
from famiglia.rules.nostra_city import ENGINE
from famiglia.rules.nostra_city.data import POLICE_RAID
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
    revenge,
    run,
    seat,
    table,
)


def _vis(event):
    return ENGINE.visibility(event)


def test_nc_h01_public_table() -> None:
    """NC-H01: Territories, Respect, Street, sizes and counters are public."""
    s = business_table()
    v = ENGINE.view(s, None)
    assert list(v.street) == ["R1", "R2", "R3", "R4"] and v.players[1].bank_size == 4
    assert list(v.players[1].wiseguys) == ["W03", "W04", "W05"] and v.note_deck_size == len(s.note_deck)


def test_nc_h02_banks_are_seen_by_their_owner_only() -> None:
    """NC-H02."""
    s = business_table()
    assert list(ENGINE.view(s, 1).players[1].bank) == list(s.players[1].bank)
    assert list(ENGINE.view(s, 0).players[1].bank) == [] and not ENGINE.view(None or s, None).players[1].bank


def test_nc_h03_drawn_faces_for_the_active_player_and_receivers_only() -> None:
    """NC-H03."""
    s = table(business_table(), note_deck=(*notes(5000, k=3, skip=20), POLICE_RAID))
    s, events = run(s, 0, cash_in("W01", "T01", "gambling"))
    drawn = [e for e in events if e.WhichOneof("kind") == "notes_drawn"][0]
    assert _vis(drawn).seats == frozenset({0})
    assert list(ENGINE.redact(drawn, 1).notes_drawn.notes) == [] and ENGINE.redact(drawn, 1).notes_drawn.count == 3
    assert list(ENGINE.view(s, 0).choice.notes) and not list(ENGINE.view(s, 1).choice.notes)
    s, events = run(s, 0, distribute({1: [s.choice.notes[0]]}))
    given = [e for e in events if e.WhichOneof("kind") == "notes_given"][0]
    assert _vis(given).seats == frozenset({0, 1})


def test_nc_h04_h05_h07_x01_bids_show_count_not_value_or_location() -> None:
    """NC-H04, NC-H05, NC-H07, NC-X01."""
    s = meeting_table()
    s, events = run(s, 0, bid("W01", 3, list(s.players[0].bank[:2])))
    committed, content = events
    assert _vis(committed).kind is VisibilityKind.PUBLIC and _vis(content).seats == frozenset({0})
    assert ENGINE.redact(content, 1) is None
    other = ENGINE.view(s, 1)
    assert other.bids[0].count == 2 and other.bids[0].location == 0 and not other.bids[0].notes
    assert other.players[0].locations_left == 3 and not other.players[0].locations
    mine = ENGINE.view(s, 0)
    assert mine.bids[0].location == 3 and len(mine.bids[0].notes) == 2


def test_nc_h06_single_winner_notes_never_shown() -> None:
    """NC-H06: the kept and discarded Notes of a single winner stay private."""
    s = meeting_table()
    s = table(s, vendetta_deck=("V04", "V05"))
    s, _ = run(s, 0, bid("W01", 1, list(s.players[0].bank[:2])))
    for who in (0, 1, 2, 3):
        s, events = run(s, who, END)
    assert not of_kind(events, "bids_revealed") and s.choice.kind == "keep"
    assert not ENGINE.view(s, 1).choice.notes
    s, events = run(s, 0, pb_keep(s.choice.notes[0]))
    kept = [e for e in events if e.WhichOneof("kind") == "notes_kept"][0]
    assert _vis(kept).seats == frozenset({0}) and not ENGINE.redact(kept, 2).notes_kept.discarded


def test_nc_h06_m08_bids_shown_at_resolution_stay_in_every_view_until_the_next_meeting() -> None:
    """NC-H06, NC-M08: the bids on a card with two or more bidders are shown to all, so a
    client that reconnects later in the resolution (here: the single winner of space 2 keeping
    a Note), or in the Trial, still draws them from its view; a single winner's stay unseen."""
    from famiglia.engine import fold
    from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

    s = table(meeting_table(), vendetta_deck=("V04", "V05", "V06"))
    b0, b1, b2 = [s.players[0].bank[0]], list(s.players[1].bank[:2]), list(s.players[2].bank[:2])
    s, _ = run(s, 0, bid("W01", 1, b0))
    s, _ = run(s, 0, END)
    s, _ = run(s, 1, bid("W03", 1, b1))
    s, _ = run(s, 1, END)
    s, _ = run(s, 2, bid("W06", 2, b2))
    for who in (2, 3):
        s, _ = run(s, who, END)
    assert s.phase is Phase.RESOLUTION and s.choice.kind == "keep" and s.choice.seat == 2
    for viewer in (None, 0, 2, 3):
        shown = list(ENGINE.view(s, viewer).revealed_bids)
        assert [r.space for r in shown] == [1]
        assert [(b.seat, b.wiseguy, list(b.notes), b.value) for b in shown[0].bids] == [
            (0, "W01", b0, 10000), (1, "W03", b1, 20000)]
    s, _ = run(s, 2, pb_keep(b2[0]))
    assert s.phase is Phase.TRIAL and [r.space for r in ENGINE.view(s, 3).revealed_bids] == [1]
    s = fold(ENGINE, [pb.Event(phase_started=pb.PhaseStarted(month=2, phase="meeting", order=[0, 1, 2, 3]))], s)
    assert not ENGINE.view(s, None).revealed_bids


def pb_keep(n):
    from .helpers import keep

    return keep([n])


def test_nc_h08_h09_vendetta_hands_and_snitches_are_secret_until_the_end() -> None:
    """NC-H08, NC-H09."""
    s = seat(business_table(), 1, hand=("V01", "V04"))
    v = ENGINE.view(s, 0)
    assert v.players[1].hand_size == 2 and not v.players[1].hand and not v.players[1].snitch
    over = table(s, phase=Phase.OVER, snitches=(1,), verdict_result="guilty")
    assert ENGINE.view(over, 0).players[1].snitch and list(ENGINE.view(over, 0).players[1].hand) == ["V01", "V04"]


def test_nc_h10_h17_corruption_pile_faces() -> None:
    """NC-H10, NC-H17: own placed Notes only; pile contents at the end (NC-H16)."""
    s = table(meeting_table(), phase=Phase.TRIAL)
    n = s.players[0].bank[0]
    s, events = run(s, 0, corrupt("W01", [n]))
    placed = [e for e in events if e.WhichOneof("kind") == "notes_corrupted"][0]
    assert _vis(placed).seats == frozenset({0}) and ENGINE.redact(placed, 1) is None
    assert list(ENGINE.view(s, 0).players[0].corrupted) == [n] and not ENGINE.view(s, 1).players[0].corrupted
    assert not ENGINE.view(s, 0).corruption_pile and ENGINE.view(s, 1).corruption_pile_size == 1


def test_nc_h11_h12_note_discard_pile_shows_its_size_only() -> None:
    """NC-H11, NC-H12."""
    s = table(business_table(), note_discard=tuple(notes(50000, "I", 2)))
    v = ENGINE.view(s, 0)
    assert v.note_discard_size == 2 and 80 not in list(v.corruption_pile)


def test_nc_h13_deck_orders_are_server_only() -> None:
    """NC-H13."""
    from famiglia.engine import MatchConfig

    events = ENGINE.setup(MatchConfig(seats=3), 3)
    shuffles = [e for e in events if e.WhichOneof("kind") == "deck_shuffled"]
    assert shuffles and all(_vis(e).kind is VisibilityKind.SERVER for e in shuffles)
    assert all(not ENGINE.redact(e, 0).deck_shuffled.cards for e in shuffles)


def test_nc_h14_burglary_private_to_thief_and_victim() -> None:
    """NC-H14."""
    s = seat(business_table(), 0, hand=("V07",))
    s, events = run(s, 0, revenge("V07", 2))
    stolen = of_kind(events, "notes_stolen")[0]
    event = [e for e in events if e.WhichOneof("kind") == "notes_stolen"][0]
    assert _vis(event).seats == frozenset({0, 2}) and stolen.count == 2
    assert ENGINE.redact(event, 1).notes_stolen.count == 2 and not ENGINE.redact(event, 1).notes_stolen.notes


def test_nc_h15_smashed_note_seen_by_its_loser_only() -> None:
    """NC-H15."""
    s = table(business_table(), note_deck=(*notes(5000, k=3, skip=20), POLICE_RAID), first_player_moved=True,
              vendetta_deck=("V17",))
    s, _ = run(s, 0, cash_in("W02", "T01", "gambling"))
    s, events = run(s, 0, distribute({2: [s.choice.notes[1]]}))
    smashed = [e for e in events if e.WhichOneof("kind") == "note_smashed"][0]
    assert _vis(smashed).seats == frozenset({0}) and ENGINE.redact(smashed, 1).note_smashed.note == -1


def test_nc_h16_everything_is_public_once_the_match_is_over() -> None:
    """NC-H16."""
    s = table(business_table(), phase=Phase.OVER, verdict_result="innocent")
    v = ENGINE.view(s, None)
    assert all(list(p.bank) for p in v.players)
