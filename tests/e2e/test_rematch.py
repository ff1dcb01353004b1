"""A rematch over every service it touches (docs/architecture.md, "Rematches"): the command service
as its own process, the real bots dispatcher and a Celery worker, the projection consuming the
streams and its QueryService, the replay service.

Two people and a bot, every seat named by an operator (so both matches are rated), play a short
Grifters match (two rounds: every seat plays, the bot's too) to its end with the SDK. Person A
asks for a rematch; B is told `rematch_asked` on WatchMyTurns and asks too, which makes it; A is
told `rematch_made`. Each gets its seat (moved one on) and its token there; the bot's seat stays
the bot's and the dispatcher plays it. The rematch is played to its end; the read models link the
two matches both ways and rate both; the replay of the rematch verifies.
"""

from __future__ import annotations

import queue
import random
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import grpc
import pytest

from famiglia.auth import TokenSigner
from famiglia.client import SeatClient
from famiglia.eventstore.turn_notices import REMATCH_ASKED, REMATCH_MADE
from famiglia.grpcutil.errors import error_code
from famiglia.localstack.redis_server import RedisServer
from famiglia.v1 import envelope_pb2
from famiglia.v1 import game_service_pb2 as pb
from famiglia.v1 import query_service_pb2 as qpb
from famiglia.v1 import replay_service_pb2 as rpb
from services.command.rematch import moved_on

from .conftest import SECRET, wait_until
from .test_leave_match import LeaveStack

pytestmark = [pytest.mark.redis, pytest.mark.xdist_group("rematch")]

SIGNER = TokenSigner(SECRET)
GAME = "grifters"
SEATS = 3
A, B, BOT = 0, 1, 2
OPTIONS = {"max_rounds": "2"}
"""Two rounds (GR-E08): every seat plays at least twice, the bot's too, and the match ends in a
dozen commands at most. The rematch takes the option back."""
WAIT_S = 60.0
"""The bound of every wait for the other processes (a notice, a bot's move, the projection)."""


@pytest.fixture(scope="module")
def table_stack(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LeaveStack]:
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushall()  # the projection and the dispatcher start on empty streams
    client.close()
    stack = LeaveStack(redis_server.url, tmp_path_factory.mktemp("rematch"))
    yield stack
    stack.close()


@dataclass
class Watcher:
    """A player's WatchMyTurns, read in a thread: its notifications, in order, as they come."""

    stack: LeaveStack
    player_id: str
    notes: queue.Queue[pb.TurnNotification] = field(default_factory=queue.Queue)
    seen: list[pb.TurnNotification] = field(default_factory=list)
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self.call = self.stack.game.my_turns_stream(SIGNER.player_token(self.player_id), timeout=120)
        first = next(self.call)  # the snapshot: the stream is open, every later notice comes
        assert first.WhichOneof("update") == "snapshot" and first.cursor
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for reply in self.call:
                if reply.WhichOneof("update") == "notification":
                    self.notes.put(reply.notification)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                self.error = exc

    def told(self, kind: str, match_id: str) -> pb.TurnNotification:
        """The next notification of `kind` about `match_id`, within `WAIT_S`."""
        deadline = time.monotonic() + WAIT_S
        while True:
            left = deadline - time.monotonic()
            assert left > 0 and self.error is None, f"{self.player_id} was not told {kind}: {self.seen} {self.error}"
            try:
                note = self.notes.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            self.seen.append(note)
            if (note.kind, note.match_id) == (kind, match_id):
                return note

    def about(self, match_id: str) -> list[str]:
        """The kinds of every notification about `match_id` received so far."""
        while not self.notes.empty():
            self.seen.append(self.notes.get_nowait())
        return [n.kind for n in self.seen if n.match_id == match_id]

    def close(self) -> None:
        self.call.cancel()
        self.thread.join(10)


def _play_out(stack: LeaveStack, match_id: str, people: dict[int, SeatClient], rng: random.Random) -> int:
    """The people play their seats with random legal commands, the bots theirs, to the end; its
    version."""
    spectator = stack.game.spectator(match_id)
    deadline = time.monotonic() + WAIT_S
    while True:
        assert time.monotonic() < deadline, f"{match_id} did not end: {spectator.view().text}"
        view = spectator.view()
        if view.finished:
            assert not view.cancelled
            return view.version
        asked = [people[p.seat] for p in view.to_act if p.seat in people]
        if not asked:
            time.sleep(0.02)  # the bot's turn
            continue
        person = asked[0]
        legal = person.legal_commands(limit=32)
        if legal.version != view.version or not legal.commands:
            continue
        try:
            person.submit(rng.choice(list(legal.commands)), command_id=uuid.uuid4().hex,
                          expected_version=legal.version)
        except grpc.RpcError as exc:
            if (exc.code(), error_code(exc)) != (grpc.StatusCode.ABORTED, "stale_version"):
                raise  # (else the table moved first: asked again)


def _summary(stack: LeaveStack, match_id: str, version: int, **linked: str) -> qpb.MatchRecord:
    """The match as the read models hold it once the projection has it finished at `version` and
    `linked` (its rematch_of/rematch_id) as expected."""
    found: list[qpb.MatchRecord] = []

    def projected() -> bool:
        try:
            record = stack.query.GetMatchSummary(qpb.GetMatchSummaryRequest(match_id=match_id), timeout=5).match
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.NOT_FOUND:
                raise
            return False
        found[:] = [record]
        return (record.status == qpb.MATCH_STATUS_FINISHED and record.version == version
                and all(getattr(record, k) == v for k, v in linked.items()))

    assert wait_until(projected, timeout=WAIT_S), f"the projection did not show {match_id} {linked}: {found}"
    return found[0]


def test_a_table_asks_for_a_rematch_is_told_and_plays_it_with_its_bot(table_stack: LeaveStack) -> None:
    stack, rng = table_stack, random.Random(31)
    tag = uuid.uuid4().hex[:10]
    players = {A: f"ann-{tag}", B: f"bob-{tag}", BOT: f"bot-{tag}"}
    info = [envelope_pb2.SeatInfo(seat=s, player_id=players[s], display_name=players[s].split("-")[0],
                                  bot=s == BOT, policy="random" if s == BOT else "") for s in range(SEATS)]
    first = stack.game.create_match(GAME, SEATS, seed=31, options=OPTIONS, seat_info=info,
                                    request_id=uuid.uuid4().hex, token=SIGNER.operator_token("tests"))
    ann, bob = (stack.game.seat(first.match_id, first.seat_tokens[s]) for s in (A, B))
    first_version = _play_out(stack, first.match_id, {A: ann, B: bob}, rng)

    watchers = {s: Watcher(stack, players[s]) for s in (A, B, BOT)}
    try:
        # A asks: the rematch waits for B, who is told
        asked = ann.ask_rematch()
        assert (list(asked.asked), list(asked.waiting_for), asked.match_id, asked.seat_token) == ([A], [B], "", "")
        assert ann.rematch_seat(asked) is None
        note = watchers[B].told(REMATCH_ASKED, first.match_id)
        assert (note.seat, note.game_id) == (B, GAME)
        # B asks: that makes it, and A is told
        made = bob.ask_rematch()
        assert made.match_id and (list(made.asked), list(made.waiting_for)) == ([A, B], [])
        note = watchers[A].told(REMATCH_MADE, first.match_id)
        assert (note.seat, note.game_id, note.version) == (A, GAME, first_version)
        for person in (A, B):  # the rematch is among each person's live matches, at its seat there
            mine = stack.game.my_turns(SIGNER.player_token(players[person]))
            assert [(m.match_id, m.seat) for m in mine] == [(made.match_id, moved_on(person, SEATS))]
        # A asks again to learn its seat there; a spectator sees the same rematch, and no seat
        again = ann.ask_rematch()
        assert again.match_id == made.match_id
        looked = stack.game.spectator(first.match_id).get_rematch()
        assert (looked.match_id, looked.seat, looked.seat_token) == (made.match_id, -1, "")
        for person, answer in ((A, again), (B, made)):
            claim = SIGNER.read_seat(answer.seat_token)
            there = moved_on(person, SEATS)
            assert (answer.seat, claim.match_id, claim.seat, claim.player_id) == \
                (there, made.match_id, there, players[person])

        # the rematch: the same game and options, each seat moved one on, the bot's still the bot's
        came_from = {moved_on(s, SEATS): s for s in range(SEATS)}
        rematch = {moved_on(A, SEATS): ann.rematch_seat(again), moved_on(B, SEATS): bob.rematch_seat(made)}
        assert all(isinstance(seat, SeatClient) for seat in rematch.values())
        rematch_version = _play_out(stack, made.match_id, rematch, rng)  # type: ignore[arg-type]
        # asked again once it is over: the same rematch, not made again nor back among A's live matches
        assert ann.ask_rematch().match_id == made.match_id
        assert not stack.game.my_turns(SIGNER.player_token(players[A]))

        # each was told only what it did not learn from its own answer
        assert watchers[A].about(first.match_id).count(REMATCH_ASKED) == 0
        assert watchers[B].about(first.match_id).count(REMATCH_MADE) == 0
        assert not watchers[BOT].about(first.match_id), "a bot's seat is nobody to tell"
        assert all(watcher.error is None for watcher in watchers.values())
    finally:
        for watcher in watchers.values():
            watcher.close()

    # as stored: the rematch names the match it follows, and the dispatcher played the bot's seat
    export = stack.replay.export(made.match_id, binary=True)
    envelopes = list(rpb.MatchExport.FromString(export.file).events)
    created = envelope_pb2.MatchCreated.FromString(envelopes[0].payload)
    assert (created.game_id, created.seats, created.rematch_of) == (GAME, SEATS, first.match_id)
    assert dict(created.options) == OPTIONS and not created.tournament_id
    assert sorted((i.seat, i.player_id, i.bot, i.policy) for i in created.seat_info) == \
        sorted((moved_on(s, SEATS), players[s], s == BOT, "random" if s == BOT else "") for s in range(SEATS))
    bot_there = moved_on(BOT, SEATS)
    moves = {e.command_id for e in envelopes if e.seat == bot_there and e.command_id}
    assert moves and all(c.startswith("bot:") for c in moves), moves
    people_moves = {e.command_id for e in envelopes if e.seat != bot_there and e.command_id}
    assert people_moves and not any(c.startswith(("bot:", "clock:")) for c in people_moves), people_moves
    verified = stack.replay.verify(match_id=made.match_id)
    assert verified.ok and verified.events_checked == len(envelopes) == rematch_version, verified.divergence
    # an import of it is no rematch of anything here (the link is a claim of the file)
    copy = stack.replay.import_file(export.file, token=SIGNER.operator_token("tests"),
                                    new_match_id=f"{made.match_id}.copy")
    assert copy.verification.ok

    # the read models: linked both ways, both finished and rated for every seat
    before = _summary(stack, first.match_id, first_version, rematch_of="", rematch_id=made.match_id)
    after = _summary(stack, made.match_id, rematch_version, rematch_of=first.match_id, rematch_id="")
    assert before.seed != after.seed and dict(after.options) == dict(before.options)
    _summary(stack, copy.match_id, rematch_version, rematch_of="", rematch_id="")
    assert _summary(stack, first.match_id, first_version).rematch_id == made.match_id
    assert {s.seat: s.player_id for s in before.seats} == players
    assert {s.seat: s.player_id for s in after.seats} == {there: players[s] for there, s in came_from.items()}

    def rated_twice() -> bool:
        board = stack.query.GetLeaderboard(qpb.GetLeaderboardRequest(game_id=GAME, limit=500), timeout=5)
        return {e.player_id: e.matches for e in board.entries if e.player_id in players.values()} == \
            {p: 2 for p in players.values()}

    assert wait_until(rated_twice, timeout=WAIT_S), "both matches rate every seat"
    for seat, player in players.items():
        history = stack.query.GetPlayerHistory(qpb.GetPlayerHistoryRequest(player_id=player), timeout=5)
        assert sorted((m.match.match_id, m.seat) for m in history.matches) == \
            sorted([(first.match_id, seat), (made.match_id, moved_on(seat, SEATS))])
        assert all(m.HasField("ordinal_after") for m in history.matches)
        assert {m.match.match_id: (m.match.rematch_of, m.match.rematch_id) for m in history.matches} == \
            {first.match_id: ("", made.match_id), made.match_id: (first.match_id, "")}
