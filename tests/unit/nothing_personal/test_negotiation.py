"""Money and negotiation (NP-M1..M10, NP-R6), contracts (NP-V1..V5) and re-roll tokens (NP-V8, NP-V9)."""

from __future__ import annotations

import pytest

from famiglia.engine import pending_for
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb
from famiglia.rules.nothing_personal.crew import reroll_means
from famiglia.rules.nothing_personal.data import MONEY_TOKENS, TIMEOUTS
from famiglia.rules.nothing_personal.state import Roll

from .support import (
    ENGINE,
    PASS,
    Phase,
    at_stage,
    cmd,
    hand,
    kinds,
    mark,
    markers_of,
    new,
    of,
    pfi,
    play,
    ref,
    refused,
    replace,
    round1,
    std,
    step,
)


def deal(to: int, **kw) -> pb.Command:
    return pb.Command(offer_deal=pb.OfferDeal(to=to, **kw))


def offered(state, seat: int, command: pb.Command) -> tuple[int, object]:
    """Make an offer; its id (drawn, NP-H7) and the state after."""
    events, state = play(state, seat, command)
    return of(events, "offer_made")[0].id, state


def test_np_m1_np_r6_shakedown_any_time_8_dollars_a_card_pending_unchanged() -> None:
    """NP-M1, NP-R6."""
    s = hand(std(4), 2, "I01", "I02")
    before = ENGINE.pending(s)
    events, after = play(s, 2, cmd("shakedown", cards=["I01", "I02"]))   # not seat 2's turn
    assert after.money[2] == 66 and ENGINE.pending(after) == before and after.ante == 0
    assert set(after.discard) >= {"I01", "I02"}
    assert refused(s, 2, cmd("shakedown", cards=["I03"])) == "NP-M1"


def test_np_r6_no_shakedown_or_trade_during_setup() -> None:
    """NP-R6."""
    s = new(4)
    seat = s.hands[0][0]
    assert refused(s, 0, cmd("shakedown", cards=[seat])) == "NP-R6"


def test_np_m2_the_bank_never_runs_out() -> None:
    """NP-M2."""
    assert sum(k * v for k, v in MONEY_TOKENS.items()) == 250   # cosmetic tokens only
    s = replace(std(4), money=(10_000, 0, 0, 0))
    s = hand(s, 0, "I01")
    _, after = play(s, 0, cmd("shakedown", cards=["I01"]))
    assert after.money[0] == 10_008


def test_np_m3_np_m4_np_h7_offers_accept_move_both_sides_at_once() -> None:
    """NP-M3, NP-M4, NP-H7."""
    s = hand(hand(std(4), 0, "I01"), 1, "I06")
    events, s = play(s, 0, deal(1, give_money=5, give_cards=["I01"], want_cards=["I06"]))
    made = events[0]
    oid = made.offer_made.id
    assert ENGINE.visibility(made).seats == frozenset({0, 1})
    assert ENGINE.view(s, 2).offers == [] and len(ENGINE.view(s, 1).offers) == 1
    assert refused(s, 2, cmd("accept_deal", offer=oid)) == "NP-M4"
    events, s = play(s, 1, cmd("accept_deal", offer=oid))
    executed = of(events, "trade_executed")[0]
    assert executed.give_card_count == 1 and ENGINE.visibility(events[kinds(events).index("trade_executed")]) \
        .kind.name == "PUBLIC"
    assert ENGINE.visibility(events[kinds(events).index("trade_cards_moved")]).seats == frozenset({0, 1})
    assert "I06" in s.hands[0] and "I01" in s.hands[1] and s.money[:2] == (45, 55)


def test_np_m4_failed_and_refused_acceptance_decline_withdraw_and_lapse() -> None:
    """NP-M4: an acceptance the recipient can tell is impossible (money is public, NP-M8) is refused;
    one that fails on the maker's hidden hand (NP-H7) fails the deal, and nothing moves
    (test_open_offers.py)."""
    s = hand(std(4), 0, "I01")
    oid, s = offered(s, 0, deal(1, give_cards=["I01"], give_money=5))
    broke = replace(s, money=(4, 50, 50, 50))   # seat 0 spent the money meanwhile
    assert refused(broke, 1, cmd("accept_deal", offer=oid)) == "NP-M4"
    gone = hand(s, 0)   # the card left seat 0's hand meanwhile
    events, failed = play(gone, 1, cmd("accept_deal", offer=oid))
    assert of(events, "offer_closed")[0].how == "failed" and kinds(events) == ["offer_closed"]
    assert failed.offers == () and failed.money == gone.money
    events, d = play(s, 1, cmd("decline_deal", offer=oid))
    assert of(events, "offer_closed")[0].how == "declined" and d.offers == ()
    assert refused(s, 1, cmd("withdraw_deal", offer=oid)) == "NP-M4"
    events, w = play(s, 0, cmd("withdraw_deal", offer=oid))
    assert of(events, "offer_closed")[0].how == "withdrawn"
    # an open offer lapses at the end of its phase (NP-D15): the phase's beginning ends it, with
    # no event of its own (NP-H7: test_np_h7_how_many_offers_lapse_shows_in_no_version_and_no_event)
    ended, closed = s, []
    while ended.phase == Phase.COMMISSION:
        events, ended = play(ended, ENGINE.pending(ended)[0].seat, PASS)
        closed += of(events, "offer_closed")
    assert ended.offers == () and closed == [] and ENGINE.view(ended, 0).offers == []


def test_np_m5_np_m6_only_a_blackmail_hand_over_moves_markers_between_seats() -> None:
    """NP-M5, NP-M6."""
    s = mark(std(4), "T01", {0: 2, 1: 1}, coin=0)
    assert refused(s, 0, deal(2, handover_gangster="T01")) == "NP-M6"    # seat 2 has no marker there
    oid, s = offered(s, 0, deal(1, handover_gangster="T01", want_money=3))
    _, s = play(s, 1, cmd("accept_deal", offer=oid))
    st = markers_of(s, "T01")
    assert st.coin == 1 and st.markers[:2] == (2, 1) and s.money[:2] == (53, 47)
    assert not any(f.name in ("respect", "markers", "ring") for f in pb.OfferDeal.DESCRIPTOR.fields)


def test_np_r6_no_hand_over_of_a_coin_whose_owner_is_answering_a_proposal() -> None:
    """NP-R6, NP-M6."""
    from famiglia.rules.nothing_personal.state import Act as A

    s = mark(std(4), "T03", {1: 2, 2: 1}, coin=2)
    s = replace(at_stage(s, Phase.CREW, "action", pos=5, sweep=1), act=A(5, "T03", 1, stage=1,
                                                                          proposal=PASS.SerializeToString()))
    assert refused(s, 2, deal(1, handover_gangster="T03")) == "NP-R6"


def test_np_m7_chat_has_no_game_effect_and_is_private() -> None:
    """NP-M7."""
    s = std(4)
    events, after = play(s, 0, cmd("send_chat", to=[2], text="nothing personal"))
    assert ENGINE.visibility(events[0]).seats == frozenset({0, 2})
    assert after.money == s.money and ENGINE.pending(after) == ENGINE.pending(s)


@pytest.mark.parametrize("text", [
    "", "   ", "\n\t", "\u200b\ufeff", "\u3164",  # shows nothing
    "a\x00b", "a\x1b[2Jb", "abc\rXYZ", "tab\there",  # control characters: a NUL, an escape, a lone return
    "gg \u202ewp", "\u2066x",  # reorders the text after it (the next sender's name, words)
])
def test_np_m7_a_chat_text_that_shows_nothing_or_could_garble_another_line_is_refused(text: str) -> None:
    """NP-M7: the table's talk here is the engine's, so it is held to match chat's text rules
    (README, "Playing over gRPC"): a blank message, a terminal's escape or a right-to-left
    override shown to every other seat was taken, and counted against NP-M10's cap."""
    s = std(4)
    assert refused(s, 0, cmd("send_chat", text=text)) == "NP-M7"


@pytest.mark.parametrize("text", [
    "deal?\r\nyes", "two\nlines", "  padded  ", "e\u0301 \U0001f3b2", "\u05e9\u05dc\u05d5\u05dd 3\u200f!",
    "ok \u3164", "\U0001f469\u200d\U0001f4bb", "x" * 500,
])
def test_np_m7_a_chat_text_of_any_script_with_newlines_and_joiners_is_sent_as_written(text: str) -> None:
    """NP-M7: the checks take what match chat takes (a phone's "\\r\\n" included), and the event
    carries the text as sent."""
    events, _ = play(std(4), 0, cmd("send_chat", text=text))
    assert events[0].chat_sent.text == text


def test_np_m8_money_is_public_and_voluntary_payments_need_the_full_amount() -> None:
    """NP-M8."""
    s = replace(std(4), money=(3, 50, 50, 50))
    assert list(ENGINE.view(s, None).money) == [3, 50, 50, 50]
    assert refused(s, 0, deal(1, give_money=4)) == "NP-M8"


def test_np_m9_offers_are_capped_per_seat_per_phase() -> None:
    """NP-M9."""
    s = std(4)
    for _ in range(3):
        _, s = play(s, 0, deal(1, give_money=1))
    assert refused(s, 0, deal(1, give_money=1)) == "NP-M9"
    assert not [c for c in ENGINE.legal_commands(s, 0) if c.WhichOneof("kind") == "offer_deal"]


def test_np_m10_chats_and_auto_pass_changes_are_capped() -> None:
    """NP-M10."""
    s = replace(std(4), chats_made=(10, 0, 0, 0), ap_changes=(2, 0, 0, 0))
    assert refused(s, 0, cmd("send_chat", text="x")) == "NP-M10"
    assert refused(s, 0, cmd("set_auto_pass", cards=True)) == "NP-M10"


def test_np_d7_np_h9_a_standing_auto_pass_answers_pass_at_once_and_shows_nothing() -> None:
    """NP-D7, NP-H9: eligibility is public, so an auto-passing seat is still asked; its clock runs out at
    once (its pass is its own timeout command), only pass is open to it, and nobody else's events or
    pending rows depend on its private setting."""
    s = std(4)
    s = replace(s, hands=((),) * 4, deck=s.deck + tuple(c for h in s.hands for c in h))
    s = hand(hand(s, 1, "I76"), 2, "I77")
    events, auto = play(s, 1, cmd("set_auto_pass", cards=True))
    assert ENGINE.visibility(events[0]).seats == frozenset({1})
    opened = []
    for table in (s, auto):
        events, table = step(at_stage(table, Phase.FEDS, "window"))
        assert list(of(events, "window_opened")[0].seats) == [1, 2]
        opened.append((events, table))
    (plain, _), (events, after) = opened
    for viewer in (0, 2, 3, None):
        assert [ENGINE.redact(e, viewer) for e in plain] == [ENGINE.redact(e, viewer) for e in events]
        assert pending_for(ENGINE, after, viewer) == pending_for(ENGINE, opened[0][1], viewer)
    assert {p.seat: p.timeout_seconds for p in ENGINE.pending(after)} == \
        {1: TIMEOUTS["auto_pass"], 2: TIMEOUTS["card_window"]}
    answers = [c for c in ENGINE.legal_commands(after, 1) if c.WhichOneof("kind") in ("pass", "play_for_influence")]
    assert answers == [PASS] and ENGINE.timeout_command(after, 1) == PASS
    assert refused(after, 1, pfi("I76", "T01")) == "NP-D7"
    events, after = play(after, 1, ENGINE.timeout_command(after, 1))
    assert kinds(events) == ["window_answered"] and ENGINE.visibility(events[0]).seats == frozenset({1})
    assert [p.seat for p in ENGINE.pending(after)] == [2]


def contract(**kw) -> pb.Contract:
    return pb.Contract(**kw)


def keep_word(ring: int = 0):
    s = std(4, ring)
    return replace(s, cfg=replace(s.cfg, keep_your_word=True))


def test_np_v1_contracts_need_the_variant() -> None:
    """NP-V1."""
    s = std(4)
    c = contract(payer=0, payee=1, amount=5, condition="GANGSTER_GONE", gangster="T01")
    assert refused(s, 0, deal(1, contract=c)) == "NP-V1"


def test_np_v2_np_v3_np_v4_gangster_gone_pays_at_once_into_and_out_of_escrow() -> None:
    """NP-V2, NP-V3, NP-V4."""
    s = keep_word()
    c = contract(payer=0, payee=1, amount=5, condition="GANGSTER_GONE", gangster="G05")
    oid, s = offered(s, 0, deal(1, contract=c))
    _, s = play(s, 1, cmd("accept_deal", offer=oid))
    assert s.money[0] == 45 and s.contracts[0].deadline == 1 and ENGINE.view(s, 3).contracts
    s = mark(mark(s, "T01", {2: 1}), "G05", {3: 1})
    s = at_stage(s, Phase.CREW, "roll_result", pos=1, sweep=1)
    from famiglia.rules.nothing_personal.state import Act as A

    s = replace(s, act=A(1, "T01", 2, stage=2), roll=Roll("whack", "pistol", "whack", 2, "T01", "G05"))
    events, s = step(s)
    assert of(events, "contract_settled")[0].to == 1 and s.money[1] == 55 and s.contracts == ()


def test_np_v3_np_v4_not_targeted_pays_at_the_deadline_and_returns_when_broken() -> None:
    """NP-V3, NP-V4."""
    s = keep_word()
    c = contract(payer=0, payee=1, amount=5, condition="NOT_TARGETED", gangster="G05", seat=1)
    oid, s = offered(s, 0, deal(1, contract=c))
    _, kept = play(s, 1, cmd("accept_deal", offer=oid))
    _, paid = step(at_stage(kept, Phase.FAMILY, "assoc"))
    assert paid.money[1] == 55 and paid.contracts == ()
    from famiglia.rules.nothing_personal.state import Act as A

    broken = at_stage(mark(mark(kept, "T01", {1: 1}), "G05", {3: 1}), Phase.CREW, "action", pos=1, sweep=1)
    broken = replace(broken, act=A(1, "T01", 1))
    events, broken = play(broken, 1, cmd("whack", target="G05"))
    assert of(events, "contract_settled")[0].to == 0


def test_np_v3_action_by_pays_when_the_action_is_taken() -> None:
    """NP-V3."""
    s = keep_word()
    c = contract(payer=0, payee=1, amount=5, condition="ACTION_BY", gangster="T01", seat=1, action="pass")
    oid, s = offered(s, 0, deal(1, contract=c))
    _, s = play(s, 1, cmd("accept_deal", offer=oid))
    from famiglia.rules.nothing_personal.state import Act as A

    s = replace(at_stage(mark(s, "T01", {1: 1}), Phase.CREW, "action", pos=1, sweep=1), act=A(1, "T01", 1))
    events, s = play(s, 1, PASS)
    assert of(events, "contract_settled")[0].to == 1 and s.money[1] == 55


@pytest.mark.parametrize("named", ["markers", "destination"])
def test_np_v3_action_by_against_a_target_pays_for_an_ability_that_names_it_as_markers(named: str) -> None:
    """NP-V3: "optionally against that target": an ability names its gangsters in the target
    field it uses (First Guy's REMOVE_1 names a marker on them), not only `gangster`."""
    from famiglia.rules.nothing_personal.state import Act as A

    s = keep_word()
    target = "T01" if named == "markers" else "H02"
    c = contract(payer=0, payee=1, amount=5, condition="ACTION_BY", gangster="C01", seat=1, action="position",
                 target=target)
    oid, s = offered(s, 0, deal(1, contract=c))
    _, s = play(s, 1, cmd("accept_deal", offer=oid))
    s = mark(mark(s, "C01", {1: 2}), "T01", {2: 2})
    s = replace(at_stage(s, Phase.CREW, "action", pos=3, sweep=1), act=A(3, "C01", 1))
    removes = pb.Command(use_ability=pb.UseAbility(targets=pb.Targets(markers=[ref("T01", 2)])))
    events, s = play(s, 1, removes)
    paid = of(events, "contract_settled")
    if named == "markers":
        assert paid and paid[0].to == 1 and paid[0].how == "paid" and not s.contracts
    else:  # a gangster the action did not name
        assert not paid and s.contracts


@pytest.mark.parametrize("junk", ["gangster", "gangsters", "destination"])
def test_np_v3_a_gangster_in_a_field_the_ability_ignores_does_not_settle_an_action_by(junk: str) -> None:
    """NP-V3: an action is against the gangsters its ability names in the fields it uses; REMOVE_1
    reads only `markers`, so H02 written in another field leaves a contract against H02 open."""
    from famiglia.rules.nothing_personal.state import Act as A

    s = keep_word()
    c = contract(payer=0, payee=1, amount=5, condition="ACTION_BY", gangster="C01", seat=1, action="position",
                 target="H02")
    oid, s = offered(s, 0, deal(1, contract=c))
    _, s = play(s, 1, cmd("accept_deal", offer=oid))
    s = mark(mark(s, "C01", {1: 2}), "T01", {2: 2})
    s = replace(at_stage(s, Phase.CREW, "action", pos=3, sweep=1), act=A(3, "C01", 1))
    t = pb.Targets(markers=[ref("T01", 2)])
    if junk == "gangsters":
        t.gangsters.append("H02")
    else:
        setattr(t, junk, "H02")
    events, s = play(s, 1, pb.Command(use_ability=pb.UseAbility(targets=t)))
    assert of(events, "markers_removed")[0].gangster == "T01"  # the ability ran
    assert not of(events, "contract_settled") and s.contracts


def test_np_m3_np_v3_an_offer_names_only_cards_of_the_game() -> None:
    """NP-M3, NP-V3: asking for a card the game does not have, or a contract against one, is
    refused with its rule, not taken as an offer nobody could ever accept or settle."""
    s = keep_word()
    assert refused(s, 0, deal(1, want_cards=["NOPE"])) == "NP-M3"
    c = contract(payer=0, payee=1, amount=5, condition="ACTION_BY", gangster="C01", seat=1, action="position",
                 target="NOPE")
    assert refused(s, 0, deal(1, contract=c)) == "NP-V3"
    c.target = "H02"
    assert offered(s, 0, deal(1, contract=c))[0]  # a real card is fine


def test_np_m3_an_offer_asks_for_each_card_once() -> None:
    """NP-M3: specific cards, and every card of the game is one of a kind, so a card asked for
    twice can never be handed over. Such an offer was taken: one id repeated to the 8 MiB a
    request may carry made a private event of megabytes, kept in the match for good and sent to
    its recipient, for an offer nobody could ever accept."""
    s = std(4)
    assert refused(s, 0, deal(1, want_cards=["I06", "I06"])) == "NP-M3"
    assert refused(s, 0, deal(1, want_cards=["I06"] * 100_000)) == "NP-M3"
    assert offered(s, 0, deal(1, want_cards=["I06", "I07"]))[0]


def test_np_v5_contracts_are_cancelled_only_by_both_parties() -> None:
    """NP-V5."""
    s = keep_word()
    c = contract(payer=0, payee=1, amount=5, condition="GANGSTER_GONE", gangster="G05")
    oid, s = offered(s, 0, deal(1, contract=c))
    _, s = play(s, 1, cmd("accept_deal", offer=oid))
    assert s.contracts[0].id == oid   # a contract keeps its offer's id
    assert refused(s, 2, cmd("cancel_contract", contract=oid)) == "NP-V5"
    cancel, s = offered(s, 1, cmd("cancel_contract", contract=oid))
    assert cancel != oid
    events, s = play(s, 0, cmd("accept_deal", offer=cancel))
    assert of(events, "contract_settled")[0].how == "cancelled" and s.money[0] == 50


def test_np_v8_np_v9_a_reroll_token_replaces_10_dollars_once() -> None:
    """NP-V8, NP-V9."""
    s = round1(4, reroll_tokens="true")
    assert s.tokens == (1, 1, 1, 1)
    s = replace(s, money=(0, 0, 0, 0), roll=Roll("number", "1", "dice_money", 0, "G01"))
    assert reroll_means(s, 2) == [pb.REROLL_TOKEN]
    from famiglia.rules.nothing_personal.crew import eligible

    assert eligible(s, "reroll") == tuple((s.ring + i) % 4 for i in range(4))
    assert reroll_means(replace(s, cfg=replace(s.cfg, reroll_tokens=False)), 2) == []


def test_np_m8_np_m4_determinize_keeps_offered_cards_in_the_offering_hand() -> None:
    """NP-M8: an offer holds only cards its maker holds, so its recipient knows them to be in that
    hand; a sampled world deals them there, and the offer stays acceptable (NP-M4) in it as in
    the true state."""
    from famiglia.engine import Rng

    s = hand(hand(std(4), 0, "I01", "I02", "I03"), 1, "I06")
    oid, s = offered(s, 0, deal(1, give_cards=["I02", "I03"]))
    accept = cmd("accept_deal", offer=oid)
    assert accept in ENGINE.legal_commands(s, 1, 64)
    view = ENGINE.view(s, 1)
    for seed in range(20):
        d = ENGINE.determinize(view, 1, Rng(seed))
        assert ENGINE.view(d, 1).SerializeToString(deterministic=True) == view.SerializeToString(deterministic=True)
        assert {"I02", "I03"} <= set(d.hands[0]), f"seed {seed}: seat 0 holds {d.hands[0]}"
        assert accept in ENGINE.legal_commands(d, 1, 64)
