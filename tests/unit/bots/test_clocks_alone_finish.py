"""Matches run by their turn clocks alone, end to end: the dispatcher queues each person's clock
from the match's fold, the test's wall clock runs to the first one due and `handlers.run_clock`
fires it as a worker would (`engine.timeout_command`, at the clock's version). A person who
never answers must never stall a match (NP-D1, NC-D02, GC-D02/D05/D06, GR-D06), and in a
simultaneous choice one seat's clock must leave the others' decisions, deadlines and real moves be.

`tests/unit/test_timeout_defaults.py` holds each default to the rules' text; this file holds the
clocks that submit them to finishing the match."""

from __future__ import annotations

import heapq
import random
import time
from collections import Counter

import pytest

from famiglia.engine import command_kind, pending_for
from famiglia.engine.registry import default_registry
from famiglia.v1 import envelope_pb2
from services.bots import handlers
from services.command.app import Viewer
from tests.unit.bots.test_clock_rules import ClockApp
from tests.unit.bots.test_dispatcher import Table

GRACE = 0.5
SEATS = {"grifters": (2, 3, 4), "goodcritters": (4, 5, 6, 7, 8), "nostra_city": (3, 4, 5),
         "nothing_personal": (3, 4, 5)}


class Clocked:
    """A match of a real game on the Table with the stamping clock in the test's hand. Every task
    the dispatcher queues waits in `due` until its time: a person's clock fires through
    `handlers.run_clock`; a bot's decision plays a random legal command at once, if its seat is
    still asked at the task's version (the worker's own guard)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, game: str, seats: int, bots: frozenset[int] = frozenset(),
                 seed: int = 1, **options: str) -> None:
        from famiglia.eventstore import envelopes as stamping

        self.wall = [time.time()]
        monkeypatch.setattr(stamping, "time", type("Clock", (), {"time": staticmethod(lambda: self.wall[0])}))
        self.table = Table(self.wall, registry=default_registry())
        self.table.dispatcher.wall = lambda: self.wall[0]
        self.due: list[tuple[float, int, str, int, int]] = []  # (when, order, "clock" | "bot", seat, version)
        self.queued = 0
        self.table.tasks.clock = self._clock  # type: ignore[method-assign]
        self.table.tasks.decide = self._decide  # type: ignore[method-assign]
        self.pick = random.Random(seed)
        info = [envelope_pb2.SeatInfo(seat=s, bot=True, policy="random", player_id=f"bot{s}") for s in sorted(bots)]
        self.match_id = self.table.app.create_match(game, seats, seed=seed, options=options, seat_info=info).match_id
        self.people = ClockApp(self.table)
        self.outcomes: Counter[str] = Counter()
        self.table.pump(self.match_id)

    def _clock(self, match_id, seat, version, countdown, trace=None) -> None:
        self._push(self.wall[0] + countdown, "clock", seat, version)

    def _decide(self, match_id, game_id, seat, version, policy, trace=None, payload=None, then=()) -> None:
        for s in (seat, *(s for s, *_ in then)):
            self._push(self.wall[0], "bot", s, version)

    def _push(self, when: float, what: str, seat: int, version: int) -> None:
        self.queued += 1
        heapq.heappush(self.due, (when, self.queued, what, seat, version))

    @property
    def match(self):  # the command service's fold: held answers (NP-H9) folded in
        return self.table.app.matches.get(self.match_id).match

    def asked(self) -> set[int]:
        return {p.seat for p in self.match.engine.pending(self.match.state)}

    def shown(self, seat: int) -> float:
        return self.table.app.get_view(self.match_id, Viewer(seat)).deadline_ms / 1000

    def due_clocks(self, version: int) -> dict[int, float]:
        return {seat: when for when, _, what, seat, v in self.due if what == "clock" and v == version}

    def fire(self) -> tuple[str, int, int, str]:
        """The first task due, run at its time: (what, seat, version, outcome)."""
        when, _, what, seat, version = heapq.heappop(self.due)
        self.wall[0] = max(self.wall[0], when)
        if what == "clock":
            outcome = handlers.run_clock(self.people, self.match_id, seat, version)  # type: ignore[arg-type]
        else:
            outcome = self._bot(seat, version)
        self.outcomes[outcome] += 1
        self.table.pump(self.match_id)
        return what, seat, version, outcome

    def _bot(self, seat: int, version: int) -> str:
        match = self.match
        asked = {p.seat for p in pending_for(match.engine, match.state, seat)}
        if match.public_version != version or seat not in asked:
            return "bot_stale"
        command = self.pick.choice(match.engine.legal_commands(match.state, seat, limit=32))
        self.table.app.submit(self.match_id, Viewer(seat), f"bot:{version}:{seat}", command, version)
        return "bot_played"

    def until_over(self, most: int) -> Counter[str]:
        while not self.match.finished:
            assert self.due, f"nothing queued, the match waits for good: {self.match.engine.pending(self.match.state)}"
            self.fire()
            assert self.outcomes["submitted"] <= most, "the clocks' defaults make no progress"
        return self.outcomes


def _only_the_clocks_moved_the_people(run: Clocked, people: set[int]) -> None:
    moves = [e for e in run.table.store.read(run.match_id) if e.command_id and e.seat in people]
    assert moves and all(e.command_id.startswith("clock:") for e in moves)


@pytest.mark.parametrize(("game", "seats"), [(g, n) for g, counts in SEATS.items() for n in counts])
def test_a_match_whose_people_only_ever_time_out_finishes(monkeypatch: pytest.MonkeyPatch, game: str,
                                                          seats: int) -> None:
    """NP-D1, NC-D02, GC-D02/D05/D06, GR-D06: every seat a person's, none ever answering: each
    decision asked gets a clock, each clock's default is taken, and the defaults end the match."""
    run = Clocked(monkeypatch, game, seats, seed=seats)
    outcomes = run.until_over(most=run.match.engine.info.max_steps)
    assert run.match.result() is not None
    assert outcomes["submitted"] > 0 and set(outcomes) <= {"submitted", "stale"}, outcomes
    _only_the_clocks_moved_the_people(run, set(range(seats)))


@pytest.mark.parametrize(("game", "seats", "bots", "options"), [
    ("grifters", 3, {1}, {"timeouts": "0.5,0.25"}),           # GR-D06: clocks under a second
    ("goodcritters", 5, {0, 2}, {"step3_mode": "turns"}),     # GC-D06
    ("goodcritters", 6, {1, 4}, {"payoff.enabled": "true"}),  # GC-P: gifts and offers by the bots
    ("nostra_city", 4, {3}, {}),
    ("nothing_personal", 3, {1}, {"reroll_tokens": "true"}),  # NP-H9: the bots' window answers held back
])
def test_people_who_only_ever_time_out_among_bots_finish_the_match(
        monkeypatch: pytest.MonkeyPatch, game: str, seats: int, bots: set[int], options: dict[str, str]) -> None:
    """The bots' moves make the people's clocks stale at every version; each is queued again at
    the new one, and the people's defaults still end the match."""
    run = Clocked(monkeypatch, game, seats, frozenset(bots), seed=seats + 10, **options)
    run.until_over(most=run.match.engine.info.max_steps)
    assert run.match.result() is not None
    _only_the_clocks_moved_the_people(run, set(range(seats)) - bots)


def test_one_seats_clock_in_a_simultaneous_choice_leaves_the_others_theirs_GC_D05(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """GC-D05: Step 3 asks every seat at once under one deadline. The first seat's clock takes
    its own default only: the others stay asked, shown the same deadline, with clocks queued
    again at the new version by it; a real move of another seat after it goes in at that version
    (its clocks then stale), and a seat still asked gets its default at the version reached."""
    run = Clocked(monkeypatch, "goodcritters", 4, seed=3)
    while len(run.asked()) < 4:  # the Boss's split (GC-D02), by its clock
        assert run.fire()[3] == "submitted"
    version = run.table.version(run.match_id)
    deadline = {seat: run.shown(seat) for seat in range(4)}
    assert len(set(deadline.values())) == 1 and set(run.due_clocks(version)) == {0, 1, 2, 3}
    (runs_out,) = set(deadline.values())

    what, first, at, outcome = run.fire()
    assert (what, at, outcome) == ("clock", version, "submitted")
    assert run.wall[0] >= runs_out  # never before the deadline shown
    others = set(range(4)) - {first}
    assert run.asked() == others  # its default, nobody else's decision
    moved = run.table.version(run.match_id)
    assert moved > version
    assert {seat: run.shown(seat) for seat in others} == {seat: runs_out for seat in others}
    again = run.due_clocks(moved)
    assert set(again) == others and all(when <= runs_out + 2 * GRACE for when in again.values())

    mover = min(others)
    card = next(c for c in run.match.engine.legal_commands(run.match.state, mover)
                if command_kind(c) == "choose_action_card" and c.choose_action_card.commit)
    after = run.table.app.submit(run.match_id, Viewer(mover), "late-but-real", card, moved).version
    assert after > moved and run.asked() == others - {mover}
    run.table.pump(run.match_id)
    fired = []
    while run.table.version(run.match_id) == after:
        fired.append(run.fire())
    clocks = {(seat, at): outcome for what, seat, at, outcome in fired if what == "clock"}
    assert clocks[mover, version] == clocks[mover, moved] == "stale"  # the real move stands
    assert {outcome for (seat, at), outcome in clocks.items() if at < after} == {"stale"}
    assert [seat for (seat, at), outcome in clocks.items() if outcome == "submitted"] == [fired[-1][1]]
    assert fired[-1][1] in others - {mover} and fired[-1][2] == after  # a seat still asked, at the version reached
