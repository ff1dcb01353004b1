"""What a seat knows of another's Stash from events private to it (View `SeatView.known_loot`).

A client that reconnects has `GetView` only (docs/engines.md, "What a View must keep"): a robbed
seat must still see who holds the card taken from it (GC-H10), a giver where its private gift
went (GC-P06), a briber or target where hidden or peek Payoff Loot went (GC-P10, GC-P11, GC-P15),
for as long as nothing has made that stale; no other seat and no spectator sees it (GC-H12).
"""

from __future__ import annotations

from famiglia.engine import Rng
from famiglia.rules.goodcritters.state import State
from famiglia.testing.random_play import play_random

from ._helpers import (
    ENGINE,
    FUZZ,
    GUARD,
    ROB,
    VOTE_NO,
    VOTE_YES,
    C,
    act,
    assign,
    loot,
    of_kind,
    play_step3,
    table_state,
)

PAYOFF = {"payoff.enabled": "true"}
YES, NO = 1, 2
OPEN, PEEK, HIDDEN = 1, 2, 3


def known(state: State, viewer: int | None) -> dict[int, list[str]]:
    """The viewer's known_loot, by the seat whose Stash it is."""
    view = ENGINE.view(state, viewer)
    return {sv.seat: list(sv.known_loot) for sv in view.seat_views if sv.known_loot}


def nobody_else_knows(state: State, *knowers: int) -> None:
    for viewer in [None, *range(state.seats)]:
        if viewer not in knowers:
            assert known(state, viewer) == {}, f"seat {viewer} knows {known(state, viewer)}"


def robbed_round(options: dict[str, str] | None = None) -> State:
    """Round 1: seat 1 robs seat 3, whose only card is L004 (GC-A14); the pile lasts two more rounds."""
    pile = loot(*range(20, 35)) + (FUZZ,) + loot(*range(50, 60))
    state = table_state(stashes=[loot(1), loot(2), loot(3), loot(4)], pile=pile, options=options)
    state, _ = assign(state)
    state, _ = play_step3(state, [VOTE_YES, ROB, VOTE_YES, VOTE_YES], threats={1: 3})
    assert state.stashes[1] == loot(2, 4) and state.round == 2
    return state


def next_round(
    state: State, cards: list[int], threats: dict[int, int], seed: int = 0
) -> tuple[State, list[object]]:
    state, _ = assign(state)
    state, events = play_step3(state, cards, threats, seed)
    assert not state.over, "a running match: its views show known_loot"
    return state, events  # type: ignore[return-value]


def test_gc_h10_gc_a14_the_robbed_seat_knows_who_holds_its_card_after_the_round() -> None:
    """GC-H10, GC-A14, GC-R07: only robber and victim saw the card; the victim's view keeps where it
    went past the clean-up, the robber has it in its own Stash, nobody else sees it."""
    state = robbed_round()
    assert known(state, 3) == {1: ["L004"]}
    nobody_else_knows(state, 3)


def test_gc_a15_the_robber_knows_what_the_guard_took_from_it() -> None:
    """GC-A15, GC-H10: the counter-steal is a card moved between two seats like a Rob."""
    state = table_state(stashes=[loot(1), loot(2), loot(3), loot(4)])
    state, _ = assign(state)
    state, _ = play_step3(state, [VOTE_YES, ROB, VOTE_YES, GUARD], threats={1: 3})
    assert state.stashes[3] == loot(4, 2)
    assert known(state, 1) == {3: ["L002"]}
    nobody_else_knows(state, 1)


def test_gc_a19_gc_h10_a_rob_by_a_third_seat_makes_the_knowledge_stale() -> None:
    """GC-A19, GC-H10: seat 2 robs seat 1 at random and seat 3 does not see which card went, so it
    no longer knows that L004 is still there, whichever went; seat 1 now knows what seat 2 holds."""
    taken = set()
    for seed in range(12):
        state, events = next_round(robbed_round(), [VOTE_YES, VOTE_YES, ROB, VOTE_YES], {2: 1}, seed)
        (stolen,) = of_kind(events, "loot_stolen")
        card = stolen.card  # type: ignore[attr-defined]
        taken.add(card)
        assert known(state, 3) == {}
        assert known(state, 1) == {2: [card]}
        nobody_else_knows(state, 1)
    assert taken == {"L002", "L004"}


def test_gc_a19_gc_h10_the_knower_robbing_the_holder_forgets_only_what_it_took() -> None:
    """GC-A19, GC-H10: seat 3 robs seat 1 again and sees the face it took: L004 back (now its own)
    or L002 (and L004 is still known to lie with seat 1)."""
    taken = set()
    for seed in range(12):
        state, events = next_round(robbed_round(), [VOTE_YES, VOTE_YES, VOTE_YES, ROB], {3: 1}, seed)
        (stolen,) = of_kind(events, "loot_stolen")
        card = stolen.card  # type: ignore[attr-defined]
        taken.add(card)
        assert known(state, 3) == ({} if card == "L004" else {1: ["L004"]})
        assert known(state, 1) == {3: [card]}
    assert taken == {"L002", "L004"}


def test_gc_p06_a_private_gift_is_known_to_its_giver_an_open_one_to_the_log_only() -> None:
    """GC-P06, GC-H04: the giver knows where its private gift went; an open gift was public and
    stays in the event log, as every face-up move does."""
    state, _ = assign(table_state(options=PAYOFF))
    state, _ = act(state, 0, C.give_gift(2, loot(1), open_=False))
    state, _ = act(state, 1, C.give_gift(2, loot(2), open_=True))
    assert known(state, 0) == {2: ["L001"]}
    nobody_else_knows(state, 0)


def test_gc_p06_the_holder_giving_privately_to_another_seat_makes_it_stale() -> None:
    """GC-P06: seat 2 gives one of its cards privately to seat 3; seat 0 does not see which."""
    state, _ = assign(table_state(options=PAYOFF))
    state, _ = act(state, 0, C.give_gift(2, loot(1), open_=False))
    state, _ = act(state, 2, C.give_gift(3, loot(38), open_=False))
    assert known(state, 0) == {}
    assert known(state, 2) == {3: ["L038"]}


def test_gc_p06_a_gift_the_knower_sees_keeps_the_other_cards_known() -> None:
    """GC-P06: a gift whose faces the knower sees (to it, or open) forgets only the cards given."""
    state, _ = assign(table_state(options=PAYOFF))
    state, _ = act(state, 0, C.give_gift(2, loot(1, 36), open_=False))
    state, _ = act(state, 2, C.give_gift(0, loot(38), open_=False))
    assert known(state, 0) == {2: ["L001", "L036"]}
    state, _ = act(state, 2, C.give_gift(1, loot(1), open_=True))
    assert known(state, 0) == {2: ["L036"]}
    assert known(state, 2) == {0: ["L038"]}
    nobody_else_knows(state, 0, 2)


def test_gc_p11_gc_p15_payoff_loot_is_known_where_it_went_to_who_saw_its_faces() -> None:
    """GC-P10, GC-P11, GC-P15: a hidden offer paid out: the briber knows the target holds it; a peek
    offer sent back: the target knows the briber holds it; a hidden offer sent back: the target
    never saw it; the receiver has it in its own Stash."""
    state, _ = assign(table_state(options=PAYOFF))
    state, _ = act(state, 0, C.make_offer(1, YES, loot(1), 0, HIDDEN))
    state, _ = act(state, 0, C.make_offer(2, YES, loot(36), 0, PEEK))
    state, _ = act(state, 3, C.make_offer(1, NO, loot(4), 0, HIDDEN))
    state, events = play_step3(state, [VOTE_YES, VOTE_YES, VOTE_NO, VOTE_YES])
    paid = {(o.briber, o.target): o.receiver for o in of_kind(events, "offer_resolved")}  # type: ignore[attr-defined]
    assert paid == {(0, 1): 1, (0, 2): 0, (3, 1): 3}
    assert known(state, 0) == {1: ["L001"]}
    assert known(state, 2) == {0: ["L036"]}
    nobody_else_knows(state, 0, 2)


def test_gc_p08_gc_p10_a_withdrawn_peek_offer_is_known_to_its_target() -> None:
    """GC-P08, GC-P10: while a peek offer lies, its Loot shows in View.offers; withdrawn, the
    target knows it went back to the briber. An offer the target sees does not make the rest
    stale; a hidden one to another seat does."""
    state, _ = assign(table_state(options=PAYOFF))
    state, _ = act(state, 0, C.make_offer(2, YES, loot(36), 0, PEEK))
    assert known(state, 2) == {}
    assert [list(o.loot) for o in ENGINE.view(state, 2).offers] == [["L036"]]
    state, _ = act(state, 0, C.withdraw_offer(2))
    assert known(state, 2) == {0: ["L036"]}
    nobody_else_knows(state, 2)
    seen, _ = act(state, 0, C.make_offer(2, YES, loot(1), 0, PEEK))
    assert known(seen, 2) == {0: ["L036"]}
    unseen, _ = act(state, 0, C.make_offer(1, YES, loot(71), 0, HIDDEN))
    assert known(unseen, 2) == {}


def test_gc_h13_a_finished_match_shows_every_stash_and_no_known_loot() -> None:
    """GC-E07, GC-H13: once over, every Stash is in every view, so known_loot is empty for all."""
    play = play_random(ENGINE, 4, 0)
    assert play.state.over and play.state.known, "a game whose robs left something known"
    for viewer in [None, *range(4)]:
        assert known(play.state, viewer) == {}


def test_gc_h10_determinize_keeps_the_known_card_where_the_seat_knows_it_is() -> None:
    """GC-H10: a bot that knows seat 1 holds L004 is never dealt a world where it does not, and
    the world shows it the same view."""
    state = robbed_round()
    view = ENGINE.view(state, 3)
    for seed in range(20):
        world = ENGINE.determinize(view, 3, Rng(seed))
        assert "L004" in world.stashes[1]
        assert [len(s) for s in world.stashes] == [len(s) for s in state.stashes]
        assert ENGINE.view(world, 3) == view


def test_gc_h03_determinize_keeps_known_loot_with_private_stash_counts() -> None:
    """GC-H03: with stash_counts_public off the sizes are guessed, the known card still lies there."""
    state = robbed_round({"stash_counts_public": "false"})
    view = ENGINE.view(state, 3)
    assert view.seat_views[1].stash_count == 0 and len(state.stashes[1]) == 2
    for seed in range(10):
        world = ENGINE.determinize(view, 3, Rng(seed))
        assert "L004" in world.stashes[1]
        assert ENGINE.view(world, 3) == view


class _Seen:
    """What one seat can tell from the events it was shown (each redacted for it), worked out
    apart from the engine: the reference `known_loot` must equal, which so shows nothing else."""

    def __init__(self, seat: int) -> None:
        self.seat = seat
        self.known: dict[int, list[str]] = {}
        self.offers: dict[tuple[int, int], tuple[list[str], int]] = {}  # loot seen, visibility

    def _left(self, holder: int, cards: list[str], count: int) -> None:
        """Cards left `holder`'s Stash: the faces shown forget those, unseen ones forget all."""
        if holder == self.seat or not count:
            return
        if len(cards) == count:
            self.known[holder] = [c for c in self.known.get(holder, []) if c not in cards]
        else:
            self.known[holder] = []

    def _learn(self, holder: int, cards: list[str]) -> None:
        self.known.setdefault(holder, []).extend(cards)

    def shown(self, event: object) -> None:
        redacted = ENGINE.redact(event, self.seat)
        if redacted is None:
            return
        kind = redacted.WhichOneof("kind")
        e = getattr(redacted, kind)
        if kind == "loot_stolen" and not e.nothing:
            self._left(e.victim, [e.card] if e.card else [], 1)
            if self.seat == e.victim:
                self._learn(e.thief, [e.card])
        elif kind == "gift_given":
            self._left(e.giver, list(e.loot), e.loot_count)
            if self.seat == e.giver and not e.open:
                self._learn(e.receiver, list(e.loot))
        elif kind == "offer_made":
            self._left(e.briber, list(e.loot), e.loot_count)
            self.offers[e.briber, e.target] = (
                list(e.loot) if len(e.loot) == e.loot_count else [],
                e.visibility,
            )
        elif kind == "offer_withdrawn":
            loot, visibility = self.offers.pop((e.briber, e.target))
            if self.seat != e.briber and visibility != OPEN:
                self._learn(e.briber, loot)
        elif kind == "offer_resolved":
            loot, visibility = self.offers.pop((e.briber, e.target))
            if self.seat != e.receiver and visibility != OPEN:
                self._learn(e.receiver, loot)


def test_gc_h10_gc_p15_known_loot_is_what_the_seat_was_shown_and_nothing_more() -> None:
    """GC-H10, GC-P06, GC-P15, GC-H12: over random games with the Payoff variant, every seat's
    known_loot is what its own redacted event stream told it, and no spectator knows anything."""
    compared = listed = 0
    for seats, seed, visibility in (
        (4, 3, "open,peek,hidden"),
        (5, 8, "peek"),
        (6, 1, "hidden"),
        (8, 2, "peek,hidden"),
    ):
        options = {**PAYOFF, "payoff.offer_loot_visibility": visibility}
        seen = [_Seen(seat) for seat in range(seats)]

        def on_step(before: State, step: object, after: State, seen: list[_Seen] = seen) -> None:
            nonlocal compared, listed
            for event in step.events:  # type: ignore[attr-defined]
                for s in seen:
                    s.shown(event)
            if after.over:
                return
            assert known(after, None) == {}
            for s in seen:
                want = {holder: cards for holder, cards in s.known.items() if cards}
                assert known(after, s.seat) == want, f"seat {s.seat}"
                compared += 1
                listed += sum(map(len, want.values()))

        play_random(ENGINE, seats, seed, options, on_step=on_step)
    assert compared > 1000 and listed > 100
