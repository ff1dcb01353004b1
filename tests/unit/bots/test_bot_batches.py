"""Several bot seats asked at once (a simultaneous secret choice) get one decide task carrying
each seat's own view and legal commands; the worker submits them one after another, each at
the version the previous answer returned, and the dispatcher queues nothing for them while
that task plays them (dispatcher.py `_queue_bots`, handlers.py `play_bot_decisions`).

Every worker test runs twice: with the seats sent in one SubmitCommands call (the command
service's own servicer over the in-process app), and against a command service without
that call (UNIMPLEMENTED), where the worker submits them one call each."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import grpc
import pytest

from famiglia.client.game_client import GameClient
from famiglia.grpcutil.errors import AppError
from famiglia.matchstate import command_key
from famiglia.v1 import game_service_pb2 as pb
from services.bots import handlers
from services.bots.payload import LEGAL_LIMIT, bot_command_id
from services.command.app import Viewer
from services.command.entrypoints.grpc_server import GameServicer

from .secret_card import ENGINE as SECRET
from .secret_card import GAME_ID, secret_registry
from .test_dispatcher import Table, handle_with_a_lost_batch


class _RpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str = "") -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


@dataclass
class LocalSeat:
    """A SeatClient over the in-process command service; pumps the dispatcher after each submit,
    as the partition stream would hand it the command's events."""

    table: Table
    match_id: str
    seat: int
    token: str = ""
    reads: list[str] = field(default_factory=list)
    submitted: list[tuple[str, int]] = field(default_factory=list)

    def _call(self, call, *args, **kwargs):
        try:
            return call(*args, **kwargs)
        except AppError as exc:
            raise _RpcError(exc.status, exc.code) from None
        except Exception as exc:  # noqa: BLE001 - as the server's `@rpc` answers any other error
            raise _RpcError(grpc.StatusCode.INTERNAL, f"internal error: {exc!r}") from None

    def view(self):
        self.reads.append("view")
        answer = self._call(self.table.app.get_view, self.match_id, Viewer(self.seat))
        return SimpleNamespace(finished=answer.result is not None, version=answer.version,
                               to_act=[SimpleNamespace(seat=p.seat) for p in answer.to_act],
                               view=SimpleNamespace(value=answer.view.SerializeToString()))

    def legal_commands(self, limit: int = 0):
        self.reads.append("legal")
        answer = self._call(self.table.app.legal_commands, self.match_id, Viewer(self.seat), limit)
        return SimpleNamespace(version=answer.version, complete=answer.complete,
                               commands=[SimpleNamespace(value=c.SerializeToString()) for c in answer.commands])

    def submit(self, command, *, command_id=None, expected_version=None, omit_events=False):
        self.submitted.append((command_id, expected_version))
        done = self._call(self.table.app.submit, self.match_id, Viewer(self.seat), command_id, command,
                          expected_version, omit_events=omit_events)
        self.table.pump(self.match_id)
        return pb.SubmitCommandResponse(version=done.version, duplicate=done.duplicate, held=done.held)


class _Context:
    def invocation_metadata(self):
        return ()


class _NoChannel:
    """Enough of a channel for GameClient to build its stub (replaced below); it never connects."""

    def unary_unary(self, *args, **kwargs):
        return None

    unary_stream = stream_unary = stream_stream = unary_unary


class LocalStub:
    """GameService's SubmitCommands as the command service serves it (its servicer over the
    in-process app), or UNIMPLEMENTED (`chained=False`: a command service without the call).
    Each command it took or refused is recorded on its seat as that seat's submit would
    be; the dispatcher is pumped once, after the call, as the partition stream would."""

    def __init__(self, worker: LocalWorker, chained: bool) -> None:
        self.worker, self.chained = worker, chained
        self.calls: list[int] = []  # the number of commands in each call

    def SubmitCommands(self, request, metadata=None, timeout=None):  # noqa: N802 - gRPC's name
        if not self.chained:
            raise _RpcError(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        table = self.worker.table
        self.calls.append(len(request.commands))
        try:  # the servicer's own method, its errors as the status the client would get
            reply = GameServicer.SubmitCommands.__wrapped__(GameServicer(table.app), request, _Context())
        except AppError as exc:
            raise _RpcError(exc.status, exc.code) from None
        except Exception as exc:  # noqa: BLE001 - as the server's `@rpc` answers any other error
            table.pump(request.match_id)  # what the chain took before the failing entry
            raise _RpcError(grpc.StatusCode.INTERNAL, f"internal error: {exc!r}") from None
        tried = len(reply.results) + (1 if reply.HasField("refusal") else 0)
        at = request.expected_version
        for i, entry in enumerate(request.commands[:tried]):
            claim = table.app.signer.read_seat(entry.seat_token)
            seat = self.worker.seat(request.match_id, claim.seat)
            seat.submitted.append((entry.command_id.replace("{version}", str(at)), at))
            if i < len(reply.results):
                at = reply.results[i].version
        table.pump(request.match_id)
        return reply


@dataclass
class LocalWorker:
    """The worker's side of a decide task (a BotsApp as handlers.py uses it), in process."""

    table: Table
    seats: dict[tuple[str, int], LocalSeat] = field(default_factory=dict)
    chained: bool = True

    def __post_init__(self) -> None:
        self.game_client = GameClient(channel=_NoChannel())  # type: ignore[arg-type]
        self.stub = self.game_client.stub = LocalStub(self, self.chained)  # type: ignore[assignment]

    @property
    def registry(self):
        return self.table.dispatcher.registry

    @property
    def store(self):
        return self.table.store

    def seat(self, match_id: str, seat: int) -> LocalSeat:
        if (match_id, seat) not in self.seats:
            self.seats[match_id, seat] = LocalSeat(self.table, match_id, seat,
                                                   token=self.table.app.signer.seat_token(match_id, seat))
        return self.seats[match_id, seat]

    def play(self, task: int = -1) -> list[str]:
        """Play the `task`-th decide task the dispatcher queued, as the worker would."""
        tasks = self.table.tasks
        match_id, seat, version, policy = tasks.decisions[task]
        batch = [(seat, policy, tasks.payloads[task]), *tasks.thens[task]]
        return handlers.play_bot_decisions(self, match_id, GAME_ID, version, batch)  # type: ignore[arg-type]


def secret_table(now: list[float] | None = None) -> Table:
    return Table(now=now, registry=secret_registry())


def three_bots(table: Table, **options: str) -> str:
    return table.create({0: "random", 1: "heuristic", 2: "random"}, seats=3, seed=5, game=GAME_ID, **options)


def test_bot_seats_asked_at_once_get_one_task_with_each_seats_own_view_and_legal_commands() -> None:
    table = secret_table()
    match_id = three_bots(table)
    table.pump(match_id)
    version = table.version(match_id)
    [(_, first, at, policy)] = table.tasks.decisions
    then = table.tasks.thens[0]
    order = [first] + [s for s, _, _ in then]
    assert at == version and policy == {0: "random", 1: "heuristic", 2: "random"}[first]
    assert order[0] == version % 3 and sorted(order) == [0, 1, 2]  # the first seat rotates with the version
    assert order == [(order[0] + i) % 3 for i in range(3)]
    payloads = {first: table.tasks.payloads[0]} | {s: p for s, _, p in then}
    hands = set()
    for seat, payload in payloads.items():
        legal = table.app.legal_commands(match_id, Viewer(seat), LEGAL_LIMIT)
        assert payload.legal == tuple(c.SerializeToString() for c in legal.commands)
        if seat == 1:  # heuristic: its own view, exactly what GetView answers that seat
            view = table.app.get_view(match_id, Viewer(seat)).view
            assert payload.view == view.SerializeToString()
            assert set(SECRET.info.view_type.FromString(payload.view).hand) == set(view.hand)
        else:
            assert payload.view == b""  # random reads no view
        hands.add(tuple(sorted(SECRET.info.command_type.FromString(c).play.card for c in payload.legal)))
    assert len(hands) == 3  # each seat's own cards, no other's


def test_views_never_cross_seats_in_a_batch(monkeypatch: pytest.MonkeyPatch, chained: bool) -> None:
    table = secret_table()
    match_id = table.create({0: "heuristic", 1: "heuristic", 2: "heuristic"}, seats=3, seed=5, game=GAME_ID)
    table.pump(match_id)
    seen: list[tuple[int, tuple[int, ...], tuple[int, ...]]] = []

    class Spy:
        def choose(self, rules, decision):
            seen.append((decision.seat, tuple(decision.view.hand), tuple(c.play.card for c in decision.legal)))
            return decision.legal[0]

    monkeypatch.setattr(handlers, "make_policy", lambda name: Spy())
    state_before = table.app.matches.get(match_id).match.state
    assert LocalWorker(table, chained=chained).play() == ["submitted"] * 3
    for seat, hand, legal in seen:
        assert hand == state_before.hands[seat] and set(legal) == set(hand)  # its own hand only


def test_a_batch_is_submitted_in_order_and_nothing_is_queued_until_it_is_done(chained: bool) -> None:
    table = secret_table()
    match_id = three_bots(table)
    table.pump(match_id)
    version = table.version(match_id)
    worker = LocalWorker(table, chained=chained)
    order = [table.tasks.decisions[0][1]] + [s for s, _, _ in table.tasks.thens[0]]
    assert worker.play() == ["submitted"] * 3
    submitted = [worker.seats[(match_id, s)].submitted for s in order]
    assert [x[0][1] for x in submitted] == [version, version + 1, version + 2]  # each at the previous answer's
    assert [x[0][0] for x in submitted] == [bot_command_id(match_id, version + i, s) for i, s in enumerate(order)]
    assert worker.stub.calls == ([3] if chained else [])  # one SubmitCommands call for the three seats
    # Each submit was pumped to the dispatcher at once: nothing was queued until the trick was
    # complete, then one task for the next trick, at the version the batch reached.
    assert len(table.tasks.decisions) == 2
    assert table.tasks.decisions[1][2] == table.version(match_id) == version + 3


def test_a_whole_match_of_simultaneous_choices_takes_one_task_a_trick(chained: bool) -> None:
    table = secret_table()
    match_id = three_bots(table, hand="4")
    table.pump(match_id)
    worker = LocalWorker(table, chained=chained)
    played = 0
    while match_id in table.dispatcher.matches:
        assert len(table.tasks.decisions) == played + 1  # never a duplicate task
        assert worker.play() == ["submitted"] * 3
        played += 1
    assert played == 4 and table.observer.finished == [match_id]
    assert worker.stub.calls == ([3] * 4 if chained else [])


def test_one_seat_per_task_queues_one_task_per_decision_the_next_when_the_version_moves(chained: bool) -> None:
    table = secret_table()
    table.dispatcher.seats_per_task = 1  # FAMIGLIA_BOTS_SEATS_PER_TASK=1
    match_id = three_bots(table, hand="4")
    table.pump(match_id)
    worker = LocalWorker(table, chained=chained)
    moves = 0
    while match_id in table.dispatcher.matches:
        assert len(table.tasks.decisions) == moves + 1  # one task, one seat, never a duplicate
        assert worker.play() == ["submitted"]
        moves += 1
    assert moves == 4 * 3 and table.observer.finished == [match_id]
    assert worker.stub.calls == []  # a seat a task: SubmitCommand, as ever


def test_an_outside_command_breaks_the_batch_and_the_rest_of_it_is_stale(chained: bool) -> None:
    table = secret_table()
    match_id = table.create({0: "random", 1: "random", 2: "random"}, seats=3, seed=5, game=GAME_ID)
    table.pump(match_id)
    version = table.version(match_id)
    first, second, third = [table.tasks.decisions[0][1]] + [s for s, _, _ in table.tasks.thens[0]]
    worker = LocalWorker(table, chained=chained)
    batch = [(first, "random", table.tasks.payloads[0]), *table.tasks.thens[0]]
    # The worker plays the first seat (then, say, is slow): the dispatcher waits on the batch.
    assert handlers.play_bot_decisions(worker, match_id, GAME_ID, version, batch[:1]) == ["submitted"]  # type: ignore[arg-type]
    assert len(table.tasks.decisions) == 1
    # Something else moves the match (a human's command, an admin's, a clock): the batch is broken,
    # and the seat still asked gets a task of its own at the new version.
    hot = table.app.matches.get(match_id).match
    card = SECRET.legal_commands(hot.state, second)[0]
    table.app.submit(match_id, Viewer(second), "outside-1", card, hot.version)
    table.pump(match_id)
    assert table.tasks.decisions[1:] == [(match_id, third, table.version(match_id), "random")]
    assert table.tasks.thens[1] == ()
    # The batch's worker goes on (a redelivery, here): its first seat is a duplicate, the next stale.
    handlers._REACHED.clear()
    moved = table.version(match_id)
    assert handlers.play_bot_decisions(worker, match_id, GAME_ID, version, batch) == ["duplicate", "stale"]  # type: ignore[arg-type]
    assert table.version(match_id) == moved
    assert not worker.seats.get((match_id, third), LocalSeat(table, match_id, third)).submitted


def test_a_later_seat_refused_is_decided_afresh_from_what_it_may_do_now(monkeypatch: pytest.MonkeyPatch, chained: bool) -> None:
    """With `parity`, the first card on a trick restricts the others: a later seat's payload
    (made before) may list a card it can no longer play."""
    table = secret_table()
    match_id = table.create({0: "heuristic", 1: "heuristic", 2: "heuristic"}, seats=3, seed=5, game=GAME_ID,
                            parity="1")
    table.pump(match_id)
    version = table.version(match_id)
    order = [table.tasks.decisions[0][1]] + [s for s, _, _ in table.tasks.thens[0]]
    hands = table.app.matches.get(match_id).match.state.hands
    first_card = max(hands[order[0]])
    parity = first_card % 2

    class Contrary:
        """The first seat plays its highest card; the others a card of the other parity if they hold one."""

        def choose(self, rules, decision):
            cards = [c.play.card for c in decision.legal]
            if decision.seat == order[0]:
                return decision.legal[cards.index(first_card)]
            other = [i for i, c in enumerate(cards) if c % 2 != parity]
            return decision.legal[other[0] if other else 0]

    monkeypatch.setattr(handlers, "make_policy", lambda name: Contrary())
    worker = LocalWorker(table, chained=chained)
    assert worker.play() == ["submitted"] * 3
    refused = [s for s in order[1:] if {c % 2 for c in hands[s]} == {0, 1}]
    assert refused, "the seed should give a later seat both parities"
    for seat in order:
        client = worker.seats[(match_id, seat)]
        if seat in refused:
            assert client.reads == ["view", "legal"]  # read afresh, as a task without a payload would
            assert len(client.submitted) == 2 and client.submitted[0] == client.submitted[1]  # same id, same version
        else:
            assert client.reads == []
    match = table.app.matches.get(match_id).match
    assert [match.commands.get(command_key(s, bot_command_id(match_id, version + i, s))) for i, s in enumerate(order)] == [
        (version + i + 1, version + i + 1) for i in range(3)]
    assert len(table.tasks.decisions) == 2  # nothing queued meanwhile; then the next trick
    assert worker.stub.calls == ([3] if chained else [])  # the seats after the refused one: a call each


def test_a_redelivered_batch_is_answered_from_the_first_answers(chained: bool) -> None:
    table = secret_table()
    match_id = three_bots(table)
    table.pump(match_id)
    version = table.version(match_id)
    worker = LocalWorker(table, chained=chained)
    tasks = table.tasks
    batch = [(tasks.decisions[0][1], tasks.decisions[0][3], tasks.payloads[0]), *tasks.thens[0]]
    # Killed after its first seat's submit: the match waits there ...
    assert handlers.play_bot_decisions(worker, match_id, GAME_ID, version, batch[:1]) == ["submitted"]  # type: ignore[arg-type]
    # ... until the message comes back (another process: it knows nothing of the match).
    handlers._REACHED.clear()
    assert handlers.play_bot_decisions(worker, match_id, GAME_ID, version, batch) == [  # type: ignore[arg-type]
        "duplicate", "submitted", "submitted"]
    after = table.version(match_id)
    assert after == version + 3
    handlers._REACHED.clear()
    assert handlers.play_bot_decisions(worker, match_id, GAME_ID, version, batch) == ["duplicate"] * 3  # type: ignore[arg-type]
    assert table.version(match_id) == after
    ids = [command_key(s, bot_command_id(match_id, version + i, s)) for i, (s, _, _) in enumerate(batch)]
    assert all(i in table.app.matches.get(match_id).match.commands for i in ids)
    assert len(table.tasks.decisions) == 2  # the next trick's, once


def test_a_batch_left_unplayed_is_queued_again_after_the_stall_time_from_its_last_move(chained: bool) -> None:
    now = [100.0]
    table = secret_table(now)
    match_id = three_bots(table)
    table.pump(match_id)
    version = table.version(match_id)
    worker = LocalWorker(table, chained=chained)
    batch = [(table.tasks.decisions[0][1], table.tasks.decisions[0][3], table.tasks.payloads[0]),
             *table.tasks.thens[0]]
    now[0] = 108.0
    assert handlers.play_bot_decisions(worker, match_id, GAME_ID, version, batch[:1]) == ["submitted"]  # type: ignore[arg-type]
    now[0] = 115.0  # 15 s after the task, 7 s after its last move: the worker may still be playing it
    assert table.dispatcher.check_stalls() == 0
    now[0] = 118.5  # 10 s without a move: its worker is gone; whoever is still asked gets a task
    assert table.dispatcher.check_stalls() == 1
    (_, seat, at, _), then = table.tasks.decisions[-1], table.tasks.thens[-1]
    assert at == version + 1 and sorted([seat] + [s for s, _, _ in then]) == sorted(s for s, _, _ in batch[1:])
    assert worker.play() == ["submitted"] * 2
    assert table.tasks.decisions[-1][2] == version + 3  # the next trick


def test_a_batch_whose_send_fails_is_queued_again_whole_by_the_redo() -> None:
    table = secret_table()
    match_id = three_bots(table)
    envelopes = table.store.read(match_id)
    handle_with_a_lost_batch(table, envelopes)
    assert table.dispatcher.matches[match_id].seat_batch is None and not table.dispatcher.matches[match_id].sent
    table.tasks.thens.clear()
    table.dispatcher.handle(envelopes)  # the unacked entries come again
    assert len(table.tasks.decisions) == 1 and len(table.tasks.thens[0]) == 2
    assert table.dispatcher.matches[match_id].seat_batch is not None


def test_a_command_the_engine_fails_on_is_passed_over_for_another_listed_one(monkeypatch: pytest.MonkeyPatch,
                                                                              chained: bool) -> None:
    """An engine that raises on one command (a bug: the command service answers INTERNAL, not a
    rule's refusal) used to be retried by Celery with that very command, and every task the stall
    timer queued again chose it again (the same seed): the bot seats never moved again. The
    seat now plays another of its listed commands instead, as for a refused one, and the match
    goes on to its end. Fails if a command the server failed on is only ever sent again."""
    table = secret_table()
    match_id = three_bots(table, hand="4")
    table.pump(match_id)
    failing = type(SECRET).decide

    def decide(self, state, seat, command, rng):
        if len(state.hands[seat]) > 1 and command.play.card == max(state.hands[seat]):
            raise RuntimeError("engine bug: the highest card of a hand")
        return failing(self, state, seat, command, rng)

    class Highest:
        def choose(self, rules, decision):
            return max(decision.legal, key=lambda c: c.play.card)

    monkeypatch.setattr(type(SECRET), "decide", decide)
    monkeypatch.setattr(handlers, "make_policy", lambda name: Highest())
    worker = LocalWorker(table, chained=chained)
    tricks = 0
    while match_id in table.dispatcher.matches and tricks < 8:
        outcomes = worker.play()
        assert set(outcomes) == {"submitted"}, outcomes
        tricks += 1
    assert table.observer.finished == [match_id]
