"""famiglia.v1.ReplayService over gRPC: requests in, use cases called, replies or statuses out."""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from google.protobuf import any_pb2, json_format
from google.protobuf.message import Message

from famiglia.grpcutil.errors import FailedPrecondition, InvalidArgument
from famiglia.grpcutil.readiness import Dependency
from famiglia.grpcutil.server import bearer_token, build_server, rpc
from famiglia.grpcutil.tls import Transport
from famiglia.replay.access import shows_command_id
from famiglia.replay.export import FILE_MAX_BYTES, MESSAGE_MAX_BYTES, dump, file_name
from famiglia.v1 import game_service_pb2 as game_pb
from famiglia.v1 import replay_service_pb2 as pb
from famiglia.v1 import replay_service_pb2_grpc as pb_grpc

from ..app import ReplayApp, StateAt, Step, envelope_ms

#: The paces StreamReplay plays at, by their enum value.
_PACES = {v.number: v.name for v in pb.Pace.DESCRIPTOR.values}


def _pack(message: Message | None) -> any_pb2.Any | None:
    if message is None:
        return None
    out = any_pb2.Any()
    out.Pack(message, type_url_prefix="type.googleapis.com/")
    return out


def _state_reply(answer: StateAt) -> pb.GetStateAtResponse:
    env, timeline = answer.envelope, answer.timeline
    reply = pb.GetStateAtResponse(
        match_id=timeline.match_id, game_id=timeline.game_id, event_id=env.event_id, seq=env.seq,
        last_seq=timeline.last_seq, match_finished=answer.finished,
        scope=pb.ViewScope.ValueType(answer.access.scope),
        seat=-1 if answer.access.viewer is None else answer.access.viewer, text=answer.text,
        game_over=answer.game_over,
    )
    view = _pack(answer.view)
    if view is not None:
        reply.view.CopyFrom(view)
    for p in answer.to_act:
        reply.to_act.add(seat=p.seat, kind=game_pb.DecisionKind.ValueType(p.kind), label=p.label,
                         timeout_seconds=p.timeout_seconds)
    for seat_view in answer.seat_views:
        reply.seat_views.add().Pack(seat_view, type_url_prefix="type.googleapis.com/")
    return reply


def _step(step: Step) -> pb.ReplayStep:
    env = step.envelope
    out = pb.ReplayStep(event_id=env.event_id, seq=env.seq, type=env.type if step.event is None else
                        (step.event.WhichOneof("kind") or env.type),
                        seat=-1 if step.unattributed else env.seat,
                        command_id=env.command_id if not step.unattributed and
                        shows_command_id(step.access, env.seat) else "",
                        timestamp_ms=envelope_ms(env), event_text=step.event_text,
                        view_text=step.view_text, scope=pb.ViewScope.ValueType(step.access.scope))
    event, view = _pack(step.event), _pack(step.view)
    if event is not None:
        out.event.CopyFrom(event)
    if view is not None:
        out.view.CopyFrom(view)
    return out


class ReplayServicer(pb_grpc.ReplayServiceServicer):
    def __init__(self, app: ReplayApp) -> None:
        self.app = app

    @rpc
    def GetStateAt(self, request, context):
        answer = self.app.state_at(request.event_id, bearer_token(context), full=request.full,
                                   match_id=request.match_id)
        return _state_reply(answer)

    @rpc
    def StreamReplay(self, request, context):
        if not request.match_id and not request.event_id:
            raise InvalidArgument("no_match_id", "name a match_id or an event_id")
        if request.pace not in _PACES:  # a value this server does not know: not silently instant
            raise InvalidArgument("bad_pace", f"pace {request.pace} is none of {', '.join(_PACES.values())}")
        steps = self.app.replay(
            bearer_token(context), match_id=request.match_id, event_id=request.event_id,
            from_seq=request.from_seq, to_seq=request.to_seq, full=request.full,
            recorded_pace=request.pace == pb.PACE_RECORDED, speed=request.speed or 1.0,
            max_gap_ms=request.max_gap_ms or 5000, with_views=not request.without_views,
            is_active=context.is_active,
        )
        for step in steps:
            yield _step(step)

    @rpc
    def ListMatchEvents(self, request, context):
        page = self.app.list_events(request.match_id, bearer_token(context), request.page_size,
                                    request.page_token)
        reply = pb.ListMatchEventsResponse(match_id=page.timeline.match_id, game_id=page.timeline.game_id,
                                           next_page_token=page.next_token, last_seq=page.timeline.last_seq,
                                           match_finished=page.timeline.finished)
        for info in page.events:  # hidden ones come already stripped (EventInfo.concealed)
            reply.events.add(event_id=info.event_id, seq=info.envelope.seq, type=info.type,
                             seat=info.seat, command_id=info.command_id, timestamp_ms=info.timestamp_ms,
                             hidden=info.hidden)
        return reply

    @rpc
    def ExportMatch(self, request, context):
        export = self.app.export(request.match_id, bearer_token(context))
        try:
            data = dump(export, binary=request.binary)
        except json_format.SerializeToJsonError as exc:  # a stored time JSON cannot write (1 AD..9999 only)
            raise FailedPrecondition("unexportable", f"{exc}; the binary export holds it") from None
        if len(data) > FILE_MAX_BYTES:  # no client takes it, and no server would import it back
            raise FailedPrecondition("export_too_large", f"this match's {'binary' if request.binary else 'JSON'} "
                                     f"export is {len(data):,} bytes, past the {_mib(FILE_MAX_BYTES)} an export "
                                     "file may be" + ("" if request.binary else
                                                      ": ask for the binary one (smaller than its JSON)"))
        return pb.ExportMatchResponse(match_id=export.match_id, file=data,
                                      file_name=file_name(export), events=len(export.events),
                                      commands=len(export.commands))

    @rpc
    def ImportMatch(self, request, context):
        match_id, version, report = self.app.import_file(request.file, token=bearer_token(context),
                                                         new_match_id=request.new_match_id,
                                                         allow_unverified=request.allow_unverified)
        return pb.ImportMatchResponse(match_id=match_id, version=version, verification=report.to_proto())

    @rpc
    def VerifyMatch(self, request, context):
        source = request.WhichOneof("source")
        if source == "file":
            return self.app.verify_file(request.file).to_proto()
        if source == "match_id":
            return self.app.verify_match(request.match_id, bearer_token(context)).to_proto()
        raise InvalidArgument("no_source", "name a match_id or send a file")


#: Seconds a unary call may run before it is taken for stuck (FAMIGLIA_REPLAY_STUCK_CALL_S): its
#: calls fold a match through its engine (GetStateAt) or decide every command again (VerifyMatch,
#: ImportMatch), so an engine that loops holds one of its threads for good, as in the command
#: service; a long match's verification takes seconds, far under this.
STUCK_CALL_S = 120.0


def serve(app: ReplayApp, address: str, workers: int = 64, *,
          dependencies: Sequence[Dependency] = (),
          transport: Transport | None = None,
          stuck_call_s: float | None = STUCK_CALL_S) -> tuple[grpc.Server, int]:
    """A ReplayService server bound to `address` (not yet started); reflection and health on,
    SERVING while `dependencies` answer and no unary call has run `stuck_call_s` (None: not
    watched; `build_server`)."""
    return build_server(
        address,
        [(pb_grpc.add_ReplayServiceServicer_to_server, ReplayServicer(app), "famiglia.v1.ReplayService")],
        workers=workers,
        dependencies=dependencies,
        transport=transport,
        stuck_call_s=stuck_call_s,
        # An ImportMatch file (whatever ExportMatch sent) and a margin, in which a bigger file is
        # still refused with a code (`file_too_large`), not by gRPC without one.
        max_receive_bytes=MESSAGE_MAX_BYTES,
    )


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"
