"""The engine contract suite: every game binds it in one line.

    class TestGoodCrittersContract(EngineContract):
        engine = goodcritters.ENGINE

A binding may override `options_strategy()` to vary match options and must
implement `perturb_hidden(state, viewer, rng)`: a state that differs from
`state` only in what `viewer` may not know (other seats' secrets, deck orders).
The no-leak check demands that the viewer's view is byte-identical for both.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any, ClassVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from famiglia.engine import Engine, MatchConfig, Rng, RuleViolation, Sampled, fold
from famiglia.engine.protocol import command_kind
from famiglia.testing.random_play import Step, play_random
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
            # decide is deterministic for the same state, command and rng
            again = engine.decide(before, step.seat, step.command, Rng.derive(seed, step.version_before))
            assert [e.SerializeToString(deterministic=True) for e in again] == [
                e.SerializeToString(deterministic=True) for e in step.events
            ]
            for event in step.events:
                vis = engine.visibility(event)
                assert vis is not None
                assert event_type.FromString(event.SerializeToString()) == event, "event round-trips"
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
        # no leaks: what a viewer may not know does not change its view
        for viewer in [None, *range(seats)]:
            try:
                other = self.perturb_hidden(state, viewer, checker)
            except NotImplementedError:
                return
            a = engine.view(state, viewer).SerializeToString(deterministic=True)
            b = engine.view(other, viewer).SerializeToString(deterministic=True)
            assert a == b, f"view of {viewer} depends on hidden information"
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
