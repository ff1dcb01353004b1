"""Building and opening event envelopes: the one place that knows how a game event
becomes a stored `famiglia.v1.EventEnvelope` and back."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from google.protobuf.message import Message

from famiglia.engine import Engine, Visibility, VisibilityKind
from famiglia.v1 import envelope_pb2

MATCH_CREATED = "match_created"
#: An operator ended the match (GameService.CancelMatch): the last event, no engine's.
MATCH_CANCELLED = "match_cancelled"
#: A seat's player left and the bots play the seat (GameService.LeaveMatch, or its clock ran out
#: too many times in a row); no engine's.
SEAT_LEFT = "seat_left"
#: The player of a seat left after `timeouts` took it back (GameService.ReturnToMatch); no engine's.
SEAT_RETURNED = "seat_returned"
#: Who plays a seat changed: events the server writes mid-match that no engine sees.
SEAT_CHANGES = frozenset({SEAT_LEFT, SEAT_RETURNED})
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]  # every 10-bit value as 2 digits


def new_event_id(now_ms: int | None = None) -> str:
    """A ULID: 48 bits of milliseconds then 80 random bits, 26 Crockford base32 characters.
    Globally unique and sortable by creation time."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    return _time_part(ms) + _pool.take(16)


def _time_part(ms: int) -> str:
    """A ULID's first 10 characters: the 2 padding bits and the 48 bits of milliseconds,
    encoded ten bits (two digits) at a time, once per millisecond (a batch shares it)."""
    global _last_time_part
    last = _last_time_part
    if last[0] == ms:
        return last[1]
    value = ms & 0xFFFFFFFFFFFF
    part = "".join([_PAIRS[(value >> shift) & 1023] for shift in (40, 30, 20, 10, 0)])
    _last_time_part = (ms, part)
    return part


_last_time_part: tuple[int, str] = (-1, "")
#: A random byte to a random Crockford digit: its low 5 bits (256 is a multiple of 32, so
#: every digit is equally likely).
_DIGIT_OF_BYTE = bytes(_CROCKFORD.encode()[b & 31] for b in range(256))


class _DigitPool:
    """Random Crockford digits (5 random bits each), read from os.urandom 4,096 at a time
    and handed out once each. os.urandom is a system call that lets go of the GIL (on a
    busy server every release costs a thread switch), and turning bits into digits in
    Python costs more than the call: here one `translate` does it for 256 event ids."""

    __slots__ = ("lock", "digits", "at")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.digits, self.at = "", 0

    def take(self, n: int) -> str:
        with self.lock:
            at = self.at
            if at + n > len(self.digits):
                self.digits, at = os.urandom(max(4096, n)).translate(_DIGIT_OF_BYTE).decode("ascii"), 0
            self.at = at + n
            return self.digits[at:at + n]


_pool = _DigitPool()


def _fresh_pool() -> None:
    global _pool
    _pool = _DigitPool()  # a forked child must not hand out its parent's digits


os.register_at_fork(after_in_child=_fresh_pool)


def visibility_proto(v: Visibility) -> envelope_pb2.Visibility:
    return envelope_pb2.Visibility(kind=int(v.kind), seats=sorted(v.seats))  # type: ignore[arg-type]


def visibility_of(envelope: envelope_pb2.EventEnvelope) -> Visibility:
    return Visibility(VisibilityKind(envelope.visibility.kind or VisibilityKind.SERVER),
                      frozenset(envelope.visibility.seats))


def match_created_envelope(
    match_id: str, created: envelope_pb2.MatchCreated, *, trace: Mapping[str, str] | None = None,
    now_ms: int | None = None,
) -> envelope_pb2.EventEnvelope:
    """Version 1 of every match. Server-only: it holds the seed, which predicts every draw."""
    env = _base(match_id, 1, created.game_id, "", -1, trace, now_ms)
    env.type = MATCH_CREATED
    env.payload_type = created.DESCRIPTOR.full_name
    env.payload = created.SerializeToString(deterministic=True)
    env.visibility.kind = envelope_pb2.VISIBILITY_SERVER
    return env


def match_cancelled_envelope(
    match_id: str, version: int, game_id: str, cancelled: envelope_pb2.MatchCancelled, *, command_id: str,
    trace: Mapping[str, str] | None = None, now_ms: int | None = None,
) -> envelope_pb2.EventEnvelope:
    """The envelope that ends a match with no result, after `version`. The server's (seat -1),
    public: every seat learns the match is over and why. Its command id is the cancel's
    idempotency key (`CommandApp.cancel_match`); it carries no `command`, so a verification
    re-runs nothing for it."""
    env = _base(match_id, version + 1, game_id, command_id, -1, trace, now_ms)
    env.type = MATCH_CANCELLED
    env.payload_type = cancelled.DESCRIPTOR.full_name
    env.payload = cancelled.SerializeToString(deterministic=True)
    env.visibility.kind = envelope_pb2.VISIBILITY_PUBLIC
    return env


def seat_change_envelope(
    match_id: str, version: int, game_id: str, change: envelope_pb2.SeatLeft | envelope_pb2.SeatReturned, *,
    command_id: str, trace: Mapping[str, str] | None = None, now_ms: int | None = None,
) -> envelope_pb2.EventEnvelope:
    """The envelope of a `seat_left` or `seat_returned`, after `version`: the seat's own
    (its envelope seat is `change.seat`), public: every seat learns who plays the seat now. It
    carries no `command`, so a verification re-runs nothing for it."""
    env = _base(match_id, version + 1, game_id, command_id, change.seat, trace, now_ms)
    env.type = SEAT_LEFT if isinstance(change, envelope_pb2.SeatLeft) else SEAT_RETURNED
    env.payload_type = change.DESCRIPTOR.full_name
    env.payload = change.SerializeToString(deterministic=True)
    env.visibility.kind = envelope_pb2.VISIBILITY_PUBLIC
    return env


def open_seat_change(envelope: envelope_pb2.EventEnvelope) -> envelope_pb2.SeatLeft | envelope_pb2.SeatReturned:
    if envelope.type == SEAT_LEFT:
        return envelope_pb2.SeatLeft.FromString(envelope.payload)
    if envelope.type == SEAT_RETURNED:
        return envelope_pb2.SeatReturned.FromString(envelope.payload)
    raise ValueError(f"event {envelope.seq} of {envelope.match_id} is {envelope.type}, not a seat change")


def open_match_cancelled(envelope: envelope_pb2.EventEnvelope) -> envelope_pb2.MatchCancelled:
    if envelope.type != MATCH_CANCELLED:
        raise ValueError(f"event {envelope.seq} of {envelope.match_id} is {envelope.type}, not match_cancelled")
    return envelope_pb2.MatchCancelled.FromString(envelope.payload)


def game_envelopes(
    engine: Engine,
    match_id: str,
    version: int,
    events: Sequence[Message],
    *,
    command_id: str = "",
    seat: int = -1,
    trace: Mapping[str, str] | None = None,
    now_ms: int | None = None,
    command: Message | None = None,
) -> list[envelope_pb2.EventEnvelope]:
    """Envelopes for events appended after `version` (seq = version + 1, + 2, ...).
    The command that caused them rides on the first one, for verification replays."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    # The fields every envelope of the batch shares are set once, serialized, and each
    # envelope starts as a parse of those bytes: twice as fast as CopyFrom of the message
    # (whose trace map is copied entry by entry), and setting them per event cost more still.
    shared = _shared(match_id, engine.info.game_id, command_id, seat, trace, ms).SerializeToString()
    start = envelope_pb2.EventEnvelope.FromString
    # The random bits of every event id in one read of the OS's random source, not one each.
    prefix, randoms = _time_part(ms), _pool.take(16 * len(events))
    visibility = engine.visibility
    out = []
    for i, event in enumerate(events):
        env = start(shared)
        env.event_id = prefix + randoms[16 * i:16 * i + 16]
        env.seq = version + i + 1
        env.type = event.WhichOneof("kind") or ""
        env.payload_type = event.DESCRIPTOR.full_name
        env.payload = event.SerializeToString(deterministic=True)
        shown = visibility(event)
        env.visibility.kind = int(shown.kind)  # type: ignore[assignment]
        if shown.seats:
            env.visibility.seats.extend(sorted(shown.seats))
        if i == 0 and command is not None:
            env.command = command.SerializeToString(deterministic=True)
        out.append(env)
    return out


def _base(match_id: str, seq: int, game_id: str, command_id: str, seat: int,
          trace: Mapping[str, str] | None, now_ms: int | None) -> envelope_pb2.EventEnvelope:
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    env = _shared(match_id, game_id, command_id, seat, trace, ms)
    env.event_id = new_event_id(ms)
    env.seq = seq
    return env


def _shared(match_id: str, game_id: str, command_id: str, seat: int, trace: Mapping[str, str] | None,
            ms: int) -> envelope_pb2.EventEnvelope:
    """The fields that do not depend on the event."""
    env = envelope_pb2.EventEnvelope()
    # Field by field: the constructor's keyword arguments cost twice as much.
    env.match_id, env.command_id, env.seat, env.game_id = match_id, command_id, seat, game_id
    stamp = env.timestamp
    stamp.seconds, millis = divmod(ms, 1000)  # Timestamp.FromMilliseconds, without its Python-level checks
    stamp.nanos = millis * 1_000_000
    if trace:  # entry by entry: the constructor's `trace=` and `update` go through MutableMapping in Python
        carrier = env.trace
        for key, value in trace.items():
            carrier[key] = value
    return env


def open_match_created(envelope: envelope_pb2.EventEnvelope) -> envelope_pb2.MatchCreated:
    if envelope.type != MATCH_CREATED:
        raise ValueError(f"event {envelope.seq} of {envelope.match_id} is {envelope.type}, not match_created")
    return envelope_pb2.MatchCreated.FromString(envelope.payload)


def open_event(engine: Engine, envelope: envelope_pb2.EventEnvelope) -> Message:
    return event_decoder(engine)(envelope.payload)


def event_decoder(engine: Engine) -> Callable[[bytes], Message]:
    """What `open_event` does to an envelope's payload, looked up once (a fold decodes every event)."""
    assert engine.info.event_type is not None
    decode: Callable[[bytes], Message] = engine.info.event_type.FromString
    return decode


def same_command(a: envelope_pb2.EventEnvelope, b: envelope_pb2.EventEnvelope) -> bool:
    """Whether two envelopes come from one command (a command's envelopes are consecutive and
    share its seat and command id; events of no command are each their own)."""
    return bool(a.command_id) and a.command_id == b.command_id and a.seat == b.seat


def unattributed(envelopes: Sequence[envelope_pb2.EventEnvelope], hidden: Sequence[bool]) -> set[int]:
    """Indices of the envelopes a viewer may see but must not see attributed (acting seat,
    command id): those of a command with another event hidden from that viewer. A hidden
    answer's public consequences (a Nothing Personal window closing) would otherwise name
    who answered, and when. `hidden[i]`: envelope i is hidden from the viewer. A command's
    envelopes are consecutive and share its seat and command id."""
    out: set[int] = set()
    start = 0
    n = len(envelopes)
    while start < n:
        first = envelopes[start]
        end = start + 1
        while end < n and same_command(first, envelopes[end]):
            end += 1
        if any(hidden[start:end]):
            out.update(i for i in range(start, end) if not hidden[i])
        start = end
    return out
