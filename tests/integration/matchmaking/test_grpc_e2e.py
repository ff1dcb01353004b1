"""End to end over real gRPC: a mobile client's whole path against an in-process GameService
and matchmaking server on a real redis-server — register, queue, watch, then play with
the seat token it was handed. Also `python -m services.matchmaking` as its own process."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from famiglia.auth import TokenSigner
from famiglia.client import GameClient
from famiglia.config import Settings
from famiglia.engine.registry import Registry, default_registry
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil.errors import error_code
from famiglia.matchmaking import MatchPolicy
from famiglia.v1 import envelope_pb2
from famiglia.v1 import matchmaking_service_pb2 as pb
from famiglia.v1 import matchmaking_service_pb2_grpc as pb_grpc
from services.command.bootstrap import bootstrap as command_bootstrap
from services.command.entrypoints.grpc_server import serve as command_serve
from services.matchmaking.bootstrap import bootstrap
from services.matchmaking.entrypoints.grpc_server import serve
from services.matchmaking.matcher import MatcherTuning
from services.matchmaking.settings import MatchmakingSettings
from tests.support.processes import start_service

SECRET = "mm-e2e-secret"
BACKFILL = 1.5  # seconds: long enough that queueing a full table one by one never races it


def _registry() -> Registry:
    """Whichever games are registered; engines are being written while this runs."""
    try:
        return default_registry()
    except Exception:  # noqa: BLE001 - a half-written engine is no reason to fail here
        return Registry({})


REGISTRY = _registry()
GAMES = sorted(REGISTRY.engines(), key=lambda e: (e.info.min_players, e.info.game_id))
pytestmark = pytest.mark.skipif(not GAMES, reason="no game engine registered yet")


@dataclass
class Stack:
    command: str
    matchmaking: str
    channel: grpc.Channel

    @property
    def players(self) -> pb_grpc.PlayerServiceStub:
        return pb_grpc.PlayerServiceStub(self.channel)

    @property
    def tickets(self) -> pb_grpc.MatchmakingServiceStub:
        return pb_grpc.MatchmakingServiceStub(self.channel)


@pytest.fixture()
def command_address(redis_url: str) -> Iterator[str]:
    """A GameService on real Redis, as tests/e2e/conftest.py starts one."""
    store = RedisEventStore.connect(redis_url)
    app = command_bootstrap(store=store, registry=REGISTRY, settings=Settings(redis_url=redis_url, secret=SECRET))
    server, port = command_serve(app, "127.0.0.1:0", workers=16)
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(grace=None)
    store.close()


@contextmanager
def _serving(redis_url: str, command_address: str, *, matcher: bool) -> Iterator[Stack]:
    settings = Settings(redis_url=redis_url, secret=SECRET, command_addr=command_address)
    mm = bootstrap(settings=settings, registry=REGISTRY,
                   mm=MatchmakingSettings(MatchPolicy(backfill_after=BACKFILL, bot_policy="random"),
                                          MatcherTuning(interval_s=0.05)))
    server, port = serve(mm.app, "127.0.0.1:0", workers=16)
    server.start()
    stop = threading.Event()
    loop = threading.Thread(target=mm.matcher.run, args=(stop,))
    if matcher:
        loop.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield Stack(command_address, f"127.0.0.1:{port}", channel)
    finally:
        channel.close()
        stop.set()
        if matcher:
            loop.join()
        server.stop(grace=None)
        mm.close()


@pytest.fixture()
def stack(redis_url: str, command_address: str) -> Iterator[Stack]:
    """Matchmaking with its matcher loop running (bots after BACKFILL seconds)."""
    with _serving(redis_url, command_address, matcher=True) as s:
        yield s


@pytest.fixture()
def quiet_stack(redis_url: str, command_address: str) -> Iterator[Stack]:
    """Matchmaking without a matcher: tickets stay searching."""
    with _serving(redis_url, command_address, matcher=False) as s:
        yield s


def _auth(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


def _register(stack: Stack, name: str) -> pb.RegisterGuestResponse:
    return stack.players.RegisterGuest(pb.RegisterGuestRequest(display_name=name), timeout=10)


def _watch_until_done(stack: Stack, token: str, ticket_id: str) -> list[pb.TicketUpdate]:
    updates = []
    for update in stack.tickets.WatchTicket(pb.WatchTicketRequest(ticket_id=ticket_id), metadata=_auth(token),
                                            timeout=20):
        updates.append(update)
    return updates


@pytest.mark.parametrize("game_id", [e.info.game_id for e in GAMES])
def test_register_queue_watch_and_play_with_the_seat_token(stack: Stack, game_id: str) -> None:
    game = REGISTRY.get(game_id).info
    guests = [_register(stack, f"Guest {i}") for i in range(game.min_players)]
    tickets = [stack.tickets.CreateTicket(pb.CreateTicketRequest(game_id=game.game_id,
                                                                 seat_counts=[game.min_players],
                                                                 request_id=f"req-{i}"),
                                          metadata=_auth(g.player_token), timeout=10)
               for i, g in enumerate(guests)]
    assert all(t.ticket.state == pb.TICKET_SEARCHING for t in tickets)
    finals = {}
    for guest, ticket in zip(guests, tickets, strict=True):
        updates = _watch_until_done(stack, guest.player_token, ticket.ticket_id)
        assert updates[0].state == pb.TICKET_SEARCHING or updates[0].state == pb.TICKET_MATCHED
        finals[guest.player_id] = updates[-1]
    assert {u.state for u in finals.values()} == {pb.TICKET_MATCHED}
    assert len({u.match_id for u in finals.values()}) == 1
    assert sorted(u.seat for u in finals.values()) == list(range(game.min_players))

    client = GameClient(stack.command)
    signer = TokenSigner(SECRET)
    for player_id, update in finals.items():
        claim = signer.read_seat(update.seat_token)
        assert (claim.match_id, claim.seat, claim.player_id) == (update.match_id, update.seat, player_id)
        view = client.seat(update.match_id, update.seat_token).view()
        assert view.game_id == game.game_id and view.seat == update.seat
    client.close()


def test_a_lonely_player_gets_bots_after_the_timeout(stack: Stack, redis_url: str) -> None:
    game = GAMES[0].info
    guest = _register(stack, "Lonely")
    ticket = stack.tickets.CreateTicket(pb.CreateTicketRequest(game_id=game.game_id), metadata=_auth(guest.player_token),
                                        timeout=10)
    final = _watch_until_done(stack, guest.player_token, ticket.ticket_id)[-1]
    assert final.state == pb.TICKET_MATCHED
    assert (final.seats, final.bots) == (game.min_players, game.min_players - 1)
    client = GameClient(stack.command)
    view = client.seat(final.match_id, final.seat_token).view()
    assert view.seat == final.seat
    client.close()
    store = RedisEventStore.connect(redis_url)
    created = envelope_pb2.MatchCreated.FromString(store.read(final.match_id, limit=1)[0].payload)
    store.close()
    seats = {i.seat: i for i in created.seat_info}
    assert seats[final.seat].player_id == guest.player_id and not seats[final.seat].bot
    assert [(i.bot, i.policy) for s, i in sorted(seats.items()) if s != final.seat] == \
        [(True, "random")] * final.bots


def test_refusals_carry_their_codes(stack: Stack) -> None:
    game = GAMES[0].info
    guest = _register(stack, "Careful")
    with pytest.raises(grpc.RpcError) as no_token:
        stack.tickets.CreateTicket(pb.CreateTicketRequest(game_id=game.game_id), timeout=10)
    assert no_token.value.code() == grpc.StatusCode.UNAUTHENTICATED and error_code(no_token.value) == "no_token"
    request = pb.CreateTicketRequest(game_id=game.game_id, seat_counts=[game.max_players], request_id="one")
    first = stack.tickets.CreateTicket(request, metadata=_auth(guest.player_token), timeout=10)
    again = stack.tickets.CreateTicket(request, metadata=_auth(guest.player_token), timeout=10)
    assert again.duplicate and again.ticket_id == first.ticket_id
    with pytest.raises(grpc.RpcError) as busy:
        stack.tickets.CreateTicket(pb.CreateTicketRequest(game_id=game.game_id, request_id="two"),
                                   metadata=_auth(guest.player_token), timeout=10)
    assert busy.value.code() == grpc.StatusCode.ALREADY_EXISTS and error_code(busy.value) == "ticket_open"
    cancelled = stack.tickets.CancelTicket(pb.CancelTicketRequest(ticket_id=first.ticket_id),
                                           metadata=_auth(guest.player_token), timeout=10)
    assert cancelled.state == pb.TICKET_CANCELLED
    profile = stack.players.GetProfile(pb.GetProfileRequest(), metadata=_auth(guest.player_token), timeout=10)
    assert profile.display_name == "Careful" and {r.game_id for r in profile.ratings} >= {game.game_id}


def test_reflection_and_health_name_both_services(stack: Stack) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    health = health_pb2_grpc.HealthStub(stack.channel)
    for name in ("famiglia.v1.MatchmakingService", "famiglia.v1.PlayerService"):
        assert health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5).status == \
            health_pb2.HealthCheckResponse.SERVING
    stub = reflection_pb2_grpc.ServerReflectionStub(stack.channel)
    [reply] = list(stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]),
                                             timeout=5))
    names = {s.name for s in reply.list_services_response.service}
    assert {"famiglia.v1.MatchmakingService", "famiglia.v1.PlayerService"} <= names


def test_the_service_process_matches_players_and_stops_on_sigterm(redis_url: str, command_address: str,
                                                                 tmp_path: Path) -> None:
    env = dict(os.environ)
    env.update({
        "FAMIGLIA_REDIS_URL": redis_url, "FAMIGLIA_SECRET": SECRET, "FAMIGLIA_COMMAND_ADDR": command_address,
        "FAMIGLIA_MATCHMAKING_ADDR": "127.0.0.1:0", "FAMIGLIA_MM_BACKFILL_AFTER": "0.3",
        "FAMIGLIA_MM_TICK": "0.05", "FAMIGLIA_DATABASE_URL": "", "OTEL_SDK_DISABLED": "true",
    })
    log = tmp_path / "matchmaking.log"
    proc, port = start_service("services.matchmaking", env, log)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stack = Stack(command_address, f"127.0.0.1:{port}", channel)
        guest = _register(stack, "Solo")
        ticket = stack.tickets.CreateTicket(pb.CreateTicketRequest(game_id=GAMES[0].info.game_id),
                                            metadata=_auth(guest.player_token), timeout=10)
        assert _watch_until_done(stack, guest.player_token, ticket.ticket_id)[-1].state == pb.TICKET_MATCHED
    finally:
        channel.close()
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert code == 0, log.read_text()[-3000:]


def test_the_cli_finds_a_match(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    from famiglia.cli.main import main

    assert main(["matchmake", GAMES[0].info.game_id, "--address", stack.matchmaking, "--timeout", "20"]) == 0
    assert "matched" in capsys.readouterr().out


def test_the_cli_cancels_its_ticket_on_timeout(quiet_stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    from famiglia.cli.main import main

    assert main(["matchmake", GAMES[0].info.game_id, "--address", quiet_stack.matchmaking, "--timeout", "0.2"]) == 1
    assert "ticket cancelled" in capsys.readouterr().out


def test_a_party_queues_after_its_invitee_accepts_over_grpc(stack: Stack) -> None:
    game = GAMES[0].info
    host, friend = _register(stack, "Host"), _register(stack, "Friend")
    created = stack.tickets.CreateTicket(pb.CreateTicketRequest(game_id=game.game_id, party=[friend.player_id],
                                                                request_id="party-1"),
                                         metadata=_auth(host.player_token), timeout=10)
    assert created.ticket.state == pb.TICKET_PENDING_PARTY
    assert list(created.ticket.awaiting) == [friend.player_id] and created.ticket.answer_within_seconds > 0
    invites = stack.tickets.ListInvites(pb.ListInvitesRequest(), metadata=_auth(friend.player_token), timeout=10)
    assert [i.ticket_id for i in invites.invites] == [created.ticket_id]
    assert list(invites.invites[0].party) == [host.player_id, friend.player_id]
    with pytest.raises(grpc.RpcError) as own:
        stack.tickets.AcceptPartyInvite(pb.AcceptPartyInviteRequest(ticket_id=created.ticket_id),
                                        metadata=_auth(host.player_token), timeout=10)
    assert own.value.code() == grpc.StatusCode.PERMISSION_DENIED and error_code(own.value) == "not_invited"
    accepted = stack.tickets.AcceptPartyInvite(pb.AcceptPartyInviteRequest(ticket_id=created.ticket_id),
                                               metadata=_auth(friend.player_token), timeout=10)
    assert accepted.state in (pb.TICKET_SEARCHING, pb.TICKET_MATCHED)
    finals = {g.player_id: _watch_until_done(stack, g.player_token, created.ticket_id)[-1] for g in (host, friend)}
    assert {u.state for u in finals.values()} == {pb.TICKET_MATCHED}
    assert len({u.match_id for u in finals.values()}) == 1 and len({u.seat for u in finals.values()}) == 2
    signer = TokenSigner(SECRET)
    for player_id, update in finals.items():
        assert signer.read_seat(update.seat_token).player_id == player_id


def test_a_declined_invite_fails_the_party_over_grpc(quiet_stack: Stack) -> None:
    game = GAMES[0].info
    host, friend = _register(quiet_stack, "Host"), _register(quiet_stack, "Friend")
    created = quiet_stack.tickets.CreateTicket(pb.CreateTicketRequest(game_id=game.game_id, party=[friend.player_id]),
                                               metadata=_auth(host.player_token), timeout=10)
    declined = quiet_stack.tickets.DeclinePartyInvite(pb.DeclinePartyInviteRequest(ticket_id=created.ticket_id),
                                                      metadata=_auth(friend.player_token), timeout=10)
    assert declined.state == pb.TICKET_FAILED and friend.player_id in declined.reason
    with pytest.raises(grpc.RpcError) as late:
        quiet_stack.tickets.AcceptPartyInvite(pb.AcceptPartyInviteRequest(ticket_id=created.ticket_id),
                                              metadata=_auth(friend.player_token), timeout=10)
    assert late.value.code() == grpc.StatusCode.FAILED_PRECONDITION and error_code(late.value) == "ticket_failed"
    final = quiet_stack.tickets.GetTicket(pb.GetTicketRequest(ticket_id=created.ticket_id),
                                          metadata=_auth(host.player_token), timeout=10)
    assert final.state == pb.TICKET_FAILED and final.reason == declined.reason


def test_the_cli_lists_and_accepts_an_invite(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    from famiglia.cli.main import main

    game = GAMES[0].info
    host, friend = _register(stack, "Host"), _register(stack, "Friend")
    created = stack.tickets.CreateTicket(pb.CreateTicketRequest(game_id=game.game_id, party=[friend.player_id]),
                                         metadata=_auth(host.player_token), timeout=10)
    assert main(["matchmake", "--invites", "--token", friend.player_token, "--address", stack.matchmaking]) == 0
    assert created.ticket_id in capsys.readouterr().out
    assert main(["matchmake", "--accept", created.ticket_id, "--token", friend.player_token,
                 "--address", stack.matchmaking, "--timeout", "20"]) == 0
    assert "matched" in capsys.readouterr().out


def test_a_watch_open_while_the_server_stops_ends_with_unavailable_not_after_the_grace(
        redis_url: str, command_address: str) -> None:
    """A WatchTicket stream of a ticket still searching held the server's shutdown for its whole
    grace (`server.stop(grace=5)` in every service), and then was cut with no word of why. It
    ends at once with UNAVAILABLE (`server_stopping`): the client watches again, elsewhere.
    (The grace here is far longer than anything the test waits for.)"""
    settings = Settings(redis_url=redis_url, secret=SECRET, command_addr=command_address)
    mm = bootstrap(settings=settings, registry=REGISTRY,
                   mm=MatchmakingSettings(MatchPolicy(backfill_after=BACKFILL, bot_policy="random"),
                                          MatcherTuning(interval_s=0.05)))
    server, port = serve(mm.app, "127.0.0.1:0", workers=4)
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stack = Stack(command_address, f"127.0.0.1:{port}", channel)
        game = GAMES[0].info
        guest = _register(stack, "Patient")
        ticket = stack.tickets.CreateTicket(pb.CreateTicketRequest(game_id=game.game_id, seat_counts=[game.max_players]),
                                            metadata=_auth(guest.player_token), timeout=10)
        watch = stack.tickets.WatchTicket(pb.WatchTicketRequest(ticket_id=ticket.ticket_id),
                                          metadata=_auth(guest.player_token), timeout=600)
        assert next(watch).state == pb.TICKET_SEARCHING
        ended: list[grpc.RpcError | None] = []
        done = threading.Event()

        def read_on() -> None:
            try:
                for _update in watch:
                    pass
                ended.append(None)
            except grpc.RpcError as exc:
                ended.append(exc)
            done.set()

        threading.Thread(target=read_on, daemon=True).start()
        stopped = server.stop(grace=600)
        assert done.wait(60), "the watch was kept open through the grace"
        (error,) = ended
        assert error is not None, "a watch cut short ended as if its ticket were done"
        assert (error.code(), error_code(error)) == (grpc.StatusCode.UNAVAILABLE, "server_stopping")
        assert stopped.wait(60), "the server waited out its grace"
    finally:
        channel.close()
        server.stop(grace=None)
        mm.close()
