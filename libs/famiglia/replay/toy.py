"""Stash: a tiny game with secrets, for replay tests and the replay benchmark.

It is not one of the four games. The replay service must be testable (and
benchmarkable) before any real engine is registered and whatever the real ones
look like, so this one keeps every feature replay cares about, small:

- a server-only event (the deck order), private events (a seat's hand, a drawn
  card) beside public facts (a card was drawn), so redaction and "a seat token
  never reveals another seat's secrets" can be checked;
- chance in `decide` through the given `rng` (a die roll), so verification
  exercises `Rng.derive(seed, version_before)`;
- a bounded length (`turns` option), so a "long match" is one option away.

Its messages are `protos/famiglia/testgames/stash/v1/stash.proto`.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from famiglia.engine import (
    PUBLIC,
    SERVER_ONLY,
    DecisionKind,
    Engine,
    GameInfo,
    MatchConfig,
    OptionSpec,
    Pending,
    Result,
    Rng,
    RuleViolation,
    SeatOutcome,
    Visibility,
    private_to,
)
from famiglia.engine.protocol import default_redact
from famiglia.testgames.stash.v1 import stash_pb2 as pb

GAME_ID = "replay_toy"
@dataclass(frozen=True, slots=True)
class ToyState:
    seats: int
    deck: tuple[int, ...] = ()
    hands: tuple[tuple[int, ...], ...] = ()
    scores: tuple[int, ...] = ()
    turn: int = 0
    turns_taken: int = 0
    max_turns: int = 12
    dealt: bool = False


class ToyEngine:
    """The Decider of Stash (see the module docstring)."""

    def __init__(self) -> None:
        self.Event, self.Command, self.View = pb.Event, pb.Command, pb.View
        self.info = GameInfo(
            game_id=GAME_ID, title="Stash (replay test game)", min_players=2, max_players=4,
            options=(OptionSpec("turns", "12", "turns in the whole match"),
                     OptionSpec("deck", "30", "cards in the deck")),
            max_steps=100_000, command_type=self.Command, event_type=self.Event, view_type=self.View,
        )

    # -- setup and evolve ------------------------------------------------------------------
    def setup(self, config: MatchConfig, seed: int) -> list[Message]:
        if not 2 <= config.seats <= 4:
            raise RuleViolation("TOY-S01", "Stash is for 2 to 4 seats")
        options = {**self.info.defaults(), **config.options}
        deck = Rng.derive(seed, 0, "setup").shuffled(range(1, int(options["deck"]) + 1))
        events: list[Message] = [pb.Event(deck_shuffled=pb.DeckShuffled(order=deck))]
        for seat in range(config.seats):
            events.append(pb.Event(hand_dealt=pb.HandDealt(seat=seat, cards=deck[seat * 3:seat * 3 + 3])))
        events.append(pb.Event(cards_dealt=pb.CardsDealt(per_seat=3, turns=int(options["turns"]))))
        return events

    def evolve(self, state: ToyState | None, event: Message) -> ToyState:
        kind = event.WhichOneof("kind")
        body: Any = getattr(event, kind)
        if kind == "deck_shuffled":
            # The seat count is not in the event: it is the number of hand_dealt events that follow.
            return ToyState(seats=0, deck=tuple(body.order))
        assert state is not None
        if kind == "hand_dealt":
            hands = (*state.hands, tuple(body.cards))
            return dataclasses.replace(state, seats=len(hands), hands=hands, deck=state.deck[3:],
                                       scores=(*state.scores, 0))
        if kind == "cards_dealt":
            return dataclasses.replace(state, dealt=True, max_turns=body.turns)
        if kind == "card_drawn":
            return state
        if kind == "card_taken":
            return dataclasses.replace(state, deck=state.deck[1:],
                                       hands=_with(state.hands, body.seat, (*state.hands[body.seat], body.card)))
        if kind == "card_stashed":
            hand = list(state.hands[body.seat])
            hand.remove(body.card)
            return self._next_turn(dataclasses.replace(
                state, hands=_with(state.hands, body.seat, tuple(hand)),
                scores=_with(state.scores, body.seat, state.scores[body.seat] + body.card)))
        if kind == "dice_rolled":
            return self._next_turn(dataclasses.replace(
                state, scores=_with(state.scores, body.seat, state.scores[body.seat] + body.value)))
        raise ValueError(f"unknown event {kind}")

    @staticmethod
    def _next_turn(state: ToyState) -> ToyState:
        return dataclasses.replace(state, turn=(state.turn + 1) % state.seats, turns_taken=state.turns_taken + 1)

    # -- decide -----------------------------------------------------------------------------
    def decide(self, state: ToyState, seat: int, command: Any, rng: Rng) -> list[Message]:
        if self.result(state) is not None:
            raise RuleViolation("TOY-T00", "the match is over")
        if seat != state.turn:
            raise RuleViolation("TOY-T01", f"it is seat {state.turn}'s turn")
        kind = command.WhichOneof("kind")
        if kind == "draw":
            if not state.deck:
                raise RuleViolation("TOY-T02", "the deck is empty")
            card = state.deck[0]
            # Drawing does not end the turn: the fact is public, the card private.
            return [pb.Event(card_drawn=pb.CardDrawn(seat=seat)),
                    pb.Event(card_taken=pb.CardTaken(seat=seat, card=card))]
        if kind == "stash":
            if command.stash.card not in state.hands[seat]:
                raise RuleViolation("TOY-T03", "you can only stash a card from your hand")
            return [pb.Event(card_stashed=pb.CardStashed(seat=seat, card=command.stash.card))]
        if kind == "roll":
            return [pb.Event(dice_rolled=pb.DiceRolled(seat=seat, value=rng.die(6)))]
        raise RuleViolation("TOY-T04", f"unknown command {kind!r}")

    def pending(self, state: ToyState) -> list[Pending]:
        if state is None or self.result(state) is not None:
            return []
        return [Pending(state.turn, DecisionKind.TURN, "turn")]

    def legal_commands(self, state: ToyState, seat: int, limit: int | None = None, *, rng: Any = None) -> list[Message]:
        if seat != state.turn or self.result(state) is not None:
            return []
        out: list[Message] = [pb.Command(roll=pb.Roll())]
        if state.deck and len(state.hands[seat]) < 6:
            out.append(pb.Command(draw=pb.Draw()))
        out.extend(pb.Command(stash=pb.Stash(card=c)) for c in sorted(set(state.hands[seat])))
        return out[:limit] if limit else out

    # -- views ------------------------------------------------------------------------------
    def view(self, state: ToyState, viewer: int | None) -> Message:
        v: Any = self.View(seat=-1 if viewer is None else viewer, hand_sizes=[len(h) for h in state.hands],
                      scores=list(state.scores), deck_size=len(state.deck), turn=state.turn,
                      over=self.result(state) is not None)
        if viewer is not None and 0 <= viewer < len(state.hands):
            v.hand.extend(state.hands[viewer])
        return v

    def visibility(self, event: Message) -> Visibility:
        kind = event.WhichOneof("kind")
        if kind == "deck_shuffled":
            return SERVER_ONLY
        if kind in ("hand_dealt", "card_taken"):
            return private_to(getattr(event, kind).seat)
        return PUBLIC

    def redact(self, event: Message, viewer: int | None) -> Message | None:
        return default_redact(self, event, viewer)

    def result(self, state: ToyState | None) -> Result | None:
        if state is None or not state.dealt or state.turns_taken < state.max_turns:
            return None
        best = sorted(set(state.scores), reverse=True)
        return Result(tuple(SeatOutcome(s, float(v), best.index(v) + 1) for s, v in enumerate(state.scores)))

    def timeout_command(self, state: ToyState, seat: int) -> Message | None:
        return pb.Command(roll=pb.Roll())

    # -- text -------------------------------------------------------------------------------
    def render_state(self, state: ToyState | None) -> str:
        if state is None:
            return "(no state)"
        hands = " ".join(f"s{i}:{list(h)}" for i, h in enumerate(state.hands))
        return (f"turn:{state.turn} taken:{state.turns_taken}/{state.max_turns} deck:{list(state.deck[:5])}.. "
                f"hands:{hands} scores:{list(state.scores)}")

    def render_command(self, command: Any) -> str:
        kind = command.WhichOneof("kind") or "?"
        return f"{kind}:{command.stash.card}" if kind == "stash" else kind

    def render_event(self, event: Message) -> str:
        kind = event.WhichOneof("kind") or "?"
        body = getattr(event, kind) if kind != "?" else event
        fields = " ".join(f"{f.name}={v if not isinstance(v, list) else list(v)}" for f, v in body.ListFields())
        return f"{kind} {fields}".strip()

    def determinize(self, view: Message, seat: int, rng: Rng) -> ToyState:
        raise NotImplementedError("Stash has no search bots")


def _with(values: tuple, index: int, value: Any) -> tuple:
    return (*values[:index], value, *values[index + 1:])


@functools.cache
def toy_engine() -> Engine:
    engine = ToyEngine()
    assert isinstance(engine, Engine)
    return engine
