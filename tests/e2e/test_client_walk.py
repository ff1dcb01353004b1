"""A client developer's walk through each game, over real gRPC.

One person's seat and bots in the others, as a mobile app meets them: the command service as
its own process (restarted mid-match), the real bots dispatcher and a real Celery worker, the
replay service. The person reads the view and the legal commands, renders and plays them to
the end, follows the match on StreamEvents (dropped and resumed), and then the finished match
is replayed from several event ids: each seat's replay must show what that seat saw in play.
One match a game in the quick profile (`make test`), three and ten times the checks under soak.
"""

from __future__ import annotations

import random
import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import grpc
import pytest

from famiglia.bots.games import playable_registry
from famiglia.client import SeatClient
from famiglia.grpcutil.errors import error_code
from famiglia.localstack.redis_server import RedisServer
from famiglia.v1 import envelope_pb2
from famiglia.v1 import game_service_pb2 as pb
from famiglia.v1 import replay_service_pb2 as rpb

from ..profile import examples
from .conftest import WalkStack

pytestmark = [pytest.mark.redis, pytest.mark.xdist_group("client_walk")]

REGISTRY = playable_registry()
PERSON = 0
# The labels each game's to_act uses (README, "Playing a match as a client").
LABELS = {
    "goodcritters": {"assign_loot", "choose_action", "threat_turn"},
    "grifters": {"play", "opponent", "keep", "abduct", "kidnap", "hit", "job_swap", "night", "partner", "copy",
                 "second_caper"},
    "nostra_city": {"business", "consigliere", "primo_capo", "meeting", "trial", "keep", "distribute", "rage"},
    "nothing_personal": {"setup", "action", "commission", "buy", "invite", "vacancy", "window", "blackmail",
                         "ruling"},
}


@pytest.fixture(scope="module")
def walk(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WalkStack]:
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    stack = WalkStack(redis_server.url, tmp_path_factory.mktemp("walk"))
    yield stack
    stack.close()


def _retrying(call, *args, **kwargs):  # type: ignore[no-untyped-def]
    """A call retried while the command service restarts (UNAVAILABLE), as a client must."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return call(*args, **kwargs)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _readable(exc: grpc.RpcError) -> None:
    """What a client shows of a refusal: a stable code and a message in words."""
    code, message = error_code(exc), exc.details() or ""
    assert code, f"{exc.code()} without a famiglia-code: {message!r}"
    assert message and "Traceback" not in message and len(message) < 1000, message


@dataclass
class Seen:
    """What one seat saw at one version during play."""

    seat: int
    version: int
    view: bytes
    to_act: list[tuple[int, int, str]]
    at_ms: int
    """When the view had come back: an event of this seat made before then but written after
    `version` was a held answer then (NP-H9). The seat sees that in its own view, while the
    stream, and so the replay, has it only from the slot it is written to later."""


@dataclass
class Follower:
    """StreamEvents as a mobile client reads it: the stream is dropped every few events and
    opened again from the last version received; UNAVAILABLE (a restart) resumes too."""

    seat: SeatClient
    drop_every: int
    events: list[pb.SeatEvent] = field(default_factory=list)
    drops: int = 0
    finished: bool = False
    error: BaseException | None = None

    def run(self) -> None:
        version, deadline = 0, time.monotonic() + 120
        try:
            while not self.finished:
                stream = self.seat.stream(version)
                taken = 0
                try:
                    for reply in stream:
                        deadline = time.monotonic() + 120
                        assert reply.version >= version, "a stream went back"
                        version = reply.version
                        if reply.HasField("event"):
                            self.events.append(reply.event)
                            taken += 1
                        if reply.finished:
                            self.finished = True
                            break
                        if taken == self.drop_every:
                            self.drops += 1
                            stream.cancel()
                            break
                except grpc.RpcError as exc:
                    if exc.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                        raise
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            self.error = exc


def _to_act(pending) -> list[tuple[int, int, str]]:  # type: ignore[no-untyped-def]
    return sorted((p.seat, p.kind, p.label) for p in pending)


def _content(packed) -> bytes:  # type: ignore[no-untyped-def]
    """A packed View or Event, compared by content (a map's order on the wire is not part of it)."""
    name = packed.type_url.split("/")[-1]
    info = REGISTRY.get(name.split(".")[1]).info
    kind = info.view_type if name.endswith(".View") else info.event_type
    return kind.FromString(packed.value).SerializeToString(deterministic=True)


def _seat_event(e: pb.SeatEvent) -> tuple:  # type: ignore[type-arg]
    return e.seq, e.event_id, e.type, e.seat, e.command_id, e.timestamp_ms, e.text, _content(e.event)


def _replay_step(s: rpb.ReplayStep) -> tuple:  # type: ignore[type-arg]
    return s.seq, s.event_id, s.type, s.seat, s.command_id, s.timestamp_ms, s.event_text, _content(s.event)


def _look(seats: list[SeatClient], seen: list[Seen]) -> None:
    """Every seat's view now, and the spectator's."""
    for client in seats:
        view = _retrying(client.view)
        assert view.seat == (-1 if client.token is None else seats.index(client))
        seen.append(Seen(view.seat, view.version, _content(view.view), _to_act(view.to_act), int(time.time() * 1000)))


RULE_CODE = re.compile(r"^(GC|GR|NC|NP)-[A-Z]+[0-9]+$")


def _out_of_turn_is_refused(person: SeatClient, game_id: str, command, version: int) -> None:  # type: ignore[no-untyped-def]
    """A command while the seat is not asked and lists nothing: a rule's refusal, said in words."""
    try:
        reply = person.submit(command, command_id=uuid.uuid4().hex, expected_version=version)
    except grpc.RpcError as exc:
        _readable(exc)
        if exc.code() == grpc.StatusCode.ABORTED:
            assert error_code(exc) == "stale_version"
            return
        assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION, (exc.code(), exc.details())
        assert RULE_CODE.match(error_code(exc)), f"{game_id}: {error_code(exc)!r} is not a rule id"
        return
    raise AssertionError(f"{game_id}: a command out of turn was taken, though nothing was legal: {reply}")


def _play_the_person(walk: WalkStack, game_id: str, match_id: str, tokens: list[str], rng: random.Random,
                     seen: list[Seen], answered: list[pb.SubmitCommandResponse],
                     restart_after: int) -> pb.GetViewResponse:
    """The person's seat to the end: read, render the legal commands, choose, submit."""
    person = walk.game.seat(match_id, tokens[PERSON])
    seats = [*(walk.game.seat(match_id, t) for t in tokens), walk.game.spectator(match_id)]
    moves = 0
    last, out_of_turn_tried, extras = None, False, 0
    deadline = time.monotonic() + 600
    while True:
        assert time.monotonic() < deadline, f"{game_id} {match_id} did not end"
        view = _retrying(person.view)
        assert view.game_id == game_id and view.seat == PERSON
        if view.finished:
            assert view.result.seats and view.text
            return view
        for p in view.to_act:
            assert p.label in LABELS[game_id], f"{game_id}: label {p.label!r} is not in the README's list"
            assert p.kind != pb.DECISION_KIND_UNSPECIFIED
        asked = [p for p in view.to_act if p.seat == PERSON]
        legal = _retrying(person.legal_commands, limit=32, sample_seed=rng.getrandbits(32) if moves % 2 else 0)
        assert len(legal.text) == len(legal.commands) and all(legal.text), "every legal command is rendered"
        if not asked:
            if last is not None and not out_of_turn_tried and not legal.commands and legal.version == view.version:
                out_of_turn_tried = True
                _out_of_turn_is_refused(person, game_id, last, legal.version)
            if not (legal.commands and legal.version == view.version and extras < 8 and rng.random() < 0.1):
                time.sleep(0.02)
                continue
            extras += 1  # what the game lets a seat do out of turn (offers, chat): legal too
        if legal.version != view.version:
            continue  # the table moved between the two reads: read again
        assert legal.commands or not asked, f"{game_id}: seat asked ({asked[0].label}) but has no legal command"
        if rng.random() < 0.3:
            _look(seats, seen)
        choice = rng.randrange(len(legal.commands))
        command_id = uuid.uuid4().hex
        try:
            reply = _retrying(person.submit, legal.commands[choice], command_id=command_id,
                              expected_version=legal.version)
        except grpc.RpcError as exc:
            _readable(exc)
            if exc.code() == grpc.StatusCode.ABORTED and error_code(exc) == "stale_version":
                continue  # the bots moved first: routine (README, "Versions and races")
            raise AssertionError(f"{game_id}: the legal command {legal.text[choice]!r} at version "
                                 f"{legal.version} was refused: {exc.code()} {error_code(exc)} "
                                 f"{exc.details()}") from exc
        assert not reply.duplicate
        answered.append(reply)
        last = legal.commands[choice]
        assert reply.version > legal.version or (reply.held and reply.version == legal.version)
        for event in reply.events:
            assert event.command_id == command_id and event.seat == PERSON or event.seat == -1 or reply.held
            assert event.type and event.text
        moves += 1
        if moves == restart_after:
            walk.restart_command()


def _check_replay(walk: WalkStack, match_id: str, tokens: list[str], seen: list[Seen],
                  followed: list[pb.SeatEvent], rng: random.Random) -> None:
    """The finished match replayed: each seat at each version it looked is what it saw then,
    and the events after an event id are what the seat's stream had after it."""
    export = walk.replay.export(match_id, binary=True)
    record = rpb.MatchExport.FromString(export.file)
    event_ids = {e.seq: e.event_id for e in record.events}
    assert sorted(event_ids) == list(range(1, len(event_ids) + 1))
    checks = rng.sample(seen, min(len(seen), examples(40, 400)))
    made = [(e.seat, e.seq, e.timestamp.ToMilliseconds()) for e in record.events]
    for look in checks:
        held = any(seat == look.seat and seq > look.version and ms <= look.at_ms for seat, seq, ms in made)
        if look.version < 2 or held:
            continue
        token = tokens[look.seat] if look.seat >= 0 else None
        at = walk.replay.state_at(event_ids[look.version], token=token, match_id=match_id)
        assert at.seq == look.version and at.seat == look.seat
        assert _content(at.view) == look.view, \
            f"seat {look.seat} at version {look.version}: the replay shows another view than play did"
        assert _to_act(at.to_act) == look.to_act, \
            f"seat {look.seat} at version {look.version}: the replay asks other seats than play did"
    # the person's events after a few of them, replayed, are what its stream had after them
    person = tokens[PERSON]
    for start in rng.sample(range(len(followed)), min(len(followed), examples(4, 20))):
        after = followed[start]
        steps = list(walk.replay.stream(event_id=after.event_id, token=person))
        assert [_replay_step(s) for s in steps] == [_seat_event(e) for e in followed[start + 1:]], \
            f"the replay after seq {after.seq} is not what the stream showed"
        for step in steps[:3]:
            at = walk.replay.state_at(step.event_id, token=person, match_id=match_id)
            assert _content(at.view) == _content(step.view)
    # every seat's and the spectator's stream of the finished match is its replay
    for token in [*tokens, None]:
        seat = walk.game.seat(match_id, token)
        streamed = [r.event for r in _retrying(seat.stream, 0, until_now=True) if r.HasField("event")]
        replayed = list(walk.replay.stream(match_id=match_id, token=token, without_views=True))
        created, replayed = replayed[0], replayed[1:]  # the replay opens with the match as created
        assert created.seq == 1 and not created.HasField("event") and "seed" not in created.event_text
        assert [_seat_event(e) for e in streamed] == [_replay_step(s) for s in replayed]
    # a range of the replay is that range of the stream
    last = len(event_ids)
    for _ in range(3):
        low = rng.randrange(2, last)
        high = rng.randrange(low, last + 1)
        steps = list(walk.replay.stream(match_id=match_id, from_seq=low, to_seq=high, token=person,
                                        without_views=True))
        assert [(s.seq, s.event_id) for s in steps] == [(e.seq, e.event_id) for e in followed if low <= e.seq <= high]
    # the match as created: no view yet, its game named
    created = walk.replay.state_at(event_ids[1], token=person)
    assert created.seq == 1 and not created.HasField("view") and created.game_id in created.text
    # the event list, page by page, is the whole list, whatever the page size
    whole = walk.replay.events(match_id, token=person, page_size=1000)
    assert [e.seq for e in whole] == list(range(1, last + 1))
    for size in (1, 7, last, last - 1):
        paged = walk.replay.events(match_id, token=person, page_size=size)
        assert [e.SerializeToString() for e in paged] == [e.SerializeToString() for e in whole], size


@pytest.mark.parametrize("game_id", sorted(REGISTRY))
def test_a_person_plays_a_whole_match_against_bots_and_its_replay_shows_what_it_saw(
        walk: WalkStack, game_id: str) -> None:
    for round_ in range(examples(1, 3)):
        _walk_one_match(walk, game_id, seed=31 + round_)


def _walk_one_match(walk: WalkStack, game_id: str, seed: int) -> None:
    rng = random.Random(seed)
    games = {g.game_id: g for g in _retrying(walk.game.list_games)}
    info = games[game_id]
    seats = info.min_players
    seat_info = [envelope_pb2.SeatInfo(seat=PERSON, display_name="the person")]
    seat_info += [envelope_pb2.SeatInfo(seat=s, bot=True, policy="random", display_name=f"bot {s}")
                  for s in range(seats) if s != PERSON]
    match = _retrying(walk.game.create_match, game_id, seats, seed=seed, seat_info=seat_info,
                      request_id=uuid.uuid4().hex)
    tokens = match.seat_tokens
    assert len(tokens) == seats
    person = walk.game.seat(match.match_id, tokens[PERSON])
    follower = Follower(person, drop_every=5)
    reader = threading.Thread(target=follower.run, daemon=True)
    reader.start()
    seen: list[Seen] = []
    answered: list[pb.SubmitCommandResponse] = []
    final = _play_the_person(walk, game_id, match.match_id, tokens, rng, seen, answered, restart_after=3)
    reader.join(120)
    assert not reader.is_alive(), "the person's stream did not end with the match"
    assert follower.error is None, follower.error
    assert follower.finished and follower.drops
    # resumed every few events and across a restart, it skipped and repeated nothing
    whole = [r.event for r in _retrying(person.stream, 0, until_now=True) if r.HasField("event")]
    assert [e.seq for e in follower.events] == [e.seq for e in whole]
    assert [_seat_event(e) for e in follower.events] == [_seat_event(e) for e in whole]
    assert final.version >= whole[-1].seq
    # each answer's events are the stream's, as the person sees them (a held one's: at its slot)
    by_id = {e.event_id: e for e in whole}
    for reply in answered:
        for event in reply.events:
            streamed = by_id[event.event_id]
            if reply.held:
                assert event.seq == 0 and streamed.seq > reply.version
                event.seq = streamed.seq
            assert _seat_event(event) == _seat_event(streamed), f"an answer's event is not the stream's: {event}"
    _check_replay(walk, match.match_id, tokens, seen, whole, rng)

