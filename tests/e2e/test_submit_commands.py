"""SubmitCommands over real gRPC and a real redis-server: several seats' commands in one call
are taken exactly as that many SubmitCommand calls in turn (each at the version the one
before left, each deduplicated on its own), the first refusal ends the chain with its
status and code, and each answer shows only its own seat's events."""

from __future__ import annotations

import random
from collections.abc import Iterator

import grpc
import pytest

from famiglia.client.game_client import GameClient
from famiglia.engine.registry import default_registry
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil.errors import error_code
from famiglia.v1 import game_service_pb2 as pb

REGISTRY = default_registry()
pytestmark = pytest.mark.skipif("goodcritters" not in REGISTRY, reason="GoodCritters not registered")


@pytest.fixture()
def client(command_address: str) -> Iterator[GameClient]:
    c = GameClient(command_address)
    yield c
    c.close()


@pytest.fixture()
def store(redis_url: str) -> Iterator[RedisEventStore]:
    s = RedisEventStore.connect(redis_url)
    yield s
    s.close()


def _asked(client: GameClient, match_id: str, tokens: list[str]) -> tuple[int, list[int]]:
    """The version and the seats asked then (a secret step asks each seat in its own view)."""
    views = [client.seat(match_id, t).view() for t in tokens]
    assert len({v.version for v in views}) == 1
    return views[0].version, [s for s, v in enumerate(views) if any(p.seat == s for p in v.to_act)]


def _simultaneous(client: GameClient, seats: int = 5, seed: int = 4) -> tuple[str, list[str], int, list[int]]:
    """A GoodCritters match played at random up to a step where three seats or more are asked
    at once: (match id, tokens, version, the seats asked)."""
    match = client.create_match("goodcritters", seats, seed=seed)
    rng = random.Random(seed)
    for _ in range(200):
        version, asked = _asked(client, match.match_id, match.seat_tokens)
        if len(asked) >= 3:
            return match.match_id, match.seat_tokens, version, asked
        seat = client.seat(match.match_id, match.seat_tokens[asked[0]])
        legal = seat.legal_commands(16)
        seat.submit(rng.choice(list(legal.commands)), expected_version=version, omit_events=True)
    raise AssertionError("no simultaneous step within 200 commands")


def _first_legal(client: GameClient, match_id: str, token: str):
    return client.seat(match_id, token).legal_commands(1).commands[0]


def test_a_simultaneous_choice_in_one_call_is_taken_in_order_each_at_the_version_before(
        client: GameClient, store: RedisEventStore) -> None:
    match_id, tokens, version, asked = _simultaneous(client)
    chain = [(tokens[s], _first_legal(client, match_id, tokens[s]), f"c:{{version}}:{s}") for s in asked]
    reply = client.submit_commands(match_id, chain, expected_version=version, omit_events=True)
    assert not reply.HasField("refusal")
    assert len(reply.results) == len(asked)
    at, envelopes = version, store.read(match_id, after=version)
    for seat, result in zip(asked, reply.results, strict=True):
        assert not result.duplicate and result.version > at and not result.events
        mine = [e for e in envelopes if at < e.seq <= result.version]
        assert {e.command_id for e in mine} == {f"c:{at}:{seat}"}  # "{version}": the version it went in at
        assert {e.seat for e in mine} == {seat}
        at = result.version
    assert store.version(match_id) == at

    # The same call again (a retried task): every command a duplicate, answered as the first time.
    again = client.submit_commands(match_id, chain, expected_version=version, omit_events=True)
    assert [(r.version, r.duplicate) for r in again.results] == [(r.version, True) for r in reply.results]
    assert not again.HasField("refusal") and store.version(match_id) == at


def test_each_answer_shows_only_its_own_seats_events(client: GameClient) -> None:
    match_id, tokens, version, asked = _simultaneous(client, seed=6)
    chain = [(tokens[s], _first_legal(client, match_id, tokens[s]), f"e:{{version}}:{s}") for s in asked]
    reply = client.submit_commands(match_id, chain, expected_version=version)
    at = version
    for seat, result in zip(asked, reply.results, strict=True):
        streamed = [r.event for r in client.seat(match_id, tokens[seat]).stream(at, until_now=True)
                    if r.HasField("event") and r.event.seq <= result.version]
        assert list(result.events) == streamed and streamed  # what that seat's own stream shows, no more
        at = result.version


def test_a_stale_first_version_takes_nothing(client: GameClient, store: RedisEventStore) -> None:
    match_id, tokens, version, asked = _simultaneous(client)
    chain = [(tokens[s], _first_legal(client, match_id, tokens[s]), f"s:{s}") for s in asked]
    reply = client.submit_commands(match_id, chain, expected_version=version - 1)
    assert len(reply.results) == 0
    assert (reply.refusal.index, reply.refusal.status, reply.refusal.code) == (
        0, grpc.StatusCode.ABORTED.value[0], "stale_version")
    assert store.version(match_id) == version


def test_the_first_refusal_ends_the_chain_and_what_came_before_stays(client: GameClient,
                                                                       store: RedisEventStore) -> None:
    match_id, tokens, version, asked = _simultaneous(client)
    first, second = asked[0], asked[1]
    command = _first_legal(client, match_id, tokens[first])
    chain = [(tokens[first], command, "r:1"),
             (tokens[first], command, "r:2"),  # the same seat again: it has chosen already
             (tokens[second], _first_legal(client, match_id, tokens[second]), "r:3")]
    reply = client.submit_commands(match_id, chain, expected_version=version)
    assert len(reply.results) == 1
    refusal = reply.refusal
    assert refusal.index == 1 and refusal.status == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    assert refusal.code.startswith("GC-") and refusal.message
    assert store.version(match_id) == reply.results[0].version  # the third was not tried
    assert {e.command_id for e in store.read(match_id, after=version)} == {"r:1"}


@pytest.mark.parametrize("token,status,code", [
    ("not-a-token", grpc.StatusCode.UNAUTHENTICATED, "bad_token"),
    ("", grpc.StatusCode.UNAUTHENTICATED, "no_token"),
    ("other-match", grpc.StatusCode.PERMISSION_DENIED, "wrong_match"),
])
def test_an_entry_with_a_bad_seat_token_is_refused_there(client: GameClient, store: RedisEventStore,
                                                         token: str, status: grpc.StatusCode, code: str) -> None:
    match_id, tokens, version, asked = _simultaneous(client)
    if token == "other-match":
        token = client.create_match("goodcritters", 4, seed=1).seat_tokens[asked[1]]
    chain = [(tokens[asked[0]], _first_legal(client, match_id, tokens[asked[0]]), "t:1"),
             (token, _first_legal(client, match_id, tokens[asked[1]]), "t:2")]
    reply = client.submit_commands(match_id, chain, expected_version=version)
    assert len(reply.results) == 1
    assert (reply.refusal.index, reply.refusal.status, reply.refusal.code) == (1, status.value[0], code)
    assert store.version(match_id) == reply.results[0].version


def test_errors_of_the_whole_call_are_statuses_and_take_nothing(client: GameClient, store: RedisEventStore) -> None:
    match_id, tokens, version, asked = _simultaneous(client)
    command = _first_legal(client, match_id, tokens[asked[0]])

    def refused(request: pb.SubmitCommandsRequest) -> tuple[grpc.StatusCode, str]:
        with pytest.raises(grpc.RpcError) as caught:
            client.stub.SubmitCommands(request, timeout=10)
        return caught.value.code(), error_code(caught.value)

    one = pb.SeatCommand(seat_token=tokens[asked[0]], command_id="w:1", command=command)
    assert refused(pb.SubmitCommandsRequest(match_id=match_id)) == (grpc.StatusCode.INVALID_ARGUMENT,
                                                                     "no_commands")
    assert refused(pb.SubmitCommandsRequest(match_id=match_id, commands=[one] * 17)) == (
        grpc.StatusCode.INVALID_ARGUMENT, "too_many_commands")
    assert refused(pb.SubmitCommandsRequest(match_id="m-nope", commands=[one])) == (
        grpc.StatusCode.NOT_FOUND, "unknown_match")
    empty = pb.SeatCommand(seat_token=tokens[asked[1]], command_id="w:2")
    assert refused(pb.SubmitCommandsRequest(match_id=match_id, commands=[one, empty])) == (
        grpc.StatusCode.INVALID_ARGUMENT, "no_command")
    assert store.version(match_id) == version


def test_without_an_expected_version_the_first_goes_in_at_the_versions_its_id_names(
        client: GameClient, store: RedisEventStore) -> None:
    match_id, tokens, version, asked = _simultaneous(client)
    chain = [(tokens[s], _first_legal(client, match_id, tokens[s]), f"n:{{version}}:{s}")
             for s in asked[:2]]
    reply = client.submit_commands(match_id, chain)
    assert len(reply.results) == 2 and not reply.HasField("refusal")
    ids = [e.command_id for e in store.read(match_id, after=version)]
    assert ids[0] == f"n:{version}:{asked[0]}" and ids[-1] == f"n:{reply.results[0].version}:{asked[1]}"


# -- ask_next: the seats the caller plays next ---------------------------------------------


def _next_as_reads(client: GameClient, match_id: str, tokens: list[str], seats: list[int], limit: int):
    """What GetView and ListLegalCommands answer each of `seats` now, with its own token."""
    out = {}
    for s in seats:
        seat = client.seat(match_id, tokens[s])
        view, legal = seat.view(), seat.legal_commands(limit)
        out[s] = (view.view.value, [c.SerializeToString() for c in legal.commands], legal.complete)
    return out


def test_ask_next_answers_each_asked_seat_exactly_what_its_own_reads_would(client: GameClient) -> None:
    match_id, tokens, version, asked = _simultaneous(client)
    first, rest = asked[0], asked[1:]
    every = list(range(len(tokens)))
    reply = client.submit_commands(match_id, [(tokens[first], _first_legal(client, match_id, tokens[first]),
                                               "n:{version}")], expected_version=version, omit_events=True,
                                   ask_next=[(tokens[s], True, 8) for s in every])
    assert not reply.HasField("refusal") and len(reply.results) == 1
    assert reply.next_version == reply.results[0].version
    answered = [n.seat for n in reply.next]
    assert set(answered) == set(rest)  # the seat that just chose is no longer asked; nobody else is
    reads = _next_as_reads(client, match_id, tokens, answered, 8)
    for n in reply.next:
        view_bytes, legal, complete = reads[n.seat]
        assert n.view.value == view_bytes  # its own view: hidden information stays hidden
        assert [c.SerializeToString() for c in n.legal] == legal and n.complete == complete
        assert len(n.legal) <= 8


def test_ask_next_without_view_and_without_commands(client: GameClient) -> None:
    match_id, tokens, version, asked = _simultaneous(client)
    reply = client.submit_commands(match_id, [], expected_version=version,
                                   ask_next=[(tokens[s], False, 0) for s in asked])
    assert not reply.results and reply.next_version == version
    assert [n.seat for n in reply.next] == sorted(asked, key=[n.seat for n in reply.next].index)
    assert {n.seat for n in reply.next} == set(asked)
    for n in reply.next:
        assert not n.HasField("view") and n.legal

    # Asking at a version the match has left is stale, as a submit there would be.
    with pytest.raises(grpc.RpcError) as err:
        client.submit_commands(match_id, [], expected_version=version - 1, ask_next=[(tokens[0], False, 0)])
    assert err.value.code() == grpc.StatusCode.ABORTED and error_code(err.value) == "stale_version"


def test_ask_next_is_empty_after_a_refusal_or_a_chain_the_match_has_moved_past(client: GameClient) -> None:
    match_id, tokens, version, asked = _simultaneous(client)
    ask = [(tokens[s], False, 0) for s in asked]
    a, b = asked[0], asked[1]
    cmd_a = _first_legal(client, match_id, tokens[a])
    reply = client.submit_commands(match_id, [(tokens[a], cmd_a, "m:{version}")], expected_version=version,
                                   ask_next=ask)
    assert reply.next
    moved = client.submit_commands(match_id, [(tokens[b], _first_legal(client, match_id, tokens[b]),
                                               "m:{version}")], expected_version=reply.results[0].version)
    assert not moved.HasField("refusal")
    # The first call again: a duplicate, answered as before, but the match is past it.
    again = client.submit_commands(match_id, [(tokens[a], cmd_a, "m:{version}")], expected_version=version,
                                   ask_next=ask)
    assert again.results[0].duplicate and not again.next and again.next_version == 0
    # A refused chain (a stale first version) asks nothing either.
    stale = client.submit_commands(match_id, [(tokens[a], cmd_a, "x:{version}")], expected_version=version,
                                   ask_next=ask)
    assert stale.HasField("refusal") and not stale.next


def test_ask_next_checks_every_token_before_taking_a_command(client: GameClient, store: RedisEventStore) -> None:
    match_id, tokens, version, asked = _simultaneous(client)
    other = client.create_match("goodcritters", 5, seed=99)
    s = asked[0]
    for bad, code in (("", "no_token"), ("nonsense", "bad_token"), (other.seat_tokens[0], "wrong_match")):
        with pytest.raises(grpc.RpcError) as err:
            client.submit_commands(match_id, [(tokens[s], _first_legal(client, match_id, tokens[s]), "t:{version}")],
                                   expected_version=version, ask_next=[(tokens[s], False, 0), (bad, False, 0)])
        assert error_code(err.value) == code
    assert store.version(match_id) == version  # nothing was taken
    with pytest.raises(grpc.RpcError) as err:
        client.submit_commands(match_id, [], ask_next=[(tokens[0], False, 0)] * 17)
    assert error_code(err.value) == "too_many_seats"
