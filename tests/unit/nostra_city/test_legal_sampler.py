"""legal_commands with an rng: every legal member of a compound choice can come up (DESIGN.md,
"a complete generator/sampler that covers them all"), while the answer without one keeps
the representatives it always listed (NC-D04, NC-D05, NC-D08, NC-D09, NC-D12, NC-D13)."""

from __future__ import annotations

import random
from itertools import combinations

from famiglia.engine import Rng, Sampled
from famiglia.nostra_city.v1 import nostra_city_pb2 as pb
from famiglia.rules.nostra_city import ENGINE
from famiglia.rules.nostra_city.data import NOTE_MARK, POLICE_RAID
from famiglia.rules.nostra_city.state import Phase, State

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
    run,
    seat,
    table,
)

SAFE_VENDETTA = ("V04", "V05", "V06", "V07", "V08", "V09", "V10", "V11", "V12")  # revenge cards only


def _key(command: pb.Command) -> bytes:
    return command.SerializeToString(deterministic=True)


def _drawn(state: State, who: int, limit: int = 16, times: int = 300) -> dict[bytes, pb.Command]:
    """Every command the sampler lists over many draws; each answer within `limit`, a
    `Sampled` exactly when the fixed answer is, and everything in it accepted by `decide`."""
    fixed = ENGINE.legal_commands(state, who, limit)
    out: dict[bytes, pb.Command] = {}
    for i in range(times):
        listed = ENGINE.legal_commands(state, who, limit, rng=random.Random(i))
        assert len(listed) <= limit
        assert isinstance(listed, Sampled) == isinstance(fixed, Sampled)
        out.update((_key(c), c) for c in listed)
    for command in out.values():
        ENGINE.decide(state, who, command, Rng(0))
    return out


def _of_kind(commands: dict[bytes, pb.Command], kind: str) -> set[bytes]:
    return {k for k, c in commands.items() if c.WhichOneof("kind") == kind}


def _keys(commands: list[pb.Command]) -> set[bytes]:
    return {_key(c) for c in commands}


# -- cash-ins -----------------------------------------------------------------------------------
def test_nc_b01_r05_any_free_wiseguy_may_cash_in() -> None:
    """NC-B01, NC-R05: every Free Wiseguy may act; W06 stands for the Baldini without rng, and
    the sampler also draws W07 and W08, for every legal source and type."""
    s = table(business_table(), turn=2)  # seat 2: W06 W07 W08 (no cash-in power), T07 Bronx/Gambling
    fixed = ENGINE.legal_commands(s, 2)
    assert isinstance(fixed, Sampled)
    assert [_key(c) for c in fixed] == [_key(c) for c in (END, cash_in("W06", "T07", "bronx"),
                                                          cash_in("W06", "T07", "gambling"))]
    whole = {_key(cash_in(w, "T07", d)) for w in ("W06", "W07", "W08") for d in ("bronx", "gambling")}
    assert _of_kind(_drawn(s, 2), "cash_in") == whole


def test_nc_w105_the_any_source_option_is_drawn_with_w05_only() -> None:
    """NC-W105: W05 names a Busy source without making it Busy; no other Wiseguy does, so the
    sampler never draws the option for another."""
    s = seat(table(business_table(), turn=1), 1, busy=frozenset({"T04"}))
    drawn = [c.cash_in for c in _drawn(s, 1).values() if c.WhichOneof("kind") == "cash_in"]
    assert any(c.use_power and c.turf == "T04" for c in drawn)
    assert all(c.wiseguy == "W05" for c in drawn if c.use_power)


def test_a_choice_the_representatives_cover_is_no_sample() -> None:
    """With one Free Wiseguy every cash-in is listed: a plain list, with or without rng."""
    s = seat(table(business_table(), turn=2), 2, busy=frozenset({"W07", "W08"}))
    assert not isinstance(ENGINE.legal_commands(s, 2), Sampled)
    assert not isinstance(ENGINE.legal_commands(s, 2, rng=random.Random(1)), Sampled)
    assert _keys(ENGINE.legal_commands(s, 2)) == _keys(ENGINE.legal_commands(s, 2, rng=random.Random(1)))


# -- bids -----------------------------------------------------------------------------------------
def test_nc_m01_m02_m03_any_free_wiseguy_location_and_set_of_notes_may_bid() -> None:
    """NC-M01..M03: the representatives bid with W01 only (`test_nc_v05_...` says which Notes);
    the sampler draws any Wiseguy, any filled space, any set."""
    s = table(meeting_table(), street=("R1", "", "R3", "R4"))  # seat 0: W01 W02 W18, four $10,000s
    bank = sorted(s.players[0].bank)
    middle = bid("W02", 4, bank[1:3])
    fixed = ENGINE.legal_commands(s, 0)
    assert isinstance(fixed, Sampled) and _key(middle) not in _keys(fixed)
    assert {c.place_bid.wiseguy for c in fixed if c.WhichOneof("kind") == "place_bid"} == {"W01"}
    drawn = _drawn(s, 0, times=400)
    bids = [drawn[k].place_bid for k in _of_kind(drawn, "place_bid")]
    assert _key(middle) in drawn and _key(bid("W18", 1, [bank[2]])) in drawn
    assert {b.wiseguy for b in bids} == {"W01", "W02", "W18"}
    assert {b.location for b in bids} == {1, 3, 4}  # NC-M03: never the empty space


def test_nc_k15_under_i5_no_one_note_bid_is_drawn() -> None:
    """NC-K15: with I5 on the Street the sampler draws bids of two Notes or more only."""
    s = table(meeting_table(), street=("R1", "I5", "R3", "R4"))
    drawn = _drawn(s, 0)
    sizes = {len(drawn[k].place_bid.notes) for k in _of_kind(drawn, "place_bid")}
    assert sizes == {2, 3, 4}


def test_nc_w108_d09_every_note_or_pair_kept_can_come_up_under_a_limit() -> None:
    """NC-W108, NC-D09: W08's winner keeps one or two Notes of the bid. The list is whole (no
    sample), but cut at a limit: with rng it is cut at random, so each answer comes up."""
    s = meeting_table()
    mine = tuple(notes(5000, k=3) + notes(20000, "I", 3))  # no other seat holds these
    s = seat(s, 2, bank=mine)
    s = table(s, vendetta_deck=SAFE_VENDETTA)
    for who in s.order:
        if who == 2:
            s, _ = run(s, 2, bid("W08", 1, list(mine)))
        if s.phase is Phase.MEETING and s.turn_seat == who:
            s, _ = run(s, who, END)
    assert s.choice is not None and s.choice.kind == "keep" and s.choice.keep == 2
    whole = {_key(keep([n])) for n in mine} | {_key(keep(sorted(p))) for p in combinations(mine, 2)}
    assert _keys(ENGINE.legal_commands(s, 2)) == whole and len(whole) == 21
    assert not isinstance(ENGINE.legal_commands(s, 2, 16), Sampled)
    assert set(_drawn(s, 2, limit=16)) == whole


def test_nc_d09_equal_notes_of_a_bid_are_drawn_in_either_order() -> None:
    """NC-D09: a bid keeps its placement order into the keep choice, whose timeout keeps the
    highest Note, the earliest placed among equals. So the sampler draws an Innocent and a
    Guilty $10,000 Note either way round, both accepted, and the two orders keep different
    Notes on timeout; a $5,000 Note never changes that, so it stays in value order."""
    low, i10, g10 = notes(5000)[0], notes(10000, "I")[0], notes(10000, "G")[0]
    s = seat(table(meeting_table(), vendetta_deck=SAFE_VENDETTA), 0, bank=tuple(sorted((low, i10, g10))))
    fixed = ENGINE.legal_commands(s, 0)
    assert _key(bid("W01", 1, [g10, i10])) not in _keys(fixed)  # the representatives: id order
    drawn = _drawn(s, 0, times=400)
    orders = {tuple(drawn[k].place_bid.notes) for k in _of_kind(drawn, "place_bid")}
    assert {(i10, g10), (g10, i10), (low, i10, g10), (low, g10, i10)} <= orders
    assert all(o[0] == low for o in orders if low in o)  # different values: value order only
    kept = []
    for order in ([i10, g10], [g10, i10]):
        t, _ = run(s, 0, bid("W01", 1, order))
        for who in t.order:
            if t.phase is Phase.MEETING and t.turn_seat == who:
                t, _ = run(t, who, END)
        assert t.choice is not None and t.choice.kind == "keep" and t.choice.notes == tuple(order)
        timeout = ENGINE.timeout_command(t, 0)
        assert timeout is not None
        kept.append(list(timeout.keep_notes.notes))
    assert kept == [[i10], [g10]]


# -- distributions --------------------------------------------------------------------------------
def _distributing() -> tuple[State, list[int]]:
    """Seat 0 (First Player) cashes in Gambling: shares (1, 1, 1, 0), three Notes drawn."""
    s = business_table()
    s = table(s, note_deck=tuple(n for n in s.note_deck if n != POLICE_RAID) + (POLICE_RAID,))
    s, _ = run(s, 0, cash_in("W02", "T01", "gambling"))
    assert s.choice is not None and s.choice.kind == "distribute"
    return s, list(s.choice.notes)


def test_nc_b08_b09_b12_every_split_within_the_shares_can_be_drawn() -> None:
    """NC-B08, NC-B09, NC-B12: seats 1 and 2 may each take none or one of the three Notes, or
    one of them the First Player card instead: 13 + 4 + 4 splits. The representatives list
    seven (`test_nc_v05_...`); the sampler draws all 21, each once in its canonical form."""
    s, (a, b, c) = _distributing()
    fixed = ENGINE.legal_commands(s, 0)
    assert isinstance(fixed, Sampled) and len(fixed) == 7
    swapped = distribute({1: [c], 2: [a]})
    assert _key(swapped) not in _keys(fixed)
    drawn = _drawn(s, 0)
    assert _key(swapped) in drawn and _key(distribute({2: [b]}, fp=1)) in drawn
    assert len(drawn) == 21
    assert all(c.distribute_notes.first_player_to != 3 for c in drawn.values())  # no share, no card


def test_nc_v05_the_representatives_differ_in_the_marks_a_seat_gives_up() -> None:
    """NC-V05: a marked Note moves the verdict only from the Corruption Pile, so whoever spends
    or gives Notes cares which marks go. The representatives bid one Note of each (value, mark)
    kind, the two lowest, the whole Bank and the whole Bank but its Innocent or its Guilty
    Notes; a distribution serves every share in draw order, or keeping the Innocent or the
    Guilty Notes drawn, besides keep-all, cheat-one, serve-one and the gifts."""
    low, i10, g10, i20 = notes(5000)[0], notes(10000, "I")[0], notes(10000, "G")[0], notes(20000, "I")[0]
    s = seat(table(meeting_table(), street=("R1", "", "", "")), 0, bank=tuple(sorted((low, i10, g10, i20))))
    sets = {tuple(c.place_bid.notes) for c in ENGINE.legal_commands(s, 0) if c.WhichOneof("kind") == "place_bid"}
    assert sets == {(low,), (i10,), (g10,), (i20,), (low, min(i10, g10)), (low, *sorted((i10, g10)), i20),
                    (low, g10), (low, i10, i20)}
    t, (innocent, plain, guilty) = _distributing()
    assert [NOTE_MARK[n] for n in (innocent, plain, guilty)] == ["I", "", "G"]  # in draw order
    listed = _keys(ENGINE.legal_commands(t, 0))
    assert _key(distribute({1: [innocent], 2: [plain]})) in listed  # draw order: keeps the Guilty
    assert _key(distribute({1: [plain], 2: [guilty]})) in listed  # keeps the Innocent


# -- Corruptions ----------------------------------------------------------------------------------
def test_nc_t01_w111_any_bank_note_or_w11_pair_can_be_corrupted() -> None:
    """NC-T01, NC-W111: W09 stands for the Wiseguys without a Corruption power and one Note for
    each (value, mark); the sampler draws each Free Wiseguy with each Bank Note, and W11 with
    each pair: 4 + 4 + 4 + 6 Corruptions."""
    s = table(meeting_table(), phase=Phase.TRIAL, month=1, turn=3)  # seat 3: W09 W10 W11
    bank = list(s.players[3].bank)
    fixed = ENGINE.legal_commands(s, 3)
    assert isinstance(fixed, Sampled) and len(fixed) == 1 + 5
    whole = ({_key(corrupt(w, [n])) for w in ("W09", "W10", "W11") for n in bank}
             | {_key(corrupt("W11", list(p))) for p in combinations(bank, 2)})
    assert _key(corrupt("W11", [bank[1], bank[3]])) not in _keys(fixed)
    assert _of_kind(_drawn(s, 3), "corrupt") == whole


def test_nc_w112_w113_the_fixers_options_stay_in_the_draw() -> None:
    """NC-W112, NC-W113: the deck and the token are members too; the token only while unspent."""
    s = seat(table(meeting_table(), phase=Phase.TRIAL, month=1), 0, wiseguys=("W12", "W13", "W01"))
    drawn = _drawn(s, 0)
    assert {_key(corrupt("W12", deck=True)), _key(corrupt("W13", token=True))} <= set(drawn)
    spent = _drawn(table(s, w13_spent=True), 0)
    assert _key(corrupt("W13", token=True)) not in spent


# -- the answer itself ----------------------------------------------------------------------------
def test_without_rng_the_answer_is_the_same_every_time() -> None:
    """Bots and replays read the representatives: no rng, no chance."""
    for s, who in ((table(meeting_table(), turn=0), 0), (_distributing()[0], 0)):
        first = [_key(c) for c in ENGINE.legal_commands(s, who, 16)]
        assert all([_key(c) for c in ENGINE.legal_commands(s, who, 16)] == first for _ in range(3))


def test_the_sampler_respects_the_limit_and_ends_the_turn_first() -> None:
    """NC-R04: ending the turn is always listed first; a compound choice fills the room left."""
    states = [(table(business_table(), turn=2), 2), (meeting_table(), 0), (_distributing()[0], 0),
              (table(meeting_table(), phase=Phase.TRIAL, month=1, turn=3), 3)]
    rng = random.Random(3)
    for s, who in states:
        assert ENGINE.legal_commands(s, who, 0, rng=rng) == []
        for limit in (1, 2, 3, 5, 16, 64):
            listed = ENGINE.legal_commands(s, who, limit, rng=rng)
            assert 1 <= len(listed) <= limit
            assert len({_key(c) for c in listed}) == len(listed), "no command twice"
            if s.choice is None:
                assert _key(listed[0]) == _key(END)
            for command in listed:
                ENGINE.decide(s, who, command, Rng(0))


def test_other_seats_get_nothing_with_or_without_rng() -> None:
    """NC-D01: one seat decides at a time; the sampler lists nothing for the others."""
    s = meeting_table()
    assert all(ENGINE.legal_commands(s, who, rng=random.Random(0)) == [] for who in (1, 2, 3))
