"""A seat's player leaves mid-match and the bots play the seat, over real gRPC and a real
redis-server: LeaveMatch, the seat's turn clock running out on it too many times in a row (the
clock defaults submitted by the bots' own `run_clock`, with the bots' own token), ReturnToMatch;
and a seat left while Nothing Personal's answers are held (NP-H9), on two replicas."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest

from famiglia.auth import TokenSigner
from famiglia.bots.toy import toy_registry
from famiglia.client import GameClient
from famiglia.client.game_client import SeatClient
from famiglia.config import Settings
from famiglia.eventstore.envelopes import SEAT_LEFT, SEAT_RETURNED
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil.errors import error_code
from famiglia.testgames.highcard.v1 import highcard_pb2 as hc
from famiglia.v1 import envelope_pb2
from services.bots import handlers
from services.command.app import CommandApp
from services.command.bootstrap import CommandSettings, bootstrap
from services.command.entrypoints.grpc_server import serve
from tests.support.clocks import run_out

pytestmark = pytest.mark.redis

SECRET = "seat-changes"
SIGNER = TokenSigner(SECRET)
REGISTRY = toy_registry()
CLOCK_S = 30


@dataclass
class Service:
    client: GameClient
    store: RedisEventStore
    app: CommandApp
    registry = REGISTRY

    def seat(self, match_id: str, seat: int) -> SeatClient:
        """The bots' own client of a seat (`BotsApp.seat`): what `handlers.run_clock` submits with."""
        return self.client.seat(match_id, SIGNER.bot_seat_token(match_id, seat))


@pytest.fixture()
def service(redis_url: str) -> Iterator[Service]:
    store = RedisEventStore.connect(redis_url)
    # Its clock past every seat's deadline: a clock task (`_clock`) finds the seat's clock run out.
    app = run_out(bootstrap(store=store, registry=REGISTRY, settings=Settings(redis_url=redis_url, secret=SECRET),
                            command_settings=CommandSettings(timeouts_to_bot=3, leave_policy="random")))
    server, port = serve(app, "127.0.0.1:0", workers=8)
    server.start()
    client = GameClient(f"127.0.0.1:{port}")
    yield Service(client, store, app)
    client.close()
    server.stop(grace=None)
    store.close()


def _refusal(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as raised:
        call()
    return raised.value.code(), error_code(raised.value)


def _match(service: Service, *, bot_seat: int | None = None) -> tuple[str, list[SeatClient]]:
    info = [envelope_pb2.SeatInfo(seat=s, player_id=f"p{s}", bot=s == bot_seat,
                                  policy="random" if s == bot_seat else "") for s in range(2)]
    handle = service.client.create_match("highcard", 2, seed=7, options={"hand": "6", "clock_s": str(CLOCK_S)},
                                         seat_info=info, token=SIGNER.operator_token("tests"))
    return handle.match_id, [service.client.seat(handle.match_id, t) for t in handle.seat_tokens]


def _asked(seat: SeatClient) -> tuple[int, int]:
    view = seat.client.spectator(seat.match_id).view()
    return view.to_act[0].seat, view.version


def _play(seat: SeatClient, command_id: str = "") -> grpc.Future:
    legal = seat.legal_commands()
    return seat.submit(legal.commands[-1], command_id=command_id or f"c{legal.version}",
                       expected_version=legal.version)


def _until(players: list[SeatClient], seat: int) -> int:
    """The other seat's player plays until `seat` is asked; the version then."""
    while True:
        turn, version = _asked(players[0])
        if turn == seat:
            return version
        _play(players[turn])


def _clock(service: Service, players: list[SeatClient], seat: int) -> str:
    """`seat`'s turn clock runs out: the bots' own clock task, at the version it was set at."""
    version = _until(players, seat)
    return handlers.run_clock(service, players[seat].match_id, seat, version)  # type: ignore[arg-type]


def test_a_clock_fired_before_the_seats_deadline_is_sent_again_for_what_the_service_says_is_left(
        service: Service) -> None:
    """Over gRPC: the command service refuses the default (`clock_not_run_out`, the deadline in
    its ErrorInfo), and `run_clock` hands the time left by the service's clock to `again`."""
    match_id, players = _match(service)
    service.app.wall = time.time  # the service's own clock: the seat's 30 s have not run out
    seat, version = _asked(players[0])
    waits: list[float] = []
    assert handlers.run_clock(service, match_id, seat, version, waits.append) == "early"  # type: ignore[arg-type]
    (wait,) = waits
    assert 0 < wait <= CLOCK_S and _asked(players[0]) == (seat, version)


def test_a_player_leaves_and_the_bots_play_its_seat(service: Service) -> None:
    match_id, players = _match(service)
    me = players[1]
    done = me.leave_match()
    again = me.leave_match()
    assert not done.duplicate and (again.version, again.duplicate) == (done.version, True)
    view = me.view()  # a spectator's: the seat's cards are the bot's now
    assert view.seat == -1 and not hc.View.FromString(view.view.value).hand
    assert [(a.seat, a.reason, a.since_version) for a in view.away] == [(1, "left", done.version)]
    left = [r.event for r in me.stream(until_now=True) if r.event.type == SEAT_LEFT]
    seat_left = envelope_pb2.SeatLeft()
    assert len(left) == 1 and left[0].event.Unpack(seat_left) and left[0].seat == 1
    assert (seat_left.seat, seat_left.reason, seat_left.policy) == (1, "left", "random")
    refused = {
        "submit": _refusal(lambda: me.submit(hc.Command(play=hc.Play(card=1)), expected_version=done.version)),
        "legal": _refusal(lambda: me.legal_commands()),
    }
    assert refused == {k: (grpc.StatusCode.FAILED_PRECONDITION, "seat_left") for k in refused}
    assert service.client.my_turns(SIGNER.player_token("p1")) == []
    assert [m.match_id for m in service.client.my_turns(SIGNER.player_token("p0"))] == [match_id]
    # the bots' own token plays the seat
    _until(players, 1)
    assert _play(service.seat(match_id, 1), "bot-1").version == service.store.version(match_id)


def test_leaving_a_bots_seat_with_the_bots_token_or_after_the_end_is_refused(service: Service) -> None:
    match_id, players = _match(service, bot_seat=1)
    assert _refusal(players[1].leave_match) == (grpc.StatusCode.FAILED_PRECONDITION, "seat_is_bot")
    assert _refusal(service.seat(match_id, 0).leave_match) == (grpc.StatusCode.FAILED_PRECONDITION, "seat_is_bot")
    assert _refusal(service.client.spectator(match_id).leave_match) == (grpc.StatusCode.UNAUTHENTICATED, "no_token")
    service.client.cancel_match(match_id, "over", token=SIGNER.operator_token("tests"))
    assert _refusal(players[0].leave_match) == (grpc.StatusCode.FAILED_PRECONDITION, "match_over")


def test_the_third_clock_in_a_row_hands_the_seat_to_the_bots_until_its_player_returns(service: Service) -> None:
    match_id, players = _match(service)
    me = players[0]
    for _ in range(2):
        assert _clock(service, players, 0) == "submitted"
        assert not me.view().away
    assert _clock(service, players, 0) == "submitted"
    last = service.store.read(match_id)[-1]
    assert last.type == SEAT_LEFT and service.store.read(match_id)[-2].command_id.startswith("clock:")
    view = me.view()  # its own seat still: it may come back
    assert view.seat == 0 and [(a.seat, a.reason) for a in view.away] == [(0, "timeouts")]
    (mine,) = service.client.my_turns(SIGNER.player_token("p0"))
    assert (mine.match_id, mine.away, mine.to_act, mine.deadline_ms) == (match_id, True, False, 0)

    version = _until(players, 0)
    assert all(p.deadline_ms == 0 for p in me.view().to_act)  # the bots play it: no clock
    assert _refusal(lambda: _play(me)) == (grpc.StatusCode.FAILED_PRECONDITION, "seat_away")
    bots = service.seat(match_id, 0)
    assert _play(bots, f"bot:{version}").version > version  # the bots' token plays the away seat
    version = _until(players, 0)
    stale = bots.legal_commands()  # a bot decision read before the return...

    back = me.return_to_match()
    returned = service.store.read(match_id)[-1]
    assert (returned.type, returned.seq, back.duplicate) == (SEAT_RETURNED, back.version, False)
    assert back.version == version + 1
    again = me.return_to_match()
    assert (again.version, again.duplicate) == (back.version, True)
    view = me.view()
    assert not view.away
    assert [p.deadline_ms for p in view.to_act] == [returned.timestamp.ToMilliseconds() + CLOCK_S * 1000]
    # ...is stale now, and the bots' worker takes it as "not mine any more"
    assert _refusal(lambda: bots.submit(stale.commands[0], command_id=f"bot:{version}",
                                        expected_version=version)) == (grpc.StatusCode.ABORTED, "stale_version")
    assert _play(me).version == back.version + 1  # its player plays again
    assert not service.client.my_turns(SIGNER.player_token("p0"))[0].away


def test_a_seat_left_while_answers_are_held_goes_behind_their_slots_on_two_replicas(redis_url: str) -> None:
    """NP-H9: answers held on one replica; the leave goes through another, whose append conflicts,
    catches up and writes the held answers out in their seats' slots ahead of the `seat_left`,
    as a cancel's; both replicas and a fresh fold agree afterwards."""
    from tests.unit.command.test_held_answers import SETTINGS as NP_SETTINGS
    from tests.unit.command.test_held_answers import _fresh_fold, _pass, _same_fold, _window_of_every_seat

    one_store, two_store = RedisEventStore.connect(redis_url), RedisEventStore.connect(redis_url)
    try:
        one, two = bootstrap(store=one_store, settings=NP_SETTINGS), bootstrap(store=two_store, settings=NP_SETTINGS)
        created, window = _window_of_every_seat(one, 4)
        match_id, tokens = created.match_id, created.seat_tokens
        two.get_view(match_id, two.viewer(match_id, None))
        version = one_store.version(match_id)
        answering, leaver = window.seats[:2], window.seats[-1]
        for seat in reversed(answering):
            assert _pass(one, match_id, tokens[seat], f"answer-{seat}").held
        done = two.leave_match(match_id, two.viewer(match_id, tokens[leaver]))
        written = one_store.read(match_id, after=version)
        assert [(e.type, e.seat) for e in written] == [
            ("window_answered", s) if s in answering else ("window_padding", -1) for s in range(4)] + [
            (SEAT_LEFT, leaver)]
        assert done.version == version + 5 and one_store.read_staged(match_id) == []
        one.get_view(match_id, one.viewer(match_id, None))
        for replica in (one, two):
            _same_fold(replica.matches.get(match_id).match, _fresh_fold(replica, match_id))
            assert replica.matches.get(match_id).match.bot_policies() == {leaver: "heuristic"}
        assert two.leave_match(match_id, two.viewer(match_id, tokens[leaver])).duplicate
    finally:
        one_store.close()
        two_store.close()
