"""The famiglia.v1 protos say what a client developer needs, and say what the code does.

A mobile developer builds from the protos (and the `.pyi` stubs that carry their comments):
an RPC or a request field without a word, or a limit the comment gives that the code does not
keep, is a contract the server breaks. CancelMatch's request id was "at most 256" in the README
while its event's command id could then outgrow what the archive and ImportMatch hold (128).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

ROOT = Path(__file__).resolve().parents[3]
PROTOS = sorted((ROOT / "protos/famiglia/v1").glob("*.proto"))
FIELD = re.compile(r"(?:optional |repeated )?(?:map<[^>]+>|[\w.]+) (\w+) = \d+;")


def _messages(path: Path) -> dict[str, list[tuple[int, str]]]:
    """Each message's lines (index, text), its own `message` line first."""
    out: dict[str, list[tuple[int, str]]] = {}
    current = ""
    depth = 0
    for i, line in enumerate(path.read_text().splitlines()):
        opened = re.match(r"\s*message (\w+)", line)
        if opened and depth == 0:
            current = opened.group(1)
            out[current] = []
        if current:
            out[current].append((i, line))
        depth += line.count("{") - line.count("}")
        if depth == 0:
            current = ""
    return out


def _field_comment(path: Path, message: str, field: str) -> str:
    """The field's comment: the `//` lines right above it, its trailing one, and the comment-only
    lines that continue that one below it."""
    lines = path.read_text().splitlines()
    for i, line in _messages(path)[message]:
        code = line.split("//", 1)[0]
        match = FIELD.search(code.split("{")[-1])
        if not match or match.group(1) != field:
            continue
        above: list[str] = []
        k = i - 1
        while k >= 0 and lines[k].strip().startswith("//"):
            above.insert(0, lines[k].strip()[2:])
            k -= 1
        below = [line.split("//", 1)[1]] if "//" in line else []
        k = i + 1
        while below and k < len(lines) and lines[k].strip().startswith("//") and lines[k].index("//") > 4:
            below.append(lines[k].strip()[2:])
            k += 1
        return " ".join(part.strip() for part in above + below)
    raise AssertionError(f"{path.name}: {message} has no field {field}")


@pytest.mark.parametrize("path", PROTOS, ids=lambda p: p.name)
def test_every_rpc_and_every_request_field_has_a_comment(path: Path) -> None:
    lines = path.read_text().splitlines()
    bare = [line.strip() for i, line in enumerate(lines)
            if line.strip().startswith("rpc ") and not lines[i - 1].strip().startswith("//")]
    assert not bare, f"{path.name}: RPCs without a comment: {bare}"
    for message, body in _messages(path).items():
        if not message.endswith("Request"):
            continue
        for _, line in body:
            match = FIELD.search(line.split("//", 1)[0].split("{")[-1])
            if match:
                assert _field_comment(path, message, match.group(1)), \
                    f"{path.name}: {message}.{match.group(1)} has no comment"


def _limits() -> list[tuple[str, str, str, str]]:
    """(proto, message, field, the limit its comment must state), the limits read from the code."""
    from famiglia.auth.request_ids import MIN_SECRET_REQUEST_ID
    from famiglia.readmodels.queries import DEFAULT_PAGE, MAX_PAGE
    from services.bots.entrypoints.grpc_server import MAX_LIST, MAX_REQUEST_ID
    from services.command.app import (
        MAX_CANCEL_REASON,
        MAX_CANCEL_REQUEST_ID,
        MAX_CHAIN,
        MAX_CREATION_REQUEST_ID,
        MAX_LEGAL,
        MAX_MY_TURNS,
        MY_TURNS_LOOKED_AT,
    )
    from services.command.chat import MAX_CHAT_PAGE, MAX_CHAT_TEXT, MAX_MESSAGE_ID
    from services.matchmaking.app import MAX_NAME
    from services.matchmaking.app import MAX_REQUEST_ID as MAX_MM_REQUEST_ID
    from services.replay.app import MAX_PAGE as MAX_EVENTS_PAGE

    return [
        ("game_service", "CancelMatchRequest", "request_id", f"at most {MAX_CANCEL_REQUEST_ID} characters"),
        ("game_service", "CancelMatchRequest", "reason", f"at most {MAX_CANCEL_REASON} characters"),
        ("game_service", "CreateMatchRequest", "request_id", f"{MIN_SECRET_REQUEST_ID} to {MAX_CREATION_REQUEST_ID} characters"),
        ("game_service", "ListLegalCommandsRequest", "limit", f"the server's cap, {MAX_LEGAL}"),
        ("game_service", "SubmitCommandsRequest", "commands", f"1 to {MAX_CHAIN}"),
        ("game_service", "SubmitCommandsRequest", "ask_next", f"At most {MAX_CHAIN}"),
        ("game_service", "SendChatRequest", "text", f"1 to {MAX_CHAT_TEXT} characters"),
        ("game_service", "SendChatRequest", "message_id", f"at most {MAX_MESSAGE_ID} characters"),
        ("game_service", "ListChatRequest", "limit", f"the server's cap, {MAX_CHAT_PAGE}"),
        ("game_service", "ListMyTurnsRequest", "limit", f"the server's cap, {MAX_MY_TURNS}"),
        ("game_service", "ListMyTurnsRequest", "limit", f"the player's {MY_TURNS_LOOKED_AT} newest live matches"),
        ("matchmaking_service", "RegisterGuestRequest", "display_name", f"1..{MAX_NAME} printable characters"),
        ("matchmaking_service", "RegisterGuestRequest", "request_id", f"{MIN_SECRET_REQUEST_ID} to {MAX_MM_REQUEST_ID} characters"),
        ("matchmaking_service", "CreateTicketRequest", "request_id", f"at most {MAX_MM_REQUEST_ID} characters"),
        ("tournament_service", "CreateTournamentRequest", "request_id", f"at most {MAX_REQUEST_ID} characters"),
        ("tournament_service", "ListTournamentsRequest", "limit", f"at most {MAX_LIST}"),
        ("query_service", "ListMatchesRequest", "page_size", f"default {DEFAULT_PAGE}, at most {MAX_PAGE}"),
        ("query_service", "GetPlayerHistoryRequest", "page_size", f"default {DEFAULT_PAGE}, at most {MAX_PAGE}"),
        ("query_service", "GetLeaderboardRequest", "limit", f"default {DEFAULT_PAGE}, at most {MAX_PAGE}"),
        ("replay_service", "ListMatchEventsRequest", "page_size", f"at most {MAX_EVENTS_PAGE}"),
    ]


def test_the_limits_the_comments_state_are_the_codes() -> None:
    wrong = []
    for proto, message, field, stated in _limits():
        comment = _field_comment(ROOT / f"protos/famiglia/v1/{proto}.proto", message, field)
        if stated.replace(",", "") not in comment.replace(",", ""):  # 1,024 or 1024
            wrong.append(f"{message}.{field}: {stated!r} not in {comment!r}")
    assert not wrong, wrong


# -- the games' protos: every message, field and enum value ----------------------------------

GAME_PROTOS = sorted(p for p in (ROOT / "protos/famiglia").glob("*/v1/*.proto") if p.parent.parent.name != "testgames")


def _described(path: Path, out: Path) -> descriptor_pb2.FileDescriptorProto:
    """The proto's descriptor with its comments (protoc's source info)."""
    import grpc_tools
    from grpc_tools import protoc

    include = Path(grpc_tools.__file__).parent / "_proto"
    target = out / "set.pb"
    assert protoc.main(["protoc", f"-I{ROOT / 'protos'}", f"-I{include}", "--include_source_info",
                        f"--descriptor_set_out={target}", str(path)]) == 0
    files = descriptor_pb2.FileDescriptorSet.FromString(target.read_bytes()).file
    return files[-1]


def _uncommented(proto: descriptor_pb2.FileDescriptorProto) -> list[str]:
    """The messages, fields, enums and enum values with no leading or trailing comment."""
    said = {tuple(loc.path) for loc in proto.source_code_info.location
            if (loc.leading_comments + loc.trailing_comments).strip()}
    bare: list[str] = []

    def enum(e: descriptor_pb2.EnumDescriptorProto, path: tuple[int, ...], name: str) -> None:
        if path not in said:
            bare.append(name)
        bare.extend(f"{name}.{v.name}" for k, v in enumerate(e.value) if (*path, 2, k) not in said)

    def message(m: descriptor_pb2.DescriptorProto, path: tuple[int, ...], name: str) -> None:
        if path not in said:
            bare.append(name)
        bare.extend(f"{name}.{f.name}" for k, f in enumerate(m.field) if (*path, 2, k) not in said)
        for k, nested in enumerate(m.nested_type):
            if not nested.options.map_entry:
                message(nested, (*path, 3, k), f"{name}.{nested.name}")
        for k, e in enumerate(m.enum_type):
            enum(e, (*path, 4, k), f"{name}.{e.name}")

    for k, m in enumerate(proto.message_type):
        message(m, (4, k), m.name)
    for k, e in enumerate(proto.enum_type):
        enum(e, (5, k), e.name)
    return bare


@pytest.mark.parametrize("path", GAME_PROTOS, ids=lambda p: p.parent.parent.name)
def test_every_message_field_and_enum_value_of_a_game_says_what_it_is(path: Path, tmp_path: Path) -> None:
    """A client builds a game's screens from its Command, Event and View messages: each says what
    it is in the game's words, its rule ids and ranges, and what other seats see instead."""
    proto = _described(path, tmp_path)
    assert len(proto.message_type) > 20  # the scan reads the game's messages
    assert not _uncommented(proto), f"{path.name}: no comment on {_uncommented(proto)}"


@pytest.mark.parametrize("path", PROTOS, ids=lambda p: p.name)
def test_no_field_comment_runs_on_below_its_field(path: Path) -> None:
    """protoc keeps a field's trailing comment to its own line: the comment lines below it are the
    next field's leading comment (or dropped before a `}`), and so the stubs read. So
    RematchResponse.seat_token's stub began "is made; -1 for a spectator...", the end of `seat`'s
    comment, and CreateMatchRequest.tournament_id's the end of `request_id`'s. A comment longer
    than the line goes above its field."""
    lines = path.read_text().splitlines()
    spilled = [lines[i].strip() for i in range(len(lines) - 1)
               if FIELD.search(lines[i].split("//", 1)[0]) and "//" in lines[i]
               and lines[i + 1].strip().startswith("//") and lines[i + 1].index("//") > 4]
    assert not spilled, f"{path.name}: trailing comments continued below their field: {spilled}"
