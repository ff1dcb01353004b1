"""Stalling Card: High Card (`famiglia.bots.toy`) whose `decide` does not return for a while,
as an engine bug that loops would not return at all: what the command service's stuck-call
watchdog is tested against (docs/operations.md, "A stuck call").

Not one of the four games and never in `default_registry()`: a test builds its registry with
`stalling_registry`. Only `decide` stalls, so a match is created and viewed as High Card's.
"""

from __future__ import annotations

import dataclasses
import threading
import time

from google.protobuf.message import Message

from famiglia.bots.toy import HighCard, Msg, State
from famiglia.engine import Rng
from famiglia.engine.registry import Registry

GAME_ID = "stalling_card"


class StallingCard(HighCard):
    """High Card whose every `decide` takes `stall_s` seconds, or until `release` is set:
    asleep (`spin=False`: the GIL free) or in a loop that holds the GIL between the
    interpreter's switches (`spin=True`), as a runaway engine would. With `poisoned` (a card),
    only a command that plays that card stalls: a bug one command meets, not every one."""

    def __init__(self, stall_s: float, *, spin: bool = False, poisoned: int | None = None) -> None:
        self.info = dataclasses.replace(HighCard.info, game_id=GAME_ID, title="Stalling Card (watchdog test game)")
        self.stall_s = stall_s
        self.spin = spin
        self.poisoned = poisoned
        self.release = threading.Event()
        self.entered = threading.Event()
        """Set when a `decide` began to stall (a test waits for it, not for a time)."""

    def decide(self, state: State, seat: int, command: Msg, rng: Rng) -> list[Message]:
        if self.poisoned is not None and command.play.card != self.poisoned:
            return super().decide(state, seat, command, rng)
        self.entered.set()
        if self.spin:
            end = time.monotonic() + self.stall_s
            while time.monotonic() < end and not self.release.is_set():
                pass
        else:
            self.release.wait(self.stall_s)
        return super().decide(state, seat, command, rng)


def stalling_registry(engine: StallingCard, base: Registry | None = None) -> Registry:
    """`base`'s engines (none by default) plus `engine`."""
    engines = {} if base is None else {g: base.get(g) for g in base}
    engines[GAME_ID] = engine
    return Registry(engines)
