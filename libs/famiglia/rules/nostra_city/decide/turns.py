"""Commands shared by every turn phase: Revenge cards (NC-K47, K50..K52), Rage cards
(NC-K48, K53, K54) and ending a turn (NC-R04)."""

from __future__ import annotations

from famiglia.engine import Rng
from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

from ..data import VENDETTA_BY_ID
from ..effects import EFFECTS, REVENGE_TARGETS, rage_targets
from ..state import State
from .common import Emitter, refuse


def end_turn(em: Emitter, seat: int, cmd: pb.EndTurn, rng: Rng) -> None:
    """NC-R04: the player ends the turn (passing when no action was made)."""
    em(turn_ended=pb.TurnEnded(seat=seat))


def play_vendetta(em: Emitter, seat: int, cmd: pb.PlayVendetta, rng: Rng) -> None:
    """NC-K47: a Revenge card at the start of one's own turn, before its first action."""
    s = em.state
    if s.turn_acted:
        raise refuse("NC-K47", "Revenge cards are played before the turn's first action")
    if cmd.card not in s.players[seat].hand:
        raise refuse("NC-K47", "play a Revenge card from your own hand")
    card = VENDETTA_BY_ID[cmd.card]
    if card.kind != "revenge":
        raise refuse("NC-K46", "only Revenge cards are played from the hand")
    target = (cmd.target, cmd.wiseguy, cmd.turf)
    if target not in REVENGE_TARGETS[card.effect](s, seat):
        raise refuse(card.rule, f"{card.name} has no effect on that target")
    EFFECTS[card.effect](s, em, seat, cmd.card, target, rng)


def play_rage(em: Emitter, seat: int, cmd: pb.PlayRage, rng: Rng) -> None:
    """NC-K48: a drawn Rage card goes at once against the player who caused the draw."""
    s = em.state
    choice = s.choice
    assert choice is not None and choice.kind == "rage"
    card = VENDETTA_BY_ID[choice.card]
    target = (cmd.target, cmd.wiseguy, "")
    if target not in rage_targets(s, seat, card.effect, choice.cause):
        raise refuse("NC-K48" if cmd.target != choice.cause else card.rule, "not a legal Rage target")
    EFFECTS[card.effect](s, em, seat, choice.card, target, rng)


def rage_options(state: State) -> list[pb.PlayRage]:
    choice = state.choice
    assert choice is not None
    effect = VENDETTA_BY_ID[choice.card].effect
    return [pb.PlayRage(target=t, wiseguy=w) for t, w, _ in rage_targets(state, choice.seat, effect, choice.cause)]


def default_rage(state: State) -> pb.PlayRage:
    """NC-D06 timeout: the first other player clockwise on whom the card has an effect
    (else the first other player); for Beating the lowest-id Free Wiseguy."""
    choice = state.choice
    assert choice is not None
    options = rage_options(state)
    clockwise = [(choice.seat + i) % state.seats for i in range(1, state.seats)]
    for t in clockwise:
        hits = sorted((o for o in options if o.target == t), key=lambda o: o.wiseguy)
        effective = [o for o in hits if o.wiseguy or (VENDETTA_BY_ID[choice.card].effect == "smash"
                                                       and state.players[t].bank)]
        if effective:
            return effective[0]
    # no effect on anyone: the first other player clockwise who may be named (NC-X17 discards it)
    return next(o for t in clockwise for o in options if o.target == t)


def forced_rage(state: State) -> pb.PlayRage | None:
    """NC-D03: one legal option (a fixed target and at most one Free Wiseguy) is automatic."""
    options = rage_options(state)
    return options[0] if len(options) == 1 else None
