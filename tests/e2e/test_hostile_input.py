"""Hostile input on every public RPC, over real gRPC (every service in this process, one real
redis-server): what an attacker or a buggy mobile client sends — odd, empty and oversized ids,
forged, foreign and expired tokens, numbers past every edge, an `Any` of the wrong type or of no
type, commands of the right type with fields out of range, reused idempotency keys, tampered
exports, options nobody defined, requests past the receive limit.

Each answer is a deliberate status with the stable code the project uses and a readable message
(`<code>: <message>`), never UNKNOWN or INTERNAL, never a hang, never an `rpc_failed` line; and
afterwards the match, ticket or tournament is where it was and still plays on (a legal command
goes through, the replay service agrees with GetView). What is accepted on purpose is listed in
docs/architecture.md ("Hostile input"). The long randomized variant runs under `make soak`."""

from __future__ import annotations

import gzip
import math
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog
from google.protobuf import any_pb2, json_format, symbol_database
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from famiglia.auth import TokenSigner
from famiglia.grpcutil.errors import MAX_MESSAGE, error_code
from famiglia.v1 import envelope_pb2
from famiglia.v1 import game_service_pb2 as game_pb
from famiglia.v1 import matchmaking_service_pb2 as mm_pb
from famiglia.v1 import query_service_pb2 as query_pb
from famiglia.v1 import replay_service_pb2 as replay_pb
from famiglia.v1 import tournament_service_pb2 as tournament_pb
from tests.e2e.conftest import SECRET, Services
from tests.profile import SOAK, examples

ROOT = Path(__file__).resolve().parents[2]
SIGNER = TokenSigner(SECRET)
C = grpc.StatusCode
DEADLINE = 60
"""Seconds a call may take before it counts as a hang: generous, as the machine may be loaded."""

#: The statuses a refusal may have: each says whose fault it is and what to do.
DELIBERATE = frozenset({C.INVALID_ARGUMENT, C.NOT_FOUND, C.PERMISSION_DENIED, C.UNAUTHENTICATED,
                        C.FAILED_PRECONDITION, C.ABORTED, C.RESOURCE_EXHAUSTED, C.OUT_OF_RANGE,
                        C.ALREADY_EXISTS})

#: Ids no server made: path tricks, NUL, Redis hash tags and glob characters, spaces, long
#: unicode (and a lone right-to-left mark), a format string, 300,000 characters.
ODD_IDS = ("../../etc/passwd", "a\x00b", "é" * 20_000, "{tag}", "x}:y{", "*", "  ", "\u202e\ud7ff",
           "%s%n", "x" * 300_000)
INT32 = (-(2**31), -1, 2**31 - 1)
INT64 = (-(2**63), -1, 2**63 - 1)


# -- how an answer is judged -------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def no_server_failure() -> Iterator[None]:
    """Whatever a test sends, no service logs a failure of its own (`rpc_failed`, with its
    traceback, or any error line): a refusal is an `rpc_refused` info line."""
    with structlog.testing.capture_logs() as captured:
        yield
    failed = [e for e in captured if e["event"] == "rpc_failed" or e.get("log_level") in ("error", "critical")]
    assert not failed, failed[:3]


def _metadata(token: str | None) -> list[tuple[str, str]] | None:
    return None if token is None else [("authorization", f"Bearer {token}")]


def refusal(call: Callable[..., Any], request: Message, token: str | None = None, *,
            stream: bool = False) -> tuple[grpc.StatusCode, str]:
    """(status, stable code) of a call that must be refused deliberately: a status of
    DELIBERATE, the code in the trailers and the status details, and a message that reads
    `<code>: <why>` within the status' length."""
    with pytest.raises(grpc.RpcError) as caught:
        reply = call(request, metadata=_metadata(token), timeout=DEADLINE)
        if stream:
            list(reply)
    exc = caught.value
    assert exc.code() in DELIBERATE, (exc.code(), exc.details())
    code = error_code(exc)
    assert code, exc.details()
    details = exc.details() or ""
    assert details.startswith(f"{code}: ") and len(details) > len(code) + 3 and len(details) <= MAX_MESSAGE
    return exc.code(), code


def answer(call: Callable[..., Any], request: Message, token: str | None = None, *,
           stream: bool = False) -> tuple[grpc.StatusCode, str]:
    """(OK, "") or a call's `refusal`: for inputs a service may take or refuse."""
    try:
        reply = call(request, metadata=_metadata(token), timeout=DEADLINE)
        if stream:
            list(reply)
        return C.OK, ""
    except grpc.RpcError:
        return refusal(call, request, token, stream=stream)


# -- the services and a match to attack -----------------------------------------------------------
def operator() -> str:
    return SIGNER.operator_token("hostile-test")


@dataclass
class Table:
    match_id: str
    tokens: list[str]


def new_table(s: Services, game_id: str = "grifters", seats: int = 3, seed: int = 11) -> Table:
    created = s.game.CreateMatch(game_pb.CreateMatchRequest(game_id=game_id, seats=seats, seed=seed))
    return Table(created.match_id, list(created.seat_tokens))


def asked(s: Services, table: Table) -> tuple[str, game_pb.ListLegalCommandsResponse]:
    """The token of the first seat asked, and its legal commands (a private ask, a Nothing
    Personal window, shows in its own seat's view only)."""
    token = next(t for seat, t in enumerate(table.tokens) if seat in {
        p.seat for p in s.game.GetView(game_pb.GetViewRequest(match_id=table.match_id), metadata=_metadata(t)).to_act})
    return token, s.game.ListLegalCommands(game_pb.ListLegalCommandsRequest(match_id=table.match_id),
                                           metadata=_metadata(token))


def snapshot(s: Services, table: Table) -> bytes:
    """Everything a spectator and each seat is told of the match now."""
    views = [s.game.GetView(game_pb.GetViewRequest(match_id=table.match_id), metadata=_metadata(token))
             for token in [None, *table.tokens]]
    return b"".join(v.SerializeToString(deterministic=True) for v in views)


def plays_on(s: Services, table: Table, before: bytes) -> None:
    """The match is as `before` said, takes a legal command, and the replay service agrees."""
    assert snapshot(s, table) == before
    token, legal = asked(s, table)
    done = s.game.SubmitCommand(game_pb.SubmitCommandRequest(
        match_id=table.match_id, command_id=f"legal-{legal.version}", command=legal.commands[0],
        expected_version=legal.version), metadata=_metadata(token))
    assert (done.version > legal.version or done.held) and not done.duplicate  # held: NP-H9, the version waits
    version = s.game.GetView(game_pb.GetViewRequest(match_id=table.match_id)).version
    events = s.replay.ListMatchEvents(replay_pb.ListMatchEventsRequest(match_id=table.match_id, page_size=1000))
    assert events.last_seq == version == done.version


# -- GameService ----------------------------------------------------------------------------------
def test_game_service_refuses_odd_ids_foreign_tokens_and_edge_numbers_and_the_match_plays_on(
        stubs: Services) -> None:
    s = stubs
    table, other = new_table(s), new_table(s, "nostra_city", 3, seed=2)
    me, legal = asked(s, table)
    before = snapshot(s, table)
    unknown = (C.NOT_FOUND, "unknown_match")
    for odd in ("", *ODD_IDS):
        expected = (C.INVALID_ARGUMENT, "no_match_id") if not odd else unknown
        assert refusal(s.game.GetView, game_pb.GetViewRequest(match_id=odd)) == expected, odd[:20]
        assert refusal(s.game.StreamEvents, game_pb.StreamEventsRequest(match_id=odd), stream=True) == expected
        assert refusal(s.game.CancelMatch, game_pb.CancelMatchRequest(match_id=odd, reason="r"),
                       operator()) == expected
        # a seat token names its match: another id is refused before anything is looked up (none
        # at all is the request's fault, as without a token)
        named = (C.PERMISSION_DENIED, "wrong_match") if odd else expected
        assert refusal(s.game.ListLegalCommands, game_pb.ListLegalCommandsRequest(match_id=odd), me) == named
        assert refusal(s.game.SubmitCommand, game_pb.SubmitCommandRequest(
            match_id=odd, command_id="c", command=legal.commands[0]), me) == named
    forged = {
        "garbage": (C.UNAUTHENTICATED, "bad_token"), "a.b": (C.UNAUTHENTICATED, "bad_token"),
        me[:-2] + "xx": (C.UNAUTHENTICATED, "bad_token"), "x" * 4000: (C.UNAUTHENTICATED, "bad_token"),
        other.tokens[0]: (C.PERMISSION_DENIED, "wrong_match"),
        SIGNER.player_token("p1"): (C.UNAUTHENTICATED, "bad_token"),
        SIGNER.seat_token(table.match_id, 3): (C.PERMISSION_DENIED, "no_such_seat"),
        SIGNER.seat_token(table.match_id, -1): (C.PERMISSION_DENIED, "no_such_seat"),
        operator(): (C.UNAUTHENTICATED, "bad_token"),
    }
    for token, expected in forged.items():
        assert refusal(s.game.ListLegalCommands, game_pb.ListLegalCommandsRequest(match_id=table.match_id),
                       token) == expected, token[:20]
        assert refusal(s.game.SubmitCommand, game_pb.SubmitCommandRequest(
            match_id=table.match_id, command_id="c", command=legal.commands[0]), token) == expected
        assert refusal(s.game.StreamEvents, game_pb.StreamEventsRequest(match_id=table.match_id, until_now=True),
                       token, stream=True) == expected
        if expected[1] != "no_such_seat" and token != operator():
            assert refusal(s.game.GetView, game_pb.GetViewRequest(match_id=table.match_id), token) == expected
    for version in INT64:
        assert refusal(s.game.SubmitCommand, game_pb.SubmitCommandRequest(
            match_id=table.match_id, command_id=f"v{version}", command=legal.commands[0],
            expected_version=version), me) == (C.ABORTED, "stale_version")
    assert refusal(s.game.StreamEvents, game_pb.StreamEventsRequest(match_id=table.match_id, from_version=2**63 - 1),
                   stream=True) == (C.OUT_OF_RANGE, "version_ahead")
    for command_id, code in (("", "no_command_id"), ("x" * 129, "bad_command_id"), ("a\x00b", "bad_command_id")):
        assert refusal(s.game.SubmitCommand, game_pb.SubmitCommandRequest(
            match_id=table.match_id, command_id=command_id, command=legal.commands[0]), me) == \
            (C.INVALID_ARGUMENT, code)
    assert refusal(s.game.SubmitCommand, game_pb.SubmitCommandRequest(match_id=table.match_id, command_id="c"),
                   me) == (C.INVALID_ARGUMENT, "no_command")
    # A limit below 1 is the server's cap, as 0 is; any sample seed is a seed.
    for limit in INT32:
        listed = s.game.ListLegalCommands(game_pb.ListLegalCommandsRequest(
            match_id=table.match_id, limit=limit, sample_seed=2**64 - 1), metadata=_metadata(me))
        assert 0 < len(listed.commands) <= 256
    plays_on(s, table, before)


def test_list_my_turns_refuses_every_token_but_a_players_and_takes_any_limit(stubs: Services) -> None:
    """A player token is ListMyTurns' only credential: a seat's (this match's), an operator's, a
    forged or foreign one is UNAUTHENTICATED; a player seated nowhere, or named by an odd id, gets
    an empty list; any limit is answered within the cap; and the match plays on."""
    s = stubs
    table = new_table(s)
    before = snapshot(s, table)
    call = s.game.ListMyTurns
    assert refusal(call, game_pb.ListMyTurnsRequest()) == (C.UNAUTHENTICATED, "no_token")
    for token in ("garbage", "a.b", "x" * 4000, *table.tokens, operator(), SIGNER.player_token("p1")[:-2] + "xx",
                  TokenSigner("another-secret").player_token("p1")):
        assert refusal(call, game_pb.ListMyTurnsRequest(), token) == (C.UNAUTHENTICATED, "bad_token"), token[:20]
    seated = s.game.CreateMatch(game_pb.CreateMatchRequest(game_id="grifters", seats=3, seed=3, seat_info=[
        envelope_pb2.SeatInfo(seat=1, player_id=odd) for odd in ODD_IDS[:1]]), metadata=_metadata(operator()))
    for odd in (odd for odd in ODD_IDS if len(SIGNER.player_token(odd)) < 8000):  # within the metadata's limit
        for limit in (*INT32, 0, 1):
            mine = call(game_pb.ListMyTurnsRequest(limit=limit), metadata=_metadata(SIGNER.player_token(odd)),
                        timeout=DEADLINE).matches
            assert len(mine) <= 100
            assert [m.match_id for m in mine] == ([seated.match_id] if odd == ODD_IDS[0] else []), odd[:20]
    plays_on(s, table, before)


def test_match_chat_refuses_odd_ids_tokens_texts_recipients_and_cursors_and_the_match_plays_on(
        stubs: Services) -> None:
    s = stubs
    table, other, np = new_table(s), new_table(s, "nostra_city", 3, seed=2), new_table(s, "nothing_personal", 3)
    me = table.tokens[0]
    before = snapshot(s, table)

    def send(token: str | None, match_id: str = table.match_id, **fields: Any) -> game_pb.SendChatRequest:
        return game_pb.SendChatRequest(**{"match_id": match_id, "text": "hi", "message_id": "m", **fields})

    for odd in ("", *ODD_IDS):
        expected = (C.INVALID_ARGUMENT, "no_match_id") if not odd else (C.NOT_FOUND, "unknown_match")
        assert refusal(s.game.ListChat, game_pb.ListChatRequest(match_id=odd)) == expected, odd[:20]
        assert refusal(s.game.StreamChat, game_pb.StreamChatRequest(match_id=odd, until_now=True),
                       stream=True) == expected
        assert refusal(s.game.SendChat, send(me, odd), me) == ((C.PERMISSION_DENIED, "wrong_match") if odd else expected)
        if odd:  # a cursor that is no message id
            assert refusal(s.game.ListChat, game_pb.ListChatRequest(match_id=table.match_id, after_id=odd)) == \
                (C.INVALID_ARGUMENT, "bad_after_id")
    forged = {
        "garbage": (C.UNAUTHENTICATED, "bad_token"), other.tokens[0]: (C.PERMISSION_DENIED, "wrong_match"),
        SIGNER.player_token("p1"): (C.UNAUTHENTICATED, "bad_token"), operator(): (C.UNAUTHENTICATED, "bad_token"),
        SIGNER.seat_token(table.match_id, 3): (C.PERMISSION_DENIED, "no_such_seat"),
    }
    for token, expected in forged.items():
        assert refusal(s.game.SendChat, send(token), token) == expected, token[:20]
        assert refusal(s.game.ListChat, game_pb.ListChatRequest(match_id=table.match_id), token) == expected
        assert refusal(s.game.StreamChat, game_pb.StreamChatRequest(match_id=table.match_id, until_now=True),
                       token, stream=True) == expected
    assert refusal(s.game.SendChat, send(None)) == (C.UNAUTHENTICATED, "no_token")
    for text, code in (("", "no_text"), (" \n ", "no_text"), ("é" * 501, "bad_text"), ("a\x00b", "bad_text"),
                       ("x" * 300_000, "bad_text"), ("\x1b]0;owned\x07", "bad_text"),
                       ("gg \u202ewp", "bad_text"), ("\u2067ltr", "bad_text")):  # reorders what follows it
        assert refusal(s.game.SendChat, send(me, text=text), me) == (C.INVALID_ARGUMENT, code)
    for message_id, code in (("", "no_message_id"), ("a\x00b", "bad_message_id"), ("x" * 300_000, "bad_message_id")):
        assert refusal(s.game.SendChat, send(me, message_id=message_id), me) == (C.INVALID_ARGUMENT, code)
    for to_seats in ([0], [3], [1, 1], *([n] for n in INT32), [1] * 300):
        assert refusal(s.game.SendChat, send(me, to_seats=to_seats), me) == (C.INVALID_ARGUMENT, "bad_to_seats")
    assert refusal(s.game.SendChat, send(np.tokens[0], np.match_id), np.tokens[0]) == \
        (C.FAILED_PRECONDITION, "chat_in_engine")
    # what a message may hold is the sender's to say: any printable text within its length
    for i, text in enumerate(("../../etc/passwd", "{tag}", "%s%n", "\u200f\ud7ff", "é" * 500)):
        assert answer(s.game.SendChat, send(table.tokens[1 + i % 2], text=text, message_id=f"odd-{i}"),
                      table.tokens[1 + i % 2]) in {(C.OK, ""), (C.RESOURCE_EXHAUSTED, "chat_too_fast")}
    for limit in INT32:  # below 1: the cap, as ListLegalCommands' limit
        assert len(s.game.ListChat(game_pb.ListChatRequest(match_id=table.match_id, limit=limit)).messages) <= 100
    ahead = "18446744073709551615-18446744073709551615"  # no message has it (a stream waited on it)
    assert refusal(s.game.ListChat, game_pb.ListChatRequest(match_id=table.match_id, after_id=ahead)) == \
        (C.INVALID_ARGUMENT, "bad_after_id")
    assert refusal(s.game.StreamChat, game_pb.StreamChatRequest(match_id=table.match_id, after_id=ahead),
                   stream=True) == (C.INVALID_ARGUMENT, "bad_after_id")
    plays_on(s, table, before)  # chat moves no version, and the match plays on


def test_create_match_refuses_odd_games_seats_options_and_seat_info(stubs: Services) -> None:
    s = stubs
    for game_id in ODD_IDS:
        assert refusal(s.game.CreateMatch, game_pb.CreateMatchRequest(game_id=game_id, seats=3)) == \
            (C.INVALID_ARGUMENT, "unknown_game")
    for seats in (*INT32, 0, 1, 1000):
        status, _rule = refusal(s.game.CreateMatch, game_pb.CreateMatchRequest(game_id="grifters", seats=seats))
        assert status is C.INVALID_ARGUMENT  # the game's own rule id (GR-S01)
    for options in ({"nope": "1"}, {"": ""}, {"a\x00": "b"}, {f"k{i}": "v" for i in range(10_000)}):
        assert refusal(s.game.CreateMatch, game_pb.CreateMatchRequest(game_id="grifters", seats=3,
                                                                      options=options)) == \
            (C.INVALID_ARGUMENT, "unknown_option")
    for game in s.game.ListGames(game_pb.ListGamesRequest()).games:
        for option in game.options:
            for bad in ("-1", "99999999999999999999", "nan", "1e309", "x" * 5000, "\x00"):
                status, _code = answer(s.game.CreateMatch, game_pb.CreateMatchRequest(
                    game_id=game.game_id, seats=game.min_players, options={option.key: bad}))
                assert status in (C.OK, C.INVALID_ARGUMENT), (game.game_id, option.key, bad)
    info = envelope_pb2.SeatInfo
    for seat_info, code in (
        ([info(seat=3)], "bad_seat_info"), ([info(seat=-1)], "bad_seat_info"),
        ([info(seat=0), info(seat=0)], "bad_seat_info"), ([info(seat=0, player_id="x" * 500)], "bad_seat_info"),
        ([info(seat=0, display_name="a\x00")], "bad_seat_info"),
        ([info(seat=0, display_name="\x1b[2JAdmin")], "bad_seat_info"),
        ([info(seat=1, display_name="gg \u202eVito")], "bad_seat_info"),
        ([info(seat=0, bot=True, policy="nope")], "unknown_policy"),
        ([info(seat=0, bot=True, policy="ismcts?iterations=999999999999")], "bad_policy_params"),
        ([info(seat=0, bot=True, policy="ismcts?seconds=inf")], "bad_policy_params"),
        ([info(seat=0, bot=True, policy="ismcts?iterations=nan")], "bad_policy_params"),
    ):
        assert refusal(s.game.CreateMatch, game_pb.CreateMatchRequest(game_id="grifters", seats=3,
                                                                      seat_info=seat_info), operator()) == \
            (C.INVALID_ARGUMENT, code), seat_info
    assert refusal(s.game.CreateMatch, game_pb.CreateMatchRequest(game_id="grifters", seats=3, request_id="r" * 257)) \
        == (C.INVALID_ARGUMENT, "bad_request_id")
    for token, expected in ((None, (C.UNAUTHENTICATED, "no_token")), ("garbage", (C.UNAUTHENTICATED, "bad_token")),
                            (SIGNER.player_token("p1"), (C.PERMISSION_DENIED, "operator_only")),
                            (SIGNER.operator_token(ttl_s=1, now=time.time() - 60), (C.UNAUTHENTICATED, "bad_token"))):
        assert refusal(s.game.CreateMatch, game_pb.CreateMatchRequest(game_id="grifters", seats=3, tournament_id="t"),
                       token) == expected
    assert refusal(s.game.CreateMatch, game_pb.CreateMatchRequest(
        game_id="grifters", seats=3, tournament_id="t\x00"), operator()) == (C.INVALID_ARGUMENT, "bad_tournament_id")
    # the same request id for another match: the first stands
    first = s.game.CreateMatch(game_pb.CreateMatchRequest(game_id="grifters", seats=3, request_id="same-0123456789abcdef"))
    assert refusal(s.game.CreateMatch, game_pb.CreateMatchRequest(game_id="grifters", seats=4, request_id="same-0123456789abcdef")) \
        == (C.ALREADY_EXISTS, "request_id_reused")
    assert s.game.GetView(game_pb.GetViewRequest(match_id=first.match_id)).version == first.version


def test_a_seat_policy_naming_a_parameter_twice_is_refused(stubs: Services) -> None:
    """`ismcts?iterations=1&iterations=100000` played 100,000 iterations while the seat's policy
    (and a tournament's entrant name, its standings' row) read 1 first: the last value won."""
    s = stubs
    twice = "ismcts?iterations=1&iterations=1000"
    seat = envelope_pb2.SeatInfo(seat=0, bot=True, policy=twice)
    assert refusal(s.game.CreateMatch, game_pb.CreateMatchRequest(game_id="grifters", seats=3, seat_info=[seat]),
                   operator()) == (C.INVALID_ARGUMENT, "bad_policy_params")
    assert refusal(s.tournaments.CreateTournament, tournament_pb.CreateTournamentRequest(
        name="t", entrants=[twice, "random", "random"], matches_per_game=1,
        games=[tournament_pb.TournamentGame(game_id="grifters")]), operator()) == \
        (C.INVALID_ARGUMENT, "bad_policy_params")


def _pack(type_url: str, value: bytes) -> any_pb2.Any:
    return any_pb2.Any(type_url=type_url, value=value)


def test_submit_command_refuses_an_any_of_another_type_or_of_bytes_that_do_not_parse(stubs: Services) -> None:
    s = stubs
    table = new_table(s)
    me, legal = asked(s, table)
    before = snapshot(s, table)
    right = legal.commands[0]
    for packed, code in (
        (_pack("", right.value), "wrong_command_type"),
        (_pack("type.googleapis.com/nope.Command", right.value), "wrong_command_type"),
        (_pack("type.googleapis.com/famiglia.nostra_city.v1.Command", right.value), "wrong_command_type"),
        (_pack("type.googleapis.com/famiglia.grifters.v1.Event", right.value), "wrong_command_type"),
        (_pack("type.googleapis.com/famiglia.v1.EchoRequest", b""), "wrong_command_type"),
        (_pack("x" * 100_000, right.value), "wrong_command_type"),
        (_pack(right.type_url + "x", right.value), "wrong_command_type"),
        (_pack(right.type_url, b"\xff\xff\xff"), "undecodable_command"),
        (_pack(right.type_url, b"\x0a\x02\xff\xfe"), "undecodable_command"),
        (_pack(right.type_url, b""), "empty_command"),
    ):
        assert refusal(s.game.SubmitCommand, game_pb.SubmitCommandRequest(
            match_id=table.match_id, command_id=f"c{len(packed.type_url)}-{packed.value[:3].hex()}", command=packed),
            me) == (C.INVALID_ARGUMENT, code), packed.type_url[:60]
    plays_on(s, table, before)


def _mutations(command: Message) -> Iterator[Message]:
    """`command` with one field set past what the game defines: strings no game uses (empty,
    10,000 characters), enum values no proto defines, int32 edges, a repeated field's items
    once more and three thousand times more."""
    for fd in command.DESCRIPTOR.fields:
        if fd.message_type is not None and not fd.is_repeated:
            if command.HasField(fd.name):
                for inner in _mutations(getattr(command, fd.name)):
                    out = type(command)()
                    out.CopyFrom(command)
                    getattr(out, fd.name).CopyFrom(inner)
                    yield out
            continue
        if fd.message_type is not None:
            continue
        values: tuple[Any, ...] = {
            FieldDescriptor.TYPE_STRING: ("nope", "", "x" * 10_000),
            FieldDescriptor.TYPE_ENUM: (999, -1),
            FieldDescriptor.TYPE_BOOL: (True,),
        }.get(fd.type, INT32 if fd.cpp_type in (FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_INT64)
              else (2**32 - 1,) if fd.cpp_type in (FieldDescriptor.CPPTYPE_UINT32, FieldDescriptor.CPPTYPE_UINT64)
              else ())
        for value in values:
            out = type(command)()
            out.CopyFrom(command)
            if fd.is_repeated:
                items = getattr(out, fd.name)
                present = list(items)
                items.append(value)
                yield out
                if present:
                    many = type(command)()
                    many.CopyFrom(command)
                    getattr(many, fd.name).extend(present * 3000)
                    yield many
            else:
                setattr(out, fd.name, value)
                yield out


@pytest.mark.parametrize("game_id", ["goodcritters", "grifters", "nostra_city", "nothing_personal"])
def test_commands_of_the_right_type_with_fields_out_of_range_are_refused_by_a_rule_or_taken(
        stubs: Services, game_id: str) -> None:
    """A few turns of each game: every listed command, mutated field by field, is answered with
    the game's rule id (or an INVALID_ARGUMENT of the service), or taken when it is still legal;
    a refused one leaves the match as it was."""
    s = stubs
    info = next(g for g in s.game.ListGames(game_pb.ListGamesRequest()).games if g.game_id == game_id)
    command_type = symbol_database.Default().GetSymbol(info.command_type)
    table = new_table(s, game_id, info.min_players, seed=7)
    tried = 0
    for _turn in range(examples(4, 40)):
        view = s.game.GetView(game_pb.GetViewRequest(match_id=table.match_id))
        if view.finished:
            break
        token, legal = asked(s, table)
        before = snapshot(s, table)
        taken = False
        for packed in legal.commands[:3]:
            for mutated in _mutations(command_type.FromString(packed.value)):
                tried += 1
                request = game_pb.SubmitCommandRequest(
                    match_id=table.match_id, command_id=f"m{tried}", expected_version=legal.version,
                    command=_pack(packed.type_url, mutated.SerializeToString()), omit_events=True)
                started = time.monotonic()
                status, _code = answer(s.game.SubmitCommand, request, token)
                assert time.monotonic() - started < 5, str(mutated)[:200]
                if status is C.OK:
                    taken = True
                    break
                assert status in (C.INVALID_ARGUMENT, C.FAILED_PRECONDITION), (status, str(mutated)[:200])
                assert snapshot(s, table) == before
            if taken:
                break
        if not taken:
            plays_on(s, table, before)
    assert tried >= 5


def test_a_command_id_reused_for_another_command_is_aborted_and_the_first_answer_stands(stubs: Services) -> None:
    s = stubs
    table = new_table(s)
    me, legal = asked(s, table)
    first = s.game.SubmitCommand(game_pb.SubmitCommandRequest(
        match_id=table.match_id, command_id="once", command=legal.commands[0]), metadata=_metadata(me))
    before = snapshot(s, table)
    _, now = asked(s, table)
    other = next(c for c in now.commands if c.value != legal.commands[0].value)
    assert refusal(s.game.SubmitCommand, game_pb.SubmitCommandRequest(
        match_id=table.match_id, command_id="once", command=other), me) == (C.ABORTED, "command_id_reused")
    again = s.game.SubmitCommand(game_pb.SubmitCommandRequest(
        match_id=table.match_id, command_id="once", command=legal.commands[0]), metadata=_metadata(me))
    assert again.duplicate and again.version == first.version
    plays_on(s, table, before)


def test_racing_submits_of_one_command_id_with_different_commands_take_exactly_one(stubs: Services) -> None:
    """Sixteen calls at once under one command id, with several different legal commands: one is
    taken, a call with the same command gets its answer (duplicate), every other is ABORTED."""
    from concurrent.futures import ThreadPoolExecutor

    s = stubs
    table = new_table(s, "nostra_city", 3, seed=4)
    token, legal = asked(s, table)
    commands = list(legal.commands[:4])
    assert len(commands) > 1

    def submit(i: int) -> tuple[grpc.StatusCode, str, bool, int]:
        command = commands[i % len(commands)]
        try:
            done = s.game.SubmitCommand(game_pb.SubmitCommandRequest(
                match_id=table.match_id, command_id="raced", command=command), metadata=_metadata(token), timeout=DEADLINE)
            return C.OK, command.value.hex(), done.duplicate, done.version
        except grpc.RpcError as exc:
            return exc.code(), error_code(exc), False, 0

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(submit, range(16)))
    taken = [a for a in answers if a[0] is C.OK]
    assert len([a for a in taken if not a[2]]) == 1 and len({(a[1], a[3]) for a in taken}) == 1, answers
    assert all(a[:2] == (C.ABORTED, "command_id_reused") for a in answers if a[0] is not C.OK), answers
    events = s.replay.ListMatchEvents(replay_pb.ListMatchEventsRequest(match_id=table.match_id, page_size=1000))
    assert events.last_seq == s.game.GetView(game_pb.GetViewRequest(match_id=table.match_id)).version == taken[0][3]


def test_submit_commands_refuses_hostile_chains_and_answers_what_it_took(stubs: Services) -> None:
    s = stubs
    table, other = new_table(s), new_table(s, seed=5)
    me, legal = asked(s, table)
    before = snapshot(s, table)

    def chain(*entries: game_pb.SeatCommand, **fields: Any) -> game_pb.SubmitCommandsRequest:
        return game_pb.SubmitCommandsRequest(match_id=fields.pop("match_id", table.match_id), commands=entries,
                                             **fields)

    entry = game_pb.SeatCommand(seat_token=me, command_id="e", command=legal.commands[0])
    assert refusal(s.game.SubmitCommands, chain()) == (C.INVALID_ARGUMENT, "no_commands")
    assert refusal(s.game.SubmitCommands, chain(*[entry] * 17)) == (C.INVALID_ARGUMENT, "too_many_commands")
    assert refusal(s.game.SubmitCommands, chain(*[entry] * 10_000)) == (C.INVALID_ARGUMENT, "too_many_commands")
    assert refusal(s.game.SubmitCommands, chain(entry, ask_next=[game_pb.NextSeat(seat_token=me)] * 17)) == \
        (C.INVALID_ARGUMENT, "too_many_seats")
    for odd in ("", *ODD_IDS[:4]):
        expected = (C.INVALID_ARGUMENT, "no_match_id") if not odd else (C.NOT_FOUND, "unknown_match")
        assert refusal(s.game.SubmitCommands, chain(entry, match_id=odd)) == expected
    for next_token, expected in (("x", (C.UNAUTHENTICATED, "bad_token")),
                                 (other.tokens[0], (C.PERMISSION_DENIED, "wrong_match")),
                                 (SIGNER.seat_token(table.match_id, 99), (C.PERMISSION_DENIED, "no_such_seat"))):
        assert refusal(s.game.SubmitCommands, chain(entry, ask_next=[game_pb.NextSeat(seat_token=next_token)])) == \
            expected
    # An entry's refusal travels in the answer, with its index, status and code; nothing is taken.
    for token, code in (("é", "bad_token"), (other.tokens[0], "wrong_match"), ("", "no_token")):
        reply = s.game.SubmitCommands(chain(game_pb.SeatCommand(seat_token=token, command_id="e",
                                                                command=legal.commands[0])))
        assert (reply.refusal.index, reply.refusal.code, len(reply.results)) == (0, code, 0)
        assert reply.refusal.status in (C.UNAUTHENTICATED.value[0], C.PERMISSION_DENIED.value[0])
    reply = s.game.SubmitCommands(chain(game_pb.SeatCommand(seat_token=me, command_id="e",
                                                            command=_pack(legal.commands[0].type_url, b"\xff"))))
    assert (reply.refusal.code, reply.refusal.status) == ("undecodable_command", C.INVALID_ARGUMENT.value[0])
    plays_on(s, table, before)


def test_cancel_match_is_an_operators_with_a_readable_reason_and_a_cancelled_match_stays_over(
        stubs: Services) -> None:
    s = stubs
    table = new_table(s)
    me, legal = asked(s, table)
    request = game_pb.CancelMatchRequest(match_id=table.match_id, reason="stuck")
    for token, expected in ((None, (C.UNAUTHENTICATED, "no_token")), ("garbage", (C.UNAUTHENTICATED, "bad_token")),
                            (me, (C.PERMISSION_DENIED, "operator_only")),
                            (SIGNER.player_token("p1"), (C.PERMISSION_DENIED, "operator_only")),
                            (SIGNER.operator_token(ttl_s=1, now=time.time() - 60), (C.UNAUTHENTICATED, "bad_token"))):
        assert refusal(s.game.CancelMatch, request, token) == expected
    for reason, code in (("", "no_reason"), ("x" * 501, "bad_reason"), ("a\x00", "bad_reason")):
        assert refusal(s.game.CancelMatch, game_pb.CancelMatchRequest(match_id=table.match_id, reason=reason),
                       operator()) == (C.INVALID_ARGUMENT, code)
    for request_id in ("r" * 257, "a\x00"):
        assert refusal(s.game.CancelMatch, game_pb.CancelMatchRequest(
            match_id=table.match_id, reason="stuck", request_id=request_id), operator()) == \
            (C.INVALID_ARGUMENT, "bad_request_id")
    for version in INT64:
        assert refusal(s.game.CancelMatch, game_pb.CancelMatchRequest(
            match_id=table.match_id, reason="stuck", expected_version=version), operator()) == \
            (C.ABORTED, "stale_version")
    plays_on(s, table, snapshot(s, table))
    done = s.game.CancelMatch(game_pb.CancelMatchRequest(match_id=table.match_id, reason="stuck", request_id="c1"),
                              metadata=_metadata(operator()))
    again = s.game.CancelMatch(game_pb.CancelMatchRequest(match_id=table.match_id, reason="stuck", request_id="c1"),
                               metadata=_metadata(operator()))
    assert again.duplicate and again.version == done.version
    over = (C.FAILED_PRECONDITION, "match_over")
    assert refusal(s.game.CancelMatch, game_pb.CancelMatchRequest(match_id=table.match_id, reason="again"),
                   operator()) == over
    assert refusal(s.game.SubmitCommand, game_pb.SubmitCommandRequest(
        match_id=table.match_id, command_id="late", command=legal.commands[0]), me) == over
    assert s.game.SubmitCommands(game_pb.SubmitCommandsRequest(match_id=table.match_id, commands=[
        game_pb.SeatCommand(seat_token=me, command_id="late", command=legal.commands[0])])).refusal.code == "match_over"
    assert not s.game.ListLegalCommands(game_pb.ListLegalCommandsRequest(match_id=table.match_id),
                                        metadata=_metadata(me)).commands
    view = s.game.GetView(game_pb.GetViewRequest(match_id=table.match_id))
    assert view.finished and view.cancelled and view.version == done.version
    events = s.replay.ListMatchEvents(replay_pb.ListMatchEventsRequest(match_id=table.match_id, page_size=1000))
    assert events.match_finished and events.last_seq == done.version


def test_a_request_past_the_receive_limit_is_resource_exhausted_and_the_services_answer_on(
        stubs: Services) -> None:
    """Every server takes requests up to 8 MiB (`build_server`), the replay service up to
    MESSAGE_MAX_BYTES (an export file and a margin, in which a bigger file is refused
    `file_too_large`): one more byte is gRPC's own RESOURCE_EXHAUSTED, before any handler
    runs (so it has no famiglia code). Nine MiB is an import's like any other."""
    from famiglia.replay.export import MESSAGE_MAX_BYTES

    s = stubs
    with pytest.raises(grpc.RpcError) as read:
        s.replay.ImportMatch(replay_pb.ImportMatchRequest(file=b"x" * (9 * 1024 * 1024)),
                             metadata=_metadata(operator()), timeout=DEADLINE)
    assert read.value.code() is not C.RESOURCE_EXHAUSTED  # read, and refused as no export
    for call, request in ((s.game.Echo, game_pb.EchoRequest(payload=b"x" * (8 * 1024 * 1024 + 1))),
                          (s.replay.ImportMatch, replay_pb.ImportMatchRequest(file=b"x" * (MESSAGE_MAX_BYTES + 1))),
                          (s.players.RegisterGuest, mm_pb.RegisterGuestRequest(display_name="x" * (9 * 1024 * 1024))),
                          (s.query.GetMatchSummary, query_pb.GetMatchSummaryRequest(match_id="x" * (9 * 1024 * 1024))),
                          (s.tournaments.GetTournament,
                           tournament_pb.GetTournamentRequest(tournament_id="x" * (9 * 1024 * 1024)))):
        with pytest.raises(grpc.RpcError) as caught:
            call(request, metadata=_metadata(operator()), timeout=DEADLINE)
        assert caught.value.code() is C.RESOURCE_EXHAUSTED
    table = new_table(s)
    plays_on(s, table, snapshot(s, table))
    assert s.players.RegisterGuest(mm_pb.RegisterGuestRequest(display_name="ann")).player_token
    assert s.tournaments.ListPolicies(tournament_pb.ListPoliciesRequest()).policies


# -- ReplayService --------------------------------------------------------------------------------
def _recorded_table(s: Services) -> Table:
    """A match with a pause between its commands, so that a recorded-pace replay waits."""
    table = new_table(s)
    for _ in range(3):
        time.sleep(0.02)
        token, legal = asked(s, table)
        s.game.SubmitCommand(game_pb.SubmitCommandRequest(match_id=table.match_id, command_id=f"p{legal.version}",
                                                          command=legal.commands[0]), metadata=_metadata(token))
    return table


def test_a_recorded_pace_replay_waits_at_most_max_gap_ms_whatever_the_speed(stubs: Services) -> None:
    """max_gap_ms is the longest wait between two events (docs/replay.md); it capped the recorded
    gap before the speed divided it, so `speed: 1e-9` waited for weeks at the first pause."""
    s = stubs
    table = _recorded_table(s)
    started = time.monotonic()
    steps = list(s.replay.StreamReplay(replay_pb.StreamReplayRequest(
        match_id=table.match_id, pace=replay_pb.PACE_RECORDED, speed=1e-9, max_gap_ms=20, without_views=True),
        timeout=DEADLINE))
    assert len(steps) >= 4 and time.monotonic() - started < 5


def test_stream_replay_refuses_a_speed_gap_pace_or_range_that_means_nothing(stubs: Services) -> None:
    """NaN and infinite speeds, a negative max_gap_ms and a Pace no proto defines streamed at
    once as if instant, and from_seq past to_seq streamed nothing, all answered OK."""
    s = stubs
    table = _recorded_table(s)
    before = snapshot(s, table)

    def replay(**fields: Any) -> replay_pb.StreamReplayRequest:
        return replay_pb.StreamReplayRequest(match_id=table.match_id, **fields)

    recorded = replay_pb.PACE_RECORDED
    for fields in (dict(pace=recorded, speed=math.nan), dict(pace=recorded, speed=math.inf),
                   dict(pace=recorded, speed=-math.inf), dict(pace=recorded, speed=-1.0),
                   dict(pace=recorded, max_gap_ms=-1), dict(from_seq=5, to_seq=2),
                   dict(from_seq=-1), dict(to_seq=-1), dict(from_seq=-(2**63))):
        assert refusal(s.replay.StreamReplay, replay(**fields), stream=True) == \
            (C.INVALID_ARGUMENT, "bad_range"), fields
    for pace in (99, -1):
        assert refusal(s.replay.StreamReplay, replay(pace=pace), stream=True) == (C.INVALID_ARGUMENT, "bad_pace")
    # past the end is an empty stream (a running match may get there), as is a range after the last event
    assert list(s.replay.StreamReplay(replay(from_seq=2**63 - 1), timeout=DEADLINE)) == []
    assert refusal(s.replay.StreamReplay, replay_pb.StreamReplayRequest(), stream=True) == \
        (C.INVALID_ARGUMENT, "no_match_id")
    plays_on(s, table, before)


def test_replay_service_refuses_odd_ids_tokens_and_page_sizes(stubs: Services) -> None:
    s = stubs
    table, other = new_table(s), new_table(s, seed=3)
    events = s.replay.ListMatchEvents(replay_pb.ListMatchEventsRequest(match_id=table.match_id)).events
    before = snapshot(s, table)
    for odd in ODD_IDS:
        unknown = (C.NOT_FOUND, "unknown_match")
        assert refusal(s.replay.GetStateAt, replay_pb.GetStateAtRequest(event_id=odd)) == (C.NOT_FOUND, "unknown_event")
        assert refusal(s.replay.GetStateAt, replay_pb.GetStateAtRequest(event_id=events[-1].event_id, match_id=odd)) \
            == (C.INVALID_ARGUMENT, "event_not_in_match")
        assert refusal(s.replay.StreamReplay, replay_pb.StreamReplayRequest(match_id=odd), stream=True) == unknown
        assert refusal(s.replay.StreamReplay, replay_pb.StreamReplayRequest(event_id=odd), stream=True) == \
            (C.NOT_FOUND, "unknown_event")
        assert refusal(s.replay.ListMatchEvents, replay_pb.ListMatchEventsRequest(match_id=odd)) == unknown
        assert refusal(s.replay.ListMatchEvents, replay_pb.ListMatchEventsRequest(
            match_id=table.match_id, page_token=odd)) == (C.INVALID_ARGUMENT, "bad_page_token")
        assert refusal(s.replay.ExportMatch, replay_pb.ExportMatchRequest(match_id=odd)) == unknown
        assert refusal(s.replay.VerifyMatch, replay_pb.VerifyMatchRequest(match_id=odd)) == unknown
    assert refusal(s.replay.GetStateAt, replay_pb.GetStateAtRequest()) == (C.INVALID_ARGUMENT, "no_event_id")
    assert refusal(s.replay.VerifyMatch, replay_pb.VerifyMatchRequest()) == (C.INVALID_ARGUMENT, "no_source")
    for size in (-1, -(2**31)):
        assert refusal(s.replay.ListMatchEvents, replay_pb.ListMatchEventsRequest(
            match_id=table.match_id, page_size=size)) == (C.INVALID_ARGUMENT, "bad_page_size")
    assert len(s.replay.ListMatchEvents(replay_pb.ListMatchEventsRequest(
        match_id=table.match_id, page_size=2**31 - 1)).events) == len(events)  # at most 1000 a page
    for token, expected in (("garbage", (C.UNAUTHENTICATED, "bad_token")),
                            (other.tokens[0], (C.PERMISSION_DENIED, "wrong_match")),
                            (SIGNER.seat_token(table.match_id, 3), (C.PERMISSION_DENIED, "no_such_seat")),
                            (SIGNER.seat_token(table.match_id, -1), (C.PERMISSION_DENIED, "no_such_seat"))):
        assert refusal(s.replay.GetStateAt, replay_pb.GetStateAtRequest(event_id=events[-1].event_id), token) == \
            expected
        assert refusal(s.replay.StreamReplay, replay_pb.StreamReplayRequest(match_id=table.match_id), token,
                       stream=True) == expected
        assert refusal(s.replay.ListMatchEvents, replay_pb.ListMatchEventsRequest(match_id=table.match_id), token) \
            == expected
    running = (C.PERMISSION_DENIED, "match_running")  # the full view (and so an export) waits for the end
    assert refusal(s.replay.GetStateAt, replay_pb.GetStateAtRequest(event_id=events[-1].event_id, full=True)) == running
    assert refusal(s.replay.ExportMatch, replay_pb.ExportMatchRequest(match_id=table.match_id)) == running
    # export takes a seat token (or none): an operator's is no seat's
    assert refusal(s.replay.ExportMatch, replay_pb.ExportMatchRequest(match_id=table.match_id), operator()) == \
        (C.UNAUTHENTICATED, "bad_token")
    assert refusal(s.replay.VerifyMatch, replay_pb.VerifyMatchRequest(match_id=table.match_id)) == running
    plays_on(s, table, before)


def _compat(game_id: str) -> replay_pb.MatchExport:
    data = gzip.decompress((ROOT / "tests/fixtures/compat" / f"c015bda-{game_id}.export.bin.gz").read_bytes())
    return replay_pb.MatchExport.FromString(data)


def _tampered(export: replay_pb.MatchExport) -> Iterator[tuple[str, replay_pb.MatchExport]]:
    """The export with one thing changed, as a forger or a broken disk would."""
    def change(label: str, edit: Callable[[replay_pb.MatchExport], object]) -> tuple[str, replay_pb.MatchExport]:
        out = replay_pb.MatchExport()
        out.CopyFrom(export)
        edit(out)
        return label, out

    yield change("seats", lambda e: setattr(e, "seats", -1))
    yield change("format", lambda e: setattr(e, "format_version", 2))
    yield change("game", lambda e: setattr(e, "game_id", "nostra_city"))
    yield change("setup_last_seq", lambda e: setattr(e, "setup_last_seq", 2**62))
    yield change("option", lambda e: e.options.__setitem__("nope", "1"))
    yield change("command seat", lambda e: setattr(e.commands[0], "seat", 99))
    yield change("command bytes", lambda e: setattr(e.commands[0], "command", b"\xff\xff"))
    yield change("3000 commands", lambda e: e.commands.extend([e.commands[0]] * 3000))
    yield change("3000 events", lambda e: e.events.extend([e.events[-1]] * 3000))
    yield change("half the events", lambda e: e.events.__delitem__(slice(len(e.events) // 2, None)))
    yield change("no match_created", lambda e: e.events.__delitem__(0))
    yield change("event seq", lambda e: setattr(e.events[3], "seq", -1))
    yield change("event match", lambda e: setattr(e.events[3], "match_id", "{other}"))
    yield change("event payload", lambda e: setattr(e.events[3], "payload", b"\xff\xff"))
    yield change("event payload type", lambda e: setattr(e.events[3], "payload_type", "famiglia.v1.EchoRequest"))
    yield change("event seat", lambda e: setattr(e.events[3], "seat", 2**31 - 1))
    yield change("event time", lambda e: setattr(e.events[3].timestamp, "seconds", 2**62))
    yield change("match id", lambda e: setattr(e, "match_id", "{x}"))
    yield change("seat info", lambda e: e.setup.seat_info.add(seat=77, player_id="x"))


def test_import_and_verify_answer_every_tampered_truncated_or_huge_export_and_what_is_stored_reads(
        stubs: Services) -> None:
    """A tampered file is refused (bad_export, unverified) or, with allow_unverified, stored:
    then every read of it answers (a stored match no service can read would be a corrupted store)."""
    s = stubs
    export = _compat("grifters")
    data = export.SerializeToString()
    as_json = json_format.MessageToJson(export).encode()
    for token, expected in ((None, (C.UNAUTHENTICATED, "no_token")), ("garbage", (C.UNAUTHENTICATED, "bad_token")),
                            (SIGNER.player_token("p1"), (C.PERMISSION_DENIED, "operator_only")),
                            (SIGNER.operator_token(ttl_s=1, now=time.time() - 60), (C.UNAUTHENTICATED, "bad_token"))):
        assert refusal(s.replay.ImportMatch, replay_pb.ImportMatchRequest(file=data), token) == expected
    for junk in (b"", b"{", b"\x00" * 100, b"{}", b"[]", b"null", b'{"formatVersion": 99}', b"x" * 7_000_000,
                 data[:1], data[:10], data[: len(data) // 2], data[:-1], as_json[: len(as_json) // 2]):
        assert refusal(s.replay.ImportMatch, replay_pb.ImportMatchRequest(file=junk, allow_unverified=True),
                       operator()) == (C.INVALID_ARGUMENT, "bad_export"), junk[:20]
        assert refusal(s.replay.VerifyMatch, replay_pb.VerifyMatchRequest(file=junk)) == \
            (C.INVALID_ARGUMENT, "bad_export")
    for new_id in ("{x}", "../a", "a\x00", "x" * 300, " ", "é" * 50):
        assert refusal(s.replay.ImportMatch, replay_pb.ImportMatchRequest(file=data, new_match_id=new_id),
                       operator()) == (C.INVALID_ARGUMENT, "bad_match_id"), new_id[:10]
    stored = []
    for label, forged in _tampered(export):
        file = forged.SerializeToString()
        status, code = answer(s.replay.VerifyMatch, replay_pb.VerifyMatchRequest(file=file))
        assert status in (C.OK, C.INVALID_ARGUMENT), (label, code)
        status, code = answer(s.replay.ImportMatch, replay_pb.ImportMatchRequest(file=file), operator())
        assert (status, code) in {(C.FAILED_PRECONDITION, "unverified"), (C.INVALID_ARGUMENT, "bad_export"),
                                  (C.INVALID_ARGUMENT, "bad_match_id")}, label
        new_id = "forged-" + label.replace(" ", "-")
        status, code = answer(s.replay.ImportMatch, replay_pb.ImportMatchRequest(
            file=file, new_match_id=new_id, allow_unverified=True), operator())
        assert status in (C.OK, C.INVALID_ARGUMENT), (label, code)
        if status is C.OK:
            stored.append(new_id)
    assert stored  # some forgeries are only found by replaying them, and stored unverified
    for match_id in stored:
        page = s.replay.ListMatchEvents(replay_pb.ListMatchEventsRequest(match_id=match_id, page_size=1000))
        for event in page.events[::5]:
            if event.event_id:
                answer(s.replay.GetStateAt, replay_pb.GetStateAtRequest(event_id=event.event_id, full=True))
        for call, request, stream in (
            (s.replay.StreamReplay, replay_pb.StreamReplayRequest(match_id=match_id, full=True), True),
            (s.replay.ExportMatch, replay_pb.ExportMatchRequest(match_id=match_id), False),
            (s.replay.ExportMatch, replay_pb.ExportMatchRequest(match_id=match_id, binary=True), False),
            (s.replay.VerifyMatch, replay_pb.VerifyMatchRequest(match_id=match_id), False),
            (s.game.GetView, game_pb.GetViewRequest(match_id=match_id), False),
            (s.game.StreamEvents, game_pb.StreamEventsRequest(match_id=match_id, until_now=True), True),
        ):
            answer(call, request, stream=stream)
    # and a clean import still goes through
    assert s.replay.ImportMatch(replay_pb.ImportMatchRequest(file=data, new_match_id="clean"),
                                metadata=_metadata(operator())).verification.ok
    # Accepted: a command's `command_type` and `text` are labels for people reading the file; the
    # match is built from its events (which are verified), and its export names the real type.
    labelled = replay_pb.MatchExport()
    labelled.CopyFrom(export)
    labelled.commands[0].command_type, labelled.commands[0].text = "famiglia.v1.EchoRequest", "{forged}"
    labelled.events[3].event_id = "{x}\x00"  # and event ids: an import gives every event a fresh one
    assert s.replay.ImportMatch(replay_pb.ImportMatchRequest(
        file=labelled.SerializeToString(), new_match_id="labelled"), metadata=_metadata(operator())).verification.ok
    again = replay_pb.MatchExport.FromString(s.replay.ExportMatch(replay_pb.ExportMatchRequest(
        match_id="labelled", binary=True)).file)
    assert again.commands[0].command_type == export.commands[0].command_type
    assert again.events[3].event_id not in (export.events[3].event_id, "{x}\x00")


# -- MatchmakingService and PlayerService ----------------------------------------------------------
def _guest(s: Services, name: str) -> tuple[str, str]:
    made = s.players.RegisterGuest(mm_pb.RegisterGuestRequest(display_name=name))
    return made.player_id, made.player_token


def test_matchmaking_refuses_odd_tickets_players_tokens_and_options_and_the_ticket_stays(stubs: Services) -> None:
    s = stubs
    ann, ann_token = _guest(s, "ann")
    bob, bob_token = _guest(s, "bob")
    _cy, cy_token = _guest(s, "cy")
    ticket = s.matchmaking.CreateTicket(mm_pb.CreateTicketRequest(game_id="nostra_city", party=[bob]),
                                        metadata=_metadata(ann_token))
    before = s.matchmaking.GetTicket(mm_pb.GetTicketRequest(ticket_id=ticket.ticket_id), metadata=_metadata(ann_token))
    for name in ("", "x" * 33, "a\x00b", "\n", "  "):
        assert refusal(s.players.RegisterGuest, mm_pb.RegisterGuestRequest(display_name=name)) == \
            (C.INVALID_ARGUMENT, "bad_display_name")
    assert refusal(s.players.RegisterGuest, mm_pb.RegisterGuestRequest(display_name="ann", request_id="r" * 129)) == \
        (C.INVALID_ARGUMENT, "bad_request_id")
    for token, expected in ((None, (C.UNAUTHENTICATED, "no_token")), ("garbage", (C.UNAUTHENTICATED, "bad_token")),
                            (SIGNER.seat_token("m1", 0), (C.UNAUTHENTICATED, "bad_token")),
                            (operator(), (C.UNAUTHENTICATED, "bad_token"))):
        assert refusal(s.matchmaking.CreateTicket, mm_pb.CreateTicketRequest(game_id="grifters"), token) == expected
        assert refusal(s.matchmaking.GetTicket, mm_pb.GetTicketRequest(ticket_id=ticket.ticket_id), token) == expected
        assert refusal(s.players.GetProfile, mm_pb.GetProfileRequest(), token) == expected
    for odd in ODD_IDS:
        unknown_ticket = (C.NOT_FOUND, "unknown_ticket")
        for call, request in ((s.matchmaking.GetTicket, mm_pb.GetTicketRequest(ticket_id=odd)),
                              (s.matchmaking.CancelTicket, mm_pb.CancelTicketRequest(ticket_id=odd)),
                              (s.matchmaking.AcceptPartyInvite, mm_pb.AcceptPartyInviteRequest(ticket_id=odd)),
                              (s.matchmaking.DeclinePartyInvite, mm_pb.DeclinePartyInviteRequest(ticket_id=odd))):
            assert refusal(call, request, ann_token) == unknown_ticket, (call, odd[:10])
        assert refusal(s.matchmaking.WatchTicket, mm_pb.WatchTicketRequest(ticket_id=odd), ann_token, stream=True) == \
            unknown_ticket
        assert refusal(s.players.GetProfile, mm_pb.GetProfileRequest(player_id=odd)) == (C.NOT_FOUND, "unknown_player")
        for call, request in ((s.matchmaking.ListInvites, mm_pb.ListInvitesRequest(game_id=odd)),
                              (s.matchmaking.CreateTicket, mm_pb.CreateTicketRequest(game_id=odd))):
            assert refusal(call, request, cy_token) == (C.INVALID_ARGUMENT, "unknown_game")
    # a forged player id: a token the server signed for nobody it registered, as it tells a guest
    # whose record expired (a valid token naming nobody any more)
    assert refusal(s.matchmaking.CreateTicket, mm_pb.CreateTicketRequest(game_id="grifters"),
                   SIGNER.player_token("{x}\x00")) == (C.UNAUTHENTICATED, "player_expired")
    # another player's ticket, and the creator answering its own invite
    for call, request in ((s.matchmaking.GetTicket, mm_pb.GetTicketRequest(ticket_id=ticket.ticket_id)),
                          (s.matchmaking.CancelTicket, mm_pb.CancelTicketRequest(ticket_id=ticket.ticket_id)),
                          (s.matchmaking.AcceptPartyInvite, mm_pb.AcceptPartyInviteRequest(ticket_id=ticket.ticket_id)),
                          (s.matchmaking.DeclinePartyInvite,
                           mm_pb.DeclinePartyInviteRequest(ticket_id=ticket.ticket_id))):
        assert refusal(call, request, cy_token) == (C.PERMISSION_DENIED, "not_your_ticket")
    assert refusal(s.matchmaking.WatchTicket, mm_pb.WatchTicketRequest(ticket_id=ticket.ticket_id), cy_token,
                   stream=True) == (C.PERMISSION_DENIED, "not_your_ticket")
    assert refusal(s.matchmaking.AcceptPartyInvite, mm_pb.AcceptPartyInviteRequest(ticket_id=ticket.ticket_id),
                   ann_token) == (C.PERMISSION_DENIED, "not_invited")
    for seat_counts in ([-1], [0], [2**31 - 1], list(range(10_000))):
        assert refusal(s.matchmaking.CreateTicket, mm_pb.CreateTicketRequest(
            game_id="grifters", seat_counts=seat_counts), cy_token) == (C.INVALID_ARGUMENT, "bad_seat_count")
    for options in ({"nope": "1"}, {"": ""}, {f"k{i}": "v" for i in range(5000)}):
        assert refusal(s.matchmaking.CreateTicket, mm_pb.CreateTicketRequest(game_id="grifters", options=options),
                       cy_token) == (C.INVALID_ARGUMENT, "unknown_option")
    for bad in ("nan", "-1", "x" * 5000):
        status, _rule = refusal(s.matchmaking.CreateTicket, mm_pb.CreateTicketRequest(
            game_id="grifters", options={"ringleaders": bad}), cy_token)
        assert status is C.INVALID_ARGUMENT
    for party, expected in ((["ghost"], (C.NOT_FOUND, "unknown_player")), ([""], (C.NOT_FOUND, "unknown_player")),
                            (["x"] * 5000, (C.NOT_FOUND, "unknown_player")),
                            ([f"p{i}" for i in range(5000)], (C.INVALID_ARGUMENT, "party_too_big"))):
        assert refusal(s.matchmaking.CreateTicket, mm_pb.CreateTicketRequest(game_id="grifters", party=party),
                       cy_token) == expected
    assert refusal(s.matchmaking.CreateTicket, mm_pb.CreateTicketRequest(game_id="grifters", request_id="r" * 129),
                   cy_token) == (C.INVALID_ARGUMENT, "bad_request_id")
    assert refusal(s.matchmaking.CreateTicket, mm_pb.CreateTicketRequest(game_id="nostra_city"), ann_token) == \
        (C.ALREADY_EXISTS, "ticket_open")
    after = s.matchmaking.GetTicket(mm_pb.GetTicketRequest(ticket_id=ticket.ticket_id), metadata=_metadata(ann_token))
    assert (after.state, list(after.party), list(after.awaiting)) == \
        (mm_pb.TICKET_PENDING_PARTY, list(before.party), [bob])
    # and the party plays on: bob accepts, the ticket queues
    accepted = s.matchmaking.AcceptPartyInvite(mm_pb.AcceptPartyInviteRequest(ticket_id=ticket.ticket_id),
                                               metadata=_metadata(bob_token))
    assert accepted.state == mm_pb.TICKET_SEARCHING and ann in accepted.party


def test_a_ticket_request_id_reused_for_another_ticket_is_already_exists(stubs: Services) -> None:
    """The same request id with other table sizes answered `duplicate: true` with the first
    ticket, for sizes the player no longer asked; CreateMatch and CreateTournament refuse that."""
    s = stubs
    _ann, token = _guest(s, "ann")
    first = s.matchmaking.CreateTicket(mm_pb.CreateTicketRequest(game_id="grifters", seat_counts=[3], request_id="r1"),
                                       metadata=_metadata(token))
    retry = s.matchmaking.CreateTicket(mm_pb.CreateTicketRequest(game_id="grifters", seat_counts=[3], request_id="r1"),
                                       metadata=_metadata(token))
    assert retry.duplicate and retry.ticket_id == first.ticket_id
    for changed in (dict(seat_counts=[4]), dict(seat_counts=[3, 4]),
                    dict(seat_counts=[3], options={"isk_tokens": "80"})):
        assert refusal(s.matchmaking.CreateTicket, mm_pb.CreateTicketRequest(
            game_id="grifters", request_id="r1", **changed), token) == (C.ALREADY_EXISTS, "request_id_reused")
    kept = s.matchmaking.GetTicket(mm_pb.GetTicketRequest(ticket_id=first.ticket_id), metadata=_metadata(token))
    assert (kept.state, list(kept.seat_counts)) == (mm_pb.TICKET_SEARCHING, [3])


def test_a_guest_request_id_reused_for_another_name_is_already_exists(stubs: Services) -> None:
    """Another display name under a request id answered with the first guest, token and all."""
    s = stubs
    first = s.players.RegisterGuest(mm_pb.RegisterGuestRequest(display_name="Vito", request_id="g1-0123456789abcdef"))
    retry = s.players.RegisterGuest(mm_pb.RegisterGuestRequest(display_name=" Vito ", request_id="g1-0123456789abcdef"))
    assert (retry.player_id, retry.player_token) == (first.player_id, first.player_token)
    assert refusal(s.players.RegisterGuest, mm_pb.RegisterGuestRequest(display_name="Sonny", request_id="g1-0123456789abcdef")) == \
        (C.ALREADY_EXISTS, "request_id_reused")
    assert s.players.GetProfile(mm_pb.GetProfileRequest(player_id=first.player_id)).display_name == "Vito"


# -- QueryService ---------------------------------------------------------------------------------
def test_query_service_refuses_odd_ids_pages_and_statuses(stubs: Services) -> None:
    s = stubs
    for size in (-1, -(2**31)):
        bad_size = (C.INVALID_ARGUMENT, "bad_page_size")
        assert refusal(s.query.ListMatches, query_pb.ListMatchesRequest(page_size=size)) == bad_size
        assert refusal(s.query.GetPlayerHistory, query_pb.GetPlayerHistoryRequest(player_id="p", page_size=size)) == \
            bad_size
        assert refusal(s.query.GetLeaderboard, query_pb.GetLeaderboardRequest(game_id="grifters", limit=size)) == \
            bad_size
    assert refusal(s.query.GetLeaderboard, query_pb.GetLeaderboardRequest(game_id="grifters", offset=-1))[0] is \
        C.INVALID_ARGUMENT
    for status in (99, -1):
        assert refusal(s.query.ListMatches, query_pb.ListMatchesRequest(status=status)) == \
            (C.INVALID_ARGUMENT, "bad_status")
    for odd in ODD_IDS:
        assert refusal(s.query.ListMatches, query_pb.ListMatchesRequest(page_token=odd)) == \
            (C.INVALID_ARGUMENT, "bad_page_token")
        assert refusal(s.query.GetMatchSummary, query_pb.GetMatchSummaryRequest(match_id=odd)) == \
            (C.NOT_FOUND, "unknown_match")
        assert refusal(s.query.GetPlayerHistory, query_pb.GetPlayerHistoryRequest(player_id=odd)) == \
            (C.NOT_FOUND, "unknown_player")
        assert refusal(s.query.GetTournamentStandings, query_pb.GetTournamentStandingsRequest(tournament_id=odd)) == \
            (C.NOT_FOUND, "unknown_tournament")
        assert refusal(s.query.ListMatches, query_pb.ListMatchesRequest(game_id=odd)) == \
            (C.INVALID_ARGUMENT, "unknown_game")
        # the other filters are only compared: an odd one matches nothing
        assert not s.query.ListMatches(query_pb.ListMatchesRequest(player_id=odd, tournament_id=odd),
                                       timeout=DEADLINE).matches
        answer(s.query.GetLeaderboard, query_pb.GetLeaderboardRequest(game_id=odd))
    for call, request, code in ((s.query.GetLeaderboard, query_pb.GetLeaderboardRequest(), "no_game_id"),
                                (s.query.GetPlayerHistory, query_pb.GetPlayerHistoryRequest(), "no_player_id"),
                                (s.query.GetTournamentStandings, query_pb.GetTournamentStandingsRequest(),
                                 "no_tournament_id")):
        assert refusal(call, request) == (C.INVALID_ARGUMENT, code)


# -- TournamentService ----------------------------------------------------------------------------
def test_tournaments_refuse_odd_names_games_entrants_and_numbers_and_a_tournament_stays(stubs: Services) -> None:
    s = stubs
    game = tournament_pb.TournamentGame
    base = dict(name="t", entrants=["random"] * 3, matches_per_game=1, games=[game(game_id="grifters")])

    def create(**fields: Any) -> tournament_pb.CreateTournamentRequest:
        return tournament_pb.CreateTournamentRequest(**{**base, **fields})

    made = s.tournaments.CreateTournament(create(request_id="t1"), metadata=_metadata(operator()))
    for token, expected in ((None, (C.UNAUTHENTICATED, "no_token")), ("garbage", (C.UNAUTHENTICATED, "bad_token")),
                            (SIGNER.player_token("p1"), (C.PERMISSION_DENIED, "operator_only")),
                            (SIGNER.operator_token(ttl_s=1, now=time.time() - 60), (C.UNAUTHENTICATED, "bad_token"))):
        assert refusal(s.tournaments.CreateTournament, create(), token) == expected
        assert refusal(s.tournaments.CancelTournament, tournament_pb.CancelTournamentRequest(
            tournament_id=made.tournament_id), token) == expected
    for fields, code in (
        (dict(name="x" * 100_000), "bad_name"), (dict(name="a\x00"), "bad_name"),
        (dict(games=[game(game_id="nope")]), "unknown_game"),
        (dict(games=[game(game_id="grifters", seat_counts=[-1])]), "bad_seats"),
        (dict(games=[game(game_id="grifters", seat_counts=[2**31 - 1])]), "bad_seats"),
        (dict(games=[game(game_id="grifters", seat_counts=[3] * 5000)]), "bad_seats"),
        (dict(games=[game(game_id="grifters", options={"nope": "1"})]), "unknown_option"),
        (dict(games=[game(game_id="grifters")] * 100), "too_many_games"),
        (dict(entrants=["nope"]), "unknown_policy"), (dict(entrants=["random"] * 100_000), "too_many_entrants"),
        (dict(entrants=["ismcts?iterations=1000000000000"]), "bad_policy_params"),
        (dict(entrants=["ismcts?seconds=inf"]), "bad_policy_params"),
        (dict(entrants=["random?x=1"]), "bad_policy_params"),
        (dict(matches_per_game=-1), "bad_matches_per_game"), (dict(matches_per_game=2**31 - 1), "bad_matches_per_game"),
        (dict(round_robin=True, rounds=2**31 - 1), "bad_rounds"), (dict(round_robin=True, rounds=-1), "bad_rounds"),
        (dict(concurrency=-1), "bad_concurrency"), (dict(concurrency=2**31 - 1), "bad_concurrency"),
        (dict(deadline_seconds=math.nan), "bad_deadline"), (dict(deadline_seconds=-1.0), "bad_deadline"),
        (dict(deadline_seconds=math.inf), "bad_deadline"),
        (dict(request_id="t1", matches_per_game=2), "request_id_reused"),
    ):
        _status, got = refusal(s.tournaments.CreateTournament, create(**fields), operator())
        assert got == code, (fields if len(str(fields)) < 200 else str(fields)[:200], got)
    for odd in ODD_IDS:
        unknown = (C.NOT_FOUND, "unknown_tournament")
        assert refusal(s.tournaments.GetTournament, tournament_pb.GetTournamentRequest(
            tournament_id=odd, include_matches=True)) == unknown
        assert refusal(s.tournaments.CancelTournament, tournament_pb.CancelTournamentRequest(tournament_id=odd),
                       operator()) == unknown
    for limit in INT32:  # below 1: the default page (20), above the cap: the cap
        assert s.tournaments.ListTournaments(tournament_pb.ListTournamentsRequest(limit=limit), timeout=DEADLINE).tournaments
    kept = s.tournaments.GetTournament(tournament_pb.GetTournamentRequest(tournament_id=made.tournament_id))
    assert (kept.status, kept.planned, list(kept.entrants)) == (made.status, made.planned, list(made.entrants))
    cancelled = s.tournaments.CancelTournament(tournament_pb.CancelTournamentRequest(tournament_id=made.tournament_id),
                                               metadata=_metadata(operator()))
    assert cancelled.status == tournament_pb.TOURNAMENT_CANCELLED


# -- the randomized variant (make soak) -----------------------------------------------------------
_SERVICES = {"GameService": "game", "ReplayService": "replay", "QueryService": "query", "PlayerService": "players",
             "MatchmakingService": "matchmaking", "TournamentService": "tournaments"}


def _random_request(message: Message, rng: random.Random, table: Table, depth: int = 0) -> None:
    """Fill `message` at random: hostile strings and the live table's own ids, edge numbers,
    enum values defined or not, repeated fields from empty to long."""
    for fd in message.DESCRIPTOR.fields:
        if rng.random() < 0.4:
            continue
        count = rng.choice((1, 1, 2, 17, 300)) if fd.is_repeated else 1
        for _ in range(count):
            if fd.message_type is not None:
                if depth > 2 or fd.message_type.GetOptions().map_entry:
                    if fd.message_type.GetOptions().map_entry:
                        key = rng.choice(("nope", "seats", "", "{x}"))
                        getattr(message, fd.name)[key] = rng.choice(("1", "", "é"))
                    break
                if fd.message_type.full_name == "google.protobuf.Any":
                    value = _pack(rng.choice(("", "type.googleapis.com/famiglia.grifters.v1.Command", "x")),
                                  rng.randbytes(rng.choice((0, 3, 40))))
                else:
                    value = symbol_database.Default().GetSymbol(fd.message_type.full_name)()
                    _random_request(value, rng, table, depth + 1)
                (getattr(message, fd.name).add().CopyFrom(value) if fd.is_repeated
                 else getattr(message, fd.name).CopyFrom(value))
                continue
            if fd.type == FieldDescriptor.TYPE_STRING:
                value = rng.choice((*ODD_IDS[:-1], "", table.match_id, *table.tokens, "grifters", "random"))
            elif fd.type == FieldDescriptor.TYPE_BYTES:
                value = rng.randbytes(rng.choice((0, 10, 1000)))
            elif fd.type == FieldDescriptor.TYPE_BOOL:
                value = rng.random() < 0.5
            elif fd.type == FieldDescriptor.TYPE_ENUM:
                value = rng.choice((*[v.number for v in fd.enum_type.values], 99, -1))
            elif fd.cpp_type in (FieldDescriptor.CPPTYPE_DOUBLE, FieldDescriptor.CPPTYPE_FLOAT):
                value = rng.choice((0.0, -1.0, 1e-300, 1e300, math.nan, math.inf, 2.0))
            elif fd.cpp_type in (FieldDescriptor.CPPTYPE_UINT32, FieldDescriptor.CPPTYPE_UINT64):
                value = rng.choice((0, 1, 2**32 - 1 if fd.cpp_type == FieldDescriptor.CPPTYPE_UINT32 else 2**64 - 1))
            elif fd.cpp_type == FieldDescriptor.CPPTYPE_INT32:
                value = rng.choice((*INT32, 0, 1, 3))
            else:
                value = rng.choice((*INT64, 0, 1, 3))
            if fd.is_repeated:
                getattr(message, fd.name).append(value)
            else:
                setattr(message, fd.name, value)


@pytest.mark.soak
@pytest.mark.skipif(not SOAK, reason="soak profile only (make soak)")
def test_random_requests_to_every_rpc_are_answered_deliberately(stubs: Services) -> None:
    """Every method of every service, with requests filled at random from the hostile values
    above and a token from the forged ones, many times: OK or a deliberate refusal, in time."""
    from google.protobuf import descriptor_pool

    s = stubs
    table = new_table(s)
    tokens = (None, "garbage", *table.tokens, SIGNER.player_token("p1"), operator(),
              SIGNER.seat_token(table.match_id, 99))
    rng = random.Random(2026)
    for _ in range(examples(1, 300)):
        for service, attribute in _SERVICES.items():
            stub = getattr(s, attribute)
            for method in descriptor_pool.Default().FindServiceByName(f"famiglia.v1.{service}").methods:
                request = symbol_database.Default().GetSymbol(method.input_type.full_name)()
                _random_request(request, rng, table)
                if method.server_streaming and hasattr(request, "until_now"):
                    request.until_now = True  # a follower waits for the match by design
                if method.name == "WatchTicket" or (method.name == "StreamReplay" and request.pace == 2):
                    continue  # these follow or pace a real ticket/match by design
                started = time.monotonic()
                answer(getattr(stub, method.name), request, rng.choice(tokens), stream=method.server_streaming)
                assert time.monotonic() - started < 10, method.full_name
