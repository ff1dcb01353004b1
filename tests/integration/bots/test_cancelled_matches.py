"""A match cancelled on a real Redis, as the bots service sees it: the tournament runner cancels
the match it abandons as stuck (CancelMatch over gRPC), the dispatcher stops queueing bots and
clocks for it and lets it go from its live set, and its tournament counts it abandoned; a
cancelled tournament's matches in play, cancelled once each by a runner killed mid-way and resumed;
and a match created by a runner killed before it recorded it, cancelled with its tournament."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import pytest
import redis

from famiglia.auth import TokenSigner
from famiglia.bots.tournament import GamePlan, TournamentSpec
from famiglia.bots.toy import toy_registry
from famiglia.client import GameClient
from famiglia.config import Settings
from famiglia.eventstore.envelopes import MATCH_CANCELLED
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.v1 import envelope_pb2
from services.bots import tournaments
from services.bots.dispatcher import Dispatcher, live_matches_of
from services.command.app import Viewer
from services.command.bootstrap import bootstrap as command_bootstrap
from services.command.entrypoints.grpc_server import serve

SECRET = "cancel-test"
SPEC = TournamentSpec(name="t", games=(GamePlan("highcard", (2,)),), entrants=("random",))


@dataclass
class Tasks:
    decisions: list[tuple] = field(default_factory=list)
    clocks: list[tuple] = field(default_factory=list)

    def decide(self, match_id, game_id, seat, version, policy, trace=None, payload=None, then=()) -> None:
        self.decisions.append((match_id, seat, version))

    def clock(self, match_id, seat, version, countdown, trace=None) -> None:
        self.clocks.append((match_id, seat, version))

    def batch(self):
        return contextlib.nullcontext()


def test_the_runner_cancels_a_stuck_match_and_the_dispatcher_lets_it_go(redis_url: str, monkeypatch) -> None:
    registry = toy_registry()
    store = RedisEventStore.connect(redis_url)
    command = command_bootstrap(store=store, registry=registry, settings=Settings(redis_url=redis_url, secret=SECRET))
    server, port = serve(command, "127.0.0.1:0", workers=4)
    server.start()
    game = GameClient(f"127.0.0.1:{port}")
    client = redis.Redis.from_url(redis_url)
    try:
        repo = tournaments.TournamentRepo(client)
        tid = repo.create(SPEC)
        # Seat 0 a bot, seat 1 a person on a clock: the dispatcher queues both kinds of task.
        info = [envelope_pb2.SeatInfo(seat=0, bot=True, policy="random", player_id="random")]
        match_id = command.create_match("highcard", 2, seed=5, options={"hand": "3", "clock_s": "30"},
                                        seat_info=info, tournament_id=tid).match_id
        repo.mark_started(tid, 0, match_id)
        tasks = Tasks()
        observer = tournaments.TournamentObserver(repo)
        dispatcher = Dispatcher(store, registry, tasks, observer=observer, stall_seconds=1.0, now=lambda: now[0])
        now = [0.0]
        seen = 0

        def pump() -> None:
            nonlocal seen
            envelopes = store.read(match_id, after=seen)
            if envelopes:
                seen = envelopes[-1].seq
                dispatcher.handle(envelopes)

        pump()
        asked = command.matches.get(match_id).match.engine.pending(command.matches.get(match_id).match.state)
        assert tasks.decisions or tasks.clocks, "nothing queued for a live match"
        assert match_id in live_matches_of(store).members()
        if asked[0].seat == 0:  # let the bot's move go in, so a person's clock runs too
            hot = command.matches.get(match_id).match
            card = hot.engine.legal_commands(hot.state, 0)[0]
            command.submit(match_id, Viewer(0), "bot-1", card)
            pump()
        queued = (len(tasks.decisions), len(tasks.clocks))

        # The runner sees the match at one version for longer than stuck_seconds, and cancels it.
        clock = [1000.0]
        monkeypatch.setattr(tournaments.time, "monotonic", lambda: clock[0])
        runner = tournaments.TournamentRunner(repo, game, store, stuck_seconds=10.0, secret=SECRET)
        record = repo.get(tid)
        assert record is not None
        runner._plans[tid] = tournaments.plan(record.spec)
        for _ in range(100):
            clock[0] += 0.25
            runner._check_stuck(record, match_id)
            if record.results:
                break
        assert record.results.get(match_id) == {"abandoned": True}
        last = store.read(match_id)[-1]
        assert last.type == MATCH_CANCELLED
        assert "stuck" in envelope_pb2.MatchCancelled.FromString(last.payload).reason

        pump()  # the dispatcher reads the cancel
        assert match_id not in dispatcher.matches and match_id not in live_matches_of(store).members()
        now[0] += 3600.0
        dispatcher.check_stalls()  # no decision or clock re-sent for a match over
        assert (len(tasks.decisions), len(tasks.clocks)) == queued
        stored = repo.get(tid)
        assert stored is not None and stored.results[match_id]["abandoned"]
        assert stored.match_records() == []  # the standings pass it over
        # The runner's cancel was keyed by the match: asked again (a step retried), it is the same one.
        again = game.cancel_match(match_id, "again", token=TokenSigner(SECRET).operator_token("t"),
                                  request_id=f"stuck:{tid}:{match_id}")
        assert again.duplicate and again.version == last.seq
    finally:
        game.close()
        server.stop(grace=None)
        store.close()
        client.close()


def test_a_tournament_match_cancelled_by_an_operator_is_recorded_abandoned_not_ranked(redis_url: str) -> None:
    registry = toy_registry()
    store = RedisEventStore.connect(redis_url)
    command = command_bootstrap(store=store, registry=registry, settings=Settings(redis_url=redis_url, secret=SECRET))
    client = redis.Redis.from_url(redis_url)
    try:
        repo = tournaments.TournamentRepo(client)
        tid = repo.create(SPEC)
        info = [envelope_pb2.SeatInfo(seat=s, bot=True, policy="random", player_id="random") for s in range(2)]
        match_id = command.create_match("highcard", 2, seed=9, seat_info=info, tournament_id=tid).match_id
        command.cancel_match(match_id, "cli", "a bad seed")
        dispatcher = Dispatcher(store, registry, Tasks(), observer=tournaments.TournamentObserver(repo))
        dispatcher.handle(store.read(match_id))
        record = repo.get(tid)
        assert record is not None
        assert record.results[match_id] == {"abandoned": True, "game_id": "highcard",
                                            "error": "cancelled: a bad seed"}
    finally:
        store.close()
        client.close()


class _Killed(BaseException):
    """The runner's process dying where it stands."""


class _DyingClient:
    """The runner's GameClient, in a process killed right after its `cancels`-th cancel went in
    (its answer never read, nothing after it done)."""

    def __init__(self, game: GameClient, cancels: int) -> None:
        self.game, self.left = game, cancels

    def __getattr__(self, name: str):
        return getattr(self.game, name)

    def cancel_match(self, *args, **kwargs):
        answer = self.game.cancel_match(*args, **kwargs)
        self.left -= 1
        if self.left <= 0:
            raise _Killed()
        return answer


class _TournamentStack(contextlib.ExitStack):
    """A command service and the tournament service over one real Redis, on free ports (the toy
    game), with an operator's client and a game client; `command_service` starts another command
    service (a rotated secret). Everything stops on exit."""

    def __init__(self, redis_url: str) -> None:
        super().__init__()
        self.redis_url, self.registry = redis_url, toy_registry()

    def __enter__(self) -> _TournamentStack:
        from famiglia.cli.tournament import TournamentClient
        from services.bots.entrypoints.grpc_server import serve as serve_tournaments

        super().__enter__()
        self.client = redis.Redis.from_url(self.redis_url)
        self.callback(self.client.close)
        self.store = self._store()
        self.game = self.command_service(SECRET, self.store)
        self.repo = tournaments.TournamentRepo(self.client)
        t_server, t_port = serve_tournaments(self.repo, self.registry, "127.0.0.1:0", workers=2,
                                             signer=TokenSigner(SECRET))
        t_server.start()
        self.callback(t_server.stop, grace=None)
        self.operator = TournamentClient(f"127.0.0.1:{t_port}", secret=SECRET)
        self.callback(self.operator.close)
        return self

    def _store(self) -> RedisEventStore:
        store = RedisEventStore.connect(self.redis_url)
        self.callback(store.close)
        return store

    def command_service(self, secret: str, store: RedisEventStore | None = None) -> GameClient:
        """A command service signing with `secret` on a free port, and a client of it."""
        command = command_bootstrap(store=store or self._store(), registry=self.registry,
                                    settings=Settings(redis_url=self.redis_url, secret=secret))
        server, port = serve(command, "127.0.0.1:0", workers=4)
        server.start()
        self.callback(server.stop, grace=None)
        game = GameClient(f"127.0.0.1:{port}")
        self.callback(game.close)
        return game


def test_a_cancelled_tournaments_matches_are_cancelled_once_by_a_runner_killed_midway_and_resumed(
        redis_url: str) -> None:
    """CancelTournament over gRPC answers at once; the runner cancels each match in play
    (CancelMatch, request id `tournament:<tid>:<match>`), is killed after the second, and the
    restarted runner — then a second CancelTournament — finishes the job: every match ends with
    one `match_cancelled`, each is recorded abandoned, and no planned match is created after."""
    from famiglia.v1 import tournament_service_pb2 as tpb

    with _TournamentStack(redis_url) as stack:
        store, repo, operator, game = stack.store, stack.repo, stack.operator, stack.game
        created = operator.create(tpb.CreateTournamentRequest(
            name="cup", games=[tpb.TournamentGame(game_id="highcard", seat_counts=[2], options={"hand": "3"})],
            entrants=["random", "heuristic"], matches_per_game=8, concurrency=3))
        tid = created.tournament_id
        # No dispatcher here: the matches wait at their first bot decision, in play for good.
        tournaments.TournamentRunner(repo, game, store, secret=SECRET).step()
        started = sorted(repo.get(tid).started.values())
        assert len(started) == 3 and not any(store.read(m)[-1].type == MATCH_CANCELLED for m in started)

        answer = operator.cancel(tid)
        assert answer.status == tpb.TOURNAMENT_CANCELLED
        with pytest.raises(_Killed):
            tournaments.TournamentRunner(repo, _DyingClient(game, cancels=2), store, secret=SECRET).step()
        assert sum(store.read(m)[-1].type == MATCH_CANCELLED for m in started) == 2
        assert len(repo.get(tid).results) == 1  # the second's answer was never read, so not recorded

        resumed = tournaments.TournamentRunner(repo, game, store, secret=SECRET)  # the restarted process
        resumed.step()
        operator.cancel(tid)  # an operator asking again: listed again, answered as duplicates
        resumed.step()
        for match_id in started:
            envelopes = store.read(match_id)
            cancels = [e for e in envelopes if e.type == MATCH_CANCELLED]
            assert len(cancels) == 1 and envelopes[-1] is cancels[-1]
            assert cancels[0].command_id == f"cancel:tournament:{tid}:{match_id}"
            reason = envelope_pb2.MatchCancelled.FromString(cancels[0].payload).reason
            assert tid in reason and "cup" in reason
            view = game.spectator(match_id).view()
            assert view.finished and view.cancelled and view.cancel_reason == reason
        record = repo.get(tid)
        assert record is not None and record.status == tournaments.CANCELLED
        assert sorted(record.started.values()) == started  # no planned match was created after
        assert set(record.results) == set(started) and all(r["abandoned"] for r in record.results.values())
        assert record.match_records() == [] and repo.cancelling() == []
        shown = operator.get(tid, include_matches=True)
        assert shown.finished == 3 and not shown.standings and not shown.matches


class _DyingRepo(tournaments.TournamentRepo):
    """The runner's records, in a process killed as it was about to record its `at`-th started
    match: CreateMatch made it and answered, nothing after that was done."""

    def __init__(self, client: redis.Redis, at: int) -> None:
        super().__init__(client)
        self.left, self.unrecorded = at, ""

    def mark_started(self, tid: str, index: int, match_id: str) -> None:
        self.left -= 1
        if self.left <= 0:
            self.unrecorded = match_id
            raise _Killed()
        super().mark_started(tid, index, match_id)


@pytest.mark.parametrize("rotated", [False, True], ids=["same-secret", "rotated-secret"])
def test_a_match_created_by_a_runner_killed_before_recording_it_is_cancelled_with_its_tournament(
        redis_url: str, rotated: bool) -> None:
    """The runner is killed between CreateMatch's answer and its record, the tournament is
    cancelled over gRPC, and the next runner (the deployment's secret the same, or rotated with
    the command service's) cancels that match too: before, it stayed in play for good, its bots
    playing for nobody. The store holds the planned matches once each: the restarted runner asked
    for the match under the request id written down before, not one keyed with its own secret."""
    from famiglia.v1 import tournament_service_pb2 as tpb

    with _TournamentStack(redis_url) as stack:
        store, client, repo, operator, game = stack.store, stack.client, stack.repo, stack.operator, stack.game
        tid = operator.create(tpb.CreateTournamentRequest(
            name="cup", games=[tpb.TournamentGame(game_id="highcard", seat_counts=[2], options={"hand": "3"})],
            entrants=["random", "heuristic"], matches_per_game=8, concurrency=3)).tournament_id
        dying = _DyingRepo(client, at=3)
        with pytest.raises(_Killed):
            tournaments.TournamentRunner(dying, game, store, secret=SECRET).step()
        orphan = dying.unrecorded
        assert orphan and orphan not in repo.get(tid).started.values() and store.version(orphan) > 0
        assert operator.cancel(tid).status == tpb.TOURNAMENT_CANCELLED

        secret = "rotated-secret" if rotated else SECRET
        if rotated:  # every service restarted on the new secret
            game = stack.command_service(secret)
        tournaments.TournamentRunner(repo, game, store, secret=secret).step()

        record = repo.get(tid)
        assert record is not None and record.status == tournaments.CANCELLED and repo.cancelling() == []
        assert record.started.get(2) == orphan and len(record.started) == 3
        assert len(list(client.scan_iter(match="famiglia:*:version:*"))) == 3  # no planned match made twice
        for match_id in record.started.values():
            envelopes = store.read(match_id)
            assert [e.type for e in envelopes].count(MATCH_CANCELLED) == 1 and envelopes[-1].type == MATCH_CANCELLED
            assert game.spectator(match_id).view().cancelled
        assert set(record.results) == set(record.started.values())
        assert all(r["abandoned"] for r in record.results.values()) and record.match_records() == []
