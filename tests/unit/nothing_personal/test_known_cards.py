"""What a seat knows of other hands from private events stays in its View (NP-H7, NP-M8, NP-H3).

A client that reconnects has `GetView` only: the trade it made and the offer it was shown are
gone with their events, so `View.known_cards` keeps what they told, until the game makes it stale.
"""

from __future__ import annotations

import random
from typing import Any

from famiglia.engine import Rng
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb
from famiglia.rules.nothing_personal.state import Phase
from famiglia.testing.random_play import play_random

from .support import ENGINE, PASS, cmd, hand, of, pfi, play, replace, std


def deal(to: int, **kw) -> pb.Command:
    return pb.Command(offer_deal=pb.OfferDeal(to=to, **kw))


def known(state, viewer: int | None) -> list[tuple[int, str, str]]:
    return [(k.seat, k.card, k.how) for k in ENGINE.view(state, viewer).known_cards]


def traded(state, frm: int, to: int, **kw):
    """`frm` offers `to` a deal and `to` accepts it: the state after."""
    events, state = play(state, frm, deal(to, **kw))
    _, state = play(state, to, cmd("accept_deal", offer=of(events, "offer_made")[0].id))
    return state


def others(state, *seats: int) -> list[int | None]:
    return [None, *(i for i in range(state.n) if i not in seats)]


def test_np_h7_each_party_to_a_trade_knows_what_it_gave_and_to_whom_and_nobody_else_does() -> None:
    """NP-H7: the identities of traded cards are seen only by the two seats. Each one's own hand
    shows what it received; what it gave, and to whom, only its View still shows."""
    s = hand(hand(std(4), 0, "I01", "I02"), 1, "I06")
    s = traded(s, 0, 1, give_cards=["I01"], want_cards=["I06"])
    assert known(s, 0) == [(1, "I01", "gave")]
    assert known(s, 1) == [(0, "I06", "gave")]
    assert all(known(s, v) == [] for v in others(s, 0, 1))


def test_np_m8_an_offered_card_stays_known_to_its_recipient_once_the_offer_is_closed() -> None:
    """NP-M8: an offer holds only cards its maker holds, so its recipient knows them to be in that
    hand, declined, withdrawn or lapsed; the maker (whose hand shows them) and the others never see it."""
    s = hand(std(4), 0, "I01", "I02")
    events, s = play(s, 0, deal(1, give_cards=["I02"], want_money=3))
    oid = of(events, "offer_made")[0].id
    assert known(s, 1) == [(0, "I02", "offered")]
    for closed in (play(s, 1, cmd("decline_deal", offer=oid))[1], play(s, 0, cmd("withdraw_deal", offer=oid))[1]):
        assert closed.offers == () and known(closed, 1) == [(0, "I02", "offered")]
        assert all(known(closed, v) == [] for v in others(closed, 1))
    lapsed = s
    while lapsed.phase == Phase.COMMISSION:   # NP-M4: the offer lapses with its phase
        _, lapsed = play(lapsed, ENGINE.pending(lapsed)[0].seat, PASS)
    assert lapsed.offers == () and known(lapsed, 1) == [(0, "I02", "offered")]


def test_np_h3_a_known_card_played_or_discarded_is_no_longer_known() -> None:
    """NP-H3: a card that is played or discarded is face up (`table`, `discard`); whoever knew it in
    a hand knows it has left that hand, so it leaves `known_cards`, and the others stay."""
    s = hand(hand(std(4, ring=1), 0, "I01", "I02", "I03"), 1, "I06")
    s = traded(s, 0, 1, give_cards=["I01", "I02", "I03"])
    assert known(s, 0) == [(1, "I01", "gave"), (1, "I02", "gave"), (1, "I03", "gave")]
    _, played = play(s, 1, pfi("I01", "T01"))   # seat 1's Commission turn
    assert "I01" in played.table + played.discard and known(played, 0) == [(1, "I02", "gave"), (1, "I03", "gave")]
    _, sold = play(played, 1, cmd("shakedown", cards=["I03"]))   # NP-M1
    assert known(sold, 0) == [(1, "I02", "gave")]


def test_np_h7_a_trade_the_seat_is_not_party_to_makes_what_it_knew_of_a_giving_hand_stale() -> None:
    """NP-H7: outside a trade a seat sees only how many cards each side gave, not which: what it knew
    of a hand that gave cards may have moved, whichever card went, so it is forgotten. A hand that
    only received cards still holds what it held."""
    s = hand(hand(std(4), 0, "I01", "I02"), 1, "I06", "I07")
    s = traded(s, 0, 1, give_cards=["I01"])
    received = traded(s, 2, 1, give_money=1)   # seat 1 gives nothing away
    assert known(received, 0) == [(1, "I01", "gave")]
    gave = traded(received, 1, 2, give_cards=["I07"])   # another card than the one seat 0 knows
    assert known(gave, 0) == [] and "I01" in gave.hands[1]
    assert known(gave, 1) == [(2, "I07", "gave")]


def test_np_h7_a_party_follows_every_card_of_its_own_trade() -> None:
    """NP-H7: a party sees which cards moved: a known card handed back to it leaves the list (its hand
    shows it), the known cards the other side kept stay."""
    s = hand(hand(std(4), 0, "I01", "I02"), 1, "I06")
    s = traded(s, 0, 1, give_cards=["I01", "I02"])
    back = traded(s, 1, 0, give_cards=["I01"])
    assert "I01" in back.hands[0] and known(back, 0) == [(1, "I02", "gave")]
    assert known(back, 1) == [(0, "I01", "gave")]


def test_np_h10_a_finished_game_shows_every_hand_and_no_seats_own_knowledge() -> None:
    """NP-H10: once the game is over `hands_all` shows every hand to every viewer, so a seat's own
    `known_cards` is no longer shown (every seat then sees what a spectator sees)."""
    s = hand(hand(std(4), 0, "I01"), 1, "I06")
    s = traded(s, 0, 1, give_cards=["I01"])
    over = replace(s, phase=Phase.OVER, stage="", offers=())
    assert known(over, 0) == [] and "1:I01" in ENGINE.view(over, 0).hands_all


def test_np_h7_np_m8_a_dealt_world_keeps_every_known_card_in_its_holders_hand() -> None:
    """NP-H7, NP-M8: `determinize` deals a card the seat knows another seat to hold to that seat, in
    every world (no offer is open any more to say so), and the world shows the seat its own view."""
    s = hand(hand(std(4), 0, "I01", "I02", "I03"), 1, "I06", "I07")
    s = traded(s, 0, 1, give_cards=["I01"])
    events, s = play(s, 1, deal(0, give_cards=["I07"]))
    _, s = play(s, 0, cmd("decline_deal", offer=of(events, "offer_made")[0].id))
    assert s.offers == () and known(s, 0) == [(1, "I01", "gave"), (1, "I07", "offered")]
    view = ENGINE.view(s, 0)
    for seed in range(30):
        world = ENGINE.determinize(view, 0, Rng(seed))
        assert {"I01", "I07"} <= set(world.hands[1]), f"seed {seed}: seat 1 holds {world.hands[1]}"
        assert ENGINE.view(world, 0) == view
        assert all(known(world, v) == [] for v in others(world, 0))


class _Seen:
    """What one seat can tell of other hands from the events it was shown (each redacted for it),
    worked out apart from the engine: `known_cards` must equal it, so it shows nothing else."""

    def __init__(self, seat: int) -> None:
        self.seat = seat
        self.known: dict[str, tuple[int, str]] = {}   # card: (holder, how)
        self.outside = 0   # trades it was not party to that made something it knew stale

    def _gone(self, cards: Any) -> None:
        for c in cards:
            self.known.pop(c, None)

    def shown(self, event: Any) -> None:
        redacted = ENGINE.redact(event, self.seat)
        if redacted is None:
            return
        kind = redacted.WhichOneof("kind")
        e = getattr(redacted, kind)
        if kind == "card_played":
            self._gone([e.card])
        elif kind == "cards_discarded":
            self._gone(e.cards)
        elif kind == "offer_made" and e.offer.to == self.seat:
            self.known.update((c, (getattr(e, "from"), "offered")) for c in e.offer.give_cards)
        elif kind == "trade_executed" and self.seat not in (getattr(e, "from"), e.to):
            gave = {h for h, n in ((getattr(e, "from"), e.give_card_count), (e.to, e.want_card_count)) if n}
            kept = {c: v for c, v in self.known.items() if v[0] not in gave}
            self.outside += len(kept) < len(self.known)
            self.known = kept
        elif kind == "trade_cards_moved":
            frm, to = getattr(e, "from"), e.to
            self._gone([*e.give_cards, *e.want_cards])
            mine = e.give_cards if self.seat == frm else e.want_cards
            self.known.update((c, (to if self.seat == frm else frm, "gave")) for c in mine)


def test_np_h7_np_m8_known_cards_are_true_and_what_the_seat_was_shown() -> None:
    """NP-H1, NP-H3, NP-H7, NP-M8: over random games with offers of every shape, after every event
    each card `State.known` names is in its holder's hand, and after every command each seat's
    `known_cards` is what its own redacted event stream told it (a fold written here, apart from
    the engine), and a world `determinize` deals from its view has them there too; a spectator
    knows nothing. The games include trades that a seat outside them saw
    take cards from a hand it knew a card of, and not that card."""
    compared = listed = outside = 0
    for seats, seed, options in ((3, 13, {}), (4, 11, {}), (4, 21, {}),
                                 (5, 3, {"keep_your_word": "true", "reroll_tokens": "true"})):
        seen = [_Seen(s) for s in range(seats)]

        def on_step(before: Any, step: Any, after: Any, seen: list[_Seen] = seen) -> None:
            nonlocal compared, listed
            s = before
            for event in step.events:
                s = ENGINE.evolve(s, event)
                stale = [k for k in s.known if k.card not in s.hands[k.holder] or k.seat == k.holder]
                assert not stale, f"after {event.WhichOneof('kind')}: {stale}"
                for w in seen:
                    w.shown(event)
            if after.phase == Phase.OVER:
                return
            assert known(after, None) == []
            for w in seen:
                want = sorted((holder, card, how) for card, (holder, how) in w.known.items())
                assert known(after, w.seat) == want, f"seat {w.seat}"
                compared += 1
                listed += len(want)
                if want and compared % 7 == 0:   # a search bot's world keeps every known card there
                    world = ENGINE.determinize(ENGINE.view(after, w.seat), w.seat, Rng(compared))
                    assert all(card in world.hands[holder] for holder, card, _ in want), f"seat {w.seat}'s world"

        play_random(ENGINE, seats, seed, options, on_step=on_step, sampler=random.Random(seed))
        outside += sum(w.outside for w in seen)
    assert compared > 2000 and listed > 200 and outside > 0
