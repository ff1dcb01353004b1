"""Races between concurrent requests, audited over real gRPC and one real redis-server: two
GameService replicas (each its own process state and store connection, as two pods are), the
replay, matchmaking and tournament services, and every racing request on a channel of its own
(its own TCP connection), lined up with a `threading.Barrier`.

Each race is run a few dozen times in the quick profile and many more under `make soak`; each
checks that the outcome is one of those the API promises (one append, the loser refused with its
stable code) and that the stored history agrees with what every caller was told."""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
import redis

from famiglia.auth import TokenSigner
from famiglia.config import Settings
from famiglia.engine.registry import default_registry
from famiglia.eventstore.envelopes import MATCH_CANCELLED, MATCH_CREATED
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil.errors import error_code
from famiglia.matchmaking import MatchPolicy
from famiglia.v1 import envelope_pb2
from famiglia.v1 import game_service_pb2 as game_pb
from famiglia.v1 import game_service_pb2_grpc as game_grpc
from famiglia.v1 import matchmaking_service_pb2 as mm_pb
from famiglia.v1 import matchmaking_service_pb2_grpc as mm_grpc
from famiglia.v1 import replay_service_pb2 as replay_pb
from famiglia.v1 import replay_service_pb2_grpc as replay_grpc
from famiglia.v1 import tournament_service_pb2 as tournament_pb
from famiglia.v1 import tournament_service_pb2_grpc as tournament_grpc
from tests.e2e.conftest import SECRET
from tests.profile import examples

C = grpc.StatusCode
SIGNER = TokenSigner(SECRET)
REGISTRY = default_registry()
DEADLINE = 60
"""Seconds a call may take before it counts as a hang: generous, as the machine may be loaded."""
ROUNDS = examples(quick=24, soak=150)
"""How many times each race is run."""


# -- the services ----------------------------------------------------------------------------------
@dataclass
class Cluster:
    """Addresses of every service, two GameService replicas among them; `dial` opens a channel
    with a subchannel of its own (a TCP connection per caller, not one shared by the process)."""

    game: list[str]
    replay: str
    matchmaking: str
    tournaments: str
    redis_url: str
    store: RedisEventStore
    matchmaker: Any
    tournament_repo: Any
    channels: list[grpc.Channel] = field(default_factory=list)

    def dial(self, address: str) -> grpc.Channel:
        channel = grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
        self.channels.append(channel)
        return channel

    def game_stub(self, i: int) -> game_grpc.GameServiceStub:
        return game_grpc.GameServiceStub(self.dial(self.game[i % len(self.game)]))

    def replay_stub(self) -> replay_grpc.ReplayServiceStub:
        return replay_grpc.ReplayServiceStub(self.dial(self.replay))

    def players_stub(self) -> mm_grpc.PlayerServiceStub:
        return mm_grpc.PlayerServiceStub(self.dial(self.matchmaking))

    def tickets_stub(self) -> mm_grpc.MatchmakingServiceStub:
        return mm_grpc.MatchmakingServiceStub(self.dial(self.matchmaking))

    def tournaments_stub(self) -> tournament_grpc.TournamentServiceStub:
        return tournament_grpc.TournamentServiceStub(self.dial(self.tournaments))


@pytest.fixture()
def cluster(redis_url: str, tmp_path: Path) -> Iterator[Cluster]:
    from services.bots.entrypoints.grpc_server import serve as serve_tournaments
    from services.bots.tournaments import TournamentRepo
    from services.command.bootstrap import bootstrap as command_bootstrap
    from services.command.entrypoints.grpc_server import serve as serve_command
    from services.matchmaking.bootstrap import bootstrap as matchmaking_bootstrap
    from services.matchmaking.entrypoints.grpc_server import serve as serve_matchmaking
    from services.matchmaking.matcher import MatcherTuning
    from services.matchmaking.settings import MatchmakingSettings
    from services.replay.bootstrap import ReplaySettings
    from services.replay.bootstrap import bootstrap as replay_bootstrap
    from services.replay.entrypoints.grpc_server import serve as serve_replay
    from tests.support.clocks import run_out

    settings = Settings(redis_url=redis_url, secret=SECRET, database_url=f"sqlite:///{tmp_path / 'read.db'}")
    stores = [RedisEventStore.connect(redis_url) for _ in range(3)]
    # The replicas' clocks past every seat's deadline: a test's clock task (`run_clock`) finds the
    # seat's clock run out, as the bots' would after waiting it out.
    started = [serve_command(run_out(command_bootstrap(store=s, settings=settings)), "127.0.0.1:0", workers=16)
               for s in stores[:2]]
    game = [f"127.0.0.1:{port}" for _server, port in started]
    # The matcher (run by the tests, `run_once`) creates its tables through the first replica;
    # a lone ticket gets bots at once.
    matchmaking = matchmaking_bootstrap(
        settings=Settings(redis_url=redis_url, secret=SECRET, command_addr=game[0]),
        mm=MatchmakingSettings(MatchPolicy(backfill_after=0.0, bot_policy="random"), MatcherTuning()))
    client = redis.Redis.from_url(redis_url)
    repo = TournamentRepo(client)
    started += [
        serve_replay(replay_bootstrap(store=stores[2], settings=settings, replay_settings=ReplaySettings(),
                                      use_archive=False), "127.0.0.1:0", workers=16),
        serve_matchmaking(matchmaking.app, "127.0.0.1:0", workers=16),
        serve_tournaments(repo, REGISTRY, "127.0.0.1:0", workers=16, signer=SIGNER),
    ]
    for server, _port in started:
        server.start()
    ports = [port for _server, port in started]
    c = Cluster(game, f"127.0.0.1:{ports[2]}", f"127.0.0.1:{ports[3]}", f"127.0.0.1:{ports[4]}", redis_url,
                stores[2], matchmaking, repo)
    yield c
    for channel in c.channels:
        channel.close()
    for server, _port in started:
        server.stop(grace=None)
    matchmaking.close()
    client.close()
    for s in stores:
        s.close()


# -- racing ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Refused:
    status: C
    code: str


def race(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls at once, one thread each, released together by a barrier: each one's answer,
    or `Refused` (its status and stable code) for a call that raised a gRPC error."""
    barrier = threading.Barrier(len(calls))
    answers: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        try:
            answers[i] = calls[i]()
        except grpc.RpcError as exc:
            answers[i] = Refused(exc.code(), error_code(exc))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            answers[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=DEADLINE * 2)
    assert not any(t.is_alive() for t in threads), "a racing call hung"
    crashed = [a for a in answers if isinstance(a, BaseException)]
    assert not crashed, crashed
    return answers


def bearer(token: str | None) -> list[tuple[str, str]] | None:
    return None if token is None else [("authorization", f"Bearer {token}")]


def operator() -> list[tuple[str, str]] | None:
    return bearer(SIGNER.operator_token("race-test"))


def new_match(stub: game_grpc.GameServiceStub, game_id: str = "grifters", seats: int = 3,
              seed: int = 1) -> game_pb.CreateMatchResponse:
    return stub.CreateMatch(game_pb.CreateMatchRequest(game_id=game_id, seats=seats, seed=seed), timeout=DEADLINE)


def asked(stub: game_grpc.GameServiceStub, match: game_pb.CreateMatchResponse) -> list[int]:
    """The seats the game waits for (each asked in its own view: a private ask shows there only)."""
    return [seat for seat, token in enumerate(match.seat_tokens)
            if seat in {p.seat for p in stub.GetView(game_pb.GetViewRequest(match_id=match.match_id),
                                                     metadata=bearer(token), timeout=DEADLINE).to_act}]


def legal(stub: game_grpc.GameServiceStub, match_id: str, token: str) -> game_pb.ListLegalCommandsResponse:
    return stub.ListLegalCommands(game_pb.ListLegalCommandsRequest(match_id=match_id), metadata=bearer(token),
                                  timeout=DEADLINE)


def submit(stub: game_grpc.GameServiceStub, match_id: str, token: str, command: Any, command_id: str,
           expected_version: int | None = None, omit_events: bool = False) -> game_pb.SubmitCommandResponse:
    request = game_pb.SubmitCommandRequest(match_id=match_id, command_id=command_id, command=command,
                                           omit_events=omit_events)
    if expected_version is not None:
        request.expected_version = expected_version
    return stub.SubmitCommand(request, metadata=bearer(token), timeout=DEADLINE)


def play_a_few(stub: game_grpc.GameServiceStub, match: game_pb.CreateMatchResponse, rng: random.Random,
               moves: int) -> None:
    """Random legal commands of the seats asked, so a race does not always start at the deal."""
    for _ in range(moves):
        seats = asked(stub, match)
        if not seats:
            return
        seat = rng.choice(seats)
        options = legal(stub, match.match_id, match.seat_tokens[seat])
        if not options.commands:
            return
        submit(stub, match.match_id, match.seat_tokens[seat], rng.choice(list(options.commands)),
               f"warm:{options.version}:{seat}", options.version, omit_events=True)


def command_ids(store: RedisEventStore, match_id: str) -> list[tuple[int, str]]:
    """(seat, command id) of every stored command, once per command (its first event)."""
    seen: list[tuple[int, str]] = []
    for env in store.read(match_id):
        key = (env.seat, env.command_id)
        if env.command_id and (not seen or seen[-1] != key):
            seen.append(key)
    return seen


# -- GameService -----------------------------------------------------------------------------------
def test_one_command_id_sent_at_once_over_four_connections_to_two_replicas_is_stored_once_answered_alike(
        cluster: Cluster) -> None:
    stubs = [cluster.game_stub(i) for i in range(4)]
    def one_round(r: int) -> None:
        match = new_match(stubs[0], seed=r)
        play_a_few(stubs[0], match, random.Random(r), r % 5)
        seat = asked(stubs[0], match)[0]
        token = match.seat_tokens[seat]
        options = legal(stubs[0], match.match_id, token)
        command = options.commands[r % len(options.commands)]
        expected = options.version if r % 2 else None  # with and without an expected version
        answers = race(*[lambda s=s: submit(s, match.match_id, token, command, "twice", expected) for s in stubs])
        assert all(isinstance(a, game_pb.SubmitCommandResponse) for a in answers), answers
        assert sorted(a.duplicate for a in answers) == [False, True, True, True], answers
        assert len({a.SerializeToString(deterministic=True) for a in
                    [game_pb.SubmitCommandResponse(version=a.version, events=a.events) for a in answers]}) == 1, \
            "every caller is answered with the first answer"
        assert command_ids(cluster.store, match.match_id).count((seat, "twice")) == 1
        assert cluster.store.version(match.match_id) == answers[0].version

    for r in range(ROUNDS):
        one_round(r)


def _simultaneous(stub: game_grpc.GameServiceStub, seed: int) -> tuple[game_pb.CreateMatchResponse, list[int]]:
    """A GoodCritters match played at random up to a step where two seats or more are asked at once."""
    match = new_match(stub, "goodcritters", 4, seed)
    rng = random.Random(seed)
    for _ in range(200):
        seats = asked(stub, match)
        if len(seats) >= 2:
            return match, seats
        options = legal(stub, match.match_id, match.seat_tokens[seats[0]])
        submit(stub, match.match_id, match.seat_tokens[seats[0]], rng.choice(list(options.commands)),
               f"warm:{options.version}", options.version, omit_events=True)
    raise AssertionError("no simultaneous step within 200 commands")


@pytest.mark.skipif("goodcritters" not in REGISTRY, reason="GoodCritters not registered")
def test_two_seats_of_a_simultaneous_choice_acting_at_once_on_two_replicas(cluster: Cluster) -> None:
    """Without an expected version both choices are taken, one after the other; at the same
    expected version exactly one is, and the other is ABORTED `stale_version`."""
    stubs = [cluster.game_stub(i) for i in range(2)]
    def one_round(r: int) -> None:
        match, seats = _simultaneous(stubs[0], r)
        pair = seats[:2]
        options = [legal(stubs[0], match.match_id, match.seat_tokens[s]) for s in pair]
        expected = options[0].version if r % 2 else None
        answers = race(*[lambda i=i: submit(stubs[i], match.match_id, match.seat_tokens[pair[i]],
                                            options[i].commands[0], f"pick:{pair[i]}", expected) for i in range(2)])
        taken = [a for a in answers if isinstance(a, game_pb.SubmitCommandResponse)]
        stored = command_ids(cluster.store, match.match_id)
        if expected is None:
            assert len(taken) == 2 and len({a.version for a in taken}) == 2, answers
            assert {(s, f"pick:{s}") for s in pair} <= set(stored)
        else:
            assert len(taken) == 1 and [a for a in answers if a not in taken] == [Refused(C.ABORTED, "stale_version")], \
                answers
            assert sum((s, f"pick:{s}") in stored for s in pair) == 1
        assert cluster.store.version(match.match_id) == max(a.version for a in taken)

    for r in range(ROUNDS):
        one_round(r)


def test_a_seats_command_racing_its_turn_clock_at_the_same_version_one_wins_cleanly(cluster: Cluster) -> None:
    """The bots' clock task (`run_clock`: the rules' default, at the version the clock was set)
    and the seat's own command sent at that version: exactly one is stored; a losing command is
    ABORTED `stale_version`, a losing clock does nothing ("stale")."""
    from services.bots import handlers
    from services.bots.bootstrap import BotsSettings
    from services.bots.bootstrap import bootstrap as bots_bootstrap

    bots = bots_bootstrap(settings=Settings(redis_url=cluster.redis_url, secret=SECRET, command_addr=cluster.game[1]),
                          store=cluster.store, bots=BotsSettings())
    stub = cluster.game_stub(0)
    try:
        def one_round(r: int) -> None:
            match = new_match(stub, seed=100 + r)
            play_a_few(stub, match, random.Random(r), r % 4)
            seat = asked(stub, match)[0]
            options = legal(stub, match.match_id, match.seat_tokens[seat])
            version = options.version
            mine, clock = race(
                lambda: submit(stub, match.match_id, match.seat_tokens[seat], options.commands[-1], f"me:{version}",
                               version),
                lambda: handlers.run_clock(bots, match.match_id, seat, version))
            stored = [k for k in command_ids(cluster.store, match.match_id) if k[1] in
                      (f"me:{version}", handlers.clock_command_id(match.match_id, version, seat))]
            assert len(stored) == 1, (mine, clock, stored)
            if isinstance(mine, Refused):
                assert mine == Refused(C.ABORTED, "stale_version") and clock == "submitted", (mine, clock)
                assert stored[0][1].startswith("clock:")
            else:
                assert clock == "stale" and stored == [(seat, f"me:{version}")], (mine, clock)

        for r in range(ROUNDS):
            one_round(r)
    finally:
        bots.close()


def test_create_match_with_one_request_id_at_once_on_two_replicas_makes_one_match_with_the_same_tokens(
        cluster: Cluster) -> None:
    stubs = [cluster.game_stub(i) for i in range(4)]
    def one_round(r: int) -> None:
        request = game_pb.CreateMatchRequest(game_id="grifters", seats=2 + r % 3, request_id=uuid.uuid4().hex)
        if r % 2:
            request.seed = r
        answers = race(*[lambda s=s: s.CreateMatch(request, timeout=DEADLINE) for s in stubs])
        assert all(isinstance(a, game_pb.CreateMatchResponse) for a in answers), answers
        assert len({a.SerializeToString(deterministic=True) for a in answers}) == 1, answers
        envelopes = cluster.store.read(answers[0].match_id)
        assert [e.seq for e in envelopes if e.type == MATCH_CREATED] == [1]
        assert cluster.store.version(answers[0].match_id) == answers[0].version == len(envelopes)

    for r in range(ROUNDS):
        one_round(r)


def test_cancel_match_racing_a_command_on_another_replica_ends_the_match_last(cluster: Cluster) -> None:
    """Whichever lands first, the cancel is the last event; a command after it is
    FAILED_PRECONDITION `match_over` (never `stale_version`); with both at one expected version,
    exactly one is taken."""
    stubs = [cluster.game_stub(i) for i in range(2)]
    def one_round(r: int) -> None:
        match = new_match(stubs[0], seed=200 + r)
        play_a_few(stubs[0], match, random.Random(r), r % 4)
        seat = asked(stubs[0], match)[0]
        options = legal(stubs[0], match.match_id, match.seat_tokens[seat])
        at = options.version if r % 3 == 2 else None  # the cancel's expected version, if any
        cancel = game_pb.CancelMatchRequest(match_id=match.match_id, reason="race", request_id=f"c{r}")
        if at is not None:
            cancel.expected_version = at
        command, cancelled = race(
            lambda: submit(stubs[1], match.match_id, match.seat_tokens[seat], options.commands[0], "cmd",
                           options.version if r % 3 else None),
            lambda: stubs[0].CancelMatch(cancel, metadata=operator(), timeout=DEADLINE))
        envelopes = cluster.store.read(match.match_id)
        if isinstance(cancelled, Refused):
            assert at is not None and cancelled == Refused(C.ABORTED, "stale_version"), (command, cancelled)
            assert not isinstance(command, Refused) and envelopes[-1].type != MATCH_CANCELLED
            return
        assert envelopes[-1].type == MATCH_CANCELLED and envelopes[-1].seq == cancelled.version, (command, cancelled)
        if isinstance(command, Refused):
            assert command == Refused(C.FAILED_PRECONDITION, "match_over"), command
            assert "cmd" not in {e.command_id for e in envelopes}
        else:
            assert command.version < cancelled.version

    for r in range(ROUNDS):
        one_round(r)


def test_two_cancels_at_once_store_one_event(cluster: Cluster) -> None:
    """The same request id twice: one event, both answered with its version (one `duplicate`);
    two request ids: one cancel, the other `match_over`."""
    stubs = [cluster.game_stub(i) for i in range(2)]
    def one_round(r: int) -> None:
        match = new_match(stubs[0], seed=300 + r)
        ids = ["same", "same"] if r % 2 else ["one", "two"]
        answers = race(*[lambda i=i: stubs[i].CancelMatch(game_pb.CancelMatchRequest(
            match_id=match.match_id, reason="race", request_id=ids[i]), metadata=operator(), timeout=DEADLINE)
            for i in range(2)])
        kinds = [e.type for e in cluster.store.read(match.match_id)]
        assert kinds.count(MATCH_CANCELLED) == 1 and kinds[-1] == MATCH_CANCELLED
        if r % 2:
            assert sorted(a.duplicate for a in answers) == [False, True], answers
            assert len({a.version for a in answers}) == 1
        else:
            assert sorted(answers, key=lambda a: isinstance(a, Refused))[1] == \
                Refused(C.FAILED_PRECONDITION, "match_over"), answers

    for r in range(ROUNDS):
        one_round(r)


def test_a_stream_opened_while_commands_are_appended_has_no_gap_and_no_duplicate_at_its_seam(
        cluster: Cluster) -> None:
    """StreamEvents (follow) opened on one replica from the version its caller just read, while
    another replica appends: what it sends is exactly what the same stream opened after the
    match ended sends from there: every event once, in order, none lost between the stored
    history and the live tail."""
    writer_stub = cluster.game_stub(0)
    def one_round(r: int) -> None:
        match = new_match(writer_stub, seed=400 + r)
        viewers = [None, *match.seat_tokens]
        readers: list[tuple[str | None, int, list[tuple[int, bytes]]]] = []
        threads = []

        def follow(token: str | None, got: list[tuple[int, bytes]], start: threading.Event) -> None:
            stub = cluster.game_stub(1)
            after = stub.GetView(game_pb.GetViewRequest(match_id=match.match_id), metadata=bearer(token),
                                 timeout=DEADLINE).version
            readers.append((token, after, got))
            start.set()
            for update in stub.StreamEvents(game_pb.StreamEventsRequest(match_id=match.match_id, from_version=after),
                                            metadata=bearer(token), timeout=DEADLINE):
                if update.HasField("event"):
                    got.append((update.version, update.event.SerializeToString(deterministic=True)))

        rng = random.Random(r)
        for step in range(24):
            if step % 3 == 0:  # a stream opens as the next command goes in
                started = threading.Event()
                thread = threading.Thread(target=follow, args=(viewers[step % len(viewers)], [], started))
                thread.start()
                threads.append(thread)
                started.wait(DEADLINE)
            play_a_few(writer_stub, match, rng, 1)
        writer_stub.CancelMatch(game_pb.CancelMatchRequest(match_id=match.match_id, reason="done", request_id="end"),
                                metadata=operator(), timeout=DEADLINE)
        for thread in threads:
            thread.join(DEADLINE)
        assert not any(t.is_alive() for t in threads)
        for token, after, got in readers:
            later = [(u.version, u.event.SerializeToString(deterministic=True)) for u in writer_stub.StreamEvents(
                game_pb.StreamEventsRequest(match_id=match.match_id, from_version=after, until_now=True),
                metadata=bearer(token),
                timeout=DEADLINE) if u.HasField("event")]
            assert got == later, (after, [v for v, _ in got], [v for v, _ in later])

    for r in range(max(2, ROUNDS // 4)):
        one_round(r)


def test_get_state_at_an_event_just_appended_answers_what_it_answers_later(cluster: Cluster) -> None:
    """GetStateAt asked, on several connections at once, for the newest event while the next
    commands are appended (the replay service's timeline caught up by several calls at once):
    each answer is the one the same question gets once the match is over, or a refusal with a
    stable code."""
    writer_stub = cluster.game_stub(0)
    replays = [cluster.replay_stub() for _ in range(3)]
    def one_round(r: int) -> None:
        match = new_match(writer_stub, seed=500 + r)
        token = match.seat_tokens[0]
        seen: dict[str, bytes] = {}
        rng = random.Random(r)
        for _step in range(16):
            newest = cluster.store.read(match.match_id, after=cluster.store.version(match.match_id) - 1)[0].event_id

            def ask(stub: replay_grpc.ReplayServiceStub, event_id: str = newest) -> bytes:
                answer = stub.GetStateAt(replay_pb.GetStateAtRequest(event_id=event_id), metadata=bearer(token),
                                         timeout=DEADLINE)
                return _state_part(answer)

            answers = race(*[lambda s=s: ask(s) for s in replays], lambda: play_a_few(writer_stub, match, rng, 1))
            for a in answers[:-1]:
                assert isinstance(a, bytes), a
                assert seen.setdefault(newest, a) == a
        for event_id, first in seen.items():
            again = replays[0].GetStateAt(replay_pb.GetStateAtRequest(event_id=event_id), metadata=bearer(token),
                                          timeout=DEADLINE)
            assert _state_part(again) == first

    for r in range(max(2, ROUNDS // 4)):
        one_round(r)


def _state_part(answer: replay_pb.GetStateAtResponse) -> bytes:
    """What a GetStateAt answer says of the state at its event (not of the match now)."""
    part = replay_pb.GetStateAtResponse()
    part.CopyFrom(answer)
    part.ClearField("last_seq")
    part.ClearField("match_finished")
    return part.SerializeToString(deterministic=True)


# -- matchmaking -----------------------------------------------------------------------------------
def _guest(cluster: Cluster, name: str) -> mm_pb.RegisterGuestResponse:
    return cluster.players_stub().RegisterGuest(mm_pb.RegisterGuestRequest(display_name=name), timeout=DEADLINE)


def test_a_guest_registered_twice_at_once_with_one_request_id_is_one_player(cluster: Cluster) -> None:
    stubs = [cluster.players_stub() for _ in range(4)]
    def one_round(r: int) -> None:
        request = mm_pb.RegisterGuestRequest(display_name=f"Twin {r}", request_id=uuid.uuid4().hex)
        answers = race(*[lambda s=s: s.RegisterGuest(request, timeout=DEADLINE) for s in stubs])
        assert all(isinstance(a, mm_pb.RegisterGuestResponse) for a in answers), answers
        assert len({(a.player_id, a.player_token) for a in answers}) == 1, answers
        profile = stubs[0].GetProfile(mm_pb.GetProfileRequest(), metadata=bearer(answers[0].player_token),
                                      timeout=DEADLINE)
        assert profile.display_name == f"Twin {r}"

    for r in range(ROUNDS):
        one_round(r)


def test_one_ticket_request_id_at_once_makes_one_ticket(cluster: Cluster) -> None:
    stubs = [cluster.tickets_stub() for _ in range(4)]
    game_id = next(iter(cluster.matchmaker.app.games))
    def one_round(r: int) -> None:
        guest = _guest(cluster, f"P{r}")
        request = mm_pb.CreateTicketRequest(game_id=game_id, request_id=f"t{r}")
        answers = race(*[lambda s=s: s.CreateTicket(request, metadata=bearer(guest.player_token), timeout=DEADLINE)
                         for s in stubs])
        assert all(isinstance(a, mm_pb.CreateTicketResponse) for a in answers), answers
        assert len({a.ticket_id for a in answers}) == 1 and sorted(a.duplicate for a in answers) == \
            [False, True, True, True], answers
        assert cluster.matchmaker.app.store.queue_size(game_id) == 1
        stubs[0].CancelTicket(mm_pb.CancelTicketRequest(ticket_id=answers[0].ticket_id),
                              metadata=bearer(guest.player_token), timeout=DEADLINE)

    for r in range(ROUNDS):
        one_round(r)


def test_cancel_ticket_racing_the_matcher_forming_its_table_either_cancels_or_seats(cluster: Cluster) -> None:
    """One of the two wins, atomically: a cancelled ticket is at no table (no match names its
    player), a refused cancel (`ticket_matched`) leaves the player seated."""
    stub = cluster.tickets_stub()
    game_id = next(iter(cluster.matchmaker.app.games))
    def one_round(r: int) -> None:
        guest = _guest(cluster, f"C{r}")
        ticket = stub.CreateTicket(mm_pb.CreateTicketRequest(game_id=game_id, request_id=f"c{r}"),
                                   metadata=bearer(guest.player_token), timeout=DEADLINE).ticket_id
        cancelled, _formed = race(
            lambda: cluster.tickets_stub().CancelTicket(mm_pb.CancelTicketRequest(ticket_id=ticket),
                                                        metadata=bearer(guest.player_token), timeout=DEADLINE),
            cluster.matchmaker.matcher.run_once)
        cluster.matchmaker.matcher.run_once()  # a table claimed during the cancel is finished
        final = stub.GetTicket(mm_pb.GetTicketRequest(ticket_id=ticket), metadata=bearer(guest.player_token),
                               timeout=DEADLINE)
        if isinstance(cancelled, Refused):
            assert cancelled == Refused(C.FAILED_PRECONDITION, "ticket_matched"), cancelled
            assert final.state == mm_pb.TICKET_MATCHED and final.match_id and final.seat_token
        else:
            assert cancelled.state == final.state == mm_pb.TICKET_CANCELLED and not final.match_id, (cancelled, final)
        # Whatever happened, the player may queue again at once unless seated at a table.
        again = answer_of(lambda: stub.CreateTicket(mm_pb.CreateTicketRequest(game_id=game_id, request_id=f"again{r}"),
                                                    metadata=bearer(guest.player_token), timeout=DEADLINE))
        if final.state == mm_pb.TICKET_CANCELLED:
            assert isinstance(again, mm_pb.CreateTicketResponse), again

    for r in range(ROUNDS):
        one_round(r)


def answer_of(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except grpc.RpcError as exc:
        return Refused(exc.code(), error_code(exc))


def _party(cluster: Cluster, r: int, invitees: int) -> tuple[list[mm_pb.RegisterGuestResponse], str, str]:
    """A party ticket of a new owner and `invitees` new guests, all pending."""
    guests = [_guest(cluster, f"G{r}.{i}") for i in range(invitees + 1)]
    game_id = next(g for g, shape in cluster.matchmaker.app.games.items() if shape.max_players > invitees)
    ticket = cluster.tickets_stub().CreateTicket(mm_pb.CreateTicketRequest(
        game_id=game_id, party=[g.player_id for g in guests[1:]], request_id=f"party{r}"),
        metadata=bearer(guests[0].player_token), timeout=DEADLINE).ticket_id
    return guests, game_id, ticket


def test_party_invites_answered_at_once_leave_the_ticket_and_every_pointer_consistent(cluster: Cluster) -> None:
    """Two invitees accepting at once: exactly one answer is the one that queues the ticket, and
    both hold it as their open ticket. One accepting as the other declines: the ticket fails
    (a decline always can while it is pending), and nobody keeps it as an open ticket."""
    def one_round(r: int) -> None:
        guests, game_id, ticket = _party(cluster, r, 2)
        decline = bool(r % 2)
        calls = [lambda g=g: cluster.tickets_stub().AcceptPartyInvite(mm_pb.AcceptPartyInviteRequest(ticket_id=ticket),
                                                                      metadata=bearer(g.player_token), timeout=DEADLINE)
                 for g in guests[1:]]
        if decline:
            calls[1] = lambda: cluster.tickets_stub().DeclinePartyInvite(mm_pb.DeclinePartyInviteRequest(
                ticket_id=ticket), metadata=bearer(guests[2].player_token), timeout=DEADLINE)
        answers = race(*calls)
        final = cluster.tickets_stub().GetTicket(mm_pb.GetTicketRequest(ticket_id=ticket),
                                                 metadata=bearer(guests[0].player_token), timeout=DEADLINE)
        if decline:
            assert final.state == mm_pb.TICKET_FAILED, final
            assert isinstance(answers[1], mm_pb.TicketUpdate), answers
            assert isinstance(answers[0], mm_pb.TicketUpdate) or answers[0] == \
                Refused(C.FAILED_PRECONDITION, "ticket_failed"), answers
            free = [g for g in guests if isinstance(answer_of(lambda g=g: cluster.tickets_stub().CreateTicket(
                mm_pb.CreateTicketRequest(game_id=game_id, request_id=f"solo{r}"),
                metadata=bearer(g.player_token), timeout=DEADLINE)), mm_pb.CreateTicketResponse)]
            assert free == guests, "a failed party's players may queue again"
        else:
            assert all(isinstance(a, mm_pb.TicketUpdate) for a in answers), answers
            assert final.state == mm_pb.TICKET_SEARCHING and not final.awaiting, final
            for g in guests:
                busy = answer_of(lambda g=g: cluster.tickets_stub().CreateTicket(
                    mm_pb.CreateTicketRequest(game_id=game_id, request_id=f"solo{r}"),
                    metadata=bearer(g.player_token), timeout=DEADLINE))
                assert busy == Refused(C.ALREADY_EXISTS, "ticket_open"), busy
            cluster.tickets_stub().CancelTicket(mm_pb.CancelTicketRequest(ticket_id=ticket),
                                                metadata=bearer(guests[0].player_token), timeout=DEADLINE)

    for r in range(ROUNDS):
        one_round(r)


# -- tournaments -----------------------------------------------------------------------------------
def _tournament_request(r: int) -> tournament_pb.CreateTournamentRequest:
    return tournament_pb.CreateTournamentRequest(
        name=f"race {r}", games=[tournament_pb.TournamentGame(game_id="grifters", seat_counts=[2])],
        entrants=["random", "heuristic"], matches_per_game=6, concurrency=2, request_id=uuid.uuid4().hex)


def test_create_tournament_with_one_request_id_at_once_makes_one_tournament(cluster: Cluster) -> None:
    stubs = [cluster.tournaments_stub() for _ in range(4)]
    def one_round(r: int) -> None:
        request = _tournament_request(r)
        answers = race(*[lambda s=s: s.CreateTournament(request, metadata=operator(), timeout=DEADLINE)
                         for s in stubs])
        assert all(isinstance(a, tournament_pb.Tournament) for a in answers), answers
        assert len({a.tournament_id for a in answers}) == 1, answers
        listed = stubs[0].ListTournaments(tournament_pb.ListTournamentsRequest(limit=100), timeout=DEADLINE)
        assert [t.tournament_id for t in listed.tournaments].count(answers[0].tournament_id) == 1
        record = cluster.tournament_repo.get(answers[0].tournament_id)
        score = cluster.tournament_repo.client.zscore("famiglia:bots:tournaments", answers[0].tournament_id)
        assert record is not None and int(score) == record.created_ms, (score, record.created_ms)

    for r in range(ROUNDS):
        one_round(r)


def test_cancel_tournament_racing_the_runners_next_match_leaves_no_match_in_play(cluster: Cluster) -> None:
    """CancelTournament while the runner (two of them: a rolling deploy) is starting the next
    matches: once the runners have stepped again, every match the tournament made is over."""
    from famiglia.client.game_client import GameClient
    from services.bots.tournaments import TournamentRunner

    clients = [GameClient(cluster.game[i]) for i in range(2)]
    runners = [TournamentRunner(cluster.tournament_repo, clients[i], cluster.store, secret=SECRET) for i in range(2)]
    stub = cluster.tournaments_stub()
    game = cluster.game_stub(0)
    try:
        def one_round(r: int) -> None:
            created = stub.CreateTournament(_tournament_request(r), metadata=operator(), timeout=DEADLINE)
            tid = created.tournament_id
            runners[0].step()  # two matches in play
            for m in list(cluster.tournament_repo.get(tid).started.values())[:1]:  # one ends: room for the next
                game.CancelMatch(game_pb.CancelMatchRequest(match_id=m, reason="room", request_id="room"),
                                 metadata=operator(), timeout=DEADLINE)
                cluster.tournament_repo.record(tid, m, {"abandoned": True, "game_id": "grifters", "error": "room"})
            race(runners[0].step, runners[1].step,
                 lambda: stub.CancelTournament(tournament_pb.CancelTournamentRequest(tournament_id=tid),
                                               metadata=operator(), timeout=DEADLINE))
            for runner in runners:
                runner.step()
            record = cluster.tournament_repo.get(tid)
            assert record.status == "cancelled"
            for match_id in record.started.values():
                if match_id.startswith("failed:"):
                    continue
                view = game.GetView(game_pb.GetViewRequest(match_id=match_id), timeout=DEADLINE)
                assert view.finished, (r, match_id, record.started, record.results)

        for r in range(ROUNDS):
            one_round(r)
    finally:
        for c in clients:
            c.close()


# -- seats changing hands ----------------------------------------------------------------------------
def _leave(stub: game_grpc.GameServiceStub, match_id: str, token: str) -> game_pb.LeaveMatchResponse:
    return stub.LeaveMatch(game_pb.LeaveMatchRequest(match_id=match_id), metadata=bearer(token), timeout=DEADLINE)


def _return(stub: game_grpc.GameServiceStub, match_id: str, token: str) -> game_pb.ReturnToMatchResponse:
    return stub.ReturnToMatch(game_pb.ReturnToMatchRequest(match_id=match_id), metadata=bearer(token),
                              timeout=DEADLINE)


def _away_by_clock(stub: game_grpc.GameServiceStub, bots: Any, match: game_pb.CreateMatchResponse, seat: int,
                   rng: random.Random) -> bool:
    """Let `seat`'s clock run out on it (the bots' `run_clock`) until the bots take it, the
    other seats playing: whether it went (a match may end first)."""
    from services.bots import handlers

    for _ in range(60):
        envelopes = cluster_store(bots).read(match.match_id)
        last = envelopes[-1]
        if last.type == "seat_left" and last.seat == seat:
            return True
        seats = asked(stub, match)
        if not seats:
            return False
        if seat in seats:
            assert handlers.run_clock(bots, match.match_id, seat, last.seq) == "submitted"
        else:
            play_a_few(stub, match, rng, 1)
    return False


def cluster_store(bots: Any) -> RedisEventStore:
    return bots.store


LEAVE_REFUSED = {Refused(C.FAILED_PRECONDITION, "match_over")}
RETURN_REFUSED = {Refused(C.FAILED_PRECONDITION, "match_over"), Refused(C.FAILED_PRECONDITION, "seat_left")}
COMMAND_REFUSED = {Refused(C.ABORTED, "stale_version"), Refused(C.FAILED_PRECONDITION, "match_over"),
                   Refused(C.FAILED_PRECONDITION, "seat_left"), Refused(C.FAILED_PRECONDITION, "seat_away")}
CLOCK_OUTCOMES = {"submitted", "stale", "finished", "not_pending"}


def test_seat_changes_racing_commands_a_clock_and_a_cancel_on_two_replicas_stand_where_the_rules_say(
        cluster: Cluster) -> None:
    """LeaveMatch and ReturnToMatch of a seat, on one replica, racing on the other its own
    command (its player's, or the bots' once it is away), another seat's, its turn clock's
    default and now and then a CancelMatch: every caller is answered as the API promises (done,
    or refused with a stable code), a leave's or return's answer names its stored event, and
    the stored match verifies with every seat change where the rules put it (none after the
    end, one `left` a seat, a return only after the clock took the seat, and only the bots'
    commands for a seat while it is away)."""
    from famiglia.replay.verify import verify_envelopes
    from services.bots import handlers
    from services.bots.bootstrap import BotsSettings
    from services.bots.bootstrap import bootstrap as bots_bootstrap
    from tests.support.seat_changes import seat_change_problems

    bots = bots_bootstrap(settings=Settings(redis_url=cluster.redis_url, secret=SECRET, command_addr=cluster.game[1]),
                          store=cluster.store, bots=BotsSettings())
    stubs = [cluster.game_stub(i) for i in range(2)]

    def one_round(r: int) -> None:
        rng = random.Random(r)
        match = new_match(stubs[0], seed=700 + r)
        play_a_few(stubs[0], match, rng, r % 4)
        match_id = match.match_id
        seat = rng.randrange(3)
        away = r % 3 == 1 and _away_by_clock(stubs[0], bots, match, seat, rng)
        version = cluster.store.version(match_id)
        seats = asked(stubs[0], match)
        if not seats:
            return  # over before the race
        mover = seat if seat in seats else seats[0]
        token = SIGNER.bot_seat_token(match_id, mover) if mover == seat and away else match.seat_tokens[mover]
        options = legal(stubs[1], match_id, token)
        expected = options.version if r % 2 or mover == seat else None
        command_id = f"bot:{match_id}:{options.version}:{mover}" if token != match.seat_tokens[mover] else f"me{r}"
        calls: dict[str, Callable[[], Any]] = {
            "leave": lambda: _leave(stubs[0], match_id, match.seat_tokens[seat]),
            "command": lambda: submit(stubs[1], match_id, token, rng.choice(list(options.commands)), command_id,
                                      expected, omit_events=True),
        }
        if away:
            calls["return"] = lambda: _return(stubs[1 - r % 2], match_id, match.seat_tokens[seat])
        if expected is not None:
            calls["clock"] = lambda: handlers.run_clock(bots, match_id, mover, version)
        if r % 4 == 3:
            calls["cancel"] = lambda: stubs[r % 2].CancelMatch(game_pb.CancelMatchRequest(
                match_id=match_id, reason="race", request_id=f"c{r}"), metadata=operator(), timeout=DEADLINE)
        answers = dict(zip(calls, race(*calls.values()), strict=True))
        envelopes = cluster.store.read(match_id)
        where = (r, seat, mover, away, answers)

        left = answers["leave"]
        if isinstance(left, Refused):
            assert left in LEAVE_REFUSED and "cancel" in answers, where
        else:
            change = envelopes[left.version - 1]
            assert (change.type, change.seat, left.duplicate) == ("seat_left", seat, False), where
            assert envelope_pb2.SeatLeft.FromString(change.payload).reason == "left", where
        back = answers.get("return")
        if isinstance(back, Refused):
            assert back in RETURN_REFUSED, where
        elif back is not None and not back.duplicate:
            assert (envelopes[back.version - 1].type, envelopes[back.version - 1].seat) == ("seat_returned", seat), \
                where
        mine = answers["command"]
        if isinstance(mine, Refused):
            assert mine in COMMAND_REFUSED, where
        else:
            assert [e for e in envelopes if e.command_id == command_id and e.seat == mover], where
        assert answers.get("clock", "stale") in CLOCK_OUTCOMES, where
        if "cancel" in answers:
            assert not isinstance(answers["cancel"], Refused) and envelopes[-1].type == MATCH_CANCELLED, where
        report = verify_envelopes(REGISTRY, envelopes)
        assert report.ok, (where, report.describe())
        assert seat_change_problems(REGISTRY, envelopes) == [], where
        if not isinstance(left, Refused) and envelopes[-1].type != MATCH_CANCELLED:
            # the player who left commands nothing more, on either replica
            for stub in stubs:
                again = answer_of(lambda s=stub: legal(s, match_id, match.seat_tokens[seat]))
                assert again == Refused(C.FAILED_PRECONDITION, "seat_left"), where

    try:
        for r in range(ROUNDS):
            one_round(r)
    finally:
        bots.close()
