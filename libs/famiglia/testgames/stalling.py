"""Stalling Card: High Card (`famiglia.bots.toy`) whose `decide` does not return for a while,
as an engine bug that loops would not return at all: what the command service's stuck-call
watchdog is tested against (docs/operations.md, "A stuck call").

Not one of the four games and never in `default_registry()`: a test builds its registry with
`stalling_registry`. Only `decide` stalls, so a match is created and viewed as High Card's, unless
`stalls_in` names `view` or `legal_commands`: then that one stalls instead, for one seat at one
point of the match, as a bug one position meets.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from google.protobuf.message import Message

from famiglia.bots.toy import HighCard, Msg, State
from famiglia.engine import Rng
from famiglia.engine.registry import Registry

GAME_ID = "stalling_card"


class StallingCard(HighCard):
    """High Card whose every `decide` takes `stall_s` seconds, or until `release` is set:
    asleep (`spin=False`: the GIL free) or in a loop that holds the GIL between the
    interpreter's switches (`spin=True`), as a runaway engine would. With `poisoned` (a card),
    only a command that plays that card stalls: a bug one command meets, not every one. With
    `stalls_in` "view" or "legal_commands", `decide` returns at once and that function stalls
    instead, for `poisoned_seat` once `poisoned_at` cards have been played (None: any)."""

    def __init__(self, stall_s: float, *, spin: bool = False, poisoned: int | None = None,
                 stalls_in: str = "decide", poisoned_seat: int | None = None,
                 poisoned_at: int | None = None) -> None:
        if stalls_in not in ("decide", "view", "legal_commands"):
            raise ValueError(f"stalls_in is decide, view or legal_commands, not {stalls_in!r}")
        self.info = dataclasses.replace(HighCard.info, game_id=GAME_ID, title="Stalling Card (watchdog test game)")
        self.stall_s = stall_s
        self.spin = spin
        self.poisoned = poisoned
        self.stalls_in = stalls_in
        self.poisoned_seat = poisoned_seat
        self.poisoned_at = poisoned_at
        self.release = threading.Event()
        self.entered = threading.Event()
        """Set when a `decide` began to stall (a test waits for it, not for a time)."""

    def decide(self, state: State, seat: int, command: Msg, rng: Rng) -> list[Message]:
        if self.stalls_in == "decide" and (self.poisoned is None or command.play.card == self.poisoned):
            self._stall()
        return super().decide(state, seat, command, rng)

    def view(self, state: State, viewer: int | None) -> Msg:
        if self._poisoned("view", state, viewer):
            self._stall()
        return super().view(state, viewer)

    def legal_commands(self, state: State, seat: int, limit: int | None = None, *, rng: Any = None) -> list[Message]:
        if self._poisoned("legal_commands", state, seat):
            self._stall()
        return super().legal_commands(state, seat, limit, rng=rng)

    def _poisoned(self, asked: str, state: State, seat: int | None) -> bool:
        return self.stalls_in == asked and (self.poisoned_seat is None or seat == self.poisoned_seat) and \
            (self.poisoned_at is None or len(state.seen) == self.poisoned_at)

    def _stall(self) -> None:
        self.entered.set()
        if self.spin:
            end = time.monotonic() + self.stall_s
            while time.monotonic() < end and not self.release.is_set():
                pass
        else:
            self.release.wait(self.stall_s)


def stalling_registry(engine: StallingCard, base: Registry | None = None) -> Registry:
    """`base`'s engines (none by default) plus `engine`."""
    engines = {} if base is None else {g: base.get(g) for g in base}
    engines[GAME_ID] = engine
    return Registry(engines)
