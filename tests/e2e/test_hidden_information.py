"""Hidden information never leaks: an audit as a player holding one seat token who wants to
learn what another seat holds (GC-H, GR-H, NC-H, NP-H rules), over real gRPC (every service in
this process, one real redis-server), a real match of every game with a fixed seed.

The generic property: two deals that agree on everything a seat may see get byte-identical
answers to that seat from every call it can make — its view, who it sees asked, its legal
commands listed and drawn with their text forms, its turn clock, and the refusal (status, stable
code, message) or acceptance of any command it can send, a command naming a card another seat
holds, one still in the deck, one discarded or one that does not exist among them. The second
deal is the engine's own `determinize` of the seat's view (the search bots' worlds), put into a
command service of its own (`Twin`) over a copy of the match's events; a twin of the true state
answers beside it, so neither writes to the match.

Then the channels a seat reaches outside GameService's views, one test each: another seat's
command id sent again (SubmitCommand, SubmitCommands), the replay service (GetStateAt,
StreamReplay, ListMatchEvents, ExportMatch, VerifyMatch) and the read models (GetMatchSummary,
ListMatches) while the match is live, and where a stream or a replay starts. Accepted on
purpose, and documented (docs/engines.md, "What a hidden event still shows"): versions are
public, so a seat can count the hidden events between two public ones; the engine contract
holds that count to what the seat sees (`_check_hidden_events_alike`, which found Nothing
Personal's lapsing offers counted, NP-H7)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from google.protobuf import any_pb2, text_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from famiglia.auth import TokenSigner
from famiglia.engine import Engine, Rng
from famiglia.engine.registry import default_registry
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil.errors import error_code
from famiglia.matchstate import command_key
from famiglia.testing.random_play import play_random
from famiglia.v1 import game_service_pb2 as game_pb
from famiglia.v1 import game_service_pb2_grpc as game_grpc
from famiglia.v1 import query_service_pb2 as query_pb
from famiglia.v1 import replay_service_pb2 as replay_pb
from services.command.app import CommandApp
from services.command.entrypoints.grpc_server import serve
from tests.e2e.conftest import SECRET, Services, Stack

REGISTRY = default_registry()
GAMES = list(REGISTRY)
C = grpc.StatusCode
DEADLINE = 60
#: Commands played before each look at the table: early (hands just dealt), then further into the match.
CHECKPOINTS = (4, 11, 25, 40, 300)
HELD = 300
"""The last checkpoint comes as soon as two answers are held back (NP-H9), if that is before it."""
#: Commands each seat sends to both twins at each checkpoint (refused ones mostly).
PROBES = 100


def _metadata(token: str | None) -> list[tuple[str, str]] | None:
    return None if token is None else [("authorization", f"Bearer {token}")]


def _pack(command: Message) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(command)
    return packed


def said(call: Callable[..., Any], request: Message, token: str | None, *, stream: bool = False) -> tuple:
    """What a call told its caller, as bytes to compare: the reply (every reply of a stream), or
    the status, stable code and message of its refusal."""
    try:
        reply = call(request, metadata=_metadata(token), timeout=DEADLINE)
        replies = list(reply) if stream else [reply]
        return ("ok", *(r.SerializeToString(deterministic=True) for r in replies))
    except grpc.RpcError as exc:
        return ("refused", exc.code(), error_code(exc), exc.details())


# -- the table: a real match, played through the real services --------------------------------------
@dataclass
class Table:
    game_id: str
    match_id: str
    tokens: list[str]
    chooser: random.Random
    played: int = 0
    held: set[int] = field(default_factory=set)
    """Seats whose answer is held back now (NP-H9): each sees it in its own view only."""

    @property
    def engine(self) -> Engine:
        return REGISTRY.get(self.game_id)

    @property
    def seats(self) -> int:
        return len(self.tokens)


def new_table(s: Services, game_id: str, seed: int = 7) -> Table:
    """A match of `game_id` with a fixed seed, every seat a person's (so Nothing Personal holds
    window answers back, NP-H9), at the game's fewest seats but three."""
    info = REGISTRY.get(game_id).info
    seats = max(info.min_players, min(3, info.max_players))
    created = s.game.CreateMatch(game_pb.CreateMatchRequest(game_id=game_id, seats=seats, seed=seed))
    return Table(game_id, created.match_id, list(created.seat_tokens), random.Random(seed))


def asked_seats(s: Services, table: Table) -> list[int]:
    """The seats the game waits for, each as its own view says (a private ask reaches its seat only)."""
    return [seat for seat, token in enumerate(table.tokens)
            if seat in {p.seat for p in s.game.GetView(game_pb.GetViewRequest(match_id=table.match_id),
                                                       metadata=_metadata(token)).to_act}]


def _never(table: Table) -> bool:
    return False


def _two_held(table: Table) -> bool:
    """Two answers are held back (NP-H9): each seat's view shows its own, the hot state both."""
    return len(table.held) >= 2


def play_to(s: Services, table: Table, commands: int, until: Callable[[Table], bool] = _never) -> bool:
    """Random legal commands of the seats asked, through SubmitCommand, until `commands` are
    played or `until` holds; False if the match ended first. Optional commands (offers, chats)
    now and then."""
    optional = table.engine.info.optional_commands
    while table.played < commands and not until(table):
        seats = asked_seats(s, table)
        if not seats:
            return False
        seat = table.chooser.choice(seats)
        token = table.tokens[seat]
        legal = s.game.ListLegalCommands(game_pb.ListLegalCommandsRequest(match_id=table.match_id, limit=64),
                                         metadata=_metadata(token))
        command_type = table.engine.info.command_type
        commands_listed = [c for c in legal.commands
                           if table.chooser.random() < 0.1 or _kind(_unpack(command_type, c)) not in optional]
        if not commands_listed:
            continue
        done = s.game.SubmitCommand(game_pb.SubmitCommandRequest(
            match_id=table.match_id, command_id=f"play-{table.played}", command=table.chooser.choice(commands_listed),
            expected_version=legal.version), metadata=_metadata(token), timeout=DEADLINE)
        table.held = table.held | {seat} if done.held else set()  # a public command writes the held ones out
        table.played += 1
    return True


def _unpack(command_type: Any, packed: any_pb2.Any) -> Message:
    return command_type.FromString(packed.value)


def _kind(command: Message) -> str:
    return command.WhichOneof("kind") or ""


# -- twins: one match, two deals ------------------------------------------------------------------------
class _Current:
    """The app a twin's server answers with; swapped for a fresh one after a command it took."""

    def __init__(self) -> None:
        self.app: CommandApp | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)


class Twin:
    """A command service of its own over a copy of a match's stream and held answers, whose
    state is the one folded from them or another put in its place (a world `engine.determinize`
    dealt). Each command it takes goes to its own copy; `reset` starts it again as loaded."""

    def __init__(self) -> None:
        self.current = _Current()
        self.server, port = serve(self.current, "127.0.0.1:0", workers=2)  # type: ignore[arg-type]
        self.server.start()
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.game = game_grpc.GameServiceStub(self.channel)
        self.envelopes: list[Any] = []
        self.staged: list[Any] = []
        self.match_id = ""
        self.state: Any = None

    def load(self, match_id: str, envelopes: list[Any], staged: list[Any], state: Any = None) -> Any:
        """The match as its stream's `envelopes` and the `staged` answers behind them (NP-H9)
        leave it, with `state` in place of its own (if given); the state it plays from."""
        self.match_id, self.envelopes, self.staged = match_id, envelopes, staged
        store = InMemoryEventStore()
        store.append(match_id, 0, envelopes)
        for at, env in enumerate(staged, start=envelopes[-1].seq):  # renumbered: some are left out
            moved = type(env)()
            moved.CopyFrom(env)
            moved.seq = at + 1
            store.stage(match_id, at, [moved], command_key(env.seat, env.command_id))
        self.current.app = CommandApp(store=store, registry=REGISTRY, signer=TokenSigner(SECRET))
        hot = self.current.app.matches.get(match_id)
        if state is not None:
            hot.match.state = state
        self.state = hot.match.state
        return self.state

    def reset(self) -> None:
        self.load(self.match_id, self.envelopes, self.staged, self.state)

    def close(self) -> None:
        self.channel.close()
        self.server.stop(grace=None)


@pytest.fixture()
def twins() -> Iterator[tuple[Twin, Twin]]:
    pair = (Twin(), Twin())
    yield pair
    for twin in pair:
        twin.close()


def vocabulary(engine: Engine, seats: int, states: list[Any]) -> tuple[list[str], list[int]]:
    """Every string and small whole number a finished match of the game shows anyone (every
    hand, deck and pile is public once over: GC-H13, GR-H11, NC-H16, NP-H10) and every seat's
    view of `states`: the card ids, gangsters and Notes a probe may name, wherever they are."""
    strings: set[str] = {"", "x"}
    ints: set[int] = {-1, 0, 1, 2, 99}
    over = play_random(engine, seats, 5).state
    views = [engine.view(over, None)] + [engine.view(st, seat) for st in states for seat in range(seats)]

    def learn(message: Message) -> None:
        for fd, value in message.ListFields():
            for v in (value if fd.is_repeated else [value]):
                if isinstance(v, Message):
                    learn(v)
                elif isinstance(v, str):
                    strings.add(v)
                elif isinstance(v, int) and not isinstance(v, bool) and -2 < v < 64:
                    ints.add(v)

    for view in views:
        learn(view)
    return sorted(strings), sorted(ints)


def renamed(command: Message, strings: list[str], ints: list[int]) -> Iterator[Message]:
    """`command` with one field inside it set to each value it could name: a string or whole
    number to each of the vocabulary, an enum to each of its values, an item of a repeated one
    likewise, or one item more. Every card it names becomes every other card, held by this seat
    or another, in a deck or pile, or none; every seat and target every other."""
    kind = _kind(command)
    if not kind:
        return

    def values(fd: FieldDescriptor) -> list[Any]:
        if fd.type == FieldDescriptor.TYPE_STRING:
            return strings
        if fd.type == FieldDescriptor.TYPE_ENUM:
            return [v.number for v in fd.enum_type.values]
        if fd.cpp_type in (FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_INT64):
            return ints
        if fd.cpp_type in (FieldDescriptor.CPPTYPE_UINT32, FieldDescriptor.CPPTYPE_UINT64):
            return [i for i in ints if i >= 0]
        return []

    def places(message: Message, path: tuple) -> Iterator[tuple[tuple, FieldDescriptor, int | None]]:
        for fd in message.DESCRIPTOR.fields:
            if fd.type == FieldDescriptor.TYPE_MESSAGE:
                if fd.is_repeated:
                    for i, sub in enumerate(getattr(message, fd.name)):
                        yield from places(sub, (*path, (fd.name, i)))
                elif message.HasField(fd.name):
                    yield from places(getattr(message, fd.name), (*path, (fd.name, None)))
            elif values(fd):
                items = range(len(getattr(message, fd.name)) + 1) if fd.is_repeated else [None]
                for i in items:  # (one past the last: an item more)
                    yield path, fd, i

    def holder(root: Message, path: tuple) -> Message:
        for name, i in path:
            root = getattr(root, name) if i is None else getattr(root, name)[i]
        return root

    for path, fd, i in places(getattr(command, kind), ()):
        for value in values(fd):
            out = type(command)()
            out.CopyFrom(command)
            target = holder(getattr(out, kind), path)
            if i is None:
                setattr(target, fd.name, value)
            elif i == len(getattr(target, fd.name)):
                getattr(target, fd.name).append(value)
            else:
                getattr(target, fd.name)[i] = value
            yield out


def probes(engine: Engine, state: Any, seat: int, seats: int, vocab: tuple[list[str], list[int]],
           chooser: random.Random) -> list[Message]:
    """What a seat may send to learn where things are: two of its own legal commands, the other
    seats' legal commands, and its own and theirs with a field renamed to every card and number
    (`renamed`), `PROBES` of them in all."""
    own = engine.legal_commands(state, seat, limit=32)
    others = [c for other in range(seats) if other != seat for c in engine.legal_commands(state, other, limit=8)]
    renames = [c for base in own[:6] for c in renamed(base, *vocab)]
    renames += [c for base in others[:4] for c in renamed(base, *vocab)]
    picked = chooser.sample(renames, min(len(renames), PROBES - 2 - min(len(others), 8)))
    return [*own[:2], *others[:8], *picked]


def seat_said(game: game_grpc.GameServiceStub, match_id: str, token: str | None, seat: int | None) -> dict[str, tuple]:
    """Everything the read calls tell this seat (or a spectator) now."""
    out = {"GetView": said(game.GetView, game_pb.GetViewRequest(match_id=match_id), token)}
    if token is None:
        return out
    for limit, seed in ((0, 0), (1, 0), (5, 0), (-1, 0), (0, 11), (3, 2**64 - 1)):
        out[f"ListLegalCommands({limit},{seed})"] = said(
            game.ListLegalCommands, game_pb.ListLegalCommandsRequest(match_id=match_id, limit=limit, sample_seed=seed),
            token)
    out["SubmitCommands(ask_next)"] = said(game.SubmitCommands, game_pb.SubmitCommandsRequest(
        match_id=match_id, ask_next=[game_pb.NextSeat(seat_token=token, view=True, legal_limit=7)]), token)
    return out


def submitted(game: game_grpc.GameServiceStub, match_id: str, token: str, command: Message, version: int,
              chained: bool) -> tuple:
    """A probe's answer, by SubmitCommand or as a chain of one (SubmitCommands): its refusal
    whole; of an acceptance only that it was taken. What follows from it may differ between
    deals, and its seat is told so: a draw from the deck, how a vote ends when the last card is
    revealed, whether a window's answer was the last one and so resolves it, in public, or is
    held back (NP-H9), and so how many events it made."""
    if chained:
        reply = game.SubmitCommands(game_pb.SubmitCommandsRequest(
            match_id=match_id, expected_version=version, omit_events=True, commands=[game_pb.SeatCommand(
                seat_token=token, command_id="probe", command=_pack(command))]), timeout=DEADLINE)
        return ("ok",) if reply.results else ("refused", reply.refusal.SerializeToString(deterministic=True))
    request = game_pb.SubmitCommandRequest(match_id=match_id, command_id="probe", command=_pack(command),
                                           expected_version=version, omit_events=True)
    answer = said(game.SubmitCommand, request, token)
    return ("ok",) if answer[0] == "ok" else answer


@pytest.mark.parametrize("game_id", GAMES)
def test_every_answer_to_a_seat_is_the_same_for_every_deal_it_cannot_tell_apart(
        stubs: Services, twins: tuple[Twin, Twin], redis_url: str, game_id: str) -> None:
    """GC-H02/H05/H06/H07, GR-H02/H05/H07/H09, NC-H02/H04/H05/H08/H09/H10, NP-H1/H2/H4/H7/H9:
    what a seat may not see changes nothing it is told. For each seat, at several points of a real
    match (one with two window answers held back), a world is dealt from the seat's view; the
    match's true state (every held answer in it) and that world, each in a command service of its
    own over the match's events, answer the seat's GetView, ListLegalCommands (listed, cut and
    drawn: commands, `complete`, `text`, clock) and SubmitCommands' `ask_next` byte for byte
    alike, and so every command it sends by SubmitCommand or SubmitCommands (its own, the other
    seats', and theirs and its own naming each card, seat and number the game has: a card held by
    another seat, in a deck or pile, or nowhere), refused with the same status, code and message,
    or taken in both. A spectator's GetView too."""
    s = stubs
    table = new_table(s, game_id)
    engine = table.engine
    real, dealt = twins
    store = RedisEventStore.connect(redis_url)
    worlds_differ = held_answers = 0
    try:
        for checkpoint in CHECKPOINTS:
            held_back = _two_held if checkpoint == HELD else _never
            if not play_to(s, table, checkpoint, until=held_back):
                break
            envelopes, staged = store.read(table.match_id), store.read_staged(table.match_id)
            held_answers += bool(staged)
            version = envelopes[-1].seq
            state = real.load(table.match_id, envelopes, staged)  # every held answer in it
            vocab = vocabulary(engine, table.seats, [state])
            for seat in [None, *range(table.seats)]:
                token = None if seat is None else table.tokens[seat]
                viewer = 0 if seat is None else seat
                # a world dealt from what the seat sees: of the held answers, its own only
                world = engine.determinize(engine.view(state, viewer), viewer, Rng(1000 * checkpoint + viewer))
                dealt.load(table.match_id, envelopes, [env for env in staged if env.seat == seat], world)
                worlds_differ += world != state
                told = seat_said(real.game, table.match_id, token, seat)
                assert told == seat_said(dealt.game, table.match_id, token, seat), (
                    f"{game_id}, seat {seat}, version {version}: "
                    f"{[k for k, v in told.items() if v != seat_said(dealt.game, table.match_id, token, seat)[k]]}"
                    " tell the deals apart")
                if seat is None:
                    continue
                for i, command in enumerate(probes(engine, state, seat, table.seats, vocab, table.chooser)):
                    chained = i % 4 == 3
                    here = submitted(real.game, table.match_id, token, command, version, chained)
                    there = submitted(dealt.game, table.match_id, token, command, version, chained)
                    assert here == there, (f"{game_id}, seat {seat}, version {version}: "
                                           f"{engine.render_command(command)} tells the deals apart: {here} / {there}")
                    if here[0] == "ok":
                        real.reset()
                        dealt.reset()
    finally:
        store.close()
    assert worlds_differ, "every world dealt was the true state: the test compared nothing"
    assert held_answers or not engine.info.held_events, "no answer was held back at any look (NP-H9)"


# -- another seat's command ids ------------------------------------------------------------------------
def _send(s: Services, table: Table, token: str, command_id: str, command: any_pb2.Any, chained: bool) -> tuple:
    """What a seat is told of one command it sends under `command_id`, by SubmitCommand or as
    a chain of one (SubmitCommands): ("ok", its reply) or its refusal's (status, code)."""
    if not chained:
        answer = said(s.game.SubmitCommand, game_pb.SubmitCommandRequest(
            match_id=table.match_id, command_id=command_id, command=command), token)
        return ("ok", game_pb.SubmitCommandResponse.FromString(answer[1])) if answer[0] == "ok" else answer[1:3]
    reply = s.game.SubmitCommands(game_pb.SubmitCommandsRequest(match_id=table.match_id, commands=[
        game_pb.SeatCommand(seat_token=token, command_id=command_id, command=command)]), timeout=DEADLINE)
    return ("ok", reply.results[0]) if reply.results else (_STATUSES[reply.refusal.status], reply.refusal.code)


_STATUSES = {code.value[0]: code for code in C}


@pytest.mark.parametrize("game_id", GAMES)
def test_a_seat_sending_another_seats_command_id_is_answered_as_itself(stubs: Services, game_id: str) -> None:
    """GC-H05, GR-H07, NC-H04, NP-H9: a command id is its own seat's idempotency key. A seat that
    sends the id of another seat's command (a bot's, `bot:<match>:<version>:<seat>`, can be
    guessed), with that seat's very command or with one of its own, by SubmitCommand or in a
    SubmitCommands chain, is answered as for any command of its own: never `duplicate`, never
    `command_id_reused`, never with the other seat's events; and its retry is its own first
    answer again."""
    s = stubs
    table = new_table(s, game_id, seed=3)
    play_to(s, table, 3)
    for how in range(4):
        chained, theirs_sent = how >= 2, how % 2 == 0
        actor = asked_seats(s, table)[0]
        spy = (actor + 1) % table.seats
        legal = s.game.ListLegalCommands(game_pb.ListLegalCommandsRequest(match_id=table.match_id),
                                         metadata=_metadata(table.tokens[actor]))
        command_id = f"bot:{table.match_id}:{legal.version}:{actor}"
        theirs = s.game.SubmitCommand(game_pb.SubmitCommandRequest(
            match_id=table.match_id, command_id=command_id, command=legal.commands[0],
            expected_version=legal.version), metadata=_metadata(table.tokens[actor]))
        their_events = {e.event_id for e in theirs.events}
        own = s.game.ListLegalCommands(game_pb.ListLegalCommandsRequest(match_id=table.match_id, limit=1),
                                       metadata=_metadata(table.tokens[spy])).commands
        command = legal.commands[0] if theirs_sent or not own else own[0]
        first, again = (_send(s, table, table.tokens[spy], command_id, command, chained) for _ in range(2))
        where = f"{game_id}: seat {spy} sent seat {actor}'s id{' in a chain' if chained else ''}"
        if first[0] != "ok":
            assert first[1] != "command_id_reused" and again == first, f"{where}: {first}, then {again}"
            continue
        assert not first[1].duplicate and again[0] == "ok" and again[1].duplicate, f"{where}: {first}, {again}"
        for reply in (first[1], again[1]):
            assert not {e.event_id for e in reply.events} & their_events, f"{where}: told their events"
            assert all(e.seat in (spy, -1) for e in reply.events), f"{where}: {reply.events}"
        assert [e.event_id for e in again[1].events] == [e.event_id for e in first[1].events], where


# -- the replay service and the read models while the match is live -----------------------------------
def stream_of(s: Services, table: Table, token: str | None) -> list[game_pb.StreamEventsResponse]:
    return list(s.game.StreamEvents(game_pb.StreamEventsRequest(match_id=table.match_id, until_now=True),
                                    metadata=_metadata(token), timeout=DEADLINE))


@pytest.mark.parametrize("game_id", GAMES)
def test_the_replay_service_shows_a_seat_of_a_live_match_what_its_game_service_calls_do(
        stubs: Services, game_id: str) -> None:
    """GC-H12, GR-H10, NC-H16, NP-H10 (and every seat's own H rules): while the match runs, a seat
    token (or none) gets from ReplayService what GameService tells it, no more: StreamReplay
    shows the events StreamEvents does, redacted alike, with the same seats and command ids
    (its own only) and the same unattributed ones; ListMatchEvents names exactly those and
    shows every other event's place only (no id, type, seat, time or command id); GetStateAt at
    its latest event shows its GetView's view and asks; the full view, ExportMatch and
    VerifyMatch are `match_running`."""
    s = stubs
    table = new_table(s, game_id, seed=5)
    play_to(s, table, 30)
    for seat, token in [(None, None), *enumerate(table.tokens)]:
        streamed = [r for r in stream_of(s, table, token) if r.HasField("event")]
        steps = list(s.replay.StreamReplay(replay_pb.StreamReplayRequest(match_id=table.match_id),
                                           metadata=_metadata(token), timeout=DEADLINE))
        shown = [step for step in steps if step.type != "match_created"]
        event_type = table.engine.info.event_type
        assert [(st.seq, st.type, st.seat, st.command_id, event_type.FromString(st.event.value), st.event_text)
                for st in shown] == \
            [(r.version, r.event.type, r.event.seat, r.event.command_id, event_type.FromString(r.event.event.value),
              r.event.text) for r in streamed], f"{game_id}, seat {seat}: StreamReplay and StreamEvents differ"
        listed = s.replay.ListMatchEvents(replay_pb.ListMatchEventsRequest(match_id=table.match_id, page_size=1000),
                                          metadata=_metadata(token)).events
        visible = [e for e in listed if not e.hidden and e.type != "match_created"]
        assert [(e.seq, e.type, e.seat, e.command_id, e.event_id) for e in visible] == \
            [(r.version, r.event.type, r.event.seat, r.event.command_id, r.event.event_id) for r in streamed]
        for e in listed:
            if e.hidden:
                assert (e.event_id, e.type, e.seat, e.command_id, e.timestamp_ms) == ("", "", -1, "", 0), e
            assert not e.command_id or e.seat == seat, f"{game_id}: seat {seat} sees another seat's command id"
        view = s.game.GetView(game_pb.GetViewRequest(match_id=table.match_id), metadata=_metadata(token))
        latest = streamed[-1].event
        # After a hidden event the latest the seat may name is earlier; and a seat whose answer is
        # held sees it in its own view, not in the stream's (NP-H9).
        if latest.seq == view.version and seat not in table.held:
            at = s.replay.GetStateAt(replay_pb.GetStateAtRequest(event_id=latest.event_id, match_id=table.match_id),
                                     metadata=_metadata(token))
            assert at.view.value == view.view.value, f"{game_id}, seat {seat}: GetStateAt shows another view"
            assert [(p.seat, p.kind, p.label) for p in at.to_act] == [(p.seat, p.kind, p.label) for p in view.to_act]
            assert not at.seat_views
            view_type = table.engine.info.view_type
            assert at.text == text_format.MessageToString(view_type.FromString(view.view.value))
        for call, request in (
            (s.replay.GetStateAt, replay_pb.GetStateAtRequest(event_id=latest.event_id, match_id=table.match_id,
                                                              full=True)),
            (s.replay.ExportMatch, replay_pb.ExportMatchRequest(match_id=table.match_id)),
            (s.replay.VerifyMatch, replay_pb.VerifyMatchRequest(match_id=table.match_id)),
        ):
            assert said(call, request, token)[1:3] == (C.PERMISSION_DENIED, "match_running"), (game_id, seat, call)
        full = said(s.replay.StreamReplay, replay_pb.StreamReplayRequest(match_id=table.match_id, full=True), token,
                    stream=True)
        assert full[1:3] == (C.PERMISSION_DENIED, "match_running")


@pytest.mark.parametrize("game_id", GAMES)
def test_the_read_models_of_a_live_match_show_no_seed_score_or_outcome(
        stack: Stack, stubs: Services, game_id: str) -> None:
    """GC-H11/H13, GR-H11, NC-H16, NP-H10: QueryService needs no token, so while a match runs it
    shows what a spectator may know: no seed (it predicts every deal), no seat's score, rank,
    details or win, no outcome; its version is the public one (GetView's)."""
    s = stubs
    table = new_table(s, game_id, seed=9)
    play_to(s, table, 20)
    stack.projection.unpark(table.match_id)  # project the match's stream as the consumer would
    summary = s.query.GetMatchSummary(query_pb.GetMatchSummaryRequest(match_id=table.match_id)).match
    listed = [m for m in s.query.ListMatches(query_pb.ListMatchesRequest(game_id=game_id)).matches
              if m.match_id == table.match_id]
    version = s.game.GetView(game_pb.GetViewRequest(match_id=table.match_id)).version
    for record in (summary, *listed):
        assert record.status == query_pb.MATCH_STATUS_LIVE
        assert not record.HasField("seed") and not record.outcome and not record.HasField("finished_at")
        assert record.version == version
        for seat in record.seats:
            assert not (seat.HasField("score") or seat.HasField("rank") or seat.winner or seat.details), seat



@pytest.mark.parametrize("game_id", GAMES)
def test_an_event_is_told_alike_wherever_a_seat_starts_reading(stubs: Services, game_id: str) -> None:
    """GC-H10, GR-H07, NC-H03, NP-H9: a public event of a command that also made an event hidden
    from the seat is shown unattributed (no seat, no command id), else it would name who acted.
    Where the seat starts reading must not undo that: StreamEvents from every version, StreamReplay
    from every seq and ListMatchEvents a page of one event at a time tell each event exactly as
    reading from the start does."""
    s = stubs
    table = new_table(s, game_id, seed=13)
    play_to(s, table, 40)
    for seat, token in [(None, None), *enumerate(table.tokens)]:
        whole = [r.event.SerializeToString(deterministic=True) for r in stream_of(s, table, token)
                 if r.HasField("event")]
        replayed = [step for step in s.replay.StreamReplay(replay_pb.StreamReplayRequest(
            match_id=table.match_id, without_views=True), metadata=_metadata(token), timeout=DEADLINE)]
        listed = s.replay.ListMatchEvents(replay_pb.ListMatchEventsRequest(match_id=table.match_id, page_size=1000),
                                          metadata=_metadata(token))
        seqs = [game_pb.SeatEvent.FromString(e).seq for e in whole]
        # Every start just before or inside a command shown unattributed (or the server's), and some others.
        inside = {start for e in map(game_pb.SeatEvent.FromString, whole) if e.seat == -1
                  for start in range(max(0, e.seq - 3), e.seq)}
        chooser = random.Random(seat)
        starts = sorted({*chooser.sample(sorted(inside), min(len(inside), 20)),
                         *chooser.sample(range(listed.last_seq), 8)})
        for start in starts:
            tail = [r.event.SerializeToString(deterministic=True) for r in s.game.StreamEvents(
                game_pb.StreamEventsRequest(match_id=table.match_id, from_version=start, until_now=True),
                metadata=_metadata(token), timeout=DEADLINE) if r.HasField("event")]
            assert tail == [e for e, seq in zip(whole, seqs, strict=True) if seq > start], (game_id, seat, start)
            steps = s.replay.StreamReplay(replay_pb.StreamReplayRequest(
                match_id=table.match_id, from_seq=start + 1, without_views=True), metadata=_metadata(token),
                timeout=DEADLINE)
            assert [(st.seq, st.seat, st.command_id, st.event_id) for st in steps] == \
                [(st.seq, st.seat, st.command_id, st.event_id) for st in replayed if st.seq > start], (game_id, seat, start)
            page = s.replay.ListMatchEvents(replay_pb.ListMatchEventsRequest(
                match_id=table.match_id, page_size=1, page_token=str(start + 1)), metadata=_metadata(token)).events
            assert list(page) == [listed.events[start]], (game_id, seat, start)
