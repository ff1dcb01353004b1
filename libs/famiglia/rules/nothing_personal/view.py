"""view() and visibility(): an allow-list of what one viewer may know (NP-H1..H10).

Public: the board, supplies, Respect, money, the ring, the flow, hand sizes, the discard pile,
deck sizes, rulings, blackmail proposals, contracts. Private: the viewer's own hand, its window
answer, its offers and auto-pass, and the cards it knows other seats to hold (what it gave them,
what they offered it) while that is still true. Never: other hands, deck orders, who a window still waits for.
Once the game is over everything is revealed (NP-H10).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from famiglia.engine import PUBLIC, SERVER_ONLY, Visibility, played_options, private_to
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb

from .config import CLOCKS, OPTIONS, Config
from .data import COLOURS, GIDX, TIMEOUTS
from .events import pass_command
from .state import Phase, State


def view(s: State, viewer: int | None) -> pb.View:
    over = s.phase == Phase.OVER
    me = -1 if viewer is None else viewer
    v = pb.View(
        seats=s.n, viewer=me, round=s.round, phase=s.phase, stage=s.stage, ring=s.ring,
        respect=s.respect, money=s.money, supply=s.supply, neutral_supply=s.neutral,
        blackmail_free=s.bm_free, omerta_free=s.om_free, spots=s.board, prison=s.prison, fishes=s.fishes,
        hand_sizes=[len(h) for h in s.hands], deck_size=len(s.deck), discard=s.discard, table=s.table,
        gangster_deck_size=len(s.gdeck), tokens=s.tokens, order=s.order, idx=s.idx, turn=s.turn,
        passed=sorted(s.passed), had_turn=sorted(s.had_turn), ante=s.ante, nonpass=s.nonpass,
        sweep=s.sweep, position=s.pos, promoted=sorted(s.promoted), free_reroll_used=sorted(s.free_used),
        fence_counts=s.fence_counts, ranking=s.ranking,
        colours=s.cfg.colours, broken=sorted(s.broken),
    )
    v.options.update(_options(s.cfg))
    for gid in s.board:
        if gid:
            st = s.gs[GIDX[gid]]
            v.gangsters.append(pb.GangsterView(id=gid, markers=st.markers, neutral=st.neutral, coin_owner=st.coin,
                                               omerta=st.omerta, sideways=st.sideways))
    if 0 <= me < s.n:
        v.hand.extend(s.hands[me])
        v.autopass_cards, v.autopass_rerolls = s.autopass[me]
    # NP-H7, NP-D7: offers, chats and auto-pass changes are private, so are their counts;
    # once the game has ended every viewer sees every seat's (NP-H10)
    if over or 0 <= me < s.n:
        for field, counts in (("offers_made", s.offers_made), ("chats_made", s.chats_made),
                              ("autopass_changes", s.ap_changes)):
            if over:
                getattr(v, field).extend(counts)
            else:
                own = [0] * s.n
                own[me] = counts[me]
                getattr(v, field).extend(own)
    w = s.window
    if w is not None:
        v.window = w.kind
        if 0 <= me < s.n and me in w.seats:
            v.window_asks_me = True
            v.window_auto_me = me in w.auto   # NP-D7: as set when the window opened, not now
            ans = w.answers[me]
            if ans is not None:
                v.window_answered_by_me = True
                v.my_answer.CopyFrom(pb.Command.FromString(ans) if ans else pass_command())
    r = s.roll
    if r is not None:
        v.die, v.face, v.roll_purpose, v.roll_actor = r.die, r.face, r.purpose, r.actor
        v.roll_gangster, v.roll_target, v.roll_target_position = r.gangster, r.target, r.target_pos
        v.roll_free_whack_used = r.free_whack_used
    v.ruled = -1
    if s.ruling is not None:
        v.ruling_gangster, v.ruling_use, v.ruled = s.ruling.gangster, s.ruling.use, s.ruling.answer
        v.ruling_seats.extend(s.ruling.seats)
    v.act_seat = -1
    if s.act is not None:
        a = s.act
        v.act_position, v.act_gangster, v.act_seat, v.act_refusals, v.act_stage = (
            a.position, a.gangster, a.seat, a.refusals, a.stage)
        if a.proposal:   # NP-H8: proposals are public
            v.proposal.CopyFrom(pb.Command.FromString(a.proposal))
    v.invite_seat = v.invite_by = -1
    if s.invite is not None:
        v.invite_seat, v.invite_by = s.invite.seat, s.invite.by
    v.vacancy_spot = v.vacancy_decider = -1
    if s.vacancy is not None:
        v.vacancy_spot, v.vacancy_decider = s.vacancy.spot, s.vacancy.decider
        v.vacancy_candidates.extend(s.vacancy.candidates)
    for o in s.offers:   # NP-H7
        if me in (o.frm, o.to):
            v.offers.append(pb.OpenOffer(id=o.id, offer=pb.OfferDeal.FromString(o.deal), **{"from": o.frm}))
    for c in s.contracts:   # NP-V5: public
        v.contracts.append(pb.Contract(id=c.id, payer=c.payer, payee=c.payee, amount=c.amount,
                                       condition=c.condition, gangster=c.gangster, seat=c.seat, action=c.action,
                                       target=c.target, deadline=c.deadline))
    for seats, rolls in s.roll_offs:   # NP-T7, NP-H6
        v.roll_offs.add(seats=seats, rolls=rolls)
    if s.known and 0 <= me < s.n and not over:   # NP-H7, NP-M8: what only this seat was shown
        for k in sorted(k for k in s.known if k.seat == me):
            v.known_cards.add(seat=k.holder, card=k.card, how=k.how)
    if over:   # NP-H10
        v.gangster_deck.extend(s.gdeck)
        v.influence_deck.extend(s.deck)
        v.hands_all.extend(f"{i}:{c}" for i, h in enumerate(s.hands) for c in h)
    return v


@lru_cache(maxsize=256)
def _options(c: Config) -> dict[str, str]:
    """Every option with the value the match is played by (`played_options`), read back from
    its Config: a clock as the rules set it unless the match set its own (NP-D1), no expansion
    set as "" (NP-V7), the rulebook's colours in seat order as "" (the View's `colours` names
    them, NP-S2). Once per Config (read only: the View copies it)."""
    clocks = dict(c.timeouts)
    return played_options(OPTIONS, {
        "commission_turns": str(c.commission_turns), "offers_per_phase": str(c.offers_per_phase),
        "chats_per_phase": str(c.chats_per_phase), "autopass_changes_per_phase": str(c.autopass_changes_per_phase),
        "arrest_associates": str(c.arrest_associates).lower(), "random_setup": str(c.random_setup).lower(),
        "reroll_tokens": str(c.reroll_tokens).lower(), "keep_your_word": str(c.keep_your_word).lower(),
        "expansions": ",".join(c.expansions),
        "colours": "" if c.colours == COLOURS[:len(c.colours)] else ",".join(c.colours),
        **{f"timeouts.{clock}_s": f"{clocks.get(clock, TIMEOUTS[clock]):g}" for clock in CLOCKS},
    })


_SERVER = frozenset({"gangster_deck_ordered", "influence_deck_ordered", "window_padding"})


#: NP-H9: a card or reroll window's answer is its seat's alone, and so is the fact that it was
#: given: the service keeps it out of the match's version until the window resolves
#: (GameInfo.held_events). A change of the private auto-pass (NP-D7) is not held: it may be a
#: seat's move on its own turn, after which the game waits for that seat again.
HELD = frozenset({"window_answered"})
#: ... and what pads them out when a command is made while a window is open (GameInfo.held_padding).
HELD_PADDING = "window_padding"


def visibility(event: pb.Event) -> Visibility:
    kind = str(event.WhichOneof("kind"))
    if kind in _SERVER:
        return SERVER_ONLY
    m: Any = getattr(event, kind)
    if kind in ("cards_received", "window_answered", "claim_lapsed", "auto_pass_set"):
        return private_to(m.seat)
    if kind in ("offer_made", "offer_closed", "trade_cards_moved"):
        to = m.offer.to if kind == "offer_made" else m.to
        return private_to(getattr(m, "from"), to)
    if kind == "chat_sent":
        return private_to(getattr(m, "from"), *m.to)
    return PUBLIC


def redact(event: pb.Event, viewer: int | None) -> pb.Event | None:
    """Visibility, plus NP-H9: the seats a window waits for are server-only, and a lapsed
    claim is told only to its own seat."""
    if not visibility(event).allows(viewer):
        return None
    kind = event.WhichOneof("kind")
    if kind == "window_opened":
        out = pb.Event()
        out.CopyFrom(event)
        del out.window_opened.seats[:]
        return out
    if kind in ("claim_resolved", "window_closed"):
        lapsed = getattr(event, kind).lapsed
        if not lapsed or list(lapsed) == [viewer]:
            return event
        out = pb.Event()
        out.CopyFrom(event)
        mine = getattr(out, kind).lapsed
        del mine[:]
        if viewer is not None and viewer in lapsed:
            mine.append(viewer)
        return out
    return event
