"""The replay service's use cases, free of gRPC.

Every method takes plain values, returns plain values or raises an AppError
(famiglia.grpcutil.errors) with a stable code; the gRPC entrypoint only
translates. Who may see what is decided in one place (`_access`), from the
seat token, the request and whether the match is over now.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from google.protobuf.message import Message

from famiglia.auth import InvalidToken, TokenSigner
from famiglia.engine import Pending, pending_for
from famiglia.engine.registry import Registry, UnknownGame
from famiglia.eventstore import ConcurrencyConflict, EventStore
from famiglia.eventstore.envelopes import (
    MATCH_CANCELLED,
    MATCH_CREATED,
    SEAT_CHANGES,
    open_event,
    open_match_cancelled,
    same_command,
)
from famiglia.grpcutil.errors import (
    AlreadyExists,
    AppError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
    unavailable,
)
from famiglia.grpcutil.operators import operator_of
from famiglia.matchstate import NotAMatch
from famiglia.replay import export as export_file
from famiglia.replay.access import (
    Access,
    NotAllowed,
    ReplayPolicy,
    Scope,
    grant,
    may_see_everything,
    seat_views,
    shown_event,
    shows_command_id,
    view_text,
)
from famiglia.replay.admission import Refused, stored_envelopes
from famiglia.replay.seat_changes import seat_change_text
from famiglia.replay.sources import EventSource
from famiglia.replay.timeline import CACHED_MB, DEFAULT_EVERY, MatchTimeline, TimelineCache, UnreadableEvent
from famiglia.replay.verify import Report, verify_envelopes, verify_export
from famiglia.telemetry import get_logger
from famiglia.v1.envelope_pb2 import EventEnvelope
from famiglia.v1.replay_service_pb2 import MatchExport

from .metrics import replay_metrics

log = get_logger("famiglia.replay")
MAX_PAGE = 1000
SERVER_EVENTS = frozenset({MATCH_CREATED, MATCH_CANCELLED, *SEAT_CHANGES})
"""The server's own events, no engine's: listed and streamed as they are stored."""


def envelope_ms(env: EventEnvelope) -> int:
    """An event's time in ms, without Timestamp.ToMilliseconds' range check: a stored record
    with an impossible time is still shown, not turned into a server error."""
    return env.timestamp.seconds * 1000 + env.timestamp.nanos // 1_000_000


@dataclass
class StateAt:
    """The answer to GetStateAt."""

    timeline: MatchTimeline
    envelope: EventEnvelope
    access: Access
    view: Message | None
    text: str
    seat_views: list[Message] = field(default_factory=list)
    game_over: bool = False
    finished: bool = False
    to_act: list[Pending] = field(default_factory=list)


@dataclass
class Step:
    """One event of a replay stream, as the asker may see it."""

    envelope: EventEnvelope
    event: Message | None
    event_text: str
    view: Message | None
    view_text: str
    access: Access
    unattributed: bool = False
    """Shown without its acting seat and command id: another event of its command is hidden
    from the asker (`famiglia.eventstore.envelopes.unattributed`)."""


@dataclass
class EventInfo:
    """One line of ListMatchEvents as the asker may see it. A hidden event keeps its place
    (seq) and nothing else: no event id (a ULID, whose first part is the millisecond it was
    made: a held window answer's would tell when it was given), no type, no acting seat (-1,
    as for the server), no time (0), no command id."""

    envelope: EventEnvelope
    type: str
    hidden: bool
    seat: int = -1
    timestamp_ms: int = 0
    command_id: str = ""

    @classmethod
    def shown(cls, env: EventEnvelope, type_: str, attributed: bool = True, own: bool = True) -> EventInfo:
        """`own`: the command id may be shown (`famiglia.replay.access.shows_command_id`)."""
        if not attributed:  # another event of its command is hidden from the asker
            return cls(env, type_, False, -1, envelope_ms(env), "")
        return cls(env, type_, False, env.seat, envelope_ms(env), env.command_id if own else "")

    @classmethod
    def concealed(cls, env: EventEnvelope) -> EventInfo:
        return cls(env, "", True)

    @property
    def event_id(self) -> str:
        return "" if self.hidden else self.envelope.event_id


class _PartlyHidden:
    """Whether another event of an envelope's command is hidden from `access` (then the
    envelope is shown unattributed), remembered per command."""

    def __init__(self, timeline: MatchTimeline, access: Access) -> None:
        self.timeline, self.access = timeline, access
        self._known: dict[tuple[int, str], bool] = {}

    def __call__(self, env: EventEnvelope) -> bool:
        if not env.command_id or self.access.scope is Scope.FULL or env.type in SERVER_EVENTS:
            return False
        key = (env.seat, env.command_id)
        known = self._known.get(key)
        if known is None:
            timeline, engine = self.timeline, self.timeline.engine

            def same(seq: int) -> bool:
                return same_command(env, timeline.envelope(seq))

            first = last = env.seq
            while first > 1 and same(first - 1):
                first -= 1
            while last < timeline.last_seq and same(last + 1):
                last += 1
            # (A seat change written with a command, under its id, is public and no engine's.)
            known = self._known[key] = any(
                shown_event(engine, open_event(engine, timeline.envelope(seq)), self.access) is None
                for seq in range(first, last + 1) if timeline.envelope(seq).type not in SERVER_EVENTS)
        return known


@dataclass
class EventPage:
    timeline: MatchTimeline
    events: list[EventInfo]
    next_token: str


class ReplayApp:
    def __init__(
        self,
        *,
        source: EventSource,
        registry: Registry,
        signer: TokenSigner,
        policy: ReplayPolicy | None = None,
        store: EventStore | None = None,
        every: int = DEFAULT_EVERY,
        capacity: int = 256,
        cached_bytes: int = CACHED_MB << 20,
        sleep: Callable[[float], None] | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.source = source
        self.registry = registry
        self.signer = signer
        self.policy = policy or ReplayPolicy()
        self.store = store
        """Where ImportMatch writes (None: imports are off)."""
        self.timelines = TimelineCache(registry, source.read, every=every, capacity=capacity,
                                       max_bytes=cached_bytes,
                                       version=self._store_version if hasattr(source, "version") else None)
        self._sleep = sleep
        self._on_close = on_close
        self.metrics = replay_metrics()
        """Exports, imports and verifications by result (None: metrics off)."""

    def close(self) -> None:
        """Release the connections bootstrap opened."""
        if self._on_close is not None:
            self._on_close()

    def _store_version(self, match_id: str) -> int:
        """The store's version of a match over in the cache (`TimelineCache`'s check), or 0 while
        the store is away: the match is then shown as it was last read, over, as before."""
        try:
            return int(self.source.version(match_id))  # type: ignore[attr-defined]
        except Exception as exc:
            if unavailable(exc) is None:
                raise
            return 0

    # -- auth -----------------------------------------------------------------------------
    def seat_of(self, token: str | None) -> tuple[str, int] | None:
        """(match id, seat) of a seat token; None for no token (a spectator)."""
        if token is None:
            return None
        try:
            claim = self.signer.read_seat(token)
        except InvalidToken as exc:
            raise Unauthenticated("bad_token", str(exc)) from None
        return claim.match_id, claim.seat

    def _access(self, timeline: MatchTimeline, token: str | None, want_full: bool) -> Access:
        claim = self.seat_of(token)
        seat: int | None = None
        if claim is not None:
            if claim[0] != timeline.match_id:
                raise PermissionDenied("wrong_match", "this seat token belongs to another match")
            if not 0 <= claim[1] < timeline.seats:
                raise PermissionDenied("no_such_seat", f"seat {claim[1]} is not at this table")
            seat = claim[1]
            if not timeline.finished and timeline.away.get(seat) == "left":
                # Its player left for good (LeaveMatch): the seat's hidden cards are the bot's now,
                # so the token reads the running match as a spectator, as GetView answers it.
                seat = None
        try:
            return grant(self.policy, seat=seat, want_full=want_full, finished=timeline.finished)
        except NotAllowed as exc:
            raise PermissionDenied(exc.code, exc.message) from None

    def _require_everything(self, timeline: MatchTimeline, token: str | None) -> None:
        """The whole match (an export, a verification by id) is granted as a full view is:
        the token checked as for every other call (forged: `bad_token`; another match's:
        `wrong_match`), then `match_running` or `full_view_disabled` as the policy says."""
        self._access(timeline, token, True)

    # -- finding matches and events ---------------------------------------------------------
    def timeline(self, match_id: str) -> MatchTimeline:
        if not match_id:
            raise InvalidArgument("no_match_id", "match_id is required")
        timeline = self._timeline_or_none(match_id)
        if timeline is None:
            raise NotFound("unknown_match", f"no match {match_id!r} in the event store or the archive")
        return timeline

    def _timeline_or_none(self, match_id: str) -> MatchTimeline | None:
        try:
            return self.timelines.get(match_id)
        except NotAMatch:
            return None
        except UnknownGame as exc:
            raise FailedPrecondition("unknown_game", f"match {match_id} is a game this server lacks: {exc}") from None
        except UnreadableEvent as exc:
            log.warning("replay_unreadable_event", match_id=exc.match_id, seq=exc.seq, event_id=exc.event_id,
                        error=exc.detail)
            raise FailedPrecondition("unreadable_event", str(exc)) from None  # names the seq only

    def locate(self, event_id: str, match_hint: str = "", *, named: str = "") -> tuple[MatchTimeline, int]:
        """The match of an event id and its seq, found through the hint or the sources' index.
        `named`: the match the request names; an event of another match is refused (not
        answered with that other match's state, which the caller did not ask for)."""
        if not event_id:
            raise InvalidArgument("no_event_id", "event_id is required")
        if match_hint:
            timeline = self._timeline_or_none(match_hint)
            seq = timeline.seq_of(event_id) if timeline is not None else None
            if timeline is not None and seq is not None:
                return timeline, seq
        found = self.source.find(event_id)
        if found is None:
            raise NotFound("unknown_event", f"no event {event_id!r}")
        if named and found.match_id != named:
            raise InvalidArgument("event_not_in_match", f"event {event_id!r} is not an event of match {named}")
        timeline = self.timeline(found.match_id)
        seq = timeline.seq_of(event_id)
        if seq is None:
            raise NotFound("unknown_event", f"event {event_id!r} is not (yet) readable")
        return timeline, seq

    # -- GetStateAt ---------------------------------------------------------------------------
    def state_at(self, event_id: str, token: str | None, *, full: bool = False, match_id: str = "") -> StateAt:
        claim = self.seat_of(token)
        timeline, seq = self.locate(event_id, match_id or (claim[0] if claim else ""), named=match_id)
        access = self._access(timeline, token, full)
        state = timeline.state_at(seq)
        env = timeline.envelope(seq)
        answer = StateAt(timeline, env, access, None, "", finished=timeline.finished)
        if state is None:
            answer.text = self._created_text(timeline, access)
            return answer
        engine = timeline.engine
        answer.view = engine.view(state, access.viewer)
        answer.game_over = engine.result(state) is not None
        if timeline.cancelled and seq == timeline.last_seq:  # cancelled there: nobody is asked any more
            answer.to_act = []
        else:
            answer.to_act = (engine.pending(state) if access.scope is Scope.FULL
                             else pending_for(engine, state, access.viewer))
        if access.scope is Scope.FULL:
            answer.seat_views = seat_views(engine, state, timeline.seats)
            answer.text = engine.render_state(state)
        else:
            answer.text = view_text(answer.view)
        return answer

    @staticmethod
    def _created_text(timeline: MatchTimeline, access: Access) -> str:
        c = timeline.created
        options = ", ".join(f"{k}={v}" for k, v in sorted(c.options.items()))
        text = f"match created: {c.game_id} for {c.seats} seats" + (f" ({options})" if options else "")
        if access.scope is Scope.FULL:
            text += f", seed {c.seed}"
        return text

    # -- StreamReplay -------------------------------------------------------------------------
    def replay(
        self,
        token: str | None,
        *,
        match_id: str = "",
        event_id: str = "",
        from_seq: int = 0,
        to_seq: int = 0,
        full: bool = False,
        recorded_pace: bool = False,
        speed: float = 1.0,
        max_gap_ms: int = 5000,
        with_views: bool = True,
        is_active: Callable[[], bool] = lambda: True,
    ) -> Iterator[Step]:
        """The events from `from_seq` (or just after `event_id`) to `to_seq`, each with the view after it."""
        if event_id:
            timeline, seq = self.locate(event_id, match_id, named=match_id)
            first = from_seq or seq + 1
        else:
            timeline = self.timeline(match_id)
            first = from_seq or 1
        # A from_seq past to_seq named no event and streamed none, as if the match had none there.
        # NaN passes every comparison (it streamed at once, as infinity did); 0 is the proto's
        # unset speed, 1.0.
        if to_seq < 0 or first < 1 or 0 < to_seq < from_seq or not (math.isfinite(speed) and speed >= 0) \
                or max_gap_ms < 0:
            raise InvalidArgument("bad_range", "from/to must be positive with from no later than to, speed a "
                                               "finite number not negative, max_gap_ms not negative")
        access = self._access(timeline, token, full)
        last = min(to_seq or timeline.last_seq, timeline.last_seq)
        engine = timeline.engine
        partly_hidden = _PartlyHidden(timeline, access)
        previous_ms: int | None = None
        for env, state in timeline.states(first, last):
            if not is_active():
                return
            if env.type == MATCH_CREATED:
                event, text = None, self._created_text(timeline, access)
            elif env.type == MATCH_CANCELLED:
                event, text = None, _cancelled_text(env)
            elif env.type in SEAT_CHANGES:  # public, the server's: shown as they are, to everyone
                event, text = None, seat_change_text(env)
            else:
                event = shown_event(engine, open_event(engine, env), access)
                if event is None:
                    continue
                text = engine.render_event(event)
            if recorded_pace:
                now_ms = envelope_ms(env)
                if previous_ms is not None:
                    # Capped after the speed: max_gap_ms is the longest wait (a tiny speed
                    # would otherwise wait for ever on a table that paused a second).
                    gap = min(max(now_ms - previous_ms, 0) / (speed or 1.0), max_gap_ms)
                    self._wait(gap / 1000, is_active)
                previous_ms = now_ms
            view: Message | None = None
            shown_view = ""
            if with_views and state is not None:
                view = engine.view(state, access.viewer)
                shown_view = engine.render_state(state) if access.scope is Scope.FULL else view_text(view)
            yield Step(env, event, text, view, shown_view, access, event is not None and partly_hidden(env))

    def _wait(self, seconds: float, is_active: Callable[[], bool]) -> None:
        if seconds <= 0:
            return
        if self._sleep is not None:
            self._sleep(seconds)
            return
        deadline = time.monotonic() + seconds
        pause = threading.Event()
        while is_active() and (left := deadline - time.monotonic()) > 0:
            pause.wait(min(left, 0.25))

    # -- ListMatchEvents ----------------------------------------------------------------------
    def list_events(self, match_id: str, token: str | None, page_size: int = 0, page_token: str = "") -> EventPage:
        timeline = self.timeline(match_id)
        full = may_see_everything(self.policy, timeline.finished)
        access = self._access(timeline, token, full)
        if page_size < 0:
            raise InvalidArgument("bad_page_size", "page_size must be positive")
        size = min(page_size or 100, MAX_PAGE)
        try:
            start = int(page_token) if page_token else 1
        except ValueError:
            raise InvalidArgument("bad_page_token", "page_token is not one of ours") from None
        if start < 1:
            raise InvalidArgument("bad_page_token", "page_token is not one of ours")
        end = min(start + size - 1, timeline.last_seq)
        infos: list[EventInfo] = []
        engine = timeline.engine
        partly_hidden = _PartlyHidden(timeline, access)
        for seq in range(start, end + 1):
            env = timeline.envelope(seq)
            if env.type in SERVER_EVENTS:  # the server's own: shown as they are
                infos.append(EventInfo.shown(env, env.type, own=shows_command_id(access, env.seat)))
                continue
            shown = shown_event(engine, open_event(engine, env), access)
            infos.append(EventInfo.concealed(env) if shown is None
                         else EventInfo.shown(env, shown.WhichOneof("kind") or "",
                                              not partly_hidden(env), shows_command_id(access, env.seat)))
        next_token = str(end + 1) if end < timeline.last_seq else ""
        return EventPage(timeline, infos, next_token)

    # -- export, import, verify -----------------------------------------------------------
    def export(self, match_id: str, token: str | None = None) -> MatchExport:
        with self._counted("export") as counted:
            timeline = self.timeline(match_id)
            self._require_everything(timeline, token)
            exported = export_file.build_export(self.registry, timeline.envelopes,
                                                exported_at_ms=int(time.time() * 1000))
            counted.append("ok")
        return exported

    def verify_match(self, match_id: str, token: str | None = None) -> Report:
        with self._counted("verify") as counted:
            timeline = self.timeline(match_id)
            self._require_everything(timeline, token)
            report = verify_envelopes(self.registry, timeline.envelopes)
            counted.append("ok" if report.ok else "diverged")
        return report

    def verify_file(self, data: bytes) -> Report:
        with self._counted("verify") as counted:
            report = verify_export(self.registry, self._load(data))
            counted.append("ok" if report.ok else "diverged")
        return report

    @contextmanager
    def _counted(self, what: str) -> Iterator[list[str]]:
        """Count the block as the result it appends, or `refused` when it raises a refusal."""
        counted: list[str] = []
        try:
            yield counted
        except AppError:
            counted.append("refused")
            raise
        finally:
            if self.metrics is not None and counted:
                self.metrics.done(what, counted[-1])

    def operator_of(self, token: str | None) -> str:
        """The operator an operator token names (`grpcutil.operators.operator_of`)."""
        return operator_of(self.signer, token, "import matches")

    def import_file(self, data: bytes, *, token: str | None, new_match_id: str = "",
                    allow_unverified: bool = False) -> tuple[str, int, Report]:
        """Store an export (an operator action): checked to be readable by every service
        (`famiglia.replay.admission`, whatever `allow_unverified` says), verified unless
        `allow_unverified`, stored under fresh event ids and attributed to no player or tournament."""
        with self._counted("import") as counted:
            match_id, version, report = self._import(data, token, new_match_id, allow_unverified)
            counted.append("ok" if report.ok else "unverified")
        return match_id, version, report

    def _import(self, data: bytes, token: str | None, new_match_id: str,
                allow_unverified: bool) -> tuple[str, int, Report]:
        operator = self.operator_of(token)
        if self.store is None:
            raise FailedPrecondition("imports_disabled", "this replay server does not import matches")
        export = self._load(data)
        match_id = new_match_id or export.match_id
        try:
            envelopes = stored_envelopes(self.registry, export, match_id)
        except Refused as exc:
            raise (FailedPrecondition if exc.precondition else InvalidArgument)(exc.code, exc.message) from None
        report = verify_export(self.registry, export)
        if not report.ok and not allow_unverified:
            raise FailedPrecondition("unverified", report.describe())
        if self.source.read(match_id):
            # Taken also when only the archive holds it (trimmed from a store that lost it since):
            # stored beside it, the import would replay until the trim and the old match after.
            raise AlreadyExists("match_exists", f"match {match_id} already exists here")
        try:
            result = self.store.append(match_id, 0, envelopes)
        except ConcurrencyConflict:
            raise AlreadyExists("match_exists", f"match {match_id} already exists here") from None
        except ValueError as exc:
            raise InvalidArgument("bad_export", str(exc)) from None
        self.timelines.forget(match_id)
        log.info("match_imported", match_id=match_id, source_match_id=export.match_id, events=len(envelopes),
                 verified=report.ok, operator=operator)
        return match_id, result.version, report

    @staticmethod
    def _load(data: bytes) -> MatchExport:
        limit = export_file.FILE_MAX_BYTES
        if len(data) > limit:  # no export is: refused as such, not read (the server receives a margin more)
            raise InvalidArgument("file_too_large", f"the file is {len(data):,} bytes, past the "
                                  f"{limit // (1024 * 1024)} MiB ({limit:,} bytes) an export file may be: "
                                  "export the match as binary (smaller than its JSON)")
        try:
            return export_file.load(data)
        except export_file.BadExport as exc:
            raise InvalidArgument("bad_export", str(exc)) from None


def _cancelled_text(env: EventEnvelope) -> str:
    """A `match_cancelled` event as text: who ended the match, and why."""
    try:
        cancelled = open_match_cancelled(env)
    except Exception:  # noqa: BLE001 - a payload that does not parse is still the match's end
        return "match cancelled"
    return f"match cancelled by {cancelled.operator or 'an operator'}: {cancelled.reason}"
