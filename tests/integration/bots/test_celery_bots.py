"""Bots over the real path: dispatcher -> Celery (a real worker process) -> gRPC GameService."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from hiredis import pack_command
from kombu import Connection, Queue
from kombu.transport import redis as kombu_redis

from famiglia.auth import TokenSigner
from famiglia.localstack.redis_server import RedisServer
from famiglia.matchstate import command_key
from famiglia.v1 import envelope_pb2
from services.bots import handlers
from services.bots.entrypoints.broker import TRANSPORT

from .conftest import SECRET, BotsStack

pytestmark = [pytest.mark.redis, pytest.mark.xdist_group("bots")]


def seats(*policies: str | None) -> list[envelope_pb2.SeatInfo]:
    return [envelope_pb2.SeatInfo(seat=s, bot=True, policy=p, player_id=p)
            for s, p in enumerate(policies) if p is not None]


def test_a_worker_plays_a_whole_match_of_bots(bots_stack: BotsStack) -> None:
    handle = bots_stack.create_match(
        "highcard", 3, seed=4, options={"hand": "4"},
        seat_info=seats("random", "heuristic", "ismcts?iterations=20&seconds=0.05"))
    view = bots_stack.wait_finished(handle.match_id, timeout=30)
    assert sorted(s.rank for s in view.result.seats)[0] == 1
    events = list(bots_stack.client.spectator(handle.match_id).stream(until_now=True))
    played = [e.event for e in events if e.event.type == "played"]
    assert len(played) == 12
    assert all(not e.command_id for e in played), "a bot's command ids are its own (NP-H9)"
    stored = [e for e in bots_stack.command.store.read(handle.match_id) if e.type == "played"]
    assert len(stored) == 12 and all(e.command_id.startswith(f"bot:{handle.match_id}:") for e in stored)


def test_a_match_whose_engine_fails_on_a_bots_command_is_played_to_its_end(
        bots_stack: BotsStack, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command service's engine raises on one kind of command (a bug: INTERNAL, no rule's
    refusal), here a hand's highest card. A seat that chose it was retried with it by Celery,
    and queued again with it by the stall timer, for good: the match never ended. The worker
    now plays another listed command instead. Fails if the match stops at a failing command."""
    engine = bots_stack.registry.get("highcard")
    decide = type(engine).decide

    def failing(self, state, seat, command, rng):  # type: ignore[no-untyped-def]
        hand = state.hands[seat]
        if len(hand) > 1 and command.play.card == max(hand):
            raise RuntimeError("engine bug: a hand's highest card")
        return decide(self, state, seat, command, rng)

    monkeypatch.setattr(type(engine), "decide", failing)
    handle = bots_stack.create_match("highcard", 3, seed=4, options={"hand": "4"},
                                     seat_info=seats("random", "random", "random"))
    bots_stack.wait_finished(handle.match_id, timeout=40)
    assert "bot_command_failed" in (bots_stack.tmp / "worker.log").read_text()  # the failing path was met
    played = [e for e in bots_stack.command.store.read(handle.match_id) if e.type == "played"]
    assert len(played) == 12


def test_a_worker_plays_a_registered_game(bots_stack: BotsStack) -> None:
    real = [g for g in bots_stack.registry if g != "highcard"]
    if not real:
        pytest.skip("no game engine registered yet")
    game = "grifters" if "grifters" in real else real[0]
    info = bots_stack.registry.get(game).info
    handle = bots_stack.create_match(game, info.min_players, seed=2,
                                            seat_info=seats(*["random"] * info.min_players))
    view = bots_stack.wait_finished(handle.match_id, timeout=60)
    assert view.finished


def test_a_worker_plays_simultaneous_choices_several_seats_a_task(bots_stack: BotsStack) -> None:
    """GoodCritters asks every seat at once in its secret steps: one task carries them all (the
    task's `then`), so the worker takes far fewer tasks (BRPOPs) than it plays moves."""
    import redis

    if "goodcritters" not in bots_stack.registry:
        pytest.skip("GoodCritters is not registered")
    client = redis.Redis.from_url(bots_stack.redis_url)
    brpops = client.info("commandstats").get("cmdstat_brpop", {}).get("calls", 0)
    handle = bots_stack.create_match("goodcritters", 4, seed=6, seat_info=seats(*["random"] * 4))
    view = bots_stack.wait_finished(handle.match_id, timeout=90)
    taken = client.info("commandstats")["cmdstat_brpop"]["calls"] - brpops
    envelopes = bots_stack.command.store.read(handle.match_id)
    first_seq: dict[str, int] = {}
    for env in envelopes:
        if env.command_id:
            first_seq.setdefault(env.command_id, env.seq)
    moves = len(first_seq)
    assert view.finished and moves > 100
    for command_id, seq in first_seq.items():  # every move submitted at the version its id names
        assert command_id.startswith(f"bot:{handle.match_id}:")
        assert int(command_id.split(":")[2]) == seq - 1, command_id
    assert taken < 0.7 * moves, (taken, moves)  # idle BRPOP timeouts included


def test_a_lease_plays_a_turn_based_match_of_quick_bots_in_a_task_every_32_moves(bots_stack: BotsStack) -> None:
    """Grifters asks one seat at a time; with every bot seat on a quick policy one task plays
    on through up to 32 turns (asking for the next decisions in its own calls), so the worker
    takes a few tasks (BRPOPs) for a match instead of one a move."""
    import redis

    if "grifters" not in bots_stack.registry:
        pytest.skip("Grifters is not registered")
    client = redis.Redis.from_url(bots_stack.redis_url)
    brpops = client.info("commandstats").get("cmdstat_brpop", {}).get("calls", 0)
    handle = bots_stack.create_match("grifters", 3, seed=3, seat_info=seats("random", "heuristic", "random"))
    view = bots_stack.wait_finished(handle.match_id, timeout=90)
    taken = client.info("commandstats")["cmdstat_brpop"]["calls"] - brpops
    ids = {e.command_id for e in bots_stack.command.store.read(handle.match_id) if e.command_id}
    assert view.finished and len(ids) > 40
    assert all(i.startswith(f"bot:{handle.match_id}:") for i in ids)
    assert taken < len(ids) / 4, (taken, len(ids))  # idle BRPOP timeouts included


def test_a_redelivered_batch_is_answered_from_the_first_answers_over_grpc(bots_stack: BotsStack) -> None:
    from famiglia.matchstate import MatchState
    from services.bots.payload import bot_command_id, seat_payload

    if "goodcritters" not in bots_stack.registry:
        pytest.skip("GoodCritters is not registered")
    app = bots_stack.bots
    store = bots_stack.command.store
    handle = bots_stack.create_match("goodcritters", 4, seed=6, seat_info=[])  # humans: nothing queued
    match_id = handle.match_id
    while True:  # play as the humans until several seats are asked at once
        match = MatchState.from_envelopes(bots_stack.registry, store.read(match_id))
        pending = [p.seat for p in match.engine.pending(match.state)]
        if len(pending) > 1:
            break
        command = match.engine.legal_commands(match.state, pending[0], 1)[0]
        app.seat(match_id, pending[0]).submit(command, command_id=f"h{match.version}", expected_version=match.version)
    version = match.version
    batch = [(s, "random", seat_payload(match.engine, match.state, s, view=False)) for s in pending]
    handlers._REACHED.clear()
    # A worker killed after its first seat's submit ...
    assert handlers.play_bot_decisions(app, match_id, "goodcritters", version, batch[:1]) == ["submitted"]
    # ... and the message redelivered to another process: the first seat is a duplicate (its answer
    # carries the current version; the version after its command comes from the store), the rest play.
    handlers._REACHED.clear()
    outcomes = handlers.play_bot_decisions(app, match_id, "goodcritters", version, batch)
    assert outcomes == ["duplicate"] + ["submitted"] * (len(batch) - 1)
    after = store.version(match_id)
    handlers._REACHED.clear()
    assert handlers.play_bot_decisions(app, match_id, "goodcritters", version, batch) == ["duplicate"] * len(batch)
    assert store.version(match_id) == after
    match = MatchState.from_envelopes(bots_stack.registry, store.read(match_id))
    at = version
    for seat, _, _ in batch:  # each seat once, each at the version the previous one left
        first, last = match.commands[command_key(seat, bot_command_id(match_id, at, seat))]
        assert first == at + 1
        at = last
    assert at == after


def test_a_stale_decision_does_nothing(bots_stack: BotsStack) -> None:
    handle = bots_stack.create_match("highcard", 2, seed=1, seat_info=[])  # humans: nothing queued
    app = bots_stack.bots
    version = handle.version
    assert handlers.play_bot_decision(app, handle.match_id, "highcard", 0, version - 1, "random") == "stale"
    assert handlers.run_clock(app, handle.match_id, 0, version - 1) == "stale"
    assert bots_stack.command.store.version(handle.match_id) == version
    # The real one plays; the same task again is answered as a duplicate, not a second move.
    seat = bots_stack.client.spectator(handle.match_id).view().to_act[0].seat
    assert handlers.play_bot_decision(app, handle.match_id, "highcard", seat, version, "random") == "submitted"
    after = bots_stack.command.store.version(handle.match_id)
    assert handlers.play_bot_decision(app, handle.match_id, "highcard", seat, version, "random") == "stale"
    assert bots_stack.command.store.version(handle.match_id) == after


def test_a_silent_human_is_moved_on_by_the_clock(bots_stack: BotsStack) -> None:
    handle = bots_stack.create_match("highcard", 2, seed=9, options={"hand": "2", "clock_s": "1"},
                                            seat_info=seats(None, "random"))
    started = time.monotonic()
    bots_stack.wait_finished(handle.match_id, timeout=20)
    assert time.monotonic() - started >= 1.0  # the human got its full second at least once
    human = [e for e in bots_stack.command.store.read(handle.match_id) if e.type == "played" and e.seat == 0]
    assert len(human) == 2 and all(e.command_id.startswith("clock:") for e in human)
    own = [r.event for r in bots_stack.client.seat(handle.match_id, handle.seat_tokens[0]).stream(until_now=True)
           if r.event.type == "played" and r.event.seat == 0]
    assert [e.command_id for e in own] == [e.command_id for e in human]  # shown to the seat itself


def test_a_clock_taken_by_a_worker_killed_before_it_recorded_it_is_queued_again(bots_stack: BotsStack) -> None:
    """A worker's BRPOP takes a message off its queue before the worker writes kombu's unacked
    record (ZADD, HSET): killed in between, the message is gone, and no visibility timeout brings
    it back. A lost bot decision is queued again by the stall check; a lost clock was not, and
    a seat whose person walked away kept the match waiting for good. Here the worker is down
    while the clock is queued, and the clock's message is taken as that worker's BRPOP would."""
    import redis

    from services.bots.entrypoints.celery_app import CLOCKS_QUEUE

    client = redis.Redis.from_url(bots_stack.redis_url)
    bots_stack.kill_worker()
    try:
        handle = bots_stack.create_match("highcard", 2, seed=9, options={"hand": "1", "clock_s": "1"})
        deadline = time.monotonic() + 10
        taken = None
        while taken is None and time.monotonic() < deadline:
            taken = client.rpop(CLOCKS_QUEUE)  # the killed worker's BRPOP
            time.sleep(0.02)
        assert taken is not None and b"famiglia.bots.clock" in taken
        assert client.llen(CLOCKS_QUEUE) == 0
    finally:
        bots_stack.start_worker()
        client.close()
    # the clock's second, the grace, the stall time (3 s) and a worker starting: ~6 s; without
    # the clock queued again the match never moves (the margin is for a loaded machine)
    view = bots_stack.wait_finished(handle.match_id, timeout=45)
    played = [e for e in bots_stack.command.store.read(handle.match_id) if e.type == "played"]
    assert len(played) == 2 and all(e.command_id.startswith("clock:") for e in played)
    assert view.version == played[-1].seq


def test_a_killed_worker_loses_nothing(bots_stack: BotsStack) -> None:
    slow = "ismcts?iterations=100000&seconds=0.4"
    handle = bots_stack.create_match("highcard", 2, seed=5, options={"hand": "6"},
                                            seat_info=seats(slow, slow))
    store = bots_stack.command.store
    deadline = time.monotonic() + 60
    while store.version(handle.match_id) < handle.version + 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # most likely in the middle of a decision now
    bots_stack.kill_worker()
    stopped_at = store.version(handle.match_id)
    # killed mid-match, or this test checks nothing of what a kill loses
    assert handle.version + 3 <= stopped_at < handle.version + 12, (stopped_at, handle.version)
    bots_stack.start_worker()
    view = bots_stack.wait_finished(handle.match_id, timeout=45)
    assert view.version == handle.version + 12  # every card played exactly once


def test_a_worker_killed_in_the_middle_of_a_batch_loses_nothing(bots_stack: BotsStack) -> None:
    if "goodcritters" not in bots_stack.registry:
        pytest.skip("GoodCritters is not registered")
    slow = "ismcts?iterations=100000&seconds=0.03"
    handle = bots_stack.create_match("goodcritters", 4, seed=6, seat_info=seats(slow, "random", slow, "random"))
    store = bots_stack.command.store
    deadline = time.monotonic() + 60
    while store.version(handle.match_id) < handle.version + 12 and time.monotonic() < deadline:
        time.sleep(0.02)
    bots_stack.kill_worker()
    stopped_at = store.version(handle.match_id)
    assert stopped_at >= handle.version + 12, "the worker never got going: nothing was killed mid-batch"
    bots_stack.start_worker()
    view = bots_stack.wait_finished(handle.match_id, timeout=120)  # the stall re-queue or the redelivery went on
    assert view.version > stopped_at
    first_seq: dict[str, int] = {}
    for env in store.read(handle.match_id):
        if env.command_id:
            first_seq.setdefault(env.command_id, env.seq)
    for command_id, seq in first_seq.items():  # no move twice: each at the version its id names
        assert int(command_id.split(":")[2]) == seq - 1, command_id


def test_a_tournament_runs_on_the_workers_and_reports_standings(bots_stack: BotsStack) -> None:
    from famiglia.cli.tournament import TournamentClient
    from famiglia.v1 import tournament_service_pb2 as tpb
    from services.bots.entrypoints.grpc_server import serve as serve_tournaments
    from services.bots.tournaments import TournamentRepo

    server, port = serve_tournaments(TournamentRepo(bots_stack.command.store.client), bots_stack.registry,
                                     "127.0.0.1:0", signer=TokenSigner(SECRET))
    server.start()
    client = TournamentClient(f"127.0.0.1:{port}", secret=SECRET)
    try:
        t = client.create(tpb.CreateTournamentRequest(
            name="it", games=[tpb.TournamentGame(game_id="highcard", seat_counts=[2], options={"hand": "3"})],
            entrants=["random", "ismcts?iterations=10&seconds=0.02"], matches_per_game=4, concurrency=4))
        assert t.planned == 4 and t.status == tpb.TOURNAMENT_RUNNING
        deadline = time.monotonic() + 30
        while t.status == tpb.TOURNAMENT_RUNNING and time.monotonic() < deadline:
            time.sleep(0.2)
            t = client.get(t.tournament_id, include_matches=True)
        assert t.status == tpb.TOURNAMENT_FINISHED and t.finished == 4
        assert t.moves == 4 * 6
        assert {s.entrant for s in t.standings} == {"random", "ismcts?iterations=10&seconds=0.02"}
        assert sum(s.matches for s in t.standings) == 8
        assert len(t.matches) == 4 and all(len(m.ranks) == 2 for m in t.matches)
        assert t.tournament_id in [x.tournament_id for x in client.list()]
    finally:
        client.close()
        server.stop(0)


def test_a_cancelled_tournaments_matches_stop_being_played(bots_stack: BotsStack) -> None:
    """CancelTournament while the workers play its matches: the stack's runner cancels each one
    (one `match_cancelled`, the last event), the dispatcher lets them go (no more bot tasks),
    the tournament records them abandoned, and the planned matches not started never are."""
    from famiglia.cli.tournament import TournamentClient
    from famiglia.eventstore.envelopes import MATCH_CANCELLED
    from famiglia.v1 import tournament_service_pb2 as tpb
    from services.bots.dispatcher import live_matches_of
    from services.bots.entrypoints.grpc_server import serve as serve_tournaments
    from services.bots.tournaments import TournamentRepo

    store = bots_stack.command.store
    repo = TournamentRepo(store.client)
    server, port = serve_tournaments(repo, bots_stack.registry, "127.0.0.1:0", signer=TokenSigner(SECRET))
    server.start()
    client = TournamentClient(f"127.0.0.1:{port}", secret=SECRET)
    try:
        # Half a CPU second a decision, 12 decisions a match: long enough to be cancelled in play.
        slow = "ismcts?iterations=100000&seconds=0.5"
        t = client.create(tpb.CreateTournamentRequest(
            name="slow", games=[tpb.TournamentGame(game_id="highcard", seat_counts=[2], options={"hand": "6"})],
            entrants=[slow, slow], matches_per_game=6, concurrency=2))
        tid = t.tournament_id
        deadline = time.monotonic() + 60
        started: list[str] = []
        first: dict[str, int] = {}
        while time.monotonic() < deadline:  # both started, and each moved on since it was first seen
            started = sorted(repo.get(tid, results=False).started.values())
            for match_id in started:
                first.setdefault(match_id, store.version(match_id))
            if len(started) == 2 and all(store.version(m) > first[m] for m in started):
                break
            time.sleep(0.1)
        assert len(started) == 2, started
        assert client.cancel(tid).status == tpb.TOURNAMENT_CANCELLED
        for match_id in started:
            view = bots_stack.wait_finished(match_id, timeout=30)
            assert view.cancelled and tid in view.cancel_reason
        while time.monotonic() < deadline and (repo.cancelling() or
                                               set(started) & set(live_matches_of(store).members())):
            time.sleep(0.1)
        for match_id in started:
            envelopes = store.read(match_id)
            assert [e.type for e in envelopes].count(MATCH_CANCELLED) == 1
            assert envelopes[-1].type == MATCH_CANCELLED
            assert envelopes[-1].command_id == f"cancel:tournament:{tid}:{match_id}"
        assert not set(started) & set(live_matches_of(store).members())  # the bots let them go
        record = repo.get(tid)
        assert record is not None and sorted(record.started.values()) == started
        assert all(record.results[m]["abandoned"] for m in started) and record.match_records() == []
        shown = client.get(tid, include_matches=True)
        assert shown.status == tpb.TOURNAMENT_CANCELLED and shown.finished == 2 and not shown.standings
    finally:
        client.close()
        server.stop(0)


def test_recent_matches_are_found_on_the_redis_partition_streams(bots_stack: BotsStack) -> None:
    from services.bots.dispatcher import _recent_matches

    handle = bots_stack.create_match("highcard", 2, seed=3, seat_info=[])
    assert handle.match_id in _recent_matches(bots_stack.command.store, 50)


def _children(pid: int) -> list[int]:
    """Live child processes of `pid` (Linux /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry.name))
    return sorted(out)


def test_solo_workers_are_kept_one_per_core_and_a_killed_one_loses_nothing(bots_stack: BotsStack) -> None:
    bots_stack.kill_worker()
    bots_stack.start_worker(pool="solo")
    try:
        assert bots_stack.worker is not None
        supervisor = bots_stack.worker.pid
        deadline = time.monotonic() + 45
        while len(_children(supervisor)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        first = _children(supervisor)
        assert len(first) == 2  # FAMIGLIA_BOTS_CONCURRENCY=2: two single-process Celery workers
        slow = "ismcts?iterations=100000&seconds=0.3"
        handle = bots_stack.create_match("highcard", 2, seed=8, options={"hand": "6"},
                                                seat_info=seats(slow, slow))
        store = bots_stack.command.store
        while store.version(handle.match_id) < handle.version + 2 and time.monotonic() < deadline + 20:
            time.sleep(0.05)
        time.sleep(0.1)  # most likely one of them is thinking now
        for pid in first:
            os.kill(pid, signal.SIGKILL)
        # One look at the children per check: two looks (a count, then the pids) could see
        # the killed workers still alive in the first and already gone in the second.
        restarted = time.monotonic() + 45
        now = _children(supervisor)
        while time.monotonic() < restarted and (len(now) < 2 or set(now) & set(first)):
            time.sleep(0.1)
            now = _children(supervisor)
        assert len(now) == 2 and not set(now) & set(first), (
            (bots_stack.tmp / "worker.log").read_text()[-3000:])  # what the supervisor said
        view = bots_stack.wait_finished(handle.match_id, timeout=120)
        assert view.version == handle.version + 12  # every card played exactly once
    finally:
        bots_stack.kill_worker()
        bots_stack.start_worker()


def test_the_kept_brpop_is_kombus_own_and_serves_every_queue(redis_server: RedisServer) -> None:
    """The consumer's BRPOP is packed once per queue order (broker.Channel._brpop_start):
    the bytes are those kombu's own `_brpop_start` sends, and messages on both queues arrive."""
    queues = [Queue("famiglia.test.brpop.a"), Queue("famiglia.test.brpop.b")]
    got: list[str] = []

    def take(body: Any, message: Any) -> None:
        got.append(body["queue"])
        message.ack()

    with Connection(redis_server.url, transport=TRANSPORT) as conn:
        producer = conn.Producer()
        for queue in queues * 3:
            producer.publish({"queue": queue.name}, routing_key=queue.name, declare=[queue], serializer="json")
        with conn.Consumer(queues, callbacks=[take], accept=["json"]):
            while len(got) < 6:
                conn.drain_events(timeout=5)
            channel = conn.default_channel
            assert channel._brpops  # the kept path ran
            connection = channel.client.connection
            sent: list[Any] = []
            with patch.object(connection, "send_command", lambda *args: sent.append(pack_command(args))), \
                    patch.object(connection, "send_packed_command", lambda packed: sent.append(b"".join(packed))):
                kombu_redis.Channel._brpop_start(channel)
                channel._brpop_start()
            channel._in_poll = None
        assert len(sent) == 2 and sent[0] == sent[1] and b"$5\r\nBRPOP\r\n$21\r\nfamiglia.test.brpop." in sent[0]
        assert sorted(got) == sorted(q.name for q in queues * 3)
