"""Match chat's store: one capped stream of messages per match, beside the match's events.

Talk is outside the engine in most of the games (GC-D08, GR-D08): a chat message is no event,
so the match stream, its version, the partition streams and everything that reads them (the
engines, replays, exports, the projection) never see one. A match's chat is its own Redis
stream under the match's partition hash tag (`KeyLayout.chat`), so one script stores a message,
its idempotency record and its seat's rate count in one slot, atomically (`chat_send.lua`):

    <prefix>:{p07}:chat:<match_id>                           stream, ids <ms>-0, fields f, to, t
    <prefix>:{p07}:chatmsg:<match_id>:<seat>:<message_id>     hash id, to, t: the first message
    <prefix>:{p07}:chatrate:<match_id>:<seat>                 list of the seat's latest sends (ms)

The stream keeps its newest `ChatLimits.keep` messages (XADD MAXLEN ~) and expires
`ttl_ms` after its last message (or goes with the match's stream when an archived match is
trimmed, `RedisEventStore.trim`, and a trimmed match takes no new message: `MatchArchived`);
a message's idempotency record lives `RECORD_TTL_MS`. A seat's rate is timed by Redis's clock,
one for every command replica. Each message's id is a millisecond of its own, `<ms>-0`
(`own_millisecond`): ids that counted the messages of a millisecond told a reader of the ones it
may not read. Who may read a message is the command service's to decide
(`services.command.chat`): the store keeps each message's sender and recipients and answers
every one.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Protocol, TypeVar

from .port import entry_key
from .rematch_asks import FinishedMatchArchived

_T = TypeVar("_T")

DEFAULT_KEEP = 1000
DEFAULT_TTL_S = 30 * 24 * 3600
DEFAULT_RATE = 5
DEFAULT_WINDOW_S = 10.0


RECORD_TTL_MS = 86_400_000
"""How long a message's idempotency record (with its copy of the text) lives: a day, far past
any retry of a lost answer; after it the same message id stores a new message."""


@dataclass(frozen=True, slots=True)
class ChatLimits:
    """What a match's chat keeps and how fast a seat may talk (the command service's settings,
    `services.command.chat.ChatSettings`)."""

    keep: int = DEFAULT_KEEP
    """The newest messages a match keeps (approximately: Redis trims whole nodes)."""
    ttl_ms: int = DEFAULT_TTL_S * 1000
    """A match's chat expires this long after its last message."""
    rate: int = DEFAULT_RATE
    """Messages a seat may send within `window_ms` (0: no limit)."""
    window_ms: int = int(DEFAULT_WINDOW_S * 1000)


@dataclass(frozen=True, slots=True)
class ChatEntry:
    """One stored message: `id` "<ms>-<n>" orders them (a stream entry id: "<ms>-0", each message
    its own millisecond, `own_millisecond`; chats stored before that have "<ms>-<n>" too);
    `to_seats` empty is the table."""

    id: str
    from_seat: int
    to_seats: tuple[int, ...]
    text: str
    sent_ms: int


@dataclass(frozen=True, slots=True)
class Sent:
    """What `send` stored, or, with `duplicate`, the first message sent under its id (which may
    differ from the one sent now: the caller compares)."""

    entry: ChatEntry
    duplicate: bool = False


class MatchArchived(Exception):
    """The match's stream was trimmed (`RedisEventStore.trim`), its chat with it: nothing stored."""


class ChatTooFast(Exception):
    """The seat sent its `ChatLimits.rate` messages within the window: nothing stored."""

    def __init__(self, wait_ms: int) -> None:
        super().__init__(f"too fast: wait {wait_ms} ms")
        self.wait_ms = wait_ms


def sent_ms(entry_id: str) -> int:
    """When an entry was stored: the milliseconds its id starts with (a few later than the
    clock when messages came faster than one a millisecond: `own_millisecond`)."""
    return entry_key(entry_id)[0]


def own_millisecond(now_ms: int, newest_id: str) -> int:
    """The millisecond of a new message's id, `<ms>-0` (`chat_send.lua` makes it so too): now,
    or the one after the chat's newest id when now is not past it. Each message has its own,
    so a reader's ids never count the messages it may not read: Redis's `<ms>-<n>` did, and a
    table message `<ms>-1` with no `<ms>-0` showed a whisper stored that millisecond."""
    return max(now_ms, entry_key(newest_id)[0] + 1 if newest_id else 1)


def _seats(text: str) -> tuple[int, ...]:
    return tuple(int(s) for s in text.split(",")) if text else ()


def _spelled(seats: Sequence[int]) -> str:
    return ",".join(str(s) for s in seats)


class ChatStore(ABC):
    limits: ChatLimits

    @abstractmethod
    def send(self, match_id: str, seat: int, message_id: str, to_seats: Sequence[int], text: str,
             now_ms: int | None = None) -> Sent:
        """Store a message of `seat` (or answer the one it sent under `message_id` before),
        atomically with its record; ChatTooFast when the seat is over its rate, MatchArchived
        when the match was trimmed, nothing stored then. `now_ms`: the clock of the rate window
        and of the new id (`own_millisecond`); by default the store's (Redis's, so that every
        command replica times a seat alike)."""

    @abstractmethod
    def read(self, match_id: str, after_id: str = "", count: int = 100) -> list[ChatEntry]:
        """Up to `count` messages after the entry id `after_id` ("": from the oldest kept), oldest first."""

    @abstractmethod
    def wait(self, match_id: str, after_id: str, timeout_ms: int) -> list[ChatEntry]:
        """The messages after `after_id`, waiting up to `timeout_ms` for one ([] then)."""

    @abstractmethod
    def newest(self, match_id: str) -> tuple[str, int]:
        """The id of the match's newest message kept ("" for none) and the store's clock (Unix ms,
        the one new ids are made from: no new id is before it, `own_millisecond`): whether a
        reader's cursor is one no message has yet."""


class TrimmingStore(Protocol):
    """What the in-memory chat needs of the in-memory event store it is bound to
    (`famiglia.eventstore.memory_store.InMemoryEventStore`)."""

    def unless_archived(self, match_id: str, write: Callable[[], _T]) -> _T:
        """`write()` under the store's lock, or FinishedMatchArchived for a match trimmed."""
        ...

    def also_trim(self, drop: Callable[[str], None]) -> None:
        """`drop(match_id)` called by the store's trim, under its lock."""
        ...


class InMemoryChatStore(ChatStore):
    """The Redis store's rules in one process (unit tests, single-process tools): ids as
    `chat_send.lua` makes them, each match's its own, the cap, idempotency records, the rate;
    no expiry. Bound to the in-memory event store its matches are in (`store`), a trim takes a
    match's chat with it and a trimmed match takes no new message (MatchArchived), as
    `trim.lua` and `chat_send.lua` do; unbound, it knows of no trim."""

    def __init__(self, limits: ChatLimits | None = None, store: TrimmingStore | None = None) -> None:
        self.limits = limits or ChatLimits()
        self._changed = threading.Condition()
        self._chats: dict[str, list[ChatEntry]] = {}
        self._records: dict[tuple[str, int, str], ChatEntry] = {}
        self._sends: dict[tuple[str, int], list[int]] = {}
        self._store = store
        if store is not None:
            store.also_trim(self._drop)

    def _drop(self, match_id: str) -> None:
        with self._changed:
            self._chats.pop(match_id, None)

    def send(self, match_id: str, seat: int, message_id: str, to_seats: Sequence[int], text: str,
             now_ms: int | None = None) -> Sent:
        if self._store is None:
            return self._send(match_id, seat, message_id, to_seats, text, now_ms)
        try:
            return self._store.unless_archived(
                match_id, lambda: self._send(match_id, seat, message_id, to_seats, text, now_ms))
        except FinishedMatchArchived:
            with self._changed:  # a retry is answered first, as chat_send.lua looks at the record first
                first = self._records.get((match_id, seat, message_id))
            if first is not None:
                return Sent(first, duplicate=True)
            raise MatchArchived(match_id) from None

    def _send(self, match_id: str, seat: int, message_id: str, to_seats: Sequence[int], text: str,
              now_ms: int | None) -> Sent:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        limits = self.limits
        with self._changed:
            first = self._records.get((match_id, seat, message_id))
            if first is not None:
                return Sent(first, duplicate=True)
            sends = self._sends.setdefault((match_id, seat), [])
            if limits.rate and len(sends) >= limits.rate:
                wait = sends[limits.rate - 1] + limits.window_ms - now
                if wait > 0:
                    raise ChatTooFast(wait)
            chat = self._chats.setdefault(match_id, [])
            ms = own_millisecond(now, chat[-1].id if chat else "")
            entry = ChatEntry(f"{ms}-0", seat, tuple(to_seats), text, ms)
            chat.append(entry)
            del chat[:-limits.keep]
            self._records[(match_id, seat, message_id)] = entry
            if limits.rate:
                sends.insert(0, now)
                del sends[limits.rate:]
            self._changed.notify_all()
            return Sent(entry)

    def read(self, match_id: str, after_id: str = "", count: int = 100) -> list[ChatEntry]:
        after = entry_key(after_id) if after_id else (-1, -1)
        with self._changed:
            return [e for e in self._chats.get(match_id, ()) if entry_key(e.id) > after][:count]

    def wait(self, match_id: str, after_id: str, timeout_ms: int) -> list[ChatEntry]:
        with self._changed:
            self._changed.wait_for(lambda: self.read(match_id, after_id, 1), timeout=max(timeout_ms, 0) / 1000)
            return self.read(match_id, after_id)

    def newest(self, match_id: str) -> tuple[str, int]:
        with self._changed:
            chat = self._chats.get(match_id)
            return (chat[-1].id if chat else ""), int(time.time() * 1000)


_LAST_ID = (2**64 - 1, 2**64 - 1)
"""The greatest stream entry id: nothing comes after it."""


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _entry(entry_id: bytes | str, fields: dict[bytes, bytes]) -> ChatEntry:
    eid = _text(entry_id)
    return ChatEntry(eid, int(fields[b"f"]), _seats(_text(fields[b"to"])), _text(fields[b"t"]), sent_ms(eid))


@dataclass
class RedisChatStore(ChatStore):
    """The chat store on the event store's Redis client and key layout
    (`famiglia.eventstore.redis_store.KeyLayout`): its keys share the match's hash tag."""

    client: Any
    keys: Any
    limits: ChatLimits = field(default_factory=ChatLimits)

    def __post_init__(self) -> None:
        script = resources.files(__package__).joinpath("chat_send.lua").read_text(encoding="utf-8")
        self._send = self.client.register_script(script)

    def send(self, match_id: str, seat: int, message_id: str, to_seats: Sequence[int], text: str,
             now_ms: int | None = None) -> Sent:
        keys, limits = self.keys, self.limits
        reply = self._send(keys=[keys.chat(match_id), keys.chat_message(match_id, seat, message_id),
                                 keys.chat_sends(match_id, seat), keys.match_stream(match_id), keys.version(match_id)],
                           args=[seat, _spelled(to_seats), text, "" if now_ms is None else now_ms, limits.rate,
                                 limits.window_ms, limits.keep, limits.ttl_ms, RECORD_TTL_MS])
        kind = int(reply[0])
        if kind == 2:
            raise ChatTooFast(int(reply[1]))
        if kind == 3:
            raise MatchArchived(match_id)
        eid = _text(reply[1])
        if kind == 1:
            return Sent(ChatEntry(eid, seat, _seats(_text(reply[2])), _text(reply[3]), sent_ms(eid)), duplicate=True)
        return Sent(ChatEntry(eid, seat, tuple(to_seats), text, sent_ms(eid)))

    def read(self, match_id: str, after_id: str = "", count: int = 100) -> list[ChatEntry]:
        if after_id and entry_key(after_id) == _LAST_ID:  # Redis refuses a range that starts past it
            return []
        entries = self.client.xrange(self.keys.chat(match_id), min=f"({after_id}" if after_id else "-", count=count)
        return [_entry(eid, fields) for eid, fields in entries or ()]

    def wait(self, match_id: str, after_id: str, timeout_ms: int) -> list[ChatEntry]:
        """XREAD BLOCK from the explicit id: a message stored between a reader's read and this
        call is never missed. A non-positive timeout is a plain read."""
        if timeout_ms <= 0:
            return self.read(match_id, after_id)
        reply = self.client.xread({self.keys.chat(match_id): after_id or "0-0"}, block=timeout_ms)
        return [_entry(eid, fields) for eid, fields in reply[0][1]] if reply else []

    def newest(self, match_id: str) -> tuple[str, int]:
        """XREVRANGE COUNT 1 and TIME in one round trip: Redis makes the ids from its own clock."""
        pipe = self.client.pipeline(transaction=False)
        pipe.xrevrange(self.keys.chat(match_id), count=1)
        pipe.time()
        top, (seconds, micros) = pipe.execute()
        return (_text(top[0][0]) if top else ""), int(seconds) * 1000 + int(micros) // 1000
