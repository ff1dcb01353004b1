"""The matchmaking use cases, free of gRPC: players, tickets, party invites, watching, cancelling.

Methods take plain values and return plain values or raise an AppError with a
stable code; the gRPC entrypoint only translates. Matching itself runs in the
matcher loop (matcher.py), not in a request.
"""

from __future__ import annotations

import secrets
import time
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from famiglia.auth import InvalidToken, TokenSigner
from famiglia.auth.request_ids import guessable, guessable_message
from famiglia.chat_text import shows_nothing
from famiglia.grpcutil.errors import (
    AlreadyExists,
    AppError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)
from famiglia.matchmaking import (
    GameShape,
    InvalidRequest,
    MatchPolicy,
    RatingProvider,
    estimate_wait,
    normalize_request,
    party_rating,
)
from famiglia.matchmaking.ratings import Rating
from famiglia.telemetry import get_logger

from .players import Player, RedisPlayers
from .store import (
    CANCELLED,
    CLAIMED,
    EXPIRED,
    FAILED,
    MATCHED,
    PENDING,
    SEARCHING,
    UNANSWERED,
    PlayerBusy,
    RedisTicketStore,
    TicketRecord,
    game_of,
)

log = get_logger("famiglia.matchmaking")
Clock = Callable[[], int]
MAX_NAME = 32


def system_clock() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Profile:
    player: Player
    ratings: dict[str, Rating]


@dataclass(frozen=True)
class TicketStatus:
    """A ticket as one of its players sees it (the seat token is that player's own)."""

    ticket_id: str
    state: str
    game_id: str
    waited_s: float
    estimated_wait_s: float = 0.0
    match_id: str = ""
    seat_token: str = ""
    seat: int = -1
    seats: int = 0
    bots: int = 0
    reason: str = ""
    seat_counts: tuple[int, ...] = ()
    party: tuple[str, ...] = ()
    awaiting: tuple[str, ...] = ()
    """pending party tickets: the invitees who have not accepted yet."""
    answer_within_s: float = 0.0

    @property
    def open(self) -> bool:
        return self.state in (PENDING, SEARCHING, CLAIMED)


@dataclass(frozen=True)
class TicketCreated:
    ticket_id: str
    duplicate: bool
    status: TicketStatus


MAX_REQUEST_ID = 128
"""A guest's or a ticket's request id, kept in a Redis key for a day (a guest's floor is
`famiglia.auth.request_ids.guessable`'s)."""


def _ended(ticket_id: str, state: str) -> AppError:
    """The refusal of a call that found the ticket over: its end's code, or `unknown_ticket` once
    the record is gone (dropped after its retention, between the read and the script), as for an
    accept. One code per end from every call, each in docs/matchmaking.md's table."""
    if state == CANCELLED:
        return FailedPrecondition("ticket_cancelled", "the ticket was cancelled")
    if state == EXPIRED:
        return FailedPrecondition("ticket_expired", "the ticket expired")
    if state == FAILED:
        return FailedPrecondition("ticket_failed", "the ticket failed (a match it could not be given, "
                                                   "or a declined invite)")
    return NotFound("unknown_ticket", f"no ticket {ticket_id!r} (it ended)")


def _expired(player_id: str) -> AppError:
    """The refusal of a valid player token whose guest is gone: unused for longer than the guest
    TTL (FAMIGLIA_MM_GUEST_TTL_DAYS), its record dropped. The token names nobody any more, so it is
    an authentication failure a client answers by registering again, not a missing resource."""
    return Unauthenticated("player_expired", f"guest {player_id!r} expired (unused for too long); "
                                             "RegisterGuest again for a new player token")


@dataclass
class MatchmakingApp:
    store: RedisTicketStore
    players: RedisPlayers
    signer: TokenSigner
    games: Mapping[str, GameShape]
    ratings: RatingProvider
    policy: MatchPolicy = field(default_factory=MatchPolicy)
    clock: Clock = system_clock

    # -- players ---------------------------------------------------------------------
    def register_guest(self, display_name: str, request_id: str = "") -> tuple[Player, str]:
        """A new guest and its player token."""
        name = unicodedata.normalize("NFC", display_name).strip()
        # (printable, yet blank: the fillers and marks a name of nothing else passes for empty with)
        if not name or len(name) > MAX_NAME or not name.isprintable() or shows_nothing(name):
            raise InvalidArgument("bad_display_name", f"a display name is 1..{MAX_NAME} printable characters, "
                                                      "something visible among them")
        if len(request_id) > MAX_REQUEST_ID:
            raise InvalidArgument("bad_request_id", f"request_id is at most {MAX_REQUEST_ID} characters")
        if guessable(request_id):
            raise InvalidArgument("bad_request_id", guessable_message("the guest's token"))
        player = self.players.register_guest(name, self.clock(), request_id)
        if player.display_name != name:  # the request id made another guest: not this request's retry
            raise AlreadyExists("request_id_reused", "request_id was already used to register another "
                                                     "guest; use a new request_id for a new guest")
        log.info("guest_registered", player_id=player.player_id)
        return player, self.signer.player_token(player.player_id)

    def authenticate(self, token: str | None) -> str:
        """The player id of a player token, or UNAUTHENTICATED."""
        if not token:
            raise Unauthenticated("no_token", "this call needs `authorization: Bearer <player token>`")
        try:
            return self.signer.read_player(token)
        except InvalidToken as exc:
            raise Unauthenticated("bad_token", str(exc)) from None

    def profile(self, player_id: str, *, own: bool = False, strict: bool = True) -> Profile:
        """A player's profile; `own`: the caller's, asked with its token, a use that keeps the guest
        (its TTL refreshed in the same round trip). Its ratings are read `strict`: with the read
        models' database out of reach, UNAVAILABLE `store_unavailable` (retry), not the default
        ratings shown as the player's. Not `strict`: the default then (RegisterGuest's, whose
        guest is registered already and new: no rating to show but the default)."""
        player = self.players.get(player_id, touch=own)
        if player is None:
            if own:
                raise _expired(player_id)
            raise NotFound("unknown_player", f"no player {player_id!r}")
        return Profile(player, {g: self.ratings.ratings(g, [player_id], strict=strict)[player_id] for g in self.games})

    # -- tickets ---------------------------------------------------------------------
    def create_ticket(self, player_id: str, game_id: str, seat_counts: Sequence[int],
                      options: Mapping[str, str], party: Sequence[str] = (), request_id: str = "") -> TicketCreated:
        shape = self.games.get(game_id)
        if shape is None:
            raise InvalidArgument("unknown_game", f"no game {game_id!r}; ListGames tells which exist")
        if len(request_id) > MAX_REQUEST_ID:
            raise InvalidArgument("bad_request_id", f"request_id is at most {MAX_REQUEST_ID} characters")
        players = tuple(dict.fromkeys([player_id, *party]))
        invited = players[1:]
        if len(players) > shape.max_players:  # before looking thousands of made-up ids up in Redis
            raise InvalidArgument("party_too_big", f"a party of {len(players)} fits no {game_id} table "
                                  f"(at most {shape.max_players} seats)")
        missing = self.players.missing(players, touch=True)  # a use of each: their TTLs refreshed
        if player_id in missing:
            raise _expired(player_id)
        if missing:
            raise NotFound("unknown_player", f"not registered: {', '.join(missing)}")
        try:
            request = normalize_request(shape, seat_counts, options, len(players))
        except InvalidRequest as exc:
            raise InvalidArgument(exc.code, exc.message) from None
        now = self.clock()
        rating = party_rating(self.ratings.ratings(game_id, players), players)
        lifetime = self.policy.invite_ttl if invited else self.policy.ticket_ttl
        record = TicketRecord(
            ticket_id=f"{game_id}.{secrets.token_hex(10)}", game_id=game_id, pool=request.pool,
            owner=player_id, players=players, seat_counts=tuple(sorted(request.seat_counts)),
            options=request.options, rating=rating, created_ms=now, expires_ms=now + int(lifetime * 1000),
            state=PENDING if invited else SEARCHING, awaiting=invited,
        )
        try:
            created = self.store.create(record, request_id or secrets.token_hex(8))
        except PlayerBusy as exc:
            raise AlreadyExists("ticket_open", f"{exc.player_id} already has an open {game_id} ticket "
                                f"({exc.ticket_id}); cancel it first") from None
        if created.duplicate:
            self._check_same_ticket(created.ticket_id, record)
        log.info("ticket_created", ticket_id=created.ticket_id, game_id=game_id, player_id=player_id,
                 players=len(players), party=list(players[1:]), duplicate=created.duplicate)
        return TicketCreated(created.ticket_id, created.duplicate, self.ticket(player_id, created.ticket_id))

    def _check_same_ticket(self, ticket_id: str, asked: TicketRecord) -> None:
        """A retried CreateTicket gets its ticket; a request id reused for another request (other
        table sizes, options or party) is refused, as CreateMatch's is, rather than answered with a
        ticket for what the player no longer asks. (A ticket gone since answers as before.)"""
        first = self.store.get(ticket_id)
        if first is not None and (first.players, first.seat_counts, first.options) != \
                (asked.players, asked.seat_counts, asked.options):
            raise AlreadyExists("request_id_reused", "request_id was already used for a different ticket; "
                                                     "use a new request_id for a new ticket")

    def _record(self, player_id: str, ticket_id: str) -> TicketRecord:
        # A ticket id names its game (`<game>.<random>`) and so its key: an id of a game not served
        # here could name any `{mm:<x>}:ticket:<y>` key, a request id's string among them.
        record = self.store.get(ticket_id) if game_of(ticket_id) in self.games else None
        if record is None:
            raise NotFound("unknown_ticket", f"no ticket {ticket_id!r}")
        if player_id not in record.players:
            raise PermissionDenied("not_your_ticket", "this ticket belongs to other players")
        return record

    def ticket(self, player_id: str, ticket_id: str) -> TicketStatus:
        return self._status(self._record(player_id, ticket_id), player_id)

    def _status(self, record: TicketRecord, player_id: str) -> TicketStatus:
        now = self.clock()
        end = record.closed_ms if record.closed_ms else now
        waited = max(0.0, (end - record.created_ms) / 1000.0)
        estimate = answer_within = 0.0
        if record.state in (SEARCHING, CLAIMED):
            estimate = estimate_wait(self.policy, waited, self.store.recent_wait(record.game_id, record.pool))
        elif record.state == PENDING:
            answer_within = max(0.0, (record.expires_ms - now) / 1000.0)
        return TicketStatus(
            ticket_id=record.ticket_id, state=SEARCHING if record.state == CLAIMED else record.state,
            game_id=record.game_id, waited_s=waited, estimated_wait_s=estimate, match_id=record.match_id,
            seat_token=record.token_of.get(player_id, ""), seat=record.seat_of.get(player_id, -1),
            seats=record.seats, bots=record.bots, reason=record.reason,
            seat_counts=record.seat_counts, party=record.players,
            awaiting=record.awaiting if record.state == PENDING else (), answer_within_s=answer_within,
        )

    def cancel(self, player_id: str, ticket_id: str) -> TicketStatus:
        """Leave the queue. Races with the matcher are settled by one atomic script: either the
        ticket is cancelled, or it was already claimed for a table and the cancel is refused."""
        record = self._record(player_id, ticket_id)
        if record.state == CANCELLED:
            return self._status(record, player_id)
        done, state = self.store.close_ticket(record, CANCELLED, f"cancelled by {player_id}", self.clock(),
                                              from_states=(SEARCHING, PENDING))
        if not done and state != CANCELLED:
            if state == CLAIMED:  # written down: should its table not be made, it ends cancelled
                raise FailedPrecondition("ticket_matched", "a match is being made with this ticket: the ticket "
                                         "ends matched, or cancelled if that match cannot be made")
            if state == MATCHED:
                raise FailedPrecondition("ticket_matched", "a match was already found for this ticket")
            raise _ended(ticket_id, state)
        log.info("ticket_cancelled", ticket_id=ticket_id)
        return self.ticket(player_id, ticket_id)

    # -- party invites -----------------------------------------------------------------
    def invites(self, player_id: str, game_id: str = "") -> list[TicketStatus]:
        """Party tickets waiting for this player's answer."""
        if game_id and game_id not in self.games:
            raise InvalidArgument("unknown_game", f"no game {game_id!r}")
        games = [game_id] if game_id else sorted(self.games)
        return [self._status(r, player_id) for r in self.store.invited(player_id, games)]

    def _invitation(self, player_id: str, ticket_id: str) -> TicketRecord:
        record = self._record(player_id, ticket_id)
        if player_id == record.owner:
            raise PermissionDenied("not_invited", "the ticket's creator is not invited to it; CancelTicket ends it")
        return record

    def accept_invite(self, player_id: str, ticket_id: str) -> TicketStatus:
        """Join a party ticket. The invitee takes their one open ticket in the game now (refused
        while they hold another); the last acceptance puts the ticket in the queue."""
        record = self._invitation(player_id, ticket_id)
        try:
            outcome = self.store.accept(record, player_id, self.clock(), int(self.policy.ticket_ttl * 1000))
        except PlayerBusy as exc:
            raise AlreadyExists("ticket_open", f"{player_id} already has an open {record.game_id} ticket "
                                f"({exc.ticket_id}); cancel it first") from None
        if outcome == "missing":  # gone (expired and dropped) between the look-up and the accept
            raise NotFound("unknown_ticket", f"no ticket {ticket_id!r} (it expired)")
        if outcome not in ("accepted", "queued", PENDING, SEARCHING, CLAIMED, MATCHED):
            raise _ended(ticket_id, outcome)
        log.info("party_invite_accepted", ticket_id=ticket_id, queued=outcome == "queued")
        return self.ticket(player_id, ticket_id)

    def decline_invite(self, player_id: str, ticket_id: str) -> TicketStatus:
        """Refuse a party ticket: it fails for everyone, with who declined as the reason."""
        record = self._invitation(player_id, ticket_id)
        reason = f"{player_id} declined the party invite"
        if record.state == FAILED and record.reason == reason:
            return self._status(record, player_id)  # declining twice is fine
        now = self.clock()
        if record.state == PENDING and record.expires_ms <= now:  # too late, as for an accept: it expired
            done, state = self.store.close_ticket(record, EXPIRED, UNANSWERED, now, only_if_expired=True,
                                                  from_states=(PENDING,))
            if done or state == PENDING:  # past its deadline by this clock: expired, whoever ends it
                raise _ended(ticket_id, EXPIRED)
        else:
            done, state = self.store.close_ticket(record, FAILED, reason, now, from_states=(PENDING,))
        if not done:
            # Read as pending, then every invitee accepted (the last one just before the deadline)
            # or the ticket ended otherwise: the same codes either way.
            if state in (SEARCHING, CLAIMED, MATCHED):
                raise FailedPrecondition("invite_answered", "every invitee accepted already; CancelTicket "
                                         "leaves a searching ticket")
            raise _ended(ticket_id, state)
        log.info("party_invite_declined", ticket_id=ticket_id)
        return self.ticket(player_id, ticket_id)

    def watch(self, player_id: str, ticket_id: str, *, is_active: Callable[[], bool] = lambda: True,
              poll_s: float = 0.2, heartbeat_s: float = 2.0,
              sleep: Callable[[float], None] = time.sleep) -> Iterator[TicketStatus]:
        """The ticket now, then on every change (and a searching heartbeat with a fresh
        estimate every `heartbeat_s`), until it is no longer open or the client leaves."""
        last: TicketStatus | None = None
        last_sent = 0.0
        while True:
            status = self.ticket(player_id, ticket_id)
            changed = last is None or (status.state, status.match_id, status.awaiting) != \
                (last.state, last.match_id, last.awaiting)
            if changed or time.monotonic() - last_sent >= heartbeat_s:
                yield status
                last, last_sent = status, time.monotonic()
            if not status.open or not is_active():
                return
            sleep(poll_s)
