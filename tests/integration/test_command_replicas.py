"""Three command replicas on one redis-server, playing the same match in random interleavings.

Each replica keeps the match hot in memory and only learns of the others' commands on a
version conflict, a stale version or a read, so any replica may be behind the store when a
command reaches it. A seat reads its legal commands on one replica and submits later, maybe
on another; commands are retried, their ids reused, chained (SubmitCommands) and refused.
Afterwards the stored stream, folded from scratch, is every replica's state, re-deciding it
diverges nowhere, and no command id is stored twice. Along the way: a retry answers with the
first answer, a stale `expected_version` (and only that) is `stale_version`, a rule's refusal
is what the store's latest state refuses, and every refusal is an AppError with a stable code.
Nothing Personal plays with a person at the table, so its window answers are held (NP-H9) on
one replica and written out in their slots by whichever replica makes the next public command.
`make test` plays two seeds of each game for a stretch; `make soak` (FAMIGLIA_PROFILE=soak)
thirty, each of up to 4,000 actions, and races longer in threads.
"""

from __future__ import annotations

import random
import re
import threading
from collections import defaultdict
from dataclasses import dataclass, field

import grpc
import pytest
from google.protobuf.message import Message

from famiglia.engine import Rng, RuleViolation
from famiglia.engine.registry import default_registry
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil.errors import AppError
from famiglia.matchstate import MatchState
from famiglia.replay.verify import verify_envelopes
from services.command.app import ChainedCommand, CommandApp, NextSeat, Submitted
from services.command.bootstrap import bootstrap
from tests.profile import examples
from tests.unit.command.test_held_answers import SETTINGS, _same_fold

pytestmark = pytest.mark.redis

REGISTRY = default_registry()
GAMES = sorted(REGISTRY)
#: A stable code: one of ours (`stale_version`) or a rule id of a game's book (`NP-H9`, `GC-A03`).
STABLE_CODE = re.compile(r"^(?:[a-z][a-z_]*[a-z]|[A-Z]{2}-[A-Z]*[0-9]+[a-z]?)$")
#: Actions a match is played for: the quick profile a stretch, soak up to 4,000 (most games end first).
STEPS = examples(260, 4000)


def _answer(done: Submitted) -> tuple:
    """What a seat is answered, as comparable values."""
    return (done.version, done.held, [(e.envelope.seq, e.envelope.type, e.envelope.seat, e.envelope.command_id,
                                       e.event.SerializeToString(deterministic=True), e.unattributed, e.held)
                                      for e in done.events])


def _payloads(answer: tuple) -> list[tuple]:
    """An answer's events without where they landed (a held answer is written out elsewhere)."""
    return [(kind, seat, command_id, payload) for _seq, kind, seat, command_id, payload, _u, _h in answer[2]]


@dataclass
class Taken:
    """A command the match took: who sent it, under which id, and its first answer."""

    seat: int
    command_id: str
    command: Message
    expected: int | None
    answer: tuple


@dataclass
class Tally:
    """What a run did, so a run that exercised nothing fails."""

    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __getitem__(self, key: str) -> int:
        return self.counts[key]

    def add(self, key: str, n: int = 1) -> None:
        with self.lock:
            self.counts[key] += n


class Table:
    """One match on one Redis, and the replicas that serve it, each on its own connections."""

    def __init__(self, redis_url: str, game_id: str, seed: int, replicas: int = 3) -> None:
        self.rng = random.Random(seed)
        self.stores = [RedisEventStore.connect(redis_url) for _ in range(replicas)]
        self.apps: list[CommandApp] = [bootstrap(store=s, settings=SETTINGS) for s in self.stores]
        engine = REGISTRY.get(game_id)
        self.seats = self.rng.randint(engine.info.min_players, engine.info.max_players)
        created = self.replica().create_match(game_id, self.seats, seed=seed)  # a person at the table
        self.match_id, self.tokens = created.match_id, created.seat_tokens
        self.engine = engine
        self.taken: list[Taken] = []
        self.chains: list[tuple[list[ChainedCommand], int, list[tuple]]] = []
        self.intents: list[tuple[int, Message, int]] = []  # (seat, command, the version it was read at)
        self.tally = Tally()
        self.lock = threading.Lock()
        self._ids = 0

    def close(self) -> None:
        for store in self.stores:
            store.close()

    # -- helpers ---------------------------------------------------------------------------
    def replica(self) -> CommandApp:
        return self.rng.choice(self.apps)

    def new_id(self, prefix: str = "c") -> str:
        with self.lock:
            self._ids += 1
            return f"{prefix}{self._ids}"

    def store_version(self) -> int:
        return self.stores[0].version(self.match_id)

    def fresh(self) -> MatchState:
        """The match as a process that has never seen it folds it from the store."""
        match = MatchState.from_envelopes(REGISTRY, self.stores[0].read(self.match_id))
        match.catch_up(self.stores[0])
        return match

    def viewer(self, app: CommandApp, seat: int | None):
        return app.viewer(self.match_id, None if seat is None else self.tokens[seat])

    def pending(self, app: CommandApp) -> list[int]:
        app.get_view(self.match_id, self.viewer(app, None))  # caught up with the store
        m = app.matches.get(self.match_id).match
        return sorted({p.seat for p in m.engine.pending(m.state)})

    def finished(self) -> bool:
        return self.fresh().finished

    def refused(self, exc: AppError) -> None:
        """Every refusal is a client's status with a stable code, never an internal error."""
        assert exc.status not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN), exc
        assert STABLE_CODE.match(exc.code), exc
        assert exc.message, exc
        self.tally.add(f"refused {exc.code}")

    def legal(self, app: CommandApp, seat: int) -> tuple[list[Message], int]:
        answer = app.legal_commands(self.match_id, self.viewer(app, seat), limit=24,
                                    sample_seed=self.rng.randrange(1, 2**31))
        return list(answer.commands), answer.version

    def record(self, seat: int, command_id: str, command: Message, expected: int | None, done: Submitted) -> None:
        assert not done.duplicate, (command_id, "a new id answered as a duplicate")
        if done.events:  # an accepted command that changes nothing is not stored: its id stays free
            with self.lock:
                self.taken.append(Taken(seat, command_id, command, expected, _answer(done)))
            self.tally.add("taken")
            self.tally.add("held" if done.held else "public")

    def same_answer(self, first: tuple, again: Submitted) -> None:
        """A duplicate answers as the first time: the same version and events; a held answer
        written out since, with its events where its slot put them (NP-H9)."""
        assert again.duplicate
        self.tally.add("duplicates")
        _version, held, _events = first
        if not held or again.held:
            assert _answer(again) == first
        else:
            assert _payloads(_answer(again)) == _payloads(first)
            self.tally.add("duplicates written out")

    # -- the actions -----------------------------------------------------------------------
    def read(self) -> None:
        """A seat (mostly one the game waits for) reads its legal commands on one replica,
        to submit one later (maybe much later, maybe on another replica)."""
        app = self.replica()
        pending = self.pending(app)
        seat = self.rng.choice(pending) if pending and self.rng.random() < 0.85 else self.rng.randrange(self.seats)
        commands, version = self.legal(app, seat)
        if commands:
            self.intents.append((seat, self.rng.choice(commands), version))
            del self.intents[:-8]

    def submit(self) -> None:
        if not self.intents:
            return self.read()
        i = len(self.intents) - 1 if self.rng.random() < 0.7 else self.rng.randrange(len(self.intents))
        seat, command, read_at = self.intents.pop(i)
        expected = read_at if self.rng.random() < 0.5 else None
        app, command_id = self.replica(), self.new_id()
        before = self.store_version()
        try:
            done = app.submit(self.match_id, self.viewer(app, seat), command_id, command, expected)
        except AppError as exc:
            self.refused(exc)
            if exc.code == "stale_version":  # only a version the match is not at
                assert expected is not None and expected != before, (expected, before)
            elif exc.status == grpc.StatusCode.FAILED_PRECONDITION and exc.code != "match_over":
                self._the_latest_state_refuses(seat, command, exc)
            else:
                assert exc.code == "match_over", exc
            return None
        assert expected is None or expected == before, ("taken at a stale version", expected, before)
        self.record(seat, command_id, command, expected, done)
        return None

    def _the_latest_state_refuses(self, seat: int, command: Message, exc: AppError) -> None:
        """A replica refuses only what the store's latest state refuses, not its own old state."""
        m = self.fresh()
        try:
            m.engine.decide(m.state, seat, command, Rng.derive(m.seed, m.version))
        except RuleViolation as violation:
            assert violation.code == exc.code, (violation.code, exc.code)
        else:
            raise AssertionError(f"refused {exc.code}, but the match's latest state takes it")

    def retry(self) -> None:
        """A command sent again under its id, on any replica, with the version it was first sent at."""
        if not self.taken:
            return
        taken = self.rng.choice(self.taken)
        app = self.replica()
        try:
            again = app.submit(self.match_id, self.viewer(app, taken.seat), taken.command_id, taken.command,
                               taken.expected)
        except AppError as exc:
            raise AssertionError(f"a retry of {taken.command_id} was refused: {exc}") from None
        self.same_answer(taken.answer, again)

    def reuse(self) -> None:
        """Another command under a seat's used id: refused, whatever the replica knows."""
        others = [(seat, command) for seat, command, _v in self.intents]
        if not self.taken or not others:
            return
        taken = self.rng.choice(self.taken)
        _seat, command = self.rng.choice(others)
        if command.SerializeToString(deterministic=True) == taken.command.SerializeToString(deterministic=True):
            return
        app = self.replica()
        with pytest.raises(AppError) as refused:
            app.submit(self.match_id, self.viewer(app, taken.seat), taken.command_id, command,
                       self.rng.choice([None, taken.expected]))
        self.refused(refused.value)
        assert refused.value.code == "command_id_reused", refused.value

    def chain(self) -> None:
        """The seats the game waits for, in one SubmitCommands call, each choosing from what it
        was told on one replica, the call made on another, maybe at a stale version."""
        reader = self.replica()
        pending = self.pending(reader)
        if not pending:
            return
        self.rng.shuffle(pending)
        by = self.new_id("ch")
        expected = self.rng.choice([None, reader.get_view(self.match_id, self.viewer(reader, None)).version])
        chain, commands = [], []
        for seat in pending[:4]:
            listed, _version = self.legal(reader, seat)
            if not listed:
                continue
            command = self.rng.choice(listed)
            # "{version}" names the version the entry goes in at: retried, only at the same version
            command_id = f"{by}:{{version}}:{seat}" if expected is not None else f"{by}:{seat}"
            chain.append(ChainedCommand(self.tokens[seat], command_id, "type.googleapis.com/"
                                        + command.DESCRIPTOR.full_name, command.SerializeToString()))
            commands.append((seat, command))
        if not chain:
            return
        app = self.replica()
        ask = [NextSeat(self.tokens[s], view=self.rng.random() < 0.5) for s in pending if self.rng.random() < 0.5]
        before = self.store_version()
        answer = app.submit_chain(self.match_id, chain, expected, ask_next=ask)
        self.tally.add("chains")
        if answer.refusal is not None:
            self.refused(answer.refusal)
            if answer.refusal.code == "stale_version":  # the first entry's version, not one held answers made
                assert answer.refused_at == 0 and expected is not None and expected != before, (
                    answer.refused_at, expected, before)
        for (seat, command), done in zip(commands, answer.taken, strict=False):
            if done.events:
                self.record(seat, done.events[0].envelope.command_id, command, None, done)
        if answer.refusal is None and expected is not None and all(done.events for done in answer.taken):
            # (an entry that changed nothing stored nothing: sent again, it is a new command)
            self.chains.append((chain, expected, [_answer(done) for done in answer.taken]))
        if ask and answer.next_version:
            assert answer.next_version == self.store_version()

    def retry_chain(self) -> None:
        """A whole call sent again: every entry its first answer."""
        if not self.chains:
            return
        chain, expected, first = self.rng.choice(self.chains)
        ask = [NextSeat(token, view=False) for token in self.tokens if self.rng.random() < 0.5]
        again = self.replica().submit_chain(self.match_id, chain, expected, ask_next=ask)
        assert again.refusal is None, (again.refused_at, again.refusal)
        if ask and again.next_version:  # asked about, as GetView would answer: the match as it is
            assert again.next_version == self.store_version(), (again.next_version, self.store_version())
        assert len(again.taken) == len(first)
        for answer, done in zip(first, again.taken, strict=True):
            self.same_answer(answer, done)

    def nonsense(self) -> None:
        """Refused input: an empty command, a version the match is not at, no seat token."""
        app, seat = self.replica(), self.rng.randrange(self.seats)
        kind = self.rng.choice(["empty", "stale", "spectator"] if self.intents else ["empty", "spectator"])
        empty = self.engine.info.command_type()
        with pytest.raises(AppError) as refused:
            if kind == "empty":
                app.submit(self.match_id, self.viewer(app, seat), self.new_id(), empty)
            elif kind == "stale":  # a command the seat was offered, at a version before or after the match's
                seat, command, _version = self.rng.choice(self.intents)
                app.submit(self.match_id, self.viewer(app, seat), self.new_id(), command,
                           self.store_version() + self.rng.choice([-1, 1]))
            else:
                app.submit(self.match_id, self.viewer(app, None), self.new_id(), empty)
        self.refused(refused.value)
        if refused.value.code != "match_over" or kind == "spectator" or not self.finished():
            assert refused.value.code == {"empty": "empty_command", "stale": "stale_version",
                                          "spectator": "no_token"}[kind], refused.value

    def play(self, steps: int) -> None:
        actions = [(self.read, 30), (self.submit, 40), (self.chain, 10), (self.retry, 8), (self.retry_chain, 3),
                   (self.reuse, 4), (self.nonsense, 2)]
        moves, weights = zip(*actions, strict=True)
        for step in range(steps):
            self.rng.choices(moves, weights)[0]()
            if step % 25 == 0 and self.finished():
                break

    # -- the checks ------------------------------------------------------------------------
    def check_agreement(self) -> None:
        """The stream folded from scratch is every replica's state; re-deciding it diverges
        nowhere; no command id is stored twice; every first answer is still the answer."""
        fresh = self.fresh()
        for app in self.apps:
            app.get_view(self.match_id, self.viewer(app, None))
            _same_fold(app.matches.get(self.match_id).match, fresh)
        stream = self.stores[0].read(self.match_id)
        report = verify_envelopes(REGISTRY, stream)
        assert report.divergence is None, report.divergence
        spans: dict[tuple[int, str], list[int]] = defaultdict(list)
        firsts: dict[tuple[int, str], int] = defaultdict(int)
        for env in [*stream, *self.stores[0].read_staged(self.match_id)]:
            if env.command_id:
                spans[env.seat, env.command_id].append(env.seq)
                firsts[env.seat, env.command_id] += bool(env.command)
        for key, seqs in spans.items():
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs))) and firsts[key] == 1, (key, seqs)
        assert {(t.seat, t.command_id) for t in self.taken} <= set(spans)
        for taken in self.rng.sample(self.taken, min(len(self.taken), 12)):
            for app in self.apps:
                self.same_answer(taken.answer, app.submit(self.match_id, self.viewer(app, taken.seat),
                                                          taken.command_id, taken.command, taken.expected))


@pytest.mark.parametrize("seed", range(1, 1 + examples(2, 30)))
@pytest.mark.parametrize("game_id", GAMES)
def test_replicas_interleaving_one_match_agree_with_its_stream(redis_url: str, game_id: str, seed: int) -> None:
    table = Table(redis_url, game_id, seed)
    try:
        table.play(STEPS)
        table.check_agreement()
        assert table.tally["taken"] and table.tally["duplicates"] and table.tally["chains"], table.tally.counts
        assert any(key.startswith("refused ") for key in table.tally.counts), table.tally.counts
        assert table.tally["held"] or not REGISTRY.get(game_id).info.held_events, table.tally.counts
    finally:
        table.close()


@pytest.mark.parametrize("seed", range(1, 1 + examples(1, 10)))
@pytest.mark.parametrize("game_id", GAMES)
def test_replicas_racing_on_one_match_in_threads_agree_with_its_stream(redis_url: str, game_id: str,
                                                                       seed: int) -> None:
    """The same, with the replicas racing for real: one thread a replica, each playing the
    seats the game waits for as its replica sees them; appends conflict and are decided again."""
    table = Table(redis_url, game_id, seed)
    errors: list[BaseException] = []
    moves = examples(60, 600)

    def play(app: CommandApp, rng: random.Random) -> None:
        try:
            for _ in range(moves):
                hot = app.matches.get(table.match_id)
                with hot.lock:
                    app.matches.catch_up(hot)
                    m = hot.match
                    if m.finished:
                        return
                    seats = sorted({p.seat for p in m.engine.pending(m.state)})
                if not seats:
                    return
                if len(seats) > 1 and rng.random() < 0.3:
                    chain(app, rng, seats)
                    continue
                seat = rng.choice(seats)
                try:
                    legal = app.legal_commands(table.match_id, table.viewer(app, seat), limit=24,
                                               sample_seed=rng.randrange(1, 2**31))
                    if not legal.commands:
                        continue
                    command, command_id = rng.choice(legal.commands), table.new_id("t")
                    expected = legal.version if rng.random() < 0.5 else None
                    done = app.submit(table.match_id, table.viewer(app, seat), command_id, command, expected)
                except AppError as exc:
                    table.refused(exc)
                    continue
                table.record(seat, command_id, command, expected, done)
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
            errors.append(exc)

    def chain(app: CommandApp, rng: random.Random, seats: list[int]) -> None:
        """The seats asked at once in one SubmitCommands call, while the other replicas race it."""
        entries, commands, by, expected = [], [], table.new_id("tc"), None
        for seat in rng.sample(seats, min(len(seats), 4)):
            legal = app.legal_commands(table.match_id, table.viewer(app, seat), limit=24,
                                       sample_seed=rng.randrange(1, 2**31))
            if not legal.commands:
                continue
            if expected is None and not entries and rng.random() < 0.5:
                expected = legal.version
            command = rng.choice(legal.commands)
            entries.append(ChainedCommand(table.tokens[seat], f"{by}:{{version}}:{seat}", "type.googleapis.com/"
                                          + command.DESCRIPTOR.full_name, command.SerializeToString()))
            commands.append((seat, command))
        if not entries:
            return
        answer = app.submit_chain(table.match_id, entries, expected)
        table.tally.add("chains")
        if answer.refusal is not None:
            table.refused(answer.refusal)
        for (seat, command), done in zip(commands, answer.taken, strict=False):
            if done.events:
                table.record(seat, done.events[0].envelope.command_id, command, None, done)

    try:
        threads = [threading.Thread(target=play, args=(app, random.Random(seed * 10 + i)))
                   for i, app in enumerate(table.apps)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
        table.check_agreement()
        assert table.tally["taken"] and table.tally["duplicates"], table.tally.counts
    finally:
        table.close()



def test_ask_next_after_a_retried_command_on_a_lagging_replica_is_the_match_as_it_is(redis_url: str) -> None:
    """SubmitCommands with `ask_next`, retried on a replica that has not seen another replica's
    command since: the retry is answered from its memory (the first answer), and `next` was
    then answered from that memory too, the decisions of a version the match had left, as if
    current. `next` is what GetView and ListLegalCommands answer: the match has moved on past
    where the retried command left it, so nothing, on every replica alike."""
    stores = [RedisEventStore.connect(redis_url) for _ in range(2)]
    try:
        one, two = (bootstrap(store=s, settings=SETTINGS) for s in stores)
        created = one.create_match("grifters", 2, seed=5)
        match_id, tokens = created.match_id, created.seat_tokens
        m = one.matches.get(match_id).match
        seat = m.engine.pending(m.state)[0].seat
        command = one.legal_commands(match_id, one.viewer(match_id, tokens[seat])).commands[0]
        chain = [ChainedCommand(tokens[seat], "x1", "type.googleapis.com/" + command.DESCRIPTOR.full_name,
                                command.SerializeToString())]
        ask = [NextSeat(token) for token in tokens]
        first = one.submit_chain(match_id, chain, ask_next=ask)
        assert first.refusal is None and first.next and first.next_version == stores[0].version(match_id)
        moved = two.matches.get(match_id).match  # the other replica plays the next seat's turn
        mover = moved.engine.pending(moved.state)[0].seat
        two.submit(match_id, two.viewer(match_id, tokens[mover]), "y1",
                   two.legal_commands(match_id, two.viewer(match_id, tokens[mover])).commands[0])
        assert stores[0].version(match_id) > first.next_version
        for replica in (one, two):
            again = replica.submit_chain(match_id, chain, ask_next=ask)
            assert again.refusal is None and again.taken[0].duplicate
            assert again.taken[0].version == first.taken[0].version
            assert (again.next, again.next_version) == ([], 0), (again.next_version, stores[0].version(match_id))
    finally:
        for store in stores:
            store.close()
