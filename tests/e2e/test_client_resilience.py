"""The SDK (`famiglia.client`) against what mobile networks do: a reply lost after the server
took the command, a server that restarts or hangs under an open stream, a refusal that no
retry can turn into a move."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf.empty_pb2 import Empty

from famiglia.client import GameClient
from famiglia.engine.registry import default_registry
from famiglia.grpcutil.errors import error_code

from .conftest import CommandProcess, match_and_first_move, wait_until

REGISTRY = default_registry()
pytestmark = pytest.mark.skipif(not list(REGISTRY), reason="no game engine registered yet")


class _Proxy:
    """A TCP relay between a client and a server that can lose the server's replies: while
    `lose_replies` is set, what the server sends is dropped, as a phone's network does between
    the server's answer and the phone; `cut` then breaks every connection."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.lose_replies = threading.Event()
        self.lost = threading.Event()
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            self.sockets += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, replies: bool) -> None:
        try:
            while data := source.recv(65536):
                if replies and self.lose_replies.is_set():
                    self.lost.set()
                    continue
                sink.sendall(data)
        except OSError:
            pass

    def cut(self) -> None:
        for end in self.sockets:
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            end.close()
        self.sockets.clear()

    def close(self) -> None:
        self.listener.close()
        self.cut()


@pytest.fixture()
def proxy(command_address: str) -> Iterator[_Proxy]:
    relay = _Proxy(command_address)
    yield relay
    relay.close()


def test_a_submit_whose_reply_was_lost_retried_with_its_command_id_gets_the_first_answer(
        command_address: str, proxy: _Proxy) -> None:
    direct = GameClient(command_address, timeout=10)
    phone = GameClient(proxy.address, timeout=3)
    match, me, command = match_and_first_move(direct, seed=21)
    phone_seat = phone.seat(match.match_id, me.token)
    phone_seat.view()  # the connection is up; what the server sends next is lost
    proxy.lose_replies.set()
    with pytest.raises(grpc.RpcError) as lost:
        phone_seat.submit(command, command_id="move-1")
    assert proxy.lost.is_set()
    assert lost.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    proxy.cut()
    taken = direct.spectator(match.match_id).view().version
    assert taken > match.version, "the server did not take the command whose reply was lost"
    proxy.lose_replies.clear()
    again = phone.seat(match.match_id, me.token).submit(command, command_id="move-1")
    assert again.duplicate and again.version == taken and len(again.events) > 0
    assert direct.spectator(match.match_id).view().version == taken, "the retry made a second move"
    phone.close()
    direct.close()


def test_a_rule_refusal_is_raised_at_once_and_a_retry_of_it_moves_nothing(command_address: str) -> None:
    """FAILED_PRECONDITION is an answer, not a failure: the SDK does not retry it, and the
    refused command does not use up its id."""
    client = GameClient(command_address, timeout=10)
    match, me, _command = match_and_first_move(client, seed=22)
    view = client.spectator(match.match_id).view()
    other = next(s for s in range(len(match.seat_tokens)) if s not in {p.seat for p in view.to_act})
    intruder = client.seat(match.match_id, match.seat_tokens[other])
    for _ in range(2):
        with pytest.raises(grpc.RpcError) as refused:
            intruder.submit(me.legal_commands().commands[0], command_id="not-yours")
        assert refused.value.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT)
        assert error_code(refused.value)
    assert client.spectator(match.match_id).view().version == match.version
    client.close()


def _follow_in_thread(seat, retry_for: float) -> tuple[threading.Thread, list[int], list[BaseException], threading.Event]:  # type: ignore[no-untyped-def]
    seqs: list[int] = []
    failed: list[BaseException] = []
    first = threading.Event()

    def run() -> None:
        try:
            for event in seat.follow(from_version=0, retry_for=retry_for):
                seqs.append(event.seq)
                first.set()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            failed.append(exc)

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    return reader, seqs, failed, first


def test_follow_resumes_after_a_break_that_comes_after_a_quiet_spell_longer_than_retry_for(
        command_address: str, proxy: _Proxy) -> None:
    """`retry_for` bounds how long follow tries after a break, not how long a match may wait:
    a seat thinking longer than it, then a dropped connection, must not end the follow."""
    game_id = next(iter(REGISTRY))
    direct = GameClient(command_address, timeout=10)
    phone = GameClient(proxy.address, timeout=10)
    match = direct.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=23)
    followed = phone.seat(match.match_id, match.seat_tokens[0])
    reader, seqs, failed, first = _follow_in_thread(followed, retry_for=1.0)

    def move(command_id: str) -> int:
        view = direct.spectator(match.match_id).view()
        me = direct.seat(match.match_id, match.seat_tokens[view.to_act[0].seat])
        return me.submit(me.legal_commands().commands[0], command_id=command_id).version

    move("before")
    assert first.wait(10)
    time.sleep(2.0)  # the match waits longer than retry_for: nothing is sent
    proxy.cut()
    after = move("after")
    deadline = time.monotonic() + 30
    while (not seqs or seqs[-1] < after) and reader.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not failed, failed
    everything = [r.event.seq for r in direct.seat(match.match_id, match.seat_tokens[0]).stream(0, until_now=True)
                  if r.HasField("event")]
    assert seqs == everything, "a gap or a duplicate across the break"
    phone.close()
    direct.close()


def _freeze(command_process: CommandProcess) -> int:
    """SIGSTOP the server, and wait until it has stopped (its pid, for SIGCONT). `kill` only
    asks: the kernel wakes one thread (the main one, asleep in its stop wait), which stops the
    others once it gets a CPU; on a loaded machine the gRPC threads went on meanwhile and answered
    the next call (21 calls of 40 made right after `kill`, 3 CPU hogs on 2 cores; none after
    this wait). A child's stop is reported to its parent (`WUNTRACED`) once every thread stopped."""
    assert command_process.proc is not None
    pid = command_process.proc.pid
    os.kill(pid, signal.SIGSTOP)
    _, status = os.waitpid(pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status), status
    return pid


def test_follow_on_a_hung_server_ends_with_unavailable_instead_of_waiting_for_ever(command_process) -> None:
    """A server that stops answering (a frozen process; a network that drops every packet
    without a word) never closes the stream: the client's keepalive must notice it."""
    game_id = next(iter(REGISTRY))
    client = GameClient(command_process.address, timeout=10, keepalive_s=1.0)
    match = client.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=24)
    view = client.spectator(match.match_id).view()
    me = client.seat(match.match_id, match.seat_tokens[view.to_act[0].seat])
    me.submit(me.legal_commands().commands[0], command_id="first")
    reader, _seqs, failed, first = _follow_in_thread(client.spectator(match.match_id), retry_for=1.0)
    assert first.wait(10)
    pid = _freeze(command_process)
    try:
        reader.join(120)
        assert not reader.is_alive(), "follow still waits on a server that answers nothing"
    finally:
        os.kill(pid, signal.SIGCONT)
    assert len(failed) == 1 and isinstance(failed[0], grpc.RpcError)
    assert failed[0].code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    client.close()


def test_every_unary_call_of_the_sdk_has_a_deadline(command_process) -> None:
    """A frozen server answers a unary call with DEADLINE_EXCEEDED, never a wait without end.
    The match is made under the default deadline (a loaded machine's first call may take more
    than a second); every call to the frozen server has a second."""
    game_id = next(iter(REGISTRY))
    client = GameClient(command_process.address)
    match = client.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=25)
    seat = client.seat(match.match_id, match.seat_tokens[0])
    client.timeout = 1.0
    pid = _freeze(command_process)
    try:
        for call in (client.list_games, seat.view, seat.legal_commands,
                     lambda: seat.submit(Empty(), command_id="x"),
                     lambda: client.create_match(game_id, REGISTRY.get(game_id).info.min_players, seed=1)):
            with pytest.raises(grpc.RpcError) as hung:
                call()
            assert hung.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    finally:
        os.kill(pid, signal.SIGCONT)
    client.close()


def test_a_client_is_answered_soon_after_its_server_is_back(command_process) -> None:
    """After an outage gRPC's own waits between reconnect attempts grow to 120 s, and each call
    fails at once (UNAVAILABLE) until the next attempt: a phone or a service went on failing up
    to two minutes after the server was back. `reconnect_max_s` bounds those waits; the limit
    here is generous (a loaded machine), and far below gRPC's 120 s."""
    client = GameClient(command_process.address, timeout=5, reconnect_max_s=1.0)
    assert client.list_games()
    command_process.kill()
    outage = time.monotonic() + 8  # attempts refused long enough for gRPC's own waits to pass the bound
    while time.monotonic() < outage:
        with pytest.raises(grpc.RpcError) as down:
            client.list_games()
        assert down.value.code() is grpc.StatusCode.UNAVAILABLE
        time.sleep(0.5)
    command_process.start()
    deadline = time.monotonic() + 30
    while True:
        try:
            assert client.list_games()
            break
        except grpc.RpcError as exc:
            assert exc.code() is grpc.StatusCode.UNAVAILABLE and time.monotonic() < deadline, exc
            time.sleep(0.2)
    client.close()


def test_the_sdks_own_retry_of_a_submit_without_an_id_gets_the_first_answer(
        command_address: str, proxy: _Proxy) -> None:
    """`submit` without a `command_id` made a random one the caller never saw: a retry of a
    lost answer was another command. The SDK's own retry sends the same id again."""
    direct = GameClient(command_address, timeout=10)
    phone = GameClient(proxy.address, timeout=3, retries=2)
    match, me, command = match_and_first_move(direct, seed=26)
    phone_seat = phone.seat(match.match_id, me.token)
    phone_seat.view()

    def heal() -> None:  # once the server took the command whose answer is lost, the network is back
        if proxy.lost.wait(10):
            wait_until(lambda: direct.spectator(match.match_id).view().version > match.version)
        proxy.lose_replies.clear()
        proxy.cut()

    proxy.lose_replies.set()
    healing = threading.Thread(target=heal, daemon=True)
    healing.start()
    answer = phone_seat.submit(command)
    healing.join(30)
    assert proxy.lost.is_set(), "no answer was lost: nothing was retried"
    assert answer.duplicate, "the retry was taken as another command"
    assert direct.spectator(match.match_id).view().version == answer.version > match.version
    phone.close()
    direct.close()
