"""The record of a bot decision's tries on a real Redis (services/bots/tries.py): every worker
process, and the dispatcher, read what one task wrote; it sits in its match's slot and expires."""

from __future__ import annotations

import uuid

from famiglia.eventstore.redis_store import RedisEventStore
from services.bots.tries import KEPT_SECONDS, RedisDecisionTries, digest, tries_of


def test_what_one_task_wrote_every_other_reads_and_it_expires(redis_url: str) -> None:
    store, other = RedisEventStore.connect(redis_url), RedisEventStore.connect(redis_url)
    try:
        tries = tries_of(store)
        assert isinstance(tries, RedisDecisionTries)
        match_id = f"m{uuid.uuid4().hex[:8]}"
        key = tries.key(match_id, 7, 2)
        assert key.startswith(store.keys.prefix) and store.keys.tag(store.keys.partition_of(match_id)) in key
        assert tries.refused(match_id, 7, 2) == frozenset() and tries.failures(match_id, 7, 2) == 0
        tries.refuse(match_id, 7, 2, b"\x08\x01")
        tries.refuse(match_id, 7, 2, b"\x08\x02")
        assert [tries.fail(match_id, 7, 2) for _ in range(3)] == [1, 2, 3]
        elsewhere = tries_of(other)  # another worker process, or the dispatcher
        assert elsewhere.refused(match_id, 7, 2) == {digest(b"\x08\x01"), digest(b"\x08\x02")}
        assert elsewhere.failures(match_id, 7, 2) == 3
        assert not elsewhere.given_up(match_id, 7, 2)  # failures alone are no give-up: its default may be due
        tries.give_up(match_id, 7, 2)
        assert elsewhere.given_up(match_id, 7, 2) and not elsewhere.given_up(match_id, 7, 1)
        assert elsewhere.refused(match_id, 7, 2) == {digest(b"\x08\x01"), digest(b"\x08\x02")}
        assert elsewhere.refused(match_id, 8, 2) == frozenset() and elsewhere.failures(match_id, 7, 1) == 0
        assert 0 < store.client.ttl(key) <= KEPT_SECONDS
    finally:
        store.close()
        other.close()


def test_redis_away_reads_as_nothing_written_and_counts_nothing(redis_url: str) -> None:
    """The record only saves wasted calls: with Redis away a task goes on as if it held nothing."""
    store = RedisEventStore.connect("redis://127.0.0.1:1/0")
    try:
        tries = tries_of(store)
        tries.refuse("m1", 1, 0, b"x")
        assert tries.refused("m1", 1, 0) == frozenset()
        assert tries.fail("m1", 1, 0) == 0 and tries.failures("m1", 1, 0) == 0
        tries.give_up("m1", 1, 0)
        assert not tries.given_up("m1", 1, 0)  # queued again: the next task gives it up again
    finally:
        store.close()
