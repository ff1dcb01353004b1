"""evolve(state, event): one small function per event kind, never random (DESIGN "Engine contract")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from famiglia.engine import RuleViolation
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb

from .config import parse_options
from .data import (
    BLACKMAIL_COINS,
    FAMILY_MARKERS,
    GIDX,
    NEUTRAL_MARKERS,
    OMERTA_COINS,
    REROLL_PRICE,
    START_MONEY,
    marker_slots,
)
from .state import (
    Act,
    Contract,
    GState,
    Invite,
    Known,
    Offer,
    Phase,
    Roll,
    Ruling,
    State,
    Vacancy,
    Window,
    draft,
    replace,
)

Handler = Callable[[State, Any], State]


def _set(t: tuple, i: int, v: Any) -> tuple:
    return t[:i] + (v,) + t[i + 1:]


def _add(t: tuple, i: int, d: int) -> tuple:
    return t[:i] + (t[i] + d,) + t[i + 1:]


def _gs(s: State, gid: str, **kw: Any) -> tuple[GState, ...]:
    i = GIDX[gid]
    return _set(s.gs, i, replace(s.gs[i], **kw))


def _place(s: State, gid: str, owner: int, count: int) -> State:
    """The hottest evolver: the new GState is built directly rather than through `replace`."""
    i = GIDX[gid]
    gs = s.gs
    st = gs[i]
    after, d = draft(s)
    if owner == -1:
        d["neutral"] = s.neutral - count
        d["gs"] = gs[:i] + (GState(st.markers, st.neutral + count, st.coin, st.omerta, st.sideways),) + gs[i + 1:]
        return after
    m = st.markers
    supply = s.supply
    d["supply"] = supply[:owner] + (supply[owner] - count,) + supply[owner + 1:]
    d["gs"] = gs[:i] + (GState(m[:owner] + (m[owner] + count,) + m[owner + 1:], st.neutral, st.coin, st.omerta,
                               st.sideways),) + gs[i + 1:]
    return after


def _hand_remove(hand: tuple[str, ...], cards: Any) -> tuple[str, ...]:
    out = list(hand)
    for c in cards:
        out.remove(c)
    return tuple(out)


# -- setup ----------------------------------------------------------------------------------------
def _match_set_up(_: State | None, e: Any) -> State:
    n = e.seats
    cfg = parse_options(dict(e.options), n)
    zeros = (0,) * n
    return State(
        n=n, cfg=cfg, respect=zeros, money=(START_MONEY,) * n, supply=(FAMILY_MARKERS,) * n,
        neutral=NEUTRAL_MARKERS, bm_free=BLACKMAIL_COINS, om_free=OMERTA_COINS,
        gs=(GState(zeros),) * marker_slots(cfg.expansions), hands=((),) * n, tokens=(1 if cfg.reroll_tokens else 0,) * n,
        nonpass=zeros, offers_made=zeros, chats_made=zeros, ap_changes=zeros,
        autopass=((False, False),) * n,
    )


def _board_dealt(s: State, e: Any) -> State:
    return replace(s, board=tuple(e.spots))


def _gangster_deck_ordered(s: State, e: Any) -> State:
    return replace(s, gdeck=tuple(e.cards))


def _influence_deck_ordered(s: State, e: Any) -> State:
    """NP-S8, NP-X4: the new deck; a reshuffle takes its cards out of the discard pile."""
    cards = tuple(e.cards)
    moved = set(cards)
    return replace(s, deck=cards, discard=tuple(c for c in s.discard if c not in moved))


def _noop(s: State, e: Any) -> State:
    return s


def _cards_received(s: State, e: Any) -> State:
    cards = tuple(e.cards)
    seat = e.seat
    new, d = draft(s)
    d["deck"] = s.deck[len(cards):]
    d["hands"] = _set(s.hands, seat, tuple(sorted(s.hands[seat] + cards)))
    return new


def _ring(s: State, e: Any) -> State:
    after, d = draft(s)
    d["ring"] = e.seat
    return after


def _setup_marker_placed(s: State, e: Any) -> State:
    return replace(_place(s, e.gangster, e.seat, 1), idx=s.idx + 1)


# -- flow -------------------------------------------------------------------------------------------
def _round_began(s: State, e: Any) -> State:
    """NP-K2: passes cleared, Ante $0, once-per-round uses cleared."""
    return replace(s, round=e.round, passed=frozenset(), ante=0, free_used=frozenset())


_FIRST_STAGE = {
    Phase.SETUP: "marker", Phase.COMMISSION: "turn", Phase.CREW: "score_window", Phase.FENCE: "window",
    Phase.FEDS: "window", Phase.FAMILY: "window", Phase.FINAL: "score",
}


def _phase_began(s: State, e: Any) -> State:
    zeros = (0,) * s.n
    order = tuple(e.order)
    phase = e.phase
    after, d = draft(s)
    d.update(_PHASE_RESET)
    d["phase"] = phase
    d["stage"] = _FIRST_STAGE[phase]
    d["order"] = order
    d["turn"] = order[0] if phase == Phase.COMMISSION else -1
    d["nonpass"] = d["offers_made"] = d["chats_made"] = d["ap_changes"] = zeros
    d["offers"] = ()  # NP-M4: the offers still open lapse with their phase (`rounds.begin_phase`)
    return after


_NOTHING: frozenset = frozenset()
_PHASE_RESET = {"idx": 0, "passed": _NOTHING, "had_turn": _NOTHING, "ante": 0, "sweep": 0, "pos": 9,
                "promoted": _NOTHING, "window": None, "roll": None, "ruling": None, "act": None, "invite": None,
                "vacancy": None}


def _commission_turn_began(s: State, e: Any) -> State:
    new, d = draft(s)
    d["turn"] = e.seat
    d["stage"] = "turn"
    return new


def _commission_passed(s: State, e: Any) -> State:
    seat = e.seat
    new, d = draft(s)
    d["passed"] = s.passed | {seat}
    d["had_turn"] = s.had_turn | {seat}
    return new


def _ante_paid(s: State, e: Any) -> State:
    new, d = draft(s)
    d["money"] = _add(s.money, e.seat, -e.amount)
    d["ante"] = e.ante
    return new


def _card_played(s: State, e: Any) -> State:
    """The card leaves the hand face up; it reaches the discard pile once resolved (CardResolved)."""
    seat = e.seat
    card = e.card
    new, d = draft(s)
    d["hands"] = _set(s.hands, seat, _hand_remove(s.hands[seat], (card,)))
    d["table"] = s.table + (card,)
    if s.known:
        d["known"] = forget(s.known, (card,))
    if not e.window and s.phase == Phase.COMMISSION:
        d["had_turn"] = s.had_turn | {seat}
        d["nonpass"] = _add(s.nonpass, seat, 1)
    return new


def _card_resolved(s: State, e: Any) -> State:
    """NP-C15: face up to the discard pile once resolved."""
    new, d = draft(s)
    d["table"] = _hand_remove(s.table, (e.card,))
    d["discard"] = s.discard + (e.card,)
    return new


def _markers_placed(s: State, e: Any) -> State:
    return _place(s, e.gangster, e.owner, e.count)


def _markers_removed(s: State, e: Any) -> State:
    s = _place(s, e.gangster, e.owner, -e.count)
    if e.coin:
        s = replace(s, bm_free=s.bm_free + 1, gs=_gs(s, e.gangster, coin=-1))
    return s


def _marker_moved(s: State, e: Any) -> State:
    s = _place(_place(s, e.source, e.owner, -e.count), e.destination, e.owner, e.count)
    if e.coin:  # NP-C26: moved off its gangster, the coin returns
        s = replace(s, bm_free=s.bm_free + 1, gs=_gs(s, e.source, coin=-1))
    return s


def _coin_follows(s: State, gid: str, new_owner: int) -> State:
    """NP-C27, NP-C28: a swapped coin marker hands the coin over, or returns it if neutral."""
    if new_owner == -1:
        return replace(s, bm_free=s.bm_free + 1, gs=_gs(s, gid, coin=-1))
    return replace(s, gs=_gs(s, gid, coin=new_owner))


def _markers_swapped(s: State, e: Any) -> State:
    a, b = e.first, e.second
    if a.gangster != b.gangster:
        s = _place(_place(s, a.gangster, a.owner, -1), a.gangster, b.owner, 1)
        s = _place(_place(s, b.gangster, b.owner, -1), b.gangster, a.owner, 1)
    if a.coin:
        s = _coin_follows(s, a.gangster, b.owner)
    if b.coin:
        s = _coin_follows(s, b.gangster, a.owner)
    return s


def _blackmail_coin_placed(s: State, e: Any) -> State:
    return replace(s, bm_free=s.bm_free - 1, gs=_gs(s, e.gangster, coin=e.owner))


def _blackmail_coin_changed(s: State, e: Any) -> State:
    return _coin_follows(s, e.gangster, e.owner)


def _omerta_coin_placed(s: State, e: Any) -> State:
    return replace(s, om_free=s.om_free - 1, gs=_gs(s, e.gangster, omerta=True))


def _omerta_coin_returned(s: State, e: Any) -> State:
    return replace(s, om_free=s.om_free + 1, gs=_gs(s, e.gangster, omerta=False))


def _gangster_removed(s: State, e: Any) -> State:
    """NP-C29, NP-W38, NP-W41, NP-P3: markers and coins go home; the card to Prison or the Fishes."""
    gid = e.gangster
    st = s.gs[GIDX[gid]]
    supply = tuple(a + b for a, b in zip(s.supply, st.markers, strict=True))
    spot = s.board.index(gid)
    s = replace(
        s, supply=supply, neutral=s.neutral + st.neutral,
        bm_free=s.bm_free + (st.coin >= 0), om_free=s.om_free + st.omerta,
        gs=_set(s.gs, GIDX[gid], GState((0,) * s.n)), board=_set(s.board, spot, ""),
    )
    if e.to == "prison":
        return replace(s, prison=s.prison + (gid,))
    return replace(s, fishes=s.fishes + (gid,))


def _gangsters_exchanged(s: State, e: Any) -> State:
    a, b = e.first_spot, e.second_spot
    ga, gb = s.board[a], s.board[b]
    board = _set(_set(s.board, a, gb), b, ga)
    s = replace(s, board=board)
    return replace(s, gs=_gs(replace(s, gs=_gs(s, ga, sideways=e.sideways)), gb, sideways=e.sideways))


def _gangster_promoted(s: State, e: Any) -> State:
    gdeck, board = s.gdeck, s.board
    if e.from_spot == -1:
        gdeck = gdeck[1:]
    else:
        board = _set(board, e.from_spot, "")
    after, d = draft(s)
    d["gdeck"] = gdeck
    d["board"] = _set(board, e.to_spot, e.gangster)
    d["promoted"] = s.promoted | {e.gangster}
    d["vacancy"] = d["ruling"] = None
    return after


def _gangsters_turned_upright(s: State, e: Any) -> State:
    return replace(s, gs=tuple(replace(g, sideways=False) if g.sideways else g for g in s.gs))


def _respect_changed(s: State, e: Any) -> State:
    new, d = draft(s)
    d["respect"] = _set(s.respect, e.seat, e.respect)
    return new


def _money_changed(s: State, e: Any) -> State:
    new, d = draft(s)
    d["money"] = _set(s.money, e.seat, e.money)
    return new


def _cards_discarded(s: State, e: Any) -> State:
    seat = e.seat
    cards = tuple(e.cards)
    after, d = draft(s)
    d["hands"] = _set(s.hands, seat, _hand_remove(s.hands[seat], cards))
    d["discard"] = s.discard + cards
    if s.known:
        d["known"] = forget(s.known, cards)
    return after


def _die_rolled(s: State, e: Any) -> State:
    purpose = e.purpose
    if purpose == "rolloff":
        return s
    used = s.roll.free_whack_used if s.roll is not None else False
    new, d = draft(s)
    d["roll"] = Roll(e.die, e.face, purpose, e.actor, e.gangster, e.target, e.target_position, used)
    d["window"] = None
    d["stage"] = "roll"
    return new


def _crew_position_reached(s: State, e: Any) -> State:
    new, d = draft(s)
    sweep = d["sweep"] = e.sweep
    d["pos"] = e.position
    d["stage"] = "score_window" if sweep == 0 else "act_window"
    return new


def _window_opened(s: State, e: Any) -> State:
    """NP-D7: the auto-pass settings in force at opening hold for this answer round."""
    seats = tuple(e.seats)
    col = 0 if e.kind == "card" else 1
    auto = tuple([seat for seat in seats if s.autopass[seat][col]])
    new, d = draft(s)
    d["window"] = Window(e.kind, seats, (None,) * s.n, auto)
    return new


def _window_answered(s: State, e: Any) -> State:
    w = s.window
    assert w is not None
    answer = e.answer
    kind = answer.WhichOneof("kind")
    data = b"" if kind in (None, "pass") else answer.SerializeToString(deterministic=True)
    new, d = draft(s)
    d["window"] = Window(w.kind, w.seats, _set(w.answers, e.seat, data), w.auto)
    return new


def _window_gone(s: State, e: Any) -> State:
    new, d = draft(s)
    d["window"] = None
    return new


def _reroll_bought(s: State, e: Any) -> State:
    if e.means == pb.REROLL_PAY:
        after, d = draft(s)
        d["money"] = _add(s.money, e.seat, -REROLL_PRICE)
        return after
    if e.means == pb.REROLL_FREE_RING:
        return replace(s, free_used=s.free_used | {e.gangster})
    if e.means == pb.REROLL_FREE_WHACK:
        assert s.roll is not None
        return replace(s, roll=replace(s.roll, free_whack_used=True))
    return replace(s, tokens=_add(s.tokens, e.seat, -1))


def _tie_ruling_asked(s: State, e: Any) -> State:
    new, d = draft(s)
    d["ruling"] = Ruling(e.gangster, tuple(e.seats), e.use)
    return new


def _tie_ruled(s: State, e: Any) -> State:
    r = s.ruling
    assert r is not None
    new, d = draft(s)
    d["ruling"] = Ruling(r.gangster, r.seats, r.use, e.seat)
    return new


def _position_scored(s: State, e: Any) -> State:
    new, d = draft(s)
    d["ruling"] = None
    d["stage"] = "scored"
    return new


def _action_turn_began(s: State, e: Any) -> State:
    new, d = draft(s)
    d["act"] = Act(e.position, e.gangster, e.seat)
    d["ruling"] = None
    d["stage"] = "action"
    return new


def _action_turn_ended(s: State, e: Any) -> State:
    new, d = draft(s)
    d.update(_TURN_ENDED)
    return new


_TURN_ENDED = {"act": None, "roll": None, "ruling": None, "window": None, "stage": "act_done"}


def _omerta_observed(s: State, e: Any) -> State:
    return replace(s, om_free=s.om_free + 1, gs=_gs(s, e.gangster, omerta=False), stage="act_done")


def _act_staged(s: State, stage: int, proposal: bytes) -> State:
    """The action turn at `stage` with `proposal` (the Act built directly: once per action turn)."""
    a = s.act
    assert a is not None
    after, d = draft(s)
    d["act"] = Act(a.position, a.gangster, a.seat, a.refusals, proposal, stage)
    return after


def _action_chosen(s: State, e: Any) -> State:
    return _act_staged(s, 2, e.action.SerializeToString(deterministic=True))


def _blackmail_proposed(s: State, e: Any) -> State:
    return _act_staged(s, 1, e.action.SerializeToString(deterministic=True))


def _blackmail_answered(s: State, e: Any) -> State:
    assert s.act is not None
    if e.accept:
        return replace(s, act=replace(s.act, stage=2))
    return replace(s, act=replace(s.act, stage=0, proposal=b"", refusals=s.act.refusals + 1))


def _roll_resolved(s: State, e: Any) -> State:
    return replace(s, roll=None, ruling=None)


def _invite_asked(s: State, e: Any) -> State:
    return replace(s, invite=Invite(e.seat, e.by))


def _invited_marker_placed(s: State, e: Any) -> State:
    return replace(_place(s, e.gangster, e.seat, 1), invite=None)


def _fence_counted(s: State, e: Any) -> State:
    return replace(s, fence_counts=tuple(e.counts))


def _cards_bought(s: State, e: Any) -> State:
    after, d = draft(s)
    d["idx"] = s.idx + 1
    return after


def _vacancy_choice_asked(s: State, e: Any) -> State:
    return replace(s, vacancy=Vacancy(e.spot, e.decider, tuple(e.candidates)), ruling=None)


def _step_advanced(s: State, e: Any) -> State:
    new, d = draft(s)
    d["stage"] = e.stage
    d["pos"] = e.position
    order = e.order
    if order:
        d["order"] = tuple(order)
        d["idx"] = 0
    return new


# -- what a seat knows of other hands (NP-H7, NP-M8) ----------------------------------------------------
def forget(known: tuple[Known, ...], cards: Any) -> tuple[Known, ...]:
    """NP-H3: a card played or discarded is face up, so whoever knew where it was knows it left."""
    return tuple([k for k in known if k.card not in cards])


def learn(known: tuple[Known, ...], seat: int, holder: int, cards: Any, how: str) -> tuple[Known, ...]:
    """`seat` now knows `holder` holds `cards` (what it knew of those cards before is replaced)."""
    kept = [k for k in known if k.seat != seat or k.card not in cards]
    return (*kept, *(Known(seat, holder, c, how) for c in cards))


# -- negotiation -------------------------------------------------------------------------------------
def _offer_made(s: State, e: Any) -> State:
    deal = e.offer
    offer = Offer(e.id, getattr(e, "from"), deal.to, deal.SerializeToString(deterministic=True))
    new, d = draft(s)
    d["offers"] = s.offers + (offer,)
    d["offers_made"] = _add(s.offers_made, offer.frm, 1)
    if deal.give_cards:   # NP-M8: an offer holds only cards its maker holds, and its recipient saw them
        d["known"] = learn(s.known, deal.to, offer.frm, tuple(deal.give_cards), "offered")
    return new


def _offer_closed(s: State, e: Any) -> State:
    oid = e.id
    new, d = draft(s)
    d["offers"] = tuple([o for o in s.offers if o.id != oid])
    return new


def _trade_executed(s: State, e: Any) -> State:
    frm, to = getattr(e, "from"), e.to
    money = _add(_add(s.money, frm, e.want_money - e.give_money), to, e.give_money - e.want_money)
    s = replace(s, money=money)
    if e.handover_gangster:  # NP-M6: the two markers change places, so the coin changes owner
        st = s.gs[GIDX[e.handover_gangster]]
        s = replace(s, gs=_gs(s, e.handover_gangster, coin=to if st.coin == frm else frm))
    if s.known and (e.give_card_count or e.want_card_count):
        # NP-H7: a seat outside the trade sees only how many cards each side gave, not which, so
        # what it knew of a giving hand may have moved; the two parties follow every card
        # (trade_cards_moved)
        losers = {frm} if e.give_card_count else set()
        if e.want_card_count:
            losers.add(to)
        s = replace(s, known=tuple([k for k in s.known if k.seat in (frm, to) or k.holder not in losers]))
    return s


def _trade_cards_moved(s: State, e: Any) -> State:
    frm, to = getattr(e, "from"), e.to
    hf = _hand_remove(s.hands[frm], e.give_cards) + tuple(e.want_cards)
    ht = _hand_remove(s.hands[to], e.want_cards) + tuple(e.give_cards)
    give, want = tuple(e.give_cards), tuple(e.want_cards)
    known = forget(s.known, give + want) if s.known else ()
    if give:   # NP-H7: each party knows what it gave, and to whom
        known = learn(known, frm, to, give, "gave")
    if want:
        known = learn(known, to, frm, want, "gave")
    return replace(s, hands=_set(_set(s.hands, frm, tuple(sorted(hf))), to, tuple(sorted(ht))), known=known)


def _contract_made(s: State, e: Any) -> State:
    c = e.contract
    con = Contract(c.id, c.payer, c.payee, c.amount, c.condition, c.gangster, c.seat, c.action, c.target,
                   c.deadline)
    return replace(s, contracts=s.contracts + (con,), money=_add(s.money, c.payer, -c.amount))


def _contract_settled(s: State, e: Any) -> State:
    con = next(c for c in s.contracts if c.id == e.id)
    return replace(s, contracts=tuple(c for c in s.contracts if c.id != e.id),
                   money=_add(s.money, e.to, con.amount), broken=s.broken - {e.id})


def _chat_sent(s: State, e: Any) -> State:
    return replace(s, chats_made=_add(s.chats_made, getattr(e, "from"), 1))


def _auto_pass_set(s: State, e: Any) -> State:
    seat = e.seat
    new, d = draft(s)
    d["autopass"] = _set(s.autopass, seat, (e.cards, e.rerolls))
    d["ap_changes"] = _add(s.ap_changes, seat, 1)
    return new


def _roll_off(s: State, e: Any) -> State:
    """NP-T7: kept for the finished view (NP-H6: the dice are public), since the ranking alone
    does not say why tied seats rank as they do."""
    return replace(s, roll_offs=(*s.roll_offs, (tuple(e.seats), tuple(e.rolls))))


def _game_ended(s: State, e: Any) -> State:
    return replace(s, ranking=tuple(e.ranking), phase=Phase.OVER, stage="", offers=())


EVOLVERS: dict[str, Handler] = {
    "board_dealt": _board_dealt,
    "gangster_deck_ordered": _gangster_deck_ordered,
    "influence_deck_ordered": _influence_deck_ordered,
    "discard_reshuffled": _noop,
    "cards_drawn": _noop,
    "window_padding": _noop,
    "cards_received": _cards_received,
    "ring_holder_chosen": _ring,
    "ring_moved": _ring,
    "setup_marker_placed": _setup_marker_placed,
    "round_began": _round_began,
    "phase_began": _phase_began,
    "commission_turn_began": _commission_turn_began,
    "commission_passed": _commission_passed,
    "ante_paid": _ante_paid,
    "card_played": _card_played,
    "card_resolved": _card_resolved,
    "markers_placed": _markers_placed,
    "markers_removed": _markers_removed,
    "marker_moved": _marker_moved,
    "markers_swapped": _markers_swapped,
    "blackmail_coin_placed": _blackmail_coin_placed,
    "blackmail_coin_changed": _blackmail_coin_changed,
    "omerta_coin_placed": _omerta_coin_placed,
    "omerta_coin_returned": _omerta_coin_returned,
    "gangster_removed": _gangster_removed,
    "gangsters_exchanged": _gangsters_exchanged,
    "gangster_promoted": _gangster_promoted,
    "gangsters_turned_upright": _gangsters_turned_upright,
    "respect_changed": _respect_changed,
    "money_changed": _money_changed,
    "cards_discarded": _cards_discarded,
    "die_rolled": _die_rolled,
    "crew_position_reached": _crew_position_reached,
    "window_opened": _window_opened,
    "window_answered": _window_answered,
    "claim_resolved": _window_gone,
    "claim_lapsed": _noop,
    "window_closed": _window_gone,
    "reroll_bought": _reroll_bought,
    "tie_ruling_asked": _tie_ruling_asked,
    "tie_ruled": _tie_ruled,
    "position_scored": _position_scored,
    "action_turn_began": _action_turn_began,
    "action_turn_ended": _action_turn_ended,
    "omerta_observed": _omerta_observed,
    "action_chosen": _action_chosen,
    "blackmail_proposed": _blackmail_proposed,
    "blackmail_answered": _blackmail_answered,
    "move_resolved": _roll_resolved,
    "whack_resolved": _roll_resolved,
    "invite_asked": _invite_asked,
    "invited_marker_placed": _invited_marker_placed,
    "fence_counted": _fence_counted,
    "cards_bought": _cards_bought,
    "vacancy_choice_asked": _vacancy_choice_asked,
    "step_advanced": _step_advanced,
    "offer_made": _offer_made,
    "offer_closed": _offer_closed,
    "trade_executed": _trade_executed,
    "trade_cards_moved": _trade_cards_moved,
    "contract_made": _contract_made,
    "contract_settled": _contract_settled,
    "chat_sent": _chat_sent,
    "auto_pass_set": _auto_pass_set,
    "final_scored": _noop,
    "roll_off": _roll_off,
    "game_ended": _game_ended,
}


def evolve(state: State | None, event: Any) -> State:
    kind = event.WhichOneof("kind")
    if state is None:
        if kind != "match_set_up":
            raise RuleViolation("NP-S1", "the first event must set the match up")
        return _match_set_up(None, event.match_set_up)
    return EVOLVERS[kind](state, getattr(event, kind))
