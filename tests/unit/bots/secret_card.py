"""Secret High Card: High Card with every trick played as a simultaneous secret choice —
a test game for decide tasks that carry several seats (never registered).

Each trick every seat that has not played yet is asked at once; a card played stays
hidden from the other seats (their views show no card of the trick) until the trick
is complete. With `parity=1`, once a card is on the trick the others must play one of
the same parity if they can: an earlier seat's command changes what a later one may do.
Its messages are High Card's."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from famiglia.bots.toy import ENGINE as HIGHCARD
from famiglia.bots.toy import HighCard, play, toy_registry
from famiglia.engine import (
    DecisionKind,
    GameInfo,
    MatchConfig,
    OptionSpec,
    Pending,
    Rng,
    RuleViolation,
    private_to,
)
from famiglia.engine.registry import Registry
from famiglia.testgames.highcard.v1 import highcard_pb2 as pb

GAME_ID = "secretcard"


@dataclass(frozen=True, slots=True)
class State:
    seats: int
    hand_size: int
    parity: bool
    hands: tuple[tuple[int, ...], ...] = ()
    scores: tuple[int, ...] = ()
    played: tuple[tuple[int, int], ...] = ()
    """(seat, card) on the current trick, in play order"""
    seen: tuple[int, ...] = ()
    tricks_done: int = 0

    @property
    def over(self) -> bool:
        return self.tricks_done >= self.hand_size

    def waiting(self) -> list[int]:
        done = {s for s, _ in self.played}
        return [] if self.over else [s for s in range(self.seats) if s not in done]


class SecretCard(HighCard):
    info = GameInfo(
        game_id=GAME_ID, title="Secret High Card (test game)", min_players=2, max_players=4,
        options=(OptionSpec("hand", "3", "cards per hand"), OptionSpec("parity", "0", "follow parity")),
        max_steps=64, command_type=pb.Command, event_type=pb.Event, view_type=pb.View,
    )

    def setup(self, config: MatchConfig, seed: int) -> list[Message]:
        events = HIGHCARD.setup(MatchConfig(config.seats, {"hand": config.options.get("hand", "3")}), seed)
        events[0].seated.clock_s = int(config.options.get("parity", "0"))  # carried in clock_s: parity on/off
        return events

    def render_state(self, state: State) -> str:
        return f"hands:{state.hands} scores:{state.scores} played:{state.played}"

    def evolve(self, state: Any, event: Any) -> State:
        kind = event.WhichOneof("kind")
        if kind == "seated":
            e = event.seated
            return State(e.seats, e.hand, bool(e.clock_s), hands=((),) * e.seats, scores=(0,) * e.seats)
        if kind == "dealt":
            hands = list(state.hands)
            hands[event.dealt.seat] = tuple(event.dealt.cards)
            return dataclasses.replace(state, hands=tuple(hands))
        seat, card = event.played.seat, event.played.card
        hands = list(state.hands)
        hands[seat] = tuple(c for c in hands[seat] if c != card)
        played = state.played + ((seat, card),)
        state = dataclasses.replace(state, hands=tuple(hands), played=played)
        if len(played) < state.seats:
            return state
        winner, best = max(played, key=lambda p: p[1])
        scores = list(state.scores)
        scores[winner] += sum(c for _, c in played)
        return dataclasses.replace(state, scores=tuple(scores), played=(), seen=state.seen + tuple(c for _, c in played),
                                   tricks_done=state.tricks_done + 1)

    def _allowed(self, state: State, seat: int) -> list[int]:
        hand = list(state.hands[seat])
        if state.parity and state.played:
            same = [c for c in hand if c % 2 == state.played[0][1] % 2]
            return same or hand
        return hand

    def decide(self, state: State, seat: int, command: Any, rng: Rng) -> list[Message]:
        if command.WhichOneof("kind") != "play":
            raise RuleViolation("SC-2", "the only command is play")
        if seat not in state.waiting():
            raise RuleViolation("SC-2", "not your turn")
        if command.play.card not in self._allowed(state, seat):
            raise RuleViolation("SC-3", "that card may not be played")
        return [pb.Event(played=pb.Played(seat=seat, card=command.play.card))]

    def pending(self, state: State) -> list[Pending]:
        return [Pending(s, DecisionKind.SECRET_CHOICE, "play") for s in state.waiting()]

    def legal_commands(self, state: State, seat: int, limit: int | None = None, *, rng: Any = None) -> list[Message]:
        if seat not in state.waiting():
            return []
        return [play(c) for c in self._allowed(state, seat)][: limit or None]

    def view(self, state: State, viewer: int | None) -> Any:
        own = [c for s, c in state.played if s == viewer]
        v = pb.View(viewer=-1 if viewer is None else viewer, seats=state.seats,
                    hand_sizes=[len(h) for h in state.hands], scores=list(state.scores), trick=own,
                    turn=-1, seen=list(state.seen), over=state.over)
        if viewer is not None:
            v.hand.extend(state.hands[viewer])
        return v

    def visibility(self, event: Any):
        kind = event.WhichOneof("kind")
        if kind == "dealt":
            return private_to(event.dealt.seat)
        if kind == "played":
            return private_to(event.played.seat)
        return super().visibility(event)

    def timeout_command(self, state: State, seat: int) -> Message | None:
        allowed = self._allowed(state, seat) if seat in state.waiting() else []
        return play(min(allowed)) if allowed else None

    def determinize(self, view: Any, seat: int, rng: Rng) -> State:
        raise NotImplementedError("not for searching policies")


ENGINE = SecretCard()


def secret_registry() -> Registry:
    base = toy_registry()
    return Registry({**{g: base.get(g) for g in base}, GAME_ID: ENGINE})
