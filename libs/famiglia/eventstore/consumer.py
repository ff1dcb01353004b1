"""Consumer groups over the partition streams (projection, bots, archivers).

At-least-once delivery: an entry stays in the group's pending list until the
caller acks it *after* committing its own work, and entries left pending by a
consumer that died are taken over with XAUTOCLAIM once idle long enough. So a
handler must be idempotent per (match id, seq) — both travel in the envelope.

Entries of one partition reach a group's consumers in stream order, but two
consumers of one group may split one partition; a handler that needs strict
per-match order should own whole partitions (`partitions=[...]`).

Not for a Redis Cluster yet: a read over several partitions is one XREADGROUP over
several slots, and `read` goes through a connection kept from a single-node client's
pool. Only the hold scripts (`hold`, `hold_pending`) are cluster-safe (docs/eventstore.md).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from typing import Any

import redis
from redis.exceptions import NoScriptError, ResponseError

try:  # redis-py's hiredis parser, whose reader and buffer `exchange` reads directly
    from redis._parsers.hiredis import _HiredisParser
except ImportError:  # another redis-py layout: every call goes through redis-py
    _HiredisParser = None  # type: ignore[assignment,misc]

from famiglia.grpcutil.errors import store_demoted
from famiglia.redis_clients import LOADS, failover_of, load_script
from famiglia.telemetry import get_logger
from famiglia.v1.envelope_pb2 import EventEnvelope

from .port import PartitionEntry, PartitionRead, entry_key
from .redis_store import KeyLayout, RedisEventStore, read_reply
from .unreadable import NotAnEvent, UnreadableEntry, split_entries, tell_unreadable

log = get_logger("famiglia.eventstore.consumer")


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _bulk(value: bytes) -> bytes:
    """One RESP bulk string."""
    return b"$%d\r\n%s\r\n" % (len(value), value)


def exchange(conn: Any, request: bytes, replies: int, *, check: bool = True) -> list[Any]:
    """Send `request` (`replies` commands, packed) on a kept connection and read their replies.

    Once the connection is connected with redis-py's hiredis parser, the bytes go to its
    socket in one write and the replies come out of its hiredis reader here, without
    redis-py's Python layers around each (~3k instructions a reply, as much again for
    `send_packed_command`). Every reply is read before any reply error is raised (or, with
    `check=False`, returned in its place), so the connection stays in step; a RESP3 push
    goes to the parser's push handler as redis-py's read does; a socket error is an
    OSError, a closed socket redis-py's ConnectionError. A connection not yet connected,
    or another parser, goes through redis-py."""
    sock, parser = conn._sock, conn._parser
    if sock is None or _HiredisParser is None or type(parser) is not _HiredisParser:
        conn.send_packed_command([request], check_health=False)
        answers = []
        for _ in range(replies):
            try:
                answers.append(conn.read_response())
            except ResponseError as error:  # redis-py raises a reply error: keep reading the rest
                answers.append(error)
    else:
        sock.sendall(request)
        answers = [read_reply(sock, parser) for _ in range(replies)]
    if check:
        for reply in answers:
            if isinstance(reply, Exception):  # a reply error, as redis-py's parser made it
                raise reply
    return answers


_exchange = exchange
HOLD_PAGE = 500
"""Entries `hold_pending` holds a partition per script, and ids `hold` sends a script: a script runs with Redis blocked for every
client, about 3 us an entry held (XPENDING and XCLAIM JUSTID, each claim propagated on its own),
so 500 is ~1.6 ms, in line with `claim_stale`'s XAUTOCLAIM of a few hundred; session 33's first
5,000 was ~16 ms, every partition's script back to back in one pipeline (docs/performance-projection.md)."""
_MULTI = b"*1\r\n$5\r\nMULTI\r\n"
_EXEC = b"*1\r\n$4\r\nEXEC\r\n"


class PartitionConsumer:
    """One named consumer of one group, reading some or all partition streams."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeyLayout,
        group: str,
        consumer: str,
        partitions: Sequence[int] | None = None,
    ) -> None:
        self.client = client
        self.group = group
        self.consumer = consumer
        self.partitions = list(range(keys.partitions)) if partitions is None else list(partitions)
        if not self.partitions:
            raise ValueError("a consumer needs at least one partition")
        for partition in self.partitions:
            if not 0 <= partition < keys.partitions:
                raise ValueError(f"partition {partition} out of range 0..{keys.partitions - 1}")
        self._key_of = {p: keys.partition_stream(p) for p in self.partitions}
        self._partition_of = {key.encode(): p for p, key in self._key_of.items()}
        self._groups_ready = False
        self.start_id = "0"
        """Where the group starts when this consumer creates it: the last `ensure_groups`' start, used
        again when a read finds the group gone (`NOGROUP`): the bots dispatcher's starts at `$`
        (before session 34 a group found gone was made again from `0`, whatever its owner chose, so the
        dispatcher's went through every partition entry still in Redis again)."""
        self._own: Any = None
        """A pool connection kept for new reads (see `_read_new`), with the pid that took it."""
        self._own_pid = 0
        self._own_lock = threading.Lock()
        self._failover = failover_of(client)  # its pool's, when it follows one (famiglia.redis_clients)
        self._packed_reads: dict[tuple[int, int | None], bytes] = {}
        self._ack_heads = {p: b"$4\r\nXACK\r\n" + _bulk(key.encode()) + _bulk(group.encode())
                           for p, key in self._key_of.items()}
        """Each partition's `XACK <stream> <group>`, packed once: a read carrying acks adds the ids."""
        self._hold_script = client.register_script(_lua("hold.lua"))
        self._hold_pending_script = client.register_script(_lua("hold_pending.lua"))
        self._forget_script = client.register_script(_lua("forget_consumer.lua"))
        """Sent by `_scripts` (EVALSHA, loaded on NOSCRIPT), not called."""
        self._last_new: dict[int, tuple[int, int]] = {}
        """Each partition's last entry id a read of new entries (`>`) gave this consumer."""
        self.on_unreadable: Callable[[list[UnreadableEntry]], None] | None = None
        """Told of the entries a read or a claim found unreadable (`UnreadableEntry`), before they
        are acked (the projection records them as dead letters); should it raise, they are not acked,
        and come back to a claim. Either way they are left out of what the read returns."""
        self.unreadable = 0
        """How many unreadable entries this consumer acked."""
        self.reconnects = 0
        """How often the connection kept for reads broke under a read, the groups were gone, or a
        read of new entries gave an entry not past one it gave before (the group was recreated by
        another consumer, or set back): the server may be another one since (restarted, failed
        over) that lost acknowledged writes, or the entries a caller keeps from earlier reads may
        be pending under no one, to be delivered again, perhaps to another consumer (read them
        again: `read_pending`)."""

    @classmethod
    def for_store(
        cls, store: RedisEventStore, group: str, consumer: str, partitions: Sequence[int] | None = None
    ) -> PartitionConsumer:
        """Share the store's connection pool and key layout."""
        return cls(store.client, store.keys, group, consumer, partitions)

    def ensure_groups(self, start_id: str | None = None) -> None:
        """Create the group on every partition stream (MKSTREAM); existing groups are kept.

        `start_id="0"` lets a new group see the whole history (a projection
        rebuilding from scratch); "$" starts at new entries only. Kept (`start_id`) for the
        group's creation again after it vanished; None: the one kept (at first `"0"`).
        """
        if start_id is None:
            start_id = self.start_id
        self.start_id = start_id
        for key in self._key_of.values():
            try:
                self.client.xgroup_create(key, self.group, id=start_id, mkstream=True)
            except ResponseError as error:
                if "BUSYGROUP" not in str(error):
                    raise
        self._groups_ready = True
        self._last_new = {}  # a group created here starts again from `start_id`

    def read(self, count: int = 100, block_ms: int | None = None, *, ack: Iterable[PartitionEntry] = (),
             before_ack: Sequence[bytes] = ()) -> list[PartitionEntry]:
        """New entries for this consumer (XREADGROUP `>`), at most `count` per partition.

        `block_ms` waits for the first entry on any partition; None (or <= 0)
        does not wait — BLOCK 0 would wait forever.

        `ack`: entries whose work the caller has already made durable, acked in the
        same round trip, before the read (XACK then XREADGROUP on one connection,
        which Redis runs in that order). A consumer that acks each batch just
        before reading the next saves one round trip a batch; should the call fail,
        those entries stay pending and are redone, as with a failed `ack`.

        `before_ack`: packed commands (one each) that are the work itself — the bots
        dispatcher's task push — sent in the same round trip as `MULTI, <them>, XACK…,
        EXEC, XREADGROUP`, so the acks take effect only with them: a command refused
        when queued (out of memory) aborts the transaction, nothing is acked; an error
        while running one (a key of the wrong type) is raised, though the acks ran. Any
        failure raises, with no fall-back to the client (whether they ran is then
        unknown): the caller does its work again and re-reads its pending entries, which
        include any this read delivered before failing.
        """
        block = block_ms if block_ms and block_ms > 0 else None
        acks = self._ids_by_partition(ack)
        self._ensure_ready()
        if before_ack:
            with self._own_lock:
                return self._read_new(count, block, acks, before_ack)
        if self._own_lock.acquire(blocking=False):
            try:
                return self._read_new(count, block, acks)
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
                self.reconnects += 1  # the kept connection broke: once more through the client, which retries
            finally:
                self._own_lock.release()
        streams = {key: ">" for key in self._key_of.values()}
        return self._read_group(streams, count, block, acks, new=True)

    def read_pending(self, count: int = 100, *, after: Mapping[int, str] | None = None,
                     ack: Iterable[PartitionEntry] = ()) -> list[PartitionEntry]:
        """This consumer's own unacked entries (XREADGROUP from an id, not `>`): what a restarted
        consumer redoes. At most `count` per partition, oldest first, each delivered again (its
        idle time back to 0). `after`: only those partitions, on from those ids (where a read came
        back full: `full_partitions`), so entries still pending before them are not read again.
        `ack` is acked first, in the same round trip."""
        start = dict.fromkeys(self.partitions, "0") if after is None else after
        return self._read_group({self._key_of[p]: entry_id for p, entry_id in start.items()}, count, None,
                                self._ids_by_partition(ack))

    def ack(self, entries: Iterable[PartitionEntry]) -> int:
        """XACK after the caller committed, every partition in one pipelined round trip (a batch
        touches many partitions, and on a busy machine each round trip is a wait to be scheduled
        again); returns how many entries were still pending."""
        by_partition = self._ids_by_partition(entries)
        if not by_partition:
            return 0
        with self.client.pipeline(transaction=False) as pipe:
            self._queue_acks(pipe, by_partition)
            return sum(int(n) for n in pipe.execute())

    def claim_stale(self, min_idle_ms: int, count: int = 100) -> list[PartitionEntry]:
        """Take over entries other consumers left pending for at least `min_idle_ms` (XAUTOCLAIM).

        Entries deleted from the stream meanwhile (MAXLEN) come back without
        fields and are skipped: there is nothing left to process. A partition whose group is gone
        (`NOGROUP`) has nothing to take over: the next `read` creates the group again. (Before, the
        claim raised, and a caller claiming each round before it reads never read again: with
        `claim_every_s` 0 the projection stopped for good once its group vanished.)
        """
        self._ensure_ready()
        claimed: list[PartitionEntry] = []
        unreadable: list[UnreadableEntry] = []
        for partition, key in self._key_of.items():
            cursor: bytes | str = "0-0"
            while len(claimed) < count:
                try:
                    reply = self.client.xautoclaim(
                        key, self.group, self.consumer, min_idle_ms, start_id=cursor, count=count - len(claimed)
                    )
                except ResponseError as error:
                    if "NOGROUP" not in str(error):
                        raise
                    break
                cursor, entries = reply[0], reply[1]
                claimed.extend(self._entries(partition, entries, unreadable))
                if _text(cursor) == "0-0":
                    break
        self._settle_unreadable(unreadable)
        return claimed

    def hold(self, entries: Iterable[PartitionEntry]) -> tuple[list[PartitionEntry], list[PartitionEntry]]:
        """Keep entries this consumer still works on (pending under it, not acked yet) from being
        taken over: their idle time goes back to 0, so no `claim_stale` of the group, this
        consumer's own included, takes them while it holds them at shorter intervals than the
        claimers' `min_idle_ms`. Returns (taken, gone), the entries that are not this consumer's
        any more: those another consumer holds by now (this one stalled past that idle time),
        theirs to finish; and those the group will deliver again, to whichever consumer: pending
        under no one past its last delivered id (recreated: its new pending list lacks them until
        it delivers them again), or all of a group gone (`NOGROUP`: the next read recreates it).
        Either way keeping them would have two consumers work on them. One pending under no one
        that the group has delivered (acked since, by one that had it too; or its record dropped:
        its consumer deleted, its stream entry trimmed) is neither: the group delivers it to no
        one again, so the consumer keeping it finishes it (a projected one is no work twice: the
        handler is idempotent), rather than its match waiting behind it for good (session 33's
        first hold forgot those too). One script per partition
        (`hold.lua`: the owner checked and the XCLAIM JUSTID in one step, so an entry just taken
        over is never taken back; `HOLD_PAGE` ids a call), pipelined in one round trip."""
        entries = list(entries)
        by_partition = [(p, ids[i:i + HOLD_PAGE])  # a script blocks Redis: `HOLD_PAGE` ids a call
                        for p, ids in sorted(self._ids_by_partition(entries).items())
                        for i in range(0, len(ids), HOLD_PAGE)]
        if not by_partition:
            return [], []
        self._ensure_ready()
        replies = self._scripts(self._hold_script, [([self._key_of[p]], [self.group, self.consumer, *ids])
                                                    for p, ids in by_partition])
        taken: set[tuple[int, str]] = set()
        gone: set[tuple[int, str]] = set()
        for (partition, ids), reply in zip(by_partition, replies, strict=True):
            if isinstance(reply, ResponseError) and "NOGROUP" in str(reply):
                gone.update((partition, entry_id) for entry_id in ids)
                continue
            if isinstance(reply, Exception):
                raise reply
            taken.update((partition, _text(entry_id)) for entry_id in reply[0])
            gone.update((partition, _text(entry_id)) for entry_id in reply[1])
        return ([e for e in entries if (e.partition, e.entry_id) in taken],
                [e for e in entries if (e.partition, e.entry_id) in gone])

    def hold_pending(self, page: int = HOLD_PAGE) -> int:
        """Hold every entry pending under this consumer, read back or not (`hold`, for entries
        not in memory yet): a consumer restarted under its name does this first, before any of
        its rounds, so none of the entries it left pending — idle past the group's claim time if
        it was down that long — is taken over by another replica's `claim_stale` while it reads
        them back, a batch a round. Returns how many it holds. Up to `page` entries a partition
        per script call (`hold_pending.lua`: listed and claimed in one step, so an entry another
        consumer claimed is never taken back), every partition in one round trip; a partition
        with more is paged on. A group gone (`NOGROUP`) holds nothing."""
        self._ensure_ready()
        start = dict.fromkeys(self.partitions, "-")
        held = 0
        while start:
            partitions = sorted(start)
            replies = self._scripts(self._hold_pending_script,
                                    [([self._key_of[p]], [self.group, self.consumer, start[p], page])
                                     for p in partitions])
            start = {}
            for partition, reply in zip(partitions, replies, strict=True):
                if isinstance(reply, ResponseError) and "NOGROUP" in str(reply):
                    continue
                if isinstance(reply, Exception):
                    raise reply
                held += int(reply[0])
                if int(reply[0]) >= page:
                    start[partition] = "(" + _text(reply[1])
        return held

    def forget_idle_consumers(self, partition: int, names: Sequence[str], min_idle_ms: int) -> list[str]:
        """XGROUP DELCONSUMER of each of `names` on `partition` that holds nothing and has been idle
        at least `min_idle_ms`, looked at in the same script (`forget_consumer.lua`): deleting drops
        a consumer's pending entries, and a look made before may be stale (that consumer restarted
        and read since). One listing of the group's consumers a script, `HOLD_PAGE` names a call
        (session 33's first version listed them all once a name: quadratic after a crash loop).
        The names removed; none from a group gone (`NOGROUP`: it went after the caller looked at
        its consumers, and the next read creates it again; before, the round failed on it)."""
        removed: list[str] = []
        for i in range(0, len(names), HOLD_PAGE):
            try:
                reply = self._forget_script(keys=[self._key_of[partition]],
                                            args=[self.group, min_idle_ms, *names[i:i + HOLD_PAGE]])
            except ResponseError as error:
                if "NOGROUP" not in str(error):
                    raise
                break
            removed += [_text(name) for name in reply]
        return removed

    def pending_count(self) -> int:
        """Entries delivered to this group but not acked yet, all consumers and partitions."""
        self._ensure_ready()
        total = 0
        for key in self._key_of.values():
            summary = self.client.xpending(key, self.group)
            total += int(summary["pending"])
        return total

    # -- internals ------------------------------------------------------------------------
    def _ensure_ready(self) -> None:
        if not self._groups_ready:
            self.ensure_groups()

    def _read_new(self, count: int, block: int | None, acks: dict[int, list[str]],
                  before: Sequence[bytes] = ()) -> list[PartitionEntry]:
        """XACKs then XREADGROUP `>` on a connection this consumer keeps, in one write: the
        read's command packed once per (count, block), each XACK its partition's packed head
        and the ids; the replies read straight from the connection's hiredis reader
        (`exchange`) and the entries parsed here. With `before` (see `read`), those commands
        and the XACKs go in one MULTI/EXEC ahead of the read.

        A consumer reads in a loop, one batch after another; through the client each call
        paid a pool checkout and release (with redis-py's connection-count bookkeeping),
        the retry wrapper, packing ~40 arguments and the reply callback — more CPU than
        the round trip itself. Any error drops the connection (a reply may be left unread)
        and is raised; the caller falls back to the client for connection errors."""
        if self._own is None or self._own_pid != os.getpid():
            self._own, self._own_pid = self.client.connection_pool.get_connection(), os.getpid()
        conn = self._own
        failover = self._failover
        if failover is not None and conn.followed != failover.drops:
            conn.disconnect()  # open when the pool dropped its connections (a READONLY): made again
        read = self._packed_reads.get((count, block))
        if read is None:
            args: list[Any] = ["XREADGROUP", "GROUP", self.group, self.consumer, "COUNT", count]
            if block is not None:
                args += ["BLOCK", block]
            keys = list(self._key_of.values())
            read = self._packed_reads[(count, block)] = b"".join(
                conn.pack_command(*args, "STREAMS", *keys, *[">"] * len(keys)))
        try:
            if before:
                queued = len(before) + len(acks)
                replies = exchange(conn, b"".join([_MULTI, *before, self._packed_acks(acks), _EXEC, read]),
                                   queued + 3, check=False)
                _raise_unless_applied(replies[1:1 + queued], replies[-2], len(before))
                reply = replies[-1]
                if isinstance(reply, Exception):
                    raise reply
            elif acks:
                reply = exchange(conn, self._packed_acks(acks) + read, len(acks) + 1)[-1]
            else:
                reply = exchange(conn, read, 1)[0]
        except _NotApplied as error:
            self._note_demoted(conn, error.__cause__ or error)
            raise  # every reply was read: the connection is in step
        except ResponseError as error:
            self._note_demoted(conn, error)
            self._drop_own()
            if "NOGROUP" not in str(error):
                raise
            # The groups vanished (FLUSHALL, a fresh server without AOF): recreate, read once more.
            self.reconnects += 1
            self.ensure_groups()
            return self._read_group({key: ">" for key in self._key_of.values()}, count, block, new=True)
        except BaseException:
            self._drop_own()
            raise
        result = PartitionRead(count)
        unreadable: list[UnreadableEntry] = []
        went_back = False
        parse = EventEnvelope.FromString
        for key, entries in (reply.items() if isinstance(reply, dict) else reply or []):  # RESP3: a map
            partition = self._partition_of[key]
            given = len(result)
            if len(entries) >= count:
                result.full[partition] = _text(entries[-1][0])
            try:
                result += [
                    PartitionEntry(partition, entry_id.decode(),
                                   parse(fields[1] if fields[0] == b"e" else _field(fields, b"e")))
                    for entry_id, fields in entries if entry_id is not None and fields]
                for i in range(given, len(result)):  # decoded, yet no envelope the store wrote
                    envelope = result[i].envelope
                    if not envelope.match_id or envelope.seq < 1:
                        raise NotAnEvent(envelope.match_id)
            except Exception:  # noqa: BLE001 - an entry not ours: the partition's entries one by one
                del result[given:]
                result += self._entries(partition, entries, unreadable)
            if len(result) > given:
                went_back |= self._went_back(partition, result[given].entry_id, result[-1].entry_id)
        self.reconnects += went_back
        self._settle_unreadable(unreadable)
        return result

    def _packed_acks(self, acks: dict[int, list[str]]) -> bytes:
        """One XACK per partition, in partition order, as redis-py would pack them."""
        heads = self._ack_heads
        return b"".join([b"*%d\r\n%s%s" % (3 + len(ids), heads[p], b"".join([_bulk(i.encode()) for i in ids]))
                         for p, ids in sorted(acks.items())])

    def close(self) -> None:
        """Give the connection kept for reads back to the pool (a later read takes one again)."""
        with self._own_lock:
            own, self._own = self._own, None
            if own is not None and self._own_pid == os.getpid():
                self.client.connection_pool.release(own)

    def _note_demoted(self, conn: Any, error: BaseException) -> None:
        """A replica's READONLY on the kept connection, read past redis-py: its pool's
        connections are dropped (famiglia.redis_clients), as redis-py's read would have."""
        if self._failover is not None and store_demoted(error):
            self._failover.demoted(conn)

    def _drop_own(self) -> None:
        own, self._own = self._own, None
        if own is not None:
            own.disconnect()
            self.client.connection_pool.release(own)

    def _ids_by_partition(self, entries: Iterable[PartitionEntry]) -> dict[int, list[str]]:
        by_partition: dict[int, list[str]] = {}
        for entry in entries:
            by_partition.setdefault(entry.partition, []).append(entry.entry_id)
        return by_partition

    def _queue_acks(self, pipe: Any, by_partition: dict[int, list[str]]) -> None:
        for partition, ids in sorted(by_partition.items()):
            pipe.xack(self._key_of[partition], self.group, *ids)

    def _read_group(self, streams: dict[Any, Any], count: int, block: int | None,
                    acks: dict[int, list[str]] | None = None, *, new: bool = False) -> list[PartitionEntry]:
        """XREADGROUP through the client; `new`: of new entries (`>`), which `_went_back` watches."""
        self._ensure_ready()
        try:
            if acks:
                with self.client.pipeline(transaction=False) as pipe:
                    self._queue_acks(pipe, acks)
                    pipe.xreadgroup(self.group, self.consumer, streams, count=count, block=block)
                    replies = pipe.execute(raise_on_error=False)
                reply = replies[-1]
                if isinstance(reply, Exception):
                    raise reply
                # A failed XACK (only a vanished group, which fails the read too) leaves its
                # entries pending, to be redone: the read's entries are returned regardless.
            else:
                reply = self.client.xreadgroup(self.group, self.consumer, streams, count=count, block=block)
        except ResponseError as error:
            # The groups vanished (FLUSHALL, a fresh server without AOF): recreate, read once more.
            # (Acks sent with the read are moot then: a new group has nothing pending.)
            if "NOGROUP" not in str(error):
                raise
            self.reconnects += 1
            self.ensure_groups()
            reply = self.client.xreadgroup(self.group, self.consumer, streams, count=count, block=block)
        result = PartitionRead(count)
        unreadable: list[UnreadableEntry] = []
        went_back = False
        for key, entries in _stream_replies(reply):
            partition = self._partition_of[key]
            if len(entries) >= count:
                result.full[partition] = _text(entries[-1][0])
            got = self._entries(partition, entries, unreadable)
            if new and got:
                went_back |= self._went_back(partition, got[0].entry_id, got[-1].entry_id)
            result.extend(got)
        self.reconnects += went_back
        self._settle_unreadable(unreadable)
        return result

    def _went_back(self, partition: int, first: str, last: str) -> bool:
        """After a read of new entries that gave `first`..`last` of `partition`: whether one is not
        past the last id such a read gave this consumer, so the group's position went back —
        another consumer recreated it (NOGROUP, XGROUP CREATE from 0), or it was set back — which
        counts as a reconnect (`reconnects`), once a read. A group delivers new entries in stream
        order, each once, so this never happens otherwise."""
        seen = self._last_new.get(partition)
        self._last_new[partition] = entry_key(last)
        return seen is not None and entry_key(first) <= seen

    def _scripts(self, script: Any, calls: list[tuple[list[str], list[Any]]]) -> list[Any]:
        """`script` with each (keys, args) of `calls`, in one pipelined round trip (no transaction:
        a partition each, which may be other slots); its replies, reply errors among them. EVALSHA
        goes straight into the pipeline, as the other pipelined scripts do (`holds.py`,
        `turn_notices.py`): redis-py's Script would ask SCRIPT EXISTS first, one more round trip
        each time, and in a cluster pipeline leaves a NOSCRIPT to the caller. A NOSCRIPT (Redis
        restarted, SCRIPT FLUSH) ran nothing: the script is loaded and those calls sent again (after
        a failover, twice: `famiglia.redis_clients.load_script`)."""
        replies: list[Any] = [None] * len(calls)
        todo = list(range(len(calls)))
        for attempt in range(LOADS + 1):
            with self.client.pipeline(transaction=False) as pipe:
                for i in todo:
                    keys, args = calls[i]
                    pipe.evalsha(script.sha, len(keys), *keys, *args)
                answers = pipe.execute(raise_on_error=False)
            for i, answer in zip(todo, answers, strict=True):
                replies[i] = answer
            todo = [i for i in todo if isinstance(replies[i], NoScriptError)]
            if not todo:
                break
            if attempt < LOADS:
                load_script(self.client, script, again=attempt > 0)
        return replies

    def _entries(self, partition: int, entries: Iterable[Any], unreadable: list[UnreadableEntry]) -> list[PartitionEntry]:
        """The entries' envelopes (`fields` a dict, as redis-py parses them, or the raw flat list);
        one none can be read from goes to `unreadable` instead (`_settle_unreadable`). Before
        session 34 it failed the read or the claim, every time: a claim took the good entries with it
        every `min_idle_ms`, and none of them was ever handled."""
        return [PartitionEntry(partition, entry_id, envelope)
                for entry_id, envelope in split_entries(partition, entries, unreadable)]

    def _settle_unreadable(self, found: list[UnreadableEntry]) -> None:
        """Entries no envelope can be read from: told (`partition_entry_unreadable`, at error), handed
        to `on_unreadable`, then acked, so they neither fail the read again nor come back to a claim
        with the good entries beside them. Never raises: a failure leaves them pending (a later claim
        finds them again), and the read's good entries go to the caller all the same."""
        if not found:
            return
        tell_unreadable(found, group=self.group, consumer=self.consumer)
        try:
            if self.on_unreadable is not None:
                self.on_unreadable(found)
            by_partition: dict[int, list[str]] = {}
            for entry in found:
                by_partition.setdefault(entry.partition, []).append(entry.entry_id)
            with self.client.pipeline(transaction=False) as pipe:
                self._queue_acks(pipe, by_partition)
                pipe.execute()
        except Exception:  # noqa: BLE001 - left pending: a claim finds them again
            log.warning("partition_entry_unreadable_kept", group=self.group, consumer=self.consumer,
                        entries=len(found), exc_info=True)
            return
        self.unreadable += len(found)


def trim_consumed(store: RedisEventStore, group: str, *, keep_after_ms: int) -> int:
    """Drop partition stream entries every consumer group is done with; returns how many went.

    An entry may go once every group on its stream has been given it and acked it: it is
    below each group's oldest pending entry, or, with nothing pending, below the last
    entry the group was given (that one stays, so a stream keeps its newest id). Entries
    newer than `keep_after_ms` (epoch ms: the ids are append times) stay in any case. A
    stream without `group` on it is left alone: the projection's group is the one that
    archives the events first. A group created later starts from what is left; the rest
    is in the SQL archive, which is what a rebuild reads first. (An exact `XTRIM MINID`,
    run once a minute, costs little.)"""
    client = store.client
    dropped = 0
    for key in store.partitions_keys():
        try:
            groups = client.xinfo_groups(key)
        except ResponseError:  # no such stream yet
            continue
        names = [_text(g["name"]) for g in groups]
        if group not in names:
            continue
        floor = (keep_after_ms, 0)
        for info, name in zip(groups, names, strict=True):
            pending = client.xpending(key, name)
            done = _text(pending["min"]) if pending["pending"] else _text(info["last-delivered-id"])
            floor = min(floor, entry_key(done))
        if floor > (0, 0):
            dropped += int(client.xtrim(key, minid=f"{floor[0]}-{floor[1]}", approximate=False))
    return dropped


class _NotApplied(ResponseError):
    """The commands sent before a read's acks did not run: the transaction was aborted or
    one of them failed (the reply's own error is the cause)."""


def _raise_unless_applied(queued: Sequence[Any], executed: Any, first: int) -> None:
    """Raise unless the transaction ran and its `first` commands succeeded (their
    replies being QUEUED, then EXEC's list of results)."""
    for reply in queued:
        if isinstance(reply, Exception):  # refused when queued (OOM, a bad command): EXEC aborts
            raise _NotApplied(f"not queued, the transaction aborted: {reply}") from reply
    if not isinstance(executed, list):  # EXECABORT (an error), or nil (a WATCH, never set here)
        raise _NotApplied(f"the transaction did not run: {executed!r}")
    for reply in executed[:first]:
        if isinstance(reply, Exception):
            raise _NotApplied(f"failed in the transaction: {reply}") from reply


def _lua(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _field(fields: list[bytes], name: bytes) -> bytes:
    """A field of a raw stream entry ([name, value, name, value, ...])."""
    for i in range(0, len(fields) - 1, 2):
        if fields[i] == name:
            return fields[i + 1]
    raise KeyError(name)


def _stream_replies(reply: Any) -> list[tuple[bytes, Any]]:
    """XREADGROUP answers [[key, entries], ...] (the store's clients speak RESP2)."""
    return [(key, entries) for key, entries in reply or []]
