"""Event and command constructors over the generated messages: `ev("markers_placed", gangster=...)`."""

from __future__ import annotations

from typing import Any

from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb


def _classes(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in message.DESCRIPTOR.oneofs_by_name["kind"].fields:
        out[f.name] = getattr(pb, f.message_type.name)
    return out


_EVENT_CLS = _classes(pb.Event)
_COMMAND_CLS = _classes(pb.Command)


def ev(event_kind: str, /, **fields: Any) -> pb.Event:
    build: Any = pb.Event
    return build(**{event_kind: fields})   # the message is built in place from the dict


def cmd(command_kind: str, /, **fields: Any) -> Any:
    return pb.Command(**{command_kind: _COMMAND_CLS[command_kind](**fields)})


def pass_command() -> Any:
    """`Pass` is a Python keyword, so the field is reached by name."""
    return cmd("pass")


EVENT_KINDS = tuple(_EVENT_CLS)
COMMAND_KINDS = tuple(_COMMAND_CLS)


PASS = pass_command()
"""The engine's one pass command: shared and read-only (legal listings, defaults, shared events)."""
