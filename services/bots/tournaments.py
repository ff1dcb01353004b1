"""Tournaments: a plan of bot matches, played through the command service like any
other matches, followed to the end and rated.

State lives in Redis (so the bots service may restart mid-tournament) under one
hash tag per tournament:

    famiglia:bots:{t:<id>}            hash: spec, status, created_ms, finished_ms, moves
    famiglia:bots:{t:<id>}:started    hash: plan index -> match id
    famiglia:bots:{t:<id>}:starting   hash: plan index -> creation request id, written before its
                                      CreateMatch and dropped as the match is recorded started
    famiglia:bots:{t:<id>}:results    hash: match id -> finished match (JSON)
    famiglia:bots:tournaments         sorted set of ids by creation time
    famiglia:bots:tournaments:ended   set of ids that ended (finished, cancelled) and whose end the
                                      read models have not recorded yet (the runner records them)
    famiglia:bots:tournaments:cancelling  set of cancelled ids whose matches in play the runner has
                                      not all cancelled yet (CancelMatch, a request id per match)
    famiglia:bots:tournaments:swept   set of ids whose records an operator's sweep deleted (`sweep`:
                                      ended N days ago, nothing in play, the read models hold them)

The runner creates matches with a request id keyed from "<tournament>:<index>" (a
restart finds the same match; nobody else can rebuild it), at most `concurrency` in play at once; the dispatcher
reports progress and results (MatchObserver), and the workers play the seats. The request id is
written down before CreateMatch (`starting`): a match whose creation answer was lost (the runner
killed, a deadline) is found again under that very id, to play it or, its tournament cancelled,
to cancel it.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
import redis

from famiglia.auth import TokenSigner
from famiglia.auth.request_ids import private_request_id
from famiglia.bots.standings import MatchRecord, SeatRecord
from famiglia.bots.tournament import PlannedMatch, TournamentSpec, plan, shown_name
from famiglia.client import GameClient
from famiglia.eventstore import EventStore
from famiglia.grpcutil.errors import doubled_pause, error_code, error_metadata, store_away
from famiglia.matchstate import MatchState
from famiglia.telemetry import extract_context, follows_from, get_logger
from famiglia.v1 import envelope_pb2

from .metrics import BotsMetrics

log = get_logger("famiglia.bots.tournaments")

RUNNING, FINISHED, CANCELLED = "running", "finished", "cancelled"
PREFIX = "famiglia:bots"
#: The running tournaments, by creation time: what the runner steps.
RUNNING_KEY = f"{PREFIX}:tournaments:running"
RUNNING_INDEXED = f"{PREFIX}:tournaments:running:indexed"
#: Tournaments that ended and whose end the read models have not recorded yet: the runner tells
#: the projection's tournament table of every end, also those it did not make (a cancel) or did
#: not live to tell (killed right after).
ENDED_KEY = f"{PREFIX}:tournaments:ended"
#: Cancelled tournaments whose matches in play the runner has yet to cancel in the command service:
#: kept until every one is, so a runner killed mid-way (or a second CancelTournament) finishes the job.
CANCELLING_KEY = f"{PREFIX}:tournaments:cancelling"
#: Tournaments an operator's sweep deleted (`TournamentRepo.drop`): their ids only, so that a
#: CreateTournament sent again with a swept one's request id is refused, not run anew.
SWEPT_KEY = f"{PREFIX}:tournaments:swept"
ALL_KEY = f"{PREFIX}:tournaments"

_DROP = """
-- KEYS: the tournament's hash, started, starting, results (one slot); ARGV: cutoff ms, dry run (1/0).
-- Deletes the tournament only if it ended (finished, cancelled) before the cutoff with nothing in
-- play: no creation outstanding, every started match with a result (a `failed:` one has none).
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 'gone' end
if status ~= 'finished' and status ~= 'cancelled' then return 'running' end
local finished = tonumber(redis.call('HGET', KEYS[1], 'finished_ms') or '0') or 0
if finished <= 0 or finished >= tonumber(ARGV[1]) then return 'recent' end
if redis.call('HLEN', KEYS[3]) > 0 then return 'in_play' end
for _, match in ipairs(redis.call('HVALS', KEYS[2])) do
  if string.sub(match, 1, 7) ~= 'failed:' and redis.call('HEXISTS', KEYS[4], match) == 0 then
    return 'in_play'
  end
end
if ARGV[2] == '1' then return 'sweepable' end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return 'swept'
"""

_RECORD = """
-- KEYS: the tournament's hash, its results (one slot); ARGV: match id, result (JSON).
-- A tournament whose records are gone (swept) gets none back: a late result would make a
-- results hash no sweep lists any more.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
return redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2])
"""

_ADD_MOVES = """
-- KEYS: the tournament's hash; ARGV: moves. Not for a tournament whose records are gone (swept):
-- HINCRBY would make a record of `moves` alone.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
return redis.call('HINCRBY', KEYS[1], 'moves', ARGV[1])
"""


def _ms() -> int:
    return int(time.time() * 1000)


def _carrier(stored: str | None) -> dict[str, str]:
    """A stored trace carrier; {} for none or one this version cannot read (a trace is worth
    nothing a runner should stop for)."""
    try:
        carrier = json.loads(stored) if stored else {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in carrier.items()} if isinstance(carrier, dict) else {}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class TournamentRecord:
    tournament_id: str
    spec: TournamentSpec
    status: str
    created_ms: int
    finished_ms: int = 0
    moves: int = 0
    started: dict[int, str] = field(default_factory=dict)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    starting: dict[int, str] = field(default_factory=dict)
    """Plan index -> the request id of a CreateMatch sent and not recorded in `started` (the
    match may exist). Never shown: a retried creation answers with every seat's token."""
    trace: dict[str, str] = field(default_factory=dict)
    """The trace context of the tournament's creation (its W3C traceparent and tracestate, never
    baggage): each match the runner starts is a trace of its own linked to it."""

    def unrecorded(self) -> list[int]:
        """The planned matches whose CreateMatch went out and whose match was not recorded (a
        walk of the few outstanding, not of every match started: the runner asks at each step)."""
        return sorted(i for i in self.starting if i not in self.started)

    def match_records(self) -> list[MatchRecord]:
        out = []
        for match_id, r in self.results.items():
            if r.get("abandoned"):
                continue
            out.append(MatchRecord(match_id, r["game_id"],
                                   tuple(SeatRecord(s["seat"], s["entrant"], s["rank"], s.get("score", 0.0))
                                         for s in r["seats"]),
                                   r.get("commands", 0), r.get("finished_ms", 0)))
        return out

    @property
    def total_moves(self) -> int:
        """The moves played: the counter, or where more, the sum of the finished matches' own
        counts (each result's `commands`, exact): the counter loses what a dispatcher killed
        before it wrote, and a match it folds anew after a restart adds nothing to it."""
        exact = sum(int(r.get("commands", 0)) for r in self.results.values())
        return max(self.moves, exact)

    @property
    def elapsed_seconds(self) -> float:
        end = self.finished_ms or _ms()
        return max(0.0, (end - self.created_ms) / 1000)


@dataclass(frozen=True)
class Ended:
    """A tournament a sweep looks at: it ended (or its record is gone, `status` "") before the cutoff."""

    tournament_id: str
    status: str
    finished_ms: int
    matches: int
    """its finished matches with a result: what its standings in the read models must count."""
    left: str = ""
    """why it stays in Redis ("" = it may go): `unrecorded` (the read models lack its end),
    `cancelling` (matches still to cancel), `in_play` (a match without a result)."""


class TournamentSwept(Exception):
    """A creation's request id names a tournament an operator's sweep deleted."""


class TournamentRepo:
    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._indexed = False
        self._drop = client.register_script(_DROP)
        self._record = client.register_script(_RECORD)
        self._add_moves = client.register_script(_ADD_MOVES)

    @staticmethod
    def _key(tid: str, part: str = "") -> str:
        return f"{PREFIX}:{{t:{tid}}}" + (f":{part}" if part else "")

    def create(self, spec: TournamentSpec, request_id: str = "", trace: Mapping[str, str] | None = None) -> str:
        tid = ("t" + hashlib.sha256(f"tournament:{request_id}".encode()).hexdigest()[:15] if request_id
               else "t" + secrets.token_hex(8)[:15])
        if request_id and self.client.sismember(SWEPT_KEY, tid):  # its records deleted: not made anew
            raise TournamentSwept(tid)
        now, key = _ms(), self._key(tid)
        # One MULTI, each field written only if absent: the first creation's fields stay, whoever
        # else sends the request id at the same time (or retries one cut short) reads them. (An
        # HSET after the spec's HSETNX let a concurrent retry's `created_ms` in first, then
        # overwrote it: the record and the indexes, scored by the retry's, named two moments.)
        pipe = self.client.pipeline(transaction=True)
        fields: list[tuple[str, str | int]] = [("spec", spec.to_json()), ("status", RUNNING), ("created_ms", now),
                                               ("moves", 0)]
        if trace:
            fields.append(("trace", json.dumps(dict(trace))))
        for name, value in fields:
            pipe.hsetnx(key, name, value)
        pipe.hmget(key, "status", "created_ms")
        status, created = pipe.execute()[-1]
        if request_id and self.client.sismember(SWEPT_KEY, tid):
            # Swept between the check above and this write (a sweep lists the id before it
            # deletes): what this write made is no tournament to run, its old one was swept.
            if _text(status) == RUNNING and int(_text(created)) == now:  # the write's own record
                self.client.delete(key)
            raise TournamentSwept(tid)
        created_ms = int(_text(created))
        self.client.zadd(ALL_KEY, {tid: created_ms}, nx=True)
        if _text(status) == RUNNING:  # one that ran to its end since is not put back in the running index
            self.client.zadd(RUNNING_KEY, {tid: created_ms}, nx=True)
        return tid

    def exists(self, tid: str) -> bool:
        return bool(self.client.exists(self._key(tid)))

    def status(self, tid: str) -> str:
        """The tournament's status as stored now ("" for none)."""
        return _text(self.client.hget(self._key(tid), "status") or b"")

    def get(self, tid: str, *, results: bool = True) -> TournamentRecord | None:
        """The tournament; with `results=False` only which matches have a result (their
        records left empty): what the runner needs four times a second, without
        parsing every finished match again."""
        pipe = self.client.pipeline(transaction=False)  # one slot, one round trip
        pipe.hgetall(self._key(tid))
        pipe.hgetall(self._key(tid, "started"))
        pipe.hgetall(self._key(tid, "starting"))
        if results:
            pipe.hgetall(self._key(tid, "results"))
        else:
            pipe.hkeys(self._key(tid, "results"))
        main, started_raw, starting_raw, results_raw = pipe.execute()
        raw = {_text(k): _text(v) for k, v in main.items()}
        if "spec" not in raw:
            return None
        started = {int(_text(k)): _text(v) for k, v in started_raw.items()}
        starting = {int(_text(k)): _text(v) for k, v in starting_raw.items()}
        done: dict[str, dict[str, Any]]
        if results:
            done = {_text(k): json.loads(v) for k, v in results_raw.items()}
        else:
            done = {_text(k): {} for k in results_raw}
        return TournamentRecord(tid, TournamentSpec.from_json(raw["spec"]), raw.get("status", RUNNING),
                                int(raw.get("created_ms", 0)), int(raw.get("finished_ms", 0)),
                                int(raw.get("moves", 0)), started, done, starting, _carrier(raw.get("trace")))

    def progress(self, tid: str, in_play: Collection[str]) -> TournamentRecord | None:
        """What a runner's step reads of a tournament it already read whole: its own fields, its
        creations outstanding (`starting`) and which of the matches `in_play` have a result —
        one round trip whose size follows the matches in play, not the tournament's. `started`
        is left empty and `results` holds only those of `in_play` (their records empty)."""
        ids = list(in_play)
        pipe = self.client.pipeline(transaction=False)  # one slot, one round trip
        pipe.hgetall(self._key(tid))
        pipe.hgetall(self._key(tid, "starting"))
        if ids:
            pipe.hmget(self._key(tid, "results"), ids)
        main, starting_raw, *found = pipe.execute()
        raw = {_text(k): _text(v) for k, v in main.items()}
        if "spec" not in raw:
            return None
        done: dict[str, dict[str, Any]] = {m: {} for m, r in zip(ids, found[0] if found else [], strict=True) if r is not None}
        starting = {int(_text(k)): _text(v) for k, v in starting_raw.items()}
        return TournamentRecord(tid, TournamentSpec.from_json(raw["spec"]), raw.get("status", RUNNING),
                                int(raw.get("created_ms", 0)), int(raw.get("finished_ms", 0)),
                                int(raw.get("moves", 0)), {}, done, starting, _carrier(raw.get("trace")))

    def ids(self, limit: int = 20, running_only: bool = False) -> list[str]:
        """The newest tournaments; with `running_only`, the oldest running ones (from their own
        index: among the newest of all, a running tournament older than `limit` finished ones
        would never be found, so never advanced)."""
        if running_only:
            self._index_running()
            ids = [_text(i) for i in self.client.zrange(RUNNING_KEY, 0, max(0, limit - 1))]
            if not ids:
                return []
            pipe = self.client.pipeline(transaction=False)  # one round trip, not one a tournament
            for tid in ids:
                pipe.hget(self._key(tid), "status")
            return [tid for tid, status in zip(ids, pipe.execute(), strict=True) if _text(status or b"") == RUNNING]
        return [_text(i) for i in self.client.zrevrange(f"{PREFIX}:tournaments", 0, max(0, limit - 1))]

    def _index_running(self) -> None:
        """Index the running tournaments once, for records written before the index was kept
        (an upgrade): a running tournament missing from it would never be stepped again."""
        if self._indexed or self.client.exists(RUNNING_INDEXED):
            self._indexed = True
            return
        indexed: list[tuple[bytes, float]] = self.client.zrange(  # type: ignore[assignment]
            f"{PREFIX}:tournaments", 0, -1, withscores=True)
        for tid, created in indexed:
            if _text(self.client.hget(self._key(_text(tid)), "status") or b"") == RUNNING:
                self.client.zadd(RUNNING_KEY, {_text(tid): created})
        self.client.set(RUNNING_INDEXED, "1")
        self._indexed = True

    def set_status(self, tid: str, status: str) -> None:
        if status == RUNNING:
            self.client.hset(self._key(tid), "status", status)
            created = self.client.hget(self._key(tid), "created_ms")
            self.client.zadd(RUNNING_KEY, {tid: int(created or _ms())})
        else:
            # Listed as ended (and as cancelling) first (other slots than the tournament's, so no
            # MULTI): a process killed in between leaves an entry the runner passes over while the
            # tournament runs.
            pipe = self.client.pipeline(transaction=False)
            pipe.sadd(ENDED_KEY, tid)
            if status == CANCELLED:
                pipe.sadd(CANCELLING_KEY, tid)
            pipe.hset(self._key(tid), mapping={"status": status, "finished_ms": _ms()})
            pipe.zrem(RUNNING_KEY, tid)
            pipe.execute()

    def ended(self, limit: int = 50) -> list[str]:
        """Tournaments that ended and whose end the read models have not recorded yet."""
        return sorted(_text(t) for t in self.client.srandmember(ENDED_KEY, limit) or [])

    def end_recorded(self, tid: str) -> None:
        self.client.srem(ENDED_KEY, tid)

    def cancel_matches_of(self, tid: str) -> None:
        """List a cancelled tournament for the runner to cancel its matches in play (again: a
        second CancelTournament finishes what a runner killed mid-way left, and ends the matches
        of a tournament cancelled before cancels reached them)."""
        self.client.sadd(CANCELLING_KEY, tid)

    def cancelling(self, limit: int = 50) -> list[str]:
        """Cancelled tournaments whose matches in play are not all cancelled yet."""
        return sorted(_text(t) for t in self.client.srandmember(CANCELLING_KEY, limit) or [])

    def matches_cancelled(self, tid: str) -> None:
        self.client.srem(CANCELLING_KEY, tid)

    def claim_starting(self, tid: str, index: int, request_id: str) -> tuple[str, str | None]:
        """Write down a planned match's creation request id before its CreateMatch goes out, so
        that a match whose answer was lost can be found again under the same id (idempotent in
        the command service), whatever the secret of the runner that looks. The first runner's id
        stays: answers (the request id to send, the match already recorded started or None), so
        two runners at once (a rolling deploy that rotates the secret) create one match, not two."""
        starting, started = self._key(tid, "starting"), self._key(tid, "started")
        pipe = self.client.pipeline(transaction=True)
        pipe.hget(started, str(index))
        pipe.hsetnx(starting, str(index), request_id)
        pipe.hget(starting, str(index))
        match_id, wrote, written = pipe.execute()
        if match_id is not None:
            if wrote:  # recorded started meanwhile: no creation outstanding
                self.client.hdel(starting, str(index))
            return request_id, _text(match_id)
        return _text(written), None

    def mark_started(self, tid: str, index: int, match_id: str) -> None:
        """The planned match's match (or `failed:…`), and its creation no longer outstanding: one
        MULTI (both keys in the tournament's slot)."""
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(self._key(tid, "started"), str(index), match_id)
        pipe.hdel(self._key(tid, "starting"), str(index))
        pipe.execute()

    def still_since(self, tid: str, match_id: str, version: int) -> int | None:
        """When (ms since the epoch) a runner first saw the match at `version`, as `mark_still`
        wrote it down; None when nothing is written down for that version (or it expired)."""
        raw = self.client.get(self._key(tid, f"still:{match_id}"))
        seen, _, since = _text(raw).partition(":") if raw is not None else ("", "", "")
        return int(since) if seen == str(version) and since.isdigit() else None

    def mark_still(self, tid: str, match_id: str, version: int, since_ms: int, ttl_s: float) -> None:
        """Write down (again) since when the match has been at `version`, for `ttl_s`: the
        stuck-match check outlives a runner's restart, not an outage of every runner longer
        than that."""
        self.client.set(self._key(tid, f"still:{match_id}"), f"{version}:{since_ms}",
                        px=max(1, int(ttl_s * 1000)))

    def add_moves(self, tid: str, moves: int) -> None:
        """Count a tournament's moves; nothing once its records are gone (swept)."""
        self._add_moves(keys=[self._key(tid)], args=[moves])

    def record(self, tid: str, match_id: str, result: dict[str, Any]) -> bool:
        """A match's outcome, once: a match abandoned as stuck that finishes after all stays
        abandoned (the runner has filled its place), and a result is never overwritten by a
        late abandonment, so the standings do not depend on which came first or on restarts.
        Nothing is written once the tournament's records are gone (swept): a match abandoned as
        stuck may end days later, reported by a dispatcher that still takes it for ours."""
        return bool(self._record(keys=[self._key(tid), self._key(tid, "results")],
                                 args=[match_id, json.dumps(result, sort_keys=True)]))

    # -- the operator's sweep (famiglia tournament sweep) ------------------------------------
    def ended_before(self, cutoff_ms: int) -> list[Ended]:
        """The tournaments that ended (finished or cancelled) before `cutoff_ms`, oldest created
        first, each with why it must stay if it must; also the index's entries whose record is
        gone (a sweep cut short between the delete and the index), for `drop` to finish. Only
        tournaments created before the cutoff can have ended before it."""
        ids = [_text(t) for t in self.client.zrangebyscore(ALL_KEY, "-inf", f"({cutoff_ms}")]
        out = []
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            pipe = self.client.pipeline(transaction=False)
            for tid in chunk:
                pipe.hmget(self._key(tid), "status", "finished_ms")
                pipe.sismember(ENDED_KEY, tid)
                pipe.sismember(CANCELLING_KEY, tid)
            replies = pipe.execute()
            for i, tid in enumerate(chunk):
                (status, finished), unrecorded, cancelling = replies[3 * i:3 * i + 3]
                if status is None:
                    out.append(Ended(tid, "", 0, 0))
                    continue
                finished_ms = int(_text(finished or b"0"))
                if _text(status) not in (FINISHED, CANCELLED) or not 0 < finished_ms < cutoff_ms:
                    continue
                record = self.get(tid)
                if record is None:  # deleted meanwhile
                    continue
                in_play = bool(record.unrecorded()) or any(
                    m not in record.results for m in record.started.values() if not m.startswith("failed:"))
                left = ("unrecorded" if unrecorded else "cancelling" if cancelling
                        else "in_play" if in_play else "")
                out.append(Ended(tid, record.status, finished_ms, len(record.match_records()), left))
        return out

    def sweep(self, cutoff_ms: int, held: Callable[[Ended], bool], *, dry_run: bool = False,
              on_outcome: Callable[[Ended, str], None] | None = None) -> list[tuple[Ended, str]]:
        """Delete the records of the tournaments that ended before `cutoff_ms`, nothing in play,
        whose standings the read models hold (`held`: asked of each, never of one that must stay).
        Each tournament looked at and what became of it: `swept` (`sweepable` in a dry run), `gone`
        (an earlier sweep's, finished now), or why it stays (`Ended.left`, `not_in_read_models`, or
        the delete's own check), each told to `on_outcome` as it is known: a sweep stopped midway
        (raised) has said what it deleted, which no later sweep lists. Run again, it deletes
        nothing twice."""
        out = []
        for ended in self.ended_before(cutoff_ms):
            if ended.left:
                outcome = ended.left
            elif ended.status and not held(ended):
                outcome = "not_in_read_models"
            else:
                outcome = self.drop(ended.tournament_id, cutoff_ms, dry_run=dry_run)
            out.append((ended, outcome))
            if on_outcome is not None:
                on_outcome(ended, outcome)
        return out

    def drop(self, tid: str, cutoff_ms: int, *, dry_run: bool = False) -> str:
        """Delete a tournament that ended before `cutoff_ms` with nothing in play, checked again in
        the script that deletes it (`swept`; `sweepable` for a dry run), else why not (`running`,
        `recent`, `in_play`); `gone` once its records are (a sweep run again). Into the swept set
        before the delete (another slot than the tournament's: no MULTI), so that no moment has
        the records gone and the request id free, not even for a sweep killed in between
        (`create` looks after its write too); out again if it stays. Then out of the index: a
        sweep cut short is finished by the next."""
        keys = [self._key(tid), self._key(tid, "started"), self._key(tid, "starting"), self._key(tid, "results")]
        if dry_run:
            return _text(self._drop(keys=keys, args=[cutoff_ms, 1]))
        self.client.sadd(SWEPT_KEY, tid)
        outcome = _text(self._drop(keys=keys, args=[cutoff_ms, 0]))
        if outcome not in ("swept", "gone"):
            self.client.srem(SWEPT_KEY, tid)
            return outcome
        pipe = self.client.pipeline(transaction=False)  # other slots than the tournament's
        pipe.zrem(ALL_KEY, tid)
        pipe.zrem(RUNNING_KEY, tid)
        pipe.execute()
        return outcome


def finished_record(match: MatchState) -> dict[str, Any]:
    """A match's entry in its tournament's results: its seats' ranks, or, for a match an
    operator cancelled (no result), an abandoned one, which the standings pass over."""
    if match.cancelled is not None:
        return {"abandoned": True, "game_id": match.game_id, "error": f"cancelled: {match.cancelled.reason}"[:300]}
    result = match.result()
    assert result is not None
    entrants = {i.seat: (i.player_id or i.policy or "random") for i in match.created.seat_info}
    return {
        "game_id": match.game_id,
        "seats": [{"seat": s.seat, "entrant": entrants.get(s.seat, f"seat{s.seat}"), "rank": s.rank,
                   "score": s.score} for s in sorted(result.seats, key=lambda s: s.seat)],
        "commands": len(match.commands),
        "finished_ms": match.last_timestamp_ms or _ms(),
    }


KNOWN_TOURNAMENTS = 1024
"""Tournaments the observer (is it ours?) and the read-model log (recorded?) remember: far more
than ever run at once, and the processes run for days, through tournament after tournament. A
forgotten one costs one more question (`exists`, an idempotent `record_tournament`)."""


class TournamentObserver:
    """The dispatcher's MatchObserver: moves and results into the repo.

    Moves are counted in memory and written at most every `flush_seconds` (and
    before any result), not once per command: a tournament's move count is a
    progress figure, and a Redis round trip per move was a noticeable share of the
    dispatcher's time. The counter is a progress figure; a finished tournament's total
    is exact all the same (`TournamentRecord.total_moves`: its matches' results carry
    their counts)."""

    def __init__(self, repo: TournamentRepo, *, flush_seconds: float = 0.5,
                 now: Callable[[], float] = time.monotonic,
                 on_finished: Callable[[], None] | None = None, metrics: BotsMetrics | None = None) -> None:
        self.repo = repo
        self.metrics = metrics
        """Counts the tournament matches finished and cancelled (None: metrics off)."""
        self.flush_seconds = flush_seconds
        self.now = now
        self.on_finished = on_finished
        """Called after a tournament match's result is recorded (the runner's wake-up)."""
        self._known: dict[str, bool] = {}
        self._moves: dict[str, int] = {}
        self._flushed_at = now()

    def _ours(self, tid: str) -> bool:
        known = self._known.get(tid)
        if known is None:
            if len(self._known) >= KNOWN_TOURNAMENTS:
                self._known.clear()
            known = self._known[tid] = self.repo.exists(tid)
        return known

    def match_progress(self, tournament_id: str, match_id: str, commands: int) -> None:
        if self._ours(tournament_id):
            self._moves[tournament_id] = self._moves.get(tournament_id, 0) + commands
            if self.now() - self._flushed_at >= self.flush_seconds:
                self.flush()

    def match_finished(self, tournament_id: str, match: MatchState) -> None:
        if self._ours(tournament_id):
            self.flush()
            self.repo.record(tournament_id, match.match_id, finished_record(match))
            if self.metrics is not None:
                if match.cancelled is not None:
                    self.metrics.tournament_match_abandoned(match.game_id, "cancelled")
                else:
                    self.metrics.tournament_match_finished(match.game_id)
            if self.on_finished is not None:
                self.on_finished()

    def flush(self) -> None:
        """Write the moves counted since the last flush."""
        moves, self._moves = self._moves, {}
        self._flushed_at = self.now()
        try:
            for tid, count in moves.items():
                self.repo.add_moves(tid, count)
                moves[tid] = 0
        except Exception:
            for tid, count in moves.items():  # Redis away: keep what was not written
                self._moves[tid] = self._moves.get(tid, 0) + count
            raise


class ReadModelLog:
    """Tells the projection's tournament table (famiglia.readmodels.tournaments) when a
    tournament starts and ends; the projection derives its standings from the matches.

    Best effort: the SQL database belongs to the projection and may not exist yet,
    and the tournament plays on without it.
    """

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self._engine: Any = None
        self._recorded: set[tuple[str, str]] = set()

    def record(self, record: TournamentRecord, status: str) -> bool:
        """Whether the read models have it (or there are none). A failed RUNNING record is not
        tried again by this process (the tournament plays on without it); an end is, by the
        runner, until it is recorded (`TournamentRepo.ended`)."""
        key = (record.tournament_id, status)
        if not self.database_url or key in self._recorded:
            return True
        recorded = False
        try:
            from famiglia.readmodels.db import make_engine, write_session
            from famiglia.readmodels.tournaments import record_tournament

            if self._engine is None:
                self._engine = make_engine(self.database_url)
            with write_session(self._engine) as session:
                record_tournament(session, record.tournament_id, name=record.spec.name,
                                  games=[g.game_id for g in record.spec.games],
                                  config=json.loads(record.spec.to_json()),
                                  status=_READ_MODEL_STATUS.get(status, "finished"))
            recorded = True
        except Exception as exc:  # noqa: BLE001 - no read model yet: the tournament does not need it
            log.info("tournament_read_model_skipped", tournament_id=record.tournament_id, reason=repr(exc)[:200])
        if recorded or status == RUNNING:
            if len(self._recorded) >= KNOWN_TOURNAMENTS:
                self._recorded.clear()
            self._recorded.add(key)
        return recorded


_READ_MODEL_STATUS = {RUNNING: "running", FINISHED: "finished", CANCELLED: "cancelled"}


_PASSING_CODES = frozenset({grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INTERNAL, grpc.StatusCode.ABORTED,
                            grpc.StatusCode.UNAUTHENTICATED})
"""CreateMatch refusals that may pass (a service at its limits, its Redis away for a moment; its
operator token refused mid-rotation, a replica not yet restarted with the secret this runner
signs with, docs/operations.md): a planned match is abandoned for one only once it kept failing
for `stuck_seconds`."""


#: The longest pause between steps that keep failing: the pause doubles from a second with
#: each step in a row that fails (a traceback every 1.25 s wrote ~1 MB in the five minutes
#: Redis was away).
MAX_FAILING_PAUSE = 8.0


def _pause_after(failures: int) -> float:
    """Seconds to wait after the `failures`-th failing step in a row."""
    return doubled_pause(1.0, failures - 1, MAX_FAILING_PAUSE)


_OUT_OF_REACH = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
"""The command service's answers that say it is out of reach for now: raised, so the step is
tried again, never taken as a refusal of the match."""


def _away(exc: BaseException) -> bool:
    """A step that failed because Redis or the command service is out of reach (for now)."""
    if isinstance(exc, grpc.RpcError) and callable(getattr(exc, "code", None)):
        return exc.code() in _OUT_OF_REACH
    return store_away(exc)


class NotRunning(Exception):
    """The tournament ended (cancelled) while the runner was starting one of its matches."""


RESYNC_SECONDS = 60.0
"""How often the runner reads a running tournament whole again (`TournamentRepo.get`), besides at
its first step and after a step that failed: between, it follows the tournament from what it
did and what its matches in play became (`TournamentRepo.progress`), which misses only what
another runner did out of its sight (a rolling deploy's other replica)."""


@dataclass
class _Progress:
    """What the runner knows of a running tournament between whole reads: a step costs the
    matches in play (their results, an HMGET), not the tournament's size (every started match
    and result, and a walk of the whole plan, four times a second)."""

    record: TournamentRecord
    """As last read whole, and since then what this runner started and saw end (`results`: keys only)."""
    next_index: int
    """Every planned match before it is started."""
    in_play: dict[str, int]
    """Match id -> plan index of each started match without a result."""
    read_at: float

    @classmethod
    def of(cls, record: TournamentRecord, read_at: float) -> _Progress:
        in_play = {m: i for i, m in record.started.items() if m not in record.results and not m.startswith("failed:")}
        progress = cls(record, 0, in_play, read_at)
        progress.skip_started()
        return progress

    def skip_started(self) -> None:
        """Move `next_index` past the planned matches started (each passed once: amortized)."""
        while self.next_index in self.record.started:
            self.next_index += 1

    def started(self, index: int, match_id: str) -> None:
        self.record.started[index] = match_id
        if match_id not in self.record.results and not match_id.startswith("failed:"):
            self.in_play[match_id] = index
        self.skip_started()

    def follow(self, fresh: TournamentRecord) -> None:
        """Take a step's read (`TournamentRepo.progress`): the tournament's fields and creations
        outstanding as stored now, and the matches in play that have a result since."""
        record = self.record
        record.status, record.created_ms, record.finished_ms = fresh.status, fresh.created_ms, fresh.finished_ms
        record.moves, record.starting = fresh.moves, fresh.starting
        for match_id in fresh.results:
            record.results.setdefault(match_id, {})
            self.in_play.pop(match_id, None)


class TournamentRunner:
    """Starts each tournament's matches as room frees up and closes finished tournaments."""

    def __init__(self, repo: TournamentRepo, game: GameClient, store: EventStore, *,
                 stuck_seconds: float = 180.0, read_model: ReadModelLog | None = None,
                 secret: str | None = None, accepted_secret: str = "", record_ends_every: float = 5.0,
                 resync_seconds: float = RESYNC_SECONDS, metrics: BotsMetrics | None = None) -> None:
        self.repo = repo
        self.metrics = metrics
        """Counts the tournament matches started and abandoned (None: metrics off)."""
        self.resync_seconds = resync_seconds
        self._progress: dict[str, _Progress] = {}
        """Tournament -> what this runner knows of it (`_Progress`), dropped when it stops running."""
        # Keys the matches' creation request ids (famiglia.auth.request_ids): a tournament's
        # id and a match's index are public, its seat tokens are not.
        self._secret = secret or secrets.token_hex(32)
        # Its operator tokens are signed with a rollover's accepted secret too: a command service
        # takes them by its own secret alone, the old or the new during a roll (famiglia.auth.tokens).
        self._signer = TokenSigner(self._secret, [accepted_secret] if accepted_secret else [])
        self.game = game
        self.store = store
        self.stuck_seconds = stuck_seconds
        self._creating_since: dict[tuple[str, int], float] = {}
        """(tournament, planned match) -> when its CreateMatch first failed with a code that may pass."""
        self.read_model = read_model
        self.record_ends_every = record_ends_every
        """How often the ends the read models lack are recorded (again, if the database was away)."""
        self._ends_recorded_at: float | None = None
        self._plans: dict[str, list[PlannedMatch]] = {}
        self._seen: dict[tuple[str, str], tuple[int, float, float]] = {}
        """(tournament, match id) -> (version, when it was first seen there, when it was last read);
        a finished match's entry stays until its tournament ends (`_forget`)"""
        self.wake = threading.Event()
        """Set when a match ends, so its seat at the table is filled at once, not at the next tick."""

    def plan_of(self, record: TournamentRecord) -> list[PlannedMatch]:
        if record.tournament_id not in self._plans:
            self._plans[record.tournament_id] = plan(record.spec)
        return self._plans[record.tournament_id]

    def step(self) -> None:
        # Cancels first: a CreateMatch refused for a while (RESOURCE_EXHAUSTED ends the step for up
        # to `stuck_seconds`) must not hold up the cancel an operator may be making to free the room.
        self._cancel_cancelled()
        running = set()
        for tid in self.repo.ids(limit=50, running_only=True):
            progress = self._read(tid)
            if progress is not None and progress.record.status == RUNNING:
                running.add(tid)
                try:
                    self._advance(progress)
                except BaseException:
                    self._progress.pop(tid, None)  # read whole again at the next step: what was written is unsure
                    raise
        if len(self._plans) > len(running) or len(self._progress) > len(running):
            self._forget((set(self._plans) | set(self._progress)) - running)
        now = time.monotonic()
        if self.read_model is not None and (self._ends_recorded_at is None
                                            or now - self._ends_recorded_at >= self.record_ends_every):
            self._ends_recorded_at = now
            self._record_ends()

    def _read(self, tid: str) -> _Progress | None:
        """The tournament as a step needs it: read whole at first sight, after a failed step and
        every `resync_seconds`, else only what changed (`TournamentRepo.progress`)."""
        now = time.monotonic()
        progress = self._progress.get(tid)
        if progress is not None and now - progress.read_at < self.resync_seconds:
            fresh = self.repo.progress(tid, progress.in_play)
            if fresh is None:
                return None
            progress.follow(fresh)
            return progress
        record = self.repo.get(tid, results=False)
        if record is None:
            self._progress.pop(tid, None)
            return None
        progress = self._progress[tid] = _Progress.of(record, now)
        return progress

    def _record_ends(self) -> None:
        """Tell the read models of the tournaments that ended since (a cancel, a finish the runner
        was killed before telling, a database that was away)."""
        assert self.read_model is not None
        for tid in self.repo.ended():
            record = self.repo.get(tid, results=False)
            if record is not None and record.status == RUNNING:
                continue  # its status is being set (set_status lists it first)
            if record is None or self.read_model.record(record, record.status):
                self.repo.end_recorded(tid)

    def _cancel_cancelled(self) -> None:
        """End the matches a cancelled tournament still has in play (CancelTournament only lists
        it, so that its answer is prompt). A tournament stays listed until every one got an
        answer: a runner killed mid-way, or the command service away (raised, tried again at the
        next step), leaves the rest to the next pass, whose request ids answer the cancels made
        before as duplicates."""
        for tid in self.repo.cancelling():
            record = self.repo.get(tid, results=False)
            if record is not None and record.status == RUNNING:
                continue  # its status is being set (set_status lists it first)
            if record is not None:
                self._cancel_in_play(record)
            self.repo.matches_cancelled(tid)

    def _cancel_in_play(self, record: TournamentRecord) -> None:
        """CancelMatch each started match without a result, under the request id
        `tournament:<tid>:<match>`, and record it abandoned (`cancelled: <reason>`, the
        dispatcher's very record of a cancelled match): the standings pass it over. A match over
        by then (`match_over`: finished by its rules, or cancelled as stuck) is left to the
        dispatcher, which records how it ended. A creation whose answer was lost is looked up
        first (`_recover_created`), so the match it may have made is cancelled too."""
        tid = record.tournament_id
        self._recover_created(record)
        in_play = {i: m for i, m in record.started.items()
                   if m not in record.results and not m.startswith("failed:")}
        if not in_play:
            return
        games = {p.index: p.game_id for p in plan(record.spec)}
        reason = f"tournament {tid} ({shown_name(record.spec.name)}) cancelled"
        cancelled = 0
        for index, match_id in sorted(in_play.items()):
            try:  # a token a call: a pass over a thousand matches may outlast one
                self.game.cancel_match(match_id, reason, token=self._signer.operator_token("tournaments", ttl_s=300),
                                       request_id=f"tournament:{tid}:{match_id}")
            except grpc.RpcError as exc:
                if exc.code() in _OUT_OF_REACH:
                    raise
                over = exc.code() == grpc.StatusCode.FAILED_PRECONDITION
                (log.info if over else log.warning)(
                    "tournament_match_not_cancelled", tournament_id=tid, match_id=match_id,
                    status=exc.code().name, error=(exc.details() or "")[:300])
                continue
            self.repo.record(tid, match_id, {"abandoned": True, "game_id": games.get(index, ""),
                                             "error": f"cancelled: {reason}"[:300]})
            if self.metrics is not None:
                self.metrics.tournament_match_abandoned(games.get(index, ""), "cancelled")
            cancelled += 1
        log.info("tournament_matches_cancelled", tournament_id=tid, matches=cancelled, in_play=len(in_play))

    def _recover_created(self, record: TournamentRecord) -> None:
        """Record started each planned match of a cancelled tournament whose CreateMatch went out
        and was not recorded (the runner killed before it wrote the answer down, the answer lost),
        by sending it again under its written-down request id: the command service answers with
        the match it made, or makes it now only for it to be cancelled at once (what its bots play
        meanwhile counts for nothing). Without this the match played on, for nobody. The command
        service away: raised, tried again at the next step; a refusal that may pass as well, for
        `stuck_seconds` (as `_start` tries a creation: taken as final, it left the match made
        before playing on); another refusal is logged and the planned match recorded failed
        (abandoned)."""
        unrecorded = record.unrecorded()
        if not unrecorded:
            return
        planned = {p.index: p for p in plan(record.spec)}
        for index in unrecorded:
            if index not in planned:
                continue
            try:
                match_id = self._create(record, planned[index])
                self._creating_since.pop((record.tournament_id, index), None)
            except grpc.RpcError as exc:
                if exc.code() in _OUT_OF_REACH:
                    raise
                if exc.code() in _PASSING_CODES and self._may_pass(record.tournament_id, index):
                    raise
                self._creating_since.pop((record.tournament_id, index), None)
                log.warning("tournament_match_not_cancelled", tournament_id=record.tournament_id, index=index,
                            status=exc.code().name, error=(exc.details() or "")[:300])
                match_id = f"failed:{record.tournament_id}:{index}"
                self.repo.record(record.tournament_id, match_id, {"abandoned": True, "game_id": planned[index].game_id,
                                                                  "error": exc.details() or ""})
            self.repo.mark_started(record.tournament_id, index, match_id)
            record.started[index] = match_id

    def _forget(self, gone: set[str]) -> None:
        """Drop what the runner keeps of tournaments it no longer advances (finished, cancelled):
        it runs for days, through tournament after tournament. Done when a tournament leaves the
        running list (every tournament the runner keeps anything of has a plan here), so the
        scans are per tournament ended, not per step."""
        for tid in gone:
            self._plans.pop(tid, None)
            self._progress.pop(tid, None)
        for creating in [k for k in self._creating_since if k[0] in gone]:
            del self._creating_since[creating]
        for seen in [k for k in self._seen if k[0] in gone]:
            del self._seen[seen]

    def _advance(self, progress: _Progress) -> None:
        """Start planned matches as room frees up, from `next_index` on; finish the tournament
        once every one is started (or the deadline passed) and has a result. A step's work
        follows the matches in play; the finish alone is checked on a whole read."""
        record = progress.record
        if self.read_model is not None:
            self.read_model.record(record, RUNNING)
        matches = self.plan_of(record)
        for index in record.unrecorded():  # made, maybe, and its answer lost: in play whatever the room or deadline
            if index < len(matches):
                made = self._start(record, matches[index])
                if made is None:
                    return
                progress.started(index, made)
        for match_id in list(progress.in_play):
            self._check_stuck(record, match_id)
            if match_id in record.results:  # abandoned as stuck
                del progress.in_play[match_id]
        past_deadline = bool(record.spec.deadline_seconds) and record.elapsed_seconds > record.spec.deadline_seconds
        room = max(1, record.spec.concurrency) - len(progress.in_play)
        while room > 0 and not past_deadline and progress.next_index < len(matches):
            started = self._start(record, matches[progress.next_index])
            if started is None:
                return
            progress.started(matches[progress.next_index].index, started)
            room -= 1
        if (progress.next_index < len(matches) and not past_deadline) or progress.in_play \
                or any(i < len(matches) for i in record.unrecorded()):
            return
        # Over, as far as this runner saw: checked on the whole record (another runner's match,
        # out of its sight, may still be in play) before the tournament is closed for good.
        whole = self.repo.get(record.tournament_id, results=False)
        if whole is None or whole.status != RUNNING:
            return
        progress.record, progress.read_at = whole, time.monotonic()
        fresh = _Progress.of(whole, progress.read_at)
        progress.next_index, progress.in_play = fresh.next_index, fresh.in_play
        all_started = len(whole.started) >= len(matches) or past_deadline
        outstanding = any(i < len(matches) for i in whole.unrecorded())
        if all_started and not outstanding and all(m in whole.results for m in whole.started.values()):
            self.repo.set_status(record.tournament_id, FINISHED)
            if self.read_model is not None and self.read_model.record(whole, FINISHED):
                self.repo.end_recorded(record.tournament_id)
            log.info("tournament_finished", tournament_id=record.tournament_id, matches=len(whole.results))

    def _create(self, record: TournamentRecord, planned: PlannedMatch, *, while_running: bool = False) -> str:
        """CreateMatch of a planned match, its request id written down first (`claim_starting`)
        and, once it is, always that one: a runner with another secret (rotated) sends the same,
        and one that finds the match recorded started by another runner sends nothing.

        `while_running`: only if the tournament is still running once the request id is written
        down (`NotRunning` otherwise). The record was read before: a tournament cancelled since,
        and its cancel pass made by another runner (a rolling deploy's other replica) before the
        request id was written, would never see the match, which then played on for nobody.
        Read after it, the status is either still running (a cancel pass after this finds the
        request id and cancels the match, `_recover_created`) or not (nothing is created)."""
        request_id = record.starting.get(planned.index)
        if request_id is None:
            request_id, made = self.repo.claim_starting(
                record.tournament_id, planned.index,
                private_request_id(self._secret, f"{record.tournament_id}:{planned.index}"))
            if made is not None:
                return made
            record.starting[planned.index] = request_id
        if while_running and self.repo.status(record.tournament_id) != RUNNING:
            raise NotRunning(record.tournament_id)
        seat_info = [envelope_pb2.SeatInfo(seat=s, player_id=entrant, display_name=entrant.partition("?")[0],
                                           bot=True, policy=entrant)
                     for s, entrant in enumerate(planned.entrants)]
        # A trace of its own (a tournament's matches in one trace would make it as deep as the
        # tournament is long), linked to the tournament's creation; CreateMatch continues it, and
        # the match's events keep it.
        with follows_from("tournament.start_match", extract_context(record.trace),
                          tournament_id=record.tournament_id, match_index=planned.index, game_id=planned.game_id):
            try:
                return self.game.create_match(planned.game_id, planned.seats, seed=planned.seed,
                                              options=dict(planned.options), seat_info=seat_info,
                                              request_id=request_id, tournament_id=record.tournament_id,
                                              token=self._signer.operator_token("tournaments", ttl_s=300)).match_id
            except grpc.RpcError as exc:
                # Made under this very request id and archived since (played to its end while
                # this runner was away): that match, not a planned match that failed.
                archived = error_metadata(exc).get("match_id", "") \
                    if exc.code() == grpc.StatusCode.ALREADY_EXISTS and error_code(exc) == "request_id_reused" else ""
                if archived:
                    return archived
                raise

    def _start(self, record: TournamentRecord, planned: PlannedMatch) -> str | None:
        """The planned match made and recorded started; None if the tournament ended meanwhile."""
        try:
            match_id = self._create(record, planned, while_running=True)
            self._creating_since.pop((record.tournament_id, planned.index), None)
        except NotRunning:
            return None
        except grpc.RpcError as exc:
            if exc.code() in _OUT_OF_REACH:
                raise
            if exc.code() in _PASSING_CODES and self._may_pass(record.tournament_id, planned.index):
                raise  # tried again at the next steps, for `stuck_seconds` at most
            match_id = f"failed:{record.tournament_id}:{planned.index}"
            self.repo.record(record.tournament_id, match_id,
                             {"abandoned": True, "game_id": planned.game_id, "error": exc.details() or ""})
            if self.metrics is not None:
                self.metrics.tournament_match_abandoned(planned.game_id, "not_created")
        else:
            if self.metrics is not None:
                self.metrics.tournament_match_started(planned.game_id)
        self.repo.mark_started(record.tournament_id, planned.index, match_id)
        return match_id

    def _may_pass(self, tid: str, index: int) -> bool:
        """Whether a planned match's CreateMatch refused with a code that may pass
        (`_PASSING_CODES`) is to be tried again: for `stuck_seconds` from its first such refusal."""
        now = time.monotonic()
        return now - self._creating_since.setdefault((tid, index), now) < self.stuck_seconds

    def _check_stuck(self, record: TournamentRecord, match_id: str) -> None:
        """A match that stopped moving (an engine bug, a lost game) must not hold the
        tournament forever: once seen at one version for `stuck_seconds` it is abandoned.

        Its version is read at most every quarter of `stuck_seconds`, not every step
        (4 a second): those reads, one MULTI round trip per match in play, were ~6 % of
        the bots process in a tournament. A stuck match is abandoned 1 to 1.5
        `stuck_seconds` after its last event. When it was first seen at its version is
        written down in Redis too (`TournamentRepo.mark_still`, kept `stuck_seconds` past
        each check): kept in memory only, it started over at each restart, and a runner
        restarting more often than `stuck_seconds` never abandoned a stuck match."""
        now = time.monotonic()
        tid, key = record.tournament_id, (record.tournament_id, match_id)
        seen = self._seen.get(key)
        if seen is not None and now - seen[2] < self.stuck_seconds / 4:
            return
        version = self.store.version(match_id)
        wall_ms = _ms()
        if seen is not None and seen[0] == version:
            since = seen[1]
        else:
            written = self.repo.still_since(tid, match_id, version) if seen is None else None
            # A time ahead of this runner's clock (another runner's) counts as now.
            since = now if written is None else now - max(0, wall_ms - written) / 1000
        self._seen[key] = (version, since, now)
        self.repo.mark_still(tid, match_id, version, wall_ms - int((now - since) * 1000), self.stuck_seconds)
        if now - since > self.stuck_seconds:
            log.warning("tournament_match_stuck", tournament_id=record.tournament_id, match_id=match_id)
            self._cancel_stuck(record.tournament_id, match_id)
            game_id = next((p.game_id for p in self.plan_of(record)
                            if record.started.get(p.index) == match_id), "")
            self.repo.record(record.tournament_id, match_id,
                             {"abandoned": True, "game_id": game_id, "error": "stuck"})
            if self.metrics is not None:
                self.metrics.tournament_match_abandoned(game_id, "stuck")
            record.results[match_id] = {"abandoned": True}

    def _cancel_stuck(self, tid: str, match_id: str) -> None:
        """End a match abandoned as stuck in the command service too (CancelMatch): otherwise it
        stays live for good, in the command service's hot state, the dispatcher's tracking, the
        read models, its clocks running. The request id is the match's own, so a retry (a step
        that failed after the cancel) is answered as the first. The command service away:
        raised, the match stays in play, and the next check tries again; a match over by now
        (`match_over`) or gone is abandoned all the same."""
        token = self._signer.operator_token("tournaments", ttl_s=300)
        try:
            self.game.cancel_match(match_id, f"stuck: no event for {self.stuck_seconds:.0f} s in tournament {tid}",
                                   token=token, request_id=f"stuck:{tid}:{match_id}")
        except grpc.RpcError as exc:
            if exc.code() in _OUT_OF_REACH:
                raise
            log.warning("stuck_match_not_cancelled", tournament_id=tid, match_id=match_id,
                        status=exc.code().name, error=(exc.details() or "")[:300])

    def run(self, stop: threading.Event, interval: float = 0.25) -> None:
        """Step every `interval`, and at once when `wake` is set (a match ended): with 8
        matches in play a slot left empty for half a tick on average was ~2 % of the
        tournament's time, and more in its last matches."""
        failures = 0
        while not stop.is_set():
            try:
                self.step()
                failures = 0
            except Exception as exc:  # noqa: BLE001 - the command service restarting; try again
                failures += 1
                pause = _pause_after(failures)
                if _away(exc):  # one line a pass, no traceback: Redis or the command service restarting
                    log.warning("tournament_step_unavailable", failures=failures, pause_s=pause,
                                error=f"{type(exc).__name__}: {exc}"[:300])
                else:
                    log.exception("tournament_step_failed", failures=failures, pause_s=pause)
                stop.wait(pause)
            if self.wake.wait(interval):
                self.wake.clear()
