"""What one seat may know (GR-H01..GR-H11): view(), visibility() and redacted events.

An allow-list: it adds, piece by piece, what the viewer may see, so a new secret stays hidden by
default. Hidden: other hands (GR-H02), the deck order (GR-H05), drawn cards (GR-H07) and the options
of a choice that name hand cards (GR-H09). Everything becomes public once the game is over (GR-H11).
"""

from __future__ import annotations

from functools import lru_cache

from famiglia.engine import PUBLIC, SERVER_ONLY, Visibility, played_options, private_to
from famiglia.grifters.v1 import grifters_pb2 as pb

from .config import OPTIONS
from .flow import open_decision, timeout_seconds
from .state import KEEP, State


def view(state: State, viewer: int | None) -> pb.View:
    over = state.over
    v = pb.View(
        viewer=-1 if viewer is None else viewer,
        seats=state.seats,
        options=_options(state.options),
        first_player=state.first_player,
        active=state.active,
        round=state.round,
        turn=state.turn,
        phase=state.phase,
        coffers=state.coffers,
        out_of_play=state.out_of_play,
        deck_size=len(state.deck),
        discard=list(state.discard),  # GR-H06
        reshuffled=list(state.reshuffled),  # GR-H05
        stacks=[pb.JobStack(colour=colour, jobs=list(jobs)) for colour, jobs in state.stacks],
        swapped_in=sorted(state.swapped_in),
        use_defaults=state.use_defaults,
        over=over,
        end_reason=state.end_reason,
    )
    for seat, p in enumerate(state.players):
        pv = pb.PlayerView(
            seat=seat,
            stash=p.stash,  # GR-H03
            hand_size=len(p.hand),
            refresh=list(p.refresh),  # GR-H04
            jobs=list(p.jobs),
            in_play=list(p.in_play),  # GR-H08
            had_turn=p.had_turn,
            nights=[pb.NightView(cards=list(g), token=t) for g, t in zip(p.nights, p.tokens, strict=True)],
        )
        if over or seat == viewer:  # GR-H02, GR-H11
            pv.hand.extend(p.hand)
        v.players.append(pv)
    if state.caper is not None:
        v.caper_card = state.caper.card
        v.caper_code = state.caper.code
        v.caper_job = state.caper.job
        v.caper_step = state.caper.step
    decision = open_decision(state)
    if decision:
        choice = pb.ChoiceView(seat=state.active, choice=decision,
                               timeout_seconds=timeout_seconds(state, decision), locked=sorted(state.locked))
        if decision == KEEP and (over or viewer == state.active) and state.caper is not None:
            choice.drawn.extend(state.caper.drawn)  # GR-H07, GR-H09
        v.choice.CopyFrom(choice)
    if over:
        v.deck.extend(state.deck)  # GR-H11
    return v


@lru_cache(maxsize=256)
def _options(options: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Every GR-F01 option with the value the match is played by (`played_options`), once per
    match's options (read only: the View copies it)."""
    return played_options(OPTIONS, dict(options))


_SERVER = frozenset({"deck_shuffled"})


def visibility(event: pb.Event) -> Visibility:
    kind = event.WhichOneof("kind")
    if kind in _SERVER:
        return SERVER_ONLY  # GR-H05
    if kind == "card_drawn":
        return private_to(event.card_drawn.seat)  # GR-H07; others get the redacted form
    return PUBLIC


def redact(event: pb.Event, viewer: int | None) -> pb.Event | None:
    """A draw is a public fact with private content: other seats see it without the card."""
    kind = event.WhichOneof("kind")
    if kind in _SERVER:
        return None
    if kind == "card_drawn":
        if viewer == event.card_drawn.seat:
            return event
        d = event.card_drawn
        return pb.Event(card_drawn=pb.CardDrawn(seat=d.seat, dealt=d.dealt))
    return event
