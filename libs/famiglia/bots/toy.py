"""High Card: a tiny hidden-information game that exercises bots without a real engine.

It is not one of the four games and is never in `default_registry()`; tests and
the strength benchmark use it to check the bot machinery (views only, ISMCTS
determinization, clocks, the Celery path) even before or beside the real engines.

Rules: 2-4 seats, each dealt `hand` cards (1..13, one deck) face down. On each
trick the seats play one card in turn order starting with the last trick's
winner; the highest card takes the trick and scores the sum of its cards. After
`hand` tricks the highest score wins. A turn clock (`clock_s`) plays the lowest
card on expiry. Its messages are `protos/famiglia/testgames/highcard/v1/highcard.proto`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from famiglia.engine import (
    PUBLIC,
    DecisionKind,
    GameInfo,
    MatchConfig,
    OptionSpec,
    Pending,
    Result,
    Rng,
    RuleViolation,
    SeatOutcome,
    private_to,
)
from famiglia.engine.registry import Registry
from famiglia.testgames.highcard.v1 import highcard_pb2 as pb

GAME_ID = "highcard"
Msg = Any  # the generated classes' constructors take dicts for sub-messages; keep call sites terse
Command = pb.Command
Event = pb.Event
View = pb.View


@dataclass(frozen=True, slots=True)
class State:
    seats: int
    hand_size: int
    clock_s: int
    hands: tuple[tuple[int, ...], ...] = ()
    scores: tuple[int, ...] = ()
    trick: tuple[int, ...] = ()  # cards played this trick, in play order
    leader: int = 0
    seen: tuple[int, ...] = ()   # every card played so far (public)
    tricks_done: int = 0

    @property
    def turn(self) -> int:
        return (self.leader + len(self.trick)) % self.seats

    @property
    def over(self) -> bool:
        return self.tricks_done >= self.hand_size


def play(card: int) -> Msg:
    return Command(play=pb.Play(card=card))


class HighCard:
    """The Decider for High Card (see the module docstring)."""

    info = GameInfo(
        game_id=GAME_ID, title="High Card (bot test game)", min_players=2, max_players=4,
        options=(OptionSpec("hand", "4", "cards per hand"), OptionSpec("clock_s", "0", "turn clock, seconds")),
        max_steps=64, command_type=Command, event_type=Event, view_type=View,
    )

    def setup(self, config: MatchConfig, seed: int) -> list[Message]:
        if not 2 <= config.seats <= 4:
            raise RuleViolation("HC-1", "High Card takes 2 to 4 seats")
        hand = int(config.options.get("hand", "4"))
        if not 1 <= hand <= 13 // config.seats:
            raise RuleViolation("HC-1", "not enough cards for that hand size")
        deck = Rng(seed).shuffled(range(1, 14))
        events: list[Message] = [Event(seated=pb.Seated(seats=config.seats, hand=hand,
                                                        clock_s=int(config.options.get("clock_s", "0"))))]
        for s in range(config.seats):
            events.append(Event(dealt=pb.Dealt(seat=s, cards=sorted(deck[s * hand:(s + 1) * hand]))))
        return events

    def evolve(self, state: State | None, event: Msg) -> State:
        kind = event.WhichOneof("kind")
        if kind == "seated":
            e = event.seated
            return State(e.seats, e.hand, e.clock_s, hands=((),) * e.seats, scores=(0,) * e.seats)
        assert state is not None
        if kind == "dealt":
            hands = list(state.hands)
            hands[event.dealt.seat] = tuple(event.dealt.cards)
            return dataclasses.replace(state, hands=tuple(hands))
        seat, card = event.played.seat, event.played.card
        hands = list(state.hands)
        hands[seat] = tuple(c for c in hands[seat] if c != card)
        trick = state.trick + (card,)
        state = dataclasses.replace(state, hands=tuple(hands), trick=trick, seen=state.seen + (card,))
        if len(trick) < state.seats:
            return state
        winner = (state.leader + trick.index(max(trick))) % state.seats
        scores = list(state.scores)
        scores[winner] += sum(trick)
        return dataclasses.replace(state, scores=tuple(scores), trick=(), leader=winner,
                                   tricks_done=state.tricks_done + 1)

    def decide(self, state: State, seat: int, command: Msg, rng: Rng) -> list[Message]:
        if command.WhichOneof("kind") != "play":
            raise RuleViolation("HC-2", "the only command is play")
        if state.over or seat != state.turn:
            raise RuleViolation("HC-2", "not your turn")
        if command.play.card not in state.hands[seat]:
            raise RuleViolation("HC-3", "that card is not in your hand")
        return [Event(played=pb.Played(seat=seat, card=command.play.card))]

    def pending(self, state: State) -> list[Pending]:
        if state.over:
            return []
        return [Pending(state.turn, DecisionKind.TURN, "play", timeout_seconds=float(state.clock_s))]

    def legal_commands(self, state: State, seat: int, limit: int | None = None, *, rng: Any = None) -> list[Message]:
        if state.over or seat != state.turn:
            return []
        return [play(c) for c in state.hands[seat]][: limit or None]

    def view(self, state: State, viewer: int | None) -> Msg:
        v: Msg = View(viewer=-1 if viewer is None else viewer, seats=state.seats, hand_sizes=[len(h) for h in state.hands],
                 scores=list(state.scores), trick=list(state.trick), leader=state.leader,
                 turn=-1 if state.over else state.turn, seen=list(state.seen), over=state.over)
        if viewer is not None:
            v.hand.extend(state.hands[viewer])
        return v

    def visibility(self, event: Msg):
        if event.WhichOneof("kind") == "dealt":
            return private_to(event.dealt.seat)
        return PUBLIC

    def redact(self, event: Msg, viewer: int | None) -> Message | None:
        return event if self.visibility(event).allows(viewer) else None

    def result(self, state: State) -> Result | None:
        if not state.over:
            return None
        return Result(tuple(SeatOutcome(s, float(score), 1 + sum(o > score for o in state.scores))
                            for s, score in enumerate(state.scores)))

    def timeout_command(self, state: State, seat: int) -> Message | None:
        if state.over or seat != state.turn:
            return None
        return play(min(state.hands[seat]))

    def render_state(self, state: State) -> str:
        return f"hands:{state.hands} scores:{state.scores} trick:{state.trick} turn:{state.turn}"

    def render_command(self, command: Msg) -> str:
        return f"play {command.play.card}"

    def render_event(self, event: Msg) -> str:
        return str(event).replace("\n", " ")

    def determinize(self, view: Msg, seat: int, rng: Rng) -> State:
        """Deal the cards `seat` cannot see at random among the other hands."""
        seats = len(view.hand_sizes)
        unseen = [c for c in range(1, 14) if c not in set(view.hand) | set(view.seen)]
        rng.shuffle(unseen)
        hands: list[tuple[int, ...]] = []
        for s in range(seats):
            if s == seat:
                hands.append(tuple(view.hand))
            else:
                n = view.hand_sizes[s]
                hands.append(tuple(sorted(unseen[:n])))
                unseen = unseen[n:]
        tricks_done = (len(view.seen) - len(view.trick)) // seats
        played_now = (seat - view.leader) % seats < len(view.trick)
        hand_size = tricks_done + len(view.hand) + int(played_now)
        return State(seats, hand_size, 0, tuple(hands), tuple(view.scores), tuple(view.trick), view.leader,
                     tuple(view.seen), tricks_done)


ENGINE = HighCard()


def toy_registry(base: Registry | None = None) -> Registry:
    """`base`'s engines plus High Card."""
    engines = {} if base is None else {g: base.get(g) for g in base}
    engines[GAME_ID] = ENGINE
    return Registry(engines)
