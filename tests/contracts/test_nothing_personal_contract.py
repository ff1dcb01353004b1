"""Nothing Personal binds the engine contract (STYLE.md, "The engine contract suite")."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from itertools import islice, permutations, product
from typing import Any

from hypothesis import strategies as st

from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb
from famiglia.rules.nothing_personal import ENGINE
from famiglia.rules.nothing_personal.data import CARD, GIDX, POSITIONS, G
from tests.contracts.engine_contract import EngineContract


def perturb_hidden(state: Any, viewer: int | None, rng: random.Random) -> Any:
    """Other hands re-dealt from the cards the viewer cannot see, and both decks reordered (NP-H1, NP-H2);
    a card the viewer knows another seat to hold stays there, and what other seats know of hands is
    theirs alone (NP-H7, NP-M8: `State.known`)."""
    if state.phase == "over":   # NP-H10: once the game has ended everything is revealed
        return state
    hidden = [i for i in range(state.n) if i != viewer]
    mine = tuple(k for k in state.known if k.seat == viewer)
    kept = {i: [k.card for k in mine if k.holder == i] for i in hidden}
    stays = {c for cards in kept.values() for c in cards}
    pool = [c for i in hidden for c in state.hands[i] if c not in stays] + list(state.deck)
    rng.shuffle(pool)
    hands = list(state.hands)
    for i in hidden:
        k = len(state.hands[i]) - len(kept[i])
        hands[i], pool = tuple(sorted(kept[i] + pool[:k])), pool[k:]
    gdeck = list(state.gdeck)
    rng.shuffle(gdeck)
    # NP-H7, NP-D7: other seats' offers, chats and auto-pass settings are private too
    secret = [i for i in range(state.n) if i != viewer]
    counts = {name: list(getattr(state, name)) for name in ("offers_made", "chats_made", "ap_changes")}
    autopass = list(state.autopass)
    for i in secret:
        for values in counts.values():
            values[i] = rng.randrange(3)
        autopass[i] = (rng.random() < 0.5, rng.random() < 0.5)
    offers = tuple(o for o in state.offers if viewer in (o.frm, o.to))
    return replace(state, hands=tuple(hands), deck=tuple(pool), gdeck=tuple(gdeck), offers=offers, known=mine,
                   offers_made=tuple(counts["offers_made"]), chats_made=tuple(counts["chats_made"]),
                   ap_changes=tuple(counts["ap_changes"]), autopass=tuple(autopass))


# -- the brute force over the compound choices -------------------------------------------------------------
RAW_MOST = 500
"""Candidates tried at most: a state with more yields none (the coverage check then skips it)."""
SMALL_HAND = 3
SMALL_GIFTS = 24

_NO_TARGETS = frozenset({"TAKE_RING", "DRAW_1", "DRAW_2", "SKIM_5", "TAX_EACH_2", "TAKE_6", "DICE_MONEY",
                         "DICE_RESPECT", "DOUBLE_OR_NOTHING"})
_ON_ACTIVE = frozenset({"PLACE_OWN_1", "PLACE_OWN_2", "OMERTA", "BLACKMAIL_OWN"})
_ON_SEAT = frozenset({"STEAL_3", "SQUEEZE_4", "INVITE_1"})


def compound_candidates(state: Any, seat: int) -> list[Any]:
    """Every command of Nothing Personal's compound kinds that `seat` could try now, legal or not:
    card plays (each card, group set in each order, targets its icons match, every Ante the Commission
    allows, effect targets), OR effects, discards for one and ability targets (Table F); and of the
    seat's initiatives a slice, where it is small: shakedowns (any cards, any order) of a hand of at
    most SMALL_HAND cards, gifts of money alone while they are at most SMALL_GIFTS, and hand-overs
    alone (offers of every shape are far too many; larger slices would leave the coverage check
    nothing to look at). Commands are canonical: a field the rules do not read is unset. None when
    there are more than RAW_MOST."""
    found = list(islice(_candidates(state, seat), RAW_MOST + 1))
    return found if len(found) <= RAW_MOST else []


def _negotiable(state: Any) -> bool:
    return state.round >= 1 and state.phase not in ("setup", "final", "over")   # NP-R6, NP-K3


def _candidates(state: Any, seat: int) -> Iterator[Any]:
    labels = {p.label for p in ENGINE.pending(state) if p.seat == seat}
    if "commission" in labels:
        yield from _plays(state, seat, window=False)
    if "window" in labels and state.window.kind == "card":
        yield from _plays(state, seat, window=True)
    if "action" in labels:
        a = state.act
        for code, own in ((POSITIONS[a.position].ability, False), (G[a.gangster].ability, True)):
            for t in _targets(state, seat, code):
                yield pb.Command(use_ability=pb.UseAbility(gangster_ability=own, targets=t))
    if _negotiable(state):
        hand = state.hands[seat]
        for k in range(1, len(hand) + 1 if len(hand) <= SMALL_HAND else 1):
            for cards in permutations(hand, k):
                yield pb.Command(shakedown=pb.Shakedown(cards=cards))
        money = state.money[seat] if (state.n - 1) * state.money[seat] <= SMALL_GIFTS else 0
        for to in range(state.n):
            if to != seat:
                for m in range(1, money + 1):
                    yield pb.Command(offer_deal=pb.OfferDeal(to=to, give_money=m))
                for g in state.board:
                    if g:
                        yield pb.Command(offer_deal=pb.OfferDeal(to=to, handover_gangster=g))


def _matches(state: Any, gid: str, icon: str) -> bool:
    """NP-C5, NP-C6, read from Table G."""
    if icon.startswith("pos"):
        return state.board[int(icon[3:]) - 1] == gid
    return icon == "any" or icon in G[gid].types


def _plays(state: Any, seat: int, window: bool) -> Iterator[Any]:
    """NP-C2: plays for influence, OR effects and (in a turn) discards for one, with every Ante
    (NP-C16, NP-C17: none before every seat has had a turn, and never in a window)."""
    money = state.money[seat]
    antes = range(state.ante, money + 1) if not window and len(state.had_turn) == state.n else (0,)
    board = [g for g in state.board if g]
    act = [g for g in state.board[:9] if g]
    for cid in dict.fromkeys(state.hands[seat]):
        card = CARD[cid]
        if window and card.timing == "commission":   # NP-C23: never in a window
            continue
        for k in range(1, len(card.groups) + 1):
            for groups in permutations(range(len(card.groups)), k):
                eligible = [[g for g in board if _matches(state, g, card.groups[i].icon)] for i in groups]
                for combo in product(*eligible):
                    received = tuple(dict.fromkeys(combo))
                    for ante in antes:
                        for use, effect in _effects(state, seat, card, received):
                            yield pb.Command(play_for_influence=pb.PlayForInfluence(
                                card=cid, ante=ante, use_effect=use, effect=effect,
                                placements=[pb.GroupPlacement(group=i, gangster=g)
                                            for i, g in zip(groups, combo, strict=True)]))
        if card.keyword == "OR":
            for ante in antes:
                for t in _targets(state, seat, card.effect):
                    yield pb.Command(play_or_effect=pb.PlayOrEffect(card=cid, ante=ante, effect=t))
        if not window:
            for ante in antes:
                for g in act:
                    yield pb.Command(discard_for_marker=pb.DiscardForMarker(card=cid, gangster=g, ante=ante))


def _effects(state: Any, seat: int, card: Any, received: tuple[str, ...]) -> Iterator[tuple[bool, Any]]:
    """NP-C10, NP-C11: `blank` without or with its effect; `AND` with it when it can be carried out."""
    if card.keyword == "blank":
        yield False, None
        for t in _targets(state, seat, card.effect, received):
            yield True, t
    elif card.keyword == "AND":
        if card.effect == "BLACKMAIL_COIN" and not (   # NP-C25
                state.bm_free and any(state.gs[GIDX[g]].coin == -1 for g in received)):
            yield False, None
        else:
            for t in _targets(state, seat, card.effect, received):
                yield False, t
    else:
        yield False, None


def _refs(state: Any, gangsters: list[str], owner: int | None = None) -> list[Any]:
    """NP-C31: the markers a command may name: per owner with markers there a plain one and, for
    the coin's owner, the coin one; neutral ones as owner -1 (a superset: decide refuses a plain
    marker where the coin marker is the owner's only one)."""
    out = []
    for g in gangsters:
        st = state.gs[GIDX[g]]
        for o, k in enumerate(st.markers):
            if k and owner in (None, o):
                out.append(pb.MarkerRef(gangster=g, owner=o))
                if st.coin == o:
                    out.append(pb.MarkerRef(gangster=g, owner=o, coin=True))
        if st.neutral and owner is None:
            out.append(pb.MarkerRef(gangster=g, owner=-1))
    return out


def _targets(state: Any, seat: int, code: str, received: tuple[str, ...] = ()) -> Iterator[Any]:
    """Table F: the targets a code may be given (whacks and moves are commands of their own)."""
    act = [g for g in state.board[:9] if g]
    board = [g for g in state.board if g]
    if code in _NO_TARGETS:
        yield pb.Targets()
    elif code in _ON_ACTIVE or code in ("SNITCH", "EXTRA_5", "BLACKMAIL_COIN"):
        for g in board if code == "SNITCH" else act if code in _ON_ACTIVE else received:
            yield pb.Targets(gangster=g)
    elif code in _ON_SEAT:
        for i in range(state.n):
            yield pb.Targets(seat=i)
    elif code == "JOINT_2":
        for g, i in product(act, range(state.n)):
            yield pb.Targets(gangster=g, seat=i)
    elif code == "ASSOCIATE_SWAP":
        for slot, position in product((1, 2, 3), (1, 2, 3)):
            yield pb.Targets(slot=slot, position=position)
    elif code == "NEUTRAL_3":
        for spots in product(act, repeat=min(3, state.neutral)) if state.neutral else ():
            yield pb.Targets(gangsters=spots)
    elif code == "REMOVE_1":
        for r in _refs(state, act):
            yield pb.Targets(markers=[r])
    elif code == "REMOVE_2":
        for g in act:
            refs = _refs(state, [g])
            for r in refs:
                yield pb.Targets(markers=[r])
            for pair in product(refs, repeat=2):
                yield pb.Targets(markers=pair)
    elif code == "SWAP_2":
        for pair in permutations(_refs(state, board), 2):
            yield pb.Targets(markers=pair)
    elif code in ("MOVE_OWN_1", "MOVE_OWN_2"):
        counts = (0,) if code == "MOVE_OWN_1" else (1, 2)
        for r, d, count in product(_refs(state, board, seat), act, counts):
            yield pb.Targets(markers=[r], destination=d, count=count)


class TestNothingPersonalContract(EngineContract):
    engine = ENGINE
    #: NP-D7: a seat's standing auto-pass is shown to its own seat (the View has no field for others')
    own_view_fields = frozenset({"viewer", "autopass_cards", "autopass_rerolls"})

    @classmethod
    def options_strategy(cls) -> st.SearchStrategy[dict[str, str]]:
        flag = st.sampled_from(["false", "true"])
        return st.fixed_dictionaries({}, optional={
            "random_setup": flag,          # NP-V6
            "reroll_tokens": flag,         # NP-V9
            "keep_your_word": flag,        # NP-V1
            "arrest_associates": flag,     # NP-P4
            "commission_turns": st.sampled_from(["0", "2", "30"]),   # NP-C33
            "offers_per_phase": st.sampled_from(["0", "3"]),         # NP-M9
            "timeouts.setup_s": st.sampled_from(["7", "30"]),        # NP-D3: a set clock, or the default
            "timeouts.commission_s": st.sampled_from(["45"]),        # NP-D4
        })

    def perturb_hidden(self, state: Any, viewer: int | None, rng: random.Random) -> Any:
        return perturb_hidden(state, viewer, rng)

    def compound_candidates(self, state: Any, seat: int) -> list[Any]:
        return compound_candidates(state, seat)
