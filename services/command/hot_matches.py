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
from famiglia.grpcutil.errors import FailedPrecondition
from famiglia.matchstate import MatchState, NotAMatch, StoreWentBack, UnknownEventKind


@dataclass
class HotMatch:
    match: MatchState
    lock: threading.Lock = field(default_factory=threading.Lock)


class UnknownMatch(KeyError):
    pass


class UnreadableMatch(Exception):
    """The stored events cannot be folded here: a game this server does not have, or a
    payload its engine cannot parse (an unverified import, a newer server's events)."""


def unreadable(match_id: str, why: object) -> FailedPrecondition:
    """The refusal of a match whose stored events this server cannot fold (`match_unreadable`)."""
    return FailedPrecondition("match_unreadable", f"match {match_id!r} cannot be played here: "
                                                  f"its events cannot be read: {why}")


class HotMatches:
    """An LRU of matches. Each entry has its own lock: commands on one match are
    decided one at a time in this process; other processes are kept honest by the
    store's expected-version check."""

    def __init__(self, store: EventStore, registry: Registry, capacity: int = 10_000) -> None:
        self._store = store
        self._registry = registry
        self._capacity = capacity
        self._entries: OrderedDict[str, HotMatch] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, match_id: str) -> HotMatch:
        with self._lock:
            hot = self._entries.get(match_id)
            if hot is not None:
                self._entries.move_to_end(match_id)
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
            raise UnreadableMatch(f"its events cannot be read: {exc}") from None
        with self._lock:
            hot = self._entries.setdefault(match_id, HotMatch(match))
            self._entries.move_to_end(match_id)
            excess = len(self._entries) - self._capacity
            if excess > 0:
                self._evict(excess)
            return hot

    def _evict(self, excess: int) -> None:
        """Drop the least recently used matches, but none a command holds: a thread that got
        it again would get a fresh entry with another lock, and two commands of one match
        would be decided side by side here (the store's version check would still keep the
        match whole, at the cost of a conflict and a retry). Call with `_lock` held."""
        for match_id in list(islice(self._entries, excess + 16)):  # the oldest, and a few more
            if excess <= 0:
                break
            if not self._entries[match_id].lock.locked():
                del self._entries[match_id]
                excess -= 1

    def catch_up(self, hot: HotMatch) -> MatchState:
        """Fold what other processes appended, and staged (call with hot.lock held); the match
        as it is now. A store that lost what this fold holds, and perhaps was written on since
        by another process, is folded anew (`refold`: a new MatchState, so a caller holding the
        old one takes this answer): what it holds past the lost events does not follow them."""
        try:
            hot.match.catch_up(self._store)
        except StoreWentBack:
            self.refold(hot)
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

    def forget(self, match_id: str) -> None:
        with self._lock:
            self._entries.pop(match_id, None)
