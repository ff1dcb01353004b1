"""Property tests: random complete games for 3, 4 and 5 players, invariants after every event.

Every Note, Street card, Vendetta card and Wiseguy is in exactly one place; Banks hold
only real Notes; Wiseguys are all Free after each Reception (NC-C02); exactly 6 months
then the Final Verdict (NC-R01, NC-C10, NC-C11); folding rebuilds the state; no view
shows another seat's Notes, bids, Vendetta cards or role (NC-H02, H04, H08, H09), but for the
Notes it knows in another Bank, which are there (NC-H03, H14).
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from famiglia.engine import fold
from famiglia.rules.nostra_city import ENGINE
from famiglia.rules.nostra_city.data import (
    INVESTIGATION_BY_ID,
    NOTES,
    POLICE_RAID,
    RESPECT_CARDS,
    TURFS,
    UNDERBOSS,
    VENDETTA,
    VENDETTA_BY_ID,
    WISEGUYS,
)
from famiglia.rules.nostra_city.state import Phase, State
from famiglia.testing.random_play import play_random
from tests.profile import examples

ALL_NOTES = Counter(n.id for n in NOTES)
STREET_CARDS = Counter([*(w.id for w in WISEGUYS), *(t.id for t in TURFS), *RESPECT_CARDS, *INVESTIGATION_BY_ID])
ALL_VENDETTA = Counter(v.id for v in VENDETTA)


def check_conservation(s: State) -> None:
    notes: Counter[int] = Counter()
    for p in s.players:
        notes.update(p.bank)
    for b in s.bids:
        notes.update(b.notes)
    if s.choice is not None and s.choice.kind in ("distribute", "keep"):
        notes.update(s.choice.notes)
    notes.update(n for n in s.note_deck if n != POLICE_RAID)
    notes.update(s.note_discard)
    notes.update(n for n, _ in s.pile)
    assert notes == ALL_NOTES, "every Note is in exactly one place"
    assert s.note_deck.count(POLICE_RAID) == 1, "the Police Raid is always in the Note deck (NC-K33)"

    cards: Counter[str] = Counter()
    for p in s.players:
        cards.update(p.wiseguys)
        cards.update(t for t in p.turfs if t != "AC")
        cards.update(c for c in p.trophies if c in RESPECT_CARDS or c in INVESTIGATION_BY_ID or c == UNDERBOSS)
    cards.update(c for c in s.street if c)
    cards.update(s.street_deck)
    cards.update(s.set_aside)
    cards.update(s.removed)
    if s.choice is not None and s.choice.kind == "keep":
        cards[s.choice.card] += 1
    ub = cards.pop(UNDERBOSS, 0)
    assert ub == (1 if s.underboss in ("street", "won") else 0)
    assert cards == STREET_CARDS, "every Street card and Wiseguy is in exactly one place"

    vend: Counter[str] = Counter()
    for p in s.players:
        vend.update(p.hand)
        if "AC" in p.turfs:
            vend[next(v.id for v in VENDETTA if v.kind == "atlantic")] += 1
    vend.update(s.vendetta_deck)
    vend.update(s.vendetta_discard)
    if s.choice is not None and s.choice.kind == "rage":
        vend[s.choice.card] += 1
    assert vend == ALL_VENDETTA, "every Vendetta card is in exactly one place"
    for i, p in enumerate(s.players):
        assert all(n in p.bank and 0 <= k < s.seats and k != i for k, n in p.known_by), (
            "a Note another seat knows in this Bank is there (NC-H03, NC-H14)")
        in_bids = {n for b in s.bids if b.seat == i for n in b.notes}
        assert all((n in p.bank or n in in_bids) and 0 <= k < s.seats and k != i
                   for k, n in p.known_before_bids), "a Note known before a bid is in the Bank or a bid (NC-H04)"
        assert not p.known_before_bids or any(b.seat == i for b in s.bids), "kept aside only while a bid is open"
        assert all(VENDETTA_BY_ID[c].kind in ("snitch", "revenge") for c in p.hand)
        assert all(0 <= n < 80 for n in p.bank) and len(p.bank) >= 0
        assert set(p.busy) <= set(p.wiseguys) | set(p.turfs)
        assert "AC" not in p.busy  # NC-R08


def check_views(s: State) -> None:
    over = s.phase is Phase.OVER
    for viewer in [None, *range(s.seats)]:
        v = ENGINE.view(s, viewer)
        for other in v.players:
            if viewer is None or other.seat == viewer or over:
                assert not other.known_bank, "known_bank: only another seat's, in a seat's own view"
            if other.seat == viewer or over:
                continue
            assert not other.bank and not other.hand and not other.locations and not other.corrupted
            assert not other.snitch
        for b in v.bids:
            if b.seat != viewer and not over:
                assert not b.notes
                if not s.locations_revealed:
                    assert b.location == 0
        if v.HasField("choice") and v.choice.seat != viewer and not over:
            assert not v.choice.notes


def play_and_check(seats: int, seed: int) -> None:
    months: list[int] = []
    state_holder = {}

    def on_step(before: State, step, after: State) -> None:
        s = before
        for e in step.events:
            s = ENGINE.evolve(s, e)
            kind = e.WhichOneof("kind")
            if kind == "phase_started" and e.phase_started.phase == "business":
                months.append(e.phase_started.month)
            if kind == "reception_held":
                assert all(not (set(p.wiseguys) & p.busy) for p in s.players), "NC-C02"
            check_conservation(s)
        assert s == after
        check_views(after)
        state_holder["last"] = after

    play = play_random(ENGINE, seats, seed, on_step=on_step)
    assert [1, *months] == [1, 2, 3, 4, 5, 6] or months == [1, 2, 3, 4, 5, 6]
    assert play.state.phase is Phase.OVER and play.state.month == 6
    assert play.state.verdict_result in ("innocent", "guilty")
    assert fold(ENGINE, play.events) == play.state
    result = ENGINE.result(play.state)
    assert result is not None and result.outcome["verdict"] == play.state.verdict_result


PROPS = settings(max_examples=examples(quick=4, soak=1500), deadline=None,
                 suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(seed=st.integers(0, 2**32 - 1))
def test_nc_r01_random_three_player_games_keep_every_invariant(seed: int) -> None:
    """NC-R01, NC-C02, NC-K33, NC-H02: three players."""
    play_and_check(3, seed)


@PROPS
@given(seed=st.integers(0, 2**32 - 1))
def test_nc_r01_random_four_player_games_keep_every_invariant(seed: int) -> None:
    """NC-R01, NC-C10, NC-H04: four players."""
    play_and_check(4, seed)


@PROPS
@given(seed=st.integers(0, 2**32 - 1))
def test_nc_r01_random_five_player_games_keep_every_invariant(seed: int) -> None:
    """NC-R01, NC-C11, NC-H08: five players."""
    play_and_check(5, seed)


@settings(max_examples=examples(quick=3, soak=300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seats=st.integers(3, 5), seed=st.integers(0, 2**32 - 1))
def test_nc_d02_timeouts_are_legal_and_determinize_matches_the_view(seats: int, seed: int) -> None:
    """NC-D02: every timeout default is accepted; determinize gives a state with the same view."""
    from famiglia.engine import Rng

    def on_step(before: State, step, after: State) -> None:
        for p in ENGINE.pending(after):
            cmd = ENGINE.timeout_command(after, p.seat)
            assert cmd is not None
            ENGINE.decide(after, p.seat, cmd, Rng(seed))
        for viewer in range(seats):
            view = ENGINE.view(after, viewer)
            guess = ENGINE.determinize(view, viewer, Rng(seed + viewer))
            assert ENGINE.view(guess, viewer).SerializeToString(deterministic=True) == view.SerializeToString(
                deterministic=True)
            check_conservation(guess)

    play_random(ENGINE, seats, seed, on_step=on_step)


def test_nc_d15_random_play_stays_far_below_the_step_bound() -> None:
    """NC-D15: the declared bound holds with a wide margin."""
    from famiglia.rules.nostra_city import INFO

    longest = max(len(play_random(ENGINE, 5, seed).steps) for seed in range(examples(quick=5, soak=500)))
    assert longest * 4 < INFO.max_steps
