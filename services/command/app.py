"""The command service's use cases, free of gRPC: create, decide, view, list, stream.

Each method takes plain values and returns plain values or raises an AppError
(famiglia.grpcutil.errors) with a stable code; the gRPC entrypoint only translates.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import secrets
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError, Message

from famiglia.auth import InvalidToken, TokenSigner
from famiglia.auth.request_ids import guessable, guessable_message
from famiglia.bots.policy import BadPolicyParameter, UnknownPolicy, checked_spec, over_public_budget
from famiglia.chat_text import unshowable
from famiglia.clocks import is_clock_default
from famiglia.engine import (
    Engine,
    GameInfo,
    MalformedCommand,
    MatchConfig,
    Pending,
    Result,
    Rng,
    RuleViolation,
    Sampled,
    pending_for,
    spelling_refusal,
)
from famiglia.engine.registry import Registry, UnknownGame
from famiglia.eventstore import AppendResult, ConcurrencyConflict, EventStore
from famiglia.eventstore.chat import ChatEntry, ChatStore, ChatTooFast, InMemoryChatStore, MatchArchived
from famiglia.eventstore.envelopes import (
    MATCH_CANCELLED,
    MATCH_CREATED,
    SEAT_CHANGES,
    SEAT_LEFT,
    game_envelopes,
    match_cancelled_envelope,
    match_created_envelope,
    open_event,
    open_match_created,
    open_seat_change,
    same_command,
    seat_change_envelope,
    unattributed,
)
from famiglia.eventstore.player_matches import InMemoryPlayerMatches, PlayerMatches
from famiglia.eventstore.port import entry_key
from famiglia.eventstore.rematch_asks import (
    FinishedMatchArchived,
    InMemoryRematchAsks,
    RematchAsks,
    RematchAsksStore,
)
from famiglia.eventstore.turn_notices import (
    MATCH_OVER,
    REMATCH_ASKED,
    REMATCH_MADE,
    STALE_SECONDS,
    InMemoryTurnNotices,
    StoredNotice,
    TurnNotice,
    TurnNotices,
)
from famiglia.grpcutil.errors import (
    Aborted,
    AlreadyExists,
    AppError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)
from famiglia.grpcutil.operators import operator_of
from famiglia.matchstate import MatchState, UnknownEventKind, command_key
from famiglia.telemetry import EventLine, child_span, get_logger, spans_exported, stored_context, tracer
from famiglia.v1 import envelope_pb2

from . import chat as chat_rules
from .hot_matches import (
    HOT_MATCHES,
    HOT_MATCHES_MB,
    HotMatch,
    HotMatches,
    UnknownMatch,
    UnreadableMatch,
    gone,
    unreadable,
)
from .metrics import command_metrics
from .player_index import people as _people
from .player_index import write_index
from .quarantine import Quarantine, asked_name, id_name, input_name
from .rematch import REMATCH_GRACE_S, Rematch, check_rematch, persons, seat_there, seating, too_late
from .turn_watch import Snapshot, watch_my_turns

log = get_logger("famiglia.command")
#: The one line per accepted command, rendered without structlog's chain (same keys and JSON).
accepted_line = EventLine("famiglia.command", "command_accepted",
                          "match_id", "seat", "command_id", "kind", "version", "events")
MAX_RETRIES = 8
#: After the second conflict in a row, a retry waits a random 0..(base * 2**n) seconds (n
#: capped at 4): two replicas racing on one match in lockstep would otherwise keep
#: overtaking each other (seen once in ~100 such races without a wait), whereas a random
#: wait lets one of them through. One replica per match never waits.
CONFLICT_BACKOFF_S = 0.0005
MAX_LEGAL = 256
#: The most commands one SubmitCommands call takes (a table's seats, with room to spare).
MAX_CHAIN = 16
#: In a SubmitCommands entry's command id: the version the command goes in at (game_service.proto).
VERSION_PLACEHOLDER = "{version}"
_TOKEN_CACHE = 50_000  # verified seat tokens remembered (a token never changes meaning)
#: The most matches a ListMyTurns answer lists (its `limit`'s cap).
MAX_MY_TURNS = 100
#: The most of a player's live matches one ListMyTurns call looks at (folds): its newest.
MY_TURNS_LOOKED_AT = 200
#: A person's seat whose turn clock runs out on it this many times in a row goes to the bots
#: (`seat_left`, reason TIMEOUTS) until its player takes it back (FAMIGLIA_TIMEOUTS_TO_BOT; 0: never).
TIMEOUTS_TO_BOT = 3
#: The bot policy that plays a seat its player left (FAMIGLIA_LEAVE_POLICY).
LEAVE_POLICY = "heuristic"
#: `SeatLeft.reason`: the player asked (LeaveMatch), for good.
LEFT = "left"
#: `SeatLeft.reason`: the seat's clock ran out on its player TIMEOUTS_TO_BOT times in a row.
TIMEOUTS = "timeouts"
#: The command ids the server stores its seat changes under, in the seat's own ids: LeaveMatch's
#: (one per seat), ReturnToMatch's ("return:<version>") and a clock's run-out's ("away:<clock id>").
#: No command of a client's takes them (`_check_submission`): a seat's own command under one
#: would make the change a duplicate of it, never written (a LeaveMatch that never goes through).
LEAVE_ID = "leave"
RETURN_ID = "return:"
AWAY_ID = "away:"
#: How far ahead of this service's a host's clock may run (FAMIGLIA_CLOCK_SKEW_S): a person's clock
#: default (the bots' `run_clock`) is taken from this long before the seat's deadline, not before.
CLOCK_SKEW_S = 2.0


@dataclass(frozen=True)
class Viewer:
    """Who asks: a seat of one match, or a spectator (seat None)."""

    seat: int | None
    player_id: str = ""
    bot: bool = False
    """The bots service's own token of the seat (`SeatClaim.bot`): it plays the seats the bots
    play (`MatchState.bot_policies`) and submits a person's clock default."""


SPECTATOR = Viewer(None)


@dataclass
class Created:
    match_id: str
    seat_tokens: list[str]
    version: int
    written: bool = True
    """This call wrote the match; False when it found one a call before wrote under its request
    id (a retry, a second replica: a rematch's table is told once, by the writer's)."""


@dataclass
class ViewAnswer:
    version: int
    view: Message
    to_act: list[Pending]
    result: Result | None
    game_id: str
    seat: int | None
    text: str
    cancelled: envelope_pb2.MatchCancelled | None = None
    deadline_ms: int = 0
    """When the viewer's own turn clock runs out (`_deadline_ms`): its own entry of `to_act` only."""
    away: list[tuple[int, str, int]] = field(default_factory=list)
    """(seat, reason, since version) of each seat the bots play because its player left, in seat order."""


@dataclass(frozen=True)
class MyTurn:
    """One seat of a player's at a live match, as ListMyTurns answers it."""

    match_id: str
    game_id: str
    seat: int
    version: int
    to_act: bool
    """Its own GetView's `to_act` names it."""
    deadline_ms: int
    """Its own clock, as its GetView gives it (`_deadline_ms`); 0 for none."""
    moved_ms: int
    """When the match last moved, as the table knows it (`_moved_ms`); never sent: it orders."""
    away: bool = False
    """The bots play the seat since its clock ran out too often (`timeouts`): its player may
    take it back (ReturnToMatch); it is not asked meanwhile."""
    seat_token: str = ""
    """The seat's token, signed again for its player (`CommandApp.my_turns`)."""


@dataclass
class LegalAnswer:
    version: int
    commands: list[Message]
    complete: bool
    text: list[str]
    deadline_ms: int = 0
    """When the seat's turn clock runs out (`_deadline_ms`), 0 when it has none."""


@dataclass
class SeatEvent:
    envelope: envelope_pb2.EventEnvelope
    event: Message
    text: str
    stored: bool = False
    """The event is the stored one, unredacted: the envelope's payload is its bytes."""
    unattributed: bool = False
    """Shown without its acting seat and command id: its command's other events are hidden
    from this viewer (`famiglia.eventstore.envelopes.unattributed`)."""
    held: bool = False
    """Staged (NP-H9): shown with seq 0, since its seq would count the others' staged events."""
    foreign: bool = True
    """Another seat's command (or the server's): shown without its command id, which is
    that seat's client's idempotency key and could tell what its client knew (a bots task's
    ids name the version and the turn it played, NP-H9)."""
    deadline_ms: int | None = None
    """On a stream's last event before it waits, for a seat: its turn clock at the match's
    latest version (`_deadline_ms`); None elsewhere."""


@dataclass
class Submitted:
    version: int
    events: list[SeatEvent] = field(default_factory=list)
    duplicate: bool = False
    held: bool = False
    """Its events are staged (NP-H9): numbered and shown to the table with the next public event."""
    position: int = 0
    """The match's position right after the command (its last seq; staged events counted):
    the server's own; never sent (it counts the staged events)."""
    slotted: int = 0
    """A duplicate of an answer held and written out since in its seat's slot (NP-H9): how many
    events it has. Its version is its slot's, not one the table stopped at: a chain names its
    next entry by the version before it."""


@dataclass
class SeatChanged:
    """What `leave_match` and `return_to_match` answer: the seq of the seat's change, or the
    version the match is at when nothing was to be written (`duplicate`)."""

    version: int
    duplicate: bool = False


@dataclass
class Cancelled:
    """What `cancel_match` answers: the seq of the `match_cancelled` event, and whether this
    request id had cancelled the match before (a retry)."""

    version: int
    duplicate: bool = False


#: A cancel's reason is stored in its event and shown to every seat and in every export.
MAX_CANCEL_REASON = 500

#: A cancel's request id is its event's command id after "cancel:", and a command id is stored
#: in the read models' archive (`ArchivedEvent.command_id`, 128 characters) and in exports,
#: which ImportMatch holds to 128 too: at most 120 characters keeps it within them.
MAX_CANCEL_REQUEST_ID = 120


@dataclass(frozen=True)
class ChainedCommand:
    """One entry of `submit_chain`: a seat token, its command id, the command as packed."""

    token: str
    command_id: str
    type_url: str
    value: bytes


@dataclass(frozen=True)
class NextSeat:
    """One seat of `submit_chain`'s `ask_next`: its token, whether its view is wanted, the
    most legal commands wanted (0: MAX_LEGAL)."""

    token: str
    view: bool = True
    legal_limit: int = 0


@dataclass
class NextAnswer:
    """What one seat asked after a chain may know: what GetView and ListLegalCommands would
    answer it (its view only if it was asked for)."""

    seat: int
    view: Message | None
    legal: list[Message]
    complete: bool
    deadline_ms: int = 0


@dataclass
class ChainAnswer:
    """What `submit_chain` took, in order, and why it stopped early (the refused entry's
    index and the error SubmitCommand would have raised), if it did; with `ask_next`, the
    asked seats the game waits for after it, at `next_version`."""

    taken: list[Submitted]
    refused_at: int = -1
    refusal: AppError | None = None
    next: list[NextAnswer] = field(default_factory=list)
    next_version: int = 0


@dataclass
class SentChat:
    """What `send_chat` answers: the message as stored, and whether its id had sent it before."""

    message: ChatEntry
    duplicate: bool = False


class CommandApp:
    def __init__(self, *, store: EventStore, registry: Registry, signer: TokenSigner,
                 chat: ChatStore | None = None, hot_matches: int = HOT_MATCHES,
                 hot_bytes: int = HOT_MATCHES_MB << 20, players: PlayerMatches | None = None,
                 timeouts_to_bot: int = TIMEOUTS_TO_BOT, leave_policy: str = LEAVE_POLICY,
                 notices: TurnNotices | None = None, rematches: RematchAsksStore | None = None,
                 rematch_notices: bool = True,
                 seat_changes: bool = True,
                 clock_skew_s: float = CLOCK_SKEW_S, wall: Callable[[], float] = time.time,
                 quarantine: Quarantine | None = None) -> None:
        if timeouts_to_bot < 0:
            raise ValueError(f"timeouts_to_bot is 0 (never) or more, not {timeouts_to_bot}")
        if not clock_skew_s >= 0:
            raise ValueError(f"clock_skew_s is 0 or more seconds, not {clock_skew_s}")
        self.clock_skew_s = clock_skew_s
        self.wall = wall
        """Seconds since the epoch, as events are stamped: when a person's clock default is due."""
        checked_spec(leave_policy)  # a policy the bots cannot play would leave the seat unplayed
        self.timeouts_to_bot = timeouts_to_bot
        self.leave_policy = leave_policy
        self.seat_changes = seat_changes
        """Whether a seat may change hands (FAMIGLIA_SEAT_CHANGES): off, LeaveMatch is refused and
        no clock sends a seat to the bots, so nothing writes `seat_left` while a release that cannot
        read it still runs (docs/operations.md, "Upgrading"). ReturnToMatch stays: only a match
        that already has a `seat_left` can need it."""
        self.store = store
        self.registry = registry
        self.signer = signer
        self.chat = chat if chat is not None else InMemoryChatStore()
        self.players = players if players is not None else InMemoryPlayerMatches()
        self.notices = notices if notices is not None else InMemoryTurnNotices()
        """The players' turn notifications the bots' dispatcher writes (WatchMyTurns reads them),
        and a rematch's (`_tell_table`)."""
        self.rematch_notices = rematch_notices
        """Whether a rematch's asks and its making are told (`_tell_table`; FAMIGLIA_TURN_NOTIFICATIONS)."""
        self.rematches = rematches if rematches is not None else InMemoryRematchAsks()
        """Who asked for a rematch of a finished match (AskRematch), and its creation request id."""
        self.matches = HotMatches(store, registry, hot_matches, hot_bytes)
        self.metrics = command_metrics(self.matches)
        """None when metrics are off: each recording below is then one test."""
        self._seat_claims: dict[str, tuple[str, Viewer]] = {}  # token -> (its match, its viewer)
        self.quarantine = quarantine if quarantine is not None else Quarantine()
        """Commands set aside after their engine did not return (`stuck_command`), refused at once."""

    def close(self) -> None:
        """Close what the app holds open on Redis: the quarantine's own connections, then the store's."""
        try:
            self.quarantine.close()
        finally:
            self.store.close()

    # -- games -------------------------------------------------------------------------
    def list_games(self) -> list[GameInfo]:
        return [e.info for e in self.registry.engines()]

    # -- auth --------------------------------------------------------------------------
    def viewer(self, match_id: str, token: str | None, *, require_seat: bool = False) -> Viewer:
        """A token's seat in this match; None -> spectator (or UNAUTHENTICATED if required)."""
        if token is None:
            if require_seat:
                raise Unauthenticated("no_token", "this call needs `authorization: Bearer <seat token>`")
            return Viewer(None)
        seen = self._seat_claims.get(token)
        if seen is None:
            # An HMAC check per call costs more than the rest of viewer(); a seat token
            # has no expiry and names one seat for good, so a verified one is remembered,
            # with its (frozen) Viewer.
            try:
                claim = self.signer.read_seat(token)
            except InvalidToken as exc:
                raise Unauthenticated("bad_token", str(exc)) from None
            if len(self._seat_claims) >= _TOKEN_CACHE:
                self._seat_claims.clear()
            seen = self._seat_claims[token] = (claim.match_id, Viewer(claim.seat, claim.player_id, claim.bot))
        if seen[0] != match_id:
            if not match_id:  # (checked here, off the path of every call that names its match)
                raise InvalidArgument("no_match_id", "match_id is required")
            raise PermissionDenied("wrong_match", "this seat token belongs to another match")
        return seen[1]

    def check_creator(self, token: str | None, seat_info: Sequence[envelope_pb2.SeatInfo],
                      tournament_id: str) -> None:
        """A creation that names players (a seat's `player_id`) or a tournament needs an operator
        token: the read models rate a finished match's players and file it under its tournament,
        and whoever creates a match holds every seat's token, so a client naming them could rate
        (or, by the display name, rename) any player and slip results into any tournament. The
        matchmaker and the tournament runner hold the deployment's secret and mint one; anyone
        may still create a match that names nobody (bot seats without a player id included),
        with bot seats whose policies keep within `PUBLIC_BUDGET` (famiglia.bots.policy): a
        decision of about a CPU second at most, so no one holds the bot workers for hours."""
        dear = _dear_bots(seat_info)
        if dear:
            operator_of(self.signer, token, "create a match whose bots think past the public budget ("
                        + "; ".join(dear) + ")")
        if not tournament_id and not any(info.player_id for info in seat_info):
            return
        operator_of(self.signer, token, "create a match naming players or a tournament")

    # -- create ------------------------------------------------------------------------
    def create_match(
        self,
        game_id: str,
        seats: int,
        *,
        seed: int | None = None,
        options: Mapping[str, str] | None = None,
        seat_info: Sequence[envelope_pb2.SeatInfo] = (),
        request_id: str = "",
        tournament_id: str = "",
        rematch_of: str = "",
    ) -> Created:
        """A new match. `rematch_of` (the finished match it follows) is the rematch's own
        creation's (`_rematch`), never a client's: CreateMatchRequest has no such field, so a
        table cannot claim a series it did not play."""
        try:
            engine = self.registry.get(game_id)
        except UnknownGame:
            raise InvalidArgument("unknown_game", f"no game {game_id!r}; ListGames tells which exist") from None
        _check_creation(seats, seat_info, tournament_id, request_id, names=not rematch_of)
        known = {o.key for o in engine.info.options}
        unknown = sorted(set(options or {}) - known)
        if unknown:
            raise InvalidArgument("unknown_option", f"{game_id} has no option(s) {', '.join(unknown)}")
        # Spelling is a client's creation's check. A rematch plays its match's options as they were
        # stored; the matchmaker's and the tournament runner's creations (they name players or a
        # tournament) carry options their own front doors checked (options_refusal), or, made
        # before this check, options a ticket or a running tournament was promised: refused here,
        # the ticket would never be seated and the tournament's matches abandoned.
        operator_made = bool(tournament_id) or any(info.player_id for info in seat_info)
        spelled = None if rematch_of or operator_made else spelling_refusal(engine.info.options, options or {})
        if spelled:
            raise InvalidArgument("bad_option", spelled[1])
        # The seed predicts every draw: the server picks it unless the creator asks for one.
        seed_given = seed is not None
        seed = secrets.randbits(63) if seed is None else seed
        config = MatchConfig(seats=seats, options=dict(options or {}))
        try:
            setup_events = engine.setup(config, seed)
        except RuleViolation as exc:
            raise InvalidArgument(exc.code, exc.message) from None
        except (ValueError, TypeError, OverflowError) as exc:  # an option value the game cannot read
            raise InvalidArgument("bad_option", f"{game_id} cannot use these options: {exc}") from None
        match_id = _match_id(request_id)
        created = envelope_pb2.MatchCreated(game_id=game_id, seats=seats, seed=seed,
                                            tournament_id=tournament_id, rematch_of=rematch_of)
        created.options.update(config.options)
        for info in seat_info:
            created.seat_info.add().CopyFrom(info)
        trace = stored_context()
        envelopes = [match_created_envelope(match_id, created, trace=trace)]
        envelopes += game_envelopes(engine, match_id, 1, setup_events, seat=-1, trace=trace)
        # A command id even without a request id (the match's own, then): an append whose reply
        # was lost (Redis killed after its write, a connection cut) is sent again by the store,
        # and only a command id makes that resend answer with this very write, not a conflict
        # with it that would refuse the caller its own match. Named by the match id, never by the
        # request id: a command id is kept in clear (its record's key, the stream), and the
        # request id is a secret (sent again, it gets every seat's token); the match id is its
        # hash (`_match_id`), one match per request id all the same.
        with tracer().start_as_current_span("eventstore.append", attributes={"match_id": match_id}):
            try:
                result = self.store.append(match_id, 0, envelopes, command_id=f"create:{match_id}")
            except ConcurrencyConflict:
                if not request_id:
                    raise Aborted("match_exists", f"match {match_id} exists") from None
                result = None
        if result is None or result.duplicate:
            self._check_same_creation(match_id, created, seed_given)
        version = self.store.version(match_id) if result is None or result.duplicate else result.version
        self._index(match_id, seat_info)
        players = {i.seat: i.player_id for i in seat_info}
        tokens = [self.signer.seat_token(match_id, s, players.get(s, "")) for s in range(seats)]
        log.info("match_created", match_id=match_id, game_id=game_id, seats=seats)
        return Created(match_id, tokens, version, written=result is not None and not result.duplicate)

    def _check_same_creation(self, match_id: str, asked: envelope_pb2.MatchCreated, seed_given: bool) -> None:
        """A retried creation answers with the match's seat tokens only when it asks for the
        same match: a request id reused for another game, table, seating or series is refused. So
        is any once the match was archived (trimmed from the store, its creation with it): nothing
        tells then whether it asks for the same match, and its tokens would open a match that
        takes no command any more; the refusal names the match, which the replay service has. A
        rematch's creation finds one stored without its link (`rematch_of` ""): made under the
        same secret request id by a server from before the link, whose next ask creates it again."""
        first = self.store.read(match_id, limit=1)
        if not first:
            raise AlreadyExists("request_id_reused", f"request_id made match {match_id}, which is over and "
                                                     "archived since (the replay service has it); use a new "
                                                     "request_id for a new match", metadata={"match_id": match_id})
        stored = open_match_created(first[0])
        same = (stored.game_id == asked.game_id and stored.seats == asked.seats
                and dict(stored.options) == dict(asked.options) and list(stored.seat_info) == list(asked.seat_info)
                and stored.tournament_id == asked.tournament_id and (not seed_given or stored.seed == asked.seed)
                and stored.rematch_of in ("", asked.rematch_of))
        if not same:
            raise AlreadyExists("request_id_reused", "request_id was already used to create a different match; "
                                                     "use a new request_id for a new match")

    # -- read --------------------------------------------------------------------------
    def _hot(self, match_id: str) -> HotMatch:
        if not match_id:
            raise InvalidArgument("no_match_id", "match_id is required")
        try:
            return self.matches.get(match_id)
        except UnreadableMatch as exc:
            raise FailedPrecondition("match_unreadable", f"match {match_id!r} cannot be played here: {exc}") from None
        except UnknownMatch:
            raise gone(self.store, match_id) from None  # (the version key outlives a trim)

    def get_view(self, match_id: str, viewer: Viewer) -> ViewAnswer:
        hot = self._hot(match_id)
        aside = self.quarantine.of(match_id)  # None but for a match with something set aside
        with hot.lock:
            self.matches.catch_up(hot)
            m = hot.match
            self._check_seat(m.seats, viewer)
            viewer = _reader(m, viewer)
            if aside is not None:
                _check_not_asked_aside(aside, m, "view", viewer.seat, self.quarantine.ttl_s)
            view, to_act, result, text, deadline_ms = _engine_viewed(m, viewer.seat)
            return ViewAnswer(
                version=m.public_version,
                view=view,
                to_act=to_act,
                result=result,
                game_id=m.game_id,
                seat=viewer.seat,
                text=text,
                cancelled=m.cancelled,
                deadline_ms=deadline_ms,
                away=[(seat, left.reason, since) for seat, (left, since) in sorted(m.away.items())],
            )

    def legal_commands(self, match_id: str, viewer: Viewer, limit: int = 0, sample_seed: int = 0) -> LegalAnswer:
        """The seat's legal commands; `sample_seed` (not 0) draws a compound choice's members with
        that seed, so that any legal command can come up, instead of the representative ones."""
        if viewer.seat is None:
            raise Unauthenticated("no_token", "legal commands are per seat: send the seat token")
        hot = self._hot(match_id)
        aside = self.quarantine.of(match_id)
        with hot.lock:
            self.matches.catch_up(hot)
            m = hot.match
            self._check_seat(m.seats, viewer)
            _check_left(m, viewer)
            # A bounded answer whatever the client asks: huge choices are sampled, never enumerated.
            cap = min(limit, MAX_LEGAL) if limit > 0 else MAX_LEGAL
            draws = random.Random(sample_seed) if sample_seed else None
            if m.cancelled:  # the engine does not know the match ended: nothing is legal any more
                return LegalAnswer(m.public_version, [], True, [])
            if aside is not None:
                _check_not_asked_aside(aside, m, "legal", viewer.seat, self.quarantine.ttl_s)
            commands, shown, deadline_ms = _engine_listed(m, viewer.seat, cap, draws)
            return LegalAnswer(m.public_version, commands, _complete(commands, cap), shown, deadline_ms)

    @staticmethod
    def _check_seat(seats: int, viewer: Viewer) -> None:
        if viewer.seat is not None and not 0 <= viewer.seat < seats:
            raise PermissionDenied("no_such_seat", f"seat {viewer.seat} is not at this table")

    def parse_command(self, match_id: str, type_url: str, value: bytes) -> Message:
        return parse_command(self._hot(match_id).match.engine.info, type_url, value)

    def submit_packed(self, match_id: str, viewer: Viewer, command_id: str, type_url: str, value: bytes,
                      expected_version: int | None = None, *, omit_events: bool = False) -> Submitted:
        """`submit` of a command still packed as the request carries it (an Any's type URL
        and bytes): the match is looked up once for parsing and deciding."""
        hot = None
        try:
            hot = self._hot(match_id)
            command = parse_command(hot.match.engine.info, type_url, value)
            _check_submission(viewer, command_id)
            done = self._submit(hot, viewer, command_id, command, expected_version, omit_events)
        except AppError as exc:  # its log line names the seat too (a rule's `command_refused` does already)
            exc.seat = viewer.seat
            self._count_refused(hot, exc)
            raise
        return self._counted(hot, done)

    def submit_chain(self, match_id: str, chain: Sequence[ChainedCommand], expected_version: int | None = None,
                     *, omit_events: bool = False, ask_next: Sequence[NextSeat] = ()) -> ChainAnswer:
        """Several seats' commands, in order, each submitted at the version the previous one
        left (the first at `expected_version`), as that many SubmitCommand calls would be,
        in one call: a simultaneous choice that one client plays for several seats (the bots'
        worker) costs one round trip to the service instead of one per seat. "{version}" in
        a command id becomes the version it is submitted at. Each entry is `submit_packed`. Each entry is checked, decided,
        stored and deduplicated on its own; the first refusal ends the chain and is answered
        with what was taken before it. Errors of the whole call (no such match, an empty or
        overlong chain) are raised.

        `ask_next`: seats the caller plays next. After the last command, if the match is
        still where it left it, the answer lists those of them the game waits for, each with
        what that seat may know (`_next_decisions`): a bots worker plays a match's bot seats
        on without a round of the dispatcher and the broker between their turns. Their
        tokens are checked before any command is taken. With no commands the call only asks,
        at `expected_version` (stale: ABORTED) or the match's version.

        Each refusal is counted once in the metrics (`_count_refused`): an entry's, or the whole
        call's, whatever number of commands it carried."""
        hot = None
        try:
            if not chain and not ask_next:
                raise InvalidArgument("no_commands", "the call carries no commands")
            if len(chain) > MAX_CHAIN:
                raise InvalidArgument("too_many_commands", f"at most {MAX_CHAIN} commands a call, not {len(chain)}")
            if len(ask_next) > MAX_CHAIN:
                raise InvalidArgument("too_many_seats", f"at most {MAX_CHAIN} seats to ask about, not {len(ask_next)}")
            hot = self._hot(match_id)
            asked = []
            for i, seat in enumerate(ask_next):
                if not seat.token:
                    raise Unauthenticated("no_token", f"ask_next {i} carries no seat_token")
                viewer = self.viewer(match_id, seat.token, require_seat=True)
                self._check_seat(hot.match.seats, viewer)
                asked.append((viewer, seat))
        except AppError as exc:
            self._count_refused(hot, exc)
            raise
        answer = ChainAnswer([])
        # The first entry goes in at the caller's version; each later one at the version the one
        # before left the match (a held answer moves none), and is named by it (`named`), never by
        # the position, staged answers counted: a public entry's id would tell the table how many
        # answers are held, a person's included (NP-H9).
        at, named = expected_version, expected_version
        for i, entry in enumerate(chain):
            try:
                try:
                    if not entry.token:
                        raise Unauthenticated("no_token", f"command {i} carries no seat_token")
                    viewer = self.viewer(match_id, entry.token, require_seat=True)
                    command_id = entry.command_id
                    if VERSION_PLACEHOLDER in command_id:
                        if named is None:  # the id names the version it is submitted at: hold it there
                            with hot.lock:
                                self.matches.catch_up(hot)  # the stream's version, not this process's
                                named = hot.match.public_version
                            if at is None:
                                at = named
                        command_id = command_id.replace(VERSION_PLACEHOLDER, str(named))
                except AppError as exc:  # (submit_packed counts the refusals it makes)
                    self._count_refused(hot, exc)
                    raise
                done = self.submit_packed(match_id, viewer, command_id, entry.type_url, entry.value, at,
                                          omit_events=omit_events)
            except AppError as exc:
                answer.refused_at, answer.refusal = i, exc
                return answer
            answer.taken.append(done)
            if not (done.held or done.slotted):  # public: the table's version moved (a held one moves none)
                named = done.version
            # The next entry goes in at the version this one's answer gives, as a SubmitCommand sent
            # with it would: a public move since makes it stale, an answer held since does not. Held
            # to the position this one left (held answers counted), the next entry was stale whenever
            # another seat had answered in between, which told the chain's sender so (NP-H9). (A
            # retried answer written out since gives its slot's version: the match is past it.)
            at = done.version
        if asked:
            # Where the last entry left the match, as the table sees it (its answer's version): its
            # position would count the answers held since, other seats' included (NP-H9).
            try:
                self._next_decisions(hot, answer, answer.taken[-1].version if answer.taken else at, asked)
            except AppError as exc:
                if not answer.taken:  # a call that only asks, refused (stale_version)
                    self._count_refused(hot, exc)
                raise
        return answer

    def _next_decisions(self, hot: HotMatch, answer: ChainAnswer, at: int | None,
                        asked: Sequence[tuple[Viewer, NextSeat]]) -> None:
        """Fill `answer.next`: the asked seats pending at `at` (the version the chain's last
        entry left, as its answer says, or the version the caller gives), each with exactly
        what its own GetView and ListLegalCommands would say. Nothing when the match is
        elsewhere or over. Both are public versions: a position would count the answers held
        since (NP-H9), and an empty `next` would tell the asker another seat had answered. A seat
        whose view or legal commands are set aside (`Quarantine`) is left out: its own GetView or
        ListLegalCommands says why. The engine is asked in `_engine_next`, and nothing when every
        seat asked is left out."""
        aside = self.quarantine.of(hot.match.match_id)
        with hot.lock:
            m = hot.match
            if not answer.taken or answer.taken[-1].duplicate:
                # Only asking, or after a retry answered from this replica's memory: at the store's
                # version, which this replica may lag (another one moved the match since), as GetView.
                m = self.matches.catch_up(hot)
            if not answer.taken:  # only asking: at the version the caller names, as a submit is
                if at is not None and at != m.public_version:
                    raise Aborted("stale_version", f"expected version {at}, the match is at {m.public_version}")
                at = m.public_version
            elif at != m.public_version:  # the version the chain left (held answers move none)
                return
            if m.finished:
                return
            # (a seat its player left for good is the bots' now: its player's token is asked nothing)
            seats: dict[int, NextSeat] = {}
            for viewer, seat in asked:  # (each a seat's token: `require_seat`)
                if viewer.seat is not None and (viewer.bot or not _left(m, viewer.seat)) \
                        and (aside is None or _answerable(aside, m, viewer.seat, seat.view)):
                    seats[viewer.seat] = seat
            if seats:
                answer.next = _engine_next(m, seats)
            answer.next_version = m.public_version

    # -- submit ------------------------------------------------------------------------
    def submit(
        self,
        match_id: str,
        viewer: Viewer,
        command_id: str,
        command: Message,
        expected_version: int | None = None,
        *,
        omit_events: bool = False,
    ) -> Submitted:
        """Decide and store `command` for the viewer's seat; the answer carries what the seat
        may see of the new events, or none with `omit_events` (callers that stream events
        or only need the version, like bots, spare the server redacting and rendering)."""
        hot = None
        try:
            _check_submission(viewer, command_id)
            hot = self._hot(match_id)
            done = self._submit(hot, viewer, command_id, command, expected_version, omit_events)
        except AppError as exc:
            self._count_refused(hot, exc)
            raise
        return self._counted(hot, done)

    def _count_refused(self, hot: HotMatch | None, exc: AppError) -> None:
        """A refused command in the metrics (when on); `hot` None: refused before its match was found."""
        if self.metrics is not None:
            self.metrics.refused(hot.match.game_id if hot is not None else "", exc)

    def count_refused(self, exc: AppError) -> None:
        """A SubmitCommand or SubmitCommands refused by the server before its match was looked
        up (its token, a command missing), counted as the refusals made here are."""
        self._count_refused(None, exc)

    def _counted(self, hot: HotMatch, done: Submitted) -> Submitted:
        """`done`, an accepted command counted in the metrics (when on; a duplicate is not counted again)."""
        if self.metrics is not None and not done.duplicate:
            self.metrics.accepted(hot.match.game_id)
        return done

    def _submit(self, hot: HotMatch, viewer: Viewer, command_id: str, command: Message,
                expected_version: int | None, omit_events: bool) -> Submitted:
        match_id = hot.match.match_id
        seat = viewer.seat
        assert seat is not None  # _check_submission
        key = command_key(seat, command_id)
        aside = self.quarantine.of(match_id)  # None but for a match with a command set aside
        with hot.lock:
            m = hot.match
            self._check_seat(m.seats, viewer)
            if key in m.commands:
                return self._duplicate(hot, viewer, key, command, omit_events)
            # A client knows the version, not the staged events (NP-H9): its expected version
            # is checked against what it can know; the store checks the position.
            if expected_version is not None and expected_version != m.public_version:
                m = self.matches.catch_up(hot)
                if key in m.commands:
                    return self._duplicate(hot, viewer, key, command, omit_events)
                if expected_version != m.public_version:
                    if m.finished:  # how it ended tells the client more than a version it moved to
                        raise _over(m)
                    raise Aborted("stale_version",
                                  f"expected version {expected_version}, the match is at {m.public_version}")
            read_in_call = False  # the hot state was read from the store during this call
            for _attempt in range(MAX_RETRIES):
                try:
                    if m.finished:  # a match over says so first: cancelling it is the way out of a quarantine
                        raise _over(m)
                    if aside is not None:  # refused on the stream's state too (a lagging replica catches up)
                        _check_not_set_aside(aside, hot, seat, command_id, command, self.quarantine.ttl_s)
                    _check_player(m, viewer)
                    if viewer.bot and is_clock_default(command_id):  # (a flag test on every other command)
                        self._check_clock_due(m, seat)
                    slots = _slots(m)
                    events = self._decide(hot, seat, command, command_id,
                                          at=m.public_version + slots if slots else None)
                except FailedPrecondition:
                    # Refused on this process's state: another replica may have moved the match
                    # on (to where the command is legal, or past this very command). Refuse only
                    # what the stream's latest state refuses: a state read during this call was
                    # the latest when it was read, so its refusal stands even if the match has
                    # moved on since (re-deciding after every move could go on for as long as
                    # another replica keeps moving the match).
                    decided_fresh = read_in_call
                    before = m.version
                    m = self.matches.catch_up(hot)
                    if m.version == before:
                        store_version = self.store.version(match_id)
                        if store_version >= m.public_version:
                            raise
                        m = self._store_went_back(hot, store_version)  # decide on the store's state
                        read_in_call = True
                        continue
                    if key in m.commands:
                        return self._duplicate(hot, viewer, key, command, omit_events)
                    if _moved(m, expected_version):
                        raise _over(m) if m.finished else \
                            Aborted("stale_version", f"the match moved on to version {m.public_version}") from None
                    if decided_fresh:
                        raise
                    read_in_call = True
                    if self.metrics is not None:
                        self.metrics.redecided(m.game_id, "refused_on_old_state")
                    continue
                if not events:  # accepted but changes nothing: nothing to store
                    return Submitted(m.public_version, [], position=m.version)
                held = m.may_hold and _held(m.engine.info.held_events, events) \
                    and _fits_a_slot(m, seat, events) and _asks_nobody(m.engine, m.state, seat, events)
                if held and slots:  # staged where it stands, so decided there (what a replay checks)
                    events = self._decide(hot, seat, command, command_id)
                    slots = 0
                envelopes = game_envelopes(m.engine, match_id, m.public_version + slots if slots else m.version,
                                           events, command_id=command_id, seat=seat, trace=stored_context(),
                                           command=command)
                # The N-th clock default in a row sends the seat to the bots, in the same append. Not
                # with a held one (NP-H9): a public seat change then would tell the table the seat had
                # answered, and what; the seat goes with its next clock default that is public.
                gone = self._timed_out(m, viewer, command_id, envelopes, events) if not held else None
                written = envelopes if gone is None else [*envelopes, gone]
                # An open window (NP-H9): the command goes in behind a slot a seat, each the seat's
                # held answer or padding, so nobody can count the answers, nor tell who answered
                # before whom, by making a command (a chat) while the window is open (`_block`).
                block, placed = _block(m, stored_context()) if slots else _NO_BLOCK
                try:
                    if spans_exported():
                        with child_span(_WRITES[held, bool(placed)], {"match_id": match_id}):
                            result = self._write(m, held, block, placed, written, key)
                    else:  # the same call, without entering a span that goes nowhere
                        result = self._write(m, held, block, placed, written, key)
                except ConcurrencyConflict as conflict:
                    # Another process moved the match: re-decide on the new state.
                    if _attempt:
                        time.sleep(random.uniform(0, CONFLICT_BACKOFF_S * 2 ** min(_attempt, 4)))
                    if conflict.actual < m.version:  # the store went back: start again from it
                        m = self._store_went_back(hot, conflict.actual)
                    else:
                        m = self.matches.catch_up(hot)
                    read_in_call = True
                    if key in m.commands:
                        return self._duplicate(hot, viewer, key, command, omit_events)
                    if _moved(m, expected_version):
                        raise _over(m) if m.finished else \
                            Aborted("stale_version", f"the match moved on to version {m.public_version}") from None
                    if self.metrics is not None:
                        self.metrics.redecided(m.game_id, "conflict")
                    continue
                if result.duplicate:
                    self.matches.catch_up(hot)
                    return self._duplicate(hot, viewer, key, command, omit_events)
                if block:
                    m.unstage()  # the held answers, folded again where their slots put them
                    m.apply([*block, *envelopes], None if placed else [_padding_event(m.engine)] * slots + events)
                else:
                    m.apply(envelopes, events, staged=held)
                if gone is not None:
                    m.apply([gone])
                    log.info("seat_away", match_id=match_id, seat=seat, reason=TIMEOUTS, version=gone.seq,
                             timeouts=self.timeouts_to_bot)
                    if self.metrics is not None:
                        self.metrics.seat_to_bots(m.game_id, TIMEOUTS)
                if m.finished:  # its last command (the cached answer: the hot matches ask it too)
                    self._unindex(m)
                accepted_line(match_id, seat, command_id, _logged_kind(command, envelopes), m.public_version,
                              len(block) + len(written))
                if omit_events:
                    return Submitted(m.public_version, held=held, position=m.version)
                shown = self._for_viewer(m, envelopes, viewer.seat, events, held=held)
                if gone is not None:
                    shown += self._for_viewer(m, [gone], viewer.seat)
                return Submitted(m.public_version, shown, held=held, position=m.version)
            raise Unavailable("contention", "the match is too busy right now; retry")

    def _check_clock_due(self, m: MatchState, seat: int) -> None:
        """Refuse a person's clock default (the bots' token, a "clock:" id) before the seat's
        deadline as this service's own fold winds it (`MatchState.deadlines`, what GetView shows
        as `deadline_ms`), less `clock_skew_s`: a worker or dispatcher whose clock runs fast, or a
        bug, must not play a person's default early. A seat asked without a clock has no default
        due at all. The bots' seats (created so, or away) have no clock: their "clock:" ids go in."""
        if seat in m.away or _created_bot(m, seat):
            return
        runs_out = m.deadlines().get(seat)
        if runs_out is None:
            raise FailedPrecondition("no_clock", f"seat {seat} is not asked on a turn clock: no clock default is due")
        left = runs_out - self.wall()
        if left > self.clock_skew_s:
            deadline_ms = round(runs_out * 1000)
            # ErrorInfo.metadata: `left_ms` till the deadline by this service's clock, which the
            # worker waits (its own clock is the one suspected: `run_clock`).
            raise FailedPrecondition("clock_not_run_out", f"seat {seat}'s turn clock runs out at deadline_ms "
                                                          f"{deadline_ms}, in {left:.3f} s: its default is not due",
                                     metadata={"deadline_ms": str(deadline_ms), "left_ms": str(round(left * 1000))})

    def _timed_out(self, m: MatchState, viewer: Viewer, command_id: str,
                   envelopes: Sequence[envelope_pb2.EventEnvelope],
                   events: Sequence[Message]) -> envelope_pb2.EventEnvelope | None:
        """The `seat_left` (reason TIMEOUTS) that goes after a clock default's `envelopes` when it
        is the seat's TIMEOUTS_TO_BOT-th in a row (`MatchState.timeouts_in_a_row`), else None.
        Only the bots' own token submits a clock default: a client's "clock:" id is not one. Not
        after a default that ends the match: nobody plays the seat any more, and a seat change
        after the result is one LeaveMatch refuses (`match_over`) and a verification too. Not
        after a default with an event some seat may not see (a secret choice): a public seat
        change there would tell the table the hidden choice was the documented default; the
        seat goes with its next clock default that is public."""
        seat, needed = viewer.seat, self.timeouts_to_bot
        if not needed or not self.seat_changes or not viewer.bot or seat is None or not is_clock_default(command_id) or seat in m.away:
            return None
        if _created_bot(m, seat) or m.timeouts_in_a_row(seat, command_id) < needed:
            return None
        if any(env.visibility.kind != envelope_pb2.VISIBILITY_PUBLIC for env in envelopes):
            return None
        after = envelopes[-1].seq
        engine, state = m.engine, m.state
        for event in events:
            state = engine.evolve(state, event)
        if engine.result(state) is not None:
            return None
        left = envelope_pb2.SeatLeft(seat=seat, policy=self.leave_policy, reason=TIMEOUTS)
        # Its own command id, so it is shown with its seat whoever may not see the default's events.
        return seat_change_envelope(m.match_id, after, m.game_id, left, command_id=f"{AWAY_ID}{command_id}"[:128],
                                    trace=stored_context())

    def _write(self, m: MatchState, held: bool, block: Sequence[envelope_pb2.EventEnvelope],
               placed: Sequence[int], envelopes: list[envelope_pb2.EventEnvelope], key: str) -> AppendResult:
        """Store a command's envelopes at the match's position: staged if held (NP-H9); behind
        its block of slots, if any, the held answers in it written out where they are placed;
        else appended."""
        if held:
            return self.store.stage(m.match_id, m.version, envelopes, key)
        if placed:
            return self.store.write_out(m.match_id, m.version, block, placed, envelopes, key)
        return self.store.append(m.match_id, m.version, [*block, *envelopes] if block else envelopes, key)

    def _store_went_back(self, hot: HotMatch, store: int) -> MatchState:
        """The store is behind what this process folded (acknowledged writes lost): it is the
        truth, so the match is folded anew from it (call with hot.lock held)."""
        log.warning("store_behind_hot_state", match_id=hot.match.match_id, hot=hot.match.version, store=store)
        self.matches.refold(hot)
        return hot.match

    def _decide(self, hot: HotMatch, seat: int, command: Message, command_id: str,
                at: int | None = None) -> list[Message]:
        """The command's events, decided with the dice of the version its first event will
        follow (`at`; the match's position unless slots go first)."""
        m = hot.match
        rng = Rng.derive(m.seed, m.version if at is None else at)
        # The ids are passed to the few log calls rather than bound as context variables:
        # binding and resetting three contextvars cost more per command than the log lines.
        if not command.WhichOneof("kind"):
            raise InvalidArgument("empty_command", "the command has no kind set")
        try:
            if not spans_exported():  # no span that goes nowhere to enter and leave
                return m.engine.decide(m.state, seat, command, rng)
            # A refusal is no failure of the span, and its text would go with the trace (below).
            with child_span("engine.decide", {"game_id": m.game_id, "match_id": m.match_id, "seat": seat},
                            record_exception=False):
                return m.engine.decide(m.state, seat, command, rng)
        except MalformedCommand as exc:
            raise InvalidArgument(exc.code, exc.message) from None
        except RuleViolation as exc:
            # The rule's text is told from what the seat knows, its own hand too ("I39 cannot be
            # played in this window"): the seat gets it, a log line at INFO only the code.
            log.info("command_refused", match_id=m.match_id, seat=seat, command_id=command_id, code=exc.code)
            log.debug("command_refused_reason", match_id=m.match_id, seat=seat, command_id=command_id,
                      code=exc.code, reason=exc.message)
            refused = FailedPrecondition(exc.code, exc.message)
            refused.logged = True  # the line above is the refusal's one line, the RPC's too
            raise refused from None
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            # A field value the engine cannot even read: the client's input, not a rule.
            log.warning("command_malformed", match_id=m.match_id, seat=seat, command_id=command_id,
                        error=repr(exc))
            raise InvalidArgument("malformed_command", f"the command cannot be read: {exc}") from None

    def stuck_command(self, ident: int) -> tuple[str, list[str], dict[str, Any]] | None:
        """The command thread `ident` is deciding now (a `_decide` on its stack, read from its
        frames: nothing is noted on the command path for it), or the view or legal commands it
        asks the engine for (`_engine_view`, `_engine_legal`, and `_engine_viewed`, `_engine_listed`:
        every engine call of GetView and ListLegalCommands), as the quarantine names it: (its
        match, its names, fields for the log line); None when it asks the engine nothing (it
        waits for a match's lock, or for Redis: nothing of the call is to blame)."""
        frame = sys._current_frames().get(ident)
        while frame is not None and frame.f_code is not _DECIDE and frame.f_code not in _ASKING:
            frame = frame.f_back
        if frame is None:
            return None
        found = frame.f_locals
        asked = _ASKING.get(frame.f_code)
        if asked is not None:
            m = found["m"]  # its match's lock is held: where the engine is asked
            fields = {"asked": asked, "version": m.public_version, "game_id": m.game_id}
            if frame.f_code is _NEXT:  # SubmitCommands' `next`: every seat it asks
                fields["seats"] = asking = sorted(found["seats"])
                return m.match_id, [asked_name(asked, m.public_version, seat) for seat in asking], fields
            seat = found["seat"]
            if seat is not None:
                fields["seat"] = seat
            return m.match_id, [asked_name(asked, m.public_version, seat)], fields
        hot, seat, command, command_id = found["hot"], found["seat"], found["command"], found["command_id"]
        m = hot.match  # its lock is held by the stuck thread: where `decide` stands
        names = [id_name(seat, command_id), input_name(m.public_version, seat, command)]
        return m.match_id, names, {"seat": seat, "command_id": command_id, "version": m.public_version,
                                   "game_id": m.game_id}

    def _duplicate(self, hot: HotMatch, viewer: Viewer, key: str, command: Message,
                   omit_events: bool = False) -> Submitted:
        """The first answer again: the version right after that command's events (not the
        match's version now), so a client replaying a chain of commands knows where it stood.
        Only for the same command: an id reused for another one is refused, not answered
        with the first one's result while the new command is silently dropped. A seat's ids
        after its player left it for good are the bots' (guessable: `bot:<match>:<version>:<seat>`),
        so that player's token is refused them (`seat_left`): a duplicate, or `command_id_reused`
        for another command, would tell it the bot's secret choice and show its hidden events."""
        m = hot.match
        first, last = m.commands[key]
        seat = viewer.seat
        if seat is not None and not viewer.bot and _left(m, seat) and first > m.away[seat][1]:
            raise _refused_left(seat)
        position = last
        held = last > m.public_version  # still staged: its events are in memory, not in the stream
        slotted = last - first + 1 if not held and key in m.written_out else 0
        if held:
            envelopes = [env for env in m.staged if first <= env.seq <= last]
            last = m.public_version
        else:
            envelopes = self.store.read(m.match_id, after=first - 1, limit=1 if omit_events else last - first + 1)
        if envelopes and envelopes[0].command and \
                envelopes[0].command != command.SerializeToString(deterministic=True):
            raise Aborted("command_id_reused", f"command_id {key.partition('/')[2]!r} was used by this seat "
                                               "for another command; use a new id for a new command")
        if omit_events:
            return Submitted(last, duplicate=True, held=held, position=position, slotted=slotted)
        return Submitted(last, self._for_viewer(m, envelopes, viewer.seat, held=held), duplicate=True, held=held,
                         position=position, slotted=slotted)

    # -- cancel ------------------------------------------------------------------------
    def cancel_match(self, match_id: str, operator: str, reason: str, request_id: str = "",
                     expected_version: int | None = None) -> Cancelled:
        """End a match its rules will not end (stuck, orphaned, stopped by an operator): one
        `match_cancelled` envelope, appended as a command's are (the position checked, the
        request id as its idempotency key, the server's seat -1). Not a game event: no engine
        decides or folds it (`MatchState.cancelled`). The match is then over with no result.
        The same request id again answers as the first did; another cancel of a match over
        (cancelled or finished) is `match_over`. The caller checked the operator token."""
        reason = cancel_reason(reason)
        if len(request_id) > MAX_CANCEL_REQUEST_ID or "\x00" in request_id:
            raise InvalidArgument("bad_request_id", f"request_id is at most {MAX_CANCEL_REQUEST_ID} characters, "
                                                    "without NUL")
        command_id = "cancel:" + (request_id or secrets.token_hex(12))
        key = command_key(-1, command_id)
        hot = self._hot(match_id)
        with hot.lock:
            m = self.matches.catch_up(hot)
            for _attempt in range(MAX_RETRIES):
                if key in m.commands:
                    return Cancelled(m.commands[key][0], duplicate=True)
                if m.finished:
                    raise _over(m)
                if expected_version is not None and expected_version != m.public_version:
                    raise Aborted("stale_version", f"expected version {expected_version}, "
                                                   f"the match is at {m.public_version}")
                # Behind the slots of an open window, as any public command (NP-H9): the held
                # answers are written out in seat order, so not even the export of the match,
                # which shows everything else, tells who answered first.
                slots = _slots(m)
                trace = stored_context()
                block, placed = _block(m, trace) if slots else _NO_BLOCK
                envelope = match_cancelled_envelope(
                    match_id, m.public_version + slots if slots else m.version, m.game_id,
                    envelope_pb2.MatchCancelled(reason=reason, operator=operator), command_id=command_id, trace=trace)
                try:
                    result = self._write(m, False, block, placed, [envelope], key)
                except ConcurrencyConflict as conflict:
                    m = self._store_went_back(hot, conflict.actual) if conflict.actual < m.version \
                        else self.matches.catch_up(hot)
                    continue
                if result.duplicate:
                    m = self.matches.catch_up(hot)
                    continue
                if block:
                    m.unstage()  # the held answers, folded again where their slots put them
                m.apply([*block, envelope])
                self._unindex(m)
                log.warning("match_cancelled", match_id=match_id, operator=operator, reason=reason[:300],
                            version=m.version)
                return Cancelled(m.version)
            raise Unavailable("contention", "the match is too busy right now; retry")

    # -- who plays a seat ----------------------------------------------------------------
    def leave_match(self, match_id: str, viewer: Viewer) -> SeatChanged:
        """The viewer's seat leaves the match for good: one `seat_left` (reason LEFT, the leave
        policy), and the bots play the seat from the next event on. Its player's token reads
        the match as a spectator from then on (`_reader`) and commands nothing (`seat_left`);
        the match leaves the player's ListMyTurns. Again: answered with that event, `duplicate`
        (a seat away by its clock that leaves gets its final `seat_left`). A bot's seat, or the
        bots' token, is `seat_is_bot`; a match over, `match_over`; with seat changes off (a rollout),
        `seat_changes_off`, but for a leave stored already (a retry whose answer was lost)."""
        seat = _player_seat(viewer)

        def plan(m: MatchState) -> SeatChanged | tuple[envelope_pb2.SeatLeft, str]:
            if _created_bot(m, seat):
                raise _bot_seat(seat)
            away = m.away.get(seat)
            if away is not None and away[0].reason == LEFT:  # (a retry: answered whatever the setting)
                return SeatChanged(away[1], duplicate=True)
            if m.finished:
                raise _over(m)
            if not self.seat_changes:
                raise FailedPrecondition("seat_changes_off", "leaving a match is switched off on this server for "
                                         "now (an upgrade under way): the seat stays yours; try again later")
            return envelope_pb2.SeatLeft(seat=seat, policy=self.leave_policy, reason=LEFT), LEAVE_ID

        done, m = self._change_seat(match_id, viewer, plan)
        if not done.duplicate:
            log.info("seat_left", match_id=match_id, seat=seat, reason=LEFT, version=done.version)
            if self.metrics is not None:
                self.metrics.seat_to_bots(m.game_id, LEFT)
            player = next((info.player_id for info in m.created.seat_info if info.seat == seat), "")
            if player and not _seats_of(m, player):  # (the seats it still plays there: none)
                self._write_index(match_id, {player}, lambda people: self.players.remove(match_id, people))
        return done

    def return_to_match(self, match_id: str, viewer: Viewer) -> SeatChanged:
        """The player of a seat away by its clock (`timeouts`) takes it back: one `seat_returned`,
        and its turn clock starts afresh there (`TurnClocks.returned`). A seat not away answers
        the match's version, `duplicate`; a seat left for good is `seat_left`; a bot's seat, or
        the bots' token, `seat_is_bot`; a match over, `match_over`."""
        seat = _player_seat(viewer)

        def plan(m: MatchState) -> SeatChanged | tuple[envelope_pb2.SeatReturned, str]:
            if _created_bot(m, seat):
                raise _bot_seat(seat)
            away = m.away.get(seat)
            if away is None:
                return SeatChanged(m.public_version, duplicate=True)
            if away[0].reason == LEFT:
                raise _refused_left(seat)
            if m.finished:
                raise _over(m)
            return envelope_pb2.SeatReturned(seat=seat), f"{RETURN_ID}{m.public_version}"

        done, _m = self._change_seat(match_id, viewer, plan)
        if not done.duplicate:
            log.info("seat_returned", match_id=match_id, seat=seat, version=done.version)
        return done

    def _change_seat(self, match_id: str, viewer: Viewer,
                     plan: Callable[[MatchState], SeatChanged | tuple[envelope_pb2.SeatLeft | envelope_pb2.SeatReturned,
                                                                       str]]) -> tuple[SeatChanged, MatchState]:
        """Append the seat change `plan` asks of the match as it is (or answer what it answers
        instead), as `cancel_match` appends: at the position, behind the slots of an open window
        (NP-H9: a seat changing hands while answers are held writes them out in seat order, as
        any public command does, so it tells nobody who answered), again on a conflict."""
        hot = self._hot(match_id)
        with hot.lock:
            m = self.matches.catch_up(hot)
            self._check_seat(m.seats, viewer)
            for _attempt in range(MAX_RETRIES):
                planned = plan(m)
                if isinstance(planned, SeatChanged):
                    return planned, m
                change, command_id = planned
                slots = _slots(m)
                trace = stored_context()
                block, placed = _block(m, trace) if slots else _NO_BLOCK
                envelope = seat_change_envelope(match_id, m.public_version + slots if slots else m.version, m.game_id,
                                                change, command_id=command_id, trace=trace)
                try:
                    result = self._write(m, False, block, placed, [envelope], command_key(change.seat, command_id))
                except ConcurrencyConflict as conflict:
                    m = self._store_went_back(hot, conflict.actual) if conflict.actual < m.version \
                        else self.matches.catch_up(hot)
                    continue
                if result.duplicate:  # written by this very call, its reply lost: the fold tells
                    m = self.matches.catch_up(hot)
                    continue
                if block:
                    m.unstage()  # the held answers, folded again where their slots put them
                m.apply([*block, envelope])
                return SeatChanged(m.version), m
            raise Unavailable("contention", "the match is too busy right now; retry")

    def _index(self, match_id: str, seat_info: Sequence[envelope_pb2.SeatInfo]) -> None:
        """Put a match just created among its people's live matches, once its creation is stored
        (a retry adds it again: the index keeps the first)."""
        self._write_index(match_id, _people(seat_info),
                          lambda people: self.players.add(match_id, people, int(time.time() * 1000)))

    def _unindex(self, m: MatchState) -> None:
        """Take a match just ended out of its people's live matches, once the command that ended
        it is stored: a write lost leaves the entry to the next ListMyTurns, which finds the
        match over and drops it."""
        self._write_index(m.match_id, _people(m.created.seat_info),
                          lambda people: self.players.remove(m.match_id, people))

    def _write_index(self, match_id: str, people: set[str], write: Callable[[set[str]], None]) -> None:
        """The guarded write of `player_index` (the backfill's too): lost to an outage, logged."""
        write_index(match_id, people, write)

    # -- a player's matches ------------------------------------------------------------
    def player_of(self, token: str | None) -> str:
        """The player id of a player token (matchmaking's RegisterGuest), or UNAUTHENTICATED: a
        seat or operator token is `bad_token` (a seat token names one match, not a player)."""
        if token is None:
            raise Unauthenticated("no_token", "this call needs `authorization: Bearer <player token>`")
        try:
            return self.signer.read_player(token)
        except InvalidToken as exc:
            raise Unauthenticated("bad_token", str(exc)) from None

    def my_turns(self, player_id: str, limit: int = 0) -> list[MyTurn]:
        """The live matches `player_id` sits at (a person's seat, not a bot's), each seat as its own
        GetView would tell it whether it is asked and its clock: those asked first, soonest
        deadline first (no clock after a clock), then the rest, most recently moved first; at most
        `limit` (0: MAX_MY_TURNS). Only the player's MY_TURNS_LOOKED_AT newest matches are looked
        at (folded, through the hot matches, which load those not in memory). The index is a hint:
        a match found over, gone, archived or not naming the player is dropped from it here.
        Each seat comes with its token, as CreateMatch minted it: the player token is the
        player's identity, and a device that lost a seat token must be able to play on."""
        cap = min(limit, MAX_MY_TURNS) if limit > 0 else MAX_MY_TURNS
        found: list[MyTurn] = []
        stale: list[str] = []
        for match_id in self.players.newest(player_id, MY_TURNS_LOOKED_AT):
            try:
                hot = self.matches.get(match_id)
            except UnknownMatch:  # gone (its creation lost), or archived: over either way
                stale.append(match_id)
                continue
            except UnreadableMatch:  # not this server's to tell (a newer server's match): left as it is
                continue
            aside = self.quarantine.of(match_id)  # (None but for a match with something set aside)
            with hot.lock:
                try:
                    m = self.matches.catch_up(hot)
                except NotFound:  # archived since this process folded it: over
                    stale.append(match_id)
                    continue
                seats = [] if m.finished else _seats_of(m, player_id)
                if not seats:
                    stale.append(match_id)
                    continue
                found += [dataclasses.replace(_my_turn_unless_aside(m, seat, aside),
                                              seat_token=self.signer.seat_token(match_id, seat, player_id))
                          for seat in seats]
        if stale:
            self.players.drop(player_id, stale)
        return ordered_turns(found)[:cap]

    def watch_my_turns(self, player_id: str, after_id: str = "", limit: int = 0, *,
                       is_active: Callable[[], bool] = lambda: True,
                       poll_ms: int = 1000, until_now: bool = False) -> Iterator[Snapshot | StoredNotice]:
        """`my_turns`, then the player's turn notifications as they are written (turn_watch.py)."""
        return watch_my_turns(self, player_id, after_id, limit, is_active=is_active, poll_ms=poll_ms,
                              until_now=until_now)

    # -- match chat --------------------------------------------------------------------
    def _chat_table(self, match_id: str, viewer: Viewer) -> tuple[int, Viewer]:
        """The match's seats, once its game has match chat and the viewer is at its table (or a
        spectator), and the viewer as it reads the chat: a seat its player left for good reads
        the table's messages only, as a spectator (`_reader`). The match must be in the store,
        over or not: post-game talk is talk too."""
        hot = self._hot(match_id)
        m = hot.match
        chat_rules.check_chat_offered(m.engine.info)
        self._check_seat(m.seats, viewer)
        if viewer.seat is not None and not viewer.bot:
            with hot.lock:
                try:
                    m = self.matches.catch_up(hot)  # whether its player left, as the store says
                except NotFound:  # archived since: the chat call itself answers `match_archived`
                    m = hot.match
        return m.seats, _reader(m, viewer)

    def send_chat(self, match_id: str, viewer: Viewer, message_id: str, to_seats: Sequence[int],
                  text: str) -> SentChat:
        """Store one message of the viewer's seat to the table (`to_seats` empty) or to chosen
        seats. The same message under the same id again answers the first; another message
        under it is refused, as a command id reused is."""
        if viewer.seat is None:
            raise Unauthenticated("no_token", "a spectator cannot chat: send a seat token")
        seats, reader = self._chat_table(match_id, viewer)
        if reader.seat is None:
            raise _refused_left(viewer.seat)
        chat_rules.check_message_id(message_id)
        text = chat_rules.check_text(text)
        recipients = chat_rules.check_recipients(to_seats, viewer.seat, seats)
        try:
            sent = self.chat.send(match_id, viewer.seat, message_id, recipients, text)
        except ChatTooFast as exc:
            limits = self.chat.limits
            raise ResourceExhausted("chat_too_fast", f"a seat sends at most {limits.rate} messages in "
                                                     f"{limits.window_ms / 1000:g} s: retry in "
                                                     f"{exc.wait_ms / 1000:.1f} s") from None
        except MatchArchived:  # trimmed since this replica read it: as `_hot` answers then
            raise _chat_archived(match_id) from None
        first = sent.entry
        if sent.duplicate and (first.text, first.to_seats) != (text, recipients):
            raise Aborted("message_id_reused", f"message_id {message_id!r} was used by this seat for another "
                                               "message; use a new id for a new message")
        return SentChat(first, sent.duplicate)

    def list_chat(self, match_id: str, viewer: Viewer, after_id: str = "", limit: int = 0) -> list[ChatEntry]:
        """Up to `limit` messages after `after_id` the viewer may read, oldest first. Nothing
        stored after the cursor of a match the store trimmed since this replica read it is
        `NOT_FOUND match_archived`, as StreamChat and another replica answer, not an empty page;
        nothing after a cursor no message has yet is `bad_after_id` (`chat.check_cursor_reached`)."""
        viewer = self._chat_table(match_id, viewer)[1]
        cursor, wanted = chat_rules.check_cursor(after_id), chat_rules.page_size(limit)
        shown: list[ChatEntry] = []
        read_any = False
        start = cursor
        while len(shown) < wanted:
            entries = self.chat.read(match_id, cursor, chat_rules.MAX_CHAT_PAGE)
            read_any = read_any or bool(entries)
            shown += [e for e in entries if chat_rules.readable(e, viewer.seat)]
            if len(entries) < chat_rules.MAX_CHAT_PAGE:
                break
            cursor = entries[-1].id
        if not read_any and self._trimmed(match_id):  # its chat went with its events
            raise _chat_archived(match_id)
        if not shown:  # (whatever messages it may not read came after the cursor: they tell nothing)
            self._check_cursor_reached(match_id, start, viewer.seat)
        return shown[:wanted]

    def chat_messages(self, match_id: str, viewer: Viewer, after_id: str = "", *, follow: bool,
                      is_active=lambda: True, poll_ms: int = 1000) -> Iterator[ChatEntry]:
        """Every message after `after_id` the viewer may read, then, with follow, each new one
        as it is stored, until the client leaves (`is_active`: the server stopping too). A match
        over keeps its chat, so the stream does not end with it, but with its archiving: the
        trim takes the chat, and no message can come any more (`NOT_FOUND match_archived`). A
        cursor no message has yet is refused (`bad_after_id`), not waited on. A stream open across
        its player's leaving (LeaveMatch) reads on as a spectator's: the messages to the seat are
        the bot's now, as ListChat answers (asked of the store before a message only the seat reads)."""
        caller = viewer
        viewer = self._chat_table(match_id, viewer)[1]
        cursor = chat_rules.check_cursor(after_id)
        first = True
        while True:
            entries = self.chat.read(match_id, cursor, chat_rules.MAX_CHAT_PAGE)
            if first and not any(chat_rules.readable(e, viewer.seat) for e in entries):
                self._check_cursor_reached(match_id, cursor, viewer.seat)  # else it waited for an id no message has
            first = False
            if viewer.seat is not None and not viewer.bot and any(
                    e.to_seats and chat_rules.readable(e, viewer.seat) for e in entries):
                viewer = self._chat_table(match_id, caller)[1]  # whether its player left since (`_reader`)
            for entry in entries:
                if chat_rules.readable(entry, viewer.seat):
                    yield entry
            if entries:
                cursor = entries[-1].id
                if len(entries) == chat_rules.MAX_CHAT_PAGE:
                    continue
            if not follow or not is_active():
                return
            # A quiet wait asks the store (one entry read), not this replica's copy of the match,
            # which lags when its commands went through another replica.
            if not self.chat.wait(match_id, cursor, poll_ms) and self._trimmed(match_id):
                raise _chat_archived(match_id)
            if not is_active():
                return

    def _check_cursor_reached(self, match_id: str, cursor: str, seat: int | None) -> None:
        """No message `seat` may read comes after the cursor: refuse it if no message has it yet
        (`chat.check_cursor_reached`), as in a chat without the messages the seat may not read.
        Asked only then, so a page with messages costs nothing more; a cursor at or past the
        store's clock costs one read more, for whether it is a message the seat may read
        (`chat.cursor_as_known`)."""
        if not cursor:
            return
        newest, now_ms = self.chat.newest(match_id)
        if entry_key(cursor)[0] >= now_ms:
            found = self.chat.read(match_id, chat_rules.previous_id(cursor), 1)
            newest = chat_rules.cursor_as_known(cursor, found[0] if found else None, seat)
        chat_rules.check_cursor_reached(cursor, newest, now_ms)

    def _trimmed(self, match_id: str) -> bool:
        """Whether the store trimmed the match (archived: its stream gone, its version kept)."""
        return not self.store.read(match_id, limit=1) and self.store.exists(match_id)

    # -- events ------------------------------------------------------------------------
    def _for_viewer(self, match, envelopes, seat: int | None,
                    events: Sequence[Message] | None = None, *, held: bool = False) -> list[SeatEvent]:
        """What `seat` may see of `envelopes`; `events` are their decoded events when the
        caller has them (a fresh decide), which spares parsing each payload again. `held`:
        the envelopes are staged, shown without their seq (it would count the others')."""
        engine = match.engine
        out = []
        hidden: list[bool] | None = None  # made only when something is hidden from this viewer
        for i, env in enumerate(envelopes):
            if env.type == MATCH_CREATED:
                continue
            if env.type == MATCH_CANCELLED:  # public, the server's: shown as stored, to everyone
                cancel = envelope_pb2.MatchCancelled.FromString(env.payload)
                out.append(SeatEvent(env, cancel, f"match cancelled: {cancel.reason}", True))
                continue
            if env.type in SEAT_CHANGES:  # public, the server's: who plays a seat, shown as stored
                change = open_seat_change(env)
                out.append(SeatEvent(env, change, _seat_change_text(change), True,
                                     foreign=seat is None or env.seat != seat))
                continue
            event = events[i] if events is not None else _readable_event(match, env)
            shown = engine.redact(event, seat)
            if shown is None:
                if hidden is None:
                    hidden = [False] * len(envelopes)
                hidden[i] = True
                continue
            out.append(SeatEvent(env, shown, engine.render_event(shown), shown is event, held=held,
                                 foreign=seat is None or env.seat != seat))
        if hidden is not None:
            anonymous = {id(envelopes[i]) for i in unattributed(envelopes, hidden)}
            for seat_event in out:
                seat_event.unattributed = id(seat_event.envelope) in anonymous
        return out

    def _command_so_far(self, m: MatchState, cursor: int) -> list[envelope_pb2.EventEnvelope]:
        """The events of the command that event `cursor` belongs to, up to it: a stream that
        starts inside a command shows its events as one from the command's start does (a
        public event of a command with an event hidden from the viewer goes out unattributed,
        `_for_viewer`), or a client could learn who acted by choosing where to start."""
        if cursor <= 1:
            return []
        last = self.store.read(m.match_id, after=cursor - 1, limit=1)
        if not last or not last[0].command_id:
            return []
        span = m.commands.get(command_key(last[0].seat, last[0].command_id))
        if span is None or span[0] >= cursor:
            return last
        return self.store.read(m.match_id, after=span[0] - 1, limit=cursor - span[0] + 1)

    def events(self, match_id: str, viewer: Viewer, after: int, *, follow: bool,
               is_active=lambda: True, poll_ms: int = 1000) -> Iterator[tuple[SeatEvent | None, int, bool]]:
        """(event, version, finished) for every event after `after` this viewer may see.
        With follow, waits for new ones until the match ends or the client leaves (or
        `is_active` says to stop: the server stopping); the match's end is one last
        (None, version, True). (No heartbeat goes out while it waits: the server's keepalive
        pings find a client gone from the network, `famiglia.grpcutil.server.build_server`.)"""
        hot = self._hot(match_id)
        m = hot.match
        self._check_seat(m.seats, viewer)
        cursor = max(0, after)
        if cursor > m.public_version or (viewer.seat is not None and not viewer.bot):
            with hot.lock:  # (a person's seat: whether its player left, as the stream's store says)
                self.matches.catch_up(hot)  # this replica may lag the one the client heard from
                m = hot.match
            if cursor > m.public_version:  # else every event up to it would be skipped, silently
                raise OutOfRange("version_ahead",
                                 f"from version {cursor}: the match is at version {m.public_version}")
        reading = _reader(m, viewer)
        earlier = self._command_so_far(m, cursor)
        while True:
            envelopes = self.store.read(match_id, after=cursor, limit=500)
            if len(envelopes) == 500:  # a command the read cut in two comes whole with the next one
                envelopes = _whole_commands(envelopes)
            leaves = _leaves(envelopes, reading)
            if leaves is not None:  # the player leaves its seat here: the events after it, as a spectator's
                envelopes = envelopes[:leaves + 1]
            if envelopes:
                if earlier and same_command(earlier[-1], envelopes[0]):
                    shown = [e for e in self._for_viewer(m, earlier + envelopes, reading.seat)
                             if e.envelope.seq > cursor]
                else:
                    shown = self._for_viewer(m, envelopes, reading.seat)
                earlier = []
                if leaves is not None:
                    reading = SPECTATOR
                if shown and reading.seat is not None:
                    shown[-1].deadline_ms = self._latest_deadline(hot, reading.seat, envelopes[-1].seq)
                for seat_event in shown:
                    yield seat_event, seat_event.envelope.seq, False
                cursor = envelopes[-1].seq
                continue
            # The match as kept now: the entry taken at the start may have been dropped since (the
            # hot matches' bounds), and caught up here it would be a second fold of the match, held
            # for as long as the stream lives and counted by no bound.
            hot = self._hot(match_id)
            with hot.lock:
                self.matches.catch_up(hot)
                m = hot.match  # folded anew, should the store have gone back (HotMatches.refold)
                finished = m.finished and m.version <= cursor
            if finished:
                yield None, cursor, True
                return
            if not follow or not is_active():
                return
            self.store.wait_for(match_id, cursor, poll_ms)
            if not is_active():
                return

    # -- rematch -----------------------------------------------------------------------
    def ask_rematch(self, match_id: str, viewer: Viewer) -> Rematch:
        """The viewer's seat asks for a rematch of the finished match; the ask that completes the
        table's (every person's seat, `rematch.persons`) makes it. Again: the same answer, and
        after the rematch is made its match and this seat's token there. A bot's seat, or the
        bots' token, is `seat_is_bot`; a seat away at the end (left, or its clock ran out too
        often) `seat_left`/`seat_away`: the bots play it in the rematch (docs/architecture.md,
        "Rematches")."""
        seat = _player_seat(viewer)
        try:
            m = self._finished(match_id, viewer)
        except NotFound as refused:
            return self._made_before(match_id, viewer, refused)
        if _created_bot(m, seat):
            raise _bot_seat(seat)
        away = m.away.get(seat)
        if away is not None:
            why = (f"the bots played seat {seat} at the end of this match, and they play it in its rematch: "
                   "only the persons at the table ask for one")
            if away[0].reason == LEFT:
                raise FailedPrecondition("seat_left", why)
            raise FailedPrecondition("seat_away", why)
        dear = _dear_bots(m.created.seat_info)
        if dear and not self.rematches.look(match_id).allowed_by:
            # As its creation needed one (`check_creator`): a rematch would take the bots' time again.
            raise PermissionDenied("operator_only", "this match's bots think past the public budget ("
                                   + "; ".join(dear) + "): an operator allows its rematch first "
                                   "(AskRematch with an operator token), then each person asks")
        late = too_late(m, self.wall())
        if late is not None:  # nothing begins again; a rematch made in time is still found
            return self._rematch(m, viewer, self._made_in_time(match_id, late), make=True)
        # The ask that completes the table fixes the table's one request id (the first writer's:
        # every asker, replica and retry creates or finds the same match under it) and makes the
        # creation pending, in its own write: a process killed right after it leaves the sweep a
        # creation to make, not a table asked in full with nothing to make. A match trimmed since
        # it was loaded (the retention's sweep) is refused in that write, nothing marked pending
        # that could no longer be made: answered as an ask that came after the trim.
        try:
            asks = self.rematches.ask(match_id, seat, persons(m), secrets.token_hex(32), int(self.wall() * 1000))
        except FinishedMatchArchived:
            return self._made_before(match_id, viewer, gone(self.store, match_id))
        waiting = [s for s in persons(m) if s not in asks.seats]
        log.info("rematch_asked", match_id=match_id, seat=seat, waiting=len(waiting))
        if asks.fresh and waiting:  # (complete, the table is told the rematch is made instead)
            self._tell_table(m, REMATCH_ASKED, viewer)
        if not waiting and not asks.request_id:
            # (A table completed without one: by a replica of the release before the above, killed
            # before its own `fix_request_id`. Refused as the ask is for a match trimmed since.)
            try:
                asks = RematchAsks(asks.seats, self.rematches.fix_request_id(match_id, secrets.token_hex(32),
                                                                             int(self.wall() * 1000)))
            except FinishedMatchArchived:
                return self._made_before(match_id, viewer, gone(self.store, match_id))
        return self._rematch(m, viewer, asks, make=True)

    def rematch_operator(self, token: str | None) -> str:
        """The operator an AskRematch's token names ("" for any other token, which asks as a
        seat's): an operator's token is refused as any operator call's (`operator_of`) when
        expired or signed with a rollover's old secret alone."""
        if not token:
            return ""
        try:
            kind = self.signer.read(token).get("k")
        except InvalidToken:
            return ""  # (refused as a seat's token)
        return operator_of(self.signer, token, "allow a rematch") if kind == "operator" else ""

    def allow_rematch(self, match_id: str, operator: str) -> Rematch:
        """An operator allows the rematch of a finished match whose bots think past the public
        budget (its creation needed an operator, `check_creator`; the table's asks alone are
        refused `operator_only`): the persons ask next, as at any match, and it is made by the
        ask that completes the table. Of any other match it changes nothing. Answers as a
        spectator's look; again, the same. A match trimmed since it was loaded is refused in the
        write (nothing stored for a match gone): answered as an allow that came after the trim."""
        try:
            m = self._finished(match_id, SPECTATOR)
        except NotFound as refused:
            return self._made_before(match_id, SPECTATOR, refused)
        late = too_late(m, self.wall())
        if late is not None:
            return self._rematch(m, SPECTATOR, self._made_in_time(match_id, late), make=True)
        try:
            asks = self.rematches.allow(match_id, operator)
        except FinishedMatchArchived:
            return self._made_before(match_id, SPECTATOR, gone(self.store, match_id))
        log.info("rematch_allowed", match_id=match_id, operator=operator)
        return self._rematch(m, SPECTATOR, asks, make=True)

    def get_rematch(self, match_id: str, viewer: Viewer) -> Rematch:
        """Where the finished match's rematch stands, asking nothing: for its seats and spectators
        alike (which seats asked is the table's to see); a seat's own token there once made (made
        by this look if every person asked but its creation was lost: `_rematch`)."""
        try:
            m = self._finished(match_id, viewer)
        except NotFound as gone:
            return self._made_before(match_id, viewer, gone)
        asks = self.rematches.look(match_id)
        late = too_late(m, self.wall())
        if late is not None and not asks.request_id:
            raise late
        return self._rematch(m, viewer, asks, make=False)

    def finish_rematches(self, grace_s: float = REMATCH_GRACE_S, most: int = 100) -> int:
        """Make each rematch whose table asked in full but whose creation was lost (the asker's
        process died between fixing the request id and creating the match), so it does not wait
        for somebody's next ask or look, which may never come before the finished match is
        archived (the rematch is made from it). The pending creations older than `grace_s` (an
        ask may be making one now: making it twice is harmless, an idempotent creation); the
        number looked at. A finished match gone already can make none: logged `rematch_lost`."""
        looked = 0
        due_ms = int((self.wall() - grace_s) * 1000)
        for match_id in self.rematches.pending(due_ms, most):
            looked += 1
            try:
                asks = self.rematches.look(match_id)  # (first: one no replica reads is given up once they expire)
                if asks.request_id:  # (always, but for asks expired since: nothing tells what to make)
                    made = self._rematch(self._finished(match_id, SPECTATOR), SPECTATOR, asks, make=True)
                    log.info("rematch_finished", match_id=match_id, rematch_id=made.match_id)
                else:
                    log.error("rematch_lost", match_id=match_id, reason="asks_gone")
            except AppError as exc:  # archived or unknown: nothing to make it from
                if exc.code == "match_unreadable":  # its game not served here (FAMIGLIA_GAMES), or a
                    # newer release's events: a replica that reads it makes it; kept until the asks expire
                    log.info("rematch_left", match_id=match_id, reason=exc.code)
                    self._put_off(match_id, due_ms)
                    continue
                log.error("rematch_lost", match_id=match_id, reason=exc.code)
            except Exception:  # noqa: BLE001 -- Redis away for it: kept for the next round, the others go on
                log.exception("rematch_sweep_failed", match_id=match_id)
                self._put_off(match_id, due_ms)
                continue
            self.rematches.drop_pending(match_id)
        return looked

    def _put_off(self, match_id: str, due_ms: int) -> None:
        """Behind the other pending creations: `most` that cannot be made now would otherwise be
        each round's oldest, and the sweep would look at nothing else. Behind those due now, not
        out of the grace: a replica that cannot read the match, sweeping just before one that
        can, would otherwise keep it from that one round after round."""
        try:
            self.rematches.put_off(match_id, due_ms)
        except Exception:  # noqa: BLE001 -- Redis away: looked at first again next round, as before
            log.warning("rematch_put_off_failed", match_id=match_id)

    def _made_in_time(self, match_id: str, late: FailedPrecondition) -> RematchAsks:
        """The asks of a match past its rematch's window (`rematch.ASKED_WITHIN_S`) if its
        rematch was made in time (its request id fixed), else `late`."""
        asks = self.rematches.look(match_id)
        if not asks.request_id:
            raise late
        return asks

    def _finished(self, match_id: str, viewer: Viewer) -> MatchState:
        hot = self._hot(match_id)
        with hot.lock:
            m = self.matches.catch_up(hot)  # (archived since this replica folded it: `match_archived`)
        self._check_seat(m.seats, viewer)
        check_rematch(m)
        return m

    def _rematch(self, m: MatchState, viewer: Viewer, asks: RematchAsks, *, make: bool) -> Rematch:
        """The answer; with `make`, the rematch created (or found: its request id is fixed) once
        every person asked. A look that finds the request id fixed but no match (the creation
        lost: the asker's process killed between the two) makes it too: the table asked in full,
        and those who asked may look only."""
        asked = tuple(sorted(asks.seats))
        waiting = tuple(s for s in persons(m) if s not in asks.seats)
        seated = seating(m)
        if not asks.request_id:  # not made yet: the seat it will be, no token
            there = None if viewer.seat is None or viewer.bot else seat_there(seated, m.seats, viewer.seat,
                                                                               viewer.player_id)
            return Rematch(asked, waiting, seat=there[0] if there is not None else -1)
        match_id = _match_id(asks.request_id)
        # Created again by each ask (a retry's creation indexes its people's live matches again,
        # a write an outage may have lost), but not once it is over: that would put an ended
        # match back among them.
        made = self.store.version(match_id) > 0
        if not made or (make and not self._over(match_id)):
            created = self.create_match(m.game_id, m.seats, options=dict(m.created.options),
                                        seat_info=seated, request_id=asks.request_id, rematch_of=m.match_id)
            if created.match_id != match_id:  # never: _match_id derives it from the request id
                raise RuntimeError(f"rematch of {m.match_id} made {created.match_id}, not {match_id}")
            log.info("rematch_made", match_id=m.match_id, rematch_id=match_id)
            # Only the creation that wrote it: two that both found it not made (a replica's sweep
            # and another's, an ask and its retry) would both tell the table. A creation found
            # made leaves the pending entry to the sweep, which drops one a death left.
            if created.written:
                self.rematches.drop_pending(m.match_id)
                self._tell_table(m, REMATCH_MADE, viewer)
        return _rematch_seat(self.signer, Rematch(asked, (), match_id), viewer, seated, m.seats)

    def _tell_table(self, m: MatchState, kind: str, but: Viewer) -> None:
        """Post `kind` about the finished match to each person at its table but `but`, the caller
        when it is a person's seat (it learns it from its own answer): the players named in its
        `seat_info`, not a bot's seat nor one away at the end, nor the caller's seat or any other
        seat of its player (a player at two seats is not told of its own ask). Once what it tells
        happened (a seat's first ask; the creation, by the call whose creation wrote the match):
        lost, never repeated, if the process dies between. A store of notices that fails loses
        the notice, not the ask."""
        if not self.rematch_notices:
            return
        table = set(persons(m))
        person = but.seat is not None and not but.bot  # (a spectator's look, or the bots', tells all)
        now_ms = int(self.wall() * 1000)
        notices = [TurnNotice(info.player_id, m.match_id, m.game_id, info.seat, kind, m.public_version, at_ms=now_ms)
                   for info in m.created.seat_info if info.player_id and info.seat in table
                   and not (person and (info.seat == but.seat or info.player_id == but.player_id))]
        # Each is told the match is over first, as the dispatcher tells it (the same notice, under
        # its told mark: whichever tells it first writes it, the other nothing): a rematch asked
        # in the moment a match ends reached a player's stream before the dispatcher's
        # `match_over`, a notice about a match the player had not been told was over. Not of an
        # end older than STALE_SECONDS, as the dispatcher's: told then, its mark may be gone since
        # (a rematch is asked up to 29 days on), and the end would be told twice.
        stale = now_ms - m.last_timestamp_ms > STALE_SECONDS * 1000
        over = [] if stale else [TurnNotice(n.player_id, m.match_id, m.game_id, n.seat, MATCH_OVER, m.version,
                                            at_ms=m.last_timestamp_ms, asked_at=m.version) for n in notices]
        try:
            if over:
                self.notices.tell(over)
            self.notices.post(notices)
        except Exception as exc:  # noqa: BLE001 -- a notification is a hint: the asks are stored
            log.warning("rematch_notice_lost", match_id=m.match_id, kind=kind, error=str(exc))

    def _over(self, match_id: str) -> bool:
        """Whether a match made is over (archived included)."""
        try:
            hot = self._hot(match_id)
        except NotFound:
            return True
        with hot.lock:
            try:
                return self.matches.catch_up(hot).finished
            except NotFound:  # archived since this replica folded it: over
                return True

    def _made_before(self, match_id: str, viewer: Viewer, gone: NotFound) -> Rematch:
        """The rematch of a finished match archived since (the projection's retention trims its
        stream, an hour after its end by default: `match_archived`), made before: the asks keep
        its request id, so a player who asked and comes back later still finds it, and its seat
        there, whose clock runs for it. A match archived before its rematch was made, or whose
        rematch is archived too, is `match_archived` (`gone`, as an unknown match is `unknown_match`)."""
        if gone.code != "match_archived":
            raise gone
        asks = self.rematches.look(match_id)
        rematch_id = _match_id(asks.request_id) if asks.request_id else ""
        first = self.store.read(rematch_id, limit=1) if rematch_id else []
        created = open_match_created(first[0]) if first else None
        if created is None:
            raise gone
        return _rematch_seat(self.signer, Rematch(tuple(sorted(asks.seats)), (), rematch_id), viewer,
                             created.seat_info, created.seats)

    def _latest_deadline(self, hot: HotMatch, seat: int, version: int) -> int | None:
        """`seat`'s turn clock if `version` is the match's latest (this replica catches up when it
        lags the stream), else None: the stream's next events bring it."""
        with hot.lock:
            m = hot.match
            if m.public_version < version:
                m = self.matches.catch_up(hot)
            return _deadline_ms(m, seat) if m.public_version == version else None


def _deadline_ms(m: MatchState, seat: int | None, pendings: Sequence[Pending] | None = None) -> int:
    """When `seat`'s own turn clock runs out, in Unix milliseconds; 0 when it has none (a
    spectator, a bot's seat, a seat not asked or asked without a clock). The moment is the
    one the bots' dispatcher enforces (`MatchState.deadlines`, wound over the stream's events).
    A seat whose answer is held back (NP-H9) is not asked (`pendings`: the game's, or as the
    seat may know them; the hot state's, its held answers folded), and its clock, like every
    other, never counts another seat's held answer."""
    if seat is None or m.clocks is None or m.state is None:
        return 0
    if pendings is None:
        pendings = m.engine.pending(m.state)
    if not any(p.seat == seat and p.timeout_seconds > 0 for p in pendings):
        return 0
    runs_out = m.deadlines().get(seat)
    return 0 if runs_out is None else round(runs_out * 1000)


def _player_seat(viewer: Viewer) -> int:
    """The seat a player's own token names, for what only its player may ask (leave, return)."""
    if viewer.seat is None:
        raise Unauthenticated("no_token", "this call needs `authorization: Bearer <seat token>`")
    if viewer.bot:
        raise _bot_seat(viewer.seat)
    return viewer.seat


def _bot_seat(seat: int) -> FailedPrecondition:
    return FailedPrecondition("seat_is_bot", f"seat {seat} is a bot's: only a person's seat is left or taken back")


def _leaves(envelopes: Sequence[envelope_pb2.EventEnvelope], reader: Viewer) -> int | None:
    """Where among `envelopes` the reader's own seat is left for good (`seat_left`, LEFT), if
    it is: a stream open across it shows the events after it as a spectator's."""
    seat = reader.seat
    if seat is None or reader.bot:
        return None
    for i, env in enumerate(envelopes):
        if env.type == SEAT_LEFT and env.seat == seat and envelope_pb2.SeatLeft.FromString(env.payload).reason == LEFT:
            return i
    return None


def _rematch_seat(signer: TokenSigner, made: Rematch, viewer: Viewer,
                  seated: Sequence[envelope_pb2.SeatInfo], seats: int) -> Rematch:
    """`made` (a rematch made) with the viewer's seat and token there, if a person of it plays
    it there (`rematch.seat_there`): a spectator, the bots' token, and a seat the bots play there
    get none."""
    there = None if viewer.seat is None or viewer.bot else seat_there(seated, seats, viewer.seat, viewer.player_id)
    if there is None:
        return made
    seat, player = there
    return dataclasses.replace(made, seat=seat, seat_token=signer.seat_token(made.match_id, seat, player))


def _created_bot(m: MatchState, seat: int) -> bool:
    """Whether the match was created with a bot in `seat` (`MatchCreated.seat_info`)."""
    return any(info.seat == seat and info.bot for info in m.created.seat_info)


def _left(m: MatchState, seat: int | None) -> bool:
    """Whether `seat`'s player left it for good (LeaveMatch): the bots play it to the end."""
    away = m.away.get(seat) if seat is not None else None
    return away is not None and away[0].reason == LEFT


def _reader(m: MatchState, viewer: Viewer) -> Viewer:
    """The viewer as it may read the match: the token of a seat its player left for good reads
    it as a spectator (the seat's hidden cards are the bot's now); the bots' own token, and a
    player whose seat is away by its clock (it may come back), read the seat's."""
    if viewer.seat is not None and not viewer.bot and _left(m, viewer.seat):
        return SPECTATOR
    return viewer


def _refused_left(seat: int) -> FailedPrecondition:
    return FailedPrecondition("seat_left", f"you left this match: the bots play seat {seat} to its end, and "
                                           "your token reads the match as a spectator")


def _check_left(m: MatchState, viewer: Viewer) -> None:
    """Refuse what only a seat's player may do (its legal commands, its chat) once it left for good."""
    if not viewer.bot and _left(m, viewer.seat):
        assert viewer.seat is not None
        raise _refused_left(viewer.seat)


def _check_player(m: MatchState, viewer: Viewer) -> None:
    """Whether a player's token may command its seat now: not once it left for good
    (`seat_left`), nor while the bots play it after its clock ran out (`seat_away`) until it
    returns. The bots' own token commands any seat, as every token did before: a bot decision
    made for a seat before its player returned is stale there (the return is an event)."""
    seat = viewer.seat
    assert seat is not None
    away = m.away.get(seat)
    if away is None or viewer.bot:
        return
    if away[0].reason == LEFT:
        raise _refused_left(seat)
    raise FailedPrecondition("seat_away", f"your turn clock ran out too many times in a row, so the bots play "
                                          f"seat {seat} since version {away[1]}: call ReturnToMatch to take it back")


def _seat_change_text(change: envelope_pb2.SeatLeft | envelope_pb2.SeatReturned) -> str:
    if isinstance(change, envelope_pb2.SeatReturned):
        return f"seat {change.seat} is back: its player plays it again"
    if change.reason == LEFT:
        return f"seat {change.seat} left the match: a bot ({change.policy}) plays it from now on"
    return f"seat {change.seat} let its clock run out too often: a bot ({change.policy}) plays it until its player returns"


def _chat_archived(match_id: str) -> NotFound:
    """The answer of every chat call on a match the store trimmed: its chat went with its events."""
    return NotFound("match_archived", f"match {match_id!r} is over and archived: its chat went with its events")


def _seats_of(m: MatchState, player_id: str) -> list[int]:
    """The seats `player_id` holds at the match as a person (not a bot's seat, nor one it left
    for good: the bots play that one to the end)."""
    return sorted(info.seat for info in m.created.seat_info
                  if info.player_id == player_id and not info.bot and not _left(m, info.seat))


def _my_turn(m: MatchState, seat: int) -> MyTurn:
    """What one seat's own GetView says of it: whether its `to_act` names it, and its clock. A
    seat away by its clock is not asked (the bots answer for it until its player returns). In a
    frame of its own, as GetView's engine calls are (`_engine_viewed`): a loop here sets aside the
    seat's view (`stuck_command`)."""
    if seat in m.away:
        return MyTurn(m.match_id, m.game_id, seat, m.public_version, False, 0, _moved_ms(m), away=True)
    to_act = pending_for(m.engine, m.state, seat)
    asked = any(p.seat == seat for p in to_act)
    return MyTurn(m.match_id, m.game_id, seat, m.public_version, asked,
                  _deadline_ms(m, seat, to_act) if asked else 0, _moved_ms(m))


def _my_turn_unless_aside(m: MatchState, seat: int, aside: frozenset[str] | None) -> MyTurn:
    """`_my_turn`, or for a seat whose view is set aside (`aside`: the match's set-aside names; a
    loop in its turn, or in its GetView) the seat listed as the engine told nothing of it, asking
    it nothing: not asked, no clock; its GetView says why."""
    if aside is not None and asked_name("view", m.public_version, seat) in aside:
        return MyTurn(m.match_id, m.game_id, seat, m.public_version, False, 0, _moved_ms(m), away=seat in m.away)
    return _my_turn(m, seat)


def ordered_turns(turns: Sequence[MyTurn]) -> list[MyTurn]:
    """ListMyTurns' order: the seats asked first, soonest deadline first and those without a clock
    after them; then the others, most recently moved first (ties by match and seat: stable)."""
    return sorted(turns, key=lambda t: (not t.to_act, t.to_act and t.deadline_ms == 0,
                                        t.deadline_ms if t.to_act else 0, -t.moved_ms, t.match_id, t.seat))


def _moved_ms(m: MatchState) -> int:
    """When the match last moved as the table knows it: before its held answers (NP-H9), whose
    time would tell a seat that another had answered a window before the version moved."""
    if m.staged and m.unstaged is not None:
        return m.unstaged[1]
    return m.last_timestamp_ms


def _readable_event(m: MatchState, env: envelope_pb2.EventEnvelope) -> Message:
    """A stored event as this server's engine reads it, or `match_unreadable` as its fold says
    (`HotMatches.catch_up`): StreamEvents reads the stream ahead of the fold, and an event of a
    kind only a newer server knows has no kind here, so no engine can tell who may see it."""
    try:
        event = open_event(m.engine, env)
    except DecodeError as exc:
        raise unreadable(m.match_id, exc) from None
    if not event.ListFields():
        raise unreadable(m.match_id, UnknownEventKind(m.match_id, env))
    return event


def _over(m: MatchState) -> FailedPrecondition:
    """The refusal of anything more on a match that is over (`match_over`), saying how it ended."""
    if m.cancelled is not None:
        return FailedPrecondition("match_over", f"the match was cancelled by an operator: {m.cancelled.reason}")
    return FailedPrecondition("match_over", "the match is over")


def _moved(m, expected_version: int | None) -> bool:
    """Whether the match is no longer at the version the caller knows (held answers move none)."""
    return expected_version is not None and expected_version != m.public_version


def _slots(m: MatchState) -> int:
    """How many slots go ahead of a public command made now (NP-H9): one a seat while answers
    are held or the game asks any seat privately (an open window), in a match where answers
    are held and the game pads them (GameInfo.held_padding); else none."""
    if not m.may_hold or not m.engine.info.held_padding:
        return 0
    if m.staged or any(p.private for p in m.engine.pending(m.state)):
        return m.seats
    return 0


def _block(m: MatchState, trace: Mapping[str, str]) -> tuple[list[envelope_pb2.EventEnvelope], list[int]]:
    """The slots a public command goes in behind (NP-H9), after the public version, in seat
    order: slot s holds seat s's held answer, renumbered (only its seq changes), or padding.
    A seat's own answer then lands at its seat's place whoever else answered, and when, and
    the version moves by the seats whatever was held. Also the seqs the held answers take,
    in the order they were staged (`EventStore.write_out`)."""
    answers = {env.seat: env for env in m.staged}
    assert len(answers) == len(m.staged), "one held answer a seat (_fits_a_slot)"
    block: list[envelope_pb2.EventEnvelope] = []
    for seat in range(m.seats):
        after = m.public_version + seat
        answer = answers.get(seat)
        if answer is None:
            block += game_envelopes(m.engine, m.match_id, after, [_padding_event(m.engine)], trace=trace)
            continue
        moved = envelope_pb2.EventEnvelope()
        moved.CopyFrom(answer)
        moved.seq = after + 1
        block.append(moved)
    return block, [m.public_version + env.seat + 1 for env in m.staged]


def _fits_a_slot(m: MatchState, seat: int, events: Sequence[Message]) -> bool:
    """Whether a command to hold fits its seat's one slot (`_block`): one event, and nothing of
    the seat's held yet. (A window takes one answer a seat; a second held event would make its
    slot longer, telling the table whose it is.) Otherwise it goes to the stream, as any
    public command does, behind the slots."""
    return len(events) == 1 and all(env.seat != seat for env in m.staged)


def _complete(commands: list[Message], cap: int) -> bool:
    """Whether a listing is every legal command: not cut at the cap, not a compound choice's sample."""
    return len(commands) < cap and not isinstance(commands, Sampled)


_NO_BLOCK: tuple[tuple[envelope_pb2.EventEnvelope, ...], tuple[int, ...]] = ((), ())
"""No slots ahead of the command: the common path."""

#: The span of each way a command is stored: (held, held answers written out behind it).
_WRITES = {(True, False): "eventstore.stage", (False, False): "eventstore.append",
           (False, True): "eventstore.write_out"}

_PADDING: dict[str, Message] = {}
"""game id -> its padding event, built once"""


def _padding_event(engine: Engine) -> Message:
    event = _PADDING.get(engine.info.game_id)
    if event is None:
        event = engine.info.padding_event()
        assert event is not None  # _slots is 0 for a game without padding
        _PADDING[engine.info.game_id] = event
    return event


#: The `kind` a `command_accepted` line gives a command some seat may not see all of.
HIDDEN_KIND = "hidden"
_PUBLIC = envelope_pb2.VISIBILITY_PUBLIC


def _logged_kind(command: Message, envelopes: Sequence[envelope_pb2.EventEnvelope]) -> str:
    """The command's kind as its log line names it: withheld (`HIDDEN_KIND`) unless every one of
    its events is public. The kind can be the secret itself: a Nothing Personal window's answer
    is a `pass`, a `play_or_effect` or a `buy_reroll` (NP-H9: never told, held or not), an
    offer is seen by two seats. Logs go where the table's secrets must not (as `unattributed`
    keeps a seat's name off such a command's public events)."""
    for env in envelopes:
        if env.visibility.kind != _PUBLIC:
            return HIDDEN_KIND
    return command.WhichOneof("kind")


def _held(held_events: frozenset[str], events: Sequence[Message]) -> bool:
    """Whether a command's events are all of kinds the game holds back (NP-H9)."""
    return all(event.WhichOneof("kind") in held_events for event in events)


def _asks_nobody(engine, state, seat: int, events: Sequence[Message]) -> bool:
    """Whether the events only take their own seat out of what the game waits for. A held
    command that asked anyone anything (its own seat again included: an optional move) would
    wait on a command that nobody, the bots' dispatcher included, could know to make: it goes
    to the stream instead. (For the events of a fresh decide, this fold is the one the hot
    state makes next: the engines keep it.)"""
    before = {(p.seat, p.label) for p in engine.pending(state)}
    after = state
    for event in events:
        after = engine.evolve(after, event)
    return all(p.seat != seat and (p.seat, p.label) in before for p in engine.pending(after))


def _whole_commands(envelopes: list[envelope_pb2.EventEnvelope]) -> list[envelope_pb2.EventEnvelope]:
    """`envelopes` without its last command's, unless that is all of them: a viewer's view of
    a command depends on all of its events (`_for_viewer`)."""
    last = envelopes[-1]
    if not last.command_id:
        return envelopes
    end = len(envelopes) - 1
    while end > 0 and same_command(envelopes[end - 1], last):
        end -= 1
    return envelopes[:end] or envelopes


def _check_not_set_aside(aside: frozenset[str], hot: HotMatch, seat: int, command_id: str, command: Message,
                         ttl_s: float) -> None:
    """Refuse a command set aside on this match (`Quarantine`): the same call again (its seat
    and command id), or the same command where the match stands (its input to `decide`), as
    every seat sees it: at its version, not its position, which counts the answers held (NP-H9)."""
    if id_name(seat, command_id) in aside or input_name(hot.match.public_version, seat, command) in aside:
        raise FailedPrecondition(
            "command_quarantined",
            f"command_id {command_id[:60]!r} of seat {seat} is set aside: the game's engine did not finish "
            f"deciding it (a server bug, reported to the operators), and it is refused for up to "
            f"{_lasting(ttl_s)} so it cannot stop more servers. Play another command under a new command_id, "
            "or ask an operator to cancel the match (famiglia match cancel)")


def _check_not_asked_aside(aside: frozenset[str], m: MatchState, asked: str, seat: int | None,
                           ttl_s: float) -> None:
    """Refuse a seat's view or legal commands set aside where the match stands (`Quarantine`):
    the engine did not return them there, and would not again."""
    if asked_name(asked, m.public_version, seat) in aside:
        what = {"view": "the view", "legal": "the legal commands"}[asked]
        whose = "a spectator" if seat is None else f"seat {seat}"
        if m.finished:  # it moves on no more, and a match over is not cancelled (`match_over`)
            cure = ("The match is over: it moves on no more and cannot be cancelled, so retrying does not help "
                    "until an operator lifts the set-aside (once the engine is fixed)")
        else:
            cure = "Retrying does not help until the match moves on; ask an operator to cancel the match " \
                   "(famiglia match cancel)"
        raise FailedPrecondition(
            "call_quarantined",
            f"{what} of {whose} at version {m.public_version} is set aside: the game's engine did not "
            f"finish making it (a server bug, reported to the operators), and it is refused for up to "
            f"{_lasting(ttl_s)} so it cannot stop more servers. {cure}")


def _answerable(aside: frozenset[str], m: MatchState, seat: int, view: bool) -> bool:
    """Whether a SubmitCommands `next` answer for `seat` asks the engine nothing set aside."""
    return asked_name("legal", m.public_version, seat) not in aside and \
        not (view and asked_name("view", m.public_version, seat) in aside)


def _engine_view(m: MatchState, seat: int | None) -> Message:
    """The engine's view for `seat`, in a frame of its own: a call found stuck in it has that
    view set aside (`stuck_command`)."""
    return m.engine.view(m.state, seat)


def _engine_legal(m: MatchState, seat: int, cap: int, draws: random.Random | None) -> list[Message]:
    """The engine's legal commands of `seat`, in a frame of its own (as `_engine_view`)."""
    return m.engine.legal_commands(m.state, seat, limit=cap, rng=draws)


def _engine_next(m: MatchState, seats: Mapping[int, NextSeat]) -> list[NextAnswer]:
    """SubmitCommands' `next` answers of the `seats` asked (seat -> what it asks), those pending
    now, in a frame of its own: a loop in who is asked or in their clocks sets aside the legal
    commands of every seat in `seats` (`stuck_command`), the part of a `next` answer a clock is
    (as ListLegalCommands'), so the retry leaves them out and asks the engine nothing; a loop in a
    seat's view or legal commands sets aside that seat's (`_engine_view`, `_engine_legal`)."""
    pendings = m.engine.pending(m.state)
    answers: list[NextAnswer] = []
    told: set[int] = set()  # (`seats` stays whole: `stuck_command` reads it)
    for pending in pendings:
        seat = seats.get(pending.seat)
        if seat is None or pending.seat in told:
            continue
        told.add(pending.seat)
        cap = min(seat.legal_limit, MAX_LEGAL) if seat.legal_limit > 0 else MAX_LEGAL
        legal = _engine_legal(m, pending.seat, cap, None)
        view = _engine_view(m, pending.seat) if seat.view else None
        answers.append(NextAnswer(pending.seat, view, legal, _complete(legal, cap),
                                  _deadline_ms(m, pending.seat, pendings)))
    return answers


def _engine_viewed(m: MatchState, seat: int | None) -> tuple[Message, list[Pending], Any, str, int]:
    """All GetView asks the engine for `seat` (its view, who is asked, the result, the whole state
    of a match over, the seat's clock), in a frame of its own: a loop in any of them sets aside
    the seat's view as a loop in `view` does (`stuck_command`)."""
    view = _engine_view(m, seat)
    to_act = [] if m.cancelled else pending_for(m.engine, m.state, seat)
    # Once over, the whole state (hidden hands included), cancelled or played out.
    text = m.engine.render_state(m.state) if m.finished else ""
    return view, to_act, m.engine.result(m.state), text, _deadline_ms(m, seat, to_act)


def _engine_listed(m: MatchState, seat: int, cap: int, draws: random.Random | None
                   ) -> tuple[list[Message], list[str], int]:
    """All ListLegalCommands asks the engine (the commands, each as text, the seat's clock), in a
    frame of its own (as `_engine_viewed`): a loop in any of them sets aside the seat's legal commands."""
    commands = _engine_legal(m, seat, cap, draws)
    return commands, [m.engine.render_command(c) for c in commands], _deadline_ms(m, seat)


def _lasting(seconds: float) -> str:
    """A length of time as a player reads it: "6 h", "10 min", "45 s"; the unit picked once
    rounded (3599 s is "1 h", not "60 min")."""
    for unit, size in (("s", 1), ("min", 60)):
        told = round(seconds / size, 1)
        if told < 60:
            return f"{told:g} {unit}"
    return f"{round(seconds / 3600, 1):g} h"


def _check_submission(viewer: Viewer, command_id: str) -> None:
    if viewer.seat is None:
        raise Unauthenticated("no_token", "commands need `authorization: Bearer <seat token>`")
    if not command_id:
        raise InvalidArgument("no_command_id", "command_id (the idempotency key) is required")
    if len(command_id) > 128:
        raise InvalidArgument("bad_command_id", "command_id is at most 128 characters")
    if "\x00" in command_id:  # stored with its events: the read models (PostgreSQL text) cannot hold a NUL
        raise InvalidArgument("bad_command_id", "command_id may not contain a NUL character")
    if command_id == LEAVE_ID or command_id.startswith((RETURN_ID, AWAY_ID)):
        raise InvalidArgument("bad_command_id", f"command_id {command_id[:40]!r} is one the server names a seat "
                                                f"change by ({LEAVE_ID!r}, {RETURN_ID!r}..., {AWAY_ID!r}...)")


MAX_CREATION_REQUEST_ID = 256
"""A creation's request id is kept with its match (`famiglia.readmodels.tables`); its floor is
`famiglia.auth.request_ids.guessable`'s."""


def cancel_reason(reason: str) -> str:
    """A cancel's reason as stored, without the blanks around it: shown to every seat, so held to
    a chat message's checks (`famiglia.chat_text`); callers that build one (the tournament runner)
    check theirs by this very function."""
    reason = reason.strip()
    if not reason:
        raise InvalidArgument("no_reason", "a cancel needs a reason (it is shown to every seat)")
    if len(reason) > MAX_CANCEL_REASON or "\x00" in reason:
        raise InvalidArgument("bad_reason", f"reason is at most {MAX_CANCEL_REASON} characters, without NUL")
    why = unshowable(reason, "a cancel's reason (shown to every seat)")
    if why:  # as a chat message: a seat's screen shows it
        raise InvalidArgument("bad_reason", why)
    return reason


def _check_creation(seats: int, seat_info: Sequence[envelope_pb2.SeatInfo], tournament_id: str,
                    request_id: str, *, names: bool = True) -> None:
    """What a creation writes besides the game's own setup: within what the read models keep
    (`famiglia.readmodels.tables`), so the projection can always store the match; and display
    names every reader may be shown (`names`: not a rematch's, whose names its match stored)."""
    if len(request_id) > MAX_CREATION_REQUEST_ID:
        raise InvalidArgument("bad_request_id", f"request_id is at most {MAX_CREATION_REQUEST_ID} characters")
    if guessable(request_id):
        raise InvalidArgument("bad_request_id", guessable_message("every seat's token"))
    if len(tournament_id) > 100 or "\x00" in tournament_id:
        raise InvalidArgument("bad_tournament_id", "tournament_id is at most 100 characters, without NUL")
    seen = set()
    for info in seat_info:
        if not 0 <= info.seat < seats or info.seat in seen:
            raise InvalidArgument("bad_seat_info", f"seat_info names seat {info.seat} twice or outside 0-{seats - 1}")
        seen.add(info.seat)
        if len(info.player_id) > 128 or len(info.display_name) > 200 or len(info.policy) > 64:
            raise InvalidArgument("bad_seat_info", "seat_info: player_id is at most 128 characters, "
                                                   "display_name 200, policy 64")
        if "\x00" in info.player_id or "\x00" in info.display_name or "\x00" in info.policy:
            raise InvalidArgument("bad_seat_info", "seat_info: player_id, display_name and policy may not "
                                                   "contain a NUL character")
        # (anyone may create a match naming nobody, and the read models show its names to all)
        why = unshowable(info.display_name, f"seat {info.seat}'s display_name", lines=False) if names else ""
        if why:
            raise InvalidArgument("bad_seat_info", f"seat_info: {why}")
        if info.bot:  # refused now, not played as random with an error a decision in the bots' logs
            try:
                checked_spec(info.policy)
            except UnknownPolicy as exc:
                raise InvalidArgument("unknown_policy", f"seat_info: seat {info.seat}: {exc}") from None
            except BadPolicyParameter as exc:
                raise InvalidArgument("bad_policy_params", f"seat_info: seat {info.seat}: {exc}") from None


def _dear_bots(seat_info: Sequence[envelope_pb2.SeatInfo]) -> list[str]:
    """Each bot seat whose policy asks past the public budget, and what it asks past it."""
    return [f"seat {info.seat}: {', '.join(over)}" for info in seat_info if info.bot
            for over in [_over_budget(info.policy)] if over]


def _over_budget(policy: str) -> list[str]:
    """What a bot seat's policy asks past the public budget; [] for one `_check_creation` refuses."""
    try:
        return over_public_budget(checked_spec(policy))
    except (UnknownPolicy, BadPolicyParameter):
        return []


def _match_id(request_id: str) -> str:
    """Random, or derived from the creation request id so a retried create finds its match."""
    if request_id:
        return "m" + hashlib.sha256(f"create:{request_id}".encode()).hexdigest()[:19]
    return "m" + secrets.token_hex(10)[:19]


#: A command type's full name, and the end of a type URL naming it, per command type.
_COMMAND_NAMES: dict[type, tuple[str, str]] = {}


def parse_command(info: GameInfo, type_url: str, value: bytes) -> Message:
    """An Any's bytes as this game's Command, or INVALID_ARGUMENT."""
    assert info.command_type is not None
    names = _COMMAND_NAMES.get(info.command_type)
    if names is None:
        full_name = info.command_type.DESCRIPTOR.full_name
        names = _COMMAND_NAMES[info.command_type] = (full_name, "/" + full_name)
    expected, suffix = names
    if not type_url.endswith(suffix) and type_url != expected:
        raise InvalidArgument("wrong_command_type", f"this match takes {expected}, not {type_url or 'nothing'}")
    try:
        return info.command_type.FromString(value)
    except DecodeError as exc:
        raise InvalidArgument("undecodable_command", f"the command bytes do not parse: {exc}") from None


_DECIDE = CommandApp._decide.__code__
"""What `stuck_command` looks for on a stuck thread's stack."""
_NEXT = _engine_next.__code__
_ASKING = {_engine_view.__code__: "view", _engine_viewed.__code__: "view", _engine_legal.__code__: "legal",
           _engine_listed.__code__: "legal", _NEXT: "legal", _my_turn.__code__: "view"}
"""The same, for the engine's other answers a seat asks for, and what `asked_name` calls each."""
