"""determinize(view, seat, rng): a full State consistent with one seat's View (ISMCTS bots).

Everything public is read from the view; other hands and both deck orders are sampled from the
cards the seat cannot see. It never reads the true state.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache, lru_cache
from itertools import filterfalse

from famiglia.engine import Rng
from famiglia.engine.readings import ViewReadings
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb

from .config import Config, parse_options
from .data import GIDX, INFLUENCE, marker_slots, match_gangsters
from .flow import eligible
from .state import Act, GState, Invite, Known, Offer, Phase, Roll, Ruling, State, Vacancy, Window
from .state import Contract as ContractRow


def determinize(v: pb.View, seat: int, rng: Rng) -> State:
    return _deal(_read(v, seat), seat, rng)


@dataclass(frozen=True, slots=True)
class _Table:
    """What the View fixes for one seat: every public field as state values, and the cards the
    seat cannot see (in id order) with how many go to each hand and deck."""

    n: int
    over: bool
    unseen: tuple[str, ...]
    hand_sizes: tuple[int, ...]
    deck_size: int
    unseen_gangsters: tuple[str, ...]
    gangster_deck_size: int
    hands: tuple[tuple[str, ...], ...]
    """Every hand once over; else only the seat's own is read from here."""
    offered: tuple[tuple[str, ...], ...]
    """Per other seat, the unseen cards the seat knows it to hold (`View.known_cards`: what the seat
    gave it, what it offered the seat, NP-H7, NP-M8): dealt to that hand first. An open offer's
    cards no longer known there are not: an offer does not bind them (NP-M4), and which cards its
    maker gave in a later trade is hidden (NP-H7), so they are dealt like any unseen card."""
    fields: dict[str, object]
    """Every other State field."""



@lru_cache(maxsize=64)
def _config(options: tuple[tuple[str, str], ...], n: int) -> Config:
    """`parse_options`, once per options (a frozen Config; a refused option raises each time)."""
    return parse_options(dict(options), n)


@lru_cache(maxsize=16)
def _marker_slots(expansions: tuple[str, ...]) -> int:
    return marker_slots(expansions)


_GSTATES: dict[tuple[tuple[int, ...], int, int, bool, bool], GState] = {}


def _gstate(fields: tuple[tuple[int, ...], int, int, bool, bool]) -> GState:
    """One frozen GState per distinct marker row: a frozen dataclass's __init__ sets each
    field through object.__setattr__, and most rows repeat from View to View."""
    known = _GSTATES.get(fields)
    if known is None:
        if len(_GSTATES) >= 4096:
            _GSTATES.clear()
        known = _GSTATES[fields] = GState(*fields)
    return known


@cache
def _influence_ids() -> tuple[str, ...]:
    return tuple(sorted(c.id for c in INFLUENCE))


@lru_cache(maxsize=16)
def _gangster_ids(expansions: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted(g.id for g in match_gangsters(expansions)))


def _read_view(v: pb.View, seat: int) -> _Table:
    n = v.seats
    cfg = _config(tuple((k, val) for k, val in v.options.items() if k != "colours" or val), n)
    gs = [GState((0,) * n)] * _marker_slots(cfg.expansions)   # NP-V7: expansion cards have slots too
    for g in v.gangsters:
        gs[GIDX[g.id]] = _gstate((tuple(g.markers), g.neutral, g.coin_owner, g.omerta, g.sideways))
    known = set(v.discard) | set(v.hand) | set(v.table)
    over = v.phase == Phase.OVER
    hands: list[tuple[str, ...]] = [()] * n
    unseen: tuple[str, ...] = ()
    unseen_g: tuple[str, ...] = ()
    if over:   # NP-H10: everything is revealed
        per: list[list[str]] = [[] for _ in range(n)]
        for item in v.hands_all:
            owner, card = item.split(":")
            per[int(owner)].append(card)
        hands = [tuple(sorted(h)) for h in per]
        deck = tuple(v.influence_deck)
        gdeck = tuple(v.gangster_deck)
    else:
        unseen = tuple(filterfalse(known.__contains__, _influence_ids()))
        if 0 <= seat < n:
            hands[seat] = tuple(sorted(v.hand))
        seen_g = set(v.spots) | set(v.prison) | set(v.fishes)
        unseen_g = tuple(filterfalse(seen_g.__contains__, _gangster_ids(cfg.expansions)))
        deck = gdeck = ()
    offered: list[tuple[str, ...]] = [()] * n
    told: tuple[Known, ...] = ()
    if not over:
        placed: set[str] = set()
        held: list[tuple[int, tuple[str, ...]]] = [(k.seat, (k.card,)) for k in v.known_cards]
        for frm, give in held:
            if frm != seat and 0 <= frm < n:
                cards = [c for c in give if c in unseen and c not in placed]
                cards = cards[: max(0, v.hand_sizes[frm] - len(offered[frm]))]
                placed.update(cards)
                offered[frm] += tuple(cards)
        told = tuple(Known(seat, k.seat, k.card, k.how) for k in v.known_cards)
    window = None
    if v.window:
        answers: list[bytes | None] = [None] * n
        seats: tuple[int, ...] = ()
        if v.window_asks_me:
            seats = (seat,)
            if v.window_answered_by_me:
                kind = v.my_answer.WhichOneof("kind")
                answers[seat] = b"" if kind == "pass" else v.my_answer.SerializeToString(deterministic=True)
        # NP-D7: the viewer's own auto-pass as it was when the window opened (a change since
        # applies from the next answer round on), not its setting now
        window = Window(v.window, seats, tuple(answers), seats if v.window_auto_me else ())
    roll = Roll(v.die, v.face, v.roll_purpose, v.roll_actor, v.roll_gangster, v.roll_target,
                v.roll_target_position, v.roll_free_whack_used) if v.die else None
    ruling = Ruling(v.ruling_gangster, tuple(v.ruling_seats), v.ruling_use, v.ruled) if v.ruling_gangster else None
    act = None
    if v.act_seat >= 0:
        prop = v.proposal.SerializeToString(deterministic=True) if v.HasField("proposal") else b""
        act = Act(v.act_position, v.act_gangster, v.act_seat, v.act_refusals, prop, v.act_stage)
    offers = tuple(Offer(o.id, getattr(o, "from"), o.offer.to, o.offer.SerializeToString(deterministic=True))
                   for o in v.offers)
    contracts = tuple(ContractRow(c.id, c.payer, c.payee, c.amount, c.condition, c.gangster, c.seat, c.action,
                                  c.target, c.deadline) for c in v.contracts)
    autopass = [(False, False)] * n
    if 0 <= seat < n:
        autopass[seat] = (v.autopass_cards, v.autopass_rerolls)
    return _Table(
        n=n, over=over, unseen=unseen, hand_sizes=tuple(v.hand_sizes), deck_size=v.deck_size,
        unseen_gangsters=unseen_g, gangster_deck_size=v.gangster_deck_size, hands=tuple(hands),
        offered=tuple(offered),
        fields=dict(
            n=n, cfg=cfg, round=v.round, phase=v.phase, stage=v.stage, ring=v.ring,
            respect=tuple(v.respect), money=tuple(v.money), supply=tuple(v.supply), neutral=v.neutral_supply,
            bm_free=v.blackmail_free, om_free=v.omerta_free, board=tuple(v.spots), gs=tuple(gs),
            prison=tuple(v.prison), fishes=tuple(v.fishes), deck=deck,
            discard=tuple(v.discard), table=tuple(v.table),
            gdeck=gdeck, tokens=tuple(v.tokens), order=tuple(v.order), idx=v.idx, turn=v.turn,
            passed=frozenset(v.passed), had_turn=frozenset(v.had_turn), ante=v.ante, nonpass=tuple(v.nonpass),
            sweep=v.sweep, pos=v.position, promoted=frozenset(v.promoted), free_used=frozenset(v.free_reroll_used),
            fence_counts=tuple(v.fence_counts), window=window, roll=roll, ruling=ruling, act=act,
            invite=Invite(v.invite_seat, v.invite_by) if v.invite_seat >= 0 else None,
            vacancy=Vacancy(v.vacancy_spot, v.vacancy_decider, tuple(v.vacancy_candidates))
            if v.vacancy_spot >= 0 else None,
            offers=offers,
            offers_made=tuple(v.offers_made) or (0,) * n, chats_made=tuple(v.chats_made) or (0,) * n,
            ap_changes=tuple(v.autopass_changes) or (0,) * n, autopass=tuple(autopass), contracts=contracts,
            broken=frozenset(v.broken), ranking=tuple(v.ranking),
            roll_offs=tuple((tuple(r.seats), tuple(r.rolls)) for r in v.roll_offs), known=told,
        ),
    )


def _deal(table: _Table, seat: int, rng: Rng) -> State:
    """One world: the unseen Influence cards dealt to the other hands and the deck, the unseen
    gangsters to theirs, with the draws (and in the order) the sample has always used."""
    fields = table.fields
    n = table.n
    if table.over:
        state = State(hands=table.hands, **fields)  # type: ignore[arg-type]
    else:
        hands = list(table.hands)
        unseen = rng.shuffled(table.unseen)
        offered = table.offered
        if any(offered):   # NP-H7, NP-M8: cards the seat knows another hand to hold are dealt there
            held = {c for cards in offered for c in cards}
            unseen = [c for c in unseen if c not in held]
        at = 0
        for i in range(n):
            if i != seat:
                k = table.hand_sizes[i] - len(offered[i])
                hands[i] = tuple(sorted((*offered[i], *unseen[at:at + k])))
                at += k
        deck = tuple(unseen[at:at + table.deck_size])
        gdeck = tuple(rng.shuffled(table.unseen_gangsters)[: table.gangster_deck_size])
        state = State(**dict(fields, hands=tuple(hands), deck=deck, gdeck=gdeck))  # type: ignore[arg-type]
    window = state.window
    if window is not None:
        # Who else is still asked is hidden (NP-H9): sample it as every publicly eligible seat.
        others = [i for i in eligible(state, window.kind) if i != seat]
        if not others and (not window.seats or window.answers[seat] is not None):
            # The window is open, so someone is still asked: whoever it is may have emptied its hand.
            others = [i for i in range(n) if i != seat]
        window = window._replace(seats=tuple(sorted(set(window.seats) | set(others))))
        state = replace(state, window=window)
    return state


_read = ViewReadings(_read_view)  # read once per (View, seat)
