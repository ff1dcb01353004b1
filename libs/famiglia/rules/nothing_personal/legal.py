"""legal_commands: the open decision's commands first, then the optional ones (NP-R6, NP-M9, NP-M10).

Card plays, action abilities with many targets, shakedowns and offers are compound choices: the
listing is then a `Sampled`, of representative members, or with `rng` of drawn ones (sampler.py)."""

from __future__ import annotations

from collections.abc import Callable
from itertools import product
from typing import Any

from famiglia.engine import Draws, Sampled
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb

from . import crew, sampler
from .board import active
from .data import GIDX
from .decide.negotiation import acceptable
from .events import PASS, cmd
from .family import max_buy
from .flow import UNSET, decision
from .plays import play_options
from .state import Phase, State


def required(s: State, seat: int) -> list[pb.Command]:
    d = s.__dict__.get("_memo", UNSET)   # `decision` written out: asked once per listing
    if d is UNSET:
        d = decision(s)
    if d is None or seat not in d.seats:
        return []
    k = d.kind
    if k == "setup":
        return [_built(_setup_marker, g) for g in active(s)]
    if k == "commission":
        if s.nonpass[seat] >= s.cfg.commission_turns:   # NP-C33
            return [PASS]
        return [PASS, *play_options(s, seat, window=False)]
    if k == "window":
        assert s.window is not None
        if seat in s.window.auto:   # NP-D7: a standing auto-pass answers pass
            return [PASS]
        if s.window.kind == "card":
            return [PASS, *play_options(s, seat, window=True)]
        return [PASS, *[_built(_reroll, m) for m in crew.reroll_means(s, seat)]]
    if k == "action":
        return crew.action_options(s)
    if k == "blackmail":
        out = [_REFUSE]
        try:
            crew.check_action(s, crew.proposal(s))
            out.append(_GRANT)
        except Exception:   # noqa: BLE001 - an illegal proposal can only be refused (NP-X22)
            pass
        return out
    if k == "ruling":
        assert s.ruling is not None
        return [_built(_rule, i) for i in s.ruling.seats]
    if k == "invite":
        return [_built(_invited_marker, g) for g in active(s)]
    if k == "vacancy":
        assert s.vacancy is not None
        return [_built(_fill, g) for g in s.vacancy.candidates]
    if k == "buy":
        return [_built(_buy, n) for n in range(max_buy(s, seat) + 1)]
    return []


def _setup_marker(gid: str) -> pb.Command:
    return pb.Command(place_setup_marker=pb.PlaceSetupMarker(gangster=gid))


def _invited_marker(gid: str) -> pb.Command:
    return pb.Command(place_invited_marker=pb.PlaceInvitedMarker(gangster=gid))


def _reroll(means: int) -> pb.Command:
    return cmd("buy_reroll", means=means)


def _rule(seat: int) -> pb.Command:
    return pb.Command(rule_on_tie=pb.RuleOnTie(seat=seat))


def _fill(gid: str) -> pb.Command:
    return pb.Command(fill_vacancy=pb.FillVacancy(gangster=gid))


def _buy(n: int) -> pb.Command:
    return pb.Command(buy=pb.Buy(count=n))


_REFUSE = pb.Command(grant_blackmail=pb.GrantBlackmail(accept=False))
_GRANT = pb.Command(grant_blackmail=pb.GrantBlackmail(accept=True))


def optional(s: State, seat: int) -> list[pb.Command]:
    """A representative sample of the commands that never advance the game (NP-R6, NP-M).

    Answers to offers made to the seat are always listed. Of the seat's own initiatives (a shakedown,
    an offer, a hand-over, a contract, a withdrawal, an auto-pass change) one is listed, rotating with
    the state, so a random player negotiates without drowning the game in side deals. Shakedowns
    and offers are huge compound choices (any cards, any amounts); `decide` accepts all of them, and
    `legal_commands` with `rng` draws them (sampler.py).
    Chat (NP-M7) is free text with no game effect: `decide` accepts it, but it is not enumerated.
    """
    if s.round < 1 or s.phase in _NO_NEGOTIATION:
        return []
    out: list[pb.Command] = []
    # The seat's own initiatives are counted first and only the chosen one is built: in listing
    # order a shakedown, withdrawals, a gift of money, a hand-over, a contract, an auto-pass change.
    withdraws: list[int] = []
    offers = s.offers
    if offers:
        for o in offers:
            if o.to == seat:
                if acceptable(s, o):
                    out.append(_built(_accept, o.id))
                out.append(_built(_decline, o.id))
            elif o.frm == seat:
                withdraws.append(o.id)
    hand = s.hands[seat]
    money = s.money[seat]
    cfg = s.cfg
    autopass = s.ap_changes[seat] < cfg.autopass_changes_per_phase
    count = (1 if hand else 0) + len(withdraws) + (1 if autopass else 0)
    to = -1
    gift = False
    handover = contract = ""
    if s.offers_made[seat] < cfg.offers_per_phase:
        n = s.n
        to = (seat + 1 + s.round) % n
        if to == seat:
            to = (to + 1) % n
        if money >= 1:
            gift = True
            count += 1
            if cfg.keep_your_word:   # NP-V2
                contract = s.board[8]
                if contract:
                    count += 1
        coins = _coins(s)
        if coins:
            act = s.act
            for gid, coin in coins:   # NP-M6: a blackmail hand-over
                if coin == seat and s.gs[GIDX[gid]].markers[to] >= 1 and not (
                        act is not None and act.stage == 1 and act.gangster == gid):
                    handover = gid
                    count += 1
                    break
    if not count:
        return out
    k = (s.idx + s.pos + len(s.discard) + len(hand) + money) % count
    if hand:
        if not k:
            out.append(_built(_shakedown, hand[0]))
            return out
        k -= 1
    if k < len(withdraws):
        out.append(_built(_withdraw, withdraws[k]))
        return out
    k -= len(withdraws)
    if gift:
        if not k:
            out.append(_built(_give_money, to))
            return out
        k -= 1
    if handover:
        if not k:
            out.append(_built(_handover, to, handover))
            return out
        k -= 1
    if contract and k == 0:
        out.append(_built(_contract, seat, to, contract))
        return out
    cards, rerolls = s.autopass[seat]
    out.append(_built(_autopass, not cards, rerolls))
    return out


# The blackmail coins of the last board and markers seen: (gangster, owner) in spot order. Keyed by the
# identity of both tuples (held here, so the identities stay valid); most listings share them. One
# tuple, swapped whole, so concurrent readers never see a mixed entry.
_LAST_COINS: list[tuple[Any, Any, tuple[tuple[str, int], ...]]] = [((), (), ())]


def _coins(s: State) -> tuple[tuple[str, int], ...]:
    board, gs, coins = _LAST_COINS[0]
    if board is s.board and gs is s.gs:
        return coins
    gs = s.gs
    coins = tuple([(g, gs[GIDX[g]].coin) for g in s.board if g and gs[GIDX[g]].coin >= 0])
    _LAST_COINS[0] = (s.board, gs, coins)
    return coins


# Optional commands are shared, read-only messages built once per content (the contract allows it).
_NO_NEGOTIATION = frozenset({Phase.SETUP, Phase.FINAL, Phase.OVER})
_BUILT: dict[tuple, pb.Command] = {}


def _built(build: Callable[..., pb.Command], *args: Any) -> pb.Command:
    key = (build,) + args   # (a tuple concatenation: cheaper than unpacking into a new tuple)
    command = _BUILT.get(key)
    if command is None:
        if len(_BUILT) >= 20_000:
            _BUILT.clear()
        command = _BUILT[key] = build(*args)
    return command


def _shakedown(card: str) -> pb.Command:
    return pb.Command(shakedown=pb.Shakedown(cards=[card]))


def _accept(oid: int) -> pb.Command:
    return pb.Command(accept_deal=pb.AcceptDeal(offer=oid))


def _decline(oid: int) -> pb.Command:
    return pb.Command(decline_deal=pb.DeclineDeal(offer=oid))


def _withdraw(oid: int) -> pb.Command:
    return pb.Command(withdraw_deal=pb.WithdrawDeal(offer=oid))


def _give_money(to: int) -> pb.Command:
    return pb.Command(offer_deal=pb.OfferDeal(to=to, give_money=1))


def _handover(to: int, gid: str) -> pb.Command:
    return pb.Command(offer_deal=pb.OfferDeal(to=to, handover_gangster=gid))


def _contract(seat: int, to: int, capo: str) -> pb.Command:
    c = pb.Contract(payer=seat, payee=to, amount=1, condition="GANGSTER_GONE", gangster=capo)
    return pb.Command(offer_deal=pb.OfferDeal(to=to, contract=c))


def _autopass(cards: bool, rerolls: bool) -> pb.Command:
    return pb.Command(set_auto_pass=pb.SetAutoPass(cards=cards, rerolls=rerolls))


def legal_commands(s: State, seat: int, limit: int | None = None, *,
                   rng: Draws | None = None) -> list[pb.Command]:
    """The representative listing; with `rng`, the compound choices' members drawn from all of them."""
    if limit is not None and limit < 0:  # at most a negative number: none
        return []
    if rng is not None:
        return _drawn(s, seat, limit, rng)
    out = required(s, seat)   # always a fresh list
    n = len(out)
    out += optional(s, seat)
    if limit and len(out) > limit:
        out = out[:limit]
    return Sampled(out) if _negotiating(s, seat) or (n > 1 and _compound(s)) else out


def _compound(s: State) -> bool:
    """Whether the open decision's listing (of more than a pass) samples a compound choice: card
    plays (NP-C2, NP-D5) or an action ability with many targets (NP-W14)."""
    d = decision(s)
    assert d is not None
    if d.kind == "commission":
        return True
    if d.kind == "window":
        assert s.window is not None
        return s.window.kind == "card"
    return d.kind == "action" and sampler.compound_abilities(s)


def _negotiating(s: State, seat: int) -> bool:
    """Whether the seat has an initiative (NP-R6): a shakedown, an offer (a request is always possible,
    NP-H7), a withdrawal or an auto-pass change. `optional` lists one of them, `_drawn` draws them."""
    if s.round < 1 or s.phase in _NO_NEGOTIATION:
        return False
    cfg = s.cfg
    return (bool(s.hands[seat]) or s.offers_made[seat] < cfg.offers_per_phase
            or s.ap_changes[seat] < cfg.autopass_changes_per_phase or any(o.frm == seat for o in s.offers))


def _drawn(s: State, seat: int, limit: int | None, rng: Draws) -> list[pb.Command]:
    """`legal_commands` with `rng`: the small choices whole, the compound ones drawn (sampler.py).
    A `Sampled` exactly when the representative listing is one."""
    out = required(s, seat)
    compound = len(out) > 1 and _compound(s)
    families: list[sampler.Family] = []
    if compound:
        d = decision(s)
        assert d is not None
        if d.kind == "action":
            out = sampler.action_small(s)
            families = sampler.ability_families(s)
        else:   # a Commission turn or a card window: pass, or any play
            out = [PASS]
            families = sampler.play_families(s, seat, window=d.kind == "window")
    if s.round >= 1 and s.phase not in _NO_NEGOTIATION:
        out += _answers(s, seat)
    negotiating = _negotiating(s, seat)
    initiatives: list[sampler.Family] = []
    if negotiating:
        initiatives = sampler.negotiation_families(s, seat)
        few = sampler.listed(_few(s, seat))
        if few is not None:
            initiatives.append(few)
    out = sampler.sample(out, families, initiatives, limit, rng)
    return Sampled(out) if compound or negotiating else out


def _answers(s: State, seat: int) -> list[pb.Command]:
    """Answers to the offers made to the seat (NP-M4), as `optional` lists them."""
    out = []
    for o in s.offers:
        if o.to == seat:
            if acceptable(s, o):
                out.append(_built(_accept, o.id))
            out.append(_built(_decline, o.id))
    return out


def _few(s: State, seat: int) -> list[pb.Command]:
    """The seat's initiatives of few members: withdrawals (NP-M4), auto-pass changes (NP-D7, NP-M10)
    and requests to cancel a contract (NP-V5)."""
    out = [_built(_withdraw, o.id) for o in s.offers if o.frm == seat]
    cfg = s.cfg
    if s.ap_changes[seat] < cfg.autopass_changes_per_phase:
        out += [_built(_autopass, c, r) for c, r in product((False, True), repeat=2) if (c, r) != s.autopass[seat]]
    if cfg.keep_your_word and s.offers_made[seat] < cfg.offers_per_phase:
        out += [_built(_cancel, c.id) for c in s.contracts if seat in (c.payer, c.payee)]
    return out


def _cancel(cid: int) -> pb.Command:
    return pb.Command(cancel_contract=pb.CancelContract(contract=cid))
