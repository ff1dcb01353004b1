"""The resolution context of `decide`: emit an event and fold it at once, so every step reads the
state as it is at that moment (GR-C05), and check the end of the game after each step (GR-E02).

All chance goes through the `rng` handed to `decide` (GR-S09, GR-C07) and lands in the events.
"""

from __future__ import annotations

from typing import Any

from famiglia.engine import Rng, RuleViolation

from . import events as ev
from .evolve import FoldedRun, apply, remember
from .flow import CHOICE_RULE, choice_options, default_answer
from .state import (
    ABDUCT,
    COPY,
    HIT,
    JOB_SWAP,
    KIDNAP,
    NIGHT,
    OPPONENT,
    OPTIONAL_CHOICES,
    PARTNER,
    SECOND,
    State,
)


class GameOver(Exception):
    """Raised after `game_ended` is emitted: the rest of the text and the turn are not played (GR-E02)."""


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


START = _Marker("START")  # an effect begins (no answer yet)
ASKED = _Marker("ASKED")  # a choice was opened: stop until its answer arrives
SKIP = _Marker("SKIP")  # a choice with no legal option is skipped (GR-D04)

# GR-E01 reasons
COFFERS_EMPTY = "coffers_empty"
ALL_JOBS_DONE = "all_jobs_completed"
NO_SPECIALISTS = "no_specialists_left"
ROUND_LIMIT = "round_limit"


#: which advance answer of a PullCaper (decide._presets) a choice uses; the Mastermind's keep
#: choice has none: its options are the cards it draws
PRESET_KEY: dict[str, str] = {OPPONENT: "opponent", ABDUCT: "target", KIDNAP: "target", HIT: "target", PARTNER: "partner",
              NIGHT: "night", JOB_SWAP: "job_swap", COPY: "copy", SECOND: "second_caper"}


class Ctx:
    __slots__ = ("state", "rng", "events", "states", "presets")

    def __init__(self, state: State, rng: Rng) -> None:
        self.state = state
        self.rng = rng
        self.events: list[ev.Event] = []
        self.states: list[State] = [state]  # states[i] is the state before events[i]
        self.presets: dict[str, Any] = {}  # advance answers of a PullCaper, by PRESET_KEY

    @property
    def seat(self) -> int:
        return self.state.active

    def emit(self, event: ev.Event) -> None:
        self.events.append(event)
        self.state = after = apply(self.state, event)
        self.states.append(after)

    def remember(self) -> None:
        """Let folding these events again reuse the states (evolve.FoldedRun)."""
        remember(FoldedRun(self.events, self.states))

    def end(self, reason: str) -> None:
        """GR-E01, GR-E02, GR-H11: the game ends now; every hand and the deck become public."""
        s = self.state
        self.emit(ev.game_ended(reason, [(seat, p.hand) for seat, p in enumerate(s.players)], s.deck))
        raise GameOver(reason)

    # -- elementary steps ------------------------------------------------------------------------------
    def steal(self, victim: int | None, amount: int) -> None:
        """GR-C06: X from the Coffers (victim None) or from a Stash, or all it holds."""
        s = self.state
        available = s.coffers if victim is None else s.players[victim].stash
        take = min(amount, available)
        if take > 0:
            self.emit(ev.isk_stolen(self.seat, victim, take))
        if victim is None and self.state.coffers == 0:
            self.end(COFFERS_EMPTY)  # GR-E01 (a), GR-X04

    def draw(self) -> None:
        """GR-C07, GR-X01: reshuffle the discard pile into an empty deck, then draw the top card."""
        s = self.state
        if not s.deck:
            if not s.discard:
                self.end(NO_SPECIALISTS)  # GR-E01 (d)
            self.emit(ev.discard_reshuffled(len(s.discard)))
            self.emit(ev.deck_shuffled(self.rng.shuffled(self.state.deck)))
        self.emit(ev.card_drawn(self.seat, self.state.deck[0]))
        if not self.state.deck and not self.state.discard:
            self.end(NO_SPECIALISTS)  # GR-E01 (c)

    def begin_turn(self, seat: int, round_: int, turn: int) -> None:
        """GR-R01..GR-R04: the next turn and its Phase 1."""
        skipped = not self.state.players[seat].had_turn and self.state.config.skip_first_advance
        self.emit(ev.turn_began(seat, round_, turn, skipped))

    def advance_time(self) -> None:
        """GR-R05: an extra Advance Time; GR-F01 `extra_advance_on_first_turn` may skip it."""
        s = self.state
        skipped = not s.players[s.active].had_turn and not s.config.extra_advance_on_first_turn
        self.emit(ev.time_advanced(self.seat, skipped=skipped))

    def place(self, cards: list[str] | tuple[str, ...]) -> None:
        """GR-K15: the Femme Fatale goes onto Night One before her text goes on."""
        self.emit(ev.cards_placed(self.seat, cards))

    def complete(self, placed: tuple[str, ...] = ()) -> None:
        """The text is done; `placed` go onto Night One as its last part (GR-C01)."""
        self.emit(ev.caper_completed(self.seat, placed))

    def finish(self, card: str) -> None:
        """The usual end of a caper: this card alone on Night One (GR-C01)."""
        self.complete((card,))

    def ask(self, choice: str, step: int = 0) -> Any:
        """GR-D03/GR-D04: the answer when the engine may choose, else open the choice (ASKED)."""
        s = self.state
        options = choice_options(s, choice)
        if not options:
            return SKIP
        key = PRESET_KEY.get(choice)
        if key in self.presets:
            return self._preset(choice, options, self.presets.pop(key))
        if s.use_defaults:
            return default_answer(s, choice, options)  # GR-D06
        if (len(options) == 1 and s.config.auto_single_option and choice not in OPTIONAL_CHOICES
                and choice != COPY):
            return options[0]
        self.emit(ev.choice_opened(self.seat, choice, step))
        return ASKED

    def _preset(self, choice: str, options: list[Any], answer: Any) -> Any:
        """An advance answer from the PullCaper, checked like a follow-up command (GR-D03, GR-D07)."""
        if answer is None and choice in OPTIONAL_CHOICES:
            return None
        if choice in (ABDUCT, KIDNAP, HIT):
            answer = next((o for o in options if (o[0], o[2]) == answer), answer)
        if answer not in options:
            raise RuleViolation(CHOICE_RULE[choice], f"{answer!r} is not a legal {choice} choice now")
        return answer
