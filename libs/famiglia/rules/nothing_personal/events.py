"""Event and command constructors over the generated messages: `ev("markers_placed", gangster=...)`."""

from __future__ import annotations

from typing import Any

from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb

_EVENT_CLS: dict[str, Any] = {
    f.name: getattr(pb, f.message_type.name) for f in pb.Event.DESCRIPTOR.oneofs_by_name["kind"].fields
}
_COMMAND_CLS: dict[str, Any] = {
    f.name: getattr(pb, f.message_type.name) for f in pb.Command.DESCRIPTOR.oneofs_by_name["kind"].fields
}


def ev(event_kind: str, /, **fields: Any) -> pb.Event:
    return pb.Event(**{event_kind: _EVENT_CLS[event_kind](**fields)})


def cmd(command_kind: str, /, **fields: Any) -> pb.Command:
    return pb.Command(**{command_kind: _COMMAND_CLS[command_kind](**fields)})


EVENT_KINDS = tuple(_EVENT_CLS)
COMMAND_KINDS = tuple(_COMMAND_CLS)
