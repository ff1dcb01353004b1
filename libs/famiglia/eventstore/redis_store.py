"""Redis Streams event store: one stream per match, one Lua script per append.

Key layout (see docs/eventstore.md). Every key of a match carries the hash tag
of the match's partition, so the match stream, its version key, its command
records and its partition stream share one Redis Cluster slot and a single
script can write them all atomically:

    <prefix>:{p07}:match:<match_id>                 stream, entry id <seq>-0, field e
    <prefix>:{p07}:version:<match_id>               the match version (kept after trim);
                                                    "<position>:<version>" while events are staged
    <prefix>:{p07}:staged:<match_id>                list of staged events: (command id, envelope) pairs
    <prefix>:{p07}:cmd:<match_id>:<command_id>      "first:last" of the command's first answer
    <prefix>:{p07}:partition                        stream, field e (the envelope names match and seq)
    <prefix>:{p07}:chat:<match_id> (and chatmsg:, chatrate:)  the match's chat, no events
                                                    (`famiglia.eventstore.chat`)
    <prefix>:{p07}:rematch:<match_id>               hash: a finished match's rematch asks, no events
                                                    (`famiglia.eventstore.rematch_asks`)
    <prefix>:{p07}:rematches                        zset: the partition's finished matches whose
                                                    rematch's creation is pending (the same module)
    <prefix>:{pl:<digest>}:live                     a player's live matches, no events, under the
                                                    player's own tag (`famiglia.eventstore.player_matches`)

Only Redis 6.2 features are used: EVALSHA (redis-py `register_script`, which
reloads the script after a server restart), streams, XAUTOCLAIM, `(` ranges.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import hiredis
import redis
from redis.commands.core import Script
from redis.exceptions import NoScriptError

try:  # redis-py's hiredis parser, whose reader and buffer `_exchange` uses directly
    from redis._parsers.hiredis import NOT_ENOUGH_DATA as _NOT_ENOUGH_DATA
    from redis._parsers.hiredis import _HiredisParser
except ImportError:  # another redis-py layout: every call goes through redis-py
    _HiredisParser = None  # type: ignore[assignment,misc]
    _NOT_ENOUGH_DATA = False

from famiglia import spinwait
from famiglia.config import number
from famiglia.grpcutil.errors import store_demoted
from famiglia.heldio import send_held
from famiglia.redis_clients import connect as connect_redis
from famiglia.redis_clients import failover_of, load_script, loaded_and_run
from famiglia.spinwait import recv_polling
from famiglia.v1.envelope_pb2 import EventEnvelope

from .memory_store import validate_batch, validate_write_out
from .player_matches import player_matches_key
from .port import (
    DEFAULT_PARTITIONS,
    AppendResult,
    ConcurrencyConflict,
    EventStore,
    PartitionEntry,
    PartitionPage,
    appended,
)
from .port import partition_of as _partition_of
from .rematch_asks import RematchPending as RematchPending  # (where retention looks for it)
from .unreadable import UnreadableEntry, read_envelope, split_entries

_APPENDED, _DUPLICATE, _CONFLICT = 0, 1, 2
_TRIM_REMATCH_PENDING = -2  # trim.lua's answer for a match its rematch is made from
_KEY_CACHE = 4096  # matches whose key names an adapter remembers

def _script(name: str) -> str:
    """A script shipped inside the package (package-data `*.lua`). The rare-path scripts
    get `shared.lua` in front (Redis scripts cannot load one another); append.lua, the
    timed one, spells all it needs itself."""
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    if name == "append.lua":
        return text
    return resources.files(__package__).joinpath("shared.lua").read_text(encoding="utf-8") + text


def _stored_version(stored: bytes | None) -> int:
    """The version key's version: "<version>", or "<position>:<version>" while events are staged."""
    if stored is None:
        return 0
    return int(stored.rpartition(b":")[2])


@dataclass(frozen=True, slots=True)
class KeyLayout:
    """Names every key; the `{pNN}` hash tag keeps a match's keys in one slot."""

    prefix: str = "famiglia"
    partitions: int = DEFAULT_PARTITIONS

    def tag(self, partition: int) -> str:
        width = max(2, len(str(self.partitions - 1)))
        return f"{{p{partition:0{width}d}}}"

    def partition_of(self, match_id: str) -> int:
        return _partition_of(match_id, self.partitions)

    def match_stream(self, match_id: str) -> str:
        return f"{self.prefix}:{self.tag(self.partition_of(match_id))}:match:{match_id}"

    def version(self, match_id: str) -> str:
        return f"{self.prefix}:{self.tag(self.partition_of(match_id))}:version:{match_id}"

    def staged(self, match_id: str) -> str:
        return f"{self.prefix}:{self.tag(self.partition_of(match_id))}:staged:{match_id}"

    def command(self, match_id: str, command_id: str) -> str:
        return f"{self.prefix}:{self.tag(self.partition_of(match_id))}:cmd:{match_id}:{command_id}"

    def partition_stream(self, partition: int) -> str:
        return f"{self.prefix}:{self.tag(partition)}:partition"

    def chat(self, match_id: str) -> str:
        """The match's chat stream (`famiglia.eventstore.chat`): not an event stream."""
        return f"{self.prefix}:{self.tag(self.partition_of(match_id))}:chat:{match_id}"

    def chat_message(self, match_id: str, seat: int, message_id: str) -> str:
        return f"{self.prefix}:{self.tag(self.partition_of(match_id))}:chatmsg:{match_id}:{seat}:{message_id}"

    def chat_sends(self, match_id: str, seat: int) -> str:
        return f"{self.prefix}:{self.tag(self.partition_of(match_id))}:chatrate:{match_id}:{seat}"

    def rematch(self, match_id: str) -> str:
        """A finished match's rematch asks (`famiglia.eventstore.rematch_asks`)."""
        return f"{self.prefix}:{self.tag(self.partition_of(match_id))}:rematch:{match_id}"

    def rematches_pending(self, partition: int) -> str:
        """The partition's finished matches whose rematch's creation is pending
        (`famiglia.eventstore.rematch_asks`)."""
        return f"{self.prefix}:{self.tag(partition)}:rematches"

    def player_matches(self, player_id: str) -> str:
        """A player's live matches (`famiglia.eventstore.player_matches`): the player's own
        hash tag, not a match's partition's."""
        return player_matches_key(self.prefix, player_id)

    def partition_streams(self) -> list[str]:
        return [self.partition_stream(p) for p in range(self.partitions)]


#: Matches whose first events one pipeline asks for (`RedisEventStore.firsts`): each reply is
#: one event, a creation of a few hundred bytes.
FIRSTS_BATCH = 200

#: A stream reply with decode_responses=False: [(entry id, {field: value})].
StreamEntries = list[tuple[bytes, dict[bytes, bytes]]]


def _entries(reply: Any) -> StreamEntries:
    """redis-py types stream replies loosely (str | bytes | None); ours are always bytes."""
    return list(reply or [])


def _seq_of(entry_id: bytes | str) -> int:
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(text.split("-", 1)[0])


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _bulk(value: bytes) -> bytes:
    """One RESP bulk string."""
    return b"$%d\r\n%s\r\n" % (len(value), value)


def _pack(args: Sequence[Any]) -> bytes:
    """A command in RESP, by hiredis (redis-py's own packer adds ~8 us of checks to it)."""
    return hiredis.pack_command(tuple(args))


_PUSH = getattr(hiredis, "PushNotification", None)  # a RESP3 push, out of band (hiredis >= 3.2)


def read_reply(sock: Any, parser: Any, poll: float = 0.0) -> Any:
    """The next reply on a connected connection, from redis-py's hiredis parser's own reader
    and buffer (so redis-py can go on reading after us); a RESP3 push goes to the parser's
    push handler, as redis-py's read does, and the reply after it is returned. Reply errors
    come back as values; a closed socket raises redis-py's ConnectionError. `poll`: seconds
    to poll for the reply's first bytes before sleeping on the socket (famiglia.spinwait)."""
    reader, buffer = parser._reader, parser._buffer
    while True:
        reply = reader.gets()
        while reply is _NOT_ENOUGH_DATA:
            received = recv_polling(sock, buffer, poll) if poll else None
            if received is None:
                received = sock.recv_into(buffer)
            poll = 0.0
            if not received:
                raise redis.ConnectionError("Connection closed by server.")
            reader.feed(buffer, 0, received)
            reply = reader.gets()
        if _PUSH is None or not isinstance(reply, _PUSH):
            return reply
        parser.handle_push_response(reply)  # not an answer: what redis-py does, then read on


DEFAULT_REPLY_POLL_US = 150.0
"""An append's reply takes ~40-70 us on a quiet machine (the script runs ~40 of them)."""


def _poll_budget_us(given: float) -> float:
    """A poll budget (FAMIGLIA_REDIS_POLL_US, or `reply_poll_us`) as microseconds: a finite
    number, 0 or more."""
    try:
        value = float(given)
    except (TypeError, ValueError):
        value = math.nan
    if not 0.0 <= value < math.inf:
        raise ValueError(f"FAMIGLIA_REDIS_POLL_US must be microseconds, 0 or more (0 = never poll), not {given!r}")
    return value


def _on_this_machine(client: redis.Redis) -> bool:
    """Whether the client's Redis listens on this machine: a Unix socket or a loopback address."""
    kwargs = client.connection_pool.connection_kwargs
    if kwargs.get("path"):
        return True
    host = str(kwargs.get("host", ""))
    return host == "localhost" or host.startswith("127.") or host == "::1"


_process_generation = 0
"""Counts forks into this process: a kept connection from before a fork is the parent's.
(Read per append instead of `os.getpid()`, which is a system call on every glibc since 2.25.)"""


def _forked() -> None:
    global _process_generation
    _process_generation += 1


os.register_at_fork(after_in_child=_forked)


def _exchange(conn: Any, request: bytes, poll: float = 0.0) -> Any:
    """`send_packed_command` then `read_response` on a kept connection: once it is connected
    with redis-py's hiredis parser, the bytes go to its socket and the reply comes out of
    its hiredis reader here, without redis-py's Python layers around them (~11k
    instructions a call, as much as the rest of an append's client side). The same replies
    and errors: a reply error is raised as redis-py raises it (NOSCRIPT as NoScriptError),
    a RESP3 push goes to the parser's push handler as redis-py's read does, a socket error
    is an OSError (the caller treats it like redis-py's ConnectionError), an unparsable
    reply raises InvalidResponse. A connection not yet connected, or another parser, goes
    through redis-py."""
    sock = conn._sock
    parser = conn._parser
    if sock is None or type(parser) is not _HiredisParser:
        conn.send_packed_command([request], check_health=False)
        return conn.read_response()
    sent = send_held(sock, request)  # a send that cannot wait keeps the GIL (famiglia.heldio)
    if sent < len(request):
        sock.sendall(request[sent:] if sent else request)
    reply = read_reply(sock, parser, poll)
    if isinstance(reply, Exception):  # a reply error, as parse_error made it
        raise reply
    if type(reply) is list and reply and isinstance(reply[0], redis.ConnectionError):
        raise reply[0]  # what redis-py's parser does with such a reply
    return reply


class RedisEventStore(EventStore):
    """The production adapter; build it with `connect()`.

    The client must not decode responses (envelopes are raw protobuf bytes)
    and must not time out a socket read before a `wait_for` block ends, hence
    `socket_timeout=None` by default. Appends are safe to retry after a lost
    reply: a retried append either finds its command id (duplicate answer) or
    a moved version (ConcurrencyConflict); it can never be written twice.
    """

    def __init__(
        self,
        client: redis.Redis,
        partitions: int = DEFAULT_PARTITIONS,
        prefix: str = "famiglia",
        partition_maxlen: int | None = None,
        reply_poll_us: float | None = None,
    ) -> None:
        if partitions < 1:
            raise ValueError("partitions must be >= 1")
        self.client = client
        self.partitions = partitions
        self.keys = KeyLayout(prefix=prefix, partitions=partitions)
        self.partition_maxlen = partition_maxlen
        self._append_script: Script = client.register_script(_script("append.lua"))
        self._evalsha = b"$7\r\nEVALSHA\r\n" + _bulk(self._append_script.sha.encode())
        self._stage_script: Script = client.register_script(_script("stage.lua"))
        self._write_out_script: Script = client.register_script(_script("write_out.lua"))
        self._trim_script: Script = client.register_script(_script("trim.lua"))
        self._append_keys: dict[str, tuple[bytes, bytes]] = {}
        self._idle: list[Any] = []  # connections kept between appends, see _send
        self._generation = _process_generation  # which process's sockets `_idle` holds
        self._failover = failover_of(client)  # its pool's, when it follows one (`connect`'s does)
        budget = reply_poll_us
        if budget is None:
            # a reply over the network comes long after any poll would have given up; a bad
            # setting stops the service with a line naming it, as every setting does
            budget = number("FAMIGLIA_REDIS_POLL_US", DEFAULT_REPLY_POLL_US if _on_this_machine(client) else 0.0)
        self.reply_poll = _poll_budget_us(budget) / 1e6
        self._idle_cpus = spinwait.machine() if self.reply_poll else None

    def _reply_poll(self) -> float:
        """How long an append polls for Redis's reply before it sleeps on the socket: the
        store's budget while the machine has idle CPUs, else 0 (famiglia.spinwait says
        why). Only appends poll: their reply is due within tens of
        microseconds, where a blocking read (XREAD BLOCK) may wait for seconds."""
        idle_cpus = self._idle_cpus
        if idle_cpus is None or not idle_cpus.poll_now(time.perf_counter()):
            return 0.0
        return self.reply_poll

    @classmethod
    def connect(
        cls,
        url: str,
        partitions: int = DEFAULT_PARTITIONS,
        prefix: str = "famiglia",
        *,
        partition_maxlen: int | None = None,
        socket_timeout: float | None = None,
        socket_connect_timeout: float = 5.0,
        reply_poll_us: float | None = None,
    ) -> RedisEventStore:
        """A store on its own connection pool (no I/O happens until the first call).

        `partition_maxlen` caps each partition stream approximately (MAXLEN ~);
        leave it None unless every consumer group is known to keep up, since
        entries trimmed before delivery never reach the projection. `reply_poll_us`: how
        long an append may poll for its reply (`FAMIGLIA_REDIS_POLL_US`; by default 150 for
        a Redis on this machine and 0, never, for one across the network; see `_reply_poll`).
        """
        client = connect_redis(  # one that follows a failover (famiglia.redis_clients)
            url,
            decode_responses=False,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_connect_timeout,
        )
        return cls(client, partitions=partitions, prefix=prefix, partition_maxlen=partition_maxlen,
                   reply_poll_us=reply_poll_us)

    def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            self.client.connection_pool.release(conn)
        self.client.close()

    @property
    def partition_maxlen(self) -> int | None:
        return self._partition_maxlen

    @partition_maxlen.setter
    def partition_maxlen(self, value: int | None) -> None:
        self._partition_maxlen = value
        self._maxlen_arg = _bulk(b"%d" % (value or 0))  # ARGV[4] of every append, spelled once

    # -- the port -------------------------------------------------------------------------
    def append(
        self,
        match_id: str,
        expected_version: int,
        events: Sequence[EventEnvelope],
        command_id: str = "",
    ) -> AppendResult:
        validate_batch(match_id, expected_version, events)
        keys = self._append_keys.get(match_id) or self._keys_of(match_id)
        try:
            request = self._append_request(keys, expected_version, events, command_id)
            reply = self._send(request, self._reply_poll())
        except NoScriptError:  # (after SCRIPT FLUSH, a restart, a failover)
            reply = self._append_loaded(keys, expected_version, events, command_id)
        if type(reply) is int:  # appended, `reply` events (append.lua names its three replies)
            return appended(expected_version + reply, expected_version + 1, expected_version + reply)
        if isinstance(reply, bytes):  # a duplicate command: its record, "first:last"
            first, last = reply.split(b":")
            return AppendResult(int(last), int(first), int(last), duplicate=True)
        raise ConcurrencyConflict(match_id, expected_version, int(reply[0]))

    def stage(
        self,
        match_id: str,
        expected_version: int,
        events: Sequence[EventEnvelope],
        command_id: str = "",
    ) -> AppendResult:
        """stage.lua through redis-py: staging is rare (a card window's answers), so it
        takes the plain path, not the append's hand-spelled request."""
        validate_batch(match_id, expected_version, events)
        if expected_version == 0:
            raise ValueError(f"match {match_id}: nothing to stage on before its first event")
        layout = self.keys
        keys = [layout.match_stream(match_id), layout.version(match_id), layout.staged(match_id)]
        if command_id:
            keys.append(layout.command(match_id, command_id))
        reply = self._stage_script(keys=keys, args=[expected_version, command_id,
                                                    *(event.SerializeToString() for event in events)])
        if type(reply) is int:
            return appended(expected_version + reply, expected_version + 1, expected_version + reply)
        if isinstance(reply, bytes):
            first, last = reply.split(b":")
            return AppendResult(int(last), int(first), int(last), duplicate=True)
        raise ConcurrencyConflict(match_id, expected_version, int(reply[0]))

    def write_out(
        self,
        match_id: str,
        expected_version: int,
        block: Sequence[EventEnvelope],
        placed: Sequence[int],
        events: Sequence[EventEnvelope],
        command_id: str = "",
    ) -> AppendResult:
        """write_out.lua through redis-py: as rare as staging, and kept out of append.lua, whose
        every call is on the common path (docs/eventstore.md)."""
        version = validate_write_out(match_id, expected_version, block, placed, events)
        layout = self.keys
        keys = [layout.match_stream(match_id), layout.version(match_id),
                layout.partition_stream(self.partition_of(match_id)), layout.staged(match_id)]
        if command_id:
            keys.append(layout.command(match_id, command_id))
        args: list[bytes | str | int] = [expected_version, command_id, self.partition_maxlen or 0, len(placed),
                                         *placed, len(block),
                                         *(event.SerializeToString() for event in [*block, *events])]
        try:
            reply = self._write_out_script(keys=keys, args=args)
        except redis.ResponseError as exc:
            if "staged" not in str(exc):
                raise
            raise ValueError(f"match {match_id}: {exc}") from None
        if type(reply) is int:
            start = version + len(block) + 1
            return appended(start + reply - 1, start, start + reply - 1)
        if isinstance(reply, bytes):
            first, last = reply.split(b":")
            return AppendResult(int(last), int(first), int(last), duplicate=True)
        raise ConcurrencyConflict(match_id, expected_version, int(reply[0]))

    def read_staged(self, match_id: str, after: int = 0) -> list[EventEnvelope]:
        pairs: list[bytes] = self.client.lrange(self.keys.staged(match_id), 0, -1)  # type: ignore[assignment]
        envelopes = [EventEnvelope.FromString(blob) for blob in pairs[1::2]]
        return [envelope for envelope in envelopes if envelope.seq > after]

    def _keys_of(self, match_id: str) -> tuple[bytes, bytes]:
        """The match's part of an append request, remembered: a match appends hundreds of
        times and each name costs a crc32 and four f-strings. The three keys are kept as
        RESP bulk strings, the command record's key as its prefix."""
        if len(self._append_keys) >= _KEY_CACHE:
            self._append_keys.clear()  # bounded; rebuilding is cheap
        layout = self.keys
        names = (layout.match_stream(match_id), layout.version(match_id),
                 layout.partition_stream(self.partition_of(match_id)))
        keys = (b"".join([_bulk(name.encode()) for name in names]), layout.command(match_id, "").encode())
        self._append_keys[match_id] = keys
        return keys

    def _append_loaded(self, keys: tuple[bytes, bytes], expected_version: int,
                       events: Sequence[EventEnvelope], command_id: str) -> Any:
        """The append's reply once its EVALSHA met NOSCRIPT: the script loaded and the append run
        again, as every script of a client following a failover is (`loaded_and_run`). A method
        of its own: a closure in `append` would make its locals cells, on every append."""
        return loaded_and_run(lambda: self._send(self._append_request(keys, expected_version, events, command_id)),
                              self._load_append_script)

    def _load_append_script(self, again: bool) -> None:
        """(Re)load append.lua and spell its EVALSHA head. `again`: NOSCRIPT once more right after
        a load, which went to another node than the append (a failover left this store's
        connections on two nodes: the new primary never had the script, scripts are not
        replicated; a pooled connection still on the demoted node loaded it there, and nothing
        refused it READONLY): every connection is made again first (`load_script`), the kept ones
        at their next append, and the append runs once more on the new primary. Before, it was
        NOSCRIPT (INTERNAL) at every append while those stayed."""
        script = self._append_script
        load_script(self.client, script, again)
        self._evalsha = b"$7\r\nEVALSHA\r\n" + _bulk(script.sha.encode())

    def _append_request(self, keys: tuple[bytes, bytes], expected_version: int,
                        events: Sequence[EventEnvelope], command_id: str) -> bytes:
        """The EVALSHA request, KEYS and ARGV as append.lua lists them, spelled in RESP here.

        Not redis-py's packer: its checks of every argument cost more client time than the
        script's server time, and most of the request (the script, the keys, MAXLEN) is the
        same for every append of a match, so it is spelled once."""
        key_part, command_prefix = keys
        expected, first = b"%d" % expected_version, b"%d" % (expected_version + 1)
        command = command_id.encode()
        if len(events) == 1:
            data = events[0].SerializeToString()
            events_part = b"$%d\r\n%s\r\n" % (len(data), data)
        else:
            events_part = b"".join([_bulk(event.SerializeToString()) for event in events])
        if command:
            return b"*%d\r\n%s$1\r\n4\r\n%s$%d\r\n%s%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n%s%s" % (
                11 + len(events), self._evalsha, key_part, len(command_prefix) + len(command), command_prefix,
                command, len(expected), expected, len(first), first, len(command), command, self._maxlen_arg,
                events_part)
        return b"*%d\r\n%s$1\r\n3\r\n%s$%d\r\n%s\r\n$%d\r\n%s\r\n$0\r\n\r\n%s%s" % (
            10 + len(events), self._evalsha, key_part, len(expected), expected, len(first), first,
            self._maxlen_arg, events_part)

    def _call(self, args: Sequence[Any], poll: float = 0.0) -> Any:
        """One command, packed the usual way, sent like an append (see _send)."""
        return self._send(_pack(args), poll)

    def _send(self, request: bytes, poll: float = 0.0) -> Any:
        """One packed command on a connection the store keeps for itself between calls.

        `execute_command` checks a connection out of the pool (a lock and a poll for stray
        data) and back, through a retry wrapper: ~20 us of client CPU, a quarter of an
        append's. A kept connection is handed back only after a complete reply, so it
        never holds stray data. On a connection error it is dropped and the request goes
        out again on a fresh connection with redis-py's reconnect and retry (an append is
        safe to retry: it finds its command id or a moved version). The request and reply
        themselves go through `_exchange` (`poll`: see `_reply_poll`)."""
        idle = self._idle
        if self._generation != _process_generation:  # forked: the parent's sockets are not ours
            idle.clear()
            self._generation = _process_generation
        try:
            conn = idle.pop()
        except IndexError:
            conn = self.client.connection_pool.get_connection()
        failover = self._failover
        if failover is not None and conn.followed != failover.drops:
            conn.disconnect()  # open when the pool dropped its connections (a READONLY): made again
        try:
            reply = _exchange(conn, request, poll)
        except (OSError, redis.ConnectionError, redis.TimeoutError):
            conn.disconnect()
            self.client.connection_pool.release(conn)
            return self._send_retried(request)
        except redis.ResponseError as exc:
            if failover is not None and store_demoted(exc):
                failover.demoted(conn)  # a replica's READONLY, past redis-py's read_response
            idle.append(conn)  # a complete error reply: the connection is clean
            raise
        except BaseException:
            conn.disconnect()  # cut off mid-reply: whatever is left on the socket is stale
            self.client.connection_pool.release(conn)
            raise
        idle.append(conn)
        return reply

    def _send_retried(self, request: bytes) -> Any:
        """What `execute_command` does with a connection error: retry on a fresh connection
        per the client's retry policy, disconnecting between attempts."""
        pool = self.client.connection_pool
        conn = pool.get_connection()

        def attempt() -> Any:
            conn.send_packed_command([request], check_health=False)
            return conn.read_response()

        try:
            return conn.retry.call_with_retry(attempt, lambda _error: conn.disconnect())
        finally:
            pool.release(conn)

    def read(self, match_id: str, after: int = 0, limit: int | None = None) -> list[EventEnvelope]:
        if limit is not None and limit < 0:
            raise ValueError("limit must be >= 0")
        if limit == 0:
            return []
        entries = _entries(self.client.xrange(self.keys.match_stream(match_id), min=f"{after + 1}-0", count=limit))
        return [EventEnvelope.FromString(fields[b"e"]) for _id, fields in entries]

    def version(self, match_id: str) -> int:
        """The version key is the truth (it outlives trim); the stream top heals a lost key."""
        stream, version_key = self.keys.match_stream(match_id), self.keys.version(match_id)
        with self.client.pipeline(transaction=True) as pipe:
            pipe.get(version_key)
            pipe.xrevrange(stream, count=1)
            stored, top = pipe.execute()
        top = _entries(top)
        version = _stored_version(stored)
        if top:
            version = max(version, _seq_of(top[0][0]))
        return version

    def wait_for(self, match_id: str, after: int, timeout_ms: int) -> list[EventEnvelope]:
        """XREAD BLOCK from the explicit id `<after>-0`: existing events return at once.

        Reading from an explicit id (not `$`) means an append landing between
        a caller's read and this call is never missed. BLOCK 0 would wait
        forever, so a non-positive timeout is a plain read.
        """
        if timeout_ms <= 0:
            return self.read(match_id, after)
        stream = self.keys.match_stream(match_id)
        reply: Any = self.client.xread({stream: f"{after}-0"}, block=timeout_ms)
        if not reply:
            return []
        entries = _entries(reply[0][1])
        return [EventEnvelope.FromString(fields[b"e"]) for _id, fields in entries]

    def read_partition(
        self, partition: int, after_entry_id: str = "0-0", count: int = 100
    ) -> list[PartitionEntry]:
        return self.read_partition_page(partition, after_entry_id, count).entries

    def read_partition_page(self, partition: int, after_entry_id: str = "0-0", count: int = 100) -> PartitionPage:
        """XRANGE from `(after_entry_id`, COUNT `count`; an entry no event can be read from (a foreign
        XADD's) goes to `unreadable`, and the page still ends at the last entry read (before
        session 34 such an entry failed the read, and every rebuild, replay index catch-up and bots
        recovery that met it)."""
        if not 0 <= partition < self.partitions:
            raise ValueError(f"partition {partition} out of range 0..{self.partitions - 1}")
        raw = _entries(
            self.client.xrange(self.keys.partition_stream(partition), min=f"({after_entry_id}", count=count)
        )
        unreadable: list[UnreadableEntry] = []
        entries = [PartitionEntry(partition=partition, entry_id=entry_id, envelope=envelope)
                   for entry_id, envelope in split_entries(partition, raw, unreadable)]
        return PartitionPage(entries, unreadable, _text(raw[-1][0]) if raw else after_entry_id, len(raw) >= count)

    def partition_tops(self) -> dict[int, PartitionEntry]:
        """Each non-empty partition stream's newest entry, in one pipelined round trip (one no
        event can be read from, a foreign XADD's: an empty envelope at its entry id's time)."""
        with self.client.pipeline(transaction=False) as pipe:
            for partition in range(self.partitions):
                pipe.xrevrange(self.keys.partition_stream(partition), count=1)
            tops = pipe.execute()
        out = {}
        for partition, top in enumerate(tops):
            for entry_id, fields in _entries(top):
                out[partition] = PartitionEntry(partition=partition, entry_id=_text(entry_id),
                                                envelope=envelope_or_time(entry_id, fields))
        return out

    # -- extras for the services ----------------------------------------------------------
    def match_ids(self, cursor: int = 0, count: int = 500) -> tuple[int, list[str]]:
        """SCAN for the version keys (one for every match ever created, kept after trim): the
        walk reads every key of the keyspace, `count` a call, without blocking Redis. The cursor
        is Redis's own, good for a walk resumed on the same server."""
        prefix = self.keys.prefix
        pattern = "".join("\\" + c if c in "*?[]\\" else c for c in prefix) + ":{p*}:version:*"
        cursor, found = self.client.scan(cursor, match=pattern, count=count)
        ids = []
        for key in found:
            name = _text(key)
            head, sep, match_id = name.partition("}:version:")
            if sep and match_id and head.startswith(prefix + ":{p") and self.keys.version(match_id) == name:
                ids.append(match_id)
        return int(cursor), ids

    def firsts(self, match_ids: Sequence[str]) -> dict[str, EventEnvelope]:
        """One XRANGE ... COUNT 1 a match, pipelined FIRSTS_BATCH at a time: a backfill's page of
        500 matches costs a few round trips, not 500."""
        found = {}
        for start in range(0, len(match_ids), FIRSTS_BATCH):
            batch = match_ids[start:start + FIRSTS_BATCH]
            with self.client.pipeline(transaction=False) as pipe:
                for match_id in batch:
                    pipe.xrange(self.keys.match_stream(match_id), count=1)
                replies = pipe.execute()
            for match_id, reply in zip(batch, replies, strict=True):
                first = _entries(reply)
                if first:
                    found[match_id] = EventEnvelope.FromString(first[0][1][b"e"])
        return found

    def partitions_keys(self) -> list[str]:
        """The partition stream keys, index = partition (for consumer groups)."""
        return self.keys.partition_streams()

    def trim(self, match_id: str, attempts: int = 5) -> int:
        """Delete a finished (archived) match's stream; returns how many events were dropped.

        The version key stays, so the match still refuses stale appends and
        `version()` / `exists()` keep answering; `read()` returns [] (replay
        reads the SQL archive). The command records go with the stream: a
        command retried after the trim meets ConcurrencyConflict instead of
        its first answer, which is harmless for a finished match and keeps
        Redis from growing with every command ever played. The match's chat
        stream goes too. Partition stream entries stay (consumer groups own them).

        A match whose rematch's creation is pending (`famiglia.eventstore.rematch_asks`) is
        kept: RematchPending, nothing dropped. The script looks, so a table completing after a
        caller's own look keeps it too.
        """
        stream = self.keys.match_stream(match_id)
        rematch = [self.keys.rematches_pending(self.keys.partition_of(match_id)), self.keys.rematch(match_id)]
        for _ in range(max(attempts, 1)):  # retried only if the match moves while we trim
            version = self.version(match_id)
            command_keys = sorted({self.keys.command(match_id, cid) for cid in self._command_ids(stream)})
            # the match's chat goes with it (no export keeps chat: a trimmed match's is read by nobody)
            dropped = int(self._trim_script(keys=[stream, self.keys.version(match_id), *rematch,
                                                  self.keys.chat(match_id), *command_keys], args=[version, match_id]))
            if dropped == _TRIM_REMATCH_PENDING:
                raise RematchPending(match_id)
            if dropped >= 0:
                return dropped
        raise ConcurrencyConflict(match_id, version, self.version(match_id))

    def _command_ids(self, stream: str, chunk: int = 1000) -> set[str]:
        """Command ids recorded in a match stream (field `c` on each batch's first entry)."""
        found: set[str] = set()
        start = "-"
        while True:
            entries = _entries(self.client.xrange(stream, min=start, count=chunk))
            for _id, fields in entries:
                command_id = fields.get(b"c")
                if command_id:
                    found.add(command_id.decode())
            if len(entries) < chunk:
                return found
            start = f"({_text(entries[-1][0])}"


def envelope_or_time(entry_id: bytes | str, fields: dict[bytes, bytes]) -> EventEnvelope:
    """A partition entry's envelope; for one no event can be read from (no `e` field, bytes that do
    not decode, or decode to no event: only a foreign XADD writes one), an empty envelope at the
    entry id's time, which is when it was added: enough for a stream's top or first entry (the
    lag), where such an entry once failed the measure, and with it the projection's round, until a
    real entry followed it. (An empty `e` once gave a time of 0: a lag of some 56 years.)"""
    try:
        return read_envelope(fields[b"e"])
    except Exception:  # noqa: BLE001 - whatever a foreign XADD wrote
        envelope = EventEnvelope()
        envelope.timestamp.FromMilliseconds(int(_text(entry_id).split("-", 1)[0]))
        return envelope
