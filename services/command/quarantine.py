"""Commands set aside: a command whose engine did not return is not decided again for a while.

The stuck-call watchdog takes a replica whose call never ends out of service, and its client
retries (the SDK retries UNAVAILABLE and DEADLINE_EXCEEDED) on the next replica, where the same
pure engine loops on the same input again: one poisoned command would restart every replica in
turn. So when a SubmitCommand(s) call is found stuck inside `decide` (`CommandApp.stuck_command`,
read from its thread's frames: nothing is noted on the command path), the command is set aside in
Redis for `FAMIGLIA_COMMAND_QUARANTINE_S`, for every replica, under two names, each a member
`<match id> <hold> <name>` of its own for each stuck call that set it aside (`hold`: its replica
and thread), so a call that ends lifts its own and not another replica's, stuck on the same:

- `id:<seat>/<command_id>`: the store's idempotency key, what a retry of the same call sends;
- `at:<version>/<seat>/<digest>`: the engine's input (where the match stands, the seat, the
  command's bytes), what a player sending the same command again under a new id sends. The
  version every seat sees, not the position: that counts the answers held in a window (NP-H9),
  and a refusal lifted by another seat's answer would tell the seat it had answered.

Either refuses it at once, `FAILED_PRECONDITION command_quarantined`, before `decide`. Another
command of the seat (a bot's fallback, a player's other choice), or this one once the match
has moved on, is decided as ever. A stuck call that ends after all lifts what it set aside: at
once on its replica, and in Redis as soon as Redis takes it (a lift refused, Redis away just then,
is made again at the replica's next read of the set, and as it stops), not 6 hours later.

The engine's other answers loop as well: a call found stuck inside a seat's `view` (GetView,
SubmitCommands' next answers) or its `legal_commands` (ListLegalCommands, the bots'), or in any
other engine call of GetView or ListLegalCommands (`pending`, `result`, `render_state`,
`render_command`: `CommandApp.stuck_command`), sets aside `<asked>:<version>/<seat>`
(`asked_name`: `view:` or `legal:`), refused at once, `FAILED_PRECONDITION call_quarantined`,
before the engine is asked again: a client retrying its GetView took out every replica in turn
as a poisoned command did. The other seats, and the match's next versions, are answered as ever.

Every replica reads the set (one sorted set, its score the member's expiry in Unix ms) at most
once every `refresh_s` a command asks for it; between reads the check is a dict lookup of the
match id, and the command's bytes are hashed only for a match that has a command set aside.
Expiries are Redis's clock's (`_SET_ASIDE`, `_READ`: its `TIME`), never a replica's: one whose
clock ran ahead took every other replica's members for expired, one behind wrote members already
expired. They only grow: a replica with a shorter quarantine cuts short neither a member another
set aside nor the set, which lives as long as its last member.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from google.protobuf.message import Message

from famiglia.telemetry import get_logger

log = get_logger("famiglia.command")

#: Seconds a stuck command stays set aside (FAMIGLIA_COMMAND_QUARANTINE_S): long enough for an
#: operator to read `call_stuck` and cancel the match (docs/operations.md, "A stuck call"), short
#: enough that a fixed engine, deployed, gets the command again the same day.
QUARANTINE_S = 6 * 3600.0

#: Seconds between a replica's reads of what every replica set aside.
REFRESH_S = 1.0

#: Seconds a write or read of the set may wait for Redis: the watchdog's thread writes it, and
#: must not hang on a Redis that stopped answering.
REDIS_TIMEOUT_S = 2.0


_SET_ASIDE = """
-- KEYS[1] the set; ARGV[1] how long a member lives (ms); ARGV[2], ARGV[3], ...: the members.
-- Redis's clock, not the replica's, trims the expired and dates the new: a replica whose clock
-- is ahead expired every other replica's members (its `now` past their expiry), one behind wrote
-- members already expired for the others. A member's expiry only grows (ZADD GT), and the set's
-- is its last member's: a replica with a shorter quarantine cuts nothing short (Redis 6.2).
-- Returns Redis's now (ms).
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local expiry = now + tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'GT', expiry, ARGV[i])
end
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then
  redis.call('PEXPIREAT', KEYS[1], math.ceil(tonumber(last[2])))
end
return now
"""

_READ = """
-- KEYS[1] the set: the members not yet expired by Redis's clock, with their expiry (ms).
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], string.format('(%d', now), '+inf', 'WITHSCORES')
"""


def id_name(seat: int, command_id: str) -> str:
    return f"id:{seat}/{command_id}"


def input_name(version: int, seat: int, command: Message) -> str:
    digest = hashlib.sha256(command.SerializeToString(deterministic=True)).hexdigest()[:32]
    return f"at:{version}/{seat}/{digest}"


#: What a seat asks the engine besides a decision, as a name says it: its view (`view`), its
#: legal commands (`legal`).
ASKED = ("view", "legal")
ASKED_PREFIXES = tuple(f"{asked}:" for asked in ASKED)
"""How the names of a seat's view or legal commands begin (`asked_name`)."""


def asked_name(asked: str, version: int, seat: int | None) -> str:
    """`<asked>:<version>/<seat>`: a seat's view or legal commands where the match stands (its
    version every seat sees, as `input_name`), the engine's whole input; a spectator's view
    `view:<version>/spectator`."""
    return f"{asked}:{version}/{'spectator' if seat is None else seat}"


class Quarantine:
    """The commands set aside, per match: in memory, and (with `client`) in the Redis sorted set
    `<prefix>:quarantine` that every replica reads. `wall`: Unix seconds, when a set-aside is
    made again (`due`), and the members' expiry without `client` (with it, Redis's clock's)."""

    def __init__(self, client: Any = None, *, prefix: str = "famiglia", ttl_s: float = QUARANTINE_S,
                 refresh_s: float = REFRESH_S, wall: Callable[[], float] = time.time,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not ttl_s > 0:
            raise ValueError(f"a quarantine lasts more than 0 seconds, not {ttl_s}")
        self.ttl_s = ttl_s
        self.key = f"{prefix}:quarantine"
        self._writer = _bounded(client) if client is not None else None
        self._set_aside_script = self._writer.register_script(_SET_ASIDE) if self._writer is not None else None
        self._read_script: Any = self._writer.register_script(_READ) if self._writer is not None else None
        self.holder = uuid.uuid4().hex[:12]
        """This replica's name in the members it writes (no space: a member's second word)."""
        self._refresh_s = refresh_s
        self._wall = wall
        self._clock = clock
        self._next_read = 0.0
        self._lock = threading.Lock()
        self._members: dict[str, float] = {}  # "<match id> <hold> <name>" -> its expiry (Unix ms)
        self._aside: dict[str, frozenset[str]] = {}  # match id -> names; replaced whole, never mutated
        self._lifting: set[str] = set()  # members lifted here that Redis has not taken out yet
        self._writing = threading.Lock()  # one write or read round of the set at a time: a lift made late undoes no set-aside

    def of(self, match_id: str) -> frozenset[str] | None:
        """What is set aside on `match_id` (None: nothing, the usual answer)."""
        if self._clock() >= self._next_read:
            self._read()
        return self._aside.get(match_id) if self._aside else None

    def member(self, match_id: str, name: str, hold: str = "") -> str:
        """The set's member for `name` set aside on `match_id` by this replica's `hold` (a stuck
        call: its thread, no space in it), what `redis-cli ZREM` takes out by hand."""
        return f"{match_id} {self.holder}{'.' if hold else ''}{hold} {name}"

    def set_aside(self, match_id: str, names: list[str], hold: str = "") -> float:
        """`names` refused on `match_id` for `ttl_s`, held by this replica's `hold` (the stuck
        call) until it lifts them: another replica's call stuck on the same keeps its own. Returns
        when to set them aside again while the call is still stuck (`due`): half their life on,
        so a call stuck longer than the quarantine keeps them."""
        now = self._wall()
        members = [self.member(match_id, name, hold) for name in names]
        with self._writing:  # and no read round meanwhile, whose older answer would undo it here
            if self._set_aside_script is not None:  # dated by Redis's clock, every replica's alike
                ttl_ms = max(1, round(self.ttl_s * 1000))
                expiry_ms = float(self._set_aside_script(keys=[self.key], args=[ttl_ms, *members])) + ttl_ms
            else:
                expiry_ms = (now + self.ttl_s) * 1000
            with self._lock:
                self._lifting.difference_update(members)  # set aside again: no longer to lift
                for member in members:  # as in Redis: an expiry only grows
                    self._members[member] = max(expiry_ms, self._members.get(member, expiry_ms))
                self._aside = _by_match(self._members)
        return now + self.ttl_s / 2

    def due(self, at: float) -> bool:
        """Whether `at` (what `set_aside` returned) has come: a clock read, no Redis."""
        return self._wall() >= at

    def lift(self, match_id: str, names: list[str], hold: str = "") -> bool:
        """What `hold` set aside, lifted here at once; True once Redis has it lifted too, for
        every replica (False: it is made at this replica's next read of the set that Redis
        answers, or as it stops). The same names another call holds stay set aside."""
        members = [self.member(match_id, name, hold) for name in names]
        with self._lock:
            for member in members:
                self._members.pop(member, None)
            self._aside = _by_match(self._members)
            if self._writer is not None:
                self._lifting.update(members)
        return self._lift_pending()

    def close(self) -> None:
        """Make the lifts still pending, then close the connections of its own pool (`_bounded`);
        the app closes it with its store. A write under way (the watchdog's, on a Redis that hangs)
        is waited for `REDIS_TIMEOUT_S` at most, lifts pending or not: the pool's disconnect cuts
        the connections in use too (a set-aside of a call still stuck as the service leaves), and
        the service's exit, stuck or not, waits for this."""
        if self._writer is None:
            return
        written = self._writing.acquire(timeout=REDIS_TIMEOUT_S)
        try:
            if written and self._lifting:
                try:
                    self._take_out()
                except Exception as exc:  # noqa: BLE001 - told below
                    log.warning("command_quarantine_lift_pending", members=sorted(self._lifting)[:16],
                                error=f"{type(exc).__name__}: {exc}"[:200])
            if self._lifting:
                log.warning("command_quarantine_lift_lost", members=sorted(self._lifting)[:16])
            self._writer.connection_pool.disconnect()
        finally:
            if written:
                self._writing.release()

    def _lift_pending(self, wait_s: float = -1) -> bool:
        """Take the members lifted here out of Redis; whether none is left pending. `wait_s`: how
        long to wait for a write under way (-1: as long as it takes)."""
        if self._writer is None or not self._lifting:
            return True
        if not self._writing.acquire(timeout=wait_s):
            return False
        try:
            self._take_out()
        except Exception as exc:  # noqa: BLE001 - kept, and made again at the next read round
            log.warning("command_quarantine_lift_pending", members=sorted(self._lifting)[:16],
                        error=f"{type(exc).__name__}: {exc}"[:200])
            return False
        finally:
            self._writing.release()
        return True

    def _take_out(self) -> list[str]:
        """ZREM what was lifted here (the caller holds `_writing`): the members taken out."""
        with self._lock:
            members = sorted(self._lifting)
        if members and self._writer is not None:
            self._writer.zrem(self.key, *members)
            with self._lock:
                self._lifting.difference_update(members)
        return members

    def _read(self) -> None:
        self._next_read = self._clock() + self._refresh_s  # one read a round; a failed one waits a round too
        if self._writer is None:
            now_ms = self._wall() * 1000
            with self._lock:
                self._members = {m: e for m, e in self._members.items() if e > now_ms}
                self._aside = _by_match(self._members)
            return
        # No set-aside or lift between Redis's answer and its use here: it would be undone on this
        # replica until the next round. One under way (the watchdog's thread) makes this replica's
        # view the newer: a command thread does not wait on its write, and reads next round.
        if not self._writing.acquire(blocking=False):
            return
        try:
            if self._lifting:  # a lift Redis refused before, made first
                try:
                    made = self._take_out()
                except Exception as exc:  # noqa: BLE001 - kept for the next round
                    if _unanswered(exc):
                        raise  # Redis away for the lift is away for the read: one wait on a command, not two
                else:
                    log.info("command_quarantine_lift_made", members=made[:16])
            raw = self._read_script(keys=[self.key]) or []  # expired by Redis's clock, not this replica's
            members = {(m.decode() if isinstance(m, bytes) else m): float(score)
                       for m, score in zip(raw[::2], raw[1::2], strict=True)}
            with self._lock:
                for member in self._lifting:  # lifted here, still in Redis: not refused here meanwhile
                    members.pop(member, None)
                self._members = members
                self._aside = _by_match(members)
        finally:
            self._writing.release()


def _unanswered(exc: Exception) -> bool:
    import redis

    return isinstance(exc, (redis.ConnectionError, redis.TimeoutError))


def _by_match(members: dict[str, float]) -> dict[str, frozenset[str]]:
    grouped: dict[str, set[str]] = {}
    for member in members:
        match_id, _, held = member.partition(" ")  # a match id and a hold have no space; a command id may
        # A name begins `id:`, `at:`, `view:` or `legal:`, a hold never (hex): a member without one is a replica's of
        # the release before holds (`<match id> <name>`), read across a rolling deploy.
        name = held if held.startswith(_NAMED) else held.partition(" ")[2]
        grouped.setdefault(match_id, set()).add(name)
    return {match_id: frozenset(names) for match_id, names in grouped.items()}


_NAMED = ("id:", "at:", *ASKED_PREFIXES)


def _bounded(client: Any) -> Any:
    """A client on the same server as `client` whose calls give up after `REDIS_TIMEOUT_S` (the
    store's own has no read timeout: a blocking read may wait for seconds), at the first try:
    the store's settings carry redis-py's retries (10, backing off), with which one call on a
    Redis that hangs waited 25 s. A write it gave up is made again next round anyway."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    from famiglia.redis_clients import FAILOVER, follow_failover, plain_connection_class

    pool = client.connection_pool
    kwargs = {k: v for k, v in pool.connection_kwargs.items() if k != FAILOVER}
    kwargs.update(socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S,
                  retry=Retry(NoBackoff(), 0))
    bounded = redis.Redis(connection_pool=redis.ConnectionPool(
        connection_class=plain_connection_class(pool.connection_class), max_connections=4, **kwargs))
    return follow_failover(bounded)  # its own pool, which follows a failover as the store's does
