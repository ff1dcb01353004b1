"""Moves a search seat need not try: per game, the commands a rule of the game shows to be
no better than another listed one, so the search spends its few iterations on the rest.

Nostra City's Trial (NC-T01, NC-V05..V09): a bribe only moves the verdict, and the Trial's
Wiseguys have nothing else to do that month. A loyal seat wants INNOCENT, a Snitch GUILTY; a
Note of the other mark on the Corruption Pile works for its rivals, and while a Note of the
wanted mark (or W13's token move, for the loyal) can still go on the Pile, ending the turn
or bribing with anything else leaves a verdict point on the table. Left to the search, 60
iterations over some thirty Corruptions told them apart by noise: about a quarter of its Trial
choices ended the turn holding a wanted Note or bribed with the wrong one.

Only the seat's own facts (its hand and Bank) and the command are read, as its View shows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from google.protobuf.message import Message

Pruner = Callable[[Any, int, Sequence[Message]], list[Message]]


def _kind(command: Message) -> str:
    return command.WhichOneof("kind") or ""


def nostra_city_trial(state: Any, seat: int, commands: Sequence[Message]) -> list[Message]:
    """In the seat's own Trial turn: only the bribes of the mark it wants (and Revenge cards,
    which come first in a turn) while there is one; else no bribe against its verdict."""
    from famiglia.rules.nostra_city.data import NOTE_MARK

    from .evaluate import _nostra_city_cards

    if getattr(getattr(state, "phase", None), "value", "") != "trial" or not commands:
        return list(commands)
    snitch = any(card in _nostra_city_cards()[0] for card in state.players[seat].hand)
    wanted, against = ("G", "I") if snitch else ("I", "G")

    def effect(command: Message) -> int:
        """+1 a bribe the seat wants, -1 one against it, 0 anything else."""
        if _kind(command) != "corrupt":
            return 0
        corrupt = command.corrupt  # type: ignore[attr-defined]
        if corrupt.move_token:  # NC-W113: one space toward Innocent
            return -1 if snitch else 1
        marks = [NOTE_MARK[n] if 0 <= n < len(NOTE_MARK) else "" for n in corrupt.notes]
        if any(m == against for m in marks):
            return -1
        return 1 if wanted in marks else 0

    effects = [effect(c) for c in commands]
    if 1 in effects:
        kept = [c for c, e in zip(commands, effects, strict=True) if e == 1 or _kind(c) == "play_vendetta"]
    else:
        kept = [c for c, e in zip(commands, effects, strict=True) if e >= 0]
    return kept or list(commands)


PRUNERS: dict[str, Pruner] = {"nostra_city": nostra_city_trial}


def pruned(game_id: str, state: Any, seat: int, commands: Sequence[Message]) -> list[Message]:
    """`commands` less those the game's pruner drops (all of them kept if it fails or drops all)."""
    pruner = PRUNERS.get(game_id)
    if pruner is None:
        return list(commands)
    try:
        return pruner(state, seat, commands) or list(commands)
    except Exception:  # noqa: BLE001 - a hint must never take a bot down
        return list(commands)
