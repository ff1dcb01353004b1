"""A thin, typed wrapper over famiglia.v1.GameService.

    client = GameClient("localhost:50051")     # or "grpcs://play.example.com" (TLS)
    match = client.create_match("goodcritters", seats=5)
    seat = client.seat(match.match_id, match.seat_tokens[0])
    view = seat.view()
    for cmd in seat.legal_commands().commands: ...
    seat.submit(cmd)
    seat.send_chat("deal?", to_seats=[2])       # match chat (not in Nothing Personal: its own command)
    for message in seat.follow_chat(): ...
    for mine in client.my_turns(player_token): ...   # where is it my turn? (a player token)
    for update in client.watch_my_turns(player_token): ...   # told when it is (a snapshot first)
    seat.leave_match()                          # the bots play the seat from now on, for good
    seat.return_to_match()                      # take back a seat the bots took when its clock ran out
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import grpc
from google.protobuf import any_pb2
from google.protobuf.message import Message

from famiglia.grpcutil.tls import RECONNECT_MAX_S, dial, reconnect_options
from famiglia.telemetry import inject_context
from famiglia.v1 import envelope_pb2
from famiglia.v1 import game_service_pb2 as pb
from famiglia.v1 import game_service_pb2_grpc as pb_grpc

T = TypeVar("T")

VERSION_PLACEHOLDER = "{version}"
"""In a `submit_commands` command id: the version that command goes in at, filled in by
the server (a chain's later commands go in at versions only it knows)."""


@dataclass(frozen=True)
class MatchHandle:
    match_id: str
    seat_tokens: list[str]
    version: int


def _metadata(token: str | None) -> list[tuple[str, str]]:
    md = list(inject_context().items())
    if token:
        md.append(("authorization", f"Bearer {token}"))
    return md


def pack(message: Message) -> any_pb2.Any:
    out = any_pb2.Any()
    out.Pack(message)
    return out


KEEPALIVE_S = 60.0
"""How long a connection with a call open may stay quiet before the client pings the server
(the server allows a ping every `famiglia.grpcutil.server.CLIENT_PING_MIN_S`)."""
KEEPALIVE_TIMEOUT_S = 20.0


def keepalive_options(keepalive_s: float = KEEPALIVE_S) -> list[tuple[str, int]]:
    """Channel options that make a stream on a server that stopped answering (a frozen process,
    a network that drops every packet without a word) end UNAVAILABLE: nothing else would, as
    a waiting match sends nothing and a stream has no deadline."""
    timeout_ms = int(min(KEEPALIVE_TIMEOUT_S, keepalive_s) * 1000)
    return [
        ("grpc.keepalive_time_ms", int(keepalive_s * 1000)),
        ("grpc.keepalive_timeout_ms", timeout_ms),
        ("grpc.http2.ping_timeout_ms", timeout_ms),  # the keepalive's timeout alone does not shorten it
        ("grpc.http2.max_pings_without_data", 0),  # else pings stop after two on a quiet stream
        ("grpc.keepalive_permit_without_calls", 0),  # an idle phone sends nothing
    ]


RETRIED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
"""What `GameClient(retries=...)` sends again: no answer came (a lost connection, a server
restarting, a reply lost on the way). Any other status is the server's answer."""
RETRY_PAUSE_S = 0.2
"""The pause before the first retry, doubling for each next one."""


def new_id() -> str:
    """A random idempotency key (32 hex characters): unguessable, as a creation's request id
    must be (`famiglia.auth.request_ids.MIN_SECRET_REQUEST_ID`), since sent again it answers
    with every seat's token."""
    return uuid.uuid4().hex


def _resumed(open_stream: Callable[[], Iterator[T]], retry_for: float, *, again_at_end: bool) -> Iterator[T]:
    """The replies of `open_stream()`, opened again where it broke (UNAVAILABLE) for up to
    `retry_for` seconds after the break (a stream open that long counts as connected): the
    caller's `open_stream` reads its cursor as the replies left it. Any other status is raised.
    `again_at_end`: a stream the server ended is opened again too (an event stream ends only
    with the match, which the caller sees and stops at); else it ends the replies."""
    broken_since: float | None = None
    while True:
        opened = time.monotonic()
        try:
            for reply in open_stream():
                broken_since = None
                yield reply
            if not again_at_end:
                return
        except grpc.RpcError as exc:
            now = time.monotonic()
            if broken_since is None or now - opened >= retry_for:
                broken_since = now
            if exc.code() != grpc.StatusCode.UNAVAILABLE or now - broken_since > retry_for:
                raise
            time.sleep(0.1)


class GameClient:
    """`address`: `host:port` (plaintext) or `grpcs://host[:port]` (TLS, trusting the system's
    roots or FAMIGLIA_TLS_CA: `famiglia.grpcutil.tls.dial`, which follows rotated TLS files);
    or a `channel` of your own (dial it with `keepalive_options()`, or a hung server holds its
    streams for ever).

    Every unary call has the deadline `timeout`; a connection with a call open that is quiet for
    `keepalive_s` is pinged, and broken (UNAVAILABLE) when the ping goes unanswered: 30 s at least
    against famiglia's servers, which answer earlier pings with GOAWAY `too_many_pings` and so
    break the streams open on the connection (`famiglia.grpcutil.server.CLIENT_PING_MIN_S`). A server
    lost is tried again at most `reconnect_max_s` apart (gRPC's own waits grow to 120 s: calls
    would fail at once, UNAVAILABLE, that long after the server is back).

    `retries`: how many times a unary call that got no answer (`RETRIED`) is sent again, each
    with the deadline `timeout`. Every one is safe to send again: reads by nature, writes under
    their idempotency key, the caller's or, when none is given, a random one the SDK makes
    (`new_id`) and sends again alike; but a `submit_commands` chain with "{version}" ids and no
    `expected_version` is sent once (its ids would name other versions the second time). None
    by default: a service's client (the bots, the matchmaker) retries in its own loop, and a
    caller may want the failure at once."""

    def __init__(self, address: str = "localhost:50051", channel: grpc.Channel | None = None,
                 timeout: float = 30.0, keepalive_s: float = KEEPALIVE_S,
                 reconnect_max_s: float = RECONNECT_MAX_S, retries: int = 0) -> None:
        if retries < 0:
            raise ValueError(f"retries must be 0 or more, not {retries!r}")
        self.channel = channel or dial(
            address, options=keepalive_options(keepalive_s) + reconnect_options(reconnect_max_s))
        self.stub = pb_grpc.GameServiceStub(self.channel)
        self.timeout = timeout
        self.retries = retries

    def _send(self, send: Callable[[], T], *, again: bool = True) -> T:
        """`send` (one unary call, the same request each time), sent again up to `retries`
        times while no answer comes (`RETRIED`); `again=False`: a request that would not be
        answered as the first if sent again, sent once."""
        attempt = 0
        while True:
            try:
                return send()
            except grpc.RpcError as exc:
                if not again or attempt >= self.retries or exc.code() not in RETRIED:
                    raise
            time.sleep(RETRY_PAUSE_S * 2 ** attempt)
            attempt += 1

    def close(self) -> None:
        self.channel.close()

    def wait_ready(self, timeout: float = 15.0) -> None:
        grpc.channel_ready_future(self.channel).result(timeout=timeout)

    def list_games(self) -> list[pb.GameDescription]:
        return list(self._send(lambda: self.stub.ListGames(pb.ListGamesRequest(), timeout=self.timeout)).games)

    def create_match(self, game_id: str, seats: int, *, seed: int | None = None,
                     options: Mapping[str, str] | None = None,
                     seat_info: Sequence[envelope_pb2.SeatInfo] = (), request_id: str = "",
                     tournament_id: str = "", token: str | None = None) -> MatchHandle:
        """A new match and its seat tokens. Naming players (a `seat_info` player id) or a
        tournament takes an operator `token` (the matchmaker's, the tournament runner's).

        Without `request_id` a random one is made (`new_id`), so the SDK's own retries
        (`retries`) answer with this match, never a second one; a caller retrying by itself
        passes an id of its own (at least 16 characters: it is a secret)."""
        req = pb.CreateMatchRequest(game_id=game_id, seats=seats, options=dict(options or {}),
                                    seat_info=list(seat_info), request_id=request_id or new_id(),
                                    tournament_id=tournament_id)
        if seed is not None:
            req.seed = seed
        reply = self._send(lambda: self.stub.CreateMatch(req, metadata=_metadata(token), timeout=self.timeout))
        return MatchHandle(reply.match_id, list(reply.seat_tokens), reply.version)

    def cancel_match(self, match_id: str, reason: str, *, token: str, request_id: str = "",
                     expected_version: int | None = None) -> pb.CancelMatchResponse:
        """End a match with no result (an operator `token` only): `match_cancelled` is its last
        event. Retry under the same `request_id` (answered `duplicate`; without one, a random
        one is made, which the SDK's own retries send again); a match already over is
        FAILED_PRECONDITION `match_over`."""
        req = pb.CancelMatchRequest(match_id=match_id, reason=reason, request_id=request_id or new_id())
        if expected_version is not None:
            req.expected_version = expected_version
        return self._send(lambda: self.stub.CancelMatch(req, metadata=_metadata(token), timeout=self.timeout))

    def allow_rematch(self, match_id: str, *, token: str) -> pb.RematchResponse:
        """Allow the rematch of a finished match whose bots think past the public budget (an
        operator `token` only; its table's asks are `operator_only` until then): each person
        asks next (`SeatClient.ask_rematch`). The answer is a spectator's; idempotent."""
        req = pb.RematchRequest(match_id=match_id)
        return self._send(lambda: self.stub.AskRematch(req, metadata=_metadata(token), timeout=self.timeout))

    def submit_commands(self, match_id: str, commands: Sequence[tuple[str, Message | any_pb2.Any, str]], *,
                        expected_version: int | None = None, omit_events: bool = False,
                        ask_next: Sequence[tuple[str, bool, int]] = ()) -> pb.SubmitCommandsResponse:
        """Several seats' commands in one call, in order, each at the version the one before
        left: `commands` are (seat token, command, command id) — "{version}" in an id is the
        version it is submitted at. The answer has one result per command taken and, if one
        was refused, `refusal` (its index, status, code and message): the rest were not tried.
        `ask_next`: (seat token, with its view, legal limit) of seats the caller plays next;
        the answer's `next` has those the game waits for after the last command.

        The SDK's retries (`retries`) send it again only under `expected_version` or with ids
        without "{version}": sent again without a version, a chain whose first sending was taken
        names its ids by the versions it left, so they are new commands (refused, or played twice)."""
        req = pb.SubmitCommandsRequest(match_id=match_id, omit_events=omit_events)
        if expected_version is not None:
            req.expected_version = expected_version
        add = req.commands.add
        for token, command, command_id in commands:
            add(seat_token=token, command_id=command_id,
                command=command if isinstance(command, any_pb2.Any) else pack(command))
        add_next = req.ask_next.add
        for token, view, limit in ask_next:
            add_next(seat_token=token, view=view, legal_limit=limit)
        named_anew = expected_version is None and any(VERSION_PLACEHOLDER in c.command_id for c in req.commands)
        return self._send(lambda: self.stub.SubmitCommands(req, metadata=_metadata(None), timeout=self.timeout),
                          again=not named_anew)

    def my_turns(self, player_token: str, *, limit: int = 0) -> list[pb.MyMatch]:
        """The live matches the player sits at (ListMyTurns), those waiting for the player first,
        soonest deadline first, then the others, most recently moved first; at most `limit` (0:
        the server's cap, 100). `player_token` is the player's (matchmaking's RegisterGuest),
        not a seat token. Each entry carries its seat's `seat_token` (the one its match was created
        with): a device that lost it plays on with `seat(match_id, seat_token)`. A read: sent again
        by the SDK's retries as every read is."""
        req = pb.ListMyTurnsRequest(limit=limit)
        return list(self._send(lambda: self.stub.ListMyTurns(
            req, metadata=_metadata(player_token), timeout=self.timeout)).matches)

    def my_turns_stream(self, player_token: str, after_id: str = "", *, limit: int = 0,
                        timeout: float | None = None) -> Iterator[pb.WatchMyTurnsResponse]:
        """One WatchMyTurns call: the ListMyTurns snapshot, then each notification written after
        `after_id` (""; those from now on). It ends with its connection; `watch_my_turns` resumes."""
        req = pb.WatchMyTurnsRequest(after_id=after_id, limit=limit)
        return self.stub.WatchMyTurns(req, metadata=_metadata(player_token), timeout=timeout)

    def watch_my_turns(self, player_token: str, after_id: str = "", *, limit: int = 0,
                       retry_for: float = 30.0) -> Iterator[pb.WatchMyTurnsResponse]:
        """The player's turns as they come (WatchMyTurns), across dropped connections and restarted
        servers: a stream that breaks (UNAVAILABLE) is opened again from the last cursor received,
        for up to `retry_for` seconds after the break, and begins again with a fresh snapshot (the
        matches as they are then), then the notifications written since. A notification may come
        twice; any other status is raised. It never ends by itself: stop iterating, or close it."""
        last = after_id

        def opened() -> Iterator[pb.WatchMyTurnsResponse]:
            return self.my_turns_stream(player_token, last, limit=limit)

        for reply in _resumed(opened, retry_for, again_at_end=True):
            last = reply.cursor or last
            yield reply

    def seat(self, match_id: str, token: str | None) -> SeatClient:
        return SeatClient(self, match_id, token)

    def spectator(self, match_id: str) -> SeatClient:
        return SeatClient(self, match_id, None)


class SeatClient:
    """Calls on one match as one seat (or as a spectator when token is None)."""

    def __init__(self, client: GameClient, match_id: str, token: str | None) -> None:
        self.client = client
        self.match_id = match_id
        self.token = token

    def view(self) -> pb.GetViewResponse:
        req = pb.GetViewRequest(match_id=self.match_id)
        return self.client._send(lambda: self.client.stub.GetView(req, metadata=_metadata(self.token),
                                                                 timeout=self.client.timeout))

    def legal_commands(self, limit: int = 0, sample_seed: int = 0) -> pb.ListLegalCommandsResponse:
        """With a `sample_seed`, compound choices are drawn from all their members (proto docs)."""
        req = pb.ListLegalCommandsRequest(match_id=self.match_id, limit=limit, sample_seed=sample_seed)
        return self.client._send(lambda: self.client.stub.ListLegalCommands(
            req, metadata=_metadata(self.token), timeout=self.client.timeout))

    def submit(self, command: Message | any_pb2.Any, *, command_id: str | None = None,
               expected_version: int | None = None, omit_events: bool = False) -> pb.SubmitCommandResponse:
        """Submit one command; with `omit_events` the answer carries the version only.

        Without `command_id` a random one is made (`new_id`), which the SDK's own retries
        (`GameClient(retries=...)`) send again; a caller retrying by itself after a lost answer
        (a deadline, a dropped connection) must pass the first call's id, or the retry is
        another command."""
        packed = command if isinstance(command, any_pb2.Any) else pack(command)
        req = pb.SubmitCommandRequest(match_id=self.match_id, command_id=command_id or new_id(),
                                      command=packed, omit_events=omit_events)
        if expected_version is not None:
            req.expected_version = expected_version
        return self.client._send(lambda: self.client.stub.SubmitCommand(
            req, metadata=_metadata(self.token), timeout=self.client.timeout))

    def stream(self, from_version: int = 0, *, until_now: bool = False,
               timeout: float | None = None) -> Iterator[pb.StreamEventsResponse]:
        """One StreamEvents call: each reply is one event this viewer may see (`version` = its
        seq) and, once the match is over, a last reply with no event and `finished`. It ends
        with its connection; `follow` resumes by itself."""
        req = pb.StreamEventsRequest(match_id=self.match_id, from_version=from_version, until_now=until_now)
        return self.client.stub.StreamEvents(req, metadata=_metadata(self.token), timeout=timeout)

    def follow(self, from_version: int = 0, *, retry_for: float = 30.0) -> Iterator[pb.SeatEvent]:
        """The events this viewer may see after `from_version`, until the match is over, across
        dropped connections and restarted servers: a stream that breaks (UNAVAILABLE) is opened
        again from the last version received, for up to `retry_for` seconds after the break
        (however long the match had waited before it: a stream open that long counts as
        connected). Any other status (a bad token, `version_ahead`, ...) is raised as it is.
        The server sends nothing while the match waits; a connection lost silently is noticed
        by the client's keepalive (`GameClient(keepalive_s=...)`)."""
        version = from_version
        # the lambda reads `version` at each reopening: where the replies left it
        for reply in _resumed(lambda: self.stream(version), retry_for, again_at_end=True):  # noqa: B023
            version = max(version, reply.version)
            if reply.HasField("event"):
                yield reply.event
            if reply.finished:
                return

    # -- who plays the seat -----------------------------------------------------------------
    def leave_match(self) -> pb.LeaveMatchResponse:
        """Leave the match for good: the bots play the seat to its end (`seat_left`), this token
        reads the match as a spectator and commands nothing (`FAILED_PRECONDITION seat_left`).
        Idempotent (again: `duplicate`, the same version), so the SDK's retries send it again."""
        req = pb.LeaveMatchRequest(match_id=self.match_id)
        return self.client._send(lambda: self.client.stub.LeaveMatch(req, metadata=_metadata(self.token),
                                                                    timeout=self.client.timeout))

    def return_to_match(self) -> pb.ReturnToMatchResponse:
        """Take the seat back from the bots, which play it since its turn clock ran out on it too
        many times in a row (`GetViewResponse.away`, reason "timeouts"; commands are
        `FAILED_PRECONDITION seat_away` meanwhile): its clock starts afresh. A seat not away
        answers `duplicate`, so the SDK's retries send it again."""
        req = pb.ReturnToMatchRequest(match_id=self.match_id)
        return self.client._send(lambda: self.client.stub.ReturnToMatch(req, metadata=_metadata(self.token),
                                                                       timeout=self.client.timeout))

    def ask_rematch(self) -> pb.RematchResponse:
        """Ask for a rematch of this finished match (the same game, seats and options, a new deal,
        every seat moved one on). It is made once every person at the table has asked; until
        then `waiting_for` names the seats still to ask, after it `match_id` is the rematch and
        `seat_token` this seat's there (`rematch_seat`); `seat`, this seat's there, is known
        before (-1 for a seat the bots play there). Idempotent: ask again to learn whether it is
        made, or watch for `rematch_made` (`watch_my_turns`)."""
        req = pb.RematchRequest(match_id=self.match_id)
        return self.client._send(lambda: self.client.stub.AskRematch(req, metadata=_metadata(self.token),
                                                                    timeout=self.client.timeout))

    def get_rematch(self) -> pb.RematchResponse:
        """Where this finished match's rematch stands, asking nothing (a spectator's handle too)."""
        req = pb.RematchRequest(match_id=self.match_id)
        return self.client._send(lambda: self.client.stub.GetRematch(req, metadata=_metadata(self.token),
                                                                    timeout=self.client.timeout))

    def rematch_seat(self, answer: pb.RematchResponse) -> SeatClient | None:
        """This seat's handle at the rematch an `ask_rematch`/`get_rematch` answer names; None
        while it is not made (or for a spectator)."""
        if not answer.match_id or not answer.seat_token:
            return None
        return SeatClient(self.client, answer.match_id, answer.seat_token)

    # -- match chat -------------------------------------------------------------------------
    def send_chat(self, text: str, *, to_seats: Sequence[int] = (), message_id: str | None = None
                  ) -> pb.SendChatResponse:
        """Send `text` to the table (`to_seats` empty) or to the chosen seats; the answer has the
        message as stored. Without `message_id` a random one is made (`new_id`), which the
        SDK's own retries send again; a caller retrying by itself after a lost answer must pass
        the first call's id, or it is a second message. Nothing Personal refuses it
        (`chat_in_engine`): its chat is the `send_chat` command."""
        req = pb.SendChatRequest(match_id=self.match_id, text=text, to_seats=list(to_seats),
                                 message_id=message_id or new_id())
        return self.client._send(lambda: self.client.stub.SendChat(req, metadata=_metadata(self.token),
                                                                  timeout=self.client.timeout))

    def chat(self, after_id: str = "", limit: int = 0) -> list[pb.ChatMessage]:
        """The messages this viewer may read after `after_id` (a message's id; "": the oldest
        kept), oldest first, at most `limit` (0: the server's cap, 100)."""
        req = pb.ListChatRequest(match_id=self.match_id, after_id=after_id, limit=limit)
        return list(self.client._send(lambda: self.client.stub.ListChat(
            req, metadata=_metadata(self.token), timeout=self.client.timeout)).messages)

    def chat_stream(self, after_id: str = "", *, until_now: bool = False,
                    timeout: float | None = None) -> Iterator[pb.StreamChatResponse]:
        """One StreamChat call: the messages after `after_id`, then each new one, a reply each.
        It ends with its connection (a match over keeps its chat); `follow_chat` resumes by itself."""
        req = pb.StreamChatRequest(match_id=self.match_id, after_id=after_id, until_now=until_now)
        return self.client.stub.StreamChat(req, metadata=_metadata(self.token), timeout=timeout)

    def follow_chat(self, after_id: str = "", *, retry_for: float = 30.0) -> Iterator[pb.ChatMessage]:
        """The messages this viewer may read after `after_id`, as they come, across dropped
        connections and restarted servers, as `follow` is for events: a stream that breaks
        (UNAVAILABLE) is opened again after the last message received, for up to `retry_for`
        seconds after the break; any other status is raised, NOT_FOUND `match_archived` too once
        the match is archived (its chat goes with it). It does not end with the match (the table
        may talk after it): stop iterating, or close the generator."""
        last = after_id
        for reply in _resumed(lambda: self.chat_stream(last), retry_for, again_at_end=False):  # noqa: B023
            last = reply.message.id
            yield reply.message
