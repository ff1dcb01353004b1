"""Hot match state in memory, caught up from the stream, so a command costs the same
at version 20 and at version 2,000: only new events are ever folded."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import islice

from google.protobuf.message import DecodeError

from famiglia.engine.registry import Registry, UnknownGame
from famiglia.eventstore import EventStore
from famiglia.grpcutil.errors import FailedPrecondition, NotFound
from famiglia.matchstate import MatchState, NotAMatch, StoreWentBack, UnknownEventKind
from famiglia.telemetry import get_logger

log = get_logger("famiglia.command")

HOT_MATCHES = 10_000
"""Matches kept hot at most (FAMIGLIA_HOT_MATCHES)."""

HOT_MATCHES_MB = 512
"""MiB of hot match state kept at most, by `held_bytes` (FAMIGLIA_HOT_MATCHES_MB): a 1-2 GB
container keeps the rest for the interpreter, gRPC and the calls in flight."""

MATCH_BYTES = 28 * 1024
"""What a match holds whatever its length: its engine state (10-17 KiB in every game, about as
much at the end as at the start), its turn clocks (1-13 KiB), the recent blocks and slots
(NP-H9) and the allocator's slack (docs/performance.md, "Hot match memory")."""

COMMAND_BYTES = 224
"""What each command folded adds: its entry in `MatchState.commands` (the idempotency index, a
32-character id's key and its event span), measured at 215-236 bytes in every game."""

WRITTEN_OUT_BYTES = 144
"""What each held answer written out adds (`MatchState.written_out`, Nothing Personal's NP-H9)."""


def held_bytes(match: MatchState) -> int:
    """The memory a hot match holds, estimated: nothing in it grows with the match's length but
    its command records, so two lengths and a few multiplications (no walk of the state) keep
    a command's cost flat."""
    return MATCH_BYTES + COMMAND_BYTES * len(match.commands) + WRITTEN_OUT_BYTES * len(match.written_out)


@dataclass
class HotMatch:
    match: MatchState
    lock: threading.Lock = field(default_factory=threading.Lock)
    size: int = 0
    """`held_bytes` when the match was last counted (HotMatches' byte total holds it)."""
    counted: int = -1
    """The match's version when it was last counted: -1 when it is to be counted again."""
    finished: bool = False
    """Over when it was last counted: among the matches dropped first."""


class UnknownMatch(KeyError):
    pass


class UnreadableMatch(Exception):
    """The stored events cannot be folded here: a game this server does not have, or a
    payload its engine cannot parse (an unverified import, a newer server's events)."""


def gone(store: EventStore, match_id: str) -> NotFound:
    """The refusal of a match the store does not hold: archived (trimmed, its version key kept)
    or never made."""
    if store.exists(match_id):
        return NotFound("match_archived", f"match {match_id!r} is over and archived: the replay service has its "
                                          "events and final state")
    return NotFound("unknown_match", f"no match {match_id!r}")


def unreadable(match_id: str, why: object) -> FailedPrecondition:
    """The refusal of a match whose stored events this server cannot fold (`match_unreadable`)."""
    return FailedPrecondition("match_unreadable", f"match {match_id!r} cannot be played here: "
                                                  f"{unreadable_events(match_id, why)}")


def unreadable_events(match_id: str, why: object) -> str:
    """Why a match's events cannot be folded here, as whoever asked is told, a spectator too: the
    seq of a kind this server does not know (a stream event's seq is public; a held answer's is
    not, NP-H9: past the version, it counts the answers held before it) and nothing of the
    event, not its stored type (what happened, which most seats may not know) nor the decoder's
    words. The log has those."""
    log.info("match_unreadable", match_id=match_id, error=f"{type(why).__name__}: {why}"[:500])
    if isinstance(why, UnknownEventKind) and not why.staged:
        said = f"its event {why.seq} is of a kind this server's engine does not know (written by a newer server?)"
    else:
        said = "its events cannot be read by this server's engine"
    return f"{said}; the server's log (match_unreadable) has the details"


class HotMatches:
    """An LRU of matches, bounded by count and by the bytes they hold (`held_bytes`); finished
    matches (only read now, for views and streams) go first, then the least recently used.
    Each entry has its own lock: commands on one match are decided one at a time in this
    process; other processes are kept honest by the store's expected-version check."""

    def __init__(self, store: EventStore, registry: Registry, capacity: int = HOT_MATCHES,
                 budget: int = HOT_MATCHES_MB << 20) -> None:
        self._store = store
        self._registry = registry
        self._capacity = capacity
        self._budget = budget
        self._running: OrderedDict[str, HotMatch] = OrderedDict()
        self._finished: OrderedDict[str, HotMatch] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._running) + len(self._finished)

    def __contains__(self, match_id: object) -> bool:
        return match_id in self._running or match_id in self._finished

    @property
    def held_bytes(self) -> int:
        """The bytes the hot matches hold, as last counted."""
        return self._bytes

    def peek(self, match_id: str) -> HotMatch | None:
        """The hot entry of `match_id`, if any, without its lock or the LRU's, nor moving it (two
        dict reads): for the stuck-call watchdog, which must not wait behind what it reports."""
        return self._running.get(match_id) or self._finished.get(match_id)

    def get(self, match_id: str) -> HotMatch:
        with self._lock:
            hot = self._touch(match_id)
            if hot is not None:
                return hot
        envelopes = self._store.read(match_id)
        if not envelopes:
            raise UnknownMatch(match_id)
        try:
            match = MatchState.from_envelopes(self._registry, envelopes, clocks=True)
            if match.may_hold:
                match.catch_up(self._store)
        except NotAMatch:
            raise UnknownMatch(match_id) from None
        except UnknownGame as exc:
            raise UnreadableMatch(f"its game is not served here: {exc}") from None
        except (DecodeError, ValueError) as exc:
            raise UnreadableMatch(unreadable_events(match_id, exc)) from None
        with self._lock:
            hot = self._touch(match_id)  # another thread folded it meanwhile: one entry, one lock
            if hot is None:
                hot = self._running[match_id] = HotMatch(match)
                self._count(match_id, hot)
            return hot

    def _touch(self, match_id: str) -> HotMatch | None:
        """The entry, now the most recently used, counted again if its match moved (a command
        or a catch-up since: one per command, a few integer operations); the bounds kept.
        Call with `_lock` held."""
        hot = self._running.get(match_id)
        if hot is not None:
            self._running.move_to_end(match_id)
        else:
            hot = self._finished.get(match_id)
            if hot is None:
                return None
            self._finished.move_to_end(match_id)
        if hot.counted != hot.match.version or not hot.size:  # moved, or bigger than the budget
            self._count(match_id, hot)
        return hot

    def _count(self, match_id: str, hot: HotMatch) -> None:
        """Count the match's bytes and whether it is over, and keep the bounds. A match bigger
        than the whole budget is served to this call but not kept (folded anew for the next),
        nor counted while a command holds it: no other match is dropped for it. Call with
        `_lock` held."""
        m = hot.match
        hot.counted = m.version
        size = held_bytes(m)
        if size > self._budget:
            size = 0
        self._bytes += size - hot.size
        hot.size = size
        finished = m.finished  # kept by the match for its state: the command's own check reuses it
        if finished != hot.finished:
            (self._finished if hot.finished else self._running).pop(match_id, None)
            (self._finished if finished else self._running)[match_id] = hot
            hot.finished = finished
        if not size:
            if not hot.lock.locked():
                self._drop(match_id, hot)
        elif len(self._running) + len(self._finished) > self._capacity or self._bytes > self._budget:
            self._evict(match_id)

    def _drop(self, match_id: str, hot: HotMatch) -> None:
        (self._finished if hot.finished else self._running).pop(match_id, None)
        self._bytes -= hot.size

    def _evict(self, keep: str) -> None:
        """Drop finished matches, then the least recently used, until within both bounds; but
        never `keep` (the match being handed out) nor one a command holds: a thread that got it
        again would get a fresh entry with another lock, and two commands of one match would be
        decided side by side here (the store's version check would still keep the match whole,
        at the cost of a conflict and a retry). Call with `_lock` held."""
        for entries in (self._finished, self._running):
            held = 0  # the oldest entries passed over, kept
            while len(self._running) + len(self._finished) > self._capacity or self._bytes > self._budget:
                oldest = list(islice(entries, held, held + 16))
                if not oldest:
                    break
                for match_id in oldest:
                    hot = entries[match_id]
                    if match_id == keep or hot.lock.locked():
                        held += 1
                    else:
                        del entries[match_id]
                        self._bytes -= hot.size
                        if len(self._running) + len(self._finished) <= self._capacity \
                                and self._bytes <= self._budget:
                            return

    def catch_up(self, hot: HotMatch) -> MatchState:
        """Fold what other processes appended, and staged (call with hot.lock held); the match
        as it is now. A store that lost what this fold holds, and perhaps was written on since
        by another process, is folded anew (`refold`: a new MatchState, so a caller holding the
        old one takes this answer): what it holds past the lost events does not follow them. A
        store that holds none of it any more (the match archived and trimmed) is `gone`: the
        entry is dropped and the call refused as on a process that never held it."""
        try:
            hot.match.catch_up(self._store)
        except StoreWentBack:
            try:
                self.refold(hot)
            except UnknownMatch:  # trimmed since this process folded it (a finished match archived)
                self.forget(hot.match.match_id)
                raise gone(self._store, hot.match.match_id) from None
        except (DecodeError, UnknownEventKind) as exc:  # another replica, newer, wrote what this one cannot fold
            raise unreadable(hot.match.match_id, exc) from None
        return hot.match

    def refold(self, hot: HotMatch) -> None:
        """Fold the match anew from the store, in place (call with hot.lock held): the store is
        behind what this process folded, so it lost acknowledged writes (a Redis restored from
        an older AOF, or `appendfsync everysec` on a host crash). The store is the truth; a
        state ahead of it would make every append conflict, for good."""
        envelopes = self._store.read(hot.match.match_id)
        if not envelopes:
            raise UnknownMatch(hot.match.match_id)
        try:
            match = MatchState.from_envelopes(self._registry, envelopes, clocks=True)
            if match.may_hold:
                match.catch_up(self._store)
        except (DecodeError, UnknownEventKind) as exc:  # written since by a newer replica
            raise unreadable(hot.match.match_id, exc) from None
        hot.match = match
        hot.counted = -1  # another fold, perhaps at the same version: counted anew at the next `get`

    def forget(self, match_id: str) -> None:
        with self._lock:
            hot = self._running.get(match_id) or self._finished.get(match_id)
            if hot is not None:
                self._drop(match_id, hot)
