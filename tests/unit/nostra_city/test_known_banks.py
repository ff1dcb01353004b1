"""What a seat knows of another seat's Bank from private events (NC-H03, NC-H14), kept in its
View (`SeatView.known_bank`) for a client that reconnects, and dropped when it goes stale."""

from __future__ import annotations

import random
from typing import Any

from famiglia.engine import Rng
from famiglia.rules.nostra_city import ENGINE
from famiglia.rules.nostra_city.data import POLICE_RAID
from famiglia.rules.nostra_city.state import Phase, State
from famiglia.testing.random_play import play_random

from .helpers import (
    END,
    bid,
    business_table,
    cash_in,
    corrupt,
    distribute,
    keep,
    notes,
    of_kind,
    revenge,
    run,
    seat,
    table,
)

DRAWN = notes(20000, "I", 4)  # never in a starting Bank (NC-S05)


def _known(s: State, viewer: int | None) -> dict[int, list[int]]:
    """Per seat, the Notes `viewer`'s View says it knows are in that seat's Bank (empty ones left out)."""
    return {p.seat: list(p.known_bank) for p in ENGINE.view(s, viewer).players if p.known_bank}


def _before_bids(s: State, viewer: int | None) -> dict[int, list[int]]:
    """Per seat, the Notes `viewer`'s View says are in that seat's Bank or its sealed bids."""
    return {p.seat: list(p.known_before_bids) for p in ENGINE.view(s, viewer).players if p.known_before_bids}


def _given() -> State:
    """Seat 0 cashes in Gambling (shares 1, 1, 1, 0) and gives DRAWN[0] to seat 1, DRAWN[1] to seat 2."""
    s = table(business_table(), note_deck=(*DRAWN, POLICE_RAID))
    s, _ = run(s, 0, cash_in("W02", "T01", "gambling"))
    s, _ = run(s, 0, distribute({1: [DRAWN[0]], 2: [DRAWN[1]]}))
    assert DRAWN[0] in s.players[1].bank and DRAWN[1] in s.players[2].bank
    return s


def _turn_of(s: State, who: int, phase: Phase) -> State:
    """The same table, `who`'s turn in `phase`, before any action."""
    order = tuple((who + i) % s.seats for i in range(s.seats))
    return table(s, phase=phase, order=order, turn=0, turn_acted=False, choice=None, resolution=0,
                 locations_revealed=False, meeting_winners=frozenset(), meeting_bidders=frozenset())


def test_nc_h03_the_giver_knows_what_it_gave_and_nobody_else_is_told() -> None:
    """NC-H03: the active player saw the faces it gave; its View keeps them in the receivers'
    Banks. The receivers see only their own Bank, the others and spectators nothing."""
    s = _given()
    assert _known(s, 0) == {1: [DRAWN[0]], 2: [DRAWN[1]]}
    for viewer in (1, 2, 3, None):
        assert _known(s, viewer) == {}, viewer
    assert DRAWN[0] in ENGINE.view(s, 1).players[1].bank


def test_nc_h16_a_finished_match_shows_banks_not_knowledge() -> None:
    """NC-H16: once the match is over every Bank is shown to all, so no seat's View differs."""
    over = table(_given(), phase=Phase.OVER, verdict_result="innocent")
    for viewer in (0, 1, None):
        assert _known(over, viewer) == {}
        assert DRAWN[0] in ENGINE.view(over, viewer).players[1].bank


def test_nc_h04_a_bid_makes_the_bidders_bank_unknown() -> None:
    """NC-M01, NC-H04: the others see only how many Notes went into the bid, not which, so while
    it is sealed the giver cannot tell that DRAWN[0] is still in the bidder's Bank (whichever Notes
    it bid)."""
    s = _turn_of(_given(), 1, Phase.MEETING)
    other = next(n for n in s.players[1].bank if n != DRAWN[0])
    s, _ = run(s, 1, bid("W03", 1, [other]))
    assert DRAWN[0] in s.players[1].bank
    assert _known(s, 0) == {2: [DRAWN[1]]}
    assert _before_bids(s, 0) == {1: [DRAWN[0]]}  # in the Bank or the bid: the giver cannot tell
    for viewer in (1, 2, 3, None):
        assert _before_bids(s, viewer) == {}, viewer


def test_nc_h04_determinize_deals_a_note_known_before_a_sealed_bid_into_that_bank_or_bid() -> None:
    """NC-H03, NC-H04: the giver of DRAWN[0] knows it is in seat 1's Bank or in the Note seat 1
    bid, so its search is never dealt a world with DRAWN[0] anywhere else; both places come up."""
    s = _turn_of(_given(), 1, Phase.MEETING)
    s, _ = run(s, 1, bid("W03", 1, [DRAWN[0]]))
    view = ENGINE.view(s, 0)
    where = set()
    for dice in range(40):
        world = ENGINE.determinize(view, 0, Rng(dice))
        in_bid = [b for b in world.bids if DRAWN[0] in b.notes]
        assert DRAWN[0] in world.players[1].bank or (in_bid and in_bid[0].seat == 1), dice
        assert all(DRAWN[0] not in p.bank for i, p in enumerate(world.players) if i != 1)
        assert ENGINE.view(world, 0).players == view.players  # (the test table's decks are not full ones)
        where.add("bid" if in_bid else "bank")
    assert where == {"bank", "bid"}


SAFE_VENDETTA = ("V04", "V05", "V06", "V07", "V08", "V09", "V10", "V11", "V12")  # no Rage: no Note smashed


def _meeting(s: State, plan: dict[int, list[tuple[str, int, list[int]]]]) -> tuple[State, list[str]]:
    """The Meeting from `s`, seat 1 first: each seat places its planned bids (wiseguy, space,
    Notes) and ends its turn; each single winner keeps its first Note (NC-M07). The kinds of
    the events after the last bid, in order, come back with the table."""
    s = table(_turn_of(s, 1, Phase.MEETING), vendetta_deck=SAFE_VENDETTA)
    after: list[str] = []
    for who in s.order:
        for w, space, bid_notes in plan.get(who, []):
            s, _ = run(s, who, bid(w, space, bid_notes))
        s, events = run(s, who, END)
        after += [e.WhichOneof("kind") for e in events]
    while s.phase is Phase.RESOLUTION or (s.choice is not None and s.choice.kind == "keep"):
        assert s.choice is not None and s.choice.kind == "keep", s.choice
        s, events = run(s, s.choice.seat, keep([s.choice.notes[0]]))
        after += [e.WhichOneof("kind") for e in events]
    assert s.phase is Phase.TRIAL
    return s, after


def _other_notes(s: State, holder: int, k: int) -> list[int]:
    return [n for n in s.players[holder].bank if n not in DRAWN][:k]


def test_nc_h06_a_shown_bid_keeps_the_known_notes_it_did_not_hold() -> None:
    """NC-H04, NC-M08, NC-H06: while seat 1's bid is sealed the giver cannot tell whether
    DRAWN[0] is in it; once every bid of seat 1 was shown to all and DRAWN[0] was in none,
    the giver knows it is still in seat 1's Bank."""
    s = _given()
    bid_1, bid_2 = _other_notes(s, 1, 1), _other_notes(s, 2, 1)
    sealed = _turn_of(s, 1, Phase.MEETING)
    sealed, _ = run(sealed, 1, bid("W03", 1, bid_1))
    assert _known(sealed, 0) == {2: [DRAWN[1]]}  # NC-H04: it may be in the bid
    s, after = _meeting(s, {1: [("W03", 1, bid_1)], 2: [("W06", 1, bid_2)]})
    assert "bids_revealed" in after
    assert DRAWN[0] in s.players[1].bank
    assert _known(s, 0) == {1: [DRAWN[0]], 2: [DRAWN[1]]}
    for viewer in (1, 2, 3, None):
        assert _known(s, viewer) == {}, viewer


def test_nc_h06_a_known_note_shown_in_a_bid_is_gone() -> None:
    """NC-M08, NC-H06: DRAWN[0] shown in seat 1's bid went to the discard pile; the giver keeps
    the other Note it knows in the Bank of seat 2, whose shown bid did not hold it."""
    s = _given()
    s, after = _meeting(s, {1: [("W03", 1, [DRAWN[0]])], 2: [("W06", 1, _other_notes(s, 2, 2))]})
    assert "bids_revealed" in after and DRAWN[0] in s.note_discard
    assert _known(s, 0) == {2: [DRAWN[1]]}


def test_nc_m08_h06_determinize_keeps_the_shown_bids_on_the_discard_pile() -> None:
    """NC-M08, NC-H06: every seat saw the Notes of the bids on space 1 go to the Note discard
    pile, so a search is never dealt a world with one of them in a Bank, the deck or the Pile
    in that Trial. Once a Police Raid (W12's, NC-W112, NC-B07) has emptied the pile they may be
    anywhere, and the world keeps the pile's size."""
    s = _given()
    bids = {1: _other_notes(s, 1, 2), 2: _other_notes(s, 2, 1)}
    s, _ = _meeting(s, {1: [("W03", 1, bids[1])], 2: [("W06", 1, bids[2])]})
    shown = {*bids[1], *bids[2]}
    assert shown <= set(s.note_discard)
    for viewer in (0, 3):
        view = ENGINE.view(s, viewer)
        for dice in range(10):
            world = ENGINE.determinize(view, viewer, Rng(dice))
            assert shown <= set(world.note_discard), (viewer, dice)
            assert len(world.note_discard) == len(s.note_discard)
    raided = table(s, note_deck=(*s.note_deck, *s.note_discard), note_discard=())
    world = ENGINE.determinize(ENGINE.view(raided, 3), 3, Rng(0))
    assert world.note_discard == ()


def test_nc_m07_h06_a_bid_never_shown_makes_the_bank_unknown() -> None:
    """NC-M07, NC-H06: seat 1's bid won alone is never shown, so whichever of its bids came
    first, the giver can no longer tell whether DRAWN[0] left seat 1's Bank (it did not)."""
    for shown_space, alone_space in ((1, 2), (2, 1)):
        s = _given()
        plan = {1: [("W03", shown_space, _other_notes(s, 1, 1)), ("W04", alone_space, _other_notes(s, 1, 2)[1:])],
                2: [("W06", shown_space, _other_notes(s, 2, 1))]}
        s, after = _meeting(s, plan)
        assert "bids_revealed" in after and "notes_kept" in after
        assert DRAWN[0] in s.players[1].bank
        assert _known(s, 0) == {2: [DRAWN[1]]}, (shown_space, alone_space)


def test_nc_h06_h14_a_burglary_before_the_reveal_is_still_kept() -> None:
    """NC-H14, NC-H06: the Notes seat 1 lost to seat 3's Burglary stay known in seat 3's Bank
    through seat 3's shown bid, which held none of them."""
    s = seat(_turn_of(_given(), 3, Phase.BUSINESS), 3, hand=("V07",))
    s, events = run(s, 3, revenge("V07", 1))
    stolen = sorted(of_kind(events, "notes_stolen")[0].notes)
    s, _ = run(s, 3, END)
    plan = {1: [("W03", 1, _other_notes(s, 1, 1))],
            3: [("W09", 1, [n for n in s.players[3].bank if n not in stolen][:1])]}
    s, after = _meeting(s, plan)
    assert "bids_revealed" in after
    assert _known(s, 1) == {3: stolen}


def test_nc_h10_a_corruption_from_the_bank_makes_it_unknown() -> None:
    """NC-T01, NC-H10: the Note put on the Pile is seen by its placer only."""
    s = _turn_of(_given(), 2, Phase.TRIAL)
    other = next(n for n in s.players[2].bank if n != DRAWN[1])
    s, _ = run(s, 2, corrupt("W06", [other]))
    assert _known(s, 0) == {1: [DRAWN[0]]}


def test_nc_h14_the_victim_knows_what_the_thief_took_and_a_third_seat_loses_track() -> None:
    """NC-K51, NC-H14: the victim of a Burglary knows the Notes taken are in the thief's Bank;
    the giver, who saw only how many went, no longer knows the victim's Bank."""
    s = seat(_turn_of(_given(), 3, Phase.BUSINESS), 3, hand=("V07",))
    s, events = run(s, 3, revenge("V07", 1))
    stolen = sorted(of_kind(events, "notes_stolen")[0].notes)
    assert _known(s, 1) == {3: stolen}
    assert _known(s, 0) == {2: [DRAWN[1]]}
    for viewer in (2, 3, None):
        assert _known(s, viewer) == {}, viewer
    s, _ = run(s, 3, END)
    s = _turn_of(s, 3, Phase.TRIAL)  # the thief's Bank is unknown again once it corrupts
    s, _ = run(s, 3, corrupt("W09", [s.players[3].bank[0]]))
    assert _known(s, 1) == {}


def test_nc_h14_the_thief_still_knows_what_it_did_not_take() -> None:
    """NC-H14: a Burglary by the seat that knows the Bank drops only the Notes it took (now its
    own); it saw which ones left."""
    for dice in range(8):
        s = seat(_turn_of(_given(), 0, Phase.BUSINESS), 0, hand=("V07",))
        s, events = run(s, 0, revenge("V07", 1), rng=dice)
        stolen = of_kind(events, "notes_stolen")[0].notes
        assert _known(s, 0).get(1, []) == [n for n in [DRAWN[0]] if n not in stolen]
        assert _known(s, 1) == {0: sorted(stolen)}


def test_nc_h15_smash_the_joint_makes_the_bank_unknown() -> None:
    """NC-K54, NC-H15: the smashed Note is seen by its loser only, so no other seat knows which
    Notes are left, not even the one whose Rage card it was."""
    s = _given()
    s, _ = run(s, 0, END)
    # seat 1 cashes in Gambling (shares 1, 1, 1, 0), gives seat 0 nothing: seat 0 is Cheated and
    # its Smash the Joint hits seat 1, the active player (NC-B10, NC-K48)
    s = table(_turn_of(s, 1, Phase.BUSINESS), note_deck=(*notes(20000, "G", 3), POLICE_RAID), vendetta_deck=("V17",))
    s, _ = run(s, 1, cash_in("W05", "T04", "gambling"))
    s, events = run(s, 1, distribute({2: [s.choice.notes[0]]}))
    assert of_kind(events, "note_smashed")[0].seat == 1
    assert _known(s, 0) == {2: [DRAWN[1]]}
    assert _known(s, 1) == {2: [notes(20000, "G", 1)[0]]}


def test_nc_h03_h14_determinize_deals_the_known_notes_where_the_seat_knows_them() -> None:
    """NC-H03: a search bot that gave DRAWN[0] to seat 1 is never dealt a world without it there."""
    s = _given()
    view = ENGINE.view(s, 0)
    for dice in range(20):
        world = ENGINE.determinize(view, 0, Rng(dice))
        assert DRAWN[0] in world.players[1].bank and DRAWN[1] in world.players[2].bank
        assert all(DRAWN[0] not in p.bank for i, p in enumerate(world.players) if i != 1)
        assert list(ENGINE.view(world, 0).players[1].known_bank) == [DRAWN[0]]


class _Seen:
    """What one seat can tell of other Banks from the events it was shown (each redacted for it),
    worked out apart from the engine: `known_bank` must equal it, so it shows nothing else."""

    def __init__(self, seat: int) -> None:
        self.seat = seat
        self.known: dict[int, set[int]] = {}
        self.before_bids: dict[int, set[int]] = {}  # known before the holder's sealed bids
        self.open_bids: dict[int, int] = {}
        self.locations: list[tuple[int, int]] = []  # (bidder, space) once revealed (NC-M05)
        self.regained = 0  # Notes known again after shown bids

    def _left(self, holder: int, faces: list[int] | None) -> None:
        """Notes left `holder`'s Bank: seen faces forget those, unseen ones everything."""
        if holder != self.seat:
            for known in (self.known, self.before_bids):
                known[holder] = set() if faces is None else known.get(holder, set()) - set(faces)

    def _resolved(self, space: int, shown: bool) -> None:
        """NC-M07, NC-H06: a bid nobody saw makes its Bank unknown; a Bank whose bids were all
        shown holds what was known before them, less what they showed."""
        for holder, _ in [b for b in self.locations if b[1] == space]:
            self.open_bids[holder] -= 1
            if not shown:
                self.before_bids[holder] = set()
            elif not self.open_bids[holder]:
                again = self.before_bids.pop(holder, set())
                self.known.setdefault(holder, set()).update(again)
                self.regained += len(again)
        self.locations = [b for b in self.locations if b[1] != space]

    def shown(self, event: object) -> None:
        redacted = ENGINE.redact(event, self.seat)
        if redacted is None:
            return
        kind = redacted.WhichOneof("kind")
        e = getattr(redacted, kind)
        if kind == "notes_given" and e.from_seat == self.seat:
            self.known.setdefault(e.to_seat, set()).update(e.notes)
        elif kind == "notes_stolen":
            self._left(e.victim, list(e.notes) if e.thief == self.seat else None)
            if e.victim == self.seat:
                self.known.setdefault(e.thief, set()).update(e.notes)
        elif kind == "note_smashed" or (kind == "corrupted" and e.mode == "bank" and e.count):
            self._left(e.seat, None)
        elif kind == "bid_committed" and e.seat != self.seat:
            self.before_bids.setdefault(e.seat, set()).update(self.known.pop(e.seat, set()))
            self.open_bids[e.seat] = self.open_bids.get(e.seat, 0) + 1
        elif kind == "locations_revealed":
            self.locations = [(b.seat, b.location) for b in e.bids if b.seat != self.seat]
        elif kind == "bids_revealed":
            for b in e.bids:
                self.before_bids[b.seat] = self.before_bids.get(b.seat, set()) - set(b.notes)
        elif kind == "space_resolved":
            self._resolved(e.space, shown=e.outcome not in ("single", "empty"))


def test_nc_h03_h14_known_bank_is_what_the_seat_was_shown_and_nothing_more() -> None:
    """NC-H02, NC-H03, NC-H04, NC-H06, NC-H14, NC-H15: over random games, every seat's known_bank
    and known_before_bids are what its own redacted event stream told it (a fold written here,
    apart from the engine), and true."""
    compared = listed = regained = aside = 0
    kinds_seen: set[str] = set()
    for seats, seed in ((3, 1), (4, 2), (5, 3), (5, 11)):
        seen = [_Seen(s) for s in range(seats)]

        def on_step(before: State, step: Any, after: State, seen: list[_Seen] = seen) -> None:
            nonlocal compared, listed, aside
            for event in step.events:
                kinds_seen.add(event.WhichOneof("kind"))
                for s in seen:
                    s.shown(event)
            if after.phase is Phase.OVER:
                return
            for s in seen:
                want = {holder: sorted(notes) for holder, notes in s.known.items() if notes}
                got = _known(after, s.seat)
                assert got == want, f"seat {s.seat}"
                assert all(set(n) <= set(after.players[h].bank) for h, n in got.items()), "a known Note is there"
                want = {holder: sorted(notes) for holder, notes in s.before_bids.items() if notes}
                got = _before_bids(after, s.seat)
                assert got == want, f"seat {s.seat}: known before bids"
                assert all(set(n) <= {*after.players[h].bank, *(x for b in after.bids if b.seat == h for x in b.notes)}
                           for h, n in got.items()), "a Note known before bids is in that Bank or a bid"
                compared += 1
                listed += sum(map(len, want.values()))
                aside += sum(map(len, got.values()))

        play_random(ENGINE, seats, seed, on_step=on_step, sampler=random.Random(seed))
        regained += sum(s.regained for s in seen)
    assert compared > 1000 and listed > 100 and regained > 0 and aside > 0
    assert {"notes_given", "notes_stolen", "note_smashed", "bid_committed", "corrupted"} <= kinds_seen
