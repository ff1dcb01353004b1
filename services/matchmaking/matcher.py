"""The matcher loop: expire, recover, propose, hold, claim, create, finalize — per game, per tick.

Any number of matcher processes may run at once. They may propose overlapping
tables; the claim script lets exactly one take each ticket, and CreateMatch's
request id (keyed from the proposal id, written down with the claim) makes creating
one table twice give one match. A matcher that dies between claim and finalize leaves
a claim behind, which any matcher finishes after `claim_retry_ms` with the same
request id, whatever secret it runs with.

Across games (other slots) the per-player holds (holds.py) keep a player at one
table: a proposal is claimed only while its matcher holds every one of its players,
and a table is created only once those holds name it.
"""

from __future__ import annotations

import itertools
import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from famiglia.auth.request_ids import private_request_id
from famiglia.grpcutil.errors import doubled_pause, store_away
from famiglia.matchmaking import GameShape, MatchPolicy, Proposal, form_matches, plan_seats
from famiglia.telemetry import get_logger, tracer
from famiglia.v1 import envelope_pb2

from .creator import CreateFailed, MatchCreator
from .holds import SEATED, Hold, HoldSeat, PlayerHolds
from .metrics import matchmaking_metrics
from .players import RedisPlayers
from .store import (
    CANCELLED,
    CLAIMED,
    DAY_MS,
    EXPIRED,
    MATCHED,
    PENDING,
    SEARCHING,
    UNANSWERED,
    RedisTicketStore,
    TicketRecord,
)

log = get_logger("famiglia.matchmaking")
Clock = Callable[[], int]
ANSWER_MARGIN_MS = 1000
"""After CreateMatch's deadline, its answer (or its failure) is still to be written down
(finalize, retry_later: a round trip) before the claim is anybody else's to retry."""


@dataclass(frozen=True)
class MatcherTuning:
    interval_s: float = 0.25
    """pause between ticks."""
    claim_retry_ms: int = 5000
    """a claim older than this is presumed abandoned (or failing) and retried."""
    max_attempts: int = 5
    """creation attempts at the claim retry's pace; a table still without an answer is then
    retried `max_attempts` times less often. It is never given up for want of an answer: a
    CreateMatch that failed in transit may have made the match, and only the same table's
    request id finds it (docs/matchmaking.md, "A creation without an answer")."""
    load_limit: int = 2000
    """oldest tickets of a game looked at per tick. With bot backfill off and more tickets than
    this that cannot match each other, newer ones wait until older ones match or expire."""
    leave_other_queues: bool = True
    """a matched player's open tickets in other games are cancelled at once (the holds would
    refuse them anyway when their game next tries to seat the player)."""
    away_pause_max_s: float = 5.0
    """the longest pause between passes while Redis is out of reach (the pause doubles from
    `interval_s` each pass that finds it away, and is `interval_s` again once one does not)."""
    hold_ms: int = 10_000
    """lifetime of a player's hold between taking it and claiming: how long a matcher that
    dies right there keeps its players out of other tables."""
    create_timeout_ms: int = 0
    """CreateMatch's deadline: bootstrap.py sets the gRPC creator's (`CREATE_TIMEOUT_S`). A claim is
    not retried while the CreateMatch its matcher asks may still be out: a call slower than
    `claim_retry_ms` was asked again by another replica, beside the one still running. The price:
    a matcher that dies after its claim has its table retried this long (and `ANSWER_MARGIN_MS`)
    after the claim, when that is more than `claim_retry_ms`. 0: no deadline known (a creator
    that answers at once, as the tests' do)."""


class Matcher:
    def __init__(self, *, store: RedisTicketStore, players: RedisPlayers, creator: MatchCreator,
                 games: Mapping[str, GameShape], policy: MatchPolicy, clock: Clock,
                 tuning: MatcherTuning | None = None, secret: str | None = None) -> None:
        self.store = store
        # Keys the tables' creation request ids (famiglia.auth.request_ids): every matcher of
        # a deployment shares it, so whichever retries a claimed table finds its match.
        self._secret = secret or secrets.token_hex(32)
        self.players = players
        self.creator = creator
        self.games = games
        self.policy = policy
        self.clock = clock
        self.tuning = tuning or MatcherTuning()
        self.holds = PlayerHolds(store.client, proposal_pending=store.proposal_pending, settle=self._settle,
                                 lease_ms=self.tuning.hold_ms, keep_ms=DAY_MS,
                                 seated_ms=int((policy.ticket_ttl + policy.invite_ttl) * 1000) + 60_000)
        self.metrics = matchmaking_metrics(store, games)
        """None when metrics are off."""
        t = self.tuning
        self._wait_ms = max(t.claim_retry_ms, t.create_timeout_ms + ANSWER_MARGIN_MS if t.create_timeout_ms else 0)
        """how long after a claim (or a taken retry) its retry is due: the claim retry, or later
        while the CreateMatch asked for it may still be out. The claims zset keeps the due time
        itself, so replicas on another `claim_retry_ms` (mid-rollout) wait for the same."""

    # -- the loop --------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Tick until `stop` is set; a failing tick is logged and the loop goes on.

        A tick that finds Redis out of reach ends the pass (every game's would fail alike) with
        one warning line, and the pause doubles while it stays away: a loop of error lines with
        their tracebacks, four games every 0.25 s, wrote megabytes a minute for as long as Redis
        was down."""
        away = 0
        while not stop.is_set():
            for game_id in self.games:  # one game's trouble does not stall the others
                try:
                    self.tick(game_id)
                except Exception as exc:  # noqa: BLE001 - Redis blips must not end the loop
                    if store_away(exc):
                        away += 1
                        log.warning("matcher_store_unavailable", game_id=game_id, passes=away, pause_s=self._pause(away),
                                    error=f"{type(exc).__name__}: {exc}"[:300])
                        break
                    log.exception("matcher_tick_failed", game_id=game_id)
            else:
                away = 0
            stop.wait(self._pause(away))

    def _pause(self, away: int) -> float:
        """Seconds to the next pass after `away` passes in a row found Redis out of reach."""
        if not away:
            return self.tuning.interval_s
        return doubled_pause(self.tuning.interval_s, away, self.tuning.away_pause_max_s)

    def run_once(self) -> int:
        """One pass over every game; the number of matches formed."""
        return sum(self.tick(game_id) for game_id in self.games)

    def tick(self, game_id: str) -> int:
        now = self.clock()
        for record in self.store.overdue_invites(game_id, now):
            self.store.close_ticket(record, EXPIRED, UNANSWERED, now,
                                    only_if_expired=True, from_states=(PENDING,))
        formed = self._recover(game_id, now)
        live = {}
        for record in self.store.queued(game_id, self.tuning.load_limit):
            if record.expires_ms <= now:
                self.store.close_ticket(record, EXPIRED, "ticket lifetime reached", now, only_if_expired=True)
            else:
                live[record.ticket_id] = record
        for proposal in form_matches([r.to_ticket() for r in live.values()], now, self.policy):
            plan = self.plan_table(proposal, live[proposal.tickets[0].ticket_id].options)
            due = self._claim(proposal, plan, live, now)
            if due is not None:
                formed += self._create(game_id, proposal.proposal_id, plan, due)
        return formed

    def _claim(self, proposal: Proposal, plan: dict[str, Any], live: Mapping[str, TicketRecord],
               now: int) -> int | None:
        """Hold every player, claim every ticket, then pin the holds to this table — or nothing (None).
        When the claim's retry is due (its score, which a failed CreateMatch moves only while it is this)."""
        game_id, proposal_id = proposal.game_id, proposal.proposal_id
        seats = [HoldSeat(p, t.ticket_id, live[t.ticket_id].asked_by(p)) for t in proposal.tickets for p in t.players]
        taken = self.holds.take(game_id, proposal_id, seats)
        if not taken.ok:
            if taken.stale and taken.refused_by is not None:  # seated elsewhere after queueing here
                self._leave(live[_ticket_of(seats, taken.player_id)], taken.refused_by, [taken.player_id], now)
            return None
        # Dated now, not by the pass's start: after a slow CreateMatch earlier in the pass, a claim
        # dated so is stale already, and another replica would ask for its table at once.
        claimed = self.clock()
        due = claimed + self._wait_ms
        if not self.store.claim(proposal, plan, claimed, due_ms=due):
            # Only the leases: a `table` hold naming this proposal is not ours (we pin after the
            # claim), but a claim retry's, pinning our leases for the very table that beat us.
            self.holds.give_back(seats, taken.lease)
            return None
        if not self.holds.commit(game_id, proposal_id, seats, taken.lease):  # a lease expired and went elsewhere
            log.warning("hold_lost", proposal_id=proposal_id, game_id=game_id)
            if self.store.release(game_id, proposal_id, _tickets(plan), requeue=True, reason="hold lost", now_ms=now,
                                  claim=plan.get("claim", "")):
                self.holds.free(game_id, proposal_id, seats, taken.lease)
            else:
                # Stalled past the leases: a retry gave this claim up and the same tickets were
                # claimed again (the same proposal id, so the same `table` holds): that claim's.
                self.holds.give_back(seats, taken.lease)
            return None
        return due

    def _leave(self, record: TicketRecord, seated: Hold, players: Sequence[str], now: int) -> None:
        """The ticket's player sits at another table: the ticket ends (unless already claimed).
        A party's other members learn who was seated in which game, not the match: its id is
        enough to spectate a table they were not asked to."""
        self.store.close_ticket(record, CANCELLED, _seated_reason(record, seated, players), now,
                                from_states=(SEARCHING, PENDING))

    def _settle(self, held: Hold) -> Hold | None:
        """A `table` hold whose proposal is gone: `seated` if the table was made, else nothing."""
        record = self.store.get(held.detail)
        if record is not None and record.state == MATCHED and record.proposal == held.ref:
            return Hold(SEATED, held.game_id, record.match_id, str(record.closed_ms))
        return None

    # -- one table -------------------------------------------------------------------
    def plan_table(self, proposal: Proposal, options: Mapping[str, str]) -> dict[str, Any]:
        """Everything needed to create and finish the table, stored with the claim: its creation's
        request id too, so that it is written down before CreateMatch goes out and every retry
        sends that very one, whichever matcher makes it and with whatever secret (a restart
        after a rotation derives another: the match a lost answer made would be made twice)."""
        names = self.players.names(proposal.players, touch=True)  # a table made with them: a use
        policy = self.policy.bot_policy
        seats = []
        for s in plan_seats(proposal):
            entry = s.to_json()
            entry["display_name"] = names.get(s.player_id, s.player_id) if not s.bot else f"Bot ({policy})"
            seats.append(entry)
        return {
            "proposal_id": proposal.proposal_id, "request_id": self._request_id(proposal.proposal_id),
            "game_id": proposal.game_id, "pool": proposal.pool, "seats": proposal.seats,
            "bots": proposal.bots, "bot_policy": policy, "options": self._deviations(proposal.game_id, options),
            "tickets": [[t.ticket_id, list(t.players)] for t in proposal.tickets], "seat_plan": seats,
            # this claim's own: the same tickets claimed again make the same proposal id
            "claim": secrets.token_hex(8),
        }

    def _request_id(self, proposal_id: str) -> str:
        """The table's creation request id, keyed with this matcher's secret (a plan claimed by a
        matcher from before the plans carried theirs has it derived again, so)."""
        return private_request_id(self._secret, f"mm:{proposal_id}")

    def _deviations(self, game_id: str, options: Mapping[str, str]) -> dict[str, str]:
        """Only the options that differ from the game's defaults go to CreateMatch: the pool is
        canonical either way, and the match records what was chosen, not every default."""
        defaults = self.games[game_id].option_defaults if game_id in self.games else {}
        return {k: v for k, v in sorted(options.items()) if defaults.get(k) != v}

    def _create(self, game_id: str, proposal_id: str, plan: dict[str, Any], due: int) -> int:
        """Ask CreateMatch for the claimed table and finish it; `due`: the claim's score as this
        matcher wrote it (claimed, or its retry taken)."""
        tickets = _tickets(plan)
        # Each bot seat is its own player (`bot:<policy>#<k>`, the table's k-th bot): under one
        # id the bots would be rated as one player at its best rank (a person second of four
        # behind one bot and ahead of two would rate as last).
        bot_ids = (f"bot:{plan['bot_policy']}#{k}" for k in itertools.count(1))
        seat_info = [envelope_pb2.SeatInfo(
            seat=s["seat"], player_id=s["player_id"] or next(bot_ids),
            display_name=s["display_name"], bot=s["bot"], policy=plan["bot_policy"] if s["bot"] else "")
            for s in plan["seat_plan"]]
        with structlog.contextvars.bound_contextvars(proposal_id=proposal_id, game_id=game_id), \
                tracer().start_as_current_span("matchmaking.create_match", attributes={"game_id": game_id}):
            try:
                created = self.creator.create_match(game_id, plan["seats"], options=plan["options"],
                                                    seat_info=seat_info,
                                                    request_id=plan.get("request_id") or self._request_id(proposal_id))
            except CreateFailed as exc:
                return self._failed(game_id, proposal_id, tickets, exc, plan.get("claim", ""), due)
            except Exception as exc:  # noqa: BLE001 - unforeseen: one attempt, not a failed tick
                log.exception("match_creation_broke", proposal_id=proposal_id)
                return self._failed(game_id, proposal_id, tickets,
                                    CreateFailed(f"{type(exc).__name__}: {exc}"[:300], permanent=False),
                                    plan.get("claim", ""), due)
            fields: dict[str, dict[str, str]] = {
                t: {"match_id": created.match_id, "seats": str(plan["seats"]), "bots": str(plan["bots"])}
                for t, _ in tickets}
            for s in plan["seat_plan"]:
                if not s["bot"]:
                    fields[s["ticket_id"]][f"seat:{s['player_id']}"] = str(s["seat"])
                    fields[s["ticket_id"]][f"token:{s['player_id']}"] = created.seat_tokens[s["seat"]]
            now = self.clock()
            claim = plan.get("claim", "")
            done = self.store.finalize(game_id, proposal_id, tickets, fields, now, claim=claim,
                                       pool=plan.get("pool", ""))
            log.info("match_formed", match_id=created.match_id, seats=plan["seats"], bots=plan["bots"],
                     tickets=[t for t, _players in tickets], players=[p for _t, ps in tickets for p in ps],
                     finalized=done)
            seats = _seats(plan)
            if not done:  # finished by another matcher meanwhile, given up, or claimed again
                made = self.store.get(tickets[0][0])
                if made is not None and made.state == MATCHED and made.proposal == proposal_id:
                    self.holds.seat(game_id, proposal_id, seats, made.match_id, made.closed_ms)
                elif made is not None and made.state == CLAIMED and made.proposal == proposal_id \
                        and made.claim != claim:
                    # The same table claimed again since (the same `table` holds): that claim's
                    # matcher asks CreateMatch with its own plan and finishes it (the same request
                    # id finds this very match, unless the secret changed in between).
                    log.warning("match_left_to_newer_claim", match_id=created.match_id)
                else:
                    self.holds.free(game_id, proposal_id, seats)
                return 0
            if self.metrics is not None:  # its tickets read again only then: their waits
                self.metrics.table_made(game_id, plan["bots"], [self.store.get(t) for t, _ in tickets], now)
            if self.tuning.leave_other_queues:  # while the holds still keep other games out
                self._leave_other_queues(game_id, created.match_id, [p for _, ps in tickets for p in ps])
            self.holds.seat(game_id, proposal_id, seats, created.match_id, now)
            return 1

    def _leave_other_queues(self, game_id: str, match_id: str, players: list[str]) -> None:
        others = [g for g in self.games if g != game_id]
        for record in self.store.open_tickets(players, others):
            if record.state in (SEARCHING, PENDING):
                self._leave(record, Hold(SEATED, game_id, match_id), players, self.clock())

    def _failed(self, game_id: str, proposal_id: str, tickets: list[tuple[str, tuple[str, ...]]],
                exc: CreateFailed, claim: str, due: int) -> int:
        now = self.clock()
        if exc.permanent:
            log.warning("match_refused", reason=exc.reason)
            if self.store.release(game_id, proposal_id, tickets, requeue=False, reason=exc.reason, now_ms=now,
                                  claim=claim):  # none: the same tickets claimed again, whose holds these are
                self.holds.free(game_id, proposal_id, _seats_of(tickets))
            return 0
        # No answer is not a no: the match may exist. The table keeps its claim, its tickets and
        # its holds, and the claim retry asks again with the same request id until CreateMatch
        # answers (a match, or a refusal). Requeued, the tickets would make another table (more
        # players, a bot, one of them cancelled) under another request id, and leave the first
        # match with seats nobody holds and its players seated twice.
        # Only while the claim's score is still the one this matcher wrote (`due`): stalled past its
        # deadline, it may find another replica's retry there, whose CreateMatch is out.
        slow = self.tuning.max_attempts
        attempts = self.store.retry_later(game_id, proposal_id, now + self.tuning.claim_retry_ms, claim=claim,
                                          slow_after=slow, delay_ms=(slow - 1) * self.tuning.claim_retry_ms,
                                          written_ms=due)
        log.warning("match_creation_failed", reason=exc.reason, attempts=attempts)
        return 0

    def _recover(self, game_id: str, now: int) -> int:
        """Finish tables whose claim's retry is due (same request id, same match)."""
        formed = 0
        for proposal_id in self.store.stale_claims(game_id, now):
            plan = self.store.plan(game_id, proposal_id)
            if plan is None:  # finished meanwhile by another matcher
                self.store.forget_claim(game_id, proposal_id)
                continue
            # Pushed back from the clock's now, not the pass's start, which a slow CreateMatch earlier
            # in the pass left behind, and past the deadline of the CreateMatch this retry asks:
            # another replica would find this claim stale while it is out.
            # Only the claim whose plan this is: the same tickets claimed again since the plan was
            # read (the same proposal id) are that claim's to retry, with its own plan.
            due = self.clock() + self._wait_ms
            if not self.store.take_retry(game_id, proposal_id, now, due, claim=plan.get("claim", "")):
                continue  # another replica asks now, or the plan is another claim's
            log.info("claim_recovered", proposal_id=proposal_id)
            if not self.holds.retake(game_id, proposal_id, self._asked_seats(plan)):  # its players went elsewhere
                log.warning("claim_hold_lost", proposal_id=proposal_id)
                self.store.release(game_id, proposal_id, _tickets(plan), requeue=True, reason="hold lost",
                                   now_ms=now, claim=plan.get("claim", ""))
                continue
            formed += self._create(game_id, proposal_id, plan, due)
        return formed

    def _asked_seats(self, plan: Mapping[str, Any]) -> list[HoldSeat]:
        """The claimed table's players with when each asked for it (0, as old as can be, when
        the ticket is gone): a claim retry must not seat anyone seated elsewhere since."""
        seats = []
        for ticket_id, players in _tickets(plan):
            record = self.store.get(ticket_id)
            seats += [HoldSeat(p, ticket_id, record.asked_by(p) if record is not None else 0) for p in players]
        return seats


def _tickets(plan: Mapping[str, Any]) -> list[tuple[str, tuple[str, ...]]]:
    return [(t, tuple(p)) for t, p in plan["tickets"]]


def _seats_of(tickets: list[tuple[str, tuple[str, ...]]]) -> list[HoldSeat]:
    return [HoldSeat(p, t) for t, players in tickets for p in players]


def _seats(plan: Mapping[str, Any]) -> list[HoldSeat]:
    return _seats_of(_tickets(plan))


def _seated_reason(record: TicketRecord, seated: Hold, players: Sequence[str]) -> str:
    if len(record.players) == 1:  # only the seated player sees it
        return f"matched in {seated.game_id} ({seated.ref})"
    members = [p for p in record.players if p in players]
    return f"matched in {seated.game_id}: {', '.join(members)} {'was' if len(members) == 1 else 'were'} seated there"


def _ticket_of(seats: list[HoldSeat], player_id: str) -> str:
    return next(s.ticket_id for s in seats if s.player_id == player_id)
