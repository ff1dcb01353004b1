"""The turn clocks wound over a match's fold (`famiglia.clocks`, `MatchState.deadlines`): one
pure function of the events and their stamps, which the bots' dispatcher enforces and the
command service shows each seat as its `deadline_ms` (docs/bots.md, "Turn clocks")."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from famiglia.bots.toy import toy_registry
from famiglia.clocks import TurnClocks, answers
from famiglia.engine import DecisionKind, MatchConfig, Pending, Rng, clock_key, command_kind, fold
from famiglia.engine.registry import default_registry
from famiglia.eventstore.envelopes import game_envelopes, match_created_envelope
from famiglia.matchstate import MatchState
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb
from famiglia.v1 import envelope_pb2

REGISTRY = toy_registry(default_registry())
T0 = 1_700_000_000_000  # ms


class Played:
    """A match played on its engine with its events stamped by the test's clock, as the command
    service stores them (seats in `bots` are the bots')."""

    def __init__(self, game: str, seats: int, seed: int, options: dict[str, str] | None = None,
                 bots: tuple[int, ...] = ()) -> None:
        self.engine, self.seed, self.ms = REGISTRY.get(game), seed, T0
        created = envelope_pb2.MatchCreated(game_id=game, seats=seats, seed=seed)
        created.options.update(options or {})
        for seat in bots:
            created.seat_info.add(seat=seat, bot=True, policy="random")
        setup = self.engine.setup(MatchConfig(seats, dict(options or {})), seed)
        self.envelopes = [match_created_envelope("m", created, now_ms=self.ms)]
        self.envelopes += game_envelopes(self.engine, "m", 1, setup, seat=-1, now_ms=self.ms)
        self.state = fold(self.engine, setup)
        self.live = MatchState.from_envelopes(REGISTRY, self.envelopes, clocks=True)

    @property
    def now(self) -> float:
        return self.ms / 1000

    def timed(self) -> list:
        return [p for p in self.engine.pending(self.state) if p.timeout_seconds > 0]

    def play(self, seat: int, command, after: float = 0.0) -> None:
        self.ms += round(after * 1000)
        version = len(self.envelopes)
        events = self.engine.decide(self.state, seat, command, Rng.derive(self.seed, version))
        envelopes = game_envelopes(self.engine, "m", version, events, command_id=f"c{version}", seat=seat,
                                   now_ms=self.ms, command=command)
        self.envelopes += envelopes
        for event in events:
            self.state = self.engine.evolve(self.state, event)
        self.live.apply(envelopes)

    def default(self, seat: int, after: float = 0.0) -> None:
        self.play(seat, self.engine.timeout_command(self.state, seat), after)

    def kinds(self, seat: int) -> dict[str, list]:
        out: dict[str, list] = {}
        for command in self.engine.legal_commands(self.state, seat):
            out.setdefault(command_kind(command), []).append(command)
        return out

    def deadlines(self) -> dict[int, float]:
        return dict(self.live.deadlines())

    def refolded(self, cuts: list[int] | None = None) -> dict[int, float]:
        """The deadlines of the match folded anew from its events (a restart, another replica),
        read in pieces cut at `cuts` (anywhere, a command's events too)."""
        match = MatchState.start(REGISTRY, self.envelopes[0], clocks=True)
        bounds = [1, *sorted(cuts or []), len(self.envelopes)]
        for start, end in zip(bounds, bounds[1:], strict=False):
            match.apply(self.envelopes[start:end])
        return dict(match.deadlines())


GAMES = [("highcard", 2, {"hand": "6", "clock_s": "30"}), ("goodcritters", 4, {}),
         ("goodcritters", 4, {"step3_mode": "turns"}), ("nostra_city", 3, {}), ("nothing_personal", 3, {}),
         ("grifters", 3, {})]


@pytest.mark.parametrize(("game", "seats", "options"), GAMES)
def test_a_seats_deadline_follows_from_the_events_alone_and_another_seats_move_never_stretches_it(
        game: str, seats: int, options: dict[str, str]) -> None:
    """Every game's clocks, named and unnamed, over a random walk with random pauses: folded
    anew from the events however they are read (a restarted dispatcher, a second replica, a
    read cut inside a command), the deadlines are the same; another seat's command (an asked
    one's, or an optional move's) never moves a deadline of a seat asked before and after it in
    the same decision, nor does the seat's own optional move (a chat, an offer: NP-D1, one
    timeout a decision); a seat's own answer starts an unnamed clock afresh and leaves a named
    one that stays asked where it was."""
    played, pick = Played(game, seats, 7, options), random.Random(7)
    engine, checked = played.engine, {"other": 0, "own": 0, "optional": 0, "afresh": 0, "anew": 0}
    optional = engine.info.optional_commands
    for step in range(220):
        asked = played.timed()
        if not asked:
            break
        before = played.deadlines()
        keys = {p.seat: (clock_key(engine, played.state, p), p.kind, p.label, p.timeout_seconds) for p in asked}
        assert set(before) == set(keys)
        others = [s for s in range(seats) if s not in keys and engine.legal_commands(played.state, s)]
        seat = pick.choice(others) if others and pick.random() < 0.2 else pick.choice(asked).seat
        command = pick.choice(engine.legal_commands(played.state, seat))
        played.play(seat, command, after=pick.choice([0.0, 0.25, 3.0, 17.0]))
        after = played.deadlines()
        for p in played.timed():
            key = (clock_key(engine, played.state, p), p.kind, p.label, p.timeout_seconds)
            assert after[p.seat] <= played.now + p.timeout_seconds + 1e-9  # never more than its length
            if keys.get(p.seat) != key:  # asked anew, another decision: unnamed, it starts now
                assert key[0] or after[p.seat] == pytest.approx(played.now + p.timeout_seconds), (step, p)
                checked["anew"] += 1
            elif p.seat != seat:
                assert after[p.seat] == before[p.seat], (step, p)
                checked["other"] += 1
            elif key[0]:
                assert after[p.seat] == before[p.seat], (step, p)  # a named clock runs on
                checked["own"] += 1
            elif command_kind(command) in optional:
                assert after[p.seat] == before[p.seat], (step, p)  # so does a decision not answered
                checked["optional"] += 1
            else:
                assert after[p.seat] == pytest.approx(played.now + p.timeout_seconds), (step, p)
                checked["afresh"] += 1
        if step % 9 == 0:
            cuts = pick.sample(range(2, len(played.envelopes)), k=min(6, len(played.envelopes) - 2))
            assert played.refolded() == after == played.refolded(cuts)
    assert sum(checked.values()) > 10, checked
    if game == "nothing_personal":  # chats, offers and shakedowns of a seat asked came up
        assert checked["optional"] > 0, checked


def _goodcritters_step3(options: dict[str, str] | None = None) -> Played:
    played = Played("goodcritters", 4, 3, options)
    for _ in range(80):
        asked = played.timed()
        if len(asked) >= 2:
            return played
        played.default(asked[0].seat, after=2.0)
    raise AssertionError("no Step 3 reached")


def test_the_goodcritters_step3_deadline_is_one_for_every_seat_and_never_extended_GC_D05() -> None:
    played = _goodcritters_step3()
    start = played.now
    asked = [p.seat for p in played.timed()]
    assert played.deadlines() == {s: start + 120.0 for s in asked}  # timeouts.step3_s, from the step's start
    mover, committer = asked[0], asked[1]
    played.play(mover, played.kinds(mover)["place_threat"][0], after=40.0)
    played.default(committer, after=10.0)
    assert committer not in played.deadlines()
    played.play(mover, played.kinds(mover)["place_threat"][0], after=20.0)  # GC-D04: the committer asked again
    assert committer in {p.seat for p in played.timed()}
    assert set(played.deadlines().values()) == {start + 120.0}


def test_a_nostra_city_turn_clock_stands_still_while_a_choice_inside_it_is_asked_NC_D02() -> None:
    """120 s a phase turn, 45 s a choice (each on its own clock): the turn's deadline moves on by
    exactly the time its choices took, and a choice's deadline is its own."""
    for seed in range(1, 12):
        played, pick = Played("nostra_city", 3, seed), random.Random(seed)
        for _ in range(1500):
            state, asked = played.state, played.timed()
            if not asked:
                break
            seat = asked[0].seat
            actions = {k: c for k, c in played.kinds(seat).items() if k not in ("end_turn", "play_revenge")}
            if state.choice is not None or not actions:
                played.default(seat, after=pick.choice([0.0, 1.0]))
                continue
            phase, turn = state.phase, played.deadlines()[seat]
            played.play(seat, next(iter(actions.values()))[0], after=30.0)
            stood = 0.0
            while (state := played.state).choice is not None:
                chooser = state.choice.seat
                assert played.deadlines() == {chooser: pytest.approx(played.now + 45.0)}
                played.default(chooser, after=5.0)
                stood += 5.0
            if stood and (played.state.phase, played.state.turn_seat) == (phase, seat):
                assert played.deadlines() == {seat: pytest.approx(turn + stood)}
                return
    raise AssertionError("no turn went on after a choice inside it")


def test_an_unnamed_clock_starts_afresh_at_the_seats_own_command_and_a_bot_seat_has_none() -> None:
    played = Played("highcard", 2, 5, {"hand": "4", "clock_s": "30"}, bots=(1,))
    assert played.live.clocks is not None and played.live.clocks.people == {0}
    for _ in range(8):
        asked = played.timed()
        if not asked:
            break
        seat = asked[0].seat
        expected = {0: pytest.approx(played.now + 30.0)} if seat == 0 else {}
        assert played.deadlines() == expected
        played.default(seat, after=12.5)
    bots_only = Played("highcard", 2, 5, {"hand": "4", "clock_s": "30"}, bots=(0, 1))
    assert bots_only.live.clocks is None and bots_only.deadlines() == {}


def _np_commission_again(seed: int) -> tuple[Played, int]:
    """A Nothing Personal match of people in round 1's Commission, where the seat asked is asked
    its next turn as soon as it plays (the others have passed, NP-C1)."""
    played = Played("nothing_personal", 3, seed)
    while not (played.state.phase == "commission" and played.state.round == 1):
        played.default(played.timed()[0].seat, after=1.0)
    player = played.timed()[0].seat
    for _ in range(12):
        seat = played.timed()[0].seat
        if seat == player and played.state.passed == frozenset(range(3)) - {player}:
            return played, player
        if seat == player:
            kinds = played.kinds(seat)
            played.play(seat, (kinds.get("play_for_influence") or kinds["discard_for_marker"])[0], after=2.0)
        else:
            played.default(seat, after=2.0)
    raise AssertionError("the others never all passed")


def test_a_nothing_personal_seat_that_chats_keeps_its_decisions_deadline_and_its_answer_starts_the_next_NP_D1(
) -> None:
    """NP-D1: one timeout a decision. A seat asked may chat (10 a phase), offer, shake down or
    set its auto-pass meanwhile (NP-R6, NP-M9, NP-M10): none answers the decision, so none
    restarts its clock. Each did, and put a 60 s Commission turn's default off by up to a minute
    a chat, offer or auto-pass change (15 a phase) or shakedown. Its answer (a play, after which it is asked its next turn at once) starts the
    next one afresh."""
    played, seat = _np_commission_again(1)
    asked = played.now
    assert played.deadlines() == {seat: asked + 60.0}  # NP-D4
    others = [s for s in range(3) if s != seat]
    chat = pb.Command(send_chat=pb.SendChat(text="nothing personal"))
    for _ in range(3):
        played.play(seat, chat, after=15.0)
    played.play(seat, pb.Command(offer_deal=pb.OfferDeal(to=others[0], give_money=1)), after=5.0)
    played.play(seat, pb.Command(set_auto_pass=pb.SetAutoPass(cards=True)), after=5.0)
    shakedown = pb.Command(shakedown=pb.Shakedown(cards=played.state.hands[seat][:1]))  # NP-M1: $8 a card
    played.play(seat, shakedown, after=2.0)  # two events: a read may cut it
    played.play(others[1], chat, after=3.0)
    assert [p.seat for p in played.timed()] == [seat] and played.now == asked + 60.0
    assert played.deadlines() == {seat: asked + 60.0}  # the decision's own, from when it was asked
    for cut in range(2, len(played.envelopes)):  # however the events are read
        assert played.refolded([cut]) == {seat: asked + 60.0}, cut
    kinds = played.kinds(seat)
    played.play(seat, (kinds.get("play_for_influence") or kinds["discard_for_marker"])[0], after=0.0)
    assert [p.label for p in played.timed()] == ["commission"] and played.timed()[0].seat == seat
    assert played.deadlines() == {seat: played.now + 60.0}  # its next turn: afresh
    played.play(seat, chat, after=59.0)
    assert played.deadlines() == {seat: played.now + 1.0}


def test_a_step_stamped_before_the_newest_event_starts_no_clock_before_it() -> None:
    """Times never go back (`TurnClocks`): a command stamped before the newest event (a held
    answer written out later keeps the stamp it was made at, NP-H9; a replica's clock behind)
    starts the next decision at the newest time, not before it."""
    played = Played("highcard", 2, 5, {"hand": "4", "clock_s": "30"})
    played.default(played.timed()[0].seat, after=10.0)
    newest = played.now
    played.default(played.timed()[0].seat, after=-5.0)  # stamped 5 s before the event it follows
    asked = played.timed()[0].seat
    assert played.deadlines() == {asked: newest + 30.0}
    assert played.refolded() == {asked: newest + 30.0}


def test_a_command_the_clocks_cannot_read_counts_as_an_answer() -> None:
    """`answers`: a command not known (stored without it, or not decodable) counts as an
    answer, as every command did before optional ones were told apart; a chat does not."""
    engine = REGISTRY.get("nothing_personal")
    assert answers(engine, b"\xff\xff\xff")
    assert answers(engine, b"")
    assert not answers(engine, pb.Command(send_chat=pb.SendChat(text="hi")).SerializeToString())


def test_a_seats_optional_move_that_asks_another_seat_leaves_its_own_deadline_NP_D1() -> None:
    """An optional move (an offer) that asks another seat to answer it changes who is asked, so
    the clocks are wound in full; the offering seat, asked the same decision, keeps its deadline
    (NP-D1: one timeout a decision), and its answer starts its next decision afresh. (A game's
    engine, reduced to what the clocks read: its info and who it asks.)"""
    engine = SimpleNamespace(info=REGISTRY.get("nothing_personal").info, pending=lambda state: state)
    turn = Pending(0, DecisionKind.TURN, "commission", timeout_seconds=60.0)
    reply = Pending(1, DecisionKind.RESPONSE, "deal", timeout_seconds=30.0)
    clocks, t0 = TurnClocks(people=frozenset({0, 1})), T0 / 1000
    clocks.note(engine, None, -1, "", T0)
    assert clocks.deadlines(engine, [turn]) == {0: t0 + 60.0}
    offer = pb.Command(offer_deal=pb.OfferDeal(to=1, give_money=1)).SerializeToString()
    clocks.note(engine, [turn], 0, "c2", T0 + 20_000, offer)
    assert clocks.deadlines(engine, [turn, reply]) == {0: t0 + 60.0, 1: t0 + 50.0}
    play = pb.Command(play_for_influence=pb.PlayForInfluence()).SerializeToString()
    clocks.note(engine, [turn, reply], 0, "c3", T0 + 25_000, play)
    assert clocks.deadlines(engine, [turn, reply]) == {0: t0 + 85.0, 1: t0 + 50.0}
