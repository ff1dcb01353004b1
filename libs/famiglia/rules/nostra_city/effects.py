"""Vendetta card effects (NC-K45..K54), keyed by the effect codes of data.VENDETTA.

Each effect has a target finder (the legal (target, Wiseguy, Turf) triples for the
card's player) and an apply function that emits the card's events.
"""

from __future__ import annotations

from collections.abc import Callable

from famiglia.engine import Rng
from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

from .queries import burglary_targets, free_wiseguys, hit_targets, tip_off_targets
from .state import State

Target = tuple[int, str, str]  # (target seat, Wiseguy, Turf)


def _hit_targets(state: State, seat: int) -> list[Target]:
    return [(t, w, "") for t, w in hit_targets(state, seat)]


def _burglary_targets(state: State, seat: int) -> list[Target]:
    return [(t, "", "") for t in burglary_targets(state, seat)]


def _tip_off_targets(state: State, seat: int) -> list[Target]:
    return [(t, "", turf) for t, turf in tip_off_targets(state, seat)]


def rage_targets(state: State, seat: int, card_effect: str, cause: int) -> list[Target]:
    """NC-K48: the player who caused the draw, or any other player for Meeting draws;
    Beating names a Free Wiseguy of the target when it has one (NC-K53, NC-X17)."""
    targets = [cause] if cause >= 0 else [t for t in range(state.seats) if t != seat]
    out: list[Target] = []
    for t in targets:
        free = free_wiseguys(state.players[t]) if card_effect == "beating" else []
        if free:
            out.extend((t, w, "") for w in free)
        else:
            out.append((t, "", ""))
    return out


def _emit_revenge(emit: Callable[..., None], seat: int, card: str, target: Target) -> None:
    t, wiseguy, turf = target
    emit(revenge_played=pb.RevengePlayed(seat=seat, card=card, target=t, wiseguy=wiseguy, turf=turf))


def hit(state: State, emit: Callable[..., None], seat: int, card: str, target: Target, rng: Rng) -> None:
    """NC-K50: the chosen Wiseguy leaves the game (NC-X11)."""
    _emit_revenge(emit, seat, card, target)


def tip_off(state: State, emit: Callable[..., None], seat: int, card: str, target: Target, rng: Rng) -> None:
    """NC-K52: a Free Turf of the target becomes Busy until the Reception."""
    _emit_revenge(emit, seat, card, target)


def burglary(state: State, emit: Callable[..., None], seat: int, card: str, target: Target, rng: Rng) -> None:
    """NC-K51/H14: 2 Notes (or 1) picked at random from the target's Bank."""
    victim = target[0]
    bank = state.players[victim].bank
    stolen = sorted(rng.sample(bank, min(2, len(bank))))
    _emit_revenge(emit, seat, card, target)
    emit(notes_stolen=pb.NotesStolen(thief=seat, victim=victim, notes=stolen, count=len(stolen)))


def beating(state: State, emit: Callable[..., None], seat: int, card: str, target: Target, rng: Rng) -> None:
    """NC-K53: a Free Wiseguy of the target becomes Busy; none, no effect (NC-X17)."""
    t, wiseguy, _ = target
    emit(rage_played=pb.RagePlayed(seat=seat, card=card, target=t, wiseguy=wiseguy, effect=bool(wiseguy)))


def smash(state: State, emit: Callable[..., None], seat: int, card: str, target: Target, rng: Rng) -> None:
    """NC-K54/H15: one random Note of the target's Bank is discarded unseen."""
    t = target[0]
    bank = state.players[t].bank
    if bank:
        emit(note_smashed=pb.NoteSmashed(seat=t, note=rng.choice(bank)))
    emit(rage_played=pb.RagePlayed(seat=seat, card=card, target=t, effect=bool(bank)))


def _kept(state: State, emit: Callable[..., None], seat: int, card: str, target: Target, rng: Rng) -> None:
    """Snitch (NC-K46) and Atlantic City (NC-K45) act when drawn, never when played."""
    raise AssertionError("snitch and Atlantic City cards are never played")


Effect = Callable[[State, Callable[..., None], int, str, Target, Rng], None]

EFFECTS: dict[str, Effect] = {
    "hit": hit,
    "burglary": burglary,
    "tip_off": tip_off,
    "beating": beating,
    "smash": smash,
    "snitch": _kept,
    "atlantic_city": _kept,
}

REVENGE_TARGETS: dict[str, Callable[[State, int], list[Target]]] = {
    "hit": _hit_targets,
    "burglary": _burglary_targets,
    "tip_off": _tip_off_targets,
}
