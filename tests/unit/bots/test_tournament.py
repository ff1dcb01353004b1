"""Tournament plans rotate entrants through the seats; standings rank the stronger entrant first."""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable

import grpc
import pytest

from famiglia.bots.standings import MatchRecord, SeatRecord, standings
from famiglia.bots.tournament import GamePlan, TournamentSpec, plan
from famiglia.cli import tournament as cli

ENTRANTS = ("random", "heuristic", "ismcts")


def spec(**kwargs) -> TournamentSpec:
    base = dict(name="t", games=(GamePlan("a", (3,)), GamePlan("b", (2, 4))), entrants=ENTRANTS)
    base.update(kwargs)
    return TournamentSpec(**base)  # type: ignore[arg-type]


def test_every_entrant_holds_every_seat_position_equally_in_a_round_robin() -> None:
    matches = [m for m in plan(spec(round_robin=True)) if m.game_id == "a"]
    assert len(matches) == 3
    for seat in range(3):
        assert Counter(m.entrants[seat] for m in matches) == Counter(ENTRANTS)


@pytest.mark.parametrize("entrants", [("random", "heuristic"), ("a", "b", "c", "d")])
def test_every_entrant_holds_every_seat_equally_at_every_table_size(entrants: tuple[str, ...]) -> None:
    """Sizes take turns; the seats rotate within each size (rotated over all sizes, two
    entrants at sizes 3 and 4 kept one off seat 0 at 3 seats, the other at 4)."""
    sizes = (3, 4)
    matches = plan(spec(entrants=entrants, games=(GamePlan("g", sizes),),
                        matches_per_game=len(sizes) * len(entrants) * 2))
    for size in sizes:
        at_size = [m for m in matches if m.seats == size]
        assert len(at_size) == 2 * len(entrants)
        for seat in range(size):
            assert Counter(m.entrants[seat] for m in at_size) == Counter({e: 2 for e in entrants})


def test_round_robin_covers_every_seat_count_and_round() -> None:
    matches = plan(spec(round_robin=True, rounds=2))
    assert Counter(m.game_id for m in matches) == {"a": 6, "b": 12}
    assert Counter(m.seats for m in matches if m.game_id == "b") == {2: 6, 4: 6}


def test_matches_interleave_games_so_a_deadline_leaves_every_game_covered() -> None:
    matches = plan(spec(matches_per_game=4))
    assert [m.game_id for m in matches[:4]] == ["a", "b", "a", "b"]
    assert [m.index for m in matches] == list(range(8))
    assert len({m.seed for m in matches}) == 8


def test_the_spec_survives_its_json_form() -> None:
    s = spec(matches_per_game=5, deadline_seconds=60.0)
    assert TournamentSpec.from_json(s.to_json()) == s


def test_the_entrant_that_always_wins_tops_the_standings() -> None:
    records = []
    for i in range(12):
        order = [ENTRANTS[(i + k) % 3] for k in range(3)]
        ranks = {"ismcts": 1, "heuristic": 2, "random": 3}
        records.append(MatchRecord(f"m{i}", "a", tuple(SeatRecord(s, e, ranks[e]) for s, e in enumerate(order)),
                                   finished_ms=i))
    rows = standings(records)
    assert [r.entrant for r in rows] == ["ismcts", "heuristic", "random"]
    top = rows[0]
    assert (top.matches, top.wins, top.mean_rank) == (12, 12, 1.0)
    assert top.mu > 25 > rows[-1].mu


def test_an_entrant_on_several_seats_of_one_match_counts_each_seat() -> None:
    record = MatchRecord("m", "a", (SeatRecord(0, "random", 1), SeatRecord(1, "ismcts", 2),
                                    SeatRecord(2, "random", 3)))
    rows = {r.entrant: r for r in standings([record])}
    assert rows["random"].matches == 2 and rows["random"].wins == 1 and rows["random"].mean_rank == 2.0


def test_the_cli_registers_its_commands() -> None:
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["tournament", "run", "--game", "grifters", "--seats", "3", "--matches", "5"])
    assert (args.game, args.seats, args.matches, args.func) == (["grifters"], [3], 5, cli.cmd_run)
    assert set(cli.SIZES) == {"quick", "normal", "long"}


def test_moves_are_written_in_bulk_and_always_before_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    import services.bots.tournaments as tournaments
    from services.bots.tournaments import TournamentObserver

    monkeypatch.setattr(tournaments, "finished_record", lambda match: {})

    writes: list[tuple] = []

    class Repo:
        def exists(self, tid: str) -> bool:
            return tid == "t1"

        def add_moves(self, tid: str, moves: int) -> None:
            writes.append(("moves", tid, moves))

        def record(self, tid: str, match_id: str, result: dict) -> None:
            writes.append(("result", tid, match_id))

    class Finished:
        match_id = "m1"

    now = [0.0]
    observer = TournamentObserver(Repo(), flush_seconds=0.5, now=lambda: now[0])  # type: ignore[arg-type]
    for _ in range(10):
        observer.match_progress("t1", "m1", 1)
        observer.match_progress("other", "m9", 1)  # not one of ours: never written
    assert writes == []
    now[0] = 0.6
    observer.match_progress("t1", "m2", 2)
    assert writes == [("moves", "t1", 12)]
    observer.match_progress("t1", "m1", 3)
    observer.match_finished("t1", Finished())  # type: ignore[arg-type]
    assert writes[1:] == [("moves", "t1", 3), ("result", "t1", "m1")]


def test_the_tournament_service_plans_a_tournament_once_however_often_it_is_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from services.bots.entrypoints import grpc_server
    from services.bots.tournaments import RUNNING, TournamentRecord

    made: list[str] = []

    def counted(s: TournamentSpec) -> list:
        made.append(s.name)
        return plan(s)

    monkeypatch.setattr(grpc_server, "plan", counted)
    servicer = grpc_server.TournamentServicer(repo=None, registry=None)  # type: ignore[arg-type]
    record = TournamentRecord("t1", spec(matches_per_game=4), RUNNING, created_ms=0, started={0: "m0", 5: "m5"})
    first = servicer._proto(record)
    again = servicer._proto(record)
    assert made == ["t"]
    assert first.games == again.games and first.planned == again.planned == len(plan(record.spec)) == 8
    assert sum(g.started for g in again.games) == 2


class _Still:
    """`TournamentRepo.still_since`/`mark_still` in memory (expiry aside): what outlives a runner."""

    def __init__(self) -> None:
        self.still: dict[tuple[str, str], tuple[int, int]] = {}

    def still_since(self, tid: str, match_id: str, version: int) -> int | None:
        seen = self.still.get((tid, match_id))
        return seen[1] if seen is not None and seen[0] == version else None

    def mark_still(self, tid: str, match_id: str, version: int, since_ms: int, ttl_s: float) -> None:
        self.still[(tid, match_id)] = (version, since_ms)


def test_a_match_that_stops_moving_is_abandoned_and_its_version_is_not_read_every_step(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from services.bots import tournaments

    class Store:
        reads = 0
        at = 1

        def version(self, match_id: str) -> int:
            self.reads += 1
            return self.at

    class Repo(_Still):
        recorded: list[tuple[str, str, dict]] = []

        def record(self, tournament_id: str, match_id: str, result: dict) -> None:
            self.recorded.append((tournament_id, match_id, result))

    class Game:
        cancelled: list[tuple[str, str]] = []

        def cancel_match(self, match_id: str, reason: str, *, token: str, request_id: str = "") -> None:
            self.cancelled.append((match_id, request_id))

    store, repo, game, clock = Store(), Repo(), Game(), [1000.0]
    monkeypatch.setattr(tournaments.time, "monotonic", lambda: clock[0])
    runner = tournaments.TournamentRunner(repo, game, store, stuck_seconds=40.0)  # type: ignore[arg-type]
    record = tournaments.TournamentRecord("t1", spec(), tournaments.RUNNING, 0, started={0: "m1"})
    runner._plans["t1"] = []

    def steps(seconds: float) -> None:  # the runner's 4 steps a second
        for _ in range(int(seconds * 4)):
            clock[0] += 0.25
            runner._check_stuck(record, "m1")

    steps(30)
    store.at = 2  # it moved
    steps(30)
    assert not record.results  # 30 s at version 2: not stuck yet
    assert store.reads <= 60 / 10 + 2  # a read every 10 s, not 240
    steps(30)
    assert record.results == {"m1": {"abandoned": True}}
    assert repo.recorded == [("t1", "m1", {"abandoned": True, "game_id": "", "error": "stuck"})]
    assert game.cancelled == [("m1", "stuck:t1:m1")]  # ended in the command service too, once


class _RpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._code.name


def _restarting_runners(monkeypatch: pytest.MonkeyPatch, repo: _Still, every: float, for_seconds: float,
                        version: Callable[[float], int]) -> tuple[list[str], float]:
    """Runners of one tournament, each replaced by a new one (a restart: a new process, its
    monotonic clock from another origin) every `every` seconds, stepping 4 times a second over
    `for_seconds`; the match's version at each second is `version(t)`. What they cancelled, and
    when the first cancel came."""
    from services.bots import tournaments

    class Store:
        def version(self, match_id: str) -> int:
            return version(clock[0])

    class Game:
        def __init__(self) -> None:
            self.cancelled: list[str] = []

        def cancel_match(self, match_id: str, reason: str, *, token: str, request_id: str = "") -> None:
            self.cancelled.append(match_id)

    clock, origin, game, first = [0.0], [5000.0], Game(), [-1.0]
    monkeypatch.setattr(tournaments.time, "monotonic", lambda: origin[0] + clock[0])
    monkeypatch.setattr(tournaments.time, "time", lambda: 1_800_000_000.0 + clock[0])
    record = tournaments.TournamentRecord("t1", spec(), tournaments.RUNNING, 0, started={0: "m1"})
    runner = None
    while clock[0] < for_seconds and not record.results:
        if runner is None or clock[0] % every == 0:
            origin[0] = 5000.0 + 7919.0 * clock[0]  # a new process: another origin
            runner = tournaments.TournamentRunner(repo, game, Store(), stuck_seconds=40.0)  # type: ignore[arg-type]
            runner._plans["t1"] = []
        runner._check_stuck(record, "m1")
        if game.cancelled and first[0] < 0:
            first[0] = clock[0]
        clock[0] += 0.25
    return game.cancelled, first[0]


def test_a_stuck_match_is_abandoned_though_its_runner_restarts_more_often_than_stuck_seconds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """When the match was first seen at its version was kept in memory only: a runner restarted
    every 30 s (a crash loop, a rolling deploy) started the count over each time and never
    abandoned a match stuck for 40 s. It is written down in Redis now, so restarts go on counting."""

    class Repo(_Still):
        def record(self, tournament_id: str, match_id: str, result: dict) -> None:
            pass

    cancelled, at = _restarting_runners(monkeypatch, Repo(), every=30.0, for_seconds=300.0, version=lambda t: 3)
    assert cancelled == ["m1"]
    assert 40.0 < at <= 40.0 * 1.5  # as without restarts: 1 to 1.5 stuck_seconds at one version


def test_a_match_that_moves_is_never_abandoned_across_restarts(monkeypatch: pytest.MonkeyPatch) -> None:
    class Repo(_Still):
        def record(self, tournament_id: str, match_id: str, result: dict) -> None:
            raise AssertionError("a moving match abandoned")

    cancelled, _ = _restarting_runners(monkeypatch, Repo(), every=30.0, for_seconds=300.0,
                                       version=lambda t: 1 + int(t // 25))  # a move every 25 s
    assert cancelled == []


@pytest.mark.parametrize(("refused", "abandoned"), [(grpc.StatusCode.UNAVAILABLE, False),
                                                    (grpc.StatusCode.FAILED_PRECONDITION, True)])
def test_a_stuck_match_whose_cancel_fails_is_abandoned_only_once_the_command_service_answered(
        monkeypatch: pytest.MonkeyPatch, refused: grpc.StatusCode, abandoned: bool) -> None:
    """The command service away: the step fails and the match stays in play, to be cancelled
    at the next check (else it would stay live there for good). A match over by then
    (`match_over`) is abandoned all the same."""
    from services.bots import tournaments

    class Store:
        def version(self, match_id: str) -> int:
            return 7

    class Repo(_Still):
        recorded: list[str] = []

        def record(self, tournament_id: str, match_id: str, result: dict) -> None:
            self.recorded.append(match_id)

    class Game:
        def cancel_match(self, match_id: str, reason: str, *, token: str, request_id: str = "") -> None:
            raise _RpcError(refused)

    clock = [1000.0]
    monkeypatch.setattr(tournaments.time, "monotonic", lambda: clock[0])
    repo = Repo()
    runner = tournaments.TournamentRunner(repo, Game(), Store(), stuck_seconds=40.0)  # type: ignore[arg-type]
    record = tournaments.TournamentRecord("t1", spec(), tournaments.RUNNING, 0, started={0: "m1"})
    runner._plans["t1"] = []
    runner._check_stuck(record, "m1")
    clock[0] += 41.0
    if abandoned:
        runner._check_stuck(record, "m1")
        assert record.results == {"m1": {"abandoned": True}} and repo.recorded == ["m1"]
    else:
        with pytest.raises(grpc.RpcError):
            runner._check_stuck(record, "m1")
        assert not record.results and not repo.recorded


def test_a_finished_match_wakes_the_runner_to_fill_its_seat_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from services.bots import tournaments

    monkeypatch.setattr(tournaments, "finished_record", lambda match: {})

    class Repo:
        def exists(self, tid: str) -> bool:
            return True

        def add_moves(self, tid: str, moves: int) -> None:
            pass

        def record(self, tid: str, match_id: str, result: dict) -> None:
            pass

    class Finished:
        match_id = "m1"

    runner = tournaments.TournamentRunner(Repo(), None, None)  # type: ignore[arg-type]
    steps: list[float] = []
    stop = threading.Event()

    def step() -> None:
        steps.append(0.0)
        if len(steps) >= 2:
            stop.set()
            runner.wake.set()  # so the runner's last wait ends too

    monkeypatch.setattr(runner, "step", step)
    observer = tournaments.TournamentObserver(Repo(), on_finished=runner.wake.set)  # type: ignore[arg-type]
    thread = threading.Thread(target=runner.run, args=(stop,), kwargs={"interval": 3600.0}, daemon=True)
    thread.start()
    while not steps:
        stop.wait(0.01)
    observer.match_finished("t1", Finished())  # type: ignore[arg-type]
    thread.join(timeout=30)
    assert not thread.is_alive() and len(steps) == 2  # the second step came from the wake, not the hour's tick
    assert not runner.wake.is_set()


def test_the_runner_forgets_each_tournament_once_it_is_no_longer_running(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner lives for days and meets tournament after tournament: what it keeps of one
    (its plan, its matches' last versions, its failed creations) goes when it stops running."""
    import grpc

    from services.bots import tournaments

    class Refused(grpc.RpcError):
        def code(self) -> grpc.StatusCode:
            return grpc.StatusCode.RESOURCE_EXHAUSTED

        def details(self) -> str:
            return "busy"

    class Repo:
        def __init__(self) -> None:
            self.records: dict[str, tournaments.TournamentRecord] = {}

        def ids(self, limit: int = 20, running_only: bool = False) -> list[str]:
            return [t for t, r in self.records.items() if r.status == tournaments.RUNNING][:limit]

        def get(self, tid: str, *, results: bool = True) -> tournaments.TournamentRecord | None:
            return self.records.get(tid)

        def progress(self, tid: str, in_play: list[str]) -> tournaments.TournamentRecord | None:
            r = self.records[tid]
            return tournaments.TournamentRecord(tid, r.spec, r.status, r.created_ms, starting=dict(r.starting),
                                                results={m: {} for m in in_play if m in r.results})

        def set_status(self, tid: str, status: str) -> None:
            self.records[tid].status = status

        def status(self, tid: str) -> str:
            return self.records[tid].status

        def claim_starting(self, tid: str, index: int, request_id: str) -> tuple[str, str | None]:
            return self.records[tid].starting.setdefault(index, request_id), None

        def mark_started(self, tid: str, index: int, match_id: str) -> None:
            self.records[tid].started[index] = match_id
            self.records[tid].starting.pop(index, None)

        def record(self, tid: str, match_id: str, result: dict) -> bool:
            return self.records[tid].results.setdefault(match_id, result) is result

        def cancelling(self, limit: int = 50) -> list[str]:
            return []  # cancelled here by writing the status alone: no match of theirs is cancelled

    class Handle:
        def __init__(self, match_id: str) -> None:
            self.match_id = match_id

    class Game:
        def __init__(self) -> None:
            self.made: dict[str, int] = {}

        def create_match(self, game_id: str, seats: int, **kwargs) -> Handle:
            tid = kwargs["tournament_id"]
            if int(tid[1:]) % 2 and self.made.get(tid, 0):  # busy after a cancelled tournament's first match
                raise Refused()
            self.made[tid] = self.made.get(tid, 0) + 1
            return Handle(f"{tid}:m{self.made[tid]}")

    class Store:
        def version(self, match_id: str) -> int:
            return 1

    clock = [1000.0]
    monkeypatch.setattr(tournaments.time, "monotonic", lambda: clock[0])
    repo = Repo()
    runner = tournaments.TournamentRunner(repo, Game(), Store(), stuck_seconds=40.0)  # type: ignore[arg-type]
    for n in range(60):
        tid = f"t{n}"
        repo.records[tid] = tournaments.TournamentRecord(tid, spec(matches_per_game=2, concurrency=2),
                                                         tournaments.RUNNING, created_ms=0)
        record = repo.records[tid]
        for step in range(200):
            if record.status != tournaments.RUNNING:
                break
            if n % 2 and step == 3:  # every other tournament is cancelled with matches in play
                record.status = tournaments.CANCELLED
                break
            try:
                runner.step()
            except grpc.RpcError:
                pass  # a refusal that may pass: tried again at the next step
            clock[0] += 0.25
            if not n % 2:
                for match_id in list(record.started.values()):
                    record.results.setdefault(match_id, {"abandoned": True})  # every match in play ends
    runner.step()
    assert all(r.status != tournaments.RUNNING for r in repo.records.values())
    assert (runner._plans, runner._progress, runner._seen, runner._creating_since) == ({}, {}, {}, {})


def test_the_observer_and_the_read_model_log_keep_a_bounded_memory_of_tournaments(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from famiglia.readmodels import db
    from services.bots import tournaments

    class Repo:
        asked = 0

        def exists(self, tid: str) -> bool:
            self.asked += 1
            return False

    repo = Repo()
    observer = tournaments.TournamentObserver(repo)  # type: ignore[arg-type]
    for n in range(3 * tournaments.KNOWN_TOURNAMENTS):
        observer.match_progress(f"t{n}", "m1", 1)
        observer.match_progress(f"t{n}", "m2", 1)  # asked once while it is remembered
    assert len(observer._known) <= tournaments.KNOWN_TOURNAMENTS
    assert repo.asked == 3 * tournaments.KNOWN_TOURNAMENTS

    def away(url: str) -> None:
        raise ConnectionError(url)

    monkeypatch.setattr(db, "make_engine", away)
    log = tournaments.ReadModelLog("postgresql://away")  # each record skipped, and remembered all the same
    for n in range(3 * tournaments.KNOWN_TOURNAMENTS):
        record = tournaments.TournamentRecord(f"t{n}", spec(), tournaments.RUNNING, created_ms=0)
        log.record(record, tournaments.RUNNING)
    assert len(log._recorded) <= tournaments.KNOWN_TOURNAMENTS
