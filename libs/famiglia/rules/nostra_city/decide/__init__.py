"""decide(state, seat, command, rng): one function per command kind, then the automatic
flow (draws, auto-ended turns, resolutions, the Reception) until someone must decide.

Split by the game's phases: business, meeting, trial, reception, verdict; `turns` holds
what every turn phase shares and `common` the emitter and the draws.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from famiglia.engine import MatchConfig, Rng, RuleViolation
from famiglia.engine.errors import MalformedCommand, NotYourTurn
from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

from ..config import Config
from ..data import (
    DEAL_TURFS,
    DEAL_WISEGUYS,
    INVESTIGATION_BY_ID,
    NOTES,
    POLICE_RAID,
    RESPECT_CARDS,
    START_BANK,
    TURFS,
    VENDETTA,
    WISEGUYS,
)
from ..flow import CHOICES, TURNS, turn_ends_itself
from ..state import Phase, State
from . import business, meeting, trial, turns
from .common import Emitter, draw_vendetta, refuse
from .reception import end_trial, start_phase

Handler = Callable[[Emitter, int, Any, Rng], None]

_TURN_HANDLERS: dict[str, Handler] = {
    "cash_in": business.cash_in,
    "place_bid": meeting.place_bid,
    "corrupt": trial.corrupt,
    "play_vendetta": turns.play_vendetta,
    "end_turn": turns.end_turn,
}
_CHOICE_HANDLERS: dict[str, Handler] = {
    "distribute_notes": business.distribute_notes,
    "keep_notes": meeting.keep_notes,
    "assign_title": meeting.assign_title,
    "play_rage": turns.play_rage,
}
_FORCED: dict[str, Callable[[State], Any]] = {
    "distribute": business.forced_distribution,
    "keep": meeting.forced_keep,
    "consigliere": meeting.forced_title,
    "primo_capo": meeting.forced_title,
    "rage": turns.forced_rage,
}


def decide(state: State, seat: int, command: pb.Command, rng: Rng) -> list[pb.Event]:
    kind = command.WhichOneof("kind")
    if kind is None:
        raise MalformedCommand("NC-D01", "empty command")
    if state.phase is Phase.OVER:
        raise NotYourTurn("NC-V01", "the match is over")
    if not 0 <= seat < state.seats:
        raise MalformedCommand("NC-S02", f"no seat {seat}")
    em = Emitter(state)
    choice = state.choice
    if choice is not None:
        row = CHOICES[choice.kind]
        if seat != choice.seat:
            raise NotYourTurn(row.rule, f"seat {choice.seat} is choosing ({choice.kind})")
        if kind != row.command:
            raise refuse(row.rule, f"answer the pending {choice.kind} choice first")
        _CHOICE_HANDLERS[kind](em, seat, getattr(command, kind), rng)
    else:
        if kind not in _TURN_HANDLERS:
            raise refuse("NC-D01", f"no {kind} choice is pending")
        if seat != state.turn_seat or state.draws:
            raise NotYourTurn("NC-R02", f"it is seat {state.turn_seat}'s turn")
        _TURN_HANDLERS[kind](em, seat, getattr(command, kind), rng)
    settle(em, rng)
    return em.events


def settle(em: Emitter, rng: Rng) -> None:
    """Run everything that needs no decision (NC-D03, NC-K44, NC-M05, NC-C01)."""
    while True:
        s = em.state
        if s.phase is Phase.OVER:
            return
        if s.choice is not None:
            forced = _FORCED[s.choice.kind](s)
            if forced is None:
                return
            kind = CHOICES[s.choice.kind].command
            _CHOICE_HANDLERS[kind](em, s.choice.seat, forced, rng)
            continue
        if s.draws:
            draw_vendetta(em, rng)
            continue
        if s.phase is Phase.RESOLUTION:
            _resolution_step(em, rng)
            continue
        if s.turn < len(s.order):
            seat = s.order[s.turn]
            if not turn_ends_itself(s, seat):
                return
            em(turn_ended=pb.TurnEnded(seat=seat, automatic=True))
            continue
        if s.phase is Phase.TRIAL:
            end_trial(em, rng)
        else:
            start_phase(em, TURNS[s.phase].next, s.month)


def _resolution_step(em: Emitter, rng: Rng) -> None:
    s = em.state
    if not s.locations_revealed:
        meeting.reveal_locations(em)
    elif s.resolution <= 4:
        meeting.resolve_space(em, rng)
    elif s.resolution == 5:
        meeting.meeting_cheats(em)
    else:
        start_phase(em, Phase.TRIAL, s.month)  # NC-M16: Location cards go home at the Trial


def setup(config: MatchConfig, seed: int) -> list[pb.Event]:
    """NC-S01..S16: deal, fill the Street, shuffle the decks, name the first player."""
    options = {str(k): str(v) for k, v in config.options.items()}
    cfg = Config.parse(config.seats, options)
    rng = Rng.derive(seed, 0, "nostra_city.setup")
    n = config.seats
    first = pb.Event(match_set_up=pb.MatchSetUp(seats=n, options=options))
    from ..evolve import evolve

    em = Emitter(evolve(None, first))
    em.events.append(first)
    wiseguys = rng.shuffled([w.id for w in WISEGUYS])  # NC-S04
    turfs = rng.shuffled([t.id for t in TURFS])
    for seat in range(n):
        em(cards_dealt=pb.CardsDealt(seat=seat, wiseguys=wiseguys[seat * DEAL_WISEGUYS:(seat + 1) * DEAL_WISEGUYS],
                                     turfs=turfs[seat * DEAL_TURFS:(seat + 1) * DEAL_TURFS]))
    pool = list(NOTES)
    for seat in range(n):  # NC-S05
        bank = []
        for mark, value in START_BANK:
            note = next(x for x in pool if x.mark == mark and x.value == value)
            pool.remove(note)
            bank.append(note.id)
        em(bank_dealt=pb.BankDealt(seat=seat, notes=sorted(bank)))
    street = [*wiseguys[n * DEAL_WISEGUYS:], *turfs[n * DEAL_TURFS:], *RESPECT_CARDS, *INVESTIGATION_BY_ID]
    em(deck_shuffled=pb.DeckShuffled(deck="street", cards=rng.shuffled(street)))  # NC-S06
    em(deck_shuffled=pb.DeckShuffled(deck="note", notes=rng.shuffled([*(x.id for x in pool), POLICE_RAID])))
    em(deck_shuffled=pb.DeckShuffled(deck="vendetta", cards=rng.shuffled([v.id for v in VENDETTA])))  # NC-S10
    for space in range(1, 5):  # NC-S07
        while True:
            card = em.state.street_deck[0]
            if card in INVESTIGATION_BY_ID:
                em(street_card_set_aside=pb.StreetCardSetAside(space=space, card=card))
                continue
            em(street_card_revealed=pb.StreetCardRevealed(space=space, card=card))
            break
    if em.state.set_aside:  # NC-S08
        deck = rng.shuffled([*em.state.street_deck, *em.state.set_aside])
        em(deck_shuffled=pb.DeckShuffled(deck="street", cards=deck))
    fp = cfg.first_player_seat if cfg.first_player_seat >= 0 else rng.randrange(n)  # NC-S15/S16
    em(first_player_chosen=pb.FirstPlayerChosen(seat=fp))
    start_phase(em, Phase.BUSINESS, 1)  # NC-S14
    settle(em, rng)
    return em.events


__all__ = ["decide", "setup", "settle", "RuleViolation"]
