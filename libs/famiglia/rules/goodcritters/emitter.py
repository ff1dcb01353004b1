"""The Emitter: events in the making, with the state they lead to.

`decide` runs the steps nobody decides (Step 1, Step 4, the vote, the clean-up) to the end
inside one command. Each rule reads the state as the previous event left it, so the code
follows the rules' own order (GC-R08) instead of predicting it.
"""

from __future__ import annotations

from famiglia.engine import Rng

from .events import Event
from .evolve import evolve, remember
from .state import State


class Emitter:
    __slots__ = ("state", "events", "rng")

    def __init__(self, state: State | None, rng: Rng) -> None:
        self.state: State = state  # type: ignore[assignment]
        self.events: list[Event] = []
        self.rng = rng

    def emit(self, event: Event) -> None:
        self.events.append(event)
        before = self.state
        self.state = evolve(before, event)
        if before is not None:
            remember(before, event, self.state)
