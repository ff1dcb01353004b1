"""The Emitter: events in the making, with the state they lead to.

`decide` runs the steps nobody decides (Step 1, Step 4, the vote, the clean-up) to the end
inside one command. Each rule reads the state as the previous event left it, so the code
follows the rules' own order (GC-R08) instead of predicting it.
"""

from __future__ import annotations

from famiglia.engine import Rng

from . import evolve
from .events import Event
from .evolve import FoldedRun, apply
from .state import State


class Emitter(FoldedRun):
    """Emits events and folds each at once; `done` keeps the run for the fold that follows."""

    __slots__ = ("state", "rng")

    def __init__(self, state: State | None, rng: Rng) -> None:
        self.state: State = state  # type: ignore[assignment]
        self.events: list[Event] = []
        self.states: list[State | None] = [state]
        self.cursor = 0
        self.rng = rng

    def emit(self, event: Event) -> None:
        self.events.append(event)
        self.state = state = apply(self.state, event)
        self.states.append(state)

    def emit_folded(self, event: Event, state: State) -> None:
        """`emit` for an event whose state the caller has already evolved, with evolve's own
        function for that kind and the very values the event was built from."""
        self.events.append(event)
        self.state = state
        self.states.append(state)

    def done(self) -> list[Event]:
        """The events, with the states they lead to kept for the fold that follows (evolve)."""
        evolve._LAST_RUN = self  # evolve.remember, without the call (cursor is still 0)
        return self.events
