"""A consumer acks a committed batch in the same round trip as its next read, and never
before the batch is committed: a round that fails leaves its entries pending, to be redone."""

from __future__ import annotations

import pytest

from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.eventstore.redis_store import RedisEventStore
from services.projection.app import ProjectionApp

from .support import MatchSpec, write_matches


def _pending_ids(store: RedisEventStore, group: str) -> set[str]:
    ids: set[str] = set()
    for partition in range(store.partitions):
        key = store.keys.partition_stream(partition)
        for row in store.client.xpending_range(key, group, min="-", max="+", count=10_000):
            ids.add(row["message_id"].decode())
    return ids


def test_a_read_acks_what_it_is_given_before_reading(app: ProjectionApp) -> None:
    store = app.store
    write_matches(store, app.registry, [MatchSpec("a1", ["ann", "bob"], seed=1)])
    consumer = PartitionConsumer.for_store(store, "acks", "c1")
    first = consumer.read(count=5)
    assert first and _pending_ids(store, "acks") == {e.entry_id for e in first}
    second = consumer.read(count=5, ack=first)
    assert second and {e.entry_id for e in second}.isdisjoint(e.entry_id for e in first)
    assert _pending_ids(store, "acks") == {e.entry_id for e in second}  # the first batch is acked
    rest = consumer.read(count=10_000, ack=second + first)  # acking the first again is harmless
    assert _pending_ids(store, "acks") == {e.entry_id for e in rest}
    assert consumer.read(count=5, ack=rest) == [] and consumer.pending_count() == 0


def test_a_read_with_acks_recreates_vanished_groups(app: ProjectionApp) -> None:
    store = app.store
    write_matches(store, app.registry, [MatchSpec("a2", ["ann", "bob"], seed=2)])
    consumer = PartitionConsumer.for_store(store, "acks", "c1")
    first = consumer.read(count=5)
    for partition in range(store.partitions):
        store.client.xgroup_destroy(store.keys.partition_stream(partition), "acks")
    assert consumer.read(count=5, ack=first)  # a new group from the start: the entries again


def test_the_runner_acks_a_committed_batch_with_its_next_read(app: ProjectionApp) -> None:
    runner = app.runner()
    [played] = write_matches(app.store, app.registry, [MatchSpec("a3", ["ann", "bob"], seed=3)])
    outcome = runner.run_once(block_ms=0)
    assert outcome.applied and runner.unacked == outcome.done
    group = runner.config.group
    assert {e.entry_id for e in outcome.done} <= _pending_ids(app.store, group)  # committed, not acked yet
    acked = {e.entry_id for e in outcome.done}
    runner.run_once(block_ms=0)
    assert acked.isdisjoint(_pending_ids(app.store, group))  # acked by that next read
    while runner.projected < len(played.envelopes):
        runner.run_once(block_ms=0)
    assert runner.caught_up()  # flushes what the last round left unacked
    assert _pending_ids(app.store, group) == set() and runner.unacked == []


def test_a_round_whose_read_fails_keeps_its_acks_for_the_next(app: ProjectionApp, monkeypatch) -> None:
    runner = app.runner()
    write_matches(app.store, app.registry, [MatchSpec("a4", ["ann", "bob"], seed=4)])
    done = runner.run_once(block_ms=0).done
    real_read = runner.consumer.read

    def redis_away(*args, **kwargs):
        raise ConnectionError("redis away")

    monkeypatch.setattr(runner.consumer, "read", redis_away)
    with pytest.raises(ConnectionError):
        runner.run_once(block_ms=0)
    assert runner.unacked == done  # still to ack
    monkeypatch.setattr(runner.consumer, "read", real_read)
    runner.run_once(block_ms=0)
    assert {e.entry_id for e in done}.isdisjoint(_pending_ids(app.store, runner.config.group))


def test_a_read_whose_kept_connection_was_cut_is_done_again_through_the_client(app: ProjectionApp) -> None:
    store = app.store
    write_matches(store, app.registry, [MatchSpec("a5", ["ann", "bob"], seed=5)])
    consumer = PartitionConsumer.for_store(store, "acks", "c1")
    first = consumer.read(count=3)
    assert consumer._own is not None  # the connection it keeps for new reads
    store.client.client_kill_filter(_type="normal", skipme=True)  # every other connection, the kept one too
    second = consumer.read(count=3, ack=first)
    assert second and {e.entry_id for e in second}.isdisjoint(e.entry_id for e in first)
    assert _pending_ids(store, "acks") == {e.entry_id for e in second}


def test_a_closed_consumer_gives_its_connection_back_and_reads_on(app: ProjectionApp) -> None:
    store = app.store
    write_matches(store, app.registry, [MatchSpec("a6", ["ann", "bob"], seed=6)])
    consumer = PartitionConsumer.for_store(store, "acks", "c1")
    first = consumer.read(count=2)
    kept = consumer._own
    assert kept is not None
    consumer.close()
    assert consumer._own is None and kept not in store.client.connection_pool._in_use_connections
    assert consumer.read(count=2, ack=first)  # takes a connection again


def test_a_reconnected_runner_whose_pending_read_failed_reads_them_again_next_round(
        app: ProjectionApp, monkeypatch) -> None:
    """After a broken connection the runner reads its pending entries again (its deferred ones
    may be of a history Redis lost). When that read fails (Redis gone again, a timeout) the
    round fails, and the next round reads them again: the entries the round had just read are
    among them. Before, the reconnect counted as handled before that read, so the next round
    went on without it: the entries read in the failed round waited for XAUTOCLAIM's idle
    time (`claim_idle_ms`) before anything projected them."""
    runner = app.runner()
    [played] = write_matches(app.store, app.registry, [MatchSpec("a7", ["ann", "bob"], seed=7)])
    runner.run_once(block_ms=0)
    app.store.client.client_kill_filter(_type="normal", skipme=True)  # a restart drops every connection
    real_read_pending = runner.consumer.read_pending

    def away_once(*args, **kwargs):
        monkeypatch.setattr(runner.consumer, "read_pending", real_read_pending)
        raise ConnectionError("redis away again")

    monkeypatch.setattr(runner.consumer, "read_pending", away_once)
    before = runner.projected
    with pytest.raises(ConnectionError):
        runner.run_once(block_ms=0)  # read new entries, then failed to read the pending ones
    assert runner.projected == before and runner.deferred == {}
    runner.run_once(block_ms=0)
    assert runner.projected > before, "the entries the failed round read are projected at the next"
    while runner.projected < len(played.envelopes):
        assert runner.run_once(block_ms=0).applied
    assert runner.caught_up()
