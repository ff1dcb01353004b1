"""One way to assemble an engine from a game's module functions.

A game keeps its logic in small modules (setup, decide, evolve, view, ...) and
wires them here once, instead of a class of forwarding methods per game. The
fields hold the functions themselves, so a call costs no extra frame.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .protocol import Command, Event, GameInfo, Pending, Result, State, View, Visibility, unnamed_clock


@dataclass(frozen=True, slots=True)
class Decider:
    """An `Engine` (protocol.py) made of plain functions; see that protocol for each contract.
    Arguments are typed loosely (`...`): each game's functions take its own message types."""

    info: GameInfo
    setup: Callable[..., list[Any]]
    evolve: Callable[..., State]
    decide: Callable[..., list[Any]]
    pending: Callable[..., list[Pending]]
    legal_commands: Callable[..., list[Any]]
    view: Callable[..., View]
    visibility: Callable[..., Visibility]
    redact: Callable[..., Event | None]
    result: Callable[..., Result | None]
    timeout_command: Callable[..., Command | None]
    render_state: Callable[..., str]
    render_command: Callable[..., str]
    render_event: Callable[..., str]
    determinize: Callable[..., State]
    clock_key: Callable[..., str] = unnamed_clock
    """protocol.clock_key: "" (every decision its own clock) unless the game names its clocks."""

    def __repr__(self) -> str:
        return f"Decider({self.info.game_id})"

