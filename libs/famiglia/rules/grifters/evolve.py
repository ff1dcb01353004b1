"""evolve(state, event): one small function per event kind, plus a dispatch dict. Never random.

An open follow-up choice (GR-D03) lasts until the next event: every event but `choice_opened`
closes it, because the only thing that can follow an open choice is its answer.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from famiglia.grifters.v1 import grifters_pb2 as pb

from . import config as config_mod
from .data import CARD_ORDER, EFFECT_OF
from .state import (
    NONE,
    OVER,
    PLAY,
    Caper,
    Player,
    State,
    caper_with,
    in_hand_order,
    player_in,
    player_with,
    state_with,
)

Event = pb.Event


class FoldedRun:
    """The events one `decide` call emitted and the states it folded them into (states[0] is the
    state it started from). `decide` folds every event as it emits it (resolve.Ctx), so folding the
    same events again right after (the command service and random play do) reuses that work: while
    the very same event and state objects come in order, `evolve` returns the next known state.
    Anything else is evolved afresh, so results never depend on this."""

    __slots__ = ("events", "states", "cursor")

    def __init__(self, events: list[Event], states: Sequence[State | None]) -> None:
        self.events = events
        self.states = states
        self.cursor = 0


_LAST_RUN: FoldedRun | None = None


def remember(run: FoldedRun) -> None:
    global _LAST_RUN
    _LAST_RUN = run


def evolve(state: State | None, event: Event) -> State:
    run = _LAST_RUN
    if run is not None:
        i = run.cursor
        if i < len(run.events) and run.events[i] is event and run.states[i] is state:
            run.cursor = i + 1
            return run.states[i + 1]  # type: ignore[return-value]
    if state is None:
        return apply_first(event)
    # `apply`, written out: this is the replay fold's per-event path, and a call costs.
    kind: str = event.WhichOneof("kind")  # type: ignore[assignment]
    if state.choice and kind != "choice_opened":
        state = state_with(state, {"choice": NONE})
    return _EVOLVERS[kind](state, getattr(event, kind))


def apply_first(event: Event) -> State:
    """The first event of a match, which creates the state."""
    if event.WhichOneof("kind") != "match_started":
        raise ValueError(f"the first Grifters event is match_started, not {event.WhichOneof('kind')}")
    return _match_started(event.match_started)


def apply(state: State, event: Event) -> State:
    """One event on a running match (no cache lookup: `decide` calls this for fresh events)."""
    kind: str = event.WhichOneof("kind")  # type: ignore[assignment]
    if state.choice and kind != "choice_opened":
        state = state_with(state, {"choice": NONE})
    return _EVOLVERS[kind](state, getattr(event, kind))


_NO_CARDS: frozenset[str] = frozenset()


@cache
def _caper(card: str, code: str, job: str = "") -> Caper:
    """A caper text as it begins (frozen, so one shared instance per card and code)."""
    return Caper(card, code, job)


# -- helpers --------------------------------------------------------------------------------------------
def _add(hand: tuple[str, ...], cards: Any) -> tuple[str, ...]:
    if len(cards) == 1:  # a drawn or taken card: put it in its place, no sort (hands are in order)
        out = list(hand)
        insort(out, cards[0], key=CARD_ORDER.__getitem__)
        return tuple(out)
    return tuple(sorted((*hand, *cards), key=CARD_ORDER.__getitem__))


def _remove(cards: tuple[str, ...], gone: Any) -> tuple[str, ...]:
    if len(gone) == 1:
        one = gone[0]
        return tuple([c for c in cards if c != one])
    gone = set(gone)
    return tuple([c for c in cards if c not in gone])


def _set_night(nights: tuple[tuple[str, ...], ...], index: int, group: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    out = list(nights)
    out[index] = group
    return tuple(out)


def _advanced(state: State, seat: int) -> tuple[tuple[Player, ...], int]:
    """GR-R03: Night Three -> Refresh area (a token -> the Coffers, GR-R07), Two -> Three, One -> Two.
    Returns the players and the Coffers after it."""
    p = state.players[seat]
    n1, n2, n3 = p.nights
    t1, t2, t3 = p.tokens
    players = player_in(state.players, seat,
                        {"nights": ((), n1, n2), "tokens": (False, t1, t2), "refresh": p.refresh + n3})
    return players, state.coffers + (1 if t3 else 0)


# -- one function per event kind --------------------------------------------------------------------
def _match_started(e: pb.MatchStarted) -> State:
    options = dict(e.options)
    cfg = config_mod.parse_items(e.seats, tuple(sorted(options.items())))
    players = tuple(
        Player(hand=in_hand_order([f"R{seat}-{code}" for code in cfg.ringleaders]), stash=e.start_isk)
        for seat in range(e.seats)
    )
    return State(
        config=cfg,
        options=tuple(sorted(options.items())),
        seats=e.seats,
        first_player=e.first_player,
        players=players,
        coffers=e.coffers,
        out_of_play=e.out_of_play,
        stacks=tuple((s.colour, tuple(s.jobs)) for s in e.stacks),
        active=e.first_player,
    )


def _deck_shuffled(s: State, e: pb.DeckShuffled) -> State:
    return state_with(s, {"deck": tuple(e.cards)})


def _card_drawn(s: State, e: pb.CardDrawn) -> State:
    seat, card = e.seat, e.card
    p = s.players[seat]
    players = player_in(s.players, seat, {"hand": _add(p.hand, (card,))})
    caper = s.caper
    if caper is not None:
        caper = caper_with(caper, {"drawn": (*caper.drawn, card)})
    return state_with(s, {"deck": s.deck[1:], "players": players, "caper": caper})


def _turn_began(s: State, e: pb.TurnBegan) -> State:
    """A new turn; its Phase 1 Advance Time happens with it unless skipped (GR-R03, GR-R04)."""
    seat = e.seat
    players, coffers = (s.players, s.coffers) if e.advance_skipped else _advanced(s, seat)
    return state_with(s, {"players": players, "coffers": coffers, "active": seat, "round": e.round, "turn": e.turn,
                          "phase": PLAY, "played": False, "caper": None, "use_defaults": False,
                          "swapped_in": _NO_CARDS, "locked": _NO_CARDS})


def _time_advanced(s: State, e: pb.TimeAdvanced) -> State:
    """An extra Advance Time from a card (GR-R05)."""
    if e.skipped:
        return s
    players, coffers = _advanced(s, e.seat)
    return state_with(s, {"players": players, "coffers": coffers})


def _isk_token_placed(s: State, e: pb.IskTokenPlaced) -> State:
    if not e.placed:
        return state_with(s, {"played": True})
    p = s.players[e.seat]
    players = player_in(s.players, e.seat, {"stash": p.stash - 1, "tokens": (True, p.tokens[1], p.tokens[2])})
    return state_with(s, {"players": players, "played": True})


def _caper_pulled(s: State, e: pb.CaperPulled) -> State:
    seat, card = e.seat, e.card
    p = s.players[seat]
    players = player_in(s.players, seat, {"hand": _remove(p.hand, (card,)), "in_play": (*p.in_play, card)})
    caper = _caper(card, EFFECT_OF[card])
    if e.second:
        return state_with(s, {"players": players, "caper": caper})
    return state_with(s, {"players": players, "caper": caper, "played": True,
                          "use_defaults": e.use_defaults})


def _job_completed(s: State, e: pb.JobCompleted) -> State:
    """GR-J06 steps 1 and 2 (step 2 waits for the reward when job_card_moves_before_reward is off)."""
    p = s.players[e.seat]
    team = tuple(e.team)
    players = player_in(s.players, e.seat,
                        {"hand": _remove(p.hand, team), "nights": _set_night(p.nights, 0, team)})
    s = state_with(s, {"players": players, "played": True,
                       "caper": _caper("", "reward", e.job)})
    if s.config.job_card_moves_before_reward:
        s = _take_job(s, e.seat, e.job)
    return s


def _take_job(s: State, seat: int, job: str) -> State:
    stacks = tuple((colour, jobs[1:] if jobs and jobs[0] == job else jobs) for colour, jobs in s.stacks)
    p = s.players[seat]
    players = player_in(s.players, seat, {"jobs": (*p.jobs, job)})
    return state_with(s, {"stacks": stacks, "players": players})


def _isk_stolen(s: State, e: pb.IskStolen) -> State:
    seat, amount = e.seat, e.amount
    players = list(s.players)
    players[seat] = player_with(players[seat], {"stash": players[seat].stash + amount})
    if e.from_coffers:
        return state_with(s, {"players": tuple(players), "coffers": s.coffers - amount})
    victim = e.victim
    v = players[victim]
    players[victim] = player_with(v, {"stash": v.stash - amount})
    return state_with(s, {"players": tuple(players)})


def _choice_opened(s: State, e: pb.ChoiceOpened) -> State:
    caper = s.caper
    if caper is not None and caper.step != e.step:
        caper = caper_with(caper, {"step": e.step})
    return state_with(s, {"choice": e.choice, "caper": caper})


def _nothing(s: State, e: Any) -> State:
    return s


def _cards_discarded(s: State, e: pb.CardsDiscarded) -> State:
    p = s.players[e.seat]
    players = player_in(s.players, e.seat, {"hand": _remove(p.hand, e.cards)})
    return state_with(s, {"players": players, "discard": (*s.discard, *e.cards)})


def _specialist_abducted(s: State, e: pb.SpecialistAbducted) -> State:
    """GR-K08: the agent takes the card's place (in its Team, GR-X08); the card is in play."""
    players = list(s.players)
    o = players[e.opponent]
    group = tuple(e.agent if c == e.card else c for c in o.nights[e.night - 1])
    players[e.opponent] = player_with(o, {"nights": _set_night(o.nights, e.night - 1, group)})
    p = players[e.seat]
    players[e.seat] = player_with(p, {"in_play": (*_remove(p.in_play, (e.agent,)), e.card)})
    return state_with(s, {"players": tuple(players), "caper": _caper(e.card, EFFECT_OF[e.card]),
                          "swapped_in": s.swapped_in | {e.agent}})


def _out_of_hideout(s: State, opponent: int, night: int, card: str) -> list[Player]:
    players = list(s.players)
    o = players[opponent]
    group = _remove(o.nights[night - 1], (card,))
    players[opponent] = player_with(o, {"nights": _set_night(o.nights, night - 1, group)})
    return players


def _specialist_kidnapped(s: State, e: pb.SpecialistKidnapped) -> State:
    players = _out_of_hideout(s, e.opponent, e.night, e.card)
    p = players[e.seat]
    players[e.seat] = player_with(p, {"hand": _add(p.hand, (e.card,))})
    return state_with(s, {"players": tuple(players)})


def _specialist_hit(s: State, e: pb.SpecialistHit) -> State:
    players = _out_of_hideout(s, e.opponent, e.night, e.card)
    return state_with(s, {"players": tuple(players), "discard": (*s.discard, e.card)})


def _jobs_swapped(s: State, e: pb.JobsSwapped) -> State:
    players = list(s.players)
    p, o = players[e.seat], players[e.opponent]
    players[e.seat] = player_with(p, {"jobs": tuple(e.their_job if j == e.own_job else j for j in p.jobs)})
    players[e.opponent] = player_with(o, {"jobs": tuple(e.own_job if j == e.their_job else j for j in o.jobs)})
    return state_with(s, {"players": tuple(players)})


def _night_returned(s: State, e: pb.NightReturned) -> State:
    p = s.players[e.seat]
    group = p.nights[e.night - 1]
    players = player_in(s.players, e.seat,
                        {"hand": _add(p.hand, group), "nights": _set_night(p.nights, e.night - 1, ())})
    return state_with(s, {"players": players})


def _partner_chosen(s: State, e: pb.PartnerChosen) -> State:
    p = s.players[e.seat]
    players = player_in(s.players, e.seat, {"hand": _remove(p.hand, (e.card,)), "in_play": (*p.in_play, e.card)})
    return state_with(s, {"players": players})


def _caper_copied(s: State, e: pb.CaperCopied) -> State:
    caper = _caper(e.copier, EFFECT_OF[e.card])
    return state_with(s, {"caper": caper, "locked": s.locked | {e.card}})


def _cards_placed(s: State, seat: int, cards: tuple[str, ...]) -> State:
    """GR-C01, GR-R15: the cards in play go onto the (empty) Night One as one group."""
    p = s.players[seat]
    players = player_in(s.players, seat,
                        {"in_play": _remove(p.in_play, cards), "nights": _set_night(p.nights, 0, cards)})
    return state_with(s, {"players": players})


def _femme_placed(s: State, e: pb.CardsPlaced) -> State:
    return _cards_placed(s, e.seat, tuple(e.cards))


def _caper_completed(s: State, e: pb.CaperCompleted) -> State:
    seat = e.seat
    caper = s.caper
    if caper is not None and caper.job and not s.config.job_card_moves_before_reward:
        s = _take_job(s, seat, caper.job)
    cards = tuple(e.placed)
    if not cards:
        return state_with(s, {"caper": None})
    p = s.players[seat]
    players = player_in(s.players, seat,
                        {"in_play": _remove(p.in_play, cards), "nights": (cards, p.nights[1], p.nights[2])})
    return state_with(s, {"players": players, "caper": None})


def _cards_refreshed(s: State, e: pb.CardsRefreshed) -> State:
    seat = e.seat
    p = s.players[seat]
    hand = _add(p.hand, p.refresh) if p.refresh else p.hand
    players = player_in(s.players, seat, {"hand": hand, "refresh": (), "had_turn": True})
    return state_with(s, {"players": players})


def _discard_reshuffled(s: State, e: pb.DiscardReshuffled) -> State:
    # GR-H05: which cards the new deck holds is public knowledge (only its order is not)
    return state_with(s, {"deck": s.discard, "discard": (), "reshuffled": in_hand_order(s.discard)})


def _game_ended(s: State, e: pb.GameEnded) -> State:
    return state_with(s, {"over": True, "phase": OVER, "end_reason": e.reason, "choice": NONE})


_EVOLVERS: dict[str, Callable[[State, Any], State]] = {
    "deck_shuffled": _deck_shuffled,
    "card_drawn": _card_drawn,
    "turn_began": _turn_began,
    "time_advanced": _time_advanced,
    "isk_token_placed": _isk_token_placed,
    "caper_pulled": _caper_pulled,
    "job_completed": _job_completed,
    "isk_stolen": _isk_stolen,
    "choice_opened": _choice_opened,
    "opponent_chosen": _nothing,
    "cards_discarded": _cards_discarded,
    "specialist_abducted": _specialist_abducted,
    "specialist_kidnapped": _specialist_kidnapped,
    "specialist_hit": _specialist_hit,
    "jobs_swapped": _jobs_swapped,
    "job_swap_declined": _nothing,
    "night_returned": _night_returned,
    "partner_chosen": _partner_chosen,
    "caper_copied": _caper_copied,
    "second_caper_declined": _nothing,
    "cards_placed": _femme_placed,
    "caper_completed": _caper_completed,
    "cards_refreshed": _cards_refreshed,
    "discard_reshuffled": _discard_reshuffled,
    "game_ended": _game_ended,
}
