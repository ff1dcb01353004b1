"""The match export file: self-contained, versioned, readable.

A file is one `famiglia.v1.MatchExport` (replay_service.proto), written as the
protobuf JSON mapping (field names as in the proto, bytes in base64) so it can
be read and diffed, or as protobuf binary when size matters. `load` takes
either (JSON starts with `{`).

Format version 1 holds:

- the header: game, seats, seed, options, and the MatchCreated record as stored;
- `setup_last_seq`: events 2..setup_last_seq are what `engine.setup` produced;
- `commands`: every accepted command with its seat, id, the seq of its first
  event (the version before it is first_seq - 1, which seeds its Rng) and text;
- `events`: every envelope of the match, match_created first, unredacted.

Commands come from the envelopes themselves: the command service records each
accepted command (serialized) in field `command` of the first envelope of the
events it caused, so nothing but the event stream is needed to export.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.protobuf import json_format
from google.protobuf.message import DecodeError

from famiglia.engine.registry import Registry, UnknownGame
from famiglia.eventstore.envelopes import MATCH_CREATED, SEAT_CHANGES, open_match_created
from famiglia.v1.envelope_pb2 import EventEnvelope
from famiglia.v1.replay_service_pb2 import MatchExport, RecordedCommand

FORMAT_VERSION = 1
#: The largest export file: what the replay client receives from ExportMatch and the replay
#: service receives in ImportMatch, so whatever is exported can be imported back (a match of
#: ~20k events passes 8 MiB as JSON, every other service's receive limit).
FILE_MAX_BYTES = 64 * 1024 * 1024
#: The largest message a replay server (and its client) receives: an export file of
#: FILE_MAX_BYTES with the rest of its request or reply, plus a margin (the 8 MiB every other
#: service receives at most) within which a bigger file still reaches the handler, to be refused
#: with a code (`file_too_large`). Past it gRPC refuses the message itself, RESOURCE_EXHAUSTED with
#: no code, before any handler: a server must bound what it buffers for a call somewhere.
MESSAGE_MAX_BYTES = FILE_MAX_BYTES + 8 * 1024 * 1024
GENERATOR = "famiglia-replay"


class BadExport(ValueError):
    """A file that is not a readable export of a supported version."""


def recorded_commands(envelopes: Sequence[EventEnvelope]) -> list[RecordedCommand]:
    """The commands recorded on the envelopes: one per envelope carrying `command`.

    A command's events are the envelopes from its first one up to the next
    envelope that carries a command, has another command id or is a seat change (a
    `seat_left` the command service wrote in one append with a clock's default, under its
    command id, is the server's event, not the command's).
    """
    out: list[RecordedCommand] = []
    current: RecordedCommand | None = None
    for env in envelopes:
        if env.command:
            current = RecordedCommand(first_seq=env.seq, last_seq=env.seq, seat=env.seat,
                                      command_id=env.command_id, command=env.command)
            out.append(current)
        elif current is not None and env.command_id and env.command_id == current.command_id \
                and env.type not in SEAT_CHANGES:
            current.last_seq = env.seq
        else:
            current = None
    return out


def setup_last_seq(envelopes: Sequence[EventEnvelope]) -> int:
    """The last seq before the first command's events or seat change (1 when setup made no events)."""
    last = 1
    for env in envelopes[1:]:
        if env.command_id or env.command or env.type in SEAT_CHANGES:
            break
        last = env.seq
    return last


def build_export(registry: Registry | None, envelopes: Sequence[EventEnvelope],
                 exported_at_ms: int | None = None) -> MatchExport:
    """The export of a match from all its envelopes (seq 1..n, in order)."""
    if not envelopes or envelopes[0].type != MATCH_CREATED:
        raise BadExport("a match export starts with match_created")
    created = open_match_created(envelopes[0])
    export = MatchExport(
        format_version=FORMAT_VERSION, generator=GENERATOR, match_id=envelopes[0].match_id,
        game_id=created.game_id, seats=created.seats, seed=created.seed, options=dict(created.options),
        setup=created, setup_last_seq=setup_last_seq(envelopes),
    )
    if exported_at_ms is not None:
        export.exported_at.FromMilliseconds(exported_at_ms)
    commands = recorded_commands(envelopes)
    engine = None
    if registry is not None:
        try:
            engine = registry.get(created.game_id)
        except UnknownGame:
            engine = None
    if engine is not None and engine.info.command_type is not None:
        export.command_type = engine.info.command_type.DESCRIPTOR.full_name
        export.event_type = engine.info.event_type.DESCRIPTOR.full_name if engine.info.event_type else ""
        for cmd in commands:
            cmd.command_type = export.command_type
            try:
                cmd.text = engine.render_command(engine.info.command_type.FromString(cmd.command))
            except (DecodeError, ValueError, KeyError, AttributeError):
                cmd.text = "?"
    export.commands.extend(commands)
    export.events.extend(envelopes)
    return export


def dump(export: MatchExport, *, binary: bool = False) -> bytes:
    """The file's bytes: JSON (default) or protobuf binary."""
    if binary:
        return export.SerializeToString(deterministic=True)
    text = json_format.MessageToJson(export, preserving_proto_field_name=True, indent=1, sort_keys=False)
    return (text + "\n").encode()


def load(data: bytes) -> MatchExport:
    """Read an export file, JSON or binary; refuse unknown format versions."""
    export = MatchExport()
    try:
        if data.lstrip()[:1] == b"{":
            json_format.Parse(data.decode("utf-8"), export)
        else:
            export.ParseFromString(data)
    except (json_format.ParseError, DecodeError, UnicodeDecodeError) as exc:
        raise BadExport(f"not a match export: {exc}") from None
    if export.format_version == 0 or not export.events:
        raise BadExport("not a match export (no format version or no events)")
    if export.format_version > FORMAT_VERSION:
        raise BadExport(f"export format {export.format_version} is newer than this reader ({FORMAT_VERSION})")
    return export


def file_name(export: MatchExport) -> str:
    return f"{export.game_id}-{export.match_id}.famiglia.json"
