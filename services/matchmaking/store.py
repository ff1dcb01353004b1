"""Tickets, claims and proposals in Redis: the matchmaking service's only state.

Everything of one game lives under one hash tag, `{mm:<game>}`, so every script
below touches a single slot (one Redis or a cluster alike) and each state change is
one atomic EVALSHA (Redis 6.2: no functions):

    {mm:G}:queue                zset   ticket id -> created ms (searching tickets, oldest first)
    {mm:G}:pending              zset   ticket id -> answer deadline ms (party tickets awaiting invitees)
    {mm:G}:ticket:<ticket>      hash   the ticket; state pending|searching|claimed|matched|cancelled|expired|failed
    {mm:G}:open:<player>        string the player's open ticket in G (one per player per game; as long as its claim)
    {mm:G}:invites:<player>     set    party tickets the player was invited to (pruned when read)
    {mm:G}:req:<player>:<rid>   string CreateTicket idempotency: request id -> ticket id
    {mm:G}:claims               zset   proposal id -> when its retry is due, ms (the claim or last attempt and
                                       `claim_retry_ms`, later while its CreateMatch may be out): tables being
                                       created, stale once due (the same for every replica, whatever its own
                                       `claim_retry_ms`)
    {mm:G}:proposal:<proposal>  hash   the claimed table: plan json (its creation's request id too), attempts
    {mm:G}:wait:<pool>          string the pool's recent average wait, ms (estimates; a week after its last table)

A restarted matcher finds everything here; tickets and pointers carry TTLs so a
stack left alone cleans itself up. The per-player holds that keep a player at one
table across games are in holds.py (the player's own slot).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import redis
from redis.commands.core import Script

from famiglia.matchmaking import Proposal, Ticket
from famiglia.redis_clients import connect as connect_redis

PENDING, SEARCHING, CLAIMED, MATCHED = "pending", "searching", "claimed", "matched"
CANCELLED, EXPIRED, FAILED = "cancelled", "expired", "failed"
OPEN_STATES = frozenset({PENDING, SEARCHING, CLAIMED})
UNANSWERED = "the party invite was not answered in time"
"""the reason of a party ticket that expired waiting for its invitees."""
DAY_MS = 24 * 3600 * 1000
POINTER_MARGIN_MS = 60_000
WAIT_TTL_MS = 7 * DAY_MS
"""how long a pool's average wait outlives its last table: options without a list of choices
(timeouts, counts) make a pool per value, and a wait kept for good per pool ever matched grew
without end."""


def _lua(name: str) -> str:
    return resources.files(__package__).joinpath("lua", name).read_text(encoding="utf-8")


def game_of(ticket_id: str) -> str:
    """Ticket ids name their game (`<game>.<random>`), so a ticket is found from its id alone."""
    game, sep, _ = ticket_id.rpartition(".")
    return game if sep else ""


class Keys:
    def __init__(self, game_id: str) -> None:
        self.tag = "{mm:" + game_id + "}"
        self.queue = f"{self.tag}:queue"
        self.pending = f"{self.tag}:pending"
        self.claims = f"{self.tag}:claims"

    def ticket(self, ticket_id: str) -> str:
        return f"{self.tag}:ticket:{ticket_id}"

    def open(self, player_id: str) -> str:
        return f"{self.tag}:open:{player_id}"

    def invites(self, player_id: str) -> str:
        return f"{self.tag}:invites:{player_id}"

    def request(self, player_id: str, request_id: str) -> str:
        return f"{self.tag}:req:{player_id}:{request_id}"

    def proposal(self, proposal_id: str) -> str:
        return f"{self.tag}:proposal:{proposal_id}"

    def wait(self, pool: str) -> str:
        return f"{self.tag}:wait:{pool}"


@dataclass
class TicketRecord:
    """A ticket as stored: the matching fields plus its lifecycle and, once matched, its table."""

    ticket_id: str
    game_id: str
    pool: str
    owner: str
    players: tuple[str, ...]
    seat_counts: tuple[int, ...]
    options: dict[str, str]
    rating: float
    created_ms: int
    expires_ms: int
    state: str = SEARCHING
    asked_ms: int = 0
    """when the ticket was asked for; a party's `created_ms` restarts when it queues (0: the same)."""
    awaiting: tuple[str, ...] = ()
    """pending party tickets: the invitees who have not accepted yet."""
    reason: str = ""
    proposal: str = ""
    claim: str = ""
    """a claimed ticket: its claim's token (the plan's `claim`)."""
    closed_ms: int = 0
    match_id: str = ""
    seats: int = 0
    bots: int = 0
    seat_of: dict[str, int] = field(default_factory=dict)
    token_of: dict[str, str] = field(default_factory=dict)
    accepted_ms: dict[str, int] = field(default_factory=dict)
    """party tickets: when each invitee accepted, which is when their wish to play began."""

    def asked_by(self, player_id: str) -> int:
        """When this player asked to play at this ticket's table: the ticket's asking, or for an
        invitee its acceptance (a table it sat at in between is no reason to drop the ticket)."""
        return max(self.asked_ms or self.created_ms, self.accepted_ms.get(player_id, 0))

    def to_ticket(self) -> Ticket:
        return Ticket(self.ticket_id, self.game_id, self.pool, self.players, frozenset(self.seat_counts),
                      self.rating, self.created_ms)

    def to_fields(self) -> dict[str, str]:
        return {
            "id": self.ticket_id, "game": self.game_id, "pool": self.pool, "owner": self.owner,
            "players": json.dumps(list(self.players)), "counts": json.dumps(list(self.seat_counts)),
            "options": json.dumps(self.options, sort_keys=True), "rating": repr(self.rating),
            "created_ms": str(self.created_ms), "expires_ms": str(self.expires_ms), "state": self.state,
            "awaiting": json.dumps(list(self.awaiting)), "asked_ms": str(self.asked_ms or self.created_ms),
        }

    @classmethod
    def from_fields(cls, raw: dict[str, str]) -> TicketRecord:
        seat_of = {k[5:]: int(v) for k, v in raw.items() if k.startswith("seat:")}
        token_of = {k[6:]: v for k, v in raw.items() if k.startswith("token:")}
        accepted_ms = {k[9:]: int(v) for k, v in raw.items() if k.startswith("accepted:")}
        return cls(
            ticket_id=raw["id"], game_id=raw["game"], pool=raw["pool"], owner=raw.get("owner", ""),
            players=tuple(json.loads(raw["players"])), seat_counts=tuple(json.loads(raw["counts"])),
            options=json.loads(raw.get("options", "{}")), rating=float(raw["rating"]),
            created_ms=int(raw["created_ms"]), expires_ms=int(raw["expires_ms"]), state=raw["state"],
            asked_ms=int(raw.get("asked_ms") or raw["created_ms"]),
            awaiting=tuple(json.loads(raw.get("awaiting") or "[]")), reason=raw.get("reason", ""), proposal=raw.get("proposal", ""),
            claim=raw.get("claim", ""),
            closed_ms=int(float(raw.get("closed_ms", "0") or 0)), match_id=raw.get("match_id", ""),
            seats=int(raw.get("seats", "0") or 0), bots=int(raw.get("bots", "0") or 0),
            seat_of=seat_of, token_of=token_of, accepted_ms=accepted_ms,
        )


@dataclass(frozen=True)
class Created:
    ticket_id: str
    duplicate: bool


class PlayerBusy(Exception):
    """The player already has an open ticket in this game (creating one, or accepting an invite)."""

    def __init__(self, player_id: str, ticket_id: str) -> None:
        super().__init__(f"{player_id} already has ticket {ticket_id}")
        self.player_id = player_id
        self.ticket_id = ticket_id


class RedisTicketStore:
    def __init__(self, client: redis.Redis, *, retention_ms: int = 3600 * 1000) -> None:
        self.client = client
        self.retention_ms = retention_ms
        self._create: Script = client.register_script(_lua("create_ticket.lua"))
        self._claim: Script = client.register_script(_lua("claim.lua"))
        self._finalize: Script = client.register_script(_lua("finalize.lua"))
        self._release: Script = client.register_script(_lua("release.lua"))
        self._close: Script = client.register_script(_lua("close_ticket.lua"))
        self._accept: Script = client.register_script(_lua("accept_invite.lua"))
        self._retry_later: Script = client.register_script(_lua("retry_later.lua"))
        self._take_retry: Script = client.register_script(_lua("take_retry.lua"))
        self._forget_claim: Script = client.register_script(_lua("forget_claim.lua"))

    @classmethod
    def connect(cls, url: str, **kwargs: Any) -> RedisTicketStore:
        return cls(connect_redis(url, decode_responses=True), **kwargs)  # follows a failover

    def close(self) -> None:
        self.client.close()

    # -- tickets ---------------------------------------------------------------------
    def create(self, record: TicketRecord, request_id: str) -> Created:
        """Queue the ticket (or, with invitees awaiting, park it pending) atomically; a seen request
        id returns the first ticket; raises PlayerBusy if the creator has an open ticket here."""
        k = Keys(record.game_id)
        ttl = record.expires_ms - record.created_ms
        keys = [k.queue, k.pending, k.ticket(record.ticket_id), k.request(record.owner, request_id),
                k.open(record.owner), *(k.invites(p) for p in record.awaiting)]
        deadline = record.expires_ms if record.state == PENDING else ""
        args: list[Any] = [record.ticket_id, record.created_ms, ttl + self.retention_ms, ttl + POINTER_MARGIN_MS,
                           DAY_MS, deadline]
        for name, value in record.to_fields().items():
            args += [name, value]
        reply = self._create(keys=keys, args=args)
        status = reply[0]
        if status == "busy":
            raise PlayerBusy(record.owner, reply[1])
        return Created(reply[1], duplicate=status == "duplicate")

    def accept(self, record: TicketRecord, player_id: str, now_ms: int, lifetime_ms: int) -> str:
        """An invitee joins the pending ticket: 'accepted', 'queued' (the last one), or the state
        it is in when there was nothing to accept; raises PlayerBusy."""
        k = Keys(record.game_id)
        keys = [k.queue, k.pending, k.ticket(record.ticket_id), k.invites(player_id), k.open(player_id),
                *(k.open(p) for p in record.players)]
        args: list[Any] = [record.ticket_id, player_id, now_ms, max(0, record.expires_ms - now_ms) + POINTER_MARGIN_MS,
                           lifetime_ms, self.retention_ms, POINTER_MARGIN_MS]
        status, detail = self._accept(keys=keys, args=args)
        if status == "busy":
            raise PlayerBusy(player_id, detail)
        return str(detail) if status == "state" else str(status)

    def invited(self, player_id: str, game_ids: Sequence[str]) -> list[TicketRecord]:
        """The pending party tickets still awaiting this player, oldest first; answered or
        ended ones are dropped from the player's invites sets on the way."""
        pipe = self.client.pipeline(transaction=False)
        for g in game_ids:
            pipe.smembers(Keys(g).invites(player_id))
        out: list[TicketRecord] = []
        for g, ids in zip(game_ids, pipe.execute(), strict=True):
            gone = []
            for ticket_id in sorted(str(i) for i in ids):
                record = self.get(ticket_id)
                if record is not None and record.state == PENDING and player_id in record.awaiting:
                    out.append(record)
                else:
                    gone.append(ticket_id)
            if gone:
                self.client.srem(Keys(g).invites(player_id), *gone)
        return sorted(out, key=lambda r: (r.created_ms, r.ticket_id))

    def overdue_invites(self, game_id: str, now_ms: int, limit: int = 500) -> list[TicketRecord]:
        """Pending party tickets past their answer deadline (dangling entries are dropped)."""
        k = Keys(game_id)
        ids = [str(i) for i in self.client.zrangebyscore(k.pending, "-inf", now_ms, start=0, num=limit)]
        out, dangling = [], []
        for ticket_id in ids:
            record = self.get(ticket_id)
            if record is None or record.state != PENDING:
                dangling.append(ticket_id)
            else:
                out.append(record)
        if dangling:
            self.client.zrem(k.pending, *dangling)
        return out

    def get(self, ticket_id: str) -> TicketRecord | None:
        game = game_of(ticket_id)
        if not game:
            return None
        raw: dict[str, str] = self.client.hgetall(Keys(game).ticket(ticket_id))  # type: ignore[assignment]
        return TicketRecord.from_fields(raw) if raw else None

    def queued(self, game_id: str, limit: int = 2000) -> list[TicketRecord]:
        """The searching tickets of a game, oldest first (entries whose hash is gone are dropped)."""
        k = Keys(game_id)
        ids: list[str] = [str(i) for i in self.client.zrange(k.queue, 0, limit - 1)]
        if not ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        for ticket_id in ids:
            pipe.hgetall(k.ticket(ticket_id))
        out, dangling = [], []
        for ticket_id, raw in zip(ids, pipe.execute(), strict=True):
            if raw:
                out.append(TicketRecord.from_fields(raw))
            else:
                dangling.append(ticket_id)
        if dangling:
            self.client.zrem(k.queue, *dangling)
        return out

    def open_tickets(self, player_ids: Sequence[str], game_ids: Sequence[str]) -> list[TicketRecord]:
        """The open tickets these players hold in these games."""
        pipe = self.client.pipeline(transaction=False)
        for g in game_ids:
            for p in player_ids:
                pipe.get(Keys(g).open(p))
        ids = {str(t) for t in pipe.execute() if t}
        return [r for r in (self.get(t) for t in sorted(ids)) if r is not None]

    def queue_size(self, game_id: str) -> int:
        return int(self.client.zcard(Keys(game_id).queue))

    def queue_sizes(self, game_ids: Sequence[str]) -> list[int]:
        """`queue_size` of each game, in one round trip."""
        with self.client.pipeline(transaction=False) as pipe:
            for game_id in game_ids:
                pipe.zcard(Keys(game_id).queue)
            return [int(n) for n in pipe.execute()]

    def close_ticket(self, record: TicketRecord, state: str, reason: str, now_ms: int, *,
                     only_if_expired: bool = False, from_states: Sequence[str] = (SEARCHING,)) -> tuple[bool, str]:
        """End an open ticket (cancel, expire, fail) if it is in one of `from_states`;
        (done, the state it is in now)."""
        k = Keys(record.game_id)
        keys = [k.queue, k.pending, k.ticket(record.ticket_id), *(k.open(p) for p in record.players)]
        args: list[Any] = [record.ticket_id, state, reason, now_ms, self.retention_ms,
                           now_ms if only_if_expired else "", ",".join(from_states)]
        done, now_state = self._close(keys=keys, args=args)
        return bool(done), now_state

    # -- claims ----------------------------------------------------------------------
    def claim(self, proposal: Proposal, plan: dict[str, Any], now_ms: int, *, due_ms: int | None = None) -> bool:
        """All of the proposal's tickets, atomically, or none (False); their players' open-ticket
        pointers then live as long as the claim (a table may wait a day for CreateMatch). The
        plan's `claim` token marks this claim (`release` undoes only its own). Its retry is due at
        `due_ms` (`now_ms` when not given): the claim retry's wait, or the deadline of the
        CreateMatch its matcher is about to ask when that is later."""
        k = Keys(proposal.game_id)
        ids = [t.ticket_id for t in proposal.tickets]
        pointers = [(k.open(p), t.ticket_id) for t in proposal.tickets for p in t.players]
        keys = [k.queue, k.claims, k.proposal(proposal.proposal_id), *(k.ticket(i) for i in ids),
                *(key for key, _ in pointers)]
        args: list[Any] = [proposal.proposal_id, now_ms, json.dumps(plan), DAY_MS, len(ids), *ids,
                           *(tid for _, tid in pointers), now_ms if due_ms is None else due_ms,
                           plan.get("claim", "")]
        ok, _ = self._claim(keys=keys, args=args)
        return bool(ok)

    def proposal_pending(self, game_id: str, proposal_id: str) -> bool:
        """Is that table still claimed (neither finalized nor released)?"""
        return bool(self.client.exists(Keys(game_id).proposal(proposal_id)))

    def plan(self, game_id: str, proposal_id: str) -> dict[str, Any] | None:
        raw = self.client.hget(Keys(game_id).proposal(proposal_id), "plan")
        return json.loads(raw) if raw else None

    def stale_claims(self, game_id: str, now_ms: int) -> list[str]:
        """Claims whose retry is due by `now_ms`: their table was not finished (a crashed or failing matcher)."""
        return [str(p) for p in self.client.zrangebyscore(Keys(game_id).claims, "-inf", now_ms)]

    def forget_claim(self, game_id: str, proposal_id: str) -> None:
        """Drop a claim whose proposal is gone (finished elsewhere, or expired), in one script: the
        same table claimed again between a look and a removal kept no entry, and no retry."""
        k = Keys(game_id)
        self._forget_claim(keys=[k.proposal(proposal_id), k.claims], args=[proposal_id])

    def take_retry(self, game_id: str, proposal_id: str, now_ms: int, due_ms: int, *, claim: str) -> bool:
        """Whether this matcher retries the claim due by `now_ms` now: its next retry is pushed back
        to `due_ms` first (past the deadline of the CreateMatch it asks, when that is later than the
        claim retry), atomically, so the other replicas do not ask CreateMatch meanwhile. Only
        the claim with that token (the plan's `claim`, as the caller read it): the same tickets
        claimed again since are another claim, left to its own matcher (False)."""
        k = Keys(game_id)
        return bool(self._take_retry(keys=[k.proposal(proposal_id), k.claims],
                                     args=[proposal_id, now_ms, due_ms, claim]))

    def retry_later(self, game_id: str, proposal_id: str, due_ms: int, *, claim: str, slow_after: int = 0,
                    delay_ms: int = 0, written_ms: int | None = None) -> int:
        """Count a failed creation attempt and make the next retry due at `due_ms` (`delay_ms` later
        once `slow_after` attempts failed), only while the claim's score is still `written_ms`, the
        one the caller wrote (None: whatever it is): a caller stalled past its CreateMatch's deadline
        must not bring forward the retry another replica took since, whose call is out. The
        attempts so far, or 0 when the table is gone (another
        matcher finished it while this one's CreateMatch was still out): a count written then
        would make the proposal anew, without its expiry, and leave its players' holds waiting
        on it for good. 0 too when the proposal carries another claim token than `claim`."""
        k = Keys(game_id)
        return int(self._retry_later(keys=[k.proposal(proposal_id), k.claims],
                                     args=[proposal_id, due_ms, slow_after, delay_ms, claim,
                                           "" if written_ms is None else written_ms]))

    def finalize(self, game_id: str, proposal_id: str, tickets: Sequence[tuple[str, Sequence[str]]],
                 fields: dict[str, dict[str, str]], now_ms: int, *, claim: str, pool: str = "") -> int:
        """Mark the claimed tickets matched with their per-ticket `fields`; how many were. Their
        waits join their `pool`'s average (read from a ticket when not given: a plan from before
        the plans named it). Only the claim with that token (the plan's `claim`) is finished: the
        same tickets claimed again since (the same proposal id) are another claim, left alone (0)."""
        k = Keys(game_id)
        if not pool and tickets:
            first = self.get(tickets[0][0])
            pool = first.pool if first is not None else ""
        pointers = [(k.open(p), tid) for tid, players in tickets for p in players]
        keys = [k.claims, k.proposal(proposal_id), k.wait(pool), *(k.ticket(t) for t, _ in tickets),
                *(key for key, _ in pointers)]
        args: list[Any] = [proposal_id, now_ms, len(tickets), self.retention_ms, WAIT_TTL_MS,
                           *(json.dumps(fields[t]) for t, _ in tickets), *(tid for _, tid in pointers), claim]
        return int(self._finalize(keys=keys, args=args))

    def release(self, game_id: str, proposal_id: str, tickets: Sequence[tuple[str, Sequence[str]]],
                *, requeue: bool, reason: str, now_ms: int, claim: str) -> int:
        """Give up on a claimed table: tickets back to the queue (requeue) or failed; how many.
        Only the claim with that token (the plan's `claim`) is undone: the same tickets claimed
        again since (the same proposal id) are another claim, left alone (0)."""
        k = Keys(game_id)
        pointers = [(k.open(p), tid) for tid, players in tickets for p in players]
        keys = [k.queue, k.claims, k.proposal(proposal_id), *(k.ticket(t) for t, _ in tickets),
                *(key for key, _ in pointers)]
        args: list[Any] = [proposal_id, "requeue" if requeue else "failed", reason, now_ms, self.retention_ms,
                           len(tickets), POINTER_MARGIN_MS, *(t for t, _ in tickets), *(tid for _, tid in pointers),
                           claim]
        return int(self._release(keys=keys, args=args))

    def recent_wait(self, game_id: str, pool: str) -> float | None:
        """The pool's recent average wait in seconds (None before its first match): tickets of
        other options in the same game wait for other tables."""
        raw = self.client.get(Keys(game_id).wait(pool))
        return float(raw) / 1000.0 if raw else None
