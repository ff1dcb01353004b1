"""Hidden information (NP-H1..H10), decisions and their defaults (NP-D1..D15), refusals (NP-X21)."""

from __future__ import annotations

import pytest

from famiglia.engine import Rng, RuleViolation, pending_for
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb
from famiglia.rules.nothing_personal.data import TIMEOUTS
from famiglia.rules.nothing_personal.state import Act, Window

from .support import (
    ENGINE,
    PASS,
    Phase,
    at_stage,
    cmd,
    hand,
    kinds,
    mark,
    new,
    of,
    play,
    replace,
    round1,
    std,
    step,
)


def test_np_h1_np_h4_a_hand_is_seen_by_its_owner_only_the_count_by_everyone() -> None:
    """NP-H1, NP-H4."""
    s = round1(4)
    for seat in range(4):
        v = ENGINE.view(s, seat)
        assert sorted(v.hand) == sorted(s.hands[seat]) and list(v.hand_sizes) == [4] * 4
    assert list(ENGINE.view(s, None).hand) == []
    events = ENGINE.setup(__import__("famiglia.engine", fromlist=["MatchConfig"]).MatchConfig(4), 3)
    drawn = [e for e in events if e.WhichOneof("kind") == "cards_drawn"]
    received = [e for e in events if e.WhichOneof("kind") == "cards_received"]
    assert all(ENGINE.visibility(e).kind.name == "PUBLIC" for e in drawn)
    assert all(ENGINE.redact(e, (e.cards_received.seat + 1) % 4) is None for e in received)


def test_np_h2_deck_orders_are_server_only_their_sizes_public() -> None:
    """NP-H2."""
    s = round1(4)
    v = ENGINE.view(s, 0)
    assert v.deck_size == len(s.deck) and v.gangster_deck_size == len(s.gdeck)
    assert not v.influence_deck and not v.gangster_deck


def test_np_h3_discards_are_public_and_a_reshuffle_order_is_server_only() -> None:
    """NP-H3."""
    s = hand(std(4), 0, "I01")
    events, s = play(s, 2, cmd("shakedown", cards=list(s.hands[2][:1])))
    assert ENGINE.visibility(events[0]).kind.name == "PUBLIC" and list(ENGINE.view(s, 3).discard) == list(s.discard)
    s = replace(s, deck=(), discard=s.discard)
    from famiglia.rules.nothing_personal.tx import Tx

    tx = Tx(s, Rng(1))
    tx.draw(1, 1, "test")
    vis = {e.WhichOneof("kind"): ENGINE.visibility(e).kind.name for e in tx.events}
    assert vis["discard_reshuffled"] == "PUBLIC" and vis["influence_deck_ordered"] == "SERVER"


def test_np_h5_np_h6_the_board_respect_ring_phase_ante_and_dice_are_public() -> None:
    """NP-H5, NP-H6."""
    s = mark(replace(std(4, ring=2), respect=(1, 2, 3, 4), ante=5), "T01", {1: 2}, coin=1, sideways=True)
    v = ENGINE.view(s, None)
    g = next(x for x in v.gangsters if x.id == "T01")
    assert list(g.markers) == [0, 2, 0, 0] and g.coin_owner == 1 and g.sideways
    assert list(v.respect) == [1, 2, 3, 4] and v.ring == 2 and v.ante == 5 and v.phase == "commission"
    assert list(v.spots) == list(s.board)
    rolled = ENGINE.visibility(pb.Event(die_rolled=pb.DieRolled(die="move", face="3")))
    assert rolled.kind.name == "PUBLIC"


def test_np_h7_offers_are_private_to_the_two_seats() -> None:
    """NP-H7."""
    s = std(4)
    events, s = play(s, 0, cmd("offer_deal", to=1, give_money=2))
    assert ENGINE.redact(events[0], 2) is None and ENGINE.redact(events[0], 1) is not None


def _refusal(state, seat, command) -> tuple[str, str]:
    with pytest.raises(RuleViolation) as exc:
        ENGINE.decide(state, seat, command, Rng(0))
    return exc.value.code, str(exc.value)


@pytest.mark.parametrize("kind", ["accept_deal", "decline_deal", "withdraw_deal"])
def test_np_h7_a_seat_outside_an_offer_is_refused_as_if_it_did_not_exist(kind: str) -> None:
    """NP-H7, NP-M4: a private offer between seats 0 and 1 leaves no trace in seat 2's refusals."""
    s = std(4)
    events, with_offer = play(s, 0, cmd("offer_deal", to=1, give_money=2))
    oid = of(events, "offer_made")[0].id
    for outsider in (2, 3):
        assert _refusal(with_offer, outsider, cmd(kind, offer=oid)) == _refusal(s, outsider, cmd(kind, offer=oid))
    # the parties still learn why they are refused
    party = 0 if kind != "withdraw_deal" else 1
    assert "only" in _refusal(with_offer, party, cmd(kind, offer=oid))[1]


def test_np_h7_offer_ids_say_nothing_about_other_seats_offers() -> None:
    """NP-H7: an offer's id (seen by its maker, and by everyone on TradeExecuted and ContractMade) is drawn,
    not counted, so it does not depend on how many private offers other seats have made."""
    quiet = std(4)
    busy = quiet
    for to in (1, 3):
        _, busy = play(busy, 0, cmd("offer_deal", to=to, give_money=1), seed=to)
    _, busy = play(busy, 1, cmd("offer_deal", to=3, give_money=1), seed=9)
    mine = cmd("offer_deal", to=3, give_money=2)
    ids = [of(ENGINE.decide(table, 2, mine, Rng(5)), "offer_made")[0].id for table in (quiet, busy)]
    assert ids[0] == ids[1]
    assert ids == [of(ENGINE.decide(quiet, 2, mine, Rng(5)), "offer_made")[0].id] * 2, "deterministic"
    # unique: an id already naming an open offer (or a live contract) is drawn again
    from famiglia.rules.nothing_personal.state import Offer

    taken = replace(quiet, offers=(Offer(ids[0], 0, 1, b""),))
    again = of(ENGINE.decide(taken, 2, mine, Rng(5)), "offer_made")[0].id
    assert again != ids[0] and again >= 1
    _, made = play(quiet, 2, mine, seed=5)
    events, _ = play(made, 3, cmd("accept_deal", offer=ids[0]))
    assert of(events, "trade_executed")[0].id == ids[0]


def test_np_h7_how_many_offers_lapse_shows_in_no_version_and_no_event() -> None:
    """NP-H7, NP-M4: the Commission's last pass ends the phase, and the offers still open lapse
    with it. The pass makes the same events (so takes the same versions), each shown alike to a
    seat outside the offers and to a spectator, whether or not other seats had offers open:
    a lapse event of its own for each, seen by its two seats alone, would tell the others, by
    the versions it took, how many were open between them (and show the pass unattributed)."""

    def last_pass(state) -> list:
        for seat in (0, 1, 2):
            _, state = play(state, seat, PASS)
        events, ended = play(state, 3, PASS)
        assert ended.phase != Phase.COMMISSION and ended.offers == ()
        return events

    quiet = std(4)
    busy = quiet
    for frm, to in ((1, 2), (2, 1), (1, 3)):
        _, busy = play(busy, frm, cmd("offer_deal", to=to, give_money=1), seed=frm + to)
    assert len(busy.offers) == 3
    alone, lapsing = last_pass(quiet), last_pass(busy)
    assert kinds(alone) == kinds(lapsing) and "offer_closed" not in kinds(lapsing)
    for viewer in (0, None):
        assert [ENGINE.redact(e, viewer) for e in alone] == [ENGINE.redact(e, viewer) for e in lapsing]


def test_np_h8_blackmail_proposals_and_answers_are_public() -> None:
    """NP-H8."""
    e = pb.Event(blackmail_proposed=pb.BlackmailProposed(seat=1, coin_owner=2, action=PASS))
    a = pb.Event(blackmail_answered=pb.BlackmailAnswered(seat=2, accept=False))
    assert ENGINE.visibility(e).kind.name == "PUBLIC" and ENGINE.visibility(a).kind.name == "PUBLIC"


def test_np_h9_window_answers_stay_hidden_and_who_is_asked_is_private() -> None:
    """NP-H9."""
    s = hand(hand(std(4), 1, "I76"), 2, "I77")
    s = replace(s, phase=Phase.FEDS, stage="window", window=Window("card", (1, 2), (None,) * 4))
    events, s = play(s, 1, cmd("play_for_influence", card="I76",
                                placements=[pb.GroupPlacement(group=0, gangster="T01")]))
    assert ENGINE.redact(events[0], 2) is None
    assert ENGINE.view(s, 2).window == "card" and not ENGINE.view(s, 2).window_answered_by_me
    assert ENGINE.view(s, 1).window_answered_by_me and ENGINE.view(s, 1).my_answer.WhichOneof("kind")
    assert pending_for(ENGINE, s, 0) == [] and [p.seat for p in pending_for(ENGINE, s, 2)] == [2]


def test_np_h10_everything_is_revealed_once_the_game_is_over() -> None:
    """NP-H10."""
    from famiglia.testing.random_play import play_random

    final = play_random(ENGINE, 3, 11).state
    v = ENGINE.view(final, None)
    assert len(v.influence_deck) == len(final.deck) and len(v.gangster_deck) == len(final.gdeck)


def test_np_h10_a_finished_game_shows_every_seats_offer_chat_and_auto_pass_counts_to_everyone() -> None:
    """NP-H10 (and NP-H7, NP-D7 before the end): the counts of offers, chats and auto-pass changes
    are each seat's own while the game runs; once it has ended every viewer, a spectator too, sees
    every seat's, as the engine contract's finished-match check asks (each viewer sees the same)."""
    from famiglia.testing.random_play import play_random

    counts = {"offers_made": (1, 2, 0), "chats_made": (0, 3, 1), "ap_changes": (2, 0, 1)}
    running = replace(round1(3), **counts)
    assert list(ENGINE.view(running, 1).offers_made) == [0, 2, 0] and not ENGINE.view(running, None).chats_made
    final = replace(play_random(ENGINE, 3, 11).state, **counts)
    for viewer in (None, 0, 1, 2):
        v = ENGINE.view(final, viewer)
        assert (list(v.offers_made), list(v.chats_made), list(v.autopass_changes)) == (
            list(counts["offers_made"]), list(counts["chats_made"]), list(counts["ap_changes"])), viewer


def test_np_d1_every_decision_has_an_owner_and_a_timeout_with_a_default() -> None:
    """NP-D1."""
    from famiglia.testing.random_play import play_random

    seen = set()

    def check(before, step_, after) -> None:
        for p in ENGINE.pending(before):
            assert p.timeout_seconds > 0
            seen.add(p.label)
            default = ENGINE.timeout_command(before, p.seat)
            assert default is not None
            ENGINE.decide(before, p.seat, default, Rng(0))   # the default is legal

    play_random(ENGINE, 4, 5, on_step=check)
    assert {"setup", "commission", "window", "action", "buy"} <= seen
    assert set(TIMEOUTS) >= {"setup", "commission", "card_window", "reroll_window", "ruling"}


def test_np_d2_a_play_carries_all_its_parameters_in_one_command() -> None:
    """NP-D2."""
    s = hand(std(4), 0, "I57")
    events, s = play(s, 0, cmd("play_for_influence", card="I57", ante=0,
                                placements=[pb.GroupPlacement(group=0, gangster="T01")],
                                effect=pb.Targets(gangster="T01")))
    assert "blackmail_coin_placed" in kinds(events) and ENGINE.pending(s)[0].seat == 1


def test_np_d3_np_d4_np_d9_np_d12_documented_defaults() -> None:
    """NP-D3, NP-D4, NP-D9, NP-D12."""
    s = new(4)
    assert ENGINE.timeout_command(s, s.ring).place_setup_marker.gangster == s.board[8]   # highest position
    c = std(4)
    assert ENGINE.timeout_command(c, 0).WhichOneof("kind") == "pass"
    r = mark(std(4, ring=2), "G05", {0: 1, 3: 1})
    _, r = step(at_stage(r, Phase.CREW, "score", pos=8))
    assert ENGINE.timeout_command(r, 2).rule_on_tie.seat == 3   # first tied seat in ring order from 2
    from famiglia.rules.nothing_personal.state import Invite

    inv = replace(std(4), invite=Invite(3, 0))
    assert ENGINE.timeout_command(inv, 3).place_invited_marker.gangster == "M00"


def test_np_d9_the_default_ruling_is_the_first_tied_seat_in_ring_order() -> None:
    """NP-D9: counted from the ring holder, which names itself when it is tied."""
    for ring, tied, first in ((2, {0: 1, 1: 1}, 0), (2, {1: 1, 2: 1}, 2), (1, {0: 1, 2: 1, 3: 1}, 2)):
        r = mark(std(4, ring=ring), "G05", tied)
        _, r = step(at_stage(r, Phase.CREW, "score", pos=8))
        assert r.ruling is not None and set(r.ruling.seats) == set(tied)
        assert ENGINE.timeout_command(r, ring).rule_on_tie.seat == first


def test_np_d12_invite_asks_the_invited_seat_to_place_one_marker() -> None:
    """NP-D12."""
    s = hand(std(4), 0, "I93")   # any:2 AND INVITE_1
    events, s = play(s, 0, cmd("play_for_influence", card="I93", placements=[pb.GroupPlacement(group=0,
                                gangster="M00")], effect=pb.Targets(seat=2)))
    assert of(events, "invite_asked")[0].seat == 2 and [p.seat for p in ENGINE.pending(s)] == [2]
    with pytest.raises(RuleViolation):
        ENGINE.decide(s, 2, cmd("place_invited_marker", gangster="T07"), Rng(0))
    _, s = play(s, 2, cmd("place_invited_marker", gangster="T01"))
    assert s.gs[[g for g in range(50)][0]] is not None and s.turn == 1


def test_np_r2_sequential_steps_run_in_ring_order() -> None:
    """NP-R2."""
    s = std(4, ring=3)
    assert s.order == (3, 0, 1, 2)
    _, s = step(at_stage(replace(s, hands=((),) * 4), Phase.FENCE, "draws"))
    assert s.order == (3, 0, 1, 2) and ENGINE.pending(s)[0].seat == 3


def test_np_x21_illegal_commands_are_refused_with_a_rule_id_and_change_nothing() -> None:
    """NP-X21."""
    s = std(4)
    for seat, command in ((1, PASS), (0, cmd("buy", count=1)), (9, PASS), (0, pb.Command())):
        with pytest.raises(RuleViolation) as exc:
            ENGINE.decide(s, seat, command, Rng(0))
        assert exc.value.code.startswith("NP-")


def test_determinize_is_consistent_with_the_view_and_never_reads_hidden_cards() -> None:
    from famiglia.testing.random_play import play_random

    states = []
    play_random(ENGINE, 4, 8, on_step=lambda b, st, a: states.append(a))
    for s in states[:: max(1, len(states) // 25)]:
        for seat in range(4):
            v = ENGINE.view(s, seat)
            d = ENGINE.determinize(v, seat, Rng(3))
            assert ENGINE.view(d, seat).SerializeToString(deterministic=True) == \
                v.SerializeToString(deterministic=True)
            assert d.hands[seat] == s.hands[seat]
            assert len(d.deck) == len(s.deck) and [len(h) for h in d.hands] == [len(h) for h in s.hands]


def test_np_x3_blackmail_own_and_omerta_need_a_free_coin() -> None:
    """NP-X3."""
    s = replace(at_stage(mark(std(4), "C01", {1: 1}), Phase.CREW, "action", pos=3, sweep=1), act=Act(3, "C01", 1))
    from famiglia.rules.nothing_personal.effects import EFFECTS, Ctx

    s = mark(s, "T01", {1: 1})
    assert EFFECTS["BLACKMAIL_OWN"].options(s, Ctx(1), 5)
    assert not EFFECTS["BLACKMAIL_OWN"].options(replace(s, bm_free=0), Ctx(1), 5)
    assert not EFFECTS["OMERTA"].options(replace(s, om_free=0), Ctx(1), 5)


def test_determinized_states_play_to_the_end() -> None:
    """NP-H9: a determinized open window still waits for someone; bots can roll out from any view."""
    import random

    from famiglia.engine import fold
    from famiglia.testing.random_play import choose_actor, play_random

    states = []
    play_random(ENGINE, 4, 21, {"keep_your_word": "true"}, on_step=lambda b, st, a: states.append(a))
    chooser = random.Random(0)
    for s in states[::40]:
        for seat in range(4):
            d = ENGINE.determinize(ENGINE.view(s, seat), seat, Rng(seat))
            n = 0
            while ENGINE.result(d) is None:
                picked = choose_actor(ENGINE, d, chooser)
                assert picked is not None, ENGINE.render_state(d)
                d = fold(ENGINE, ENGINE.decide(d, picked[0], picked[1], Rng(n)), d)
                n += 1
                assert n < ENGINE.info.max_steps


def test_np_x22_a_claim_whose_card_was_sold_meanwhile_lapses() -> None:
    """NP-X22, NP-D5."""
    s = replace(hand(hand(std(4), 1, "I76"), 2, "I77"), phase=Phase.FEDS, stage="window",
                window=Window("card", (1, 2), (None,) * 4))
    play_76 = cmd("play_for_influence", card="I76", placements=[pb.GroupPlacement(group=0, gangster="T01")])
    _, s = play(s, 1, play_76)
    _, s = play(s, 1, cmd("shakedown", cards=["I76"]))   # sold before the window resolves
    events, s = play(s, 2, PASS)
    assert of(events, "window_closed")[0].lapsed == [1] and not of(events, "claim_resolved")
    assert s.gs[0] is not None and "window_closed" in kinds(events)
    # The lapsed claim counts as a pass, so the round was all passes: the window closes for
    # good and the Feds go on to the arrests (no fresh answer round of the Feds' window; a
    # window that opens after is the next phase's).
    after_close = kinds(events)[kinds(events).index("window_closed") + 1:]
    assert after_close[0] == "step_advanced" and of(events, "step_advanced")[0].stage == "arrest"
    assert s.phase != Phase.FEDS


def test_np_h9_how_many_claims_lapsed_shows_in_no_version_and_no_event() -> None:
    """NP-H9, NP-D5, NP-X22: a window that resolves the same claim looks the same to a seat
    that passed, and to a spectator, whether the other seats passed or claimed and lapsed: the
    same events (so the same versions), each as they see it."""
    base = replace(hand(hand(hand(std(4), 1, "I76"), 3, "I77"), 2, "I78"), phase=Phase.FEDS,
                   stage="window", window=Window("card", (0, 1, 2, 3), (None,) * 4))

    def resolved(claimers: dict[int, str]) -> list:
        s = base
        events: list = []
        for seat in (0, 1, 2, 3):
            answer = cmd("play_for_influence", card=claimers[seat],
                         placements=[pb.GroupPlacement(group=0, gangster="T01")]) if seat in claimers else PASS
            events, s = play(s, seat, answer)
        assert of(events, "claim_resolved")[0].seat == 1
        return events

    alone = resolved({1: "I76"})
    with_lapses = resolved({1: "I76", 2: "I78", 3: "I77"})
    assert len(alone) == len(with_lapses)
    for viewer in (0, None):
        assert [ENGINE.redact(e, viewer) for e in alone] == [ENGINE.redact(e, viewer) for e in with_lapses]
    told = [ENGINE.redact(e, 3) for e in with_lapses]
    assert [e.claim_resolved.lapsed for e in told if e is not None and e.WhichOneof("kind") == "claim_resolved"] \
        == [[3]]


@pytest.mark.parametrize(("auto_at_opening", "auto_now"), [(False, True), (True, False)])
def test_np_d7_determinize_keeps_the_viewers_auto_pass_of_the_open_window(auto_at_opening: bool,
                                                                         auto_now: bool) -> None:
    """NP-D7: a standing auto-pass applies from the next answer round on, so a seat that changed it
    while a window is open still answers this one as it was set at the opening. Its view says so,
    and a determinized state asks it the same question: the same legal commands and clock."""
    s = hand(hand(std(4), 1, "I76"), 2, "I77")
    s = replace(s, phase=Phase.FEDS, stage="window",
                window=Window("card", (1, 2), (None,) * 4, (1,) if auto_at_opening else ()),
                autopass=tuple((auto_now, False) if i == 1 else (False, False) for i in range(4)))
    listed = ENGINE.legal_commands(s, 1, 32)
    answers = [c for c in listed if c.WhichOneof("kind") not in ENGINE.info.optional_commands]
    assert (answers == [PASS]) == auto_at_opening   # only pass where its auto-pass answers for it
    truth = [c.SerializeToString(deterministic=True) for c in listed]
    for seed in range(3):
        d = ENGINE.determinize(ENGINE.view(s, 1), 1, Rng(seed))
        assert ENGINE.view(d, 1).SerializeToString(deterministic=True) == \
            ENGINE.view(s, 1).SerializeToString(deterministic=True)
        assert [c.SerializeToString(deterministic=True) for c in ENGINE.legal_commands(d, 1, 32)] == truth
        assert pending_for(ENGINE, d, 1) == pending_for(ENGINE, s, 1)


def test_np_d1_a_match_sets_each_decisions_clock_and_an_auto_pass_keeps_its_own() -> None:
    """NP-D1: "Timeouts are configuration values": `timeouts.<decision>_s` sets each clock of a
    match (the others keep theirs); a standing auto-pass still runs out at once (NP-D7)."""
    from famiglia.rules.nothing_personal.config import CLOCKS
    from famiglia.testing.random_play import play_random

    own = {clock: 100 + i for i, clock in enumerate(CLOCKS)}
    options = {f"timeouts.{clock}_s": str(seconds) for clock, seconds in own.items()}
    seen: set[str] = set()

    def clock_of(state, label: str) -> str:
        if label == "window":
            return "card_window" if state.window.kind == "card" else "reroll_window"
        return label

    def check(before, step_, after) -> None:
        for p in ENGINE.pending(before):
            clock = clock_of(before, p.label)
            seen.add(clock)
            if before.window is not None and p.seat in before.window.auto:
                assert p.timeout_seconds == TIMEOUTS["auto_pass"]
            else:
                assert p.timeout_seconds == own[clock], (p, clock)

    for seed in range(3):
        play_random(ENGINE, 4, seed, options=options, on_step=check)
    assert {"setup", "commission", "card_window", "reroll_window", "action", "buy"} <= seen
    # a match that sets one clock keeps the rules' others; the defaults set nothing apart
    one = new(4, 1, **{"timeouts.commission_s": "5"})
    assert one.cfg.timeouts == (("commission", 5.0),)
    assert new(4, 1, **{f"timeouts.{c}_s": f"{TIMEOUTS[c]:g}" for c in CLOCKS}).cfg.timeouts == ()


def test_np_d1_a_view_shows_the_matchs_clocks_and_a_determinized_world_keeps_them() -> None:
    """NP-D1: a match's own clocks are among the options its View shows (every option, with the
    value it is played by), so a search bot's world dealt from a view asks with the same clocks."""
    s = new(4, 1, **{"timeouts.setup_s": "7", "timeouts.commission_s": "45"})
    shown = dict(ENGINE.view(s, 0).options)
    assert (shown["timeouts.setup_s"], shown["timeouts.commission_s"]) == ("7", "45")
    assert shown["timeouts.action_s"] == f"{TIMEOUTS['action']:g}"   # a clock left as the rules set it
    asked = pending_for(ENGINE, s, 0)
    assert asked and {p.timeout_seconds for p in asked} == {7.0}
    for seat in range(4):
        world = ENGINE.determinize(ENGINE.view(s, seat), seat, Rng(seat))
        assert pending_for(ENGINE, world, seat) == pending_for(ENGINE, s, seat)
        assert world.cfg == s.cfg


@pytest.mark.parametrize(("key", "value", "rule"), [
    ("timeouts.card_window_s", "0", "NP-D5"), ("timeouts.commission_s", "86401", "NP-D4"),
    ("timeouts.setup_s", "1.5", "NP-D3"), ("timeouts.vacancy_s", "-3", "NP-D14"),
    ("timeouts.auto_pass_s", "1", "NP-X21"),
])
def test_np_d1_a_clock_option_out_of_bounds_is_refused_with_its_rule(key: str, value: str, rule: str) -> None:
    """NP-D1: whole seconds, 1 to a day; the auto-pass clock is no option (NP-D7)."""
    with pytest.raises(RuleViolation) as exc:
        new(4, 1, **{key: value})
    assert exc.value.code == rule
