"""legal_commands with `rng` (the engine protocol; sampler.py): every member of a compound choice can
come up, not only the representative ones, and everything drawn is legal (NP-C, NP-W, NP-M)."""

from __future__ import annotations

import random
from typing import Any

from famiglia.engine import Rng, Sampled
from famiglia.rules.nothing_personal.decide.negotiation import acceptable
from famiglia.rules.nothing_personal.legal import legal_commands
from famiglia.rules.nothing_personal.state import Act, Offer, Window

from .support import ENGINE, PASS, Phase, at_stage, hand, mark, money, new, replace, round1, std


def drawn(s: Any, seat: int, calls: int = 300, limit: int | None = 16, seed: int = 7) -> list[Any]:
    """The distinct commands `calls` draws list, each checked to be accepted by decide."""
    rng = random.Random(seed)
    out: dict[bytes, Any] = {}
    for _ in range(calls):
        for c in legal_commands(s, seat, limit, rng=rng):
            out.setdefault(c.SerializeToString(deterministic=True), c)
    for c in out.values():
        ENGINE.decide(s, seat, c, Rng(0))   # raises unless legal
    return list(out.values())


def of_kind(commands: list[Any], kind: str) -> list[Any]:
    return [getattr(c, kind) for c in commands if c.WhichOneof("kind") == kind]


def commission(*cards: str, ante: int = 0, money: int = 50, offers: int = 3) -> Any:
    """Seat 0's Commission turn with `cards`; the Ante is available when `ante` is given (NP-C16)."""
    s = hand(std(4), 0, *cards)
    if ante:
        s = replace(s, had_turn=frozenset(range(4)), ante=ante)
    return replace(s, money=(money, 50, 50, 50), offers_made=(3 - offers, 0, 0, 0))


def acting(s: Any, pos: int, seat: int) -> Any:
    s = at_stage(s, Phase.CREW, "action", pos=pos, sweep=1)
    return replace(s, act=Act(pos, s.board[pos - 1], seat), hands=((),) * s.n, offers_made=(3,) * s.n)


def test_np_c17_the_sampler_pays_any_ante_the_seat_can_raise_it_to() -> None:
    """NP-C17: a payment above the Ante is legal up to all the seat's money; the representative listing
    only pays the Ante or one more."""
    s = commission("I01", ante=2, money=9)
    fixed = {c.play_for_influence.ante for c in legal_commands(s, 0) if c.WhichOneof("kind") == "play_for_influence"}
    assert fixed == {2, 3}
    antes = {p.ante for p in of_kind(drawn(s, 0), "play_for_influence")}
    assert antes == set(range(2, 10))


def test_np_c14_the_sampler_discards_for_a_marker_on_any_active_gangster() -> None:
    """NP-C14: the marker goes on any active gangster; the representative listing names two."""
    s = commission("I01")
    fixed = {c.discard_for_marker.gangster for c in legal_commands(s, 0) if c.WhichOneof("kind") == "discard_for_marker"}
    assert len(fixed) == 2
    targets = {d.gangster for d in of_kind(drawn(s, 0), "discard_for_marker")}
    assert targets == {g for g in s.board[:9] if g}


def test_np_c5_np_c7_np_c9_the_sampler_places_a_card_on_every_target_set_in_any_order() -> None:
    """NP-C5, NP-C7, NP-C9: each group on any gangster its icon matches, the placements in any order;
    the representative listing rotates four target sets."""
    s = commission("I29")   # thug:2, hitman:1
    fixed = of_kind(legal_commands(s, 0), "play_for_influence")
    assert len(fixed) == 4
    plays = {tuple((p.group, p.gangster) for p in play.placements) for play in of_kind(drawn(s, 0), "play_for_influence")}
    thugs = [g for g in s.board if g and g.startswith("T")]
    hitmen = [g for g in s.board if g and g.startswith("H")]
    both = {((0, t), (1, h)) for t in thugs for h in hitmen}
    assert plays == both | {(b, a) for a, b in both}


def test_np_c10_np_c19_np_c24_effects_are_drawn_with_their_targets() -> None:
    """NP-C10, NP-C19: a `blank` effect used or not; NP-C24: an `AND` effect on what the play placed."""
    s = commission("I21", "I57")   # thug:2 blank EXTRA_5; thug:2 AND BLACKMAIL_COIN
    plays = of_kind(drawn(s, 0), "play_for_influence")
    extra = [p for p in plays if p.card == "I21"]
    assert {p.use_effect for p in extra} == {False, True}
    assert all(p.effect.gangster == p.placements[0].gangster for p in extra if p.use_effect)
    coins = [p for p in plays if p.card == "I57"]
    thugs = {g for g in s.board if g and g.startswith("T")}
    assert {p.effect.gangster for p in coins} == thugs and not any(p.use_effect for p in coins)
    no_coin = replace(s, bm_free=0)   # NP-C11, NP-C25: carried out as far as it can be, here not at all
    coins = [p for p in of_kind(drawn(no_coin, 0, calls=100), "play_for_influence") if p.card == "I57"]
    assert coins and not any(p.HasField("effect") for p in coins)


def test_np_c12_np_c13_an_or_effect_is_drawn_over_all_its_targets() -> None:
    """NP-C12, NP-C13 (MOVE_OWN_1): a marker of the seat to any other active gangster; the representative
    listing names four."""
    s = mark(commission("I88"), "T01", {0: 2})
    fixed = of_kind(legal_commands(s, 0), "play_or_effect")
    assert len(fixed) == 4
    dests = {e.effect.destination for e in of_kind(drawn(s, 0), "play_or_effect")}
    assert dests == {g for g in s.board[:9] if g and g != "T01"}


def test_np_c23_window_plays_pay_no_ante_and_only_crew_or_anytime_cards() -> None:
    """NP-C21, NP-C22, NP-C23: in a Crew window only crew (+$5) and anytime cards, no Ante, no discard."""
    s = hand(std(4), 2, "I01", "I68", "I76")
    s = replace(s, window=Window("card", (2,), (None,) * 4), phase=Phase.CREW, stage="score_window", pos=9)
    assert [p.seat for p in ENGINE.pending(s)] == [2]
    got = drawn(s, 2)
    plays = of_kind(got, "play_for_influence")
    assert {p.card for p in plays} == {"I68", "I76"} and all(p.ante == 0 for p in plays)
    assert not of_kind(got, "discard_for_marker")


def test_np_w29_neutral_markers_are_drawn_in_any_spread_and_order() -> None:
    """NP-W29: three neutral markers on active gangsters as the seat likes, named in any order; the
    representative listing cuts the spreads off at 16, each in board order."""
    s = acting(mark(std(4), "C06", {1: 1}), 7, 1)
    fixed = {tuple(c.use_ability.targets.gangsters) for c in legal_commands(s, 1) if c.WhichOneof("kind") == "use_ability"}
    spreads = {tuple(u.targets.gangsters) for u in of_kind(drawn(s, 1, calls=100), "use_ability")}
    assert len(spreads - fixed) > 100
    spot = {g: i for i, g in enumerate(s.board)}
    assert any(list(t) != sorted(t, key=spot.__getitem__) for t in spreads), "not only in board order"


def test_np_w27_a_swap_names_its_two_markers_in_either_order() -> None:
    """NP-W27, NP-C31: any two markers of different owners, named in either order."""
    s = acting(mark(mark(mark(std(4), "G05", {1: 1}), "T03", {2: 1}), "H04", {3: 1}), 5, 1)
    swaps = {tuple((m.gangster, m.owner) for m in u.targets.markers) for u in of_kind(drawn(s, 1), "use_ability")}
    refs = [("G05", 1), ("T03", 2), ("H04", 3)]
    assert swaps == {(a, b) for a in refs for b in refs if a != b}


def test_np_m1_np_m3_np_m6_initiatives_are_drawn_over_their_amounts_cards_and_coins() -> None:
    """NP-M1: shakedowns of any cards in any order; NP-M3: gifts of any amount the seat has, to any
    other seat; NP-M6: hand-overs of a coin the two seats share."""
    s = mark(commission("I01", "I02", money=4), "T01", {0: 1, 2: 1}, coin=0)
    got = drawn(s, 0, calls=400)
    assert {tuple(k.cards) for k in of_kind(got, "shakedown")} == {("I01",), ("I02",), ("I01", "I02"), ("I02", "I01")}
    offers = of_kind(got, "offer_deal")
    gifts = {(o.to, o.give_money) for o in offers if o.give_money and not (
        o.give_cards or o.want_money or o.want_cards or o.handover_gangster or o.HasField("contract"))}
    assert gifts == {(to, m) for to in (1, 2, 3) for m in range(1, 5)}
    assert (2, "T01") in {(o.to, o.handover_gangster) for o in offers}
    assert any(o.want_cards for o in offers) and any(o.want_money for o in offers) and any(o.give_cards for o in offers)


def test_np_m9_no_offer_is_drawn_once_the_seat_made_its_offers() -> None:
    """NP-M9: at most `offers_per_phase` offers per phase; shakedowns stay (NP-M1)."""
    s = commission("I01", offers=0)
    got = drawn(s, 0, calls=100)
    assert not of_kind(got, "offer_deal") and of_kind(got, "shakedown")


def test_np_v2_np_v3_contracts_are_drawn_with_every_condition() -> None:
    """NP-V2, NP-V3 (keep_your_word): contracts either way, on each condition, are legal offers."""
    s = commission("I01")
    s = replace(s, cfg=replace(s.cfg, keep_your_word=True))
    contracts = [o.contract for o in of_kind(drawn(s, 0, calls=400), "offer_deal") if o.HasField("contract")]
    assert {c.condition for c in contracts} == {"GANGSTER_GONE", "ACTION_BY", "NOT_TARGETED"}
    assert {c.payer for c in contracts} == {0, 1, 2, 3}


def test_without_rng_the_listing_is_the_representative_one_and_a_sample_either_way() -> None:
    """The representative listing does not change with draws made meanwhile; it is a `Sampled` exactly
    when the drawn one is (a compound choice), and a plain list for a small choice (NP-S10)."""
    s = commission("I29", "I88", ante=2, money=20)
    before = [c.SerializeToString() for c in legal_commands(s, 0)]
    drawn(s, 0, calls=50)
    after = legal_commands(s, 0)
    assert [c.SerializeToString() for c in after] == before
    assert isinstance(after, Sampled) and isinstance(legal_commands(s, 0, rng=random.Random(1)), Sampled)
    setup = new(4)
    seat = ENGINE.pending(setup)[0].seat
    plain, sampled = legal_commands(setup, seat), legal_commands(setup, seat, rng=random.Random(1))
    assert not isinstance(plain, Sampled) and not isinstance(sampled, Sampled)
    assert [c.SerializeToString() for c in plain] == [c.SerializeToString() for c in sampled]


def test_the_sampler_keeps_within_the_limit_and_the_pending_seat_keeps_its_answer() -> None:
    """Draws stay within `limit`, and a pending seat's list starts with an answer to its decision."""
    s = commission("I29", "I88", "I21", "I57", ante=2, money=20)
    rng = random.Random(3)
    for limit in (1, 2, 3, 5, 16, 64, None):
        for _ in range(20):
            got = legal_commands(s, 0, limit, rng=rng)
            assert limit is None or len(got) <= limit
            assert got[0] == PASS
    assert len(legal_commands(s, 0, rng=rng)) > 8


def test_np_x21_no_pending_seat_draws_a_turn_command() -> None:
    """NP-X21, NP-R6: a seat that is not asked draws only the commands that never advance the game."""
    s = commission("I01")
    s = hand(s, 1, "I02")
    got = drawn(s, 1, calls=50)
    assert got and all(c.WhichOneof("kind") in ENGINE.info.optional_commands for c in got)
    assert {c.WhichOneof("kind") for c in got} >= {"shakedown", "offer_deal"}


def test_np_r6_a_seat_not_asked_never_draws_an_empty_list_while_it_may_negotiate() -> None:
    """NP-R6: a seat that is not asked may still make offers and shakedowns, and every drawn listing
    (ListLegalCommands with a sample_seed) shows some: with no decision of its own to draw for, the
    draws all go to its initiatives rather than two in three of them to nothing."""
    s = hand(commission("I01"), 1, "I02")
    for seed in range(400):
        for limit in (32, None):
            got = legal_commands(s, 1, limit, rng=random.Random(seed))
            assert got, f"seed {seed}, limit {limit}: an empty list for a seat that may negotiate"


def reviewed() -> Any:
    """A review's table (seed 5, 3 seats, keep_your_word): round 1's Commission, money (5, 5, 29), seat 0
    holding four cards and seat 2 one; seat 0 makes offers to seat 2."""
    return money(hand(round1(3, 5, keep_your_word="true"), 2, "I49"), 5, 5, 29)


def offers_to(s: Any, seat: int, to: int, calls: int = 4000) -> list[Any]:
    return [o for o in of_kind(drawn(s, seat, calls=calls), "offer_deal") if o.to == to]


def test_np_v2_np_m4_a_contract_may_be_paid_from_money_the_same_offer_brings_in() -> None:
    """NP-V2, NP-M4: a contract's amount is checked on acceptance, against the payer's money after the
    rest of the offer; amounts past that (and past any range) are legal offers too."""
    s = reviewed()
    contracts = [o for o in offers_to(s, 0, 2) if o.HasField("contract") and o.contract.payer == 0]
    funded = [o for o in contracts if o.contract.amount > s.money[0]
              and acceptable(s, Offer(1, 0, 2, o.SerializeToString()))]
    assert funded, "no contract paid from the money the same offer asks"
    assert any(o.contract.amount > s.money[0] + o.want_money for o in contracts)


def test_np_m3_np_m4_money_is_asked_past_what_the_other_seat_has_now() -> None:
    """NP-M3, NP-M4: money asked is checked on acceptance, and the other seat may gain money before it
    answers: more than it has is asked, and money of a seat with $0."""
    s = reviewed()
    asked = {o.want_money for o in offers_to(s, 0, 2)}
    assert set(range(1, s.money[2] + 1)) <= asked and max(asked) > s.money[2]
    broke = money(s, 5, 0, 29)
    assert any(o.want_money for o in offers_to(broke, 0, 1))


def test_np_m3_np_h7_cards_are_asked_past_what_the_other_seat_holds() -> None:
    """NP-M3, NP-H7: any cards may be asked, more than the other seat holds, cards the seat holds itself
    (legal offers, though NP-M4 could not accept them now); most draws keep to the acceptable ones."""
    s = reviewed()
    wanted = [list(o.want_cards) for o in offers_to(s, 0, 2) if o.want_cards]
    assert any(len(w) > len(s.hands[2]) for w in wanted)
    assert any(set(w) & set(s.hands[0]) for w in wanted)
    assert "I49" in {c for w in wanted for c in w}
    plain = [w for w in wanted if len(w) <= len(s.hands[2]) and not set(w) & set(s.hands[0])]
    assert len(plain) > len(wanted) / 2


def test_a_cards_representative_plays_name_each_command_once() -> None:
    """A listing names each command once (the engine contract checks it for every game): where
    two groups of a card each have 3 eligible gangsters (I29..I40 on the standard board), the
    four rotated target sets came round to the first again, listed twice (now a set the rotation
    missed takes its place)."""
    for cid in ("I29", "I34", "I40"):
        listed = [c.SerializeToString(deterministic=True) for c in legal_commands(commission(cid), 0)]
        assert listed and len(listed) == len(set(listed)), cid
