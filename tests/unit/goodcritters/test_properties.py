"""Property tests: random complete games, checked after every event.

GC-S07, GC-S10: every Loot card and The Fuzz! is in exactly one place; GC-E06, GC-P14: scores
are the sum of the cards; GC-S12: the Boss is always a seat; GC-D09, GC-D10: every game ends;
folding the events rebuilds the state; GC-H02, GC-H06, GC-H07: no view and no redacted event
stream of a seat shows another seat's secret Stash cards, unrevealed Action card or the pile.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from famiglia.engine import Rng, fold
from famiglia.rules.goodcritters import ENGINE, INFO
from famiglia.rules.goodcritters.data import FUZZ, card_values, loot_deck
from famiglia.rules.goodcritters.result import scores
from famiglia.rules.goodcritters.state import State
from famiglia.rules.goodcritters.view import offer_loot_seen
from famiglia.testing.random_play import play_random
from tests.profile import SOAK, examples

CARD_ID = re.compile(rb"L\d{3}|FUZZ")
VIEW_EVERY = 1 if SOAK else 3
"""Views are checked after every step in the soak profile, every third one in the quick one."""

OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "payoff.enabled": st.sampled_from(["true", "false"]),
        "step3_mode": st.sampled_from(["open", "turns"]),
        "step3_public_change_limit": st.sampled_from(["0", "1", "3", "5"]),
        "step3_card_choice_limit": st.sampled_from(["1", "3", "5"]),
        "stash_counts_public": st.sampled_from(["true", "false"]),
        "skim_fuzz_failed_vote_extra_cards": st.sampled_from(["true", "false"]),
        "skims_per_round": st.sampled_from(["1", "2"]),
        "reveal_after_failed_vote": st.sampled_from(["1", "2"]),
        "payoff.gift_steps": st.sampled_from(["2,3", "2", "3", ""]),
        "winner_tiebreak": st.sampled_from(["", "more_loot_cards"]),
    },
)

GAMES = settings(
    max_examples=examples(quick=6, soak=2000),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def check_conservation(state: State) -> None:
    """GC-S07, GC-S10, GC-P02: every card is in exactly one place; the Boss is a seat; what a seat
    knows of another Stash is in it."""
    places = [*state.pile, *state.table, *state.confiscated]
    for stash in state.stashes:
        places += stash
    for offer in state.offers:
        places += offer.loot
    assert places.count(FUZZ) + state.fuzz_out == 1, "The Fuzz! is in exactly one place"
    cards = [c for c in places if c != FUZZ]
    assert len(cards) == len(set(cards)), "no Loot card is in two places"
    assert set(cards) == {c.id for c in loot_deck(state.config.copies)}, "no Loot card is lost"
    assert 0 <= state.boss < state.seats, "GC-S12: the Boss is a seat"
    assert all(card in state.stashes[holder] and knower != holder for knower, holder, card in state.known), (
        "a card a seat knows in another Stash is there (GC-H10, GC-P06, GC-P15), in a dealt world too")
    if state.config.payoff:
        held = sum(state.payoff_cards) + sum(o.payoff_cards for o in state.offers)
        assert held == state.seats * state.config.payoff_cards_per_player
    values = card_values(state.config.copies)
    per_card = state.config.payoff_card_value if state.config.payoff else 0
    assert scores(state) == [
        sum(values[c] for c in stash) + per_card * n
        for stash, n in zip(state.stashes, state.payoff_cards, strict=True)
    ]


def check_views(state: State) -> None:
    """GC-H02, GC-H06, GC-H07, GC-H12: each view holds only what its viewer may know, and what
    it knows of another Stash from private events (known_loot) is still there."""
    if state.over:
        return
    for viewer in [None, *range(state.seats)]:
        view = ENGINE.view(state, viewer)
        allowed = set(state.table) | set(state.confiscated)
        if viewer is not None:
            allowed |= set(state.stashes[viewer])
        for o in state.offers:
            if offer_loot_seen(o.visibility, o.briber, o.target, viewer):
                allowed |= set(o.loot)
        for sv in view.seat_views:
            if sv.seat != viewer:
                assert sv.chosen_card == 0, "GC-H06: another seat's card is face down"
                assert not sv.stash
                # what the viewer knows of another Stash is true (GC-H10, GC-P06, GC-P15)
                assert set(sv.known_loot) <= set(state.stashes[sv.seat]), f"view of {viewer}: stale known_loot"
                assert viewer is not None or not sv.known_loot, "GC-H12: a spectator knows nothing private"
                allowed |= set(sv.known_loot)
            else:
                assert not sv.known_loot, "the own Stash is in stash"
        shown = {m.decode() for m in CARD_ID.findall(view.SerializeToString())}
        assert shown <= allowed, f"view of {viewer} shows {sorted(shown - allowed)}"
        assert not view.pile and view.fuzz_position == -1, "GC-H07: the pile is server-only"


def check_redaction(event: object, seats: int) -> None:
    """GC-H06, GC-H09, GC-H10, GC-P15: what a seat may not see is cleared or withheld."""
    vis = ENGINE.visibility(event)
    for viewer in [None, *range(seats)]:
        if vis.allows(viewer):
            continue
        redacted = ENGINE.redact(event, viewer)
        if redacted is None:
            continue
        assert not CARD_ID.findall(redacted.SerializeToString()), ENGINE.render_event(redacted)
        if redacted.WhichOneof("kind") == "action_card_chosen":
            assert redacted.action_card_chosen.card == 0


@GAMES
@given(seats=st.integers(4, 8), seed=st.integers(0, 2**32 - 1), options=OPTIONS)
def test_random_games_keep_every_invariant_after_every_event(
    seats: int, seed: int, options: dict[str, str]
) -> None:
    """GC-S07, GC-S12, GC-E06, GC-H02, GC-H06, GC-H07, GC-D09, GC-D10 over whole random games."""

    counter = {"n": 0}

    def on_step(before: State, step, after: State) -> None:  # type: ignore[no-untyped-def]
        state = before
        for event in step.events:
            state = ENGINE.evolve(state, event)
            check_conservation(state)
            check_redaction(event, seats)
        assert state == after
        counter["n"] += 1
        if counter["n"] % VIEW_EVERY == 0:
            check_views(after)

    play = play_random(ENGINE, seats, seed, options, on_step=on_step)
    assert len(play.steps) <= INFO.max_steps, "GC-D10: every match ends"
    assert fold(ENGINE, play.events) == play.state, "folding the events rebuilds the state"
    result = ENGINE.result(play.state)
    assert result is not None and ENGINE.pending(play.state) == []
    (revealed,) = [e.stashes_revealed for e in play.events if e.WhichOneof("kind") == "stashes_revealed"]
    values = card_values(play.state.config.copies)
    per_card = play.state.config.payoff_card_value if play.state.config.payoff else 0
    for s in revealed.stashes:
        expected = sum(values[c] for c in s.cards) + per_card * play.state.payoff_cards[s.seat]
        assert result.seats[s.seat].score == expected


@GAMES
@given(seats=st.integers(4, 8), seed=st.integers(0, 2**32 - 1), options=OPTIONS)
def test_determinized_states_look_the_same_to_their_seat(
    seats: int, seed: int, options: dict[str, str]
) -> None:
    """GC-H01 to GC-H07: determinize samples only hidden facts; the seat's view is unchanged."""
    counter = {"n": 0}

    def on_step(before: State, step, after: State) -> None:  # type: ignore[no-untyped-def]
        counter["n"] += 1
        if counter["n"] % 37 and ENGINE.result(after) is None:
            return
        for seat in range(seats):
            view = ENGINE.view(after, seat)
            sample = ENGINE.determinize(view, seat, Rng(counter["n"]))
            assert ENGINE.view(sample, seat) == view
            check_conservation(sample)
            if ENGINE.result(after) is None:
                for command in ENGINE.legal_commands(sample, seat, limit=8):
                    ENGINE.decide(sample, seat, command, Rng(1))

    play_random(ENGINE, seats, seed, options, on_step=on_step)


@GAMES
@given(seats=st.integers(4, 8), seed=st.integers(0, 2**32 - 1), options=OPTIONS)
def test_timeouts_alone_finish_every_game(seats: int, seed: int, options: dict[str, str]) -> None:
    """GC-D02, GC-D05, GC-D06: the documented defaults are legal and end the match."""
    from famiglia.engine import MatchConfig

    state = fold(ENGINE, ENGINE.setup(MatchConfig(seats, options), seed))
    steps = 0
    while ENGINE.result(state) is None:
        seat = ENGINE.pending(state)[0].seat
        command = ENGINE.timeout_command(state, seat)
        assert command is not None
        state = fold(ENGINE, ENGINE.decide(state, seat, command, Rng(steps)), state)
        steps += 1
        assert steps < INFO.max_steps
    check_conservation(state)
