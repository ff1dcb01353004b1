"""famiglia.v1.GameService over gRPC: requests in, use cases called, replies or statuses out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
from google.protobuf import any_pb2

from famiglia.eventstore.chat import ChatEntry
from famiglia.eventstore.turn_notices import StoredNotice
from famiglia.grpcutil.errors import AppError, InvalidArgument
from famiglia.grpcutil.operators import operator_of
from famiglia.grpcutil.readiness import Dependency
from famiglia.grpcutil.server import KEEPALIVE_S, bearer_token, build_server, rpc
from famiglia.grpcutil.tls import Transport
from famiglia.grpcutil.watchdog import RUNNING, Running
from famiglia.telemetry import get_logger
from famiglia.v1 import game_service_pb2 as pb
from famiglia.v1 import game_service_pb2_grpc as pb_grpc

from ..app import ChainedCommand, CommandApp, MyTurn, NextSeat, SeatEvent, Submitted
from ..quarantine import ASKED_PREFIXES
from ..rematch import Rematch
from ..turn_watch import Snapshot

_TYPE_URL = "type.googleapis.com/"
log = get_logger("famiglia.grpc")


def _pack(message) -> any_pb2.Any:
    """Any.Pack, in one constructor call (Pack sets its two fields from Python)."""
    return any_pb2.Any(type_url=_TYPE_URL + message.DESCRIPTOR.full_name, value=message.SerializeToString())


def _seat_event(e: SeatEvent) -> pb.SeatEvent:
    out = pb.SeatEvent()
    _fill_seat_event(out, e)
    return out


def _fill_seat_event(out: pb.SeatEvent, e: SeatEvent) -> None:
    """Write `e` into a SeatEvent already in place in its reply: a message built apart and
    then passed to the reply's constructor is copied once more."""
    env = e.envelope
    stamp = env.timestamp
    out.event_id, out.seq, out.type = env.event_id, 0 if e.held else env.seq, env.type
    if e.unattributed:  # its command's other events are hidden from this viewer: so is who sent it
        out.seat, out.command_id = -1, ""
    else:
        out.seat, out.command_id = env.seat, "" if e.foreign else env.command_id
    out.text = e.text
    out.timestamp_ms = stamp.seconds * 1000 + stamp.nanos // 1_000_000
    event = out.event
    if e.stored:  # unredacted: packed from the bytes already stored rather than serialized again
        event.type_url, event.value = _TYPE_URL + env.payload_type, env.payload
    else:
        event.type_url, event.value = _TYPE_URL + e.event.DESCRIPTOR.full_name, e.event.SerializeToString()


def _fill_submitted(reply: pb.SubmitCommandResponse, done: Submitted) -> None:
    reply.version, reply.duplicate = done.version, done.duplicate  # keywords cost twice as much
    if done.held:
        reply.held = True
    add = reply.events.add
    for e in done.events:
        _fill_seat_event(add(), e)


def _chat_message(entry: ChatEntry) -> pb.ChatMessage:
    return pb.ChatMessage(id=entry.id, from_seat=entry.from_seat, to_seats=entry.to_seats, text=entry.text,
                          sent_ms=entry.sent_ms)


def _my_turns_reply(turns: Sequence[MyTurn]) -> pb.ListMyTurnsResponse:
    reply = pb.ListMyTurnsResponse()
    add = reply.matches.add
    for turn in turns:
        add(match_id=turn.match_id, game_id=turn.game_id, seat=turn.seat, version=turn.version,
            to_act=turn.to_act, deadline_ms=turn.deadline_ms, away=turn.away, seat_token=turn.seat_token)
    return reply


def _notification(n: StoredNotice) -> pb.TurnNotification:
    return pb.TurnNotification(id=n.id, match_id=n.match_id, game_id=n.game_id, seat=n.seat, kind=n.kind,
                               version=n.version, deadline_ms=n.deadline_ms, at_ms=n.at_ms)


def _rematch_response(r: Rematch) -> pb.RematchResponse:
    return pb.RematchResponse(asked=r.asked, waiting_for=r.waiting_for, match_id=r.match_id, seat=r.seat,
                              seat_token=r.seat_token)


def _result(result) -> pb.MatchResult | None:
    if result is None:
        return None
    out = pb.MatchResult(outcome=dict(result.outcome))
    for s in result.seats:
        out.seats.add(seat=s.seat, score=s.score, rank=s.rank, details=dict(s.details))
    return out


def _log_refused_entry(request: pb.SubmitCommandsRequest, index: int, refused) -> None:
    """A chain's refusal travels in the reply, not as a status, so the RPC wrapper writes no
    `rpc_refused` line for it: this is that line (unless the refusal wrote its own, a rule's
    `command_refused`)."""
    if refused.logged:
        return
    entry = request.commands[index] if 0 <= index < len(request.commands) else None
    seat = {} if refused.seat is None else {"seat": refused.seat}
    log.info("rpc_refused", rpc="SubmitCommands", status=refused.status.name, code=refused.code,
             reason=refused.message[:300], match_id=request.match_id[:200],
             command_id=entry.command_id[:200] if entry is not None else "", index=index, **seat)


class GameServicer(pb_grpc.GameServiceServicer):
    def __init__(self, app: CommandApp) -> None:
        self.app = app
        self._set_aside: dict[int, tuple[str, list[str], str]] = {}  # stuck thread -> what it set aside, its hold
        self._unmade: set[int] = set()  # stuck threads whose set-aside Redis has not answered yet
        self._renew_at: dict[int, float] = {}  # stuck thread -> when its set-aside is made again (Unix s)

    @rpc
    def ListGames(self, request, context):
        reply = pb.ListGamesResponse()
        for info in self.app.list_games():
            assert info.command_type and info.event_type and info.view_type
            game = reply.games.add(game_id=info.game_id, title=info.title, min_players=info.min_players,
                                   max_players=info.max_players,
                                   command_type=info.command_type.DESCRIPTOR.full_name,
                                   event_type=info.event_type.DESCRIPTOR.full_name,
                                   view_type=info.view_type.DESCRIPTOR.full_name,
                                   match_chat=not info.engine_chat)
            for o in info.options:
                game.options.add(key=o.key, default_value=o.default, description=o.description,
                                 choices=list(o.choices), rule_id=o.rule)
        return reply

    @rpc
    def CreateMatch(self, request, context):
        self.app.check_creator(bearer_token(context), request.seat_info, request.tournament_id)
        created = self.app.create_match(
            request.game_id, request.seats,
            seed=request.seed if request.HasField("seed") else None,
            options=dict(request.options), seat_info=list(request.seat_info),
            request_id=request.request_id, tournament_id=request.tournament_id,
        )
        return pb.CreateMatchResponse(match_id=created.match_id, seat_tokens=created.seat_tokens,
                                      version=created.version)

    @rpc
    def GetView(self, request, context):
        viewer = self.app.viewer(request.match_id, bearer_token(context))
        answer = self.app.get_view(request.match_id, viewer)
        reply = pb.GetViewResponse(version=answer.version, view=_pack(answer.view),
                                   finished=answer.result is not None, game_id=answer.game_id,
                                   seat=-1 if answer.seat is None else answer.seat, text=answer.text)
        for p in answer.to_act:
            reply.to_act.add(seat=p.seat, kind=int(p.kind), label=p.label, timeout_seconds=p.timeout_seconds,
                             deadline_ms=answer.deadline_ms if p.seat == answer.seat else 0)
        result = _result(answer.result)
        if result is not None:
            reply.result.CopyFrom(result)
        if answer.cancelled is not None:
            reply.finished, reply.cancelled, reply.cancel_reason = True, True, answer.cancelled.reason
        for seat, reason, since in answer.away:
            reply.away.add(seat=seat, reason=reason, since_version=since)
        return reply

    @rpc
    def LeaveMatch(self, request, context):
        viewer = self.app.viewer(request.match_id, bearer_token(context), require_seat=True)
        done = self.app.leave_match(request.match_id, viewer)
        return pb.LeaveMatchResponse(version=done.version, duplicate=done.duplicate)

    @rpc
    def ReturnToMatch(self, request, context):
        viewer = self.app.viewer(request.match_id, bearer_token(context), require_seat=True)
        done = self.app.return_to_match(request.match_id, viewer)
        return pb.ReturnToMatchResponse(version=done.version, duplicate=done.duplicate)

    @rpc
    def AskRematch(self, request, context):
        token = bearer_token(context)
        operator = self.app.rematch_operator(token)
        if operator:
            return _rematch_response(self.app.allow_rematch(request.match_id, operator))
        viewer = self.app.viewer(request.match_id, token, require_seat=True)
        return _rematch_response(self.app.ask_rematch(request.match_id, viewer))

    @rpc
    def GetRematch(self, request, context):
        viewer = self.app.viewer(request.match_id, bearer_token(context))
        return _rematch_response(self.app.get_rematch(request.match_id, viewer))

    @rpc
    def CancelMatch(self, request, context):
        operator = operator_of(self.app.signer, bearer_token(context), "cancel a match")
        expected = request.expected_version if request.HasField("expected_version") else None
        done = self.app.cancel_match(request.match_id, operator, request.reason, request.request_id, expected)
        return pb.CancelMatchResponse(version=done.version, duplicate=done.duplicate)

    @rpc
    def ListLegalCommands(self, request, context):
        viewer = self.app.viewer(request.match_id, bearer_token(context), require_seat=True)
        answer = self.app.legal_commands(request.match_id, viewer, request.limit, request.sample_seed)
        return pb.ListLegalCommandsResponse(version=answer.version, commands=[_pack(c) for c in answer.commands],
                                            complete=answer.complete, text=answer.text,
                                            deadline_ms=answer.deadline_ms)

    @rpc
    def SubmitCommand(self, request, context):
        try:
            viewer = self.app.viewer(request.match_id, bearer_token(context), require_seat=True)
            if not request.HasField("command"):
                raise InvalidArgument("no_command", "the request carries no command")
        except AppError as exc:
            self.app.count_refused(exc)
            raise
        packed = request.command
        expected = request.expected_version if request.HasField("expected_version") else None
        done = self.app.submit_packed(request.match_id, viewer, request.command_id, packed.type_url, packed.value,
                                      expected, omit_events=request.omit_events)
        reply = pb.SubmitCommandResponse()
        _fill_submitted(reply, done)
        return reply

    @rpc
    def SubmitCommands(self, request, context):
        chain = []
        for i, c in enumerate(request.commands):
            if not c.HasField("command"):
                refused = InvalidArgument("no_command", f"command {i} carries no command")
                self.app.count_refused(refused)
                raise refused
            chain.append(ChainedCommand(c.seat_token, c.command_id, c.command.type_url, c.command.value))
        expected = request.expected_version if request.HasField("expected_version") else None
        ask_next = [NextSeat(s.seat_token, s.view, s.legal_limit) for s in request.ask_next]
        answer = self.app.submit_chain(request.match_id, chain, expected, omit_events=request.omit_events,
                                       ask_next=ask_next)
        reply = pb.SubmitCommandsResponse()
        add = reply.results.add
        for done in answer.taken:
            _fill_submitted(add(), done)
        if answer.refusal is not None:
            _log_refused_entry(request, answer.refused_at, answer.refusal)
            refusal = reply.refusal
            refusal.index, refusal.status = answer.refused_at, answer.refusal.status.value[0]
            refusal.code, refusal.message = answer.refusal.code, answer.refusal.message
        if answer.next:
            reply.next_version = answer.next_version
            add_next = reply.next.add
            for n in answer.next:
                out = add_next(seat=n.seat, complete=n.complete, deadline_ms=n.deadline_ms)
                if n.view is not None:
                    view = out.view
                    view.type_url, view.value = _TYPE_URL + n.view.DESCRIPTOR.full_name, n.view.SerializeToString()
                add_legal = out.legal.add
                for c in n.legal:
                    add_legal(type_url=_TYPE_URL + c.DESCRIPTOR.full_name, value=c.SerializeToString())
        return reply

    @rpc
    def StreamEvents(self, request, context):
        viewer = self.app.viewer(request.match_id, bearer_token(context))
        for event, version, finished in self.app.events(
            request.match_id, viewer, request.from_version, follow=not request.until_now,
            is_active=context.is_active,
        ):
            if event is None:
                if finished:
                    yield pb.StreamEventsResponse(version=version, finished=True)
                continue
            reply = pb.StreamEventsResponse(event=_seat_event(event), version=version)
            if event.deadline_ms is not None:
                reply.deadline_ms = event.deadline_ms
            yield reply

    @rpc
    def SendChat(self, request, context):
        viewer = self.app.viewer(request.match_id, bearer_token(context), require_seat=True)
        sent = self.app.send_chat(request.match_id, viewer, request.message_id, list(request.to_seats), request.text)
        return pb.SendChatResponse(message=_chat_message(sent.message), duplicate=sent.duplicate)

    @rpc
    def ListChat(self, request, context):
        viewer = self.app.viewer(request.match_id, bearer_token(context))
        messages = self.app.list_chat(request.match_id, viewer, request.after_id, request.limit)
        return pb.ListChatResponse(messages=[_chat_message(m) for m in messages])

    @rpc
    def StreamChat(self, request, context):
        viewer = self.app.viewer(request.match_id, bearer_token(context))
        for entry in self.app.chat_messages(request.match_id, viewer, request.after_id,
                                            follow=not request.until_now, is_active=context.is_active):
            yield pb.StreamChatResponse(message=_chat_message(entry))

    @rpc
    def ListMyTurns(self, request, context):
        player_id = self.app.player_of(bearer_token(context))
        return _my_turns_reply(self.app.my_turns(player_id, request.limit))

    @rpc
    def WatchMyTurns(self, request, context):
        player_id = self.app.player_of(bearer_token(context))
        for update in self.app.watch_my_turns(player_id, request.after_id, request.limit,
                                              is_active=context.is_active, until_now=request.until_now):
            if isinstance(update, Snapshot):
                yield pb.WatchMyTurnsResponse(snapshot=_my_turns_reply(update.turns), cursor=update.cursor)
            else:
                yield pb.WatchMyTurnsResponse(notification=_notification(update), cursor=update.id)

    def Echo(self, request, context):
        return pb.EchoResponse(payload=request.payload)

    def describe_call(self, call: Running) -> dict[str, Any]:
        """What a stuck call's `call_stuck` line adds to its request's ids: the seat (a chain's
        seats and command ids) its tokens name and the match's game, read without the token
        cache, the match's lock or the hot matches' (the stuck call may hold one)."""
        request = call.request
        out: dict[str, Any] = {}
        if call.rpc == "SubmitCommands":
            entries = request.commands[:16]
            out["seats"] = [self._seat_of(e.seat_token) for e in entries]
            out["command_ids"] = [e.command_id[:200] for e in entries]
        else:
            seat = self._seat_of(bearer_token(call.context))
            if seat is not None:
                out["seat"] = seat
        hot = self.app.matches.peek(getattr(request, "match_id", ""))
        if hot is not None:
            out["game_id"] = hot.match.game_id
        return out

    def set_aside_stuck(self, ident: int, call: Running) -> bool:
        """A stuck call deciding a command: the command set aside for every replica
        (`quarantine`), so its client's retry is refused rather than stalling the next one.
        Asked again each round while the call runs (False): a call found waiting for its match's
        lock (or for Redis) may loop in `decide` next, and a chain (SubmitCommands) whose slow
        entry was set aside may loop on a later one: that one is set aside then, and the entry
        whose `decide` returned is lifted (slow, not endless), as when a stuck call ends. A write
        Redis refused (it raises) is made again next round too; noted before the write, so a
        write Redis made but did not answer in time is lifted as well when the call ends. One
        made is made again once past half its life (`Quarantine.due`), with a new expiry, so a
        call stuck longer than the quarantine (a replica nobody restarts) keeps it."""
        found = self.app.stuck_command(ident)
        if not _still_running(ident, call):
            return True  # `call` ended before its frames were read: they are another call's
        held = self._set_aside.get(ident)
        if held is not None and (found is None or found[:2] != held[:2]):
            self.lift_ended(ident, call)  # its `decide` returned
            held = None
        if found is None:
            return False
        renewed = held is not None and ident not in self._unmade
        if renewed and not self.app.quarantine.due(self._renew_at[ident]):
            return False  # made, and far from its expiry: no Redis this round
        match_id, names, fields = found
        hold = f"{ident:x}"  # the stuck call's own: another's on the same command outlives its lift
        self._set_aside[ident] = (match_id, names, hold)
        if not renewed:
            self._unmade.add(ident)
        self._renew_at[ident] = self.app.quarantine.set_aside(match_id, names, hold)
        self._unmade.discard(ident)
        quarantined, renewed_line, _ = _lines(names)
        if renewed:
            log.info(renewed_line, rpc=call.rpc, match_id=match_id, ttl_s=self.app.quarantine.ttl_s, **fields)
        else:
            log.warning(quarantined, rpc=call.rpc, match_id=match_id, ttl_s=self.app.quarantine.ttl_s, **fields)
        return False

    def lift_ended(self, ident: int, call: Running) -> None:
        """A stuck call that ended after all (slow, not endless), or moved on from the command it
        was deciding: what it set aside is lifted (`pending`: not yet in Redis, which did not
        answer; made at the next read of the set)."""
        self._unmade.discard(ident)
        self._renew_at.pop(ident, None)
        aside = self._set_aside.pop(ident, None)
        if aside is not None:
            made = self.app.quarantine.lift(*aside)
            log.info(_lines(aside[1])[2], rpc=call.rpc, match_id=aside[0], pending=not made)

    def _seat_of(self, token: str | None) -> int | None:
        try:
            return self.app.signer.read_seat(token).seat if token else None
        except Exception:  # noqa: BLE001 - no seat token: no seat to name
            return None


#: Threads for unary calls (SubmitCommand, Echo, ...). One Python process runs one thread
#: at a time; on 2 cores with 16 clients, 3 threads cost ~20 % less service CPU per command
#: than 64 and served more, with Echo no slower (docs/performance.md, "Command path").
CALL_WORKERS = 3

#: Seconds a unary call may run before it is taken for stuck (FAMIGLIA_COMMAND_STUCK_CALL_S): a
#: command is answered in milliseconds, so a call this long is an engine that will not return
#: (docs/operations.md, "A stuck call"), with room left for a slow host. Well under the SDK's
#: deadline (30 s): the command is set aside, and every replica has read so, before the client's
#: retry arrives (at the bound, the watchdog's round, the quarantine's write (after a read round
#: under way) and read later).
STUCK_CALL_S = 20.0


_COMMAND_LINES = ("command_quarantined", "command_quarantine_renewed", "command_quarantine_lifted")
_CALL_LINES = ("call_quarantined", "call_quarantine_renewed", "call_quarantine_lifted")


def _lines(names: Sequence[str]) -> tuple[str, str, str]:
    """A stuck call's set-aside, renewal and lift lines: a seat's view or legal commands
    (`asked_name`) is no command, and is refused `call_quarantined`, not `command_quarantined`;
    its lines say so too."""
    return _CALL_LINES if names and names[0].startswith(ASKED_PREFIXES) else _COMMAND_LINES


def _still_running(ident: int, call: Running) -> bool:
    """Whether thread `ident`'s slot still holds `call` (read after its frames: those were the
    call's own, not the next one's that a pool thread took up meanwhile)."""
    now = RUNNING.get(ident)
    return now is not None and now[0] == call.began and now[3] is call.request


def serve(app: CommandApp, address: str, workers: int = 64,
          call_workers: int = CALL_WORKERS, keepalive_s: float = KEEPALIVE_S,
          dependencies: Sequence[Dependency] = (),
          transport: Transport | None = None,
          stuck_call_s: float | None = STUCK_CALL_S) -> tuple[grpc.Server, int]:
    """A GameService server bound to `address` (not yet started): unary calls on
    `call_workers` threads, each StreamEvents, StreamChat or WatchMyTurns follower on one of `workers`; a connection quiet
    for `keepalive_s` is pinged; health is SERVING while `dependencies` answer and no unary
    call has run `stuck_call_s` (None: not watched) (`build_server`)."""
    servicer = GameServicer(app)
    return build_server(
        address,
        [(pb_grpc.add_GameServiceServicer_to_server, servicer, "famiglia.v1.GameService")],
        workers=workers,
        call_workers=call_workers,
        keepalive_s=keepalive_s,
        dependencies=dependencies,
        transport=transport,
        stuck_call_s=stuck_call_s,
        describe_call=servicer.describe_call,
        on_stuck=servicer.set_aside_stuck,
        on_stuck_ended=servicer.lift_ended,
    )
