"""Money and negotiation (NP-M, NP-V2..V5): shakedowns, trades, hand-overs, contracts, chat, auto-pass.

None of these advances the game or changes whose decision is pending (NP-R6); offers, chats and
auto-pass changes are capped per seat per phase (NP-M9, NP-M10).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from famiglia.chat_text import shows_nothing, unshowable
from famiglia.engine import RuleViolation
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb

from ..board import is_on_board
from ..data import CARD, CHAT_TEXT_MOST, GIDX, OFFER_IDS, ROUNDS, SHAKEDOWN_PRICE
from ..state import Offer, Phase, State
from ..tx import Tx

CONDITIONS = ("GANGSTER_GONE", "ACTION_BY", "NOT_TARGETED")
ACTION_KINDS = ("position", "gangster", "move", "whack", "pass")


def negotiable(s: State) -> None:
    """NP-R6, NP-K3: from the start of round 1 until the game ends."""
    if s.round < 1 or s.phase in (Phase.SETUP, Phase.FINAL, Phase.OVER):
        raise RuleViolation("NP-R6", "shakedowns and trades start with round 1 and end with the game")


def holds(hand: tuple[str, ...], cards: Any) -> bool:
    if len(cards) <= 1:   # the usual case, without counting
        return not cards or cards[0] in hand
    need = Counter(cards)
    have = Counter(hand)
    return all(have[c] >= k for c, k in need.items())


def shakedown(tx: Tx, seat: int, msg: Any, cmd: Any) -> None:
    """NP-M1: discard cards for $8 each; not an action, no Ante."""
    negotiable(tx.s)
    if not msg.cards or not holds(tx.s.hands[seat], msg.cards):
        raise RuleViolation("NP-M1", "shake down one or more cards from your hand")
    tx.emit_values("cards_discarded", seat, tuple(msg.cards), "shakedown")
    tx.money(seat, SHAKEDOWN_PRICE * len(msg.cards), "shakedown")


def _check_offer(s: State, seat: int, m: pb.OfferDeal) -> None:
    if s.offers_made[seat] >= s.cfg.offers_per_phase:
        raise RuleViolation("NP-M9", "no more offers this phase")
    if not 0 <= m.to < s.n or m.to == seat:
        raise RuleViolation("NP-M3", "offer to another seat")
    if m.give_money < 0 or m.want_money < 0:
        raise RuleViolation("NP-M3", "amounts are not negative")
    if m.give_money > s.money[seat] or not holds(s.hands[seat], m.give_cards):
        raise RuleViolation("NP-M8", "offer only what you hold")
    unknown = next((c for c in m.want_cards if c not in CARD), None)
    if unknown is not None:
        raise RuleViolation("NP-M3", f"no card {unknown[:40]!r} in the game to ask for")
    if len(set(m.want_cards)) < len(m.want_cards):  # each card is one of a kind: twice, never handed over
        raise RuleViolation("NP-M3", "ask for each card once")
    if m.handover_gangster:
        _check_handover(s, seat, m.to, m.handover_gangster)
    if m.HasField("contract"):
        _check_contract(s, seat, m)
    moves = m.give_money or m.want_money or m.give_cards or m.want_cards or m.handover_gangster
    if not moves and not m.HasField("contract"):
        raise RuleViolation("NP-M3", "an offer moves something")


def _check_handover(s: State, a: int, b: int, gid: str) -> None:
    """NP-M6: both seats have markers there, one of them the coin marker."""
    if not is_on_board(s, gid):
        raise RuleViolation("NP-M6", "the gangster must be on the board")
    st = s.gs[GIDX[gid]]
    if st.coin not in (a, b) or st.markers[a] < 1 or st.markers[b] < 1:
        raise RuleViolation("NP-M6", "both seats need markers there, one on the blackmail coin")
    if s.act is not None and s.act.stage == 1 and s.act.gangster == gid:
        # NP-R6: a trade never changes whose decision is pending, and the coin owner is deciding now.
        raise RuleViolation("NP-R6", "the coin is answering a blackmail proposal")


def _check_contract(s: State, seat: int, m: pb.OfferDeal) -> None:
    """NP-V2, NP-V3 (variant keep_your_word); a CANCEL names a contract of both seats (NP-V5)."""
    if not s.cfg.keep_your_word:
        raise RuleViolation("NP-V1", "binding contracts are a variant that is off")
    c = m.contract
    if c.condition == "CANCEL":
        con = next((x for x in s.contracts if x.id == c.id), None)
        if con is None or {con.payer, con.payee} != {seat, m.to}:
            raise RuleViolation("NP-V5", "a contract is cancelled by its two parties")
        return
    if {c.payer, c.payee} != {seat, m.to} or c.amount <= 0:
        raise RuleViolation("NP-V2", "a contract is between the two seats, for a positive amount")
    if c.condition not in CONDITIONS or c.gangster not in GIDX or (c.target and c.target not in GIDX):
        raise RuleViolation("NP-V3", "unknown condition or card")
    if c.condition in ("ACTION_BY", "NOT_TARGETED") and not 0 <= c.seat < s.n:
        raise RuleViolation("NP-V3", "the condition names a seat")
    if c.condition == "ACTION_BY" and c.action not in ACTION_KINDS:
        raise RuleViolation("NP-V3", "unknown action kind")
    if c.deadline and not s.round <= c.deadline <= ROUNDS:
        raise RuleViolation("NP-V2", "deadlines end by round 5")


def new_offer_id(tx: Tx) -> int:
    """NP-H7: an offer's id is drawn with the command's generator, not counted. A counter would tell
    the maker (and, through the public TradeExecuted and ContractMade ids, everyone) how many private
    offers other seats have made. Redrawn while it names an open offer or a live contract (a contract
    keeps its offer's id), so ids stay unique; the draw lands in the event, so replays reproduce it."""
    s = tx.s
    taken = {o.id for o in s.offers}
    taken.update(c.id for c in s.contracts)
    while True:
        oid = 1 + tx.rng.randrange(OFFER_IDS)
        if oid not in taken:
            return oid


def offer_deal(tx: Tx, seat: int, msg: Any, cmd: Any) -> None:
    """NP-M3, NP-M6, NP-V2; NP-H7: seen only by the two seats."""
    negotiable(tx.s)
    _check_offer(tx.s, seat, msg)
    tx.emit("offer_made", id=new_offer_id(tx), offer=msg, **{"from": seat})


def cancel_contract(tx: Tx, seat: int, msg: Any, cmd: Any) -> None:
    """NP-V5: a request to cancel is an offer to the other party (it counts for NP-M9)."""
    negotiable(tx.s)
    con = next((c for c in tx.s.contracts if c.id == msg.contract), None)
    if con is None or seat not in (con.payer, con.payee):
        raise RuleViolation("NP-V5", "not a contract of this seat")
    other = con.payee if seat == con.payer else con.payer
    deal = pb.OfferDeal(to=other, contract=pb.Contract(id=con.id, condition="CANCEL"))
    _check_offer(tx.s, seat, deal)
    tx.emit("offer_made", id=new_offer_id(tx), offer=deal, **{"from": seat})


def _offer(s: State, oid: int, seat: int) -> Offer:
    """The open offer `oid` of which `seat` is a party (NP-M4).

    NP-H7: offers are seen only by their two seats, so a seat that is not a party gets exactly the
    refusal it would get for an offer that does not exist; whether others are negotiating stays hidden."""
    o = next((o for o in s.offers if o.id == oid), None)
    if o is None or seat not in (o.frm, o.to):
        raise RuleViolation("NP-M4", f"no open offer {oid}")
    return o


_DEALS: dict[bytes, pb.OfferDeal] = {}


def deal(o: Offer) -> pb.OfferDeal:
    """The offer's deal, parsed once per content (a read-only shared message)."""
    m = _DEALS.get(o.deal)
    if m is None:
        if len(_DEALS) >= 4096:
            _DEALS.clear()
        m = _DEALS[o.deal] = pb.OfferDeal.FromString(o.deal)
    return m


def acceptable(s: State, o: Offer) -> bool:
    """NP-M4 as far as the recipient can tell: both seats' money (public, NP-M8), its own hand, the
    board and the contracts (public). Not whether the maker still holds the cards it offered: an
    offer does not bind them, and a trade the recipient is not party to shows only how many cards
    went (NP-H7), so the listing and the refusal never read the maker's hand (`accept_deal`)."""
    m = deal(o)
    if m.give_money > s.money[o.frm] or m.want_money > s.money[o.to]:
        return False
    if not holds(s.hands[o.to], m.want_cards):
        return False
    if m.handover_gangster:
        try:
            _check_handover(s, o.frm, o.to, m.handover_gangster)
        except RuleViolation:
            return False
    if m.HasField("contract"):
        c = m.contract
        if c.condition == "CANCEL":
            return any(x.id == c.id for x in s.contracts)
        payer_money = s.money[c.payer] - (m.give_money if c.payer == o.frm else m.want_money) \
            + (m.want_money if c.payer == o.frm else m.give_money)
        if c.amount > payer_money:
            return False
    return True


def accept_deal(tx: Tx, seat: int, msg: Any, cmd: Any) -> None:
    negotiable(tx.s)
    o = _offer(tx.s, msg.offer, seat)
    if o.to != seat:
        raise RuleViolation("NP-M4", "only the recipient accepts an offer")
    if not acceptable(tx.s, o):
        raise RuleViolation("NP-M4", "one side no longer holds what was offered")
    m = deal(o)
    if not holds(tx.s.hands[o.frm], m.give_cards):
        # NP-M4: the maker no longer holds every card it offered, so nothing moves. The recipient
        # could not know it before accepting (NP-H7), and learns it now as at a table: the deal
        # fails, told to the two seats alone (the maker learns only that it was accepted), and
        # the offer is closed, so an acceptance is answered once.
        tx.emit_values("offer_closed", o.id, "failed", o.to, o.frm)
        return
    tx.emit_values("offer_closed", o.id, "accepted", o.to, o.frm)
    if m.give_money or m.want_money or m.give_cards or m.want_cards or m.handover_gangster:
        tx.emit("trade_executed", id=o.id, to=o.to, give_money=m.give_money, give_card_count=len(m.give_cards),
                want_money=m.want_money, want_card_count=len(m.want_cards),
                handover_gangster=m.handover_gangster, **{"from": o.frm})
    if m.give_cards or m.want_cards:
        tx.emit("trade_cards_moved", id=o.id, to=o.to, give_cards=list(m.give_cards),
                want_cards=list(m.want_cards), **{"from": o.frm})
    if m.HasField("contract"):
        c = m.contract
        if c.condition == "CANCEL":
            con = next(x for x in tx.s.contracts if x.id == c.id)
            tx.emit("contract_settled", id=c.id, to=con.payer, how="cancelled")
        else:
            contract = pb.Contract()
            contract.CopyFrom(c)
            contract.id = o.id
            contract.deadline = c.deadline or tx.s.round
            tx.emit("contract_made", contract=contract)


def decline_deal(tx: Tx, seat: int, msg: Any, cmd: Any) -> None:
    negotiable(tx.s)
    o = _offer(tx.s, msg.offer, seat)
    if o.to != seat:
        raise RuleViolation("NP-M4", "only the recipient declines an offer")
    tx.emit_values("offer_closed", o.id, "declined", o.to, o.frm)


def withdraw_deal(tx: Tx, seat: int, msg: Any, cmd: Any) -> None:
    negotiable(tx.s)
    o = _offer(tx.s, msg.offer, seat)
    if o.frm != seat:
        raise RuleViolation("NP-M4", "only its maker withdraws an offer")
    tx.emit_values("offer_closed", o.id, "withdrawn", o.to, o.frm)


def send_chat(tx: Tx, seat: int, msg: Any, cmd: Any) -> None:
    """NP-M7: no game effect; NP-M10 cap. The text is shown to other seats as match chat's is,
    so it is held to the same checks (`famiglia.chat_text`): sent as written, a phone's "\r\n"
    a newline."""
    negotiable(tx.s)
    if tx.s.chats_made[seat] >= tx.s.cfg.chats_per_phase:
        raise RuleViolation("NP-M10", "no more chat messages this phase")
    to = sorted(set(msg.to)) or [i for i in range(tx.s.n) if i != seat]
    if any(not 0 <= i < tx.s.n or i == seat for i in to) or len(msg.text) > CHAT_TEXT_MOST:
        raise RuleViolation("NP-M7", f"chat to other seats, at most {CHAT_TEXT_MOST} characters")
    text = msg.text.replace("\r\n", "\n")
    if shows_nothing(text):
        raise RuleViolation("NP-M7", "a chat message needs text (something visible)")
    why = unshowable(text)
    if why:
        raise RuleViolation("NP-M7", why)
    tx.emit("chat_sent", to=to, text=msg.text, **{"from": seat})


def set_auto_pass(tx: Tx, seat: int, msg: Any, cmd: Any) -> None:
    """NP-D7: a private standing auto-pass, from the next answer round on; NP-M10 cap."""
    negotiable(tx.s)
    if tx.s.ap_changes[seat] >= tx.s.cfg.autopass_changes_per_phase:
        raise RuleViolation("NP-M10", "no more auto-pass changes this phase")
    if (msg.cards, msg.rerolls) == tx.s.autopass[seat]:
        raise RuleViolation("NP-D7", "the auto-pass is already set so")
    tx.emit_values("auto_pass_set", seat, msg.cards, msg.rerolls)
