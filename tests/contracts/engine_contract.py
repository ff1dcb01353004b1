"""The engine contract suite: every game binds it in one line.

    class TestGoodCrittersContract(EngineContract):
        engine = goodcritters.ENGINE

A binding may override `options_strategy()` to vary match options and must
implement `perturb_hidden(state, viewer, rng)`: a state that differs from
`state` only in what `viewer` may not know (other seats' secrets, deck orders).
The no-leak check demands that the viewer's view is byte-identical for both, and
so for a world the engine's own `determinize` deals from the viewer's view.
`own_view_fields` names the View fields that are the viewer's own (its seat,
its settings): once the match is over every viewer's view is the same but for them.
`options_strategy()` draws each value in the game's own spelling (as its View shows it back):
every View's `options` holds every option of the game with the value the match is played by.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterable
from typing import Any, ClassVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from famiglia.engine import (
    Engine,
    MalformedCommand,
    MatchConfig,
    Rng,
    RuleViolation,
    Sampled,
    clock_key,
    fold,
    pending_for,
)
from famiglia.engine.protocol import command_kind
from famiglia.testing.random_play import Step, play_random
from tests.contracts.command_fuzz import composed, mutated, vocabulary
from tests.profile import examples

CONTRACT_SETTINGS = settings(
    max_examples=examples(quick=6, soak=400),
    deadline=None,
    # One base method runs for every bound game: the executors differ by design.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.differing_executors],
    derandomize=False,
)


class EngineContract:
    engine: ClassVar[Engine]
    #: check every Nth step in the expensive per-step checks (quick profile)
    check_every: ClassVar[int] = 3
    #: View fields that are the viewer's own (its seat number, its own settings)
    own_view_fields: ClassVar[frozenset[str]] = frozenset({"viewer"})
    #: seats whose `determinize` world is checked on each checked state (all of them in the soak)
    worlds_per_state: ClassVar[int] = examples(quick=1, soak=99)
    #: unlisted commands tried on each checked state (test_unlisted_commands_...)
    fuzz_per_state: ClassVar[int] = examples(quick=6, soak=24)

    # -- binding hooks -------------------------------------------------------------------
    @classmethod
    def options_strategy(cls) -> st.SearchStrategy[dict[str, str]]:
        return st.just({})

    def perturb_hidden(self, state: Any, viewer: int | None, rng: random.Random) -> Any:
        raise NotImplementedError("bind perturb_hidden to check that views do not leak")

    def compound_candidates(self, state: Any, seat: int) -> Iterable[Any]:
        """Brute force over the game's compound choices: every command of those kinds that
        `seat` could try now (each team, split, target set, amount...), legal or not; the
        coverage check keeps those `decide` accepts. A game without compound choices yields
        nothing."""
        return ()

    # -- helpers ---------------------------------------------------------------------------
    @classmethod
    def seats_strategy(cls) -> st.SearchStrategy[int]:
        info = cls.engine.info
        return st.integers(info.min_players, info.max_players)

    def _play(self, seats: int, seed: int, options: dict[str, str], on_step=None, sampler=None):
        return play_random(self.engine, seats, seed, options, on_step=on_step, sampler=sampler)

    def _accepts(self, state: Any, seat: int, command: Any, seed: int, version: int) -> bool:
        try:
            self.engine.decide(state, seat, command, Rng.derive(seed, version))
        except RuleViolation:
            return False
        return True

    # -- the contract ------------------------------------------------------------------------
    def test_info_is_complete(self) -> None:
        info = self.engine.info
        assert info.game_id and info.title
        assert 1 <= info.min_players <= info.max_players
        assert info.command_type is not None and info.event_type is not None and info.view_type is not None
        keys = [o.key for o in info.options]
        assert len(keys) == len(set(keys)), "option keys are unique"
        for opt in info.options:
            assert not opt.choices or opt.default in opt.choices, opt.key

    def test_a_match_without_options_shows_every_default(self) -> None:
        """docs/engines.md, "The options in a View": a client shows one options screen for any
        game, so every View lists every option of the game, defaults included."""
        info = self.engine.info
        for seats in {info.min_players, info.max_players}:
            state = fold(self.engine, self.engine.setup(MatchConfig(seats=seats), 7))
            for viewer in [None, *range(seats)]:
                assert shown_options(self.engine.view(state, viewer)) == info.defaults(), (
                    f"{seats} seats, viewer {viewer}: the options shown are not the game's defaults")

    @CONTRACT_SETTINGS
    @given(data=st.data())
    def test_views_show_the_options_the_match_is_played_by(self, data: st.DataObject) -> None:
        """Every View's `options`: every option of the game, each with the value the match is
        played by (the one it was created with, else the default). A match created with exactly
        what a View shows is played by the same rules: the same views, the same asks and clocks."""
        seats = data.draw(self.seats_strategy(), label="seats")
        seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
        options = data.draw(self.options_strategy(), label="options")
        engine = self.engine
        state = fold(engine, engine.setup(MatchConfig(seats, options), seed))
        played = {**engine.info.defaults(), **options}
        for viewer in [None, *range(seats)]:
            shown = shown_options(engine.view(state, viewer))
            assert shown == played, f"viewer {viewer}: {_differing_options(shown, played)}"
        again = fold(engine, engine.setup(MatchConfig(seats, played), seed))
        for viewer in [None, *range(seats)]:
            assert self._view(again, viewer) == self._view(state, viewer), f"viewer {viewer} sees another match"
        assert engine.pending(again) == engine.pending(state), "a match with the shown options asks otherwise"

    def test_refuses_bad_seat_counts(self) -> None:
        info = self.engine.info
        for seats in (info.min_players - 1, info.max_players + 1):
            try:
                self.engine.setup(MatchConfig(seats=seats), 1)
            except RuleViolation as exc:
                assert exc.code
            else:
                raise AssertionError(f"setup accepted {seats} seats")

    def test_setup_is_deterministic(self) -> None:
        info = self.engine.info
        a = self.engine.setup(MatchConfig(seats=info.min_players), 42)
        b = self.engine.setup(MatchConfig(seats=info.min_players), 42)
        assert [e.SerializeToString(deterministic=True) for e in a] == [
            e.SerializeToString(deterministic=True) for e in b
        ]

    @CONTRACT_SETTINGS
    @given(data=st.data())
    def test_random_games_terminate_and_fold_deterministically(self, data: st.DataObject) -> None:
        seats = data.draw(self.seats_strategy(), label="seats")
        seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
        options = data.draw(self.options_strategy(), label="options")
        play = self._play(seats, seed, options)
        assert len(play.steps) <= self.engine.info.max_steps
        rebuilt = fold(self.engine, play.events)
        assert rebuilt == play.state, "folding all events rebuilds the live state"
        result = self.engine.result(play.state)
        assert result is not None
        assert sorted(s.seat for s in result.seats) == list(range(seats))
        assert all(1 <= s.rank <= seats for s in result.seats)
        if result.no_winner:  # nobody won: all share the last rank, so no reader counts a win
            assert {s.rank for s in result.seats} == {seats} and result.winners() == []
        else:
            assert min(s.rank for s in result.seats) == 1
        assert self.engine.pending(play.state) == [], "nobody is pending once the game is over"
        for viewer in [None, *range(seats)]:   # a replay shows what the live match showed
            assert self._view(rebuilt, viewer) == self._view(play.state, viewer), f"replayed view of {viewer}"
        self._check_finished_views(play.state, seats)

    @CONTRACT_SETTINGS
    @given(data=st.data())
    def test_every_step_keeps_the_contract(self, data: st.DataObject) -> None:
        seats = data.draw(self.seats_strategy(), label="seats")
        seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
        options = data.draw(self.options_strategy(), label="options")
        engine = self.engine
        checker = random.Random(seed ^ 0x5EED)
        event_type = engine.info.event_type
        counter = {"n": 0}

        def check(before: Any, step: Step, after: Any) -> None:
            counter["n"] += 1
            _check_answers_nothing(engine, before, step.seat, step.command, after)
            # decide is deterministic for the same state, command and rng
            again = engine.decide(before, step.seat, step.command, Rng.derive(seed, step.version_before))
            assert [e.SerializeToString(deterministic=True) for e in again] == [
                e.SerializeToString(deterministic=True) for e in step.events
            ]
            for event in step.events:
                vis = engine.visibility(event)
                assert vis is not None
                assert event_type.FromString(event.SerializeToString()) == event, "event round-trips"
                self._check_redaction(event, vis, seats)
            if counter["n"] % self.check_every:
                return
            self._check_state(before, seats, checker, seed, step.version_before)

        play = self._play(seats, seed, options, on_step=check)
        self._check_state(play.state, seats, checker, seed, 0)

    @CONTRACT_SETTINGS
    @given(data=st.data())
    def test_random_games_over_the_whole_sampler_terminate(self, data: st.DataObject) -> None:
        """DESIGN.md: a seat that only ever picks random legal commands, any of them, still ends
        the game; and what the sampler draws is accepted, as the fixed samples are."""
        seats = data.draw(self.seats_strategy(), label="seats")
        seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
        options = data.draw(self.options_strategy(), label="options")
        play = self._play(seats, seed, options, sampler=random.Random(seed ^ 0xC0DE))
        assert len(play.steps) <= self.engine.info.max_steps
        assert self.engine.result(play.state) is not None
        assert fold(self.engine, play.events) == play.state

    @CONTRACT_SETTINGS
    @given(data=st.data())
    def test_the_sampler_covers_every_legal_compound_choice(self, data: st.DataObject) -> None:
        """DESIGN.md, `legal_commands`: for a compound choice, "a complete generator/sampler that
        covers them all". Where the binding's brute force finds few enough legal members to
        check, the sampler's draws come up with every one of them."""
        seats = data.draw(self.seats_strategy(), label="seats")
        seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
        options = data.draw(self.options_strategy(), label="options")
        engine = self.engine
        counter = {"n": 0, "checked": 0}

        def check(before: Any, step: Step, after: Any) -> None:
            counter["n"] += 1
            if counter["n"] % self.check_every:
                return
            for seat in sorted({p.seat for p in engine.pending(before)}):
                legal = {c.SerializeToString(deterministic=True): c
                         for c in self.compound_candidates(before, seat)
                         if self._accepts(before, seat, c, seed, step.version_before)}
                if not legal or len(legal) > 48:
                    continue
                counter["checked"] += 1
                seen: set[bytes] = set()
                draws = random.Random(seed + counter["n"])
                # Enough calls that a member drawn once in ~50 (a 3-card shakedown of Nothing
                # Personal among a window's initiatives: 400 calls missed one in a soak run) is
                # missed about once in 10^10 states; most states are covered within 150 calls.
                for _ in range(1_200):
                    listed = engine.legal_commands(before, seat, 16, rng=draws)
                    seen.update(c.SerializeToString(deterministic=True) for c in listed)
                    if seen >= legal.keys():
                        break
                missing = [engine.render_command(legal[k]) for k in legal.keys() - seen]
                assert not missing, f"seat {seat}: the sampler never drew {missing[:5]}"

        self._play(seats, seed, options, on_step=check, sampler=random.Random(seed ^ 0xC0DE))

    @CONTRACT_SETTINGS
    @given(data=st.data())
    def test_unlisted_commands_are_refused_with_a_rule_id_or_decided_whole(self, data: st.DataObject) -> None:
        """README, ListLegalCommands: "a client may also compose any command itself; the server
        decides it". Any well-formed command (a listed one with a field changed, or one composed
        at random: tests/contracts/command_fuzz.py) from any seat is refused with a RuleViolation
        that has a code and a message, or decided into events that fold without error into a
        state that keeps the contract; never another exception, and the state asked is untouched.
        A command of no kind at all is malformed."""
        seats = data.draw(self.seats_strategy(), label="seats")
        seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
        options = data.draw(self.options_strategy(), label="options")
        fuzz = random.Random(seed ^ 0xF022)
        counter = {"n": 0}

        def check(before: Any, step: Step, after: Any) -> None:
            counter["n"] += 1
            if counter["n"] % self.check_every:
                return
            self._check_unlisted(before, seats, fuzz, seed, step.version_before)

        play = self._play(seats, seed, options, on_step=check)
        self._check_unlisted(play.state, seats, fuzz, seed, 0)

    def _check_unlisted(self, state: Any, seats: int, fuzz: random.Random, seed: int, version: int) -> None:
        engine = self.engine
        snapshot = copy.deepcopy(state)
        listed = [c for seat in range(seats) for c in engine.legal_commands(state, seat, limit=16)]
        vocab = vocabulary([*listed, *(engine.view(state, seat) for seat in range(seats))])
        command_type = engine.info.command_type
        assert command_type is not None
        tries = [(fuzz.randrange(seats), command_type())]
        for _ in range(self.fuzz_per_state):
            made = (mutated(fuzz.choice(listed), fuzz, vocab) if listed and fuzz.random() < 0.7
                    else composed(command_type, fuzz, vocab))
            tries.append((fuzz.randrange(seats), made))
        for seat, command in tries:
            shown = engine.render_command(command)   # the refusal's log line renders it
            try:
                events = engine.decide(state, seat, command, Rng.derive(seed, version))
            except RuleViolation as exc:
                assert isinstance(exc.code, str) and exc.code and isinstance(exc.message, str) and exc.message, (
                    f"seat {seat}: {shown} refused without a code or message")
                if command.WhichOneof("kind") is None:
                    assert isinstance(exc, MalformedCommand), f"a command of no kind is malformed, not {exc!r}"
                continue
            except Exception as exc:  # noqa: BLE001 - the contract: nothing but a RuleViolation
                raise AssertionError(f"seat {seat}: {shown} raised {exc!r}\n{command}\n"
                                     f"{engine.render_state(state)}") from exc
            assert command.WhichOneof("kind") is not None, "a command of no kind was accepted"
            after = fold(engine, events, state)
            pendings = engine.pending(after)
            assert (engine.result(after) is not None) == (not pendings), (
                f"seat {seat}: after {shown}, result exists exactly when nobody is pending")
            optional = engine.info.optional_commands
            for p in pendings:
                assert any(command_kind(c) not in optional for c in engine.legal_commands(after, p.seat, limit=32)), (
                    f"seat {seat}: after {shown}, pending seat {p.seat} has no legal command")
            _check_answers_nothing(engine, state, seat, command, after)
        assert state == snapshot, "deciding commands changed the state they were decided on"

    def _check_redaction(self, event: Any, vis: Any, seats: int) -> None:
        """DESIGN.md, `visibility`: streams redact accordingly. A viewer the visibility allows
        gets the event (or a form of it, as NP-H9's window seats); any other gets nothing or a
        cut-down copy, never the event itself; and redacting changes no event."""
        kind = event.WhichOneof("kind")
        whole = event.SerializeToString(deterministic=True)
        for viewer in [None, *range(seats)]:
            seen = self.engine.redact(event, viewer)
            if vis.allows(viewer):
                assert seen is not None, f"{kind}: redacted away from {viewer}, whom its visibility allows"
            elif seen is not None:   # (a copy may equal it, when nothing secret was in it: an empty draw)
                assert seen is not event, f"{kind}: shown whole to {viewer}, whom its visibility does not allow"
            if seen is not None:
                assert seen.WhichOneof("kind") == kind, f"{kind}: redacted into another kind"
        assert event.SerializeToString(deterministic=True) == whole, f"{kind}: redacting changed the event"

    def _view(self, state: Any, viewer: int | None) -> bytes:
        return bytes(self.engine.view(state, viewer).SerializeToString(deterministic=True))

    def _check_finished_views(self, state: Any, seats: int) -> None:
        """Every game's H rules (GC-H13, GR-H11, NC-H16, NP-H10): once the match is over its hidden
        information is public, so every seat sees what a spectator sees, but for its own fields."""
        def shown(viewer: int | None) -> Any:
            view = self.engine.view(state, viewer)
            for name in self.own_view_fields:
                view.ClearField(name)
            return view

        public = shown(None)
        for seat in range(seats):
            mine = shown(seat)
            assert mine == public, (
                f"seat {seat} and a spectator see a finished match otherwise: {_differing_fields(mine, public)}")

    def _check_worlds(self, state: Any, seats: int, checker: random.Random) -> None:
        """`determinize` (the search bots' worlds) deals hidden information consistently with
        what the seat knows: in a world dealt from a seat's view that seat sees the same view, is
        asked the same, may do the same (listed and drawn) and times out into the same default;
        and the spectator sees what it saw (what a seat sees publicly, every seat does)."""
        engine = self.engine

        def same(a: Iterable[Any], b: Iterable[Any]) -> bool:
            return [c.SerializeToString(deterministic=True) for c in a] == [
                c.SerializeToString(deterministic=True) for c in b]

        probed = self._probed_seat(state, seats, checker)
        for seat in checker.sample(range(seats), min(seats, self.worlds_per_state)):
            view = engine.view(state, seat)
            world = engine.determinize(view, seat, Rng(checker.getrandbits(32)))
            assert engine.view(world, seat) == view, f"seat {seat}: the dealt world looks otherwise"
            assert self._view(world, None) == self._view(state, None), f"seat {seat}: the dealt world's public view"
            assert pending_for(engine, world, seat) == pending_for(engine, state, seat), f"seat {seat} is asked otherwise"
            assert engine.result(world) == engine.result(state), f"seat {seat}: the dealt world ends otherwise"
            draw = checker.getrandbits(32)
            for rng in (None, draw):
                mine, theirs = (engine.legal_commands(st_, seat, limit=32, rng=None if rng is None else random.Random(rng))
                                for st_ in (state, world))
                assert same(mine, theirs), f"seat {seat} may do otherwise in the dealt world"
            if any(p.seat == seat for p in engine.pending(state)):
                defaults = [engine.timeout_command(st_, seat) for st_ in (state, world)]
                assert same(defaults, defaults[::-1]), f"seat {seat}: another default in the dealt world"
            self._check_hidden_events_alike(state, world, seat, checker)
            if seat == probed or self.worlds_per_state < seats:
                self._check_answers_alike(state, world, seat, seats, checker, "the dealt world")

    def _check_hidden_events_alike(self, state: Any, world: Any, seat: int, checker: random.Random) -> None:
        """Every event takes a version, so a seat can count the events hidden from it between two it
        sees (docs/engines.md, "What a hidden event still shows"). Another seat's command, taken in
        the true state and in a world dealt from this seat's view, with the same dice, that shows
        this seat the same events in both, shows it as many hidden ones, in the same places: else
        their count would tell it what it cannot see (NP-H7: how many offers lapse at a phase's end)."""
        engine = self.engine
        dice = checker.getrandbits(32)
        for other in sorted({p.seat for p in engine.pending(state)} - {seat}):
            for command in engine.legal_commands(state, other, limit=4):
                told = []
                for table in (state, world):
                    try:
                        events = engine.decide(table, other, command, Rng(dice))
                    except RuleViolation:
                        break
                    told.append([None if (shown := engine.redact(e, seat)) is None
                                 else shown.SerializeToString(deterministic=True) for e in events])
                if len(told) == 2 and [t for t in told[0] if t] == [t for t in told[1] if t]:
                    assert told[0] == told[1], (
                        f"seat {other}'s {engine.render_command(command)}: seat {seat} sees the same events "
                        f"between another number of hidden ones, by what it cannot see")

    def _probed_seat(self, state: Any, seats: int, checker: random.Random) -> int:
        """The seat whose commands `_check_answers_alike` sends on a state (one a state: each answer
        costs a decide): an asked one when there is one, whose commands get past "not your turn"."""
        asked = sorted({p.seat for p in self.engine.pending(state)})
        return checker.choice(asked) if asked else checker.randrange(seats)

    def _check_answers_alike(self, state: Any, other: Any, seat: int, seats: int, checker: random.Random,
                             where: str) -> None:
        """What a seat may not see changes no answer to a command it sends (GC-H, GR-H, NC-H,
        NP-H rules): every seat's listed commands and near misses of them (naming cards the seat
        cannot see, in other hands or the deck), sent by `seat` in the true state and in `other`
        (a state it cannot tell from it) with the same dice, are taken in both or refused in
        both with the same rule id and message. The services hand the refusal's text to the
        seat (SubmitCommand), so a text that named what it cannot see would tell it."""
        engine = self.engine
        # its own listed commands, and some of each seat asked (sent by `seat`: refused, alike)
        listed = [c for s in sorted({p.seat for p in engine.pending(state)} | {seat})
                  for c in engine.legal_commands(state, s, limit=8 if s == seat else 2)]
        # every seat's view: what `seat` cannot see (other hands, stashes) is what the probes name
        vocab = vocabulary([*listed, *(engine.view(state, s) for s in range(seats))])
        command_type = engine.info.command_type
        assert command_type is not None
        tries = checker.sample(listed, min(len(listed), 12))
        for _ in range(min(self.fuzz_per_state, 8)):
            tries.append(mutated(checker.choice(listed), checker, vocab) if listed and checker.random() < 0.7
                         else composed(command_type, checker, vocab))
        dice = checker.getrandbits(32)
        for command in tries:
            told = []
            for table in (state, other):
                try:
                    engine.decide(table, seat, command, Rng(dice))
                except RuleViolation as exc:
                    told.append((type(exc).__name__, exc.code, exc.message))
                else:
                    told.append(("taken",))
            assert told[0] == told[1], (
                f"seat {seat}: {engine.render_command(command)} is answered otherwise in {where}: "
                f"{told[0]} / {told[1]}")

    def _check_state(self, state: Any, seats: int, checker: random.Random, seed: int, version: int) -> None:
        engine = self.engine
        optional = engine.info.optional_commands
        pendings = engine.pending(state)
        pending_seats = {p.seat for p in pendings}
        over = engine.result(state) is not None
        assert over == (not pendings), "result exists exactly when nobody is pending"
        some_required: list[Any] = []
        for seat in range(seats):
            commands = engine.legal_commands(state, seat, limit=32)
            required = [c for c in commands if command_kind(c) not in optional]
            assert len(commands) <= 32, "at most the limit"
            listed = [c.SerializeToString(deterministic=True) for c in commands]
            assert len(set(listed)) == len(listed), f"seat {seat}: a command listed twice"
            if seat in pending_seats:
                assert required, f"pending seat {seat} has a non-optional legal command"
                some_required.extend(required[:2])
                # everything listed is accepted (sampled in the quick profile)
                for cmd in checker.sample(commands, min(len(commands), 4)):
                    engine.decide(state, seat, cmd, Rng.derive(seed, version))
                # and so is everything the sampler draws from the whole of a compound choice
                assert engine.legal_commands(state, seat, limit=-1) == [] == \
                    engine.legal_commands(state, seat, limit=-1, rng=checker), "at most a negative number: none"
                drawn = engine.legal_commands(state, seat, limit=32, rng=checker)
                assert isinstance(drawn, Sampled) == isinstance(commands, Sampled), "a sample either way"
                assert len(drawn) <= 32
                for cmd in checker.sample(drawn, min(len(drawn), 4)):
                    engine.decide(state, seat, cmd, Rng.derive(seed, version))
            else:
                assert not required, (
                    f"seat {seat} is not pending but has {engine.render_command(required[0])}"
                )
                # what it may do out of turn (offers, chat) shows in a drawn listing too
                # (ListLegalCommands with a sample_seed): never an empty list in its place
                if commands:
                    assert engine.legal_commands(state, seat, limit=32, rng=checker), \
                        f"seat {seat} drew nothing, though it may {engine.render_command(commands[0])}"
        # every decision asked has a default a clock may submit (docs/engines.md, "Clocks"), accepted
        for p in pendings:
            default = engine.timeout_command(state, p.seat)
            assert default is not None, f"seat {p.seat} asked {p.label!r} has no timeout default"
            engine.decide(state, p.seat, default, Rng.derive(seed, version))
        self._check_worlds(state, seats, checker)
        # commands from seats that pending does not name are refused with a rule id
        for seat in range(seats):
            if seat in pending_seats:
                continue
            for cmd in some_required[:2]:
                try:
                    engine.decide(state, seat, cmd, Rng.derive(seed, version))
                except RuleViolation as exc:
                    assert exc.code and exc.message
                else:
                    raise AssertionError(f"seat {seat} was allowed {engine.render_command(cmd)}")
        # every viewer sees the options the match is played by: every one of the game's
        keys = {o.key for o in engine.info.options}
        public = shown_options(engine.view(state, None))
        assert set(public) == keys, f"the options shown: {_differing_options(public, engine.info.defaults())}"
        for seat in range(seats):
            assert shown_options(engine.view(state, seat)) == public, f"seat {seat} sees other options"
        # no leaks: what a viewer may not know does not change its view
        probed = self._probed_seat(state, seats, checker)
        for viewer in [None, *range(seats)]:
            try:
                other = self.perturb_hidden(state, viewer, checker)
            except NotImplementedError:
                return
            a = engine.view(state, viewer).SerializeToString(deterministic=True)
            b = engine.view(other, viewer).SerializeToString(deterministic=True)
            assert a == b, f"view of {viewer} depends on hidden information"
            assert pending_for(engine, state, viewer) == pending_for(engine, other, viewer), (
                f"who {viewer} sees asked depends on hidden information")
            if viewer is None:
                continue
            # nor do the seat's legal commands (ListLegalCommands), listed or drawn
            draw = checker.getrandbits(32)
            for seed in (None, draw):
                mine, theirs = ([c.SerializeToString(deterministic=True)
                                 for c in engine.legal_commands(st, viewer, limit=32,
                                                                rng=None if seed is None else random.Random(seed))]
                                for st in (state, other))
                assert mine == theirs, f"legal commands of {viewer} depend on hidden information"
            # nor the answer to any command it sends (SubmitCommand's refusal)
            if viewer == probed:
                self._check_answers_alike(state, other, viewer, seats, checker,
                                          "a state perturbed in what it cannot see")


def _check_answers_nothing(engine: Engine, before: Any, seat: int, command: Any, after: Any) -> None:
    """`GameInfo.optional_commands` (a chat, an offer) end no decision timed on its own
    (`clock_key` ""): every seat asked so before one is asked the same after it. The turn clocks
    rely on it: such a clock runs on through the seat's own optional commands and restarts at
    its answers (docs/engines.md, "Clocks"). Another seat may be asked anew (GoodCritters' public
    changes take commitments back, GC-D04), and a decision under a named clock may end by one
    (a GoodCritters Step 3a turn ends by itself with the seat's last public change, GC-D06): its
    clock is its key's, whoever acts."""
    if command_kind(command) not in engine.info.optional_commands:
        return
    asked = engine.pending(after)
    for p in engine.pending(before):
        assert p in asked or clock_key(engine, before, p), (
            f"seat {seat}'s {engine.render_command(command)}, an optional command, answered or changed "
            f"a decision timed on its own: {p} is no longer asked so")


def shown_options(view: Any) -> dict[str, str]:
    """A View's `options` as a dict, whether the game's proto has a map or a repeated key/value
    (GoodCritters' `OptionValue`); a key shown twice fails."""
    field = view.DESCRIPTOR.fields_by_name["options"]
    if field.message_type.GetOptions().map_entry:
        return dict(view.options)
    pairs = [(o.key, o.value) for o in view.options]
    assert len({k for k, _ in pairs}) == len(pairs), f"an option shown twice: {pairs}"
    return dict(pairs)


def _differing_options(shown: dict[str, str], expected: dict[str, str]) -> list[str]:
    """What a View's options get wrong, key by key: missing, extra or another value."""
    return [f"{k}: shown {shown.get(k, '<missing>')!r}, expected {expected.get(k, '<none>')!r}"
            for k in sorted(shown.keys() | expected.keys()) if shown.get(k) != expected.get(k)]


def _differing_fields(a: Any, b: Any) -> list[str]:
    """The names of the top-level fields two messages of one type hold differently."""
    return sorted(f.name for f in a.DESCRIPTOR.fields if getattr(a, f.name) != getattr(b, f.name))
