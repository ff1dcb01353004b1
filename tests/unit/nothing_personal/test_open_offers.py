"""An open offer whose maker no longer holds what it offered (NP-M4, NP-H7, NP-M8).

NP-M4: an offer does not bind what it names; on acceptance both sides move only if both seats
still hold everything offered. What the recipient can check itself (its own hand, the money of
both seats: NP-M8, public) keeps the acceptance off its listing and refuses it. Whether the maker
still holds the cards it offered is hidden (NP-H7: a trade the recipient is not party to shows
only how many cards moved), so the listing never reads it: the recipient may accept as in every
world dealt from its view, and the deal then fails at acceptance (`offer_closed` "failed", seen
by the two seats alone), as it would at a table.
"""

from __future__ import annotations

import random

from famiglia.engine import Rng, RuleViolation
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb

from .support import ENGINE, cmd, hand, of, play, std


def deal(to: int, **kw) -> pb.Command:
    return pb.Command(offer_deal=pb.OfferDeal(to=to, **kw))


def offered(state, frm: int, to: int, **kw):
    """`frm` offers `to` a deal: its id and the state after."""
    events, state = play(state, frm, deal(to, **kw))
    return of(events, "offer_made")[0].id, state


def traded(state, frm: int, to: int, **kw):
    """`frm` offers `to` a deal and `to` accepts it: the state after."""
    oid, state = offered(state, frm, to, **kw)
    events, state = play(state, to, cmd("accept_deal", offer=oid))
    assert of(events, "trade_executed"), "the trade went through"
    return state


def listing(state, seat: int, draw: int | None = None) -> list[bytes]:
    """`seat`'s ListLegalCommands: the representative listing, or the one drawn with `draw`."""
    rng = None if draw is None else random.Random(draw)
    return [c.SerializeToString(deterministic=True) for c in ENGINE.legal_commands(state, seat, 64, rng=rng)]


def assert_listed_as_in_its_worlds(state, seat: int) -> None:
    """The seat may do the same in the true state as in every world dealt from its view (the
    engine contract's `_check_worlds`, here on a state random play does not reach)."""
    view = ENGINE.view(state, seat)
    for seed in range(24):
        world = ENGINE.determinize(view, seat, Rng(seed))
        assert ENGINE.view(world, seat) == view
        for draw in (None, seed):
            assert listing(world, seat, draw) == listing(state, seat, draw), f"world {seed}, draw {draw}"


def accept_of(oid: int) -> bytes:
    return cmd("accept_deal", offer=oid).SerializeToString(deterministic=True)


def test_np_m4_np_h7_an_offered_card_its_maker_traded_away_leaves_the_acceptance_listed_and_the_deal_fails() -> None:
    """NP-M4, NP-H7, NP-M8. Seat 0 offers I01 to seat 1 (who sees it), then gives I01 to seat 2 in
    a trade seat 1 is not party to (seat 1 sees one card go, not which). Seat 1's acceptance is
    listed as in every world dealt from its view, where seat 0 may still hold I01 (the leak was
    that it was listed only when seat 0 did); accepting, the deal fails and nothing moves."""
    s = hand(hand(hand(std(4), 0, "I01", "I02"), 1, "I06"), 2, "I11")
    oid, s = offered(s, 0, 1, give_cards=["I01"])
    s = traded(s, 0, 2, give_cards=["I01"], want_money=1)
    assert "I01" not in s.hands[0] and [o.id for o in s.offers] == [oid]
    assert list(ENGINE.view(s, 1).known_cards) == []   # NP-H7: which card went is hidden from seat 1
    assert accept_of(oid) in listing(s, 1)
    assert_listed_as_in_its_worlds(s, 1)
    # its worlds deal I01 like any card seat 1 cannot see, not always to seat 0 (the offer binds nothing)
    view = ENGINE.view(s, 1)
    assert not all("I01" in ENGINE.determinize(view, 1, Rng(seed)).hands[0] for seed in range(24))
    # and on a state that differs only in what seat 1 cannot see: seat 0 kept I01, gave I02
    kept = hand(hand(s, 0, "I01"), 2, "I02", "I11")
    assert ENGINE.view(kept, 1) == ENGINE.view(s, 1) and listing(kept, 1) == listing(s, 1)

    events, failed = play(s, 1, cmd("accept_deal", offer=oid))
    (closed,) = of(events, "offer_closed")
    assert [e.WhichOneof("kind") for e in events] == ["offer_closed"] and closed.how == "failed"
    assert ENGINE.visibility(events[0]).seats == frozenset({0, 1})   # NP-H7: the two seats alone
    assert failed.offers == () and failed.hands == s.hands and failed.money == s.money
    # where seat 0 still holds the card, the same acceptance moves it: only accepting tells seat 1
    events, done = play(kept, 1, cmd("accept_deal", offer=oid))
    assert of(events, "offer_closed")[0].how == "accepted" and "I01" in done.hands[1]


def test_np_m4_np_m8_money_its_maker_no_longer_has_is_public_so_the_acceptance_is_not_listed() -> None:
    """NP-M8: money is public, so whether the maker still has the money it offered is the
    recipient's to see: the acceptance is not listed, in the true state as in every world, and is
    refused (NP-M4) without an event, so the maker learns nothing of it (NP-H7)."""
    s = hand(std(4), 1, "I06")
    oid, s = offered(s, 0, 1, give_money=5)
    assert accept_of(oid) in listing(s, 1)
    s = traded(s, 0, 2, give_money=s.money[0] - 4)   # seat 0 is left $4, as everyone sees
    assert s.money[0] == 4 and [o.id for o in s.offers] == [oid]
    assert accept_of(oid) not in listing(s, 1)
    assert_listed_as_in_its_worlds(s, 1)
    assert _refusal(s, 1, oid) == ("NP-M4", "one side no longer holds what was offered")


def test_np_m4_np_h7_a_requested_card_the_recipient_gave_away_is_its_own_to_know() -> None:
    """NP-H7: an offer may ask any card; the recipient knows its own hand, so an acceptance it
    cannot honour is neither listed (as in every world) nor made: it is refused (NP-M4) with no
    event, and the maker never learns whether the requested card was held."""
    s = hand(hand(std(4), 0, "I01"), 1, "I06", "I07")
    oid, s = offered(s, 0, 1, give_money=2, want_cards=["I06"])
    assert accept_of(oid) in listing(s, 1)
    s = traded(s, 1, 2, give_cards=["I06"])
    assert accept_of(oid) not in listing(s, 1)
    assert_listed_as_in_its_worlds(s, 1)
    assert_listed_as_in_its_worlds(s, 0)   # the maker's own listing reads nothing of seat 1's hand
    assert _refusal(s, 1, oid) == ("NP-M4", "one side no longer holds what was offered")
    # the recipient's own side is checked first: with the maker's card gone too, still a refusal
    gone = hand(s, 0)
    assert _refusal(gone, 1, oid)[0] == "NP-M4"


def _refusal(state, seat: int, oid: int) -> tuple[str, str]:
    try:
        ENGINE.decide(state, seat, cmd("accept_deal", offer=oid), Rng(0))
    except RuleViolation as exc:
        return exc.code, exc.message
    raise AssertionError("the acceptance was not refused")
