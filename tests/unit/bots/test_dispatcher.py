"""The dispatcher queues one task per pending bot decision and per human clock,
at the version the match is at, and never twice for the same (version, seat)."""

from __future__ import annotations

import base64
import contextlib
import threading
import time
from dataclasses import dataclass, field

import pytest

from famiglia.bots.policy import Decision
from famiglia.bots.random_policy import RandomPolicy
from famiglia.bots.toy import ENGINE as HIGHCARD
from famiglia.bots.toy import toy_registry
from famiglia.config import Settings
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.eventstore.port import PartitionEntry
from famiglia.matchstate import MatchState
from famiglia.v1 import envelope_pb2
from services.bots import dispatcher as dispatcher_module
from services.bots.dispatcher import Dispatcher, LiveMatches
from services.bots.payload import LEGAL_LIMIT, DecisionPayload, reads_view
from services.command.app import Viewer
from services.command.bootstrap import bootstrap as command_bootstrap


@dataclass
class FakeTasks:
    decisions: list[tuple] = field(default_factory=list)
    payloads: list = field(default_factory=list)
    clocks: list[tuple] = field(default_factory=list)
    thens: list = field(default_factory=list)
    """each decision's further seats (seat, policy, payload): () for a task of one seat"""

    def decide(self, match_id, game_id, seat, version, policy, trace=None, payload=None, then=()) -> None:
        self.decisions.append((match_id, seat, version, policy))
        self.payloads.append(payload)
        self.thens.append(tuple(then))

    def clock(self, match_id, seat, version, countdown, trace=None) -> None:
        self.clocks.append((match_id, seat, version, countdown))

    def batch(self):
        return contextlib.nullcontext()


@dataclass
class FakeObserver:
    moves: int = 0
    finished: list[str] = field(default_factory=list)

    def match_progress(self, tournament_id, match_id, commands) -> None:
        self.moves += commands

    def match_finished(self, tournament_id, match) -> None:
        self.finished.append(match.match_id)

    def flush(self) -> None:
        pass


class Table:
    """A command service on the in-memory store and a dispatcher reading what it writes."""

    def __init__(self, now: list[float] | None = None, registry=None) -> None:
        self.store = InMemoryEventStore()
        registry = registry or toy_registry()
        self.app = command_bootstrap(store=self.store, registry=registry, settings=Settings(secret="test"))
        self.tasks = FakeTasks()
        self.observer = FakeObserver()
        self.clock_now = now or [0.0]
        self.dispatcher = Dispatcher(self.store, registry, self.tasks, observer=self.observer,
                                     stall_seconds=10, clock_grace_seconds=0.5, now=lambda: self.clock_now[0])
        self.cursors: dict[str, int] = {}

    def create(self, bots: dict[int, str], seats: int = 2, seed: int = 3, game: str = "highcard",
               **options: str) -> str:
        info = [envelope_pb2.SeatInfo(seat=s, bot=True, policy=p, player_id=p) for s, p in bots.items()]
        created = self.app.create_match(game, seats, seed=seed, options=options, seat_info=info,
                                        tournament_id="t1")
        return created.match_id

    def pump(self, match_id: str) -> None:
        """Hand the dispatcher what is new in the match, as the partition stream would."""
        envelopes = self.store.read(match_id, after=self.cursors.get(match_id, 0))
        if envelopes:
            self.cursors[match_id] = envelopes[-1].seq
            self.dispatcher.handle(envelopes)

    def act(self, match_id: str, seat: int) -> int:
        hot = self.app.matches.get(match_id).match
        card = HIGHCARD.legal_commands(hot.state, seat)[0]
        return self.app.submit(match_id, Viewer(seat), f"c{hot.version}", card).version

    def version(self, match_id: str) -> int:
        return self.store.version(match_id)



def handle_with_a_lost_batch(table: Table, envelopes) -> None:
    """The dispatcher handles `envelopes` while the broker goes away at the end of its batch
    (the send raises); then the broker is back, and what the fake recorded is forgotten,
    since the broker never got it."""

    @contextlib.contextmanager
    def lost_batch():
        yield
        raise ConnectionError("broker away while sending the batch")

    table.tasks.batch = lost_batch  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        table.dispatcher.handle(envelopes)
    table.tasks.batch = FakeTasks.batch.__get__(table.tasks)  # type: ignore[method-assign]
    table.tasks.decisions.clear()

def test_a_bot_seat_gets_one_task_at_the_version_it_must_act_at() -> None:
    table = Table()
    match_id = table.create({0: "random", 1: "heuristic"})
    table.pump(match_id)
    version = table.version(match_id)
    assert table.tasks.decisions == [(match_id, 0, version, "random")]
    table.pump(match_id)  # nothing new: nothing queued again
    table.dispatcher.handle(table.store.read(match_id))  # a redelivered batch neither
    assert len(table.tasks.decisions) == 1


def test_a_decision_carries_what_the_read_rpcs_would_answer_that_seat_and_nothing_more() -> None:
    table = Table()
    match_id = table.create({0: "heuristic", 1: "heuristic"}, hand="3")
    table.pump(match_id)
    after = table.act(match_id, 0)
    table.pump(match_id)
    (_, seat, version, _), payload = table.tasks.decisions[-1], table.tasks.payloads[-1]
    assert (seat, version) == (1, after)
    view = table.app.get_view(match_id, Viewer(seat))
    legal = table.app.legal_commands(match_id, Viewer(seat), LEGAL_LIMIT)
    assert payload.view == view.view.SerializeToString()
    assert payload.legal == tuple(c.SerializeToString() for c in legal.commands)
    other = table.app.get_view(match_id, Viewer(0)).view.SerializeToString()
    assert payload.view != other  # the other seat's hand is not in it
    text = payload.to_json()  # the worker's JSON: standard base64 text, as before
    assert text == {"view": base64.b64encode(payload.view).decode(),
                    "legal": [base64.b64encode(c).decode() for c in payload.legal]}
    parsed_view, parsed_legal = DecisionPayload.from_json(text).messages(HIGHCARD)
    assert parsed_view == view.view and list(parsed_legal) == legal.commands
    assert DecisionPayload.from_json(None) is None  # an older message: the worker reads over gRPC


def test_a_random_seat_gets_its_legal_commands_and_no_view_and_chooses_as_with_one() -> None:
    """`random` never reads the view, so the dispatcher does not render it; the choice with the
    empty view must be the one the seat's real view gives (else the view must come back)."""
    table = Table()
    match_id = table.create({0: "random", 1: "Random"}, hand="3")
    table.pump(match_id)
    for _ in range(2):
        (_, seat, version, _), payload = table.tasks.decisions[-1], table.tasks.payloads[-1]
        legal = table.app.legal_commands(match_id, Viewer(seat), LEGAL_LIMIT)
        assert payload.view == b"" and payload.legal == tuple(c.SerializeToString() for c in legal.commands)
        parsed = DecisionPayload.from_json(payload.to_json())
        assert parsed is not None
        view, commands = parsed.messages(HIGHCARD)
        real = table.app.get_view(match_id, Viewer(seat)).view
        assert real != view  # the seat has a hand to see: an empty view is not the same message
        for seed in range(8):
            blind = Decision("highcard", seat, view, commands, version, seed)
            seeing = Decision("highcard", seat, real, tuple(legal.commands), version, seed)
            assert RandomPolicy().choose(HIGHCARD, blind) == RandomPolicy().choose(HIGHCARD, seeing)
        table.act(match_id, seat)
        table.pump(match_id)
    assert [policy for *_, policy in table.tasks.decisions] == ["random", "Random", "random"]
    assert reads_view("heuristic") and reads_view("ismcts?iterations=5") and not reads_view("Random")


def test_the_next_decision_is_queued_at_the_new_version() -> None:
    table = Table()
    match_id = table.create({0: "random", 1: "ismcts"})
    table.pump(match_id)
    after = table.act(match_id, 0)
    table.pump(match_id)
    assert table.tasks.decisions[-1] == (match_id, 1, after, "ismcts")
    assert table.observer.moves == 1


def test_human_seats_get_a_clock_and_no_bot_task() -> None:
    table = Table()
    match_id = table.create({1: "random"}, clock_s="30")
    table.pump(match_id)
    assert table.tasks.decisions == []
    assert table.tasks.clocks == [(match_id, 0, table.version(match_id), 30.5)]


def test_a_clock_queued_late_counts_from_its_event() -> None:
    """A dispatcher that comes to a clock late (restarted, behind) takes the delay off the
    countdown, beyond the grace that covers delivery; one past its time fires at once."""
    table = Table()
    match_id = table.create({1: "random"}, clock_s="30")
    stamped = table.store.read(match_id)[-1].timestamp.ToMilliseconds() / 1000
    for waited, countdown in ((0.3, 30.5), (10.5, 20.5), (95.0, 0.0)):
        table.tasks.clocks.clear()
        restarted = Dispatcher(table.store, table.dispatcher.registry, table.tasks, stall_seconds=10,
                               clock_grace_seconds=0.5, now=lambda: table.clock_now[0],
                               wall=lambda w=waited: stamped + w)
        restarted.handle(table.store.read(match_id))
        assert table.tasks.clocks == [(match_id, 0, table.version(match_id), pytest.approx(countdown))]


def test_a_clock_lost_on_its_way_is_queued_again_once_overdue_and_less_often_each_time() -> None:
    """A clock's message lost where no visibility timeout brings it back (a worker killed between
    its BRPOP and its unacked record, a clock that gave up its retries) left a seat whose person
    walked away asked for good. A match still at the clock's version `stall_seconds` after it ran
    out gets it again (same version and seat: the same command id), each wait twice the last."""
    now = [0.0]
    table = Table(now)
    match_id = table.create({1: "random"}, clock_s="30")
    stamped = table.store.read(match_id)[-1].timestamp.ToMilliseconds() / 1000
    table.dispatcher.wall = lambda: stamped + now[0]
    table.pump(match_id)
    version = table.version(match_id)
    assert table.tasks.clocks == [(match_id, 0, version, 30.5)]
    # ran out at 30.5: queued again at once 10 s later, then 20 s, then 40 s after that
    for at, queued in ((40.0, 1), (40.6, 2), (60.0, 2), (61.0, 3), (100.0, 3), (101.5, 4)):
        now[0] = at
        table.dispatcher.check_stalls()
        assert len(table.tasks.clocks) == queued, at
    assert table.tasks.clocks[1:] == [(match_id, 0, version, 0.0)] * 3  # past its time: it fires at once
    # the person moves: the next version's clock runs as usual, the old one is not queued again
    table.act(match_id, 0)
    table.pump(match_id)
    table.tasks.clocks.clear()
    now[0] = 200.0
    table.dispatcher.check_stalls()
    assert table.tasks.clocks == [] or all(c[2] > version for c in table.tasks.clocks)


def test_a_clock_the_broker_refused_to_queue_again_is_tried_at_the_next_check() -> None:
    now = [0.0]
    table = Table(now)
    match_id = table.create({1: "random"}, clock_s="30")
    table.pump(match_id)
    sent = table.tasks.clocks

    def away(*_args, **_kwargs) -> None:
        raise ConnectionError("broker away")

    table.tasks.clock = away  # type: ignore[method-assign]
    now[0] = 41.0
    with pytest.raises(ConnectionError):
        table.dispatcher.check_stalls()
    table.tasks.clock = FakeTasks.clock.__get__(table.tasks)  # type: ignore[method-assign]
    now[0] = 42.0
    table.dispatcher.check_stalls()
    assert len(sent) == 2 and sent[0][:3] == sent[1][:3]


def test_a_stalled_bot_decision_the_broker_refused_to_queue_again_is_tried_at_a_later_check() -> None:
    """Its key was dropped before the send: a refused send left the match looking like one whose
    people's clocks move it on, and no later check queued the bot's decision again."""
    now = [0.0]
    table = Table(now)
    match_id = table.create({0: "random", 1: "random"})
    table.pump(match_id)
    sent = table.tasks.decisions

    def away(*_args, **_kwargs) -> None:
        raise ConnectionError("broker away")

    table.tasks.decide = away  # type: ignore[method-assign]
    now[0] = 11.0
    with pytest.raises(ConnectionError):
        table.dispatcher.check_stalls()
    table.tasks.decide = FakeTasks.decide.__get__(table.tasks)  # type: ignore[method-assign]
    now[0] = 100.0
    assert table.dispatcher.check_stalls() == 1
    assert len(sent) == 2 and sent[0] == sent[1]


def test_human_seats_without_a_clock_wait_forever() -> None:
    table = Table()
    match_id = table.create({1: "random"})
    table.pump(match_id)
    assert table.tasks.decisions == [] and table.tasks.clocks == []


def test_an_unanswered_bot_decision_is_queued_again_after_the_stall_time() -> None:
    now = [0.0]
    table = Table(now)
    match_id = table.create({0: "random", 1: "random"})
    table.pump(match_id)
    now[0] = 5.0
    assert table.dispatcher.check_stalls() == 0
    now[0] = 11.0
    assert table.dispatcher.check_stalls() == 1
    assert table.tasks.decisions[0] == table.tasks.decisions[1]


def test_a_decision_stalled_again_waits_twice_as_long_each_time() -> None:
    """A worker still thinking is not buried under copies: 10 s, then 20, then 40 more."""
    now = [0.0]
    table = Table(now)
    match_id = table.create({0: "random", 1: "random"})
    table.pump(match_id)
    now[0] = 11.0
    assert table.dispatcher.check_stalls() == 1
    now[0] = 25.0
    assert table.dispatcher.check_stalls() == 0
    now[0] = 32.0
    assert table.dispatcher.check_stalls() == 1
    now[0] = 60.0
    assert table.dispatcher.check_stalls() == 0
    now[0] = 73.0
    assert table.dispatcher.check_stalls() == 1
    assert len(table.tasks.decisions) == 4 and len(set(table.tasks.decisions)) == 1
    # the match moves on: the next version's first wait is the plain stall time again
    _, seat, _, _ = table.tasks.decisions[-1]
    table.act(match_id, seat)
    table.pump(match_id)
    assert len(table.tasks.decisions) == 5
    now[0] = 73.0 + 11.0
    assert table.dispatcher.check_stalls() == 1
    assert table.tasks.decisions[-1] == table.tasks.decisions[-2] != table.tasks.decisions[0]


def test_a_decision_stalled_again_and_again_waits_at_most_16_times_the_stall_time() -> None:
    """docs/bots.md: each wait twice the last, up to 16x the stall time; never longer, or a
    decision whose worker keeps dying would wait ever longer for the next copy."""
    now = [0.0]
    table = Table(now)
    match_id = table.create({0: "random", 1: "random"})
    table.pump(match_id)
    queued = 0.0
    for wait in (10, 20, 40, 80, 160, 160, 160):
        now[0] = queued + wait - 0.5
        assert table.dispatcher.check_stalls() == 0, wait
        now[0] = queued + wait + 0.5
        assert table.dispatcher.check_stalls() == 1, wait
        queued = now[0]
    assert len(set(table.tasks.decisions)) == 1


def test_stalls_are_found_on_time_though_the_matches_are_looked_at_only_when_one_may_be_due() -> None:
    now = [0.0]
    table = Table(now)
    first = table.create({0: "random", 1: "random"}, seed=1)
    table.pump(first)  # queued at 0: due at 10
    now[0] = 5.0
    assert table.dispatcher.check_stalls() == 0
    now[0] = 6.0
    second = table.create({0: "random", 1: "random"}, seed=2)
    table.pump(second)  # queued at 6, after the last look: due at 16
    now[0] = 10.5
    assert table.dispatcher.check_stalls() == 1  # the first (its second wait: 20 s, due at 30.5)
    now[0] = 15.9
    assert table.dispatcher.check_stalls() == 0
    now[0] = 16.1
    assert table.dispatcher.check_stalls() == 1  # the second, on time
    assert [d[0] for d in table.tasks.decisions] == [first, second, first, second]
    now[0] = 30.4
    assert table.dispatcher.check_stalls() == 0
    now[0] = 30.6
    assert table.dispatcher.check_stalls() == 1
    assert table.tasks.decisions[-1][0] == first


def _lose_tail(table: Table, match_id: str, keep: int) -> None:
    """The store goes back to version `keep` (a Redis restored from an older AOF, or
    `appendfsync everysec` on a host crash), and the command service restarts on it."""
    match = table.store._matches[match_id]
    del match.events[keep:]
    match.version = keep
    table.store._commands = {k: v for k, v in table.store._commands.items() if k[0] != match_id or v[1] <= keep}
    table.app = command_bootstrap(store=table.store, registry=toy_registry(), settings=Settings(secret="test"))
    table.cursors[match_id] = keep


def _turn(table: Table, match_id: str) -> int:
    """Play whoever is asked (the worker's part, or a person's); the version after it."""
    hot = table.app.matches.get(match_id).match
    seat = HIGHCARD.pending(hot.state)[0].seat
    version = table.act(match_id, seat)
    table.pump(match_id)
    return version


def test_events_written_at_seqs_the_store_lost_are_folded_not_skipped_as_redeliveries() -> None:
    """The store lost acknowledged writes and was written on since, at the same seqs under
    other event ids: the dispatcher folds the match anew from the store, and queues the next
    decision where the match really is (before, it skipped those events as redeliveries,
    kept its fold ahead of the store, and the match waited for an operator)."""
    table = Table()
    match_id = table.create({0: "random"})
    table.pump(match_id)
    kept = _turn(table, match_id)
    for _ in range(3):
        _turn(table, match_id)
    ahead = table.dispatcher.matches[match_id].match.version
    _lose_tail(table, match_id, kept)
    for _ in range(2):
        _turn(table, match_id)  # the same seqs again, other events
    assert table.version(match_id) < ahead
    followed = table.dispatcher.matches[match_id].match
    fresh = MatchState.from_envelopes(toy_registry(), table.store.read(match_id))
    assert (followed.version, followed.state) == (fresh.version, fresh.state)
    asked = HIGHCARD.pending(fresh.state)[0].seat
    if asked == 0:
        assert table.tasks.decisions[-1] == (match_id, 0, fresh.version, "random")


def _play_card(table: Table, match_id: str, pick: int) -> int:
    """The seat asked plays its `pick`-th legal card; the version after it."""
    hot = table.app.matches.get(match_id).match
    seat = HIGHCARD.pending(hot.state)[0].seat
    cards = HIGHCARD.legal_commands(hot.state, seat)
    version = table.app.submit(match_id, Viewer(seat), f"c{hot.version}:{pick}", cards[pick % len(cards)]).version
    table.pump(match_id)
    return version


def test_the_newest_event_lost_and_written_anew_at_its_seq_is_folded_not_skipped() -> None:
    """The store lost only the newest event the dispatcher folded, and the next command went in
    at that very seq: another event id at the fold's own version is a store that went back too,
    not a redelivery (`_went_back`), so the dispatcher folds the match anew from the store."""
    table = Table()
    match_id = table.create({0: "random"})
    table.pump(match_id)
    kept = _turn(table, match_id)
    lost = _play_card(table, match_id, -1)
    _lose_tail(table, match_id, kept)
    assert _play_card(table, match_id, 0) == lost  # another card, at the seq of the lost one
    followed = table.dispatcher.matches[match_id].match
    fresh = MatchState.from_envelopes(toy_registry(), table.store.read(match_id))
    assert (followed.version, followed.state) == (fresh.version, fresh.state)


def test_a_bot_decision_stalled_on_writes_the_store_lost_is_queued_where_the_store_is() -> None:
    """A bot's move acknowledged and then lost by the store: the dispatcher had folded it and
    queued the next seat, whose task is refused as stale; no event comes. At the stall time it
    reads the store, finds it behind its fold, folds it anew and queues the lost move again."""
    now = [0.0]
    table = Table(now)
    match_id = table.create({0: "random", 1: "random"})
    table.pump(match_id)
    lost_at = table.version(match_id)
    _match_id, seat, version, _policy = table.tasks.decisions[-1]
    assert version == lost_at
    _turn(table, match_id)  # that decision's move, played and folded, then lost
    assert table.tasks.decisions[-1][2] > lost_at
    _lose_tail(table, match_id, lost_at)
    now[0] = 11.0
    assert table.dispatcher.check_stalls() == 1
    assert table.tasks.decisions[-1] == (match_id, seat, lost_at, "random")
    assert table.dispatcher.matches[match_id].match.version == lost_at


def test_a_finished_match_is_reported_and_forgotten() -> None:
    table = Table()
    match_id = table.create({}, hand="1")
    table.pump(match_id)
    table.act(match_id, HIGHCARD.pending(table.app.matches.get(match_id).match.state)[0].seat)
    table.pump(match_id)
    table.act(match_id, HIGHCARD.pending(table.app.matches.get(match_id).match.state)[0].seat)
    table.pump(match_id)
    assert table.observer.finished == [match_id]
    assert match_id not in table.dispatcher.matches


def test_a_match_first_seen_midway_is_folded_from_its_own_stream() -> None:
    table = Table()
    match_id = table.create({0: "random", 1: "random"})
    table.act(match_id, 0)
    last = table.store.read(match_id)[-1:]
    table.dispatcher.handle(last)  # a restarted dispatcher sees only the tail
    assert table.tasks.decisions == [(match_id, 1, table.version(match_id), "random")]


@pytest.mark.parametrize("game_id", ["nonesuch"])
def test_matches_of_games_it_cannot_play_are_ignored(game_id: str) -> None:
    table = Table()
    created = envelope_pb2.MatchCreated(game_id=game_id, seats=2)
    from famiglia.eventstore.envelopes import match_created_envelope

    table.dispatcher.handle([match_created_envelope("mx", created)])
    assert table.dispatcher.matches == {} and table.tasks.decisions == []


def test_a_broker_failure_leaves_the_decision_unmarked_so_the_redo_sends_it() -> None:
    table = Table()
    match_id = table.create({0: "random", 1: "random"})
    envelopes = table.store.read(match_id)

    def broker_down(*args, **kwargs) -> None:
        raise ConnectionError("broker away")

    table.tasks.decide = broker_down  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        table.dispatcher.handle(envelopes)
    table.tasks.decide = FakeTasks.decide.__get__(table.tasks)  # type: ignore[method-assign]
    table.dispatcher.handle(envelopes)  # the unacked entries come again
    assert table.tasks.decisions == [(match_id, 0, table.version(match_id), "random")]


def test_a_batch_whose_send_fails_at_its_end_is_unmarked_so_the_redo_sends_it() -> None:
    table = Table()
    first = table.create({0: "random", 1: "random"}, seed=1)
    second = table.create({0: "random", 1: "random"}, seed=2)
    envelopes = table.store.read(first) + table.store.read(second)
    handle_with_a_lost_batch(table, envelopes)
    table.dispatcher.handle(envelopes)  # the unacked entries come again
    assert sorted(d[0] for d in table.tasks.decisions) == sorted([first, second])


def test_one_broken_match_does_not_stop_the_others() -> None:
    table = Table()
    broken = table.create({0: "random", 1: "random"})
    healthy = table.create({0: "random", 1: "random"}, seed=4)
    real_pending = HIGHCARD.pending

    def pending(state):
        if state.hands == table.app.matches.get(broken).match.state.hands:
            raise RuntimeError("engine bug")
        return real_pending(state)

    table.dispatcher.registry.get("highcard").pending = pending  # type: ignore[method-assign]
    try:
        table.dispatcher.handle(table.store.read(broken) + table.store.read(healthy))
    finally:
        del table.dispatcher.registry.get("highcard").pending
    assert [d[0] for d in table.tasks.decisions] == [healthy]


def test_a_match_the_dispatcher_failed_on_at_one_state_is_followed_again_at_its_next_event() -> None:
    """The dispatcher's own code (its turn clocks, notices, payloads) or the engine raising at
    one state of a match: the match was dropped for good (taken for unplayable and out of the
    live set), so when its person moved past that state its bots were never asked again, nor
    its clocks queued, not even after a restart. It is now let go and folded anew at its next
    event. Fails if the bot seat gets no task once the match has moved past the broken state."""
    table = Table()
    match_id = table.create({1: "random"})  # seat 0 a person, seat 1 the bots'
    assert HIGHCARD.pending(table.app.matches.get(match_id).match.state)[0].seat == 0
    broken = table.version(match_id)
    queue_clocks = table.dispatcher._queue_clocks

    def failing(tracked, pendings):
        if tracked.match.version == broken:
            raise RuntimeError("a bug at one state")
        return queue_clocks(tracked, pendings)

    table.dispatcher._queue_clocks = failing  # type: ignore[method-assign]
    table.pump(match_id)
    assert table.tasks.decisions == []
    table.act(match_id, 0)  # the person plays on past the broken state
    table.pump(match_id)
    assert table.tasks.decisions == [(match_id, 1, table.version(match_id), "random")]
    assert match_id in table.dispatcher.live.members()


def test_a_match_let_go_at_a_bots_turn_is_looked_at_again_after_the_stall_time() -> None:
    """A failure at a bot's turn (here Redis refusing the live set's write, READONLY in a
    failover, which is no connection error) let the match go, and no event would come to fold
    it again: the bots were waiting on themselves. The stall check folds such a match again
    once a stall time has passed (doubling while it keeps failing). Fails if the bot seat still
    has no task after the stall time."""
    import redis

    table = Table()
    refused = []

    class FailingOnce(LiveMatches):
        def add(self, match_id: str) -> None:
            if not refused:
                refused.append(match_id)
                raise redis.exceptions.ReadOnlyError("You can't write against a read only replica.")
            super().add(match_id)

    table.dispatcher.live = FailingOnce()
    match_id = table.create({0: "random", 1: "random"})
    table.pump(match_id)
    assert refused == [match_id] and table.tasks.decisions == []
    table.clock_now[0] += 5
    table.dispatcher.check_stalls()
    assert table.tasks.decisions == []  # not before the stall time
    table.clock_now[0] += 10
    table.dispatcher.check_stalls()
    assert table.tasks.decisions == [(match_id, 0, table.version(match_id), "random")]
    assert match_id in table.dispatcher.live.members()


def test_a_match_that_keeps_failing_is_looked_at_again_less_and_less_often() -> None:
    """A match broken for good is folded again after 1, 2, 4... stall times (at most 16), not at
    every check: one broken match must not cost the dispatcher a fold a batch."""
    table = Table()
    folds = []
    match_id = table.create({0: "random", 1: "random"})

    def pending(state):
        folds.append(table.clock_now[0])
        raise RuntimeError("engine bug")

    table.dispatcher.registry.get("highcard").pending = pending  # type: ignore[method-assign]
    try:
        table.pump(match_id)
        for _ in range(80):  # 80 s of checks, a second apart (stall time 10 s)
            table.clock_now[0] += 1
            table.dispatcher.check_stalls()
    finally:
        del table.dispatcher.registry.get("highcard").pending
    assert [round(t) for t in dict.fromkeys(folds)] == [0, 10, 30, 70]
    assert table.tasks.decisions == []


def test_a_broken_matchs_line_names_the_command_and_trace_it_failed_on() -> None:
    """Its one line is the operator's way to the move that broke it: the event's seat, command
    id and the trace of that command (the command service's and the projection's lines for it)."""
    import structlog

    table = Table()
    broken = table.create({0: "random", 1: "random"})
    envelopes = [envelope_pb2.EventEnvelope() for _ in table.store.read(broken)]
    for copy, stored in zip(envelopes, table.store.read(broken), strict=True):
        copy.CopyFrom(stored)
    carried = "0af7651916cd43dd8448eb211c80319c"
    envelopes[-1].trace["traceparent"] = f"00-{carried}-b7ad6b7169203331-01"
    envelopes[-1].command_id = "tap-1"

    def pending(state):
        raise RuntimeError("engine bug")

    table.dispatcher.registry.get("highcard").pending = pending  # type: ignore[method-assign]
    try:
        with structlog.testing.capture_logs() as captured:
            table.dispatcher.handle(envelopes)
    finally:
        del table.dispatcher.registry.get("highcard").pending
    (line,) = [c for c in captured if c["event"] == "match_dispatch_failed"]
    assert (line["match_id"], line["seq"], line["seat"], line["command_id"], line["trace_id"]) == (
        broken, envelopes[-1].seq, envelopes[-1].seat, "tap-1", carried)


def test_a_restarted_dispatcher_wakes_recent_matches_that_wait_on_a_lost_task() -> None:
    table = Table()
    waiting = table.create({0: "random", 1: "random"})
    finished = table.create({}, hand="1", seed=4)
    for _ in range(2):
        table.act(finished, HIGHCARD.pending(table.app.matches.get(finished).match.state)[0].seat)
    assert table.dispatcher.recover() == 1
    assert table.tasks.decisions == [(waiting, 0, table.version(waiting), "random")]


def test_a_restarted_dispatcher_wakes_every_match_it_followed_however_quiet(monkeypatch) -> None:
    """A match whose task died with its worker gets no new event: it is a quiet one, which a
    window of recent entries misses under load. The live set still names it."""
    table = Table()
    quiet = table.create({0: "random", 1: "random"})
    table.pump(quiet)
    busy = [table.create({0: "random", 1: "random"}, seed=10 + i) for i in range(3)]
    for match_id in busy:
        table.pump(match_id)
    table.tasks.decisions.clear()  # the worker died with them
    restarted = Dispatcher(table.store, table.dispatcher.registry, table.tasks, live=table.dispatcher.live,
                           stall_seconds=10, now=lambda: table.clock_now[0])
    # the recent window has only the busy matches' entries
    monkeypatch.setattr(dispatcher_module, "_recent_matches", lambda _store, _recent: list(busy))
    restarted.recover()
    assert quiet in [d[0] for d in table.tasks.decisions]
    # a match over leaves the set
    finished = table.create({}, hand="1", seed=4)
    table.pump(finished)
    assert finished in table.dispatcher.live.members()
    for _ in range(2):
        table.act(finished, HIGHCARD.pending(table.app.matches.get(finished).match.state)[0].seat)
    table.pump(finished)
    assert finished not in table.dispatcher.live.members()


def test_the_dispatcher_outlives_redis_going_away() -> None:
    """Errors of the consumer's Redis end a pass, not the thread: the next pass reads the
    unacked entries again and goes on."""
    table = Table()
    match_id = table.create({0: "random", 1: "random"})
    entries = _entries(table, match_id, 1)
    table.dispatcher.recover = lambda recent=500: 0  # type: ignore[method-assign]  # only the reads queue
    stop = threading.Event()
    consumer = ScriptedConsumer(table.tasks, stop, [entries])
    failures = {"read_pending": 2, "read": 1}
    real_read, real_pending = consumer.read, consumer.read_pending

    def read(*args, **kwargs):
        if failures["read"]:
            failures["read"] -= 1
            raise ConnectionError("redis restarting")
        return real_read(*args, **kwargs)

    def read_pending(*args, **kwargs):
        if failures["read_pending"]:
            failures["read_pending"] -= 1
            raise ConnectionError("redis restarting")
        return real_pending(*args, **kwargs)

    consumer.read, consumer.read_pending = read, read_pending  # type: ignore[method-assign]
    table.dispatcher.run(consumer, stop, block_ms=0, retry_seconds=0.001)
    assert failures == {"read_pending": 0, "read": 0}
    assert [d[0] for d in table.tasks.decisions] == [match_id]


class ScriptedConsumer:
    """A consumer handing out scripted batches and recording each ack with the decisions
    queued by then (what the broker had taken when the entries were acked)."""

    def __init__(self, tasks: FakeTasks, stop: threading.Event, batches: list[list[PartitionEntry]],
                 pending: list[list[PartitionEntry]] | None = None) -> None:
        self.tasks, self.stop = tasks, stop
        self.batches, self.pending = list(batches), list(pending or [])
        self.acks: list[tuple[list[str], int]] = []
        self.reads = 0
        self.separate_acks = 0

    def _acked(self, entries) -> None:
        if entries:
            self.acks.append(([e.entry_id for e in entries], len(self.tasks.decisions)))

    def read(self, count=100, block_ms=None, *, ack=()):
        self.reads += 1
        self._acked(list(ack))
        if not self.batches:
            self.stop.set()
            return []
        return self.batches.pop(0)

    def read_pending(self, count=100):
        return self.pending.pop(0) if self.pending else []

    def hold_pending(self) -> int:
        return 0

    def ack(self, entries) -> int:
        self.separate_acks += 1
        self._acked(list(entries))
        return len(entries)

    def claim_stale(self, min_idle_ms, count=100):
        return []


def _entries(table: Table, match_id: str, first_id: int) -> list[PartitionEntry]:
    return [PartitionEntry(0, f"{first_id + i}-0", env) for i, env in enumerate(table.store.read(match_id))]


def test_a_batch_is_acked_with_the_next_read_once_its_tasks_were_sent() -> None:
    table = Table()
    first = table.create({0: "random", 1: "random"}, seed=1)
    second = table.create({0: "random", 1: "random"}, seed=2)
    one, two = _entries(table, first, 1), _entries(table, second, 100)
    table.dispatcher.recover = lambda recent=500: 0  # type: ignore[method-assign]  # only the reads queue
    stop = threading.Event()
    consumer = ScriptedConsumer(table.tasks, stop, [one, two])
    table.dispatcher.run(consumer, stop, block_ms=0)
    # one round trip a batch: the first read acks nothing, each next read acks the batch before it,
    # and only after that batch's task was sent
    assert consumer.reads == 3 and consumer.separate_acks == 0
    assert consumer.acks == [([e.entry_id for e in one], 1), ([e.entry_id for e in two], 2)]
    assert [d[0] for d in table.tasks.decisions] == [first, second]


def test_a_batch_whose_tasks_could_not_be_sent_is_not_acked_but_redone() -> None:
    table = Table()
    match_id = table.create({0: "random", 1: "random"})
    entries = _entries(table, match_id, 1)
    sends = []

    @contextlib.contextmanager
    def flaky_batch():
        yield
        sends.append(len(sends))
        if len(sends) == 1:
            table.tasks.decisions.clear()  # the broker never got it
            raise ConnectionError("broker away while sending the batch")

    table.tasks.batch = flaky_batch  # type: ignore[method-assign]
    table.dispatcher.recover = lambda recent=500: 0  # type: ignore[method-assign]  # only the reads queue
    stop = threading.Event()
    # read_pending: nothing at start; after the failure, the same entries (still pending)
    consumer = ScriptedConsumer(table.tasks, stop, [entries], pending=[[], entries])
    table.dispatcher.run(consumer, stop, block_ms=0)
    assert len(sends) == 2
    assert consumer.acks == [([e.entry_id for e in entries], 1)]  # once, after the send that worked
    assert table.tasks.decisions == [(match_id, 0, table.version(match_id), "random")]


def test_a_payload_reads_back_what_standard_base64_wrote() -> None:
    """The worker's decoding (binascii) agrees with the base64 module, padding and all."""
    payload = DecisionPayload(b"\x00view\xff", (b"", b"a", b"ab", b"abc", bytes(range(256))))
    text = {"view": base64.b64encode(payload.view).decode(),
            "legal": [base64.b64encode(c).decode() for c in payload.legal]}
    assert payload.to_json() == text
    assert DecisionPayload.from_json(text) == payload
    assert DecisionPayload.from_json({"view": "", "legal": []}) == DecisionPayload(b"", ())


@dataclass
class HoldingTasks(FakeTasks):
    """A sender that can hold a batch's decisions for the next read (as CeleryTasks does on
    the consumer's own Redis): `queued` is what reached the broker, in order."""

    same_server: bool = True
    queued: list[tuple] = field(default_factory=list)
    held: list[tuple] = field(default_factory=list)
    separate_pushes: int = 0
    holding: bool = False

    def shares_server(self, client) -> bool:
        return self.same_server and client is not None

    def decide(self, match_id, game_id, seat, version, policy, trace=None, payload=None, then=()) -> None:
        FakeTasks.decide(self, match_id, game_id, seat, version, policy, trace, payload, then)
        (self.held if self.holding else self.queued).append((match_id, seat, version))

    @contextlib.contextmanager
    def batch(self, *, hold: bool = False):
        self.holding = hold
        try:
            yield
        finally:
            self.holding = False

    def take_batch(self):
        held, self.held = self.held, []
        return HeldCommands(tuple(held)) if held else None

    def push_held(self, held) -> None:
        self.separate_pushes += 1
        self.queued.extend(held.commands)


@dataclass(frozen=True)
class HeldCommands:
    commands: tuple


class MergingConsumer(ScriptedConsumer):
    """A consumer whose reads take commands to send before their acks: the commands reach
    the broker, then the acks apply (as MULTI/EXEC does); `fail` makes reads raise."""

    client = object()

    def __init__(self, tasks: HoldingTasks, *args, fail: set[int] = frozenset(), **kwargs) -> None:
        super().__init__(tasks, *args, **kwargs)
        self.holding_tasks, self.fail, self.carried = tasks, set(fail), []

    def _acked(self, entries) -> None:
        if entries:
            self.acks.append(([e.entry_id for e in entries], len(self.holding_tasks.queued)))

    def read(self, count=100, block_ms=None, *, ack=(), before_ack=()):
        if self.reads + 1 in self.fail:
            self.reads += 1
            raise ConnectionError("connection lost: did the transaction run?")
        self.holding_tasks.queued.extend(before_ack)
        self.carried.append(len(before_ack))
        return super().read(count, block_ms, ack=ack)


def _holding_table(same_server: bool = True) -> tuple[Table, HoldingTasks]:
    """A table whose dispatcher queues through HoldingTasks and recovers nothing at start."""
    table = Table()
    table.tasks = tasks = HoldingTasks(same_server=same_server)
    table.dispatcher.tasks = tasks
    table.dispatcher.recover = lambda recent=500: 0  # type: ignore[method-assign]
    return table, tasks


def _two_batches_run(same_server: bool):
    """Two matches' first entries, read as two batches by a MergingConsumer:
    (tasks, consumer, the matches, their entries)."""
    table, tasks = _holding_table(same_server)
    first = table.create({0: "random", 1: "random"}, seed=1)
    second = table.create({0: "random", 1: "random"}, seed=2)
    one, two = _entries(table, first, 1), _entries(table, second, 100)
    stop = threading.Event()
    consumer = MergingConsumer(tasks, stop, [one, two])
    table.dispatcher.run(consumer, stop, block_ms=0)
    return tasks, consumer, (first, second), (one, two)


def test_a_batchs_tasks_ride_on_the_next_read_ahead_of_its_acks_on_the_same_server() -> None:
    tasks, consumer, (first, second), (one, two) = _two_batches_run(same_server=True)
    # no push of its own: each batch's one task goes with the next read, and is queued when its ack applies
    assert tasks.separate_pushes == 0 and consumer.separate_acks == 0
    assert consumer.carried == [0, 1, 1]
    assert consumer.acks == [([e.entry_id for e in one], 1), ([e.entry_id for e in two], 2)]
    assert [q[0] for q in tasks.queued] == [first, second]


def test_on_another_server_a_batchs_tasks_are_pushed_at_its_end_and_reads_carry_only_acks() -> None:
    tasks, consumer, (first, second), (one, two) = _two_batches_run(same_server=False)
    assert consumer.carried == [0, 0, 0] and tasks.held == []
    assert consumer.acks == [([e.entry_id for e in one], 1), ([e.entry_id for e in two], 2)]
    assert [q[0] for q in tasks.queued] == [first, second]


def test_a_failed_read_carrying_tasks_pushes_them_again_before_acking_and_redoes_the_pending() -> None:
    """The read that carried the first batch's task fails (it may or may not have run):
    the task is pushed again on its own, the pending entries are read again, and the
    batch is acked only after — its decision is queued, never lost (twice is harmless)."""
    table, tasks = _holding_table()
    first = table.create({0: "random", 1: "random"}, seed=1)
    one = _entries(table, first, 1)
    stop = threading.Event()
    consumer = MergingConsumer(tasks, stop, [one], pending=[[], one], fail={2})
    table.dispatcher.run(consumer, stop, block_ms=0)
    assert tasks.separate_pushes == 1
    assert [q[0] for q in tasks.queued] == [first]
    assert consumer.acks and all(queued >= 1 for _, queued in consumer.acks)
    assert consumer.acks[0] == ([e.entry_id for e in one], 1)


def test_held_tasks_are_pushed_before_the_last_acks_when_the_dispatcher_stops() -> None:
    table, tasks = _holding_table()
    first = table.create({0: "random", 1: "random"}, seed=1)
    one = _entries(table, first, 1)
    stop = threading.Event()
    consumer = MergingConsumer(tasks, stop, [one])
    table.dispatcher.check_stalls = lambda: stop.set() or 0  # type: ignore[method-assign]  # stop after the batch
    table.dispatcher.run(consumer, stop, block_ms=0)
    assert tasks.separate_pushes == 1 and consumer.acks == [([e.entry_id for e in one], 1)]


@pytest.mark.parametrize("answered", [True, False])
def test_bots_whose_window_answers_are_held_back_are_not_taken_for_stalled(answered: bool) -> None:
    """NP-H9: a window's answers reach the stream only when it resolves; a bot that answered
    still looks asked there, but the held answers say it is not: no stall, no task again."""
    import random

    from famiglia.engine.registry import default_registry
    from famiglia.nothing_personal.v1 import nothing_personal_pb2 as np_pb
    from tests.unit.command.test_held_answers import _to_a_window

    now = [0.0]
    table = Table(now, registry=default_registry())
    human = 2  # the one asked seat left to answer is a person's
    info = [envelope_pb2.SeatInfo(seat=s, bot=True, policy="random") for s in range(3) if s != human]
    for seed in range(1, 40):
        created = table.app.create_match("nothing_personal", 3, seed=seed, seat_info=info)
        window = _to_a_window(table.app, created.match_id, created.seat_tokens, random.Random(seed))
        if window is not None and human in window.seats:
            break
    match_id = created.match_id
    table.dispatcher.handle(table.store.read(match_id))
    queued = len(table.tasks.decisions)
    assert queued
    if answered:
        for seat in window.seats:
            if seat != human:
                table.app.submit(match_id, Viewer(seat), f"answer-{seat}", np_pb.Command(**{"pass": np_pb.Pass()}))
        assert table.store.read_staged(match_id)
    now[0] = 11.0
    resent = table.dispatcher.check_stalls()
    assert (resent == 0) if answered else (resent > 0)
    assert len(table.tasks.decisions) == queued + resent


def test_a_clock_that_runs_out_after_its_seat_answered_held_back_does_nothing() -> None:
    """NP-H9: the seat's answer is not in the stream yet, but it is an answer: `run_clock`
    counts the held-back answers and leaves the seat be (it would be refused otherwise)."""
    import random

    from famiglia.engine.registry import default_registry
    from famiglia.nothing_personal.v1 import nothing_personal_pb2 as np_pb
    from services.bots import handlers
    from services.bots.bootstrap import bootstrap as bots_bootstrap
    from tests.unit.command.test_held_answers import _to_a_window

    table = Table(registry=default_registry())
    for seed in range(1, 40):
        created = table.app.create_match("nothing_personal", 3, seed=seed)
        window = _to_a_window(table.app, created.match_id, created.seat_tokens, random.Random(seed))
        if window is not None:
            break
    match_id, seat = created.match_id, window.seats[0]
    bots = bots_bootstrap(settings=Settings(secret="test"), registry=default_registry(), store=table.store)
    version = table.store.version(match_id)
    table.app.submit(match_id, Viewer(seat), "answer", np_pb.Command(**{"pass": np_pb.Pass()}))
    assert handlers.run_clock(bots, match_id, seat, version) == "not_pending"
    assert table.store.version(match_id) == version and len(table.store.read_staged(match_id)) == 1


@pytest.mark.parametrize("archived", [True, False])
def test_a_match_trimmed_before_the_dispatcher_met_it_gets_its_result_from_the_archive(archived: bool) -> None:
    """Finished while the bots service was away and trimmed from Redis before it came back:
    its events are in the projection's archive, and its tournament result is still due
    (without the archive the match is let go, and the runner would abandon it as stuck)."""
    table = Table()
    match_id = table.create({0: "random", 1: "random"})
    while True:  # played to the end by someone else while the dispatcher was away
        m = table.app.matches.get(match_id).match
        if m.finished:
            break
        table.act(match_id, m.engine.pending(m.state)[0].seat)
    envelopes = table.store.read(match_id)
    table.store.trim(match_id)
    dispatcher = Dispatcher(table.store, toy_registry(), table.tasks, observer=table.observer,
                            archive=(lambda mid: list(envelopes) if mid == match_id else []) if archived else None)
    dispatcher.handle(envelopes[-2:])  # the tail of it, as the partition stream still holds it
    assert table.observer.finished == ([match_id] if archived else [])
    assert match_id not in dispatcher.matches and table.tasks.decisions == []


def test_a_clock_counts_from_when_its_decision_began_not_from_the_last_event(monkeypatch) -> None:
    """Another seat's command moves the version, so the running clock goes stale and a new
    one is queued: it takes off the time already gone (a deadline is never stretched,
    GC-D05), while a seat's own next decision starts afresh."""
    from famiglia.engine.registry import default_registry
    from famiglia.eventstore import envelopes as stamping

    wall = [time.time()]
    monkeypatch.setattr(stamping, "time", type("Clock", (), {"time": staticmethod(lambda: wall[0])}))
    table = Table(registry=default_registry())
    table.dispatcher.wall = lambda: wall[0]
    match_id = table.create({}, seats=4, game="goodcritters")
    table.pump(match_id)
    hot = table.app.matches.get(match_id)
    for step in range(200):  # on to a step where several seats choose at once
        asked = [p for p in hot.match.engine.pending(hot.match.state) if p.timeout_seconds > 0]
        if len(asked) >= 2:
            break
        state = hot.match.state
        table.app.submit(match_id, Viewer(asked[0].seat), f"walk-{step}",
                         hot.match.engine.timeout_command(state, asked[0].seat))
        table.pump(match_id)
    first = {seat: countdown for (_m, seat, v, countdown) in table.tasks.clocks if v == table.version(match_id)}
    assert len(first) >= 2
    seat, other = sorted(first)[:2]
    wall[0] += 20.0
    hot = table.app.matches.get(match_id).match
    table.app.submit(match_id, Viewer(other), "other-1", hot.engine.timeout_command(hot.state, other))
    table.pump(match_id)
    again = {s: countdown for (_m, s, v, countdown) in table.tasks.clocks if v == table.version(match_id)}
    assert again[seat] == pytest.approx(first[seat] - 20.0 + 0.5, abs=0.01)  # not first[seat] again
    assert other not in again or again[other] >= first[other] - 0.01  # its next decision: afresh


@dataclass
class TracedTasks(FakeTasks):
    traces: list = field(default_factory=list)

    def decide(self, match_id, game_id, seat, version, policy, trace=None, payload=None, then=()) -> None:
        FakeTasks.decide(self, match_id, game_id, seat, version, policy, trace, payload, then)
        self.traces.append(dict(trace or {}))


@pytest.mark.parametrize(("bots", "follows"), [({0: "random", 1: "random"}, True), ({1: "random"}, False)])
def test_a_decision_after_a_bots_move_starts_a_linked_trace_and_after_a_persons_continues_it(
        bots: dict[int, str], follows: bool) -> None:
    """A match of bots alone is a trace per task, not one trace nested as deep as the match."""
    from opentelemetry.sdk.trace import TracerProvider

    from famiglia.telemetry import FOLLOWS_KEY, carried_trace_id, server_span

    table = Table()
    table.tasks = TracedTasks()
    table.dispatcher.tasks = table.tasks
    match_id = table.create(bots)
    table.pump(match_id)
    with server_span("SubmitCommand", provider=TracerProvider()) as span:  # seat 0's move, traced
        table.act(match_id, 0)
    table.pump(match_id)
    assert table.tasks.decisions[-1][1] == 1
    carried = table.tasks.traces[-1]
    assert carried_trace_id(carried) == f"{span.get_span_context().trace_id:032x}"
    assert (carried.get(FOLLOWS_KEY) == "1") is follows


def test_a_bot_move_the_store_lost_while_a_person_is_asked_next_is_queued_again() -> None:
    """The dispatcher folded a bot's move and its fold asks a person next, so it has no bot
    decision waiting to stall; the store then loses that move, and its match asks the bot
    again with no event to say so (the person's clock finds the version stale). The
    dispatcher looks at the store's version once a wait and queues the bot where the store is."""
    now = [0.0]
    table = Table(now)
    match_id = table.create({0: "random"})  # seat 1 is a person
    table.pump(match_id)
    for _ in range(20):  # to a version where the bot is asked
        if HIGHCARD.pending(table.app.matches.get(match_id).match.state)[0].seat == 0:
            break
        _turn(table, match_id)
    lost_at = table.version(match_id)
    _turn(table, match_id)  # the bot's move, folded, then lost
    assert HIGHCARD.pending(table.app.matches.get(match_id).match.state)[0].seat == 1
    _lose_tail(table, match_id, lost_at)
    mark = len(table.tasks.decisions)
    now[0] = 11.0
    table.dispatcher.check_stalls()
    assert table.tasks.decisions[mark:] == [(match_id, 0, lost_at, "random")]
    assert table.dispatcher.matches[match_id].match.version == lost_at


def test_a_match_whose_end_the_store_lost_is_followed_again() -> None:
    """A match seen finished is forgotten; should the store then lose its end and be played
    on (a person's move comes), the dispatcher follows it again and queues its bot seats.
    A redelivery of its entries, or a look after its stream was trimmed, changes nothing."""
    table = Table()
    match_id = table.create({0: "random"}, hand="2")
    table.pump(match_id)
    versions = [table.version(match_id)]
    while match_id in table.dispatcher.matches:
        versions.append(_turn(table, match_id))
    assert table.observer.finished == [match_id]
    asked = []
    version = table.store.version
    table.store.version = lambda m: asked.append(m) or version(m)  # type: ignore[method-assign]
    table.dispatcher.handle(table.store.read(match_id))  # redelivered, its end with it: still done
    assert match_id not in table.dispatcher.matches and not asked  # and the store was not asked
    table.store.version = version  # type: ignore[method-assign]
    table.dispatcher.recover()
    assert match_id not in table.dispatcher.matches
    _lose_tail(table, match_id, versions[-3])  # the last two commands, the end among them
    mark = len(table.tasks.decisions)
    for _ in range(4):
        hot = table.app.matches.get(match_id).match
        if HIGHCARD.pending(hot.state)[0].seat == 0:
            break
        _turn(table, match_id)
    else:
        raise AssertionError("no bot turn reached")
    if hot.version == versions[-3]:  # the bot is asked first: no event comes, the recovery pass looks
        table.dispatcher.recover()
    assert match_id in table.dispatcher.matches
    assert (match_id, 0, hot.version, "random") in table.tasks.decisions[mark:]


def test_a_finished_match_trimmed_from_the_store_is_not_followed_again() -> None:
    table = Table()
    match_id = table.create({0: "random"}, hand="1")
    table.pump(match_id)
    while match_id in table.dispatcher.matches:
        _turn(table, match_id)
    entries = table.store.read(match_id)
    table.store.trim(match_id)
    table.dispatcher.archive = lambda m: list(entries)  # what a reload would fold (and finish again)
    table.dispatcher.handle(entries[:-1])  # a redelivery without the end: the store is asked
    table.dispatcher.recover()
    assert match_id not in table.dispatcher.matches and table.observer.finished == [match_id]


def test_a_lease_past_its_moves_plays_on_only_while_a_bot_answer_of_its_own_is_held() -> None:
    """NP-H9: a task plays on past its lease while its turn's last command is held back, so
    the dispatcher follows the lease on while a bot seat's own answer is staged; a person's
    staged answer says nothing of the task (which stopped), and the bots are queued as usual."""
    import random

    from famiglia.engine.registry import default_registry
    from famiglia.nothing_personal.v1 import nothing_personal_pb2 as np_pb
    from services.bots.payload import bot_command_id
    from tests.unit.command.test_held_answers import _to_a_window

    table = Table(registry=default_registry())
    human = 2
    info = [envelope_pb2.SeatInfo(seat=s, bot=True, policy="random") for s in range(3) if s != human]
    for seed in range(1, 60):
        created = table.app.create_match("nothing_personal", 3, seed=seed, seat_info=info)
        window = _to_a_window(table.app, created.match_id, created.seat_tokens, random.Random(seed), asked=3)
        if window is not None:
            break
    else:
        raise AssertionError("no window asking every seat")
    match_id = created.match_id
    table.dispatcher.handle(table.store.read(match_id))
    tracked = table.dispatcher.matches[match_id]
    version = table.store.version(match_id)
    passing = np_pb.Command(**{"pass": np_pb.Pass()})
    table.app.submit(match_id, Viewer(human), "answer-person", passing)
    assert table.store.read_staged(match_id) and not table.dispatcher._held_back(tracked)
    bot = next(s for s in window.seats if s != human)
    table.app.submit(match_id, Viewer(bot), bot_command_id(match_id, version, bot), passing)
    assert table.dispatcher._held_back(tracked)


class _Walk:
    """A human-only match of a real game on the Table, with the stamping clock in the test's hand."""

    def __init__(self, monkeypatch, game: str, seats: int, **options: str) -> None:
        from famiglia.engine.registry import default_registry
        from famiglia.eventstore import envelopes as stamping

        self.wall = [time.time()]
        monkeypatch.setattr(stamping, "time", type("Clock", (), {"time": staticmethod(lambda: self.wall[0])}))
        self.table = Table(registry=default_registry())
        self.table.dispatcher.wall = lambda: self.wall[0]
        self.match_id = self.table.create({}, seats=seats, game=game, **options)
        self.table.pump(self.match_id)
        self.n = 0

    @property
    def match(self) -> MatchState:
        return self.table.app.matches.get(self.match_id).match

    def asked(self) -> list:
        return [p for p in self.match.engine.pending(self.match.state) if p.timeout_seconds > 0]

    def play(self, seat: int, command, after: float = 0.0) -> None:
        self.wall[0] += after
        self.n += 1
        self.table.app.submit(self.match_id, Viewer(seat), f"walk-{self.n}", command)
        self.table.pump(self.match_id)

    def countdowns(self) -> dict[int, float]:
        version = self.table.version(self.match_id)
        return {seat: c for (_m, seat, v, c) in self.table.tasks.clocks if v == version}

    def kinds(self, seat: int) -> dict[str, list]:
        from famiglia.engine import command_kind

        out: dict[str, list] = {}
        for command in self.match.engine.legal_commands(self.match.state, seat):
            out.setdefault(command_kind(command), []).append(command)
        return out


def _goodcritters_step3(monkeypatch) -> _Walk:
    walk = _Walk(monkeypatch, "goodcritters", 4)
    for _ in range(50):
        asked = walk.asked()
        if len(asked) >= 2:
            return walk
        walk.play(asked[0].seat, walk.match.engine.timeout_command(walk.match.state, asked[0].seat))
    raise AssertionError("no Step 3 reached")


def test_a_step3_seat_moving_its_threat_keeps_the_steps_deadline_GC_D05(monkeypatch) -> None:
    """GC-D05: Step 3 has a hard deadline of 120 s from its start, never extended. The seat's
    own threat move kept it asked in the same decision, and its clock restarted in full."""
    walk = _goodcritters_step3(monkeypatch)
    seat = walk.asked()[0].seat
    first = walk.countdowns()[seat]
    assert first == pytest.approx(120.5)
    walk.play(seat, walk.kinds(seat)["place_threat"][0], after=40.0)
    assert seat in {p.seat for p in walk.asked()}
    assert walk.countdowns()[seat] == pytest.approx(first - 40.0 + 0.5, abs=0.01)  # the grace, once


def test_a_seat_asked_again_in_step3_gets_what_is_left_of_the_deadline_GC_D05(monkeypatch) -> None:
    """A committed seat whose commitment another seat's public change took back (GC-D04) is
    asked again: its clock began afresh then, 120 s past the step's deadline."""
    walk = _goodcritters_step3(monkeypatch)
    committer, mover = (p.seat for p in walk.asked()[:2])
    walk.play(committer, walk.match.engine.timeout_command(walk.match.state, committer), after=10.0)
    assert committer not in {p.seat for p in walk.asked()}
    walk.play(mover, walk.kinds(mover)["place_threat"][0], after=50.0)
    assert committer in {p.seat for p in walk.asked()}  # GC-D04: asked again
    assert walk.countdowns()[committer] == pytest.approx(120.5 - 60.0 + 0.5, abs=0.01)


def test_a_nostra_city_turn_clock_runs_on_through_its_own_actions_NC_D02(monkeypatch) -> None:
    """NC-D02: 120 s for a phase turn (45 s for a choice inside it). An action that kept the
    seat in its turn (a bid, a Corruption) restarted the turn's 120 s each time; the turn's
    clock now runs on, and stands still while a choice inside the turn has its own."""
    walk, seen = _Walk(monkeypatch, "nostra_city", 3), set()
    for _ in range(1500):
        state, asked = walk.match.state, walk.asked()
        assert asked, "the match ended before a turn went on after an action"
        seat = asked[0].seat
        actions = {k: c for k, c in walk.kinds(seat).items() if k not in ("end_turn", "play_revenge")}
        if state.choice is not None or not actions:
            walk.play(seat, walk.match.engine.timeout_command(state, seat))
            continue
        phase, turn_s = state.phase, walk.countdowns()[seat]
        walk.play(seat, next(iter(actions.values()))[0], after=30.0)
        chosen = 0
        while (state := walk.match.state).choice is not None:  # each on its own clock, 5 s each
            chooser = state.choice.seat
            assert walk.countdowns()[chooser] == pytest.approx(45.5)
            walk.play(chooser, walk.match.engine.timeout_command(state, chooser), after=5.0)
            chosen += 1
        if (state.phase, state.turn_seat) == (phase, seat):  # its turn goes on
            # 30 s gone (less the grace, the first time), not 120.5 again, and the choices' time not
            left = walk.countdowns()[seat]
            assert turn_s - 30.0 - 0.01 <= left <= turn_s - 30.0 + 0.51, (turn_s, left, chosen)
            seen.add(chosen > 0)
            if seen == {True, False}:
                return
    raise AssertionError(f"no turn went on after an action, with and without a choice inside: {seen}")


def test_matches_left_waiting_on_people_without_a_clock_do_not_pile_up_in_memory() -> None:
    """A match whose people walked away, with no clock to end it, is never finished: the
    dispatcher, up for days, must not keep every one of them folded. Past `followed_max` the
    idle ones are let go (still live, for a restart); a bot's decision in play never is, and a
    match let go is folded again from its own stream at its next event."""
    table = Table()
    table.dispatcher = Dispatcher(table.store, table.dispatcher.registry, table.tasks, stall_seconds=10,
                                  clock_grace_seconds=0.5, now=lambda: table.clock_now[0], followed_max=40)
    busy = [table.create({0: "random", 1: "random"}, seed=s) for s in range(10)]
    for match_id in busy:
        table.pump(match_id)
    idle = []
    for s in range(400):
        idle.append(table.create({1: "random"}, seed=s))  # seat 0, a person, is asked: no clock
        table.pump(idle[-1])
        assert len(table.dispatcher.matches) <= 40 + 40 // 10
    assert all(match_id in table.dispatcher.matches for match_id in busy)  # their bots are asked
    assert set(table.dispatcher.live.members()) >= set(idle)  # a restart still wakes each of them
    first = idle[0]
    assert first not in table.dispatcher.matches
    table.act(first, 0)  # the person came back: the bot is asked
    table.pump(first)
    assert table.tasks.decisions[-1] == (first, 1, table.version(first), "random")


def test_a_match_first_met_when_the_idle_ones_are_let_go_stays_followed() -> None:
    """The match whose event made `matches` outgrow `followed_max` is never let go with the
    idle ones: its bot's task was queued just now, and only a followed match's stall timer
    queues that decision again if the task is lost."""
    now = [0.0]
    table = Table(now)
    table.dispatcher = Dispatcher(table.store, table.dispatcher.registry, table.tasks, stall_seconds=10,
                                  clock_grace_seconds=0.5, now=lambda: now[0], followed_max=4)
    for s in range(4):
        table.pump(table.create({1: "random"}, seed=s))  # seat 0, a person, is asked: no clock
    bots = table.create({0: "random", 1: "random"}, seed=9)
    table.pump(bots)
    assert bots in table.dispatcher.matches
    now[0] = 11.0
    assert table.dispatcher.check_stalls() == 1
    assert table.tasks.decisions[-1] == table.tasks.decisions[-2] and table.tasks.decisions[-1][0] == bots


def test_a_pass_that_ran_a_while_before_it_failed_pauses_from_the_shortest_pause_again() -> None:
    """`run`: the pause doubles only while passes keep failing at once; a pass that ran for
    more than a minute (Redis went away after a long while) starts the doubling afresh."""
    now = [0.0]
    table = Table(now)
    pauses: list[float] = []

    class Stop:
        def is_set(self) -> bool:
            return len(pauses) >= 5

        def wait(self, seconds: float) -> bool:
            pauses.append(seconds)
            return False

    ran = iter([0.0, 0.0, 0.0, 61.0, 0.0])

    def consume(consumer, stop, **_kwargs) -> None:
        now[0] += next(ran)
        raise ConnectionError("redis away")

    table.dispatcher._consume = consume  # type: ignore[method-assign]
    table.dispatcher.run(None, Stop(), retry_seconds=1.0)  # type: ignore[arg-type]
    assert pauses == [1.0, 2.0, 4.0, 1.0, 2.0]


def test_a_read_that_fills_its_count_from_one_partition_is_read_on() -> None:
    """`_read_all`: a partition that gave a full `count` may have more (a command's events cut
    in two): it is read on, without blocking, until a read comes back short."""
    reads: list[object] = []
    batches = [[PartitionEntry(0, f"{i}-0", envelope_pb2.EventEnvelope()) for i in range(3)],
               [PartitionEntry(0, "3-0", envelope_pb2.EventEnvelope())]]

    class Consumer:
        def read(self, count=100, block_ms=None, *, ack=()):
            reads.append(block_ms)
            return batches.pop(0) if batches else []

    assert len(Dispatcher._read_all(Consumer(), 500, count=3)) == 4
    assert reads == [500, None]


def test_a_restarted_dispatcher_keeps_what_a_named_clock_used_GC_D05(monkeypatch) -> None:
    """The named clocks lived only in the dispatcher's memory: a restarted one (handed the
    match's stream, or recovering it) started the Step 3 deadline afresh at the last event, so
    a seat that had moved its threat 40 s in got the whole 120 s again (GC-D05: never extended)."""
    walk = _goodcritters_step3(monkeypatch)
    seat = walk.asked()[0].seat
    walk.play(seat, walk.kinds(seat)["place_threat"][0], after=40.0)
    expected = walk.countdowns()[seat]
    assert expected == pytest.approx(120.5 - 40.0 + 0.5, abs=0.01)
    table, version, before = walk.table, walk.table.version(walk.match_id), walk.countdowns()
    assert len(before) >= 2 and set(before.values()) == {expected}  # one deadline for every seat

    def restarted() -> Dispatcher:
        return Dispatcher(table.store, table.dispatcher.registry, table.tasks, stall_seconds=10,
                          clock_grace_seconds=0.5, now=lambda: table.clock_now[0], wall=lambda: walk.wall[0],
                          live=table.dispatcher.live)

    table.tasks.clocks.clear()
    restarted().handle(table.store.read(walk.match_id))  # the whole stream, from its creation
    assert {s: c for _m, s, v, c in table.tasks.clocks if v == version} == pytest.approx(before, abs=0.01)
    table.tasks.clocks.clear()
    restarted().recover()  # folded from its stream (`_load`)
    assert {s: c for _m, s, v, c in table.tasks.clocks if v == version} == pytest.approx(before, abs=0.01)


def test_a_turn_clock_stands_still_through_a_choice_the_dispatcher_did_not_see_NC_D02(monkeypatch) -> None:
    """A dispatcher behind (one read holding several commands) wound the named clocks only at
    the versions it read: a turn's action that opened a choice and the choice's answer, read
    together, counted the choice's time on the turn's clock, which stands still meanwhile."""
    walk = _Walk(monkeypatch, "nostra_city", 3)
    for _ in range(1500):
        state, asked = walk.match.state, walk.asked()
        assert asked, "the match ended before a turn's action opened a choice"
        seat = asked[0].seat
        actions = {k: c for k, c in walk.kinds(seat).items() if k not in ("end_turn", "play_revenge")}
        if state.choice is None and actions:
            phase, turn_s = state.phase, walk.countdowns()[seat]
            walk.wall[0] += 30.0
            walk.n += 1
            walk.table.app.submit(walk.match_id, Viewer(seat), f"walk-{walk.n}", next(iter(actions.values()))[0])
            chosen = 0
            while (state := walk.match.state).choice is not None:  # answered before the dispatcher reads
                chooser = state.choice.seat
                walk.wall[0] += 5.0
                walk.n += 1
                walk.table.app.submit(walk.match_id, Viewer(chooser), f"walk-{walk.n}",
                                      walk.match.engine.timeout_command(state, chooser))
                chosen += 1
            walk.table.pump(walk.match_id)
            state = walk.match.state
            if chosen and (state.phase, state.turn_seat) == (phase, seat):
                left = walk.countdowns()[seat]
                assert turn_s - 30.0 - 0.01 <= left <= turn_s - 30.0 + 0.51, (turn_s, left, chosen)
                return
            continue
        walk.play(seat, walk.match.engine.timeout_command(state, seat))
    raise AssertionError("no turn went on after a choice inside it")
