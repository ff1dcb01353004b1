"""A seat's player leaves a match mid-game, over every service it touches: the command service
as its own process, the real bots dispatcher and a Celery worker, the projection consuming the
streams and its QueryService, the replay service (README, "LeaveMatch").

Every seat names its player, the bots' too, so the match is rated. In the first test two people
play and person A leaves (in Nothing Personal right after a window answer held back, NP-H9; in
GoodCritters while its simultaneous choice is open): the bots finish the match, A's token reads
as a spectator and commands nothing, the read models show A's seat away and rate A last, the
replay shows, verifies, exports and imports the `seat_left`. In the second, person B, alone with
bots, lets its short turn clock run out three times in a row, the bots take the seat, B takes it
back and plays to the end, rated by the game's result. One match a game and test in the quick
profile, three under soak.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from famiglia.auth import TokenSigner
from famiglia.client import SeatClient
from famiglia.config import Settings
from famiglia.eventstore.envelopes import SEAT_LEFT, SEAT_RETURNED
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil.errors import error_code
from famiglia.localstack.redis_server import RedisServer
from famiglia.ratings import Placement, ranks_with_leavers, rate_match
from famiglia.v1 import envelope_pb2
from famiglia.v1 import game_service_pb2 as pb
from famiglia.v1 import query_service_pb2 as qpb
from famiglia.v1 import query_service_pb2_grpc as query_grpc
from famiglia.v1 import replay_service_pb2 as rpb

from ..profile import examples
from .conftest import SECRET, WalkStack, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.xdist_group("leave_match")]

SIGNER = TokenSigner(SECRET)
GAMES = ("goodcritters", "nothing_personal")
A, B = 0, 1
LEAVE_AT = {"goodcritters": "choose_action", "nothing_personal": "window"}
"""The decision person A leaves at: GoodCritters' simultaneous choice, before answering it;
Nothing Personal's card window, right after its answer was held back (NP-H9)."""
SHORT_CLOCK = "1"  # seconds: every decision's clock in the second test


class LeaveStack(WalkStack):
    """A client's services (`WalkStack`) and the read models: a projection runner consuming
    the streams, in a thread, and the QueryService over them."""

    def __init__(self, redis_url: str, tmp: Path) -> None:
        from services.projection.bootstrap import bootstrap as projection_bootstrap
        from services.projection.entrypoints.grpc_server import serve as serve_queries

        super().__init__(redis_url, tmp)
        settings = Settings(redis_url=redis_url, secret=SECRET, database_url=f"sqlite:///{tmp / 'read.db'}")
        self.projection = projection_bootstrap(store=RedisEventStore.connect(redis_url), settings=settings)
        projecting = threading.Thread(target=self.projection.runner("leave").run, args=(self.stop,), daemon=True)
        projecting.start()
        self.threads.append(projecting)  # stopped with the dispatcher's, by `self.stop`
        self.query_server, port = serve_queries(self.projection.sql, "127.0.0.1:0", workers=4)
        self.query_server.start()
        self.query_channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.query = query_grpc.QueryServiceStub(self.query_channel)

    def close(self) -> None:
        super().close()
        self.query_channel.close()
        self.query_server.stop(None)
        self.projection.close()


@pytest.fixture(scope="module")
def leave(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LeaveStack]:
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    stack = LeaveStack(redis_server.url, tmp_path_factory.mktemp("leave"))
    yield stack
    stack.close()


@dataclass
class Table:
    match_id: str
    tokens: list[str]
    players: dict[int, str]
    """seat -> player id: every seat is named, the bots' too, so every seat is rated"""


def _create(leave: LeaveStack, game_id: str, seed: int, people: tuple[int, ...],
            options: dict[str, str] | None = None) -> Table:
    """A match of the game at its fewest seats: `people` are persons, the other seats random
    bots; each seat a player of its own (fresh ratings: nothing else rates them)."""
    seats = next(g.min_players for g in leave.game.list_games() if g.game_id == game_id)
    tag = uuid.uuid4().hex[:10]
    players = {s: f"{'person' if s in people else 'bot'}-{s}-{tag}" for s in range(seats)}
    info = [envelope_pb2.SeatInfo(seat=s, player_id=players[s], display_name=f"seat {s}", bot=s not in people,
                                  policy="" if s in people else "random") for s in range(seats)]
    match = leave.game.create_match(game_id, seats, seed=seed, options=options, seat_info=info,
                                    request_id=uuid.uuid4().hex, token=SIGNER.operator_token("tests"))
    return Table(match.match_id, list(match.seat_tokens), players)


def _asked(person: SeatClient, seat: int) -> tuple[pb.GetViewResponse, str | None]:
    """The person's view and the label it is asked, if it is."""
    view = person.view()
    return view, next((p.label for p in view.to_act if p.seat == seat), None)


@dataclass
class Moved:
    command: Any
    command_id: str
    reply: pb.SubmitCommandResponse


def _move(person: SeatClient, rng: random.Random, version: int) -> Moved | None:
    """A legal command at random, as a person plays it; None when the table moved first."""
    legal = person.legal_commands(limit=32)
    if legal.version != version or not legal.commands:
        return None
    command, command_id = rng.choice(list(legal.commands)), uuid.uuid4().hex
    try:
        reply = person.submit(command, command_id=command_id, expected_version=legal.version)
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.ABORTED and error_code(exc) == "stale_version":
            return None  # the bots or a clock moved first: routine
        raise
    return Moved(command, command_id, reply)


def _refused(call) -> tuple[grpc.StatusCode, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as raised:
        call()
    return raised.value.code(), error_code(raised.value)


@dataclass
class Follower:
    """A seat's StreamEvents, opened at the start and read to the match's end."""

    seat: SeatClient
    events: list[pb.SeatEvent] = field(default_factory=list)
    error: BaseException | None = None

    def run(self) -> None:
        try:
            for reply in self.seat.stream(0, timeout=300):
                if reply.HasField("event"):
                    self.events.append(reply.event)
                if reply.finished:
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            self.error = exc


def _shown(events) -> list[tuple]:  # type: ignore[no-untyped-def]
    return [(e.seq, e.event_id, e.type, e.seat, e.text) for e in events]


def _exported(leave: LeaveStack, match_id: str) -> tuple[bytes, list[envelope_pb2.EventEnvelope]]:
    export = leave.replay.export(match_id, binary=True)
    return export.file, list(rpb.MatchExport.FromString(export.file).events)


def _replayed_and_imported(leave: LeaveStack, match_id: str, token: str, changes: list[tuple[int, str]]) -> None:
    """The finished match verifies, by id and as its export; StreamReplay shows its seat changes
    (`changes`: seq, type) where they were stored; ExportMatch -> ImportMatch keeps every event."""
    assert leave.replay.verify(match_id=match_id).ok
    data, envelopes = _exported(leave, match_id)
    checked = leave.replay.verify(data=data)
    assert checked.ok and checked.events_checked == len(envelopes), checked.divergence
    steps = list(leave.replay.stream(match_id=match_id, token=token, without_views=True))
    assert [(s.seq, s.type) for s in steps if s.type in (SEAT_LEFT, SEAT_RETURNED)] == changes
    assert all("seat" in s.event_text for s in steps if s.type in (SEAT_LEFT, SEAT_RETURNED))
    imported = leave.replay.import_file(data, token=SIGNER.operator_token("tests"), new_match_id=f"{match_id}.copy")
    assert imported.verification.ok and imported.version == len(envelopes)
    copy = leave.replay.events(imported.match_id)
    original = leave.replay.events(match_id)
    assert [(e.seq, e.type, e.seat) for e in copy] == [(e.seq, e.type, e.seat) for e in original]
    assert [(e.seq, e.type) for e in copy if e.type in (SEAT_LEFT, SEAT_RETURNED)] == changes
    assert leave.replay.verify(match_id=imported.match_id).ok


def _summary(leave: LeaveStack, match_id: str, version: int) -> qpb.MatchRecord:
    """The match as the read models hold it once the projection has it all, rated."""
    found: list[qpb.MatchRecord] = []

    def projected() -> bool:
        try:
            record = leave.query.GetMatchSummary(qpb.GetMatchSummaryRequest(match_id=match_id), timeout=5).match
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.NOT_FOUND:
                raise
            return False
        found[:] = [record]
        return record.status == qpb.MATCH_STATUS_FINISHED and record.version == version

    assert wait_until(projected, timeout=60), f"the projection did not finish {match_id}: {found}"
    return found[0]


def _ratings(leave: LeaveStack, game_id: str, players: dict[int, str]) -> dict[str, qpb.LeaderboardEntry]:
    """The match's players on the game's leaderboard, once every one of them is rated."""
    wanted, entries = set(players.values()), {}

    def rated() -> bool:
        board = leave.query.GetLeaderboard(qpb.GetLeaderboardRequest(game_id=game_id, limit=500), timeout=5)
        entries.update({e.player_id: e for e in board.entries if e.player_id in wanted})
        return set(entries) == wanted

    assert wait_until(rated, timeout=60), f"rated {sorted(entries)}, not {sorted(wanted)}"
    return entries


def _rated_as(record: qpb.MatchRecord, entries: dict[str, qpb.LeaderboardEntry]) -> list[int]:
    """Every seat's rating is its first match's, rated at the ranks the game gave with the seats
    away at the end last (famiglia.ratings); the ranks rated, by seat."""
    seats = sorted(record.seats, key=lambda s: s.seat)
    ranks = ranks_with_leavers([(s.rank, bool(s.away)) for s in seats])
    expected = rate_match({}, [Placement(s.player_id, r) for s, r in zip(seats, ranks, strict=True)])
    for s in seats:
        got, want = entries[s.player_id], expected[s.player_id]
        assert (got.matches, got.mu, got.sigma) == (1, pytest.approx(want.mu), pytest.approx(want.sigma)), \
            f"seat {s.seat} (game rank {s.rank}, away {s.away!r}) is not rated as its rank {ranks[s.seat]}"
    return ranks


@pytest.mark.parametrize("game_id", GAMES)
def test_a_player_who_leaves_is_played_by_the_bots_to_the_end_and_rated_last(leave: LeaveStack,
                                                                              game_id: str) -> None:
    for round_ in range(examples(1, 3)):
        _leave_one_match(leave, game_id, seed=41 + round_)


def _leave_one_match(leave: LeaveStack, game_id: str, seed: int) -> None:
    rng = random.Random(seed)
    table = _create(leave, game_id, seed, people=(A, B))
    match_id = table.match_id
    a, b = (leave.game.seat(match_id, table.tokens[s]) for s in (A, B))
    follower = Follower(a)
    reader = threading.Thread(target=follower.run, daemon=True)
    reader.start()
    left: pb.LeaveMatchResponse | None = None
    kept: Moved | None = None  # the command A made or meant to make as it left

    def b_plays() -> bool:
        """B's move if it is asked; whether the match is over."""
        view, label = _asked(b, B)
        if view.finished:
            return True
        if label is not None:
            _move(b, rng, view.version)
        else:
            time.sleep(0.02)
        return False

    deadline = time.monotonic() + 300
    while True:
        assert time.monotonic() < deadline, f"{game_id} {match_id} did not end"
        b_first = rng.random() < 0.5  # so B's window answer is held too when A leaves, or not yet given
        if b_first and b_plays():
            break
        if left is None:
            left, kept = _a_plays(a, game_id, rng)
            if left is not None and kept is not None:
                _a_reads_as_a_spectator(leave, game_id, table, a, left, kept)
        if not b_first and b_plays():
            break
    assert left is not None and kept is not None
    final = leave.game.spectator(match_id).view()
    assert final.finished and not final.cancelled and len(final.result.seats) == len(table.tokens)

    # A's stream, open across the leave, shows from the leave on what a spectator's does
    reader.join(60)
    assert not reader.is_alive() and follower.error is None, follower.error
    public = [r.event for r in leave.game.spectator(match_id).stream(0, until_now=True) if r.HasField("event")]
    assert _shown(e for e in follower.events if e.seq >= left.version) == \
        _shown(e for e in public if e.seq >= left.version)
    (shown,) = [e for e in public if e.type == SEAT_LEFT]
    change = envelope_pb2.SeatLeft()
    assert shown.event.Unpack(change) and (shown.seq, shown.seat) == (left.version, A)
    assert (change.seat, change.reason) == (A, "left") and change.policy

    # the bots played A's seat from its seat_left on, and nothing else did
    _data, envelopes = _exported(leave, match_id)
    after = [e for e in envelopes if e.seq > left.version and e.seat == A and e.command_id]
    assert after and all(e.command_id.startswith("bot:") for e in after), \
        f"A's seat after it left: {[(e.seq, e.type, e.command_id) for e in after]}"
    if game_id == "nothing_personal":
        # the answer held when A left was written out in its slot, ahead of the seat_left (NP-H9)
        answered = [e.seq for e in envelopes if e.command_id == kept.command_id]
        assert answered and max(answered) < left.version, (answered, left.version)
    _replayed_and_imported(leave, match_id, table.tokens[A], [(left.version, SEAT_LEFT)])

    # the read models: A's seat away, A rated last, whatever the bot made of its seat
    record = _summary(leave, match_id, final.version)
    away = {s.seat: (s.away, s.away_since_version if s.HasField("away_since_version") else None)
            for s in record.seats}
    assert away == {s: ("left", left.version) if s == A else ("", None) for s in range(len(table.tokens))}
    entries = _ratings(leave, game_id, table.players)
    ranks = _rated_as(record, entries)
    assert ranks[A] == max(ranks) and ranks.count(ranks[A]) == 1, ranks
    assert entries[table.players[A]].wins == 0
    assert all(entries[table.players[A]].mu < e.mu for p, e in entries.items() if p != table.players[A])
    history = leave.query.GetPlayerHistory(qpb.GetPlayerHistoryRequest(player_id=table.players[A]), timeout=5)
    (mine,) = history.matches
    assert mine.match.match_id == match_id and mine.seat == A and mine.HasField("ordinal_after")
    assert [(s.away, s.away_since_version) for s in mine.match.seats if s.seat == A] == [("left", left.version)]
    # the imported copy names no players (unrated) but folds the same seat away
    copied = _summary(leave, f"{match_id}.copy", final.version)
    assert [(s.seat, s.away) for s in copied.seats if s.away] == [(A, "left")]
    assert not any(s.player_id for s in copied.seats)


def _same_view(one: pb.GetViewResponse, other: pb.GetViewResponse) -> bool:
    """Two reads of one version agree (two reads race the bots: False when they straddle a move)."""
    if one.version != other.version:
        return False
    assert (one.seat, one.text, one.view.type_url) == (other.seat, other.text, other.view.type_url)
    return True


def _a_plays(a: SeatClient, game_id: str, rng: random.Random) -> tuple[pb.LeaveMatchResponse | None, Moved | None]:
    """A's move if it is asked, or its leave at `LEAVE_AT`: (the leave, the command A made or
    meant to make as it left)."""
    view, label = _asked(a, A)
    assert not view.finished, f"{game_id}: A was never asked {LEAVE_AT[game_id]!r}"
    if label == LEAVE_AT[game_id] and game_id == "nothing_personal":
        moved = _move(a, rng, view.version)
        if moved is not None and moved.reply.held:
            return a.leave_match(), moved  # the window still open, A's answer held
    elif label == LEAVE_AT[game_id]:
        legal = a.legal_commands(limit=1)
        if legal.version == view.version and legal.commands:
            return a.leave_match(), Moved(legal.commands[0], uuid.uuid4().hex, pb.SubmitCommandResponse())
    elif label is not None:
        _move(a, rng, view.version)
    return None, None


def _a_reads_as_a_spectator(leave: LeaveStack, game_id: str, table: Table, a: SeatClient,
                            left: pb.LeaveMatchResponse, kept: Moved) -> None:
    """Right after the leave, the match running: A's token reads the public view and commands
    nothing (`seat_left`); the leave is idempotent; the match left A's ListMyTurns."""
    assert not left.duplicate
    again = a.leave_match()
    assert (again.version, again.duplicate) == (left.version, True)
    view = a.view()
    assert view.seat == -1 and not view.finished
    assert [(w.seat, w.reason, w.since_version) for w in view.away] == [(A, "left", left.version)]
    spectator = leave.game.spectator(table.match_id)
    assert wait_until(lambda: _same_view(a.view(), spectator.view())), "A's view is not a spectator's"
    # a stream A opens now, from the start, is a spectator's: A's hand is the bot's now
    mine = [r.event for r in a.stream(0, until_now=True) if r.HasField("event")]
    public = [r.event for r in spectator.stream(0, until_now=True) if r.HasField("event")]
    both = min(mine[-1].seq, public[-1].seq)
    assert _shown(e for e in mine if e.seq <= both) == _shown(e for e in public if e.seq <= both)
    refused = {
        "submit": _refused(lambda: a.submit(kept.command, command_id=uuid.uuid4().hex)),
        "legal": _refused(a.legal_commands),
        "return": _refused(a.return_to_match),
    }
    if next(g.match_chat for g in leave.game.list_games() if g.game_id == game_id):
        refused["chat"] = _refused(lambda: a.send_chat("gg"))
    assert refused == {k: (grpc.StatusCode.FAILED_PRECONDITION, "seat_left") for k in refused}
    assert table.match_id not in {m.match_id for m in leave.game.my_turns(SIGNER.player_token(table.players[A]))}
    assert table.match_id in {m.match_id for m in leave.game.my_turns(SIGNER.player_token(table.players[B]))}


@pytest.mark.parametrize("game_id", GAMES)
def test_a_player_whose_clock_runs_out_three_times_takes_the_seat_back_and_is_rated_as_it_finished(
        leave: LeaveStack, game_id: str) -> None:
    for round_ in range(examples(1, 3)):
        # The bots may finish a match before B takes its seat back or is asked again (a loaded
        # machine, a short match): that match shows nothing, so another seed is played.
        if not any(_time_out_one_match(leave, game_id, seed=53 + round_ + 100 * attempt) for attempt in range(4)):
            pytest.fail(f"{game_id}: every match ended before B had taken its seat back and played")


def _time_out_one_match(leave: LeaveStack, game_id: str, seed: int) -> bool:
    """Whether the match showed it all: False when it ended before B's seat went to the bots, or
    before B took it back and played."""
    rng = random.Random(seed)
    info = next(g for g in leave.game.list_games() if g.game_id == game_id)
    clocks = {o.key: SHORT_CLOCK for o in info.options if o.key.startswith("timeouts.") and o.key.endswith("_s")}
    table = _create(leave, game_id, seed, people=(B,), options=clocks)
    match_id = table.match_id
    b = leave.game.seat(match_id, table.tokens[B])
    spectator = leave.game.spectator(match_id)
    mine = SIGNER.player_token(table.players[B])

    # B does not answer: its clock plays its defaults, and the third in a row hands it to the bots
    kept = None
    deadline = time.monotonic() + 120
    while True:
        assert time.monotonic() < deadline, f"{game_id} {match_id}: B's seat never went to the bots"
        view, label = _asked(b, B)
        if view.finished:  # B's defaults were secret choices (no seat_left after those) until the end
            return False
        if view.away:
            break
        if label is not None and kept is None:
            legal = b.legal_commands(limit=1)
            kept = legal.commands[0] if legal.commands else None
        time.sleep(0.05)
    ((seat, reason, left_at),) = [(w.seat, w.reason, w.since_version) for w in view.away]
    assert (seat, reason, view.seat) == (B, "timeouts", B), "a seat away by its clock still reads its own seat"
    (turns,) = [m for m in leave.game.my_turns(mine) if m.match_id == match_id]
    assert (turns.away, turns.to_act, turns.deadline_ms) == (True, False, 0)
    if kept is not None:
        assert _refused(lambda: b.submit(kept, command_id=uuid.uuid4().hex)) == \
            (grpc.StatusCode.FAILED_PRECONDITION, "seat_away")

    # the bots play the seat, without a clock, until B takes it back
    def bots_played() -> bool:
        return any(r.event.seat == B and r.version > left_at for r in spectator.stream(left_at, until_now=True)
                   if r.HasField("event"))

    assert wait_until(bots_played, timeout=60), f"{game_id}: the bots never played B's seat"
    assert all(p.deadline_ms == 0 for p in b.view().to_act if p.seat == B)
    try:
        back = b.return_to_match()
    except grpc.RpcError as exc:
        if (exc.code(), error_code(exc)) == (grpc.StatusCode.FAILED_PRECONDITION, "match_over"):
            return False  # the bots finished it first
        raise
    again = b.return_to_match()
    # A seat not away answers the match's version now: the bots' seats may have moved it meanwhile
    # (the soak saw 516 after 514, GoodCritters' simultaneous steps on a loaded machine).
    assert not back.duplicate and again.duplicate and again.version >= back.version
    view = b.view()
    assert view.seat == B and not view.away
    (turns,) = [m for m in leave.game.my_turns(mine) if m.match_id == match_id]
    assert not turns.away

    # B plays on to the end
    moves = 0
    deadline = time.monotonic() + 300
    while True:
        assert time.monotonic() < deadline, f"{game_id} {match_id} did not end"
        view, label = _asked(b, B)
        if view.finished:
            break
        assert not view.away, f"{game_id}: B's seat went to the bots again though B plays"
        if label is not None and _move(b, rng, view.version) is not None:
            moves += 1
        else:
            time.sleep(0.02)
    if not moves:  # the match ended before B was asked again
        return False

    # as stored: three clock defaults in a row, the seat_left, the bots' moves, the return, B's own
    _data, envelopes = _exported(leave, match_id)
    changes = [(e.seq, e.type) for e in envelopes if e.type in (SEAT_LEFT, SEAT_RETURNED)]
    assert changes == [(left_at, SEAT_LEFT), (back.version, SEAT_RETURNED)]
    left = next(e for e in envelopes if e.seq == left_at)
    assert (envelope_pb2.SeatLeft.FromString(left.payload).reason, left.seat) == ("timeouts", B)
    before = list(dict.fromkeys(e.command_id for e in envelopes if e.seq < left_at and e.seat == B and e.command_id))
    assert len(before) >= 3 and all(c.startswith("clock:") for c in before[-3:]), before
    away = [e.command_id for e in envelopes if left_at < e.seq < back.version and e.seat == B and e.command_id]
    assert away and all(c.startswith("bot:") for c in away), away
    after = [e.command_id for e in envelopes if e.seq > back.version and e.seat == B and e.command_id]
    assert any(not c.startswith(("bot:", "clock:")) for c in after), "B's own commands after its return"
    assert not any(c.startswith("bot:") for c in after), "the bots played B's seat after its return"
    _replayed_and_imported(leave, match_id, table.tokens[B], changes)

    # the read models: B back at the end, so rated by the game's result, not as a leaver
    record = _summary(leave, match_id, view.version)
    assert [(s.away, s.HasField("away_since_version")) for s in record.seats if s.seat == B] == [("", False)]
    history = leave.query.GetPlayerHistory(qpb.GetPlayerHistoryRequest(player_id=table.players[B]), timeout=5)
    assert [(s.seat, s.away) for m in history.matches for s in m.match.seats if s.seat == B] == [(B, "")]
    entries = _ratings(leave, game_id, table.players)
    ranks = _rated_as(record, entries)
    assert ranks == [s.rank for s in sorted(record.seats, key=lambda s: s.seat)]
    return True
