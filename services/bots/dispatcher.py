"""The dispatcher: partition streams in, Celery tasks for the pending decisions out.

It reads every match's events through its own consumer group ("bots"), keeps
each running match folded in memory (MatchState: server-side code may see the
true state; bots never do) and after each batch asks the engine who must act:

- the bot seats asked (`MatchState.bot_policies`: created bot=True in MatchCreated.seat_info,
  or left by their player, `seat_left`, until a `seat_returned`) get one `decide`
  task for the match version they must act at, see `_queue_bots`: several seats
  asked at once (a simultaneous choice) are played by that one task, one after
  another. The task carries each seat's own view and legal commands (payload.py), so
  the worker's only RPC is SubmitCommand (a `random` seat's carries no view: it never reads one);
- a human seat whose decision has a clock (Pending.timeout_seconds, set by the
  game's own clock options) gets a `clock` task due when that clock runs out, as the
  match's fold winds it (`MatchState.deadlines`, famiglia.clocks: what the command service
  shows the seat as its deadline), plus a delivery grace.

Each (version, seat) is queued once; while a task of several seats plays them, the
versions its own commands produce queue nothing. A task for a version the match has left
does nothing, so a decision queued at an intermediate version (a batch cut in
the middle of one command's events, which `_read_all` avoids) is merely wasted.
A bot decision not answered within `stall_seconds` (a worker killed, a lost
message) is queued again, and so is a clock whose match is still at its version
`stall_seconds` after it ran out: the deterministic command id makes that harmless.
A batch's tasks reach the broker together: at the end of the batch, or — when the
broker is the event store's own Redis — in one transaction with the batch's acks,
ahead of the next read (one round trip; see `run`).
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from famiglia.engine.registry import Registry, UnknownGame
from famiglia.eventstore import EventStore
from famiglia.eventstore.envelopes import MATCH_CREATED, SEAT_CHANGES, event_decoder
from famiglia.eventstore.port import PartitionEntry, full_partitions
from famiglia.eventstore.turn_notices import TurnNotice, TurnNotices
from famiglia.eventstore.unreadable import UnreadableEntry, split_entries, tell_unreadable
from famiglia.grpcutil.errors import store_away
from famiglia.matchstate import MatchState, NotAMatch, command_key
from famiglia.telemetry import FOLLOWS_KEY, carried_trace_id, get_logger
from famiglia.v1.envelope_pb2 import EventEnvelope

from .notices import TurnWatch, fold_watching, look, over_notices, turn_notices, watch_for
from .payload import DecisionPayload, bot_command_id, leasable, reads_view, seat_payload, turn_order
from .tries import DecisionTries, tries_of

if TYPE_CHECKING:
    from .metrics import BotsMetrics

log = get_logger("famiglia.bots.dispatcher")
GROUP = "bots"
READ_COUNT = 200
"""Entries per partition and read (XREADGROUP COUNT)."""
PENDING_COUNT = 500
"""This consumer's own unacked entries read again at once, per partition (`_consume`): more
are read once those are acked."""
MAX_BACKOFF = 4
"""a stalled decision is queued again after stall_seconds, then 2x, 4x ... up to 16x that"""
MAX_DISPATCH_FAILURES = 5
"""Times in a row the dispatcher may fail on a match (`_let_go`) before it gives the match up
(`_give_up`): its bot seats asked play their defaults, and it is not folded again until its next
event or a restart. 1 + 2 + 4 + 8 stall times: about 7.5 minutes at the default 30 s."""


def _transient_errors() -> tuple[type[BaseException], ...]:
    """Errors that mean "the broker or the store is away", not "this match is broken"."""
    import redis
    from kombu.exceptions import OperationalError

    return (ConnectionError, TimeoutError, redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
            OperationalError)


TRANSIENT = _transient_errors()


def _counted(failures: int, error: BaseException | None) -> int:
    """A let-go match's failures in a row towards giving it up after `error`: one more, but for
    the store refusing for now (`store_away`: READONLY in a failover, OOM, MISCONF; no connection
    error, so not `TRANSIENT`), which only keeps the match let go (its waits still double).
    Counted, a Redis refusing writes for 1 + 2 + 4 + 8 stall waits gave the match up
    (`MAX_DISPATCH_FAILURES`), and, the give-up's own fold failing the same way, its bots never
    played again once Redis was back."""
    if error is not None and store_away(error):
        return failures
    return failures + 1


class LiveMatches:
    """The matches the dispatcher follows and that are not over, kept outside its memory: a
    restarted dispatcher wakes each of them (`recover`), however long ago it last moved. A
    match whose task died with a worker is a quiet one, so a window of recent events alone
    would miss exactly those."""

    def __init__(self) -> None:
        self._ids: set[str] = set()

    def add(self, match_id: str) -> None:
        self._ids.add(match_id)

    def remove(self, match_id: str) -> None:
        self._ids.discard(match_id)

    def members(self) -> list[str]:
        return sorted(self._ids)


class RedisLiveMatches(LiveMatches):
    """`LiveMatches` as a Redis set beside the event store's keys (`<prefix>:bots:live`)."""

    def __init__(self, client, key: str) -> None:
        self.client, self.key = client, key

    def add(self, match_id: str) -> None:
        self.client.sadd(self.key, match_id)

    def remove(self, match_id: str) -> None:
        self.client.srem(self.key, match_id)

    def members(self) -> list[str]:
        return sorted(m.decode() if isinstance(m, bytes) else m for m in self.client.smembers(self.key))


def live_matches_of(store: EventStore) -> LiveMatches:
    client, keys = getattr(store, "client", None), getattr(store, "keys", None)
    if client is not None and keys is not None:
        return RedisLiveMatches(client, f"{keys.prefix}:bots:live")
    return LiveMatches()


class TaskSender(Protocol):
    def decide(self, match_id: str, game_id: str, seat: int, version: int, policy: str,
               trace: Mapping[str, str] | None = None, payload: DecisionPayload | None = None,
               then: Sequence[tuple[int, str, DecisionPayload]] = (),
               lease: tuple[int, Sequence[tuple[int, str]]] | None = None) -> None:
        """One decide task: `seat`'s decision at `version`, then those of the `then` seats
        (seat, policy, payload), asked at the same version (a simultaneous choice); with a
        `lease` (most commands, every bot seat's (seat, policy)), then on through the bot
        seats' next turns (handlers.play_bot_decisions)."""
        ...

    def clock(self, match_id: str, seat: int, version: int, countdown: float,
              trace: Mapping[str, str] | None = None) -> None: ...

    def batch(self) -> AbstractContextManager[None]:
        """Tasks sent in the block may travel together, sent when it ends (or not at
        all if it raises; a failed send raises at the end of the block)."""
        ...


class HeldBatch(Protocol):
    commands: tuple[bytes, ...]
    """the held tasks as packed Redis commands, for a read to send before its acks"""


class HoldingTaskSender(TaskSender, Protocol):
    """A TaskSender whose batches can ride on the dispatcher's next read (celery_app.CeleryTasks)."""

    def shares_server(self, client: object) -> bool:
        """Whether `client` talks to the broker's own Redis server and database."""
        ...

    def batch(self, *, hold: bool = False) -> AbstractContextManager[None]: ...

    def take_batch(self) -> HeldBatch | None:
        """The decisions held by `batch(hold=True)` blocks since the last call."""
        ...

    def push_held(self, held: HeldBatch) -> None:
        """Send held decisions on their own."""
        ...


class MatchObserver(Protocol):
    """Told about tournament matches as they move and end (tournaments.py)."""

    def match_progress(self, tournament_id: str, match_id: str, commands: int) -> None: ...

    def match_finished(self, tournament_id: str, match: MatchState) -> None: ...

    def flush(self) -> None:
        """Write what was buffered (called when the dispatcher is idle)."""
        ...


@dataclass
class SeatBatch:
    """A decide task playing several bot seats asked at once, one after another (see `_schedule`)."""

    seats: tuple[int, ...]
    """in the order the worker submits them"""
    version: int
    """the version the next of them is submitted at: the task's, then each answer's"""
    next: int = 0
    """how many of `seats` were found played"""
    named: int = -1
    """the version its next command names, when that is not `version`: answers it had held
    back (NP-H9), written out in their seats' slots since, put the stream past it"""


@dataclass
class Lease:
    """A decide task that plays the match's bot seats on through their turns (see `_lease_playing`)."""

    version: int
    """the version its next command goes in at, as far as the dispatcher has read"""
    most: int
    """the most commands it submits (the task was told the same number)"""
    moves: int = 0
    """its commands read so far"""


@dataclass
class Tracked:
    match: MatchState
    bots: dict[int, str]
    """bot seat -> policy, as the fold says now (`MatchState.bot_policies`): a seat whose
    player left joins it at its `seat_left`, and one taken back leaves it at its `seat_returned`"""
    sent: set[tuple[int, int]] = field(default_factory=set)
    """(version, seat) already queued"""
    sent_at: float = 0.0
    stalls: int = 0
    """times this version's bot decision was queued again: each wait is twice the last, so a
    slow worker still thinking is not buried under copies of its own task"""
    stalled_version: int = -1
    trace: dict[str, str] = field(default_factory=dict)
    seat_batch: SeatBatch | None = None
    """the decide task of several seats still being played, if any"""
    lease: Lease | None = None
    """the decide task playing on through the bot seats' turns, if any"""
    clock_due: dict[int, tuple[int, float, int]] = field(default_factory=dict)
    """human seat -> (the version its clock was queued at, when it runs out on the dispatcher's
    clock, times it was queued again there): a clock whose match has not moved well after that
    is queued again (`Dispatcher._check_clocks`)"""
    event_ids: dict[int, str] = field(default_factory=dict)
    """seq -> event id of the newest events folded (`KEPT_EVENT_IDS`): an entry at one of
    those seqs with another id means the store lost acknowledged writes (`_went_back`)"""
    watch: TurnWatch | None = None
    """its people's asks, for turn notifications (notices.py); None: nobody to tell"""

    def remember(self, envelopes: Sequence[EventEnvelope], since: int) -> None:
        """Keep the ids of the envelopes folded past version `since`."""
        ids = self.event_ids
        for env in envelopes:
            if env.seq > since:
                ids[env.seq] = env.event_id
        while len(ids) > KEPT_EVENT_IDS:
            del ids[next(iter(ids))]

    @property
    def tournament_id(self) -> str:
        return self.match.created.tournament_id


def _named_before_held(match: MatchState, bots: Mapping[int, str], version: int) -> tuple[int, int] | None:
    """The span of a bot seat's command that went in right after `version` but is named for
    an earlier version: a task's turn that followed answers held back from the table (NP-H9)
    names its first command by the version it could see, which those answers, written since,
    have pushed on. Any other command there (a human's, a clock's) is None, as before."""
    prefix = f"bot:{match.match_id}:"
    start = match.past_padding(version)
    for key, span in reversed(match.commands.items()):  # the newest commands last
        if span[1] <= version:
            return None
        if span[0] != start + 1:
            continue
        seat, _, command_id = key.partition("/")
        named, _, rest = command_id.removeprefix(prefix).partition(":")
        if command_id.startswith(prefix) and int(seat) in bots and named.isdigit() and int(named) <= version \
                and rest in (seat, seat + ":f"):
            return span
        return None
    return None


KEPT_EVENT_IDS = 256
"""Event ids a tracked match keeps (`Tracked.event_ids`): more than `appendfsync everysec`
can lose of one match (about a second of its commands)."""


def _went_back(tracked: Tracked, batch: Sequence[EventEnvelope]) -> bool:
    """Whether the batch holds an event at a seq already folded under another event id: the
    store went back and was written on since. A redelivery has the id folded."""
    version, ids = tracked.match.version, tracked.event_ids
    return any(env.seq <= version and ids.get(env.seq, env.event_id) != env.event_id for env in batch)


def _written_out(match: MatchState, version: int, end: int) -> list[str]:
    """The keys of the commands in the block of slots after `version` (to `end`): answers held
    back from the table (NP-H9), written out in their seats' slots, so in seat order, not in
    the order they were made (the order their task named them in)."""
    keys = []
    for key, span in reversed(match.commands.items()):  # the newest commands last
        if span[1] <= version:
            break
        if span[0] <= end:
            keys.append(key)
    return keys


def _event_ids(envelope: EventEnvelope) -> dict[str, Any]:
    """What a failure line names of the event the dispatcher failed on: who made it, and the
    trace of the command that did (the operator's way from the line to that command's lines)."""
    ids: dict[str, Any] = {"seq": envelope.seq, "seat": envelope.seat, "command_id": envelope.command_id}
    trace_id = carried_trace_id(envelope.trace)
    if trace_id:  # no span is current in the dispatcher: the line's trace is the command's
        ids["trace_id"] = trace_id
    return ids


def _carried(tracked: Tracked, last: EventEnvelope) -> dict[str, str]:
    """The trace the match's next tasks carry: the last command's. After a bot's own move they
    start a new trace linked to it (`FOLLOWS_KEY`), so a match of bots alone is a trace per
    task, not one trace nested as deep as the match; after a person's move (or a clock's, or
    the match's creation) they continue it."""
    carrier = dict(last.trace)
    if last.seat in tracked.bots:
        carrier[FOLLOWS_KEY] = "1"
    return carrier


FOLLOWED_MAX = 20_000
"""Matches the dispatcher keeps folded before it lets the idle ones go (`Dispatcher._follow`):
well above the matches in play at once, while a match whose people walked away without a
clock is never finished, so over days of uptime those alone would grow it without end."""

OWED_KEPT = 10_000
"""Turn notices kept while their store is away (`Dispatcher.tell_owed`), the newest."""

DONE_KEPT = 10_000
"""Ended matches the dispatcher remembers (`Dispatcher._done`), the oldest let go first: a
redelivered entry of one is then skipped without a read, and every match ever ended is not."""


def _idle(tracked: Tracked) -> bool:
    """Whether nothing of the match is in play here: no task or clock queued at its version, no
    batch or lease playing. Folded again from its stream at its next event (`Dispatcher._load`),
    it is scheduled as it would have been (its clocks too: they are wound over the fold)."""
    version = tracked.match.version
    return (tracked.seat_batch is None and tracked.lease is None
            and not any(v == version for v, _ in tracked.sent))


def bot_seats(match: MatchState) -> dict[int, str]:
    """The seats the bots play now: created as bots', and those whose player left (`seat_left`)
    and did not take them back (`seat_returned`)."""
    return match.bot_policies()


class Dispatcher:
    def __init__(self, store: EventStore, registry: Registry, tasks: TaskSender, *,
                 observer: MatchObserver | None = None, stall_seconds: float = 30.0,
                 clock_grace_seconds: float = 0.5, seats_per_task: int = 0, lease_moves: int = 0,
                 now: Callable[[], float] = time.monotonic, live: LiveMatches | None = None,
                 wall: Callable[[], float] = time.time,
                 archive: Callable[[str], list[EventEnvelope]] | None = None,
                 followed_max: int = FOLLOWED_MAX, notices: TurnNotices | None = None,
                 tries: DecisionTries | None = None, metrics: BotsMetrics | None = None) -> None:
        self.store = store
        self.tries = tries if tries is not None else tries_of(store)
        """What the workers' tasks learnt of each bot decision (tries.py): a decision whose seats
        they gave up is not queued again."""
        self.metrics = metrics
        """Counts the matches given up (`_give_up`); None: metrics off."""
        self.notices = notices
        """Where the people's turn notifications go (notices.py); None: nowhere (off)."""
        self._owed: list[TurnNotice] = []
        """Notices made and not written yet (the store away): written with the next ones."""
        self.archive = archive
        """A trimmed match's events (the projection's archive), for a match first met after
        its stream was trimmed: finished while this service was away, its result is still due."""
        self.wall = wall
        """Seconds since the epoch, as events are stamped (clocks count from their event)."""
        self.live = live if live is not None else live_matches_of(store)
        self.registry = registry
        self.tasks = tasks
        self.observer = observer
        self.stall_seconds = stall_seconds
        self.clock_grace_seconds = clock_grace_seconds
        self.seats_per_task = seats_per_task
        """Most bot seats one task carries (0: every seat asked at once; 1: one task per decision)."""
        self.lease_moves = lease_moves if seats_per_task == 0 else 0
        """Most commands one task plays on through the bot seats' turns, in a match whose bot
        seats all play quick policies (0: none; off with `seats_per_task`)."""
        self.now = now
        self.matches: dict[str, Tracked] = {}
        self.followed_max = followed_max
        self._follow_limit = followed_max
        """`matches` is looked over for idle ones when it grows past this (see `_follow`)."""
        self._done: OrderedDict[str, tuple[int, str] | None] = OrderedDict()
        """Matches seen finished, with their end (version, last event id), or unplayable (None),
        recently: their entries are not followed (see `_end_lost`)."""
        self.queued = 0
        self._marked: list[tuple[set[tuple[int, int]], tuple[int, int]]] = []
        """(version, seat) marked sent in the current batch: unmarked if its send fails."""
        self._batched: list[tuple[Tracked, SeatBatch | None, Lease | None]] = []
        """(match, its batch and lease before) for each task of several seats or with a lease in
        the current batch: put back if its send fails."""
        self._next_stall_check = -math.inf
        """No decision can have stalled before this (see check_stalls)."""
        self._failed: OrderedDict[str, tuple[float, int, int]] = OrderedDict()
        """Matches let go after the dispatcher failed on them (`_let_go`) -> (when, failures in a
        row counted towards giving it up (`_counted`), times let go in a row): the stall check
        folds each again after its stall wait, doubling with the times (`_retry_failed`)."""

    # -- events in -------------------------------------------------------------------
    def handle(self, envelopes: Iterable[EventEnvelope], *, hold: bool = False) -> None:
        """Fold a batch (any matches, stream order) and queue what became pending.

        The batch's tasks are sent together at its end. If that send fails, none of
        them is marked sent, so redoing the batch (its entries stay unacked) sends them.
        `hold` (a HoldingTaskSender): the decisions are held for the next read to send
        (see `run`); they count as sent, and `run` sends them on their own if that fails."""
        by_match: dict[str, list[EventEnvelope]] = {}
        for env in envelopes:
            by_match.setdefault(env.match_id, []).append(env)
        self._marked, self._batched = [], []
        try:
            with self.tasks.batch(hold=True) if hold else self.tasks.batch():  # type: ignore[call-arg]
                for match_id, batch in by_match.items():
                    try:
                        self._handle_match(match_id, batch)
                    except TRANSIENT:
                        raise  # the broker or the store is away: keep the entries unacked, redo them
                    except Exception as exc:  # noqa: BLE001 - one broken match (an engine bug) must not stop the others
                        log.exception("match_dispatch_failed", match_id=match_id, **_event_ids(batch[-1]))
                        self._let_go(match_id, exc)
        except BaseException:
            for sent, key in self._marked:
                sent.discard(key)
            for tracked, seat_batch, lease in reversed(self._batched):
                tracked.seat_batch, tracked.lease = seat_batch, lease
            raise
        finally:
            self._marked, self._batched = [], []
        self.tell_owed()

    def _handle_match(self, match_id: str, batch: Sequence[EventEnvelope]) -> None:
        tracked = self._track(match_id, batch)
        if tracked is None:
            return
        if _went_back(tracked, batch):
            tracked = self._reload(tracked, "event_replaced", batch[0].seq)
            if tracked is None:
                return
        before, since = len(tracked.match.commands), tracked.match.version
        try:
            if tracked.watch is not None:  # a command at a time, to see whose turn began (notices.py)
                fold_watching(tracked.match, tracked.watch, batch)
            else:
                tracked.match.apply(batch)  # (its clocks wound on the way: MatchState.deadlines)
            tracked.remember(batch, since)
        except ValueError:  # a gap: this consumer missed entries; the match stream has them all
            tracked = self._load(match_id)
            if tracked is None:
                return
        if any(env.type in SEAT_CHANGES for env in batch):
            # Who plays a seat changed: a seat its player left is the bots' from its `seat_left` on
            # (decided like any bot seat, no clock), one taken back is its person's again.
            tracked.bots = bot_seats(tracked.match)
        if batch[-1].trace:
            tracked.trace = _carried(tracked, batch[-1])
        moved = len(tracked.match.commands) - before
        if moved > 0 and tracked.tournament_id and self.observer is not None:
            self.observer.match_progress(tracked.tournament_id, match_id, moved)
        self._schedule(tracked)

    def _track(self, match_id: str, batch: Sequence[EventEnvelope]) -> Tracked | None:
        tracked = self.matches.get(match_id)
        if tracked is not None:
            return tracked
        if match_id in self._done:
            if not self._end_lost(match_id, batch):
                return None
            return self._load(match_id)
        first = batch[0]
        if first.seq == 1 and first.type == MATCH_CREATED:
            try:
                match = MatchState.start(self.registry, first, clocks=True)
            except (UnknownGame, NotAMatch):
                self._forget(match_id)
                return None
            tracked = Tracked(match, bot_seats(match), watch=self._watch(match))
            if tracked.watch is not None:
                look(match, tracked.watch)
            self._follow(match_id, tracked)
            self.live.add(match_id)
            return tracked
        return self._load(match_id)

    def _load(self, match_id: str) -> Tracked | None:
        """A match first seen mid-way (a restart, a gap): fold it from its own stream, or,
        trimmed since (only a finished match is), from the archive."""
        envelopes = self.store.read(match_id)
        if not envelopes and self.archive is not None:
            try:
                envelopes = self.archive(match_id)
            except Exception as exc:  # noqa: BLE001 - the projection's database: not ours to fail on
                log.warning("archive_unreadable", match_id=match_id, error=str(exc)[:300])
        try:
            if not envelopes:
                raise NotAMatch("no events")
            # The clocks as they ran, from the match's start: a restart takes nothing off them.
            match = MatchState.start(self.registry, envelopes[0], clocks=True)
            watch = self._watch(match)
            if watch is not None:  # the asks as they began, whenever that was: a restart tells none twice
                look(match, watch)
                fold_watching(match, watch, envelopes[1:])
            else:
                match.apply(envelopes[1:])
        except (UnknownGame, NotAMatch):
            log.info("match_not_followed", match_id=match_id, events=len(envelopes))
            self._forget(match_id)
            return None
        tracked = Tracked(match, bot_seats(match), watch=watch)
        tracked.remember(envelopes[-KEPT_EVENT_IDS:], 0)
        if envelopes and envelopes[-1].trace:  # its tasks continue the match's trace, as after a batch
            tracked.trace = _carried(tracked, envelopes[-1])
        self._follow(match_id, tracked)
        if not match.finished:
            self.live.add(match_id)
        return tracked

    def _follow(self, match_id: str, tracked: Tracked) -> None:
        """Keep `tracked` folded; past `_follow_limit` matches, let the idle ones go (`_idle`: in
        practice people who walked away from a match without a clock). They stay live, so a
        restart wakes them, and their next event folds them again from their stream; what they
        lose is the stall check's look at a store that went back (`_store_behind`), which
        `recover` still makes. Looked over only as `matches` grows by a tenth of `followed_max`
        past what was left, so a dispatcher with that many matches in play pays little for it."""
        self.matches[match_id] = tracked
        if len(self.matches) <= self._follow_limit:
            return
        for other in [m for m, t in self.matches.items() if m != match_id and _idle(t)]:
            del self.matches[other]
        log.info("idle_matches_let_go", kept=len(self.matches))
        self._follow_limit = max(self.followed_max, len(self.matches) + self.followed_max // 10)

    def _reload(self, tracked: Tracked, why: str, seq: int) -> Tracked | None:
        """The store lost acknowledged writes this fold holds (a Redis restored from an older
        AOF, `appendfsync everysec` on a host crash): it is the truth, so the match is folded
        anew from it, as the command service does (`HotMatches.refold`). Otherwise the events
        written since at the lost seqs would be skipped as redeliveries, and the match would
        wait for bot moves nobody queues."""
        match = tracked.match
        log.warning("store_behind_dispatcher", match_id=match.match_id, version=match.version, seq=seq, why=why)
        return self._load(match.match_id)

    def _let_go(self, match_id: str, error: BaseException | None = None) -> None:
        """Drop the fold of a match the dispatcher failed on (an engine's or its own bug at one
        state): it stays live, so its next event folds it again from its stream, as does a
        restart, and a bug of one state does not stop its bots and clocks for good. Until
        session 34 it was forgotten as unplayable: skipped at every event after, and out of
        the live set, so its seats waited for good once its people had moved past that state."""
        self.matches.pop(match_id, None)
        # Nothing may come to wake it (a failure at a bot's turn: the bots wait on themselves):
        # the stall check folds it again after a stall wait, doubling while it keeps failing.
        _at, failures, times = self._failed.pop(match_id, (0.0, 0, 0))
        self._failed[match_id] = (self.now(), _counted(failures, error), times + 1)
        while len(self._failed) > DONE_KEPT:
            self._failed.popitem(last=False)
        self._next_stall_check = min(self._next_stall_check, self.now() + self._stall_wait(times))

    def _retry_failed(self, now: float) -> tuple[int, float]:
        """Fold again the matches let go after a failure whose stall wait has passed, and queue
        what they wait for (as `recover` does at a restart): the tasks queued and when the next
        retry is due. One that fails again waits twice as long (up to 16 stall times); at its
        `MAX_DISPATCH_FAILURES`-th failure in a row it is given up (`_give_up`)."""
        queued, due = 0, math.inf
        for match_id, (at, failures, times) in list(self._failed.items()):
            if match_id in self.matches or match_id in self._done:  # its next event folded it
                del self._failed[match_id]
                continue
            wait_until = at + self._stall_wait(times - 1)
            if now < wait_until:
                due = min(due, wait_until)
                continue
            before = self.queued
            if failures >= MAX_DISPATCH_FAILURES:
                del self._failed[match_id]
                self._give_up(match_id, failures)
                queued += self.queued - before
                continue
            try:
                tracked = self._load(match_id)
                if tracked is not None:
                    self._schedule(tracked)
            except TRANSIENT:
                self.matches.pop(match_id, None)  # the store or the broker away: the next check, from scratch
                raise
            except Exception as exc:  # noqa: BLE001 - still broken: looked at again later, or given up
                counted = _counted(failures, exc)
                log.exception("match_recovery_failed", match_id=match_id, failures=counted)
                self.matches.pop(match_id, None)
                if counted >= MAX_DISPATCH_FAILURES:
                    del self._failed[match_id]
                    self._give_up(match_id, counted)
                    queued += self.queued - before
                    continue
                self._failed[match_id] = (now, counted, times + 1)
                self._failed.move_to_end(match_id)
                due = min(due, now + self._stall_wait(times))
                continue
            self._failed.pop(match_id, None)
            queued += self.queued - before
        return queued, due

    def _give_up(self, match_id: str, failures: int) -> None:
        """Stop retrying a match the dispatcher failed on `failures` times in a row (at a bot's
        turn nothing else wakes it, and until session 35 it was folded again every 16 stall times
        for good): each bot seat asked plays its documented default, as a worker gives up a seat
        the server cannot let it decide (handlers.py `_give_up`): a `clock` task at once
        (`run_clock`, which the command service takes from the bots' token for a bot's seat). The
        match stays followed, so the default's event (or a person's) schedules it as usual, and
        a failure there starts a new count. Where even the fold or the engine's `pending` fails,
        nothing can be played: the match waits for its next event, a restart or an operator
        (a tournament abandons it as stuck). Logged once: `bot_match_given_up`, counted once per
        bot seat given a default, when any is asked; else `match_dispatch_stopped` (a person's
        turn, whose command folds it again, or a fold that failed: whose turn is not known),
        counted as no bot decision (until session 35 both were, as one given up)."""
        game_id, version, seats, error = "unknown", -1, [], ""
        asked: list[int] | None = None
        try:
            tracked = self._load(match_id)
            if tracked is not None:
                match = tracked.match
                game_id, version, asked = match.game_id, match.version, []
                if match.state is not None and not match.finished:
                    asked = self._asked_counting_held(tracked, [p.seat for p in match.engine.pending(match.state)])
                    seats = [seat for seat in asked if seat in tracked.bots]
                for seat in seats:
                    self._queue(tracked, seat, functools.partial(self.tasks.clock, match_id, seat, version, 0.0,
                                                                 trace=tracked.trace))
            # Not followed until its next event (the default's, a person's): a default that does not
            # go in leaves the match waiting, not folded and failing again every few minutes.
            self.matches.pop(match_id, None)
        except TRANSIENT:
            self.matches.pop(match_id, None)
            self._failed[match_id] = (self.now(), failures, failures)  # the store or the broker away: not given up yet
            raise
        except Exception as exc:  # noqa: BLE001 - still broken: nothing to play
            self.matches.pop(match_id, None)
            if store_away(exc):  # the store refusing for now (READONLY, OOM): not given up yet
                log.warning("match_give_up_deferred", match_id=match_id, error=repr(exc)[:300])
                self._failed[match_id] = (self.now(), failures, failures)
                return
            error = repr(exc)[:300]
        if not seats:  # no bot seat waits (or none can be told): nothing given up
            log.warning("match_dispatch_stopped", match_id=match_id, game_id=game_id, version=version,
                        failures=failures, asked=asked, error=error)
            return
        log.warning("bot_match_given_up", match_id=match_id, game_id=game_id, version=version, failures=failures,
                    defaults=seats, error=error)
        if self.metrics is not None:
            for _seat in seats:  # a decision a seat, as a worker counts them
                self.metrics.decision_given_up(game_id, "dispatch_failed")

    def _asked_counting_held(self, tracked: Tracked, asked: list[int]) -> list[int]:
        """`asked` (the stream's) less the seats whose answer is held back (NP-H9), as `_schedule`
        counts them: a bot that answered in a window is no bot seat to give up (its clock finds
        it not asked). Where the held answers cannot be counted (an engine bug evolving them),
        the stream's: a default queued for a seat that answered is refused, as `not_pending`."""
        if not tracked.match.may_hold or not any(seat in tracked.bots for seat in asked):
            return asked
        try:
            held = self._asked_with_held(tracked)
        except TRANSIENT:
            raise
        except Exception as exc:  # noqa: BLE001 - the give-up goes on from the stream
            if store_away(exc):
                raise
            log.warning("held_answers_unreadable", match_id=tracked.match.match_id, error=repr(exc)[:300])
            return asked
        return asked if held is None else [seat for seat in asked if seat in held]

    def _forget(self, match_id: str, end: tuple[int, str] | None = None) -> None:
        self.live.remove(match_id)
        self.matches.pop(match_id, None)
        self._done[match_id] = end
        self._done.move_to_end(match_id)
        while len(self._done) > DONE_KEPT:
            self._done.popitem(last=False)

    def _end_lost(self, match_id: str, batch: Sequence[EventEnvelope] = ()) -> bool:
        """Whether a match seen finished lost its end in the store since (acknowledged writes
        lost, as in `_reload`): then it is played on, and followed again. A redelivery of its
        entries holds its last event; else the store is asked (rarely: a finished match gets
        no more entries). A store at another version, or another event at the end's seq, has
        gone back; a stream trimmed since the end (archived) has not."""
        end = self._done.get(match_id)
        if end is None:  # unplayable: never followed
            return False
        version, event_id = end
        if all(env.seq <= version for env in batch) and any(
                env.seq == version and env.event_id == event_id for env in batch):
            return False
        lost = self.store.version(match_id) != version
        if not lost:
            last = self.store.read(match_id, after=version - 1, limit=1)
            lost = bool(last) and last[0].event_id != event_id
        if lost:
            log.warning("store_behind_dispatcher", match_id=match_id, version=version, why="end_lost")
            del self._done[match_id]
        return lost

    # -- turn notifications ----------------------------------------------------------
    def _watch(self, match: MatchState) -> TurnWatch | None:
        """A match's people to tell of their turns, when notifications are on and it names any."""
        return watch_for(match) if self.notices is not None else None

    def tell_owed(self) -> int:
        """Write the notices made since the last write; the store away keeps them for the next
        (the newest OWED_KEPT): a notification never holds up a bot's move or a clock."""
        if not self._owed or self.notices is None:
            return 0
        owed, self._owed = self._owed, []
        try:
            return self.notices.tell(owed)
        except Exception as exc:  # noqa: BLE001 - Redis away: told at the next write
            self._owed = (owed + self._owed)[-OWED_KEPT:]
            log.warning("turn_notices_unwritten", notices=len(self._owed), error=repr(exc)[:300])
            return 0

    # -- tasks out -------------------------------------------------------------------
    def _schedule(self, tracked: Tracked) -> None:
        match = tracked.match
        if match.state is None:
            return
        if tracked.watch is not None:
            tell = over_notices if match.finished else turn_notices
            self._owed += tell(match, tracked.watch, round(self.wall() * 1000))
        if match.finished:
            if tracked.tournament_id and self.observer is not None:
                self.observer.match_finished(tracked.tournament_id, match)
            self._forget(match.match_id, (match.version, tracked.event_ids.get(match.version, "")))
            return
        tracked.sent = {(v, s) for v, s in tracked.sent if v == match.version}
        pendings = match.engine.pending(match.state)
        bots = [p.seat for p in pendings if p.seat in tracked.bots]
        if bots and match.may_hold:  # a bot whose answer is held back is asked no more (NP-H9)
            asked = self._asked_with_held(tracked)
            if asked is not None:
                bots = [seat for seat in bots if seat in asked]
        if tracked.seat_batch is not None and not self._batch_playing(tracked, bots):
            tracked.seat_batch = None
        if tracked.lease is not None and not self._lease_playing(tracked, bots):
            tracked.lease = None
        if bots and tracked.seat_batch is None and tracked.lease is None:
            self._queue_bots(tracked, bots)
        self._queue_clocks(tracked, pendings)

    def _queue_clocks(self, tracked: Tracked, pendings: Sequence[Any]) -> None:
        """A clock for every human seat whose decision has one, due when the match's turn clocks
        say it runs out (`MatchState.deadlines`, `famiglia.clocks`: the same moment the command
        service shows the seat as its `deadline_ms`). Another seat's command moves the version
        and makes the running clock stale; the new one runs out when the old one would have,
        so a deadline is never stretched, nor by the seat's own optional commands (a chat, an
        offer: they answer nothing, NP-D1); the seat's answer starts its next decision
        afresh, unless the game names the clock (GC-D05's Step 3, NC-D02's turn). The grace
        covers delivery: the countdown is the time left plus the grace, and a dispatcher that
        queues a clock later than the grace after its decision began (a restart, a backlog)
        takes the rest of the delay off, so the default lands between one and two graces after
        the deadline."""
        match = tracked.match
        now, grace = self.wall(), self.clock_grace_seconds
        if tracked.clock_due:  # (a match of bots only never has one: nothing to build for it)
            tracked.clock_due = {s: due for s, due in tracked.clock_due.items() if due[0] == match.version}
        deadlines = match.deadlines()
        for pending in pendings:
            runs_out = deadlines.get(pending.seat)
            if runs_out is None or pending.seat in tracked.bots or pending.timeout_seconds <= 0:
                continue
            began = runs_out - pending.timeout_seconds
            late = max(0.0, now - began - grace)
            countdown = max(0.0, pending.timeout_seconds + grace - late)
            if self._queue(tracked, pending.seat, functools.partial(
                    self.tasks.clock, match.match_id, pending.seat, match.version, countdown, trace=tracked.trace)):
                known_due = tracked.clock_due.get(pending.seat)
                tracked.clock_due[pending.seat] = (match.version, self.now() + countdown,
                                                   known_due[2] if known_due is not None else 0)

    def _queue_bots(self, tracked: Tracked, bots: Sequence[int]) -> None:
        """One task for every bot seat asked at this version, played one after another.

        Several bot seats asked at once (a simultaneous secret choice) used to get one task
        at a time: the first answer moves the version and made the others' tasks stale, so
        the next was queued only when the version moved. Now one task carries each seat's
        own payload (its view and legal commands at this version; a policy sees only its
        own seat's) and the worker submits them in turn, each at the version the previous
        answer returned (handlers.play_bot_decisions): a whole Celery task round and a
        dispatcher pass less for each further seat. The order rotates with the version,
        for fairness; while the task plays, the versions its own commands produce queue
        nothing (`_batch_playing`)."""
        match = tracked.match
        order = turn_order(bots, match.version)
        if self.seats_per_task > 0:
            order = order[:self.seats_per_task]
        seat = order[0]
        if (match.version, seat) in tracked.sent:
            return
        engine, state, policies = match.engine, match.state, tracked.bots
        payloads = [seat_payload(engine, state, s, view=reads_view(policies[s])) for s in order]
        then = [(s, policies[s], p) for s, p in zip(order[1:], payloads[1:], strict=True)]
        send = functools.partial(self.tasks.decide, match.match_id, match.game_id, seat, match.version,
                                 policies[seat], trace=tracked.trace, payload=payloads[0])
        if then:
            send = functools.partial(send, then=then)
        lease = self.lease_moves > 0 and all(leasable(p) for p in policies.values())
        if lease:
            send = functools.partial(send, lease=(self.lease_moves, sorted(policies.items())))
        if self._queue(tracked, seat, send):
            tracked.sent_at = self.now()
            for s in order[1:]:
                tracked.sent.add((match.version, s))  # unmarked with the first if the send fails
                self._marked.append((tracked.sent, (match.version, s)))
            if lease:
                self._batched.append((tracked, tracked.seat_batch, tracked.lease))
                tracked.lease = Lease(match.version, self.lease_moves)
            elif then:
                self._batched.append((tracked, tracked.seat_batch, tracked.lease))
                tracked.seat_batch = SeatBatch(tuple(order), match.version)

    def _batch_playing(self, tracked: Tracked, bots: Sequence[int]) -> bool:
        """Whether the match's task of several seats is still playing them: every command since
        it was queued is one of its own (`bot:<match>:<version>:<seat>`, in its order) and its
        next seat is asked. Then its seats are marked sent at this version (the stall timer
        runs from its last move) and nothing is queued for them. Otherwise — all played, an
        outside command moved the match (the worker's next submit is stale), or its next seat
        is no longer asked (the worker stops there too) — scheduling goes on as usual."""
        batch = tracked.seat_batch
        assert batch is not None
        match = tracked.match
        commands, moved = match.commands, False
        while batch.version < match.version and batch.next < len(batch.seats):
            end = match.past_padding(batch.version)
            if end != batch.version:  # a block of slots (NP-H9): the batch's held answers, in seat order
                # Held answers move no version the table sees, so the batch named each of them,
                # and the command after them, by the version before the block (NP-H9: a name
                # counting them would tell the table how many answers were held).
                held = _written_out(match, batch.version, end)
                played = batch.seats[batch.next:batch.next + len(held)]
                own = {command_key(s, bot_command_id(match.match_id, batch.version, s)) for s in played}
                if len(played) < len(held) or {key.removesuffix(":f") for key in held} != own:
                    return False  # someone else's answer among them
                batch.named, batch.version, batch.next = batch.version, end, batch.next + len(held)
                moved = moved or bool(held)
                continue
            seat = batch.seats[batch.next]
            named = batch.version if batch.named < 0 else batch.named
            command_id = command_key(seat, bot_command_id(match.match_id, named, seat))
            span = commands.get(command_id) or commands.get(command_id + ":f")
            if span is None or span[0] != batch.version + 1:
                return False  # someone else's command (or one of the batch's that changed nothing)
            batch.version, batch.next, batch.named, moved = span[1], batch.next + 1, -1, True
        if batch.version != match.version or batch.next >= len(batch.seats) or batch.seats[batch.next] not in bots:
            return False
        if moved:
            tracked.sent_at = self.now()
        for s in batch.seats[batch.next:]:
            tracked.sent.add((match.version, s))
        return True

    def _lease_playing(self, tracked: Tracked, bots: Sequence[int]) -> bool:
        """Whether the match's leased task still plays it: every command since it was queued is
        a bot seat's command named for the version it went in at (`bot:<match>:<version>:<seat>`,
        what the task submits), it has not reached its most commands, and a bot seat is asked.
        Then the seats asked are marked sent at this version (the stall timer runs from its
        last move) and nothing is queued. Otherwise — an outside command (the task's next
        submit is stale and it stops), the task's last command read, the match over or no bot
        asked (it stops there too) — scheduling goes on as usual. A task that stops for
        another reason (killed, a refusal it cannot get past) leaves the match to the stall
        timer, as a task of one seat does."""
        lease = tracked.lease
        assert lease is not None
        match = tracked.match
        commands, moved = match.commands, False
        prefix = f"bot:{match.match_id}:"
        while lease.version < match.version:
            if lease.moves >= lease.most and not self._held_back(tracked):
                return False
            end = match.past_padding(lease.version)
            if end != lease.version:  # a command made in a window went in behind slots (NP-H9)
                held = _written_out(match, lease.version, end)
                if not all(int(key.partition("/")[0]) in tracked.bots and key.partition("/")[2].startswith(prefix)
                           for key in held):
                    return False  # someone else's answer among the held ones
                lease.version, lease.moves, moved = end, lease.moves + len(held), moved or bool(held)
                continue  # the command after the slots is named before them (`_named_before_held`)
            span = None
            for s in tracked.bots:  # (after held answers, two seats' commands can share a name)
                command_id = command_key(s, bot_command_id(match.match_id, lease.version, s))
                span = commands.get(command_id) or commands.get(command_id + ":f")
                if span is not None and span[0] == lease.version + 1:
                    break
            if (span is None or span[0] != lease.version + 1) and match.may_hold:
                span = _named_before_held(match, tracked.bots, lease.version)
            if span is None or span[0] != lease.version + 1:
                return False  # someone else's command
            lease.version, lease.moves, moved = span[1], lease.moves + 1, True
        if (lease.moves >= lease.most and not self._held_back(tracked)) or not bots:
            return False
        if moved:
            tracked.sent_at = self.now()
        for s in bots:
            tracked.sent.add((match.version, s))
        return True

    def _queue(self, tracked: Tracked, seat: int, send: Callable[[], None]) -> bool:
        """Send once per (version, seat); marked only once the broker took it."""
        key = (tracked.match.version, seat)
        if key in tracked.sent:
            return False
        send()
        tracked.sent.add(key)
        self._marked.append((tracked.sent, key))
        self.queued += 1
        return True

    def check_stalls(self) -> int:
        """Queue again bot decisions left unanswered for `stall_seconds`, and clocks whose
        match is still at their version `stall_seconds` after they ran out (`_check_clocks`).

        Called after every batch, it looks at the matches only when one may be due: the
        earliest wait seen at the last look, or `stall_seconds` after it (a decision queued
        since then waits at least that long). Walking every match in play after each
        batch was ~3 % of the dispatcher's CPU, to find nothing nearly always."""
        if self._owed:
            self.tell_owed()  # those the store was away for
        now = self.now()
        if now < self._next_stall_check:
            return 0
        resent = 0
        due = now + self.stall_seconds
        if self._failed:
            retried, retry_due = self._retry_failed(now)
            resent += retried
            due = min(due, retry_due)
        for tracked in list(self.matches.values()):
            if tracked.clock_due:
                clocks, clocks_due = self._check_clocks(tracked, now)
                resent += clocks
                due = min(due, clocks_due)
            stalls = tracked.stalls if tracked.stalled_version == tracked.match.version else 0
            wait = self._stall_wait(stalls)
            if now - tracked.sent_at < wait:
                due = min(due, tracked.sent_at + wait)
                continue
            bot_keys = {(v, s) for v, s in tracked.sent if s in tracked.bots}
            if not bot_keys:
                # People are asked (or nobody queued): their clocks (`_check_clocks`) move the match on, unless the
                # store lost a bot's move this fold holds (the store's match asks that bot, and
                # no event will come to say so). A look at the store's version per wait.
                tracked.sent_at = now
                due = min(due, now + wait)
                stored = self._store_behind(tracked)
                if stored is not None:
                    reloaded = self._reload(tracked, "waiting", stored)
                    if reloaded is not None:
                        before = self.queued
                        self._schedule(reloaded)
                        resent += self.queued - before
                continue
            if self._bots_answered_held(tracked):
                tracked.sent_at = now  # answered, held back from the table (NP-H9): not stalled
                due = min(due, now + wait)
                continue
            if self._given_up(tracked, {s for _v, s in bot_keys}):
                # The workers gave these seats up (tries.py: their default, if any, did not go in):
                # a task queued again would fail once more. Looked at again each longer wait.
                tracked.sent_at, tracked.stalls, tracked.stalled_version = now, stalls + 1, tracked.match.version
                due = min(due, now + self._stall_wait(stalls + 1))
                continue
            log.warning("bot_decision_stalled", match_id=tracked.match.match_id, version=tracked.match.version,
                        stalls=stalls + 1, seats=sorted({s for _v, s in bot_keys}),
                        policies=sorted({tracked.bots[s] for _v, s in bot_keys}),
                        waited_s=round(now - tracked.sent_at, 1), lease=tracked.lease is not None,
                        trace_id=carried_trace_id(tracked.trace))
            stored = self._store_behind(tracked)
            if stored is not None:  # the store lost what this fold holds: no task can play it
                reloaded = self._reload(tracked, "stalled", stored)
                if reloaded is None:
                    continue
                tracked = reloaded
            tracked.stalls, tracked.stalled_version = stalls + 1, tracked.match.version
            tracked.sent -= bot_keys
            tracked.seat_batch = tracked.lease = None  # its worker may be gone: a new task for whoever is asked now
            before = self.queued
            try:
                self._schedule(tracked)
            except TRANSIENT:
                # Not sent (the broker away): still stalled, so the next check queues it again.
                # Forgotten, the match would look like one that waits for people's clocks.
                tracked.sent |= bot_keys
                raise
            except Exception as exc:  # noqa: BLE001 - this match's bug: let go, as `handle` does
                # Raised, it failed the whole check at every pass, and the matches after it in
                # the walk were never looked at again.
                log.exception("match_dispatch_failed", match_id=tracked.match.match_id, version=tracked.match.version)
                self._let_go(tracked.match.match_id, exc)  # (looked at again in a stall time at the soonest: `due`)
                continue
            resent += self.queued - before
        self._next_stall_check = due
        return resent

    def _given_up(self, tracked: Tracked, seats: set[int]) -> bool:
        """Whether the workers gave up every one of these bot seats' decisions at the match's
        version with nothing played (handlers.py `_give_up`: no default, or it was refused). Not
        the failures counted: a give-up whose default met an outage (Celery's retries run out
        before the command service is back) was then never queued again."""
        version = tracked.match.version
        return bool(seats) and all(self.tries.given_up(tracked.match.match_id, version, s) for s in sorted(seats))

    def _stall_wait(self, stalls: int) -> float:
        """How long a decision or a clock waits before it is queued again, after `stalls` times."""
        return self.stall_seconds * (1 << min(stalls, MAX_BACKOFF))

    def _check_clocks(self, tracked: Tracked, now: float) -> tuple[int, float]:
        """Queue again the clocks of a match still at their version `stall_seconds` after they
        ran out (doubling for each further time, as a bot decision's wait); the clocks queued
        and when the next may be due. A clock's message can be lost where no visibility timeout
        brings it back (a worker killed between its BRPOP and its unacked record, a clock that
        gave up its retries while the command service or Redis was away), and nothing else
        moves a seat whose person walked away: its match waited for good. The command id names
        the clock's version, so a clock that fires twice moves the match once."""
        version = tracked.match.version
        overdue: list[int] = []
        due = math.inf
        for seat, (at, runs_out, stalls) in tracked.clock_due.items():
            if at != version or (version, seat) not in tracked.sent:
                continue
            wait_until = runs_out + self._stall_wait(stalls)
            if now < wait_until:
                due = min(due, wait_until)
            else:
                overdue.append(seat)
        if overdue and tracked.match.may_hold:  # a seat whose answer is held back is not asked (NP-H9)
            asked = self._asked_with_held(tracked)
            if asked is not None:
                for seat in [s for s in overdue if s not in asked]:
                    overdue.remove(seat)
                    at, runs_out, stalls = tracked.clock_due[seat]
                    tracked.clock_due[seat] = (at, now, stalls + 1)  # looked at again later
                    due = min(due, now + self._stall_wait(stalls + 1))
        if not overdue:
            return 0, due
        keys = {(version, seat) for seat in overdue}
        log.warning("turn_clock_stalled", match_id=tracked.match.match_id, version=version, seats=sorted(overdue),
                    trace_id=carried_trace_id(tracked.trace))
        counted = {seat: tracked.clock_due[seat] for seat in overdue}
        for seat, (at, runs_out, stalls) in counted.items():
            tracked.clock_due[seat] = (at, runs_out, stalls + 1)
        tracked.sent -= keys
        before = self.queued
        try:
            self._queue_clocks(tracked, tracked.match.engine.pending(tracked.match.state))
        except BaseException:
            tracked.sent |= keys  # not sent: looked at again at the next check
            tracked.clock_due.update(counted)
            raise
        for seat in overdue:
            if (version, seat) not in tracked.sent:  # no longer asked with a clock
                tracked.clock_due.pop(seat, None)
            else:
                due = min(due, tracked.clock_due[seat][1] + self._stall_wait(tracked.clock_due[seat][2]))
        return self.queued - before, due

    def _store_behind(self, tracked: Tracked) -> int | None:
        """The store's version if it is behind this fold (it lost acknowledged writes), else
        None; a store that is away is taken to agree (the next look asks again)."""
        try:
            stored = self.store.version(tracked.match.match_id)
        except TRANSIENT:
            return None
        return stored if stored < tracked.match.version else None

    def _held_back(self, tracked: Tracked) -> bool:
        """Whether a bot seat's answer, the leased task's, is held back from the table (NP-H9).
        A task plays on past its lease while its turn's last command is held
        (handlers.play_bot_decisions), so a lease that has used its moves is still playing
        while one is. Someone else's held answer (a person's, a clock's) says nothing of it."""
        match = tracked.match
        if not match.may_hold:
            return False
        prefix = f"bot:{match.match_id}:"
        return any(env.seat in tracked.bots and env.command_id.startswith(prefix)
                   for env in self.store.read_staged(match.match_id, after=match.version))

    def _bots_answered_held(self, tracked: Tracked) -> bool:
        """Whether the match has answers held back from the table (NP-H9) and, once they are
        counted, the game asks none of its bot seats: a window's answers reach the stream only
        when it resolves, so the stream alone shows a bot that answered as still asked, and
        the match waits for a human, not a task."""
        asked = self._asked_with_held(tracked) if tracked.match.may_hold else None
        return asked is not None and not any(seat in tracked.bots for seat in asked)

    def _asked_with_held(self, tracked: Tracked) -> set[int] | None:
        """The seats the game asks once the match's held-back answers are counted, or None if
        none are held. The tracked state is not changed: its version is the table's, which
        clocks and tasks name."""
        match = tracked.match
        staged = self.store.read_staged(match.match_id, after=match.version)
        if not staged or staged[0].seq != match.version + 1:  # none, or the stream moved on: it will say
            return None
        engine, state = match.engine, match.state
        decode = event_decoder(engine)
        for envelope in staged:
            state = engine.evolve(state, decode(envelope.payload))
        return {p.seat for p in engine.pending(state)}

    # -- after a restart -------------------------------------------------------------
    def recover(self, recent: int = 500) -> int:
        """Queue again what recently active matches wait for.

        A match whose task was lost with a crashed process (a broker without
        persistence, a dispatcher killed between fold and send) gets no new
        event, so nothing would ever wake it. After a restart the matches seen
        in the last `recent` entries of each partition, and every match the dispatcher
        had followed and not seen end (`LiveMatches`), are folded again and their
        pending decisions queued; tasks are idempotent, so one queued twice is harmless.
        """
        recovered = 0
        candidates = dict.fromkeys(_recent_matches(self.store, recent))
        candidates.update(dict.fromkeys(self.live.members()))
        for match_id in candidates:
            if match_id in self.matches or (match_id in self._done and not self._end_lost(match_id)):
                continue
            try:
                tracked = self._load(match_id)
                if tracked is not None:
                    self._schedule(tracked)
                    recovered += match_id in self.matches
            except TRANSIENT:
                raise
            except Exception as exc:  # noqa: BLE001
                log.exception("match_recovery_failed", match_id=match_id)
                self._let_go(match_id, exc)
        self.tell_owed()
        return recovered

    # -- the loop --------------------------------------------------------------------
    def run(self, consumer, stop: threading.Event, *, block_ms: int = 500, claim_idle_ms: int = 60_000,
            retry_seconds: float = 1.0) -> None:
        """Consume until `stop` is set, whatever happens to Redis or the broker meanwhile: a
        pass (`_consume`) that fails starts again after a pause (doubling up to 30 s while
        passes keep failing at once), with this consumer's unacked entries read again and
        the matches recovered, as at a restart. Without this the thread died with the first
        Redis restart and every bot and clock seat of every match waited for good."""
        pause = retry_seconds
        while not stop.is_set():
            started = self.now()
            try:
                self._consume(consumer, stop, block_ms=block_ms, claim_idle_ms=claim_idle_ms)
                return
            except Exception:  # noqa: BLE001 - Redis or the broker away; anything else: logged, and try again
                log.exception("dispatcher_pass_failed", pause_s=pause)
            if self.now() - started > 60:
                pause = retry_seconds
            stop.wait(pause)
            pause = min(pause * 2, 30.0)

    def _consume(self, consumer, stop: threading.Event, *, block_ms: int, claim_idle_ms: int) -> None:
        """One pass: consume until `stop` is set or an error escapes. `consumer` is a
        PartitionConsumer of group GROUP.

        A batch is acked with the next read, after its tasks are queued. When the broker
        is the consumer's own Redis (`shares_server`), a batch's decide messages travel in
        that same round trip — `MULTI, LPUSH, XACK…, EXEC, XREADGROUP`, so Redis applies
        the acks only with the push (consumer.read's `before_ack`) — instead of a round
        trip of their own at the end of the batch. If that read fails, whether the push
        ran is unknown: the tasks are pushed again on their own (a task queued twice is
        harmless, a lost one would stall its match) and this consumer's pending entries
        read again before anything is acked. Its own pending entries are held (`hold_pending`,
        their idle time back to 0, however long it was away) and read again `PENDING_COUNT` a
        partition at a time, the next once those are acked, so none is left to the group's
        XAUTOCLAIM, which is for a dead (or stalled) dispatcher's entries: a live one holds none
        between rounds."""
        try:
            log.info("dispatcher_recovered", matches=self.recover())
        except Exception:  # noqa: BLE001 - the stall watchdog and new events still cover most cases
            log.exception("dispatcher_recovery_failed")
        holding = self._holding(consumer)
        # What this consumer read but never acked (a restart): every entry held first, so none sits
        # idle for another replica's XAUTOCLAIM while the backlog is read back PENDING_COUNT at a time.
        consumer.hold_pending()
        backlog = consumer.read_pending(count=PENDING_COUNT)
        last_claim = self.now()
        done: list[PartitionEntry] = []
        """Entries whose tasks the broker took (or `held` carries), acked with the next read (one
        round trip less a batch): the XACK follows the task messages, never precedes them."""
        held: HeldBatch | None = None
        """The last batch's decisions, held to go with its acks (`holding` only)."""
        try:
            while not stop.is_set():
                more = False
                if backlog:
                    entries, backlog = backlog, []
                    self._settle(consumer, held, done)
                    held, done = None, []
                    more = bool(full_partitions(entries, PENDING_COUNT))  # the rest, once these are acked
                else:
                    try:
                        entries = self._read_all(consumer, block_ms, ack=done,
                                                 before_ack=held.commands if held is not None else ())
                    except Exception:
                        if held is None:
                            raise
                        log.exception("dispatch_read_failed", entries=len(done))
                        try:
                            self.tasks.push_held(held)  # type: ignore[attr-defined]
                        except Exception:  # noqa: BLE001 - broker down: keep them, try again
                            log.exception("dispatch_failed", entries=len(done))
                            stop.wait(1.0)
                            continue
                        held = None  # queued now: `done` is acked with the backlog's turn
                        backlog = consumer.read_pending(count=PENDING_COUNT)  # with what that read may have delivered
                        continue
                    held = None
                done = []
                if self.now() - last_claim > claim_idle_ms / 1000:
                    entries += consumer.claim_stale(claim_idle_ms)
                    last_claim = self.now()
                if entries:
                    try:
                        self.handle((e.envelope for e in entries), hold=holding)
                    except Exception:  # noqa: BLE001 - broker down: keep the entries, redo them
                        log.exception("dispatch_failed", entries=len(entries))
                        stop.wait(1.0)
                        backlog = consumer.read_pending(count=PENDING_COUNT)
                        continue
                    done = entries
                    if holding:
                        held = self.tasks.take_batch()  # type: ignore[attr-defined]
                    if more:  # acked first: a read of pending entries starts at the oldest
                        self._settle(consumer, held, done)
                        held, done = None, []
                        backlog = consumer.read_pending(count=PENDING_COUNT)
                try:
                    if not entries and self.observer is not None:
                        self.observer.flush()
                    self.check_stalls()
                except Exception:  # noqa: BLE001
                    log.exception("stall_check_failed")
        finally:
            self._settle(consumer, held, done)

    def _holding(self, consumer) -> bool:
        """Whether batches can be held for the read (the sender can, on the consumer's server)."""
        shares = getattr(self.tasks, "shares_server", None)
        return shares is not None and bool(shares(getattr(consumer, "client", None)))

    def _settle(self, consumer, held: HeldBatch | None, done: Sequence[PartitionEntry]) -> None:
        """Send held decisions on their own, then ack `done` (raises, acking nothing, if the send fails)."""
        if held is not None:
            self.tasks.push_held(held)  # type: ignore[attr-defined]
        if done:
            consumer.ack(done)

    @staticmethod
    def _read_all(consumer, block_ms: int, count: int = READ_COUNT, most: int = 20 * READ_COUNT, *,
                  ack: Sequence[PartitionEntry] = (), before_ack: Sequence[bytes] = ()) -> list:
        """What is new, read until a read comes back short of `count` (the first read acks `ack`).

        A command's events reach a partition stream in one atomic script, so a read
        that returns fewer than `count` entries per partition ends on command
        boundaries; a capped read may end in the middle of a command, and deciding
        there would queue a task for a version the match leaves at once. Reading on
        first (up to `most` entries) keeps such wasted, stale tasks rare."""
        if before_ack:
            entries = consumer.read(count=count, block_ms=block_ms, ack=ack, before_ack=before_ack)
        else:
            entries = consumer.read(count=count, block_ms=block_ms, ack=ack)
        batch = entries
        while full_partitions(batch, count) and len(entries) < most:
            batch = consumer.read(count=count, block_ms=None)
            entries += batch
        return entries


def _recent_matches(store: EventStore, recent: int) -> list[str]:
    """Match ids in the last `recent` entries of every partition stream, newest first. An entry no
    event can be read from (a foreign XADD's) is told and passed over: before session 34 it failed
    every recovery, and with it every dispatcher pass, for as long as it was among the last `recent`."""
    seen: dict[str, None] = {}
    client, keys = getattr(store, "client", None), getattr(store, "keys", None)
    for partition in range(store.partitions):
        if client is not None and keys is not None:  # Redis: read backwards, never the whole history
            rows = client.xrevrange(keys.partition_stream(partition), count=recent)
            unreadable: list[UnreadableEntry] = []
            envelopes = [envelope for _, envelope in split_entries(partition, rows or [], unreadable)]
            tell_unreadable(unreadable, reader="bots_recover")
        else:
            envelopes = [e.envelope for e in store.read_partition(partition, count=1_000_000)[-recent:]][::-1]
        for env in envelopes:
            seen.setdefault(env.match_id, None)
    return list(seen)
