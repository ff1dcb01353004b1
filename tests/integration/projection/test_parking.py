"""Poison entries on a real Redis and SQL: parked (acked, with a dead-letter record), never
wedging the projection of every other match; and projected again with `unpark` after a fix."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import replace

import pytest
import redis

from famiglia.eventstore import PartitionEntry
from famiglia.eventstore.unreadable import UnreadableEntry
from famiglia.readmodels import match_summary
from famiglia.readmodels.db import read_session
from famiglia.v1.envelope_pb2 import EventEnvelope
from services.projection import parking
from services.projection.app import ProjectionApp
from services.projection.lag import LagMonitor
from services.projection.parking import DeadLetters
from services.projection.projector import Parked, Projector
from services.projection.runner import ProjectionRunner

from .support import MatchSpec, write_matches

pytestmark = pytest.mark.redis


def _specs(prefix: str, n: int) -> list[MatchSpec]:
    return [MatchSpec(match_id=f"{prefix}{i}", players=["ann", "bob"], seed=500 + i) for i in range(n)]


def _finished(app: ProjectionApp, match_ids: list[str]) -> bool:
    with read_session(app.sql) as session:
        return all((s := match_summary(session, m)) is not None and s.status == "finished" for m in match_ids)


def _run(runner: ProjectionRunner, done: Callable[[], bool], timeout: float = 60.0) -> int:
    """Rounds as `ProjectionRunner.run` does them (a failed round is retried), until `done`;
    how many rounds failed."""
    failed = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            runner.run_once(block_ms=0)
        except Exception:  # noqa: BLE001 - what run() logs as projection_round_failed
            failed += 1
        if done() and runner.caught_up():
            return failed
    raise AssertionError("the projection did not get there")


OOM = "OOM command not allowed when used memory > 'maxmemory'."


def _poison_f1(monkeypatch) -> None:
    """f1's first event one a bug cannot project (ValueError)."""
    real = Projector._create_match

    def flaky(self, writes, envelope):  # a bug reading this one match
        if envelope.match_id == "f1":
            raise ValueError("cannot read f1")
        return real(self, writes, envelope)

    monkeypatch.setattr(Projector, "_create_match", flaky)


def _f1_poisoned(app: ProjectionApp, monkeypatch) -> ProjectionRunner:
    """Matches f0-f2 written, f1's first event one a bug cannot project (ValueError), and runner c1."""
    _poison_f1(monkeypatch)
    write_matches(app.store, app.registry, _specs("f", 3))
    return app.runner("c1")


def _record_refused(monkeypatch, error: Exception) -> list[bool]:
    """The dead-letter record raising `error` while the flag returned holds True (`[0] = False`: back)."""
    recorded = DeadLetters.record
    away = [True]

    def record(self, parked, consumer=""):
        if away[0]:
            raise error
        return recorded(self, parked, consumer)

    monkeypatch.setattr(DeadLetters, "record", record)
    return away


def test_an_import_that_kept_the_event_ids_is_parked_and_new_matches_still_appear(app: ProjectionApp) -> None:
    first = write_matches(app.store, app.registry, _specs("m", 2))
    runner = app.runner("c1")
    _run(runner, lambda: _finished(app, ["m0", "m1"]))
    # What ImportMatch stored before the fix: a finished match again under another id, same event ids.
    dupe = [EventEnvelope.FromString(e.SerializeToString()) for e in first[0].envelopes]
    for env in dupe:
        env.match_id = "m-dupe"
    app.store.append("m-dupe", 0, dupe)
    write_matches(app.store, app.registry, _specs("n", 3))

    failed = _run(runner, lambda: _finished(app, ["n0", "n1", "n2"]) and "m-dupe" in runner.projector.parked_matches)
    assert failed < runner.projector.park_after  # a bounded number of failed rounds, not forever
    assert runner.consumer.pending_count() == 0  # parked entries are acked: nothing held, nothing reclaimed
    letters = DeadLetters(app.store)
    record = letters.records()["m-dupe"]
    assert (record["seq"], record["event_id"]) == ("1", dupe[0].event_id)
    assert "IntegrityError" in record["reason"] and record["consumer"] == "c1"
    assert app.store.client.xlen(letters.stream_key) == len(dupe)
    with read_session(app.sql) as session:
        assert match_summary(session, "m-dupe") is None
    # The projection keeps going: a match created afterwards is projected at once.
    write_matches(app.store, app.registry, _specs("later", 1))
    assert _run(runner, lambda: _finished(app, ["later0"])) == 0


def test_every_consumer_parks_the_later_entries_of_a_parked_match(app: ProjectionApp) -> None:
    played = write_matches(app.store, app.registry, _specs("h", 1))
    headless = [EventEnvelope.FromString(e.SerializeToString()) for e in played[0].envelopes]
    for env in headless:
        env.match_id = "m-headless"
    headless[0].type = "zzz"  # seq 1 is not match_created: never a match
    app.store.append("m-headless", 0, headless[:3])
    one = app.runner("c1")
    _run(one, lambda: _finished(app, ["h0"]) and "m-headless" in one.projector.parked_matches)
    assert DeadLetters(app.store).records()["m-headless"]["reason"].startswith("not_a_match")
    app.store.append("m-headless", 3, headless[3:])
    other = app.runner("c2")  # another process: knows the match is parked from Redis alone
    assert _run(other, lambda: True) == 0
    assert other.consumer.pending_count() == 0
    assert app.store.client.xlen(DeadLetters(app.store).stream_key) == len(headless)


def test_unpark_projects_a_match_again_once_its_cause_is_fixed(app: ProjectionApp, monkeypatch) -> None:
    runner = _f1_poisoned(app, monkeypatch)
    _run(runner, lambda: _finished(app, ["f0", "f2"]) and "f1" in runner.projector.parked_matches)
    assert "ValueError: cannot read f1" in DeadLetters(app.store).records()["f1"]["reason"]
    monkeypatch.undo()  # the fix is deployed
    outcome = app.unpark("f1")
    assert outcome.applied and not outcome.parked
    assert _finished(app, ["f1"]) and "f1" not in DeadLetters(app.store).records()
    runner.refresh_parked()
    assert "f1" not in runner.projector.parked_matches


def test_the_parked_record_is_the_entry_that_got_the_match_parked_and_only_that_one_parks_it(
        app: ProjectionApp) -> None:
    """The hash keeps the first record of a match (a second consumer that parks it too adds to the
    stream only; one that parks the same partition entry again, claimed before it was acked, writes
    no second letter), and an entry parked only because its match was, as its consumer last read the
    hash, never parks the match again once `unpark` let it go."""
    letters = DeadLetters(app.store)

    def parked(seq: int, reason: str, first: bool) -> Parked:
        envelope = EventEnvelope(match_id="m-poison", seq=seq, event_id=f"ev{seq}")
        return Parked(PartitionEntry(0, f"{1000 + seq}-0", envelope), reason, first=first)

    assert letters.record([parked(2, "IntegrityError: dupe", True), parked(3, "IntegrityError: dupe", False)],
                          "c1").written == 2
    assert letters.record([parked(2, "IntegrityError: dupe again", True)], "c2").written == 0
    assert letters.record([parked(5, "IntegrityError: dupe again", True)], "c3").written == 1
    record = letters.records()["m-poison"]
    assert (record["seq"], record["consumer"], record["reason"]) == ("2", "c1", "IntegrityError: dupe")
    assert letters.forget("m-poison")
    letters.record([parked(4, "match_parked", False)], "c1")
    assert letters.parked_matches() == set()
    assert app.store.client.xlen(letters.stream_key) == 4


def _pending_ids(app: ProjectionApp) -> set[tuple[int, str]]:
    client, keys = app.store.client, app.store.keys
    return {(p, row["message_id"].decode()) for p in range(app.store.partitions)
            for row in client.xpending_range(keys.partition_stream(p), "projection", "-", "+", 10_000)}


def test_poison_matches_that_are_all_a_consumer_has_are_parked_and_what_was_done_beside_them_acked(
        app: ProjectionApp, monkeypatch) -> None:
    """Two poison matches and nothing else to project fail alone together: once counted no strike
    (a fault of every match is ours, not theirs), so the round failed every few seconds for good,
    and the entries done beside them (a dead consumer's, claimed: projected already) stayed unacked
    with it. A made-up match the database takes tells the fault is theirs."""
    write_matches(app.store, app.registry, _specs("d", 1))
    dead = app.runner("c-dead")
    for _ in range(100):
        dead.run_once(block_ms=0)
        if _finished(app, ["d0"]):
            break
    assert _finished(app, ["d0"]) and dead.unacked  # projected, the last batch not acked: it died
    redelivered = {(e.partition, e.entry_id) for e in dead.unacked}
    client, keys = app.store.client, app.store.keys
    for partition, entry_id in redelivered:  # idle past the claim time, as a dead consumer's are
        client.xclaim(keys.partition_stream(partition), "projection", "c-dead", 0, [entry_id], idle=120_000,
                      justid=True)
    real = Projector._create_match

    def flaky(self, writes, envelope):  # a bug reading these two matches
        if envelope.match_id in ("f0", "f1"):
            raise ValueError(f"cannot read {envelope.match_id}")
        return real(self, writes, envelope)

    monkeypatch.setattr(Projector, "_create_match", flaky)
    write_matches(app.store, app.registry, _specs("f", 2))
    runner = app.runner("c1")
    with pytest.raises(ValueError):
        runner.run_once(block_ms=0)  # claims the dead one's, reads the poison: the round fails
    runner.flush_acks()
    assert redelivered and not redelivered & _pending_ids(app)  # done beside the failure: acked
    failed = 1
    for _ in range(3 * runner.projector.park_after):
        if {"f0", "f1"} <= runner.projector.parked_matches:
            break
        try:
            runner.run_once(block_ms=0)
        except ValueError:
            failed += 1
    assert {"f0", "f1"} <= runner.projector.parked_matches and failed < runner.projector.park_after
    assert runner.caught_up() and not _pending_ids(app)
    assert set(DeadLetters(app.store).records()) == {"f0", "f1"}


@pytest.mark.parametrize("garbage", [b"\xff\xff not an envelope", b""])
def test_a_partition_entry_no_event_can_be_read_from_is_recorded_and_acked_and_the_others_projected(
        app: ProjectionApp, garbage: bytes) -> None:
    """Only a foreign XADD writes one. Claimed with a dead consumer's good entries, it once failed
    the claim every round (and every read that met it): the good entries, claimed again and again
    with it, were never projected. One that decodes, to an empty envelope (an empty `e`), was
    skipped as a redelivery and acked with no dead letter."""
    write_matches(app.store, app.registry, _specs("g", 2))
    client, keys = app.store.client, app.store.keys
    partition = app.store.partition_of("g0")
    bad = client.xadd(keys.partition_stream(partition), {"e": garbage}).decode()
    write_matches(app.store, app.registry, _specs("h", 2))
    runner = app.runner("c1")
    runner.start()
    # A consumer that read everything and died: its entries, idle past the claim time, are claimed.
    client.xreadgroup("projection", "c-dead", {keys.partition_stream(p): ">" for p in range(app.store.partitions)},
                      count=10_000)
    for p in range(app.store.partitions):
        ids = [row["message_id"] for row in client.xpending_range(keys.partition_stream(p), "projection", "-", "+",
                                                                   10_000)]
        if ids:
            client.xclaim(keys.partition_stream(p), "projection", "c-dead", 0, ids, idle=120_000, justid=True)
    runner.config = replace(runner.config, claim_idle_ms=60_000)
    assert _run(runner, lambda: _finished(app, ["g0", "g1", "h0", "h1"])) == 0
    assert not _pending_ids(app)
    letters = [fields for _id, fields in client.xrange(DeadLetters(app.store).stream_key)]
    assert [(f[b"partition"].decode(), f[b"entry_id"].decode(), f[b"match_id"]) for f in letters] == [
        (str(partition), bad, b"")]
    assert letters[0][b"reason"].startswith(b"unreadable: DecodeError" if garbage else b"unreadable: NotAnEvent")
    assert DeadLetters(app.store).parked_matches() == set()


def test_a_rebuild_projects_every_good_event_past_partition_entries_no_event_can_be_read_from(
        app: ProjectionApp) -> None:
    """Before session 34 `read_partition` failed on one, and with it every rebuild."""
    write_matches(app.store, app.registry, _specs("g", 2))
    client, keys = app.store.client, app.store.keys
    stream = keys.partition_stream(app.store.partition_of("g0"))
    client.xadd(stream, {"e": b"\xff\xff not an envelope"})
    client.xadd(stream, {"e": b""})
    write_matches(app.store, app.registry, _specs("h", 2))
    report = app.rebuild()
    assert _finished(app, ["g0", "g1", "h0", "h1"])
    assert report.unreadable == 2 and not report.parked and not report.left_deferred


def test_a_match_struck_out_while_redis_is_away_is_named_in_the_parked_hash_once_it_is_back(
        app: ProjectionApp, monkeypatch) -> None:
    """The record of the entry that got a match parked failed (Redis away): its entries must not be
    acked, nor the match forgotten or parked without the hash naming it, until the record is made."""
    runner = _f1_poisoned(app, monkeypatch)
    away = _record_refused(monkeypatch, redis.ConnectionError("Redis away"))
    deadline = time.monotonic() + 60
    while "f1" not in runner.projector.parked_matches and time.monotonic() < deadline:
        with contextlib.suppress(ValueError, redis.ConnectionError):  # the strikes' rounds, as run() retries them
            runner.run_once(block_ms=0)
    assert "f1" in runner.projector.parked_matches
    for _ in range(3):  # rounds while Redis is still away for the record: f1 stays parked, unacked
        with contextlib.suppress(ValueError, redis.ConnectionError):
            runner.run_once(block_ms=0)
    assert "f1" in runner.projector.parked_matches
    f1 = {(e.partition, e.entry_id) for e in app.store.read_partition(app.store.partition_of("f1"), count=1000)
          if e.envelope.match_id == "f1"}
    runner.flush_acks()
    assert f1 <= _pending_ids(app)  # not recorded: not acked
    away[0] = False  # Redis is back
    again = _run(runner, lambda: _finished(app, ["f0", "f2"]) and not (f1 & _pending_ids(app)))
    assert again == 0  # no strike all over again
    runner.flush_acks()
    record_f1 = DeadLetters(app.store).records()["f1"]
    assert "ValueError: cannot read f1" in record_f1["reason"] and record_f1["seq"] == "1"
    assert "f1" in runner.projector.parked_matches and not (f1 & _pending_ids(app))


def test_parked_entries_waiting_for_their_record_are_kept_once_however_often_they_come_back(
        app: ProjectionApp, monkeypatch) -> None:
    """Redis refusing the dead-letter record (out of memory refuses an XADD, never an XREADGROUP or an
    XACK) while the consumer reads on: the unacked parked entries come back, to a claim once idle (they
    are not held) or a read of its own pending ones. Before, each came back to be parked and kept once
    more every time, so the kept list grew for as long as the record failed, and the stream then took
    every copy."""
    runner = _f1_poisoned(app, monkeypatch)
    runner.config = replace(runner.config, claim_idle_ms=0, claim_every_s=0)  # every idle entry claimed, each round
    away = _record_refused(monkeypatch, redis.ResponseError(OOM))
    deadline = time.monotonic() + 60
    while "f1" not in runner.projector.parked_matches and time.monotonic() < deadline:
        with contextlib.suppress(ValueError):  # the strikes' rounds, as run() retries them
            runner.run_once(block_ms=0)
    f1 = {(e.partition, e.entry_id) for e in app.store.read_partition(app.store.partition_of("f1"), count=1000)
          if e.envelope.match_id == "f1"}
    for _ in range(5):  # rounds while the record is refused: f1's entries claimed back, each round
        runner.run_once(block_ms=0)
    runner._read_pending_again()
    runner.run_once(block_ms=0)
    kept = [(p.entry.partition, p.entry.entry_id) for p in runner._unrecorded.values()]
    assert len(kept) == len(f1) and set(kept) == f1
    away[0] = False  # memory again
    _run(runner, lambda: _finished(app, ["f0", "f2"]) and not (f1 & _pending_ids(app)))
    letters = [(int(f[b"partition"]), f[b"entry_id"].decode())
               for _id, f in app.store.client.xrange(DeadLetters(app.store).stream_key)]
    assert sorted(letters) == sorted(f1)  # each once


def test_a_partition_whose_newest_entry_no_event_can_be_read_from_is_not_lagging_behind_it(
        app: ProjectionApp) -> None:
    """The checkpoints move past an unreadable entry once it is recorded and acked, as they do past a
    parked one. Before, a partition's newest entry being one kept its lag at that entry's time less the
    last event projected (years, for matches played long before) until another event came to it."""
    write_matches(app.store, app.registry, _specs("g", 2))
    runner = app.runner("c1")
    _run(runner, lambda: _finished(app, ["g0", "g1"]))
    assert LagMonitor(app.store, app.sql).measure().max_lag_ms == 0
    partition = app.store.partition_of("g0")
    app.store.client.xadd(app.store.keys.partition_stream(partition), {"e": b"\xff\xff not an envelope"})
    runner.run_once(block_ms=0)
    runner.flush_acks()
    assert not _pending_ids(app)
    assert LagMonitor(app.store, app.sql).measure().by_partition[partition] == 0


def test_parked_entries_waiting_for_their_record_are_held_from_other_consumers(
        app: ProjectionApp, monkeypatch) -> None:
    """Kept unacked while Redis refuses the record, they are held with the deferred entries. Before,
    they were not: idle past the claim time, another replica claimed them and struck their match out
    all over again (its rounds failing `park_after` times) though this consumer had it parked."""
    runner = _f1_poisoned(app, monkeypatch)
    runner.config = replace(runner.config, claim_idle_ms=60_000)
    _record_refused(monkeypatch, redis.ResponseError(OOM))
    deadline = time.monotonic() + 60
    while "f1" not in runner.projector.parked_matches and time.monotonic() < deadline:
        with contextlib.suppress(ValueError):  # the strikes' rounds, as run() retries them
            runner.run_once(block_ms=0)
    assert runner._unrecorded
    client, keys = app.store.client, app.store.keys
    for partition, entry_id in runner._unrecorded:  # idle past the claim time, as time goes by
        client.xclaim(keys.partition_stream(partition), "projection", "c1", 0, [entry_id], idle=120_000,
                      justid=True)
    runner._last_hold = 0.0  # a hold is due; a claim of this consumer's (which takes its own too) is not
    runner.config = replace(runner.config, claim_every_s=3600)
    runner._last_claim = time.monotonic()
    runner.run_once(block_ms=0)
    other = app.runner("c2").consumer
    assert not {(e.partition, e.entry_id) for e in other.claim_stale(60_000, count=1000)} & set(runner._unrecorded)


def _reply_lost(monkeypatch, method: str) -> list[int]:
    """`DeadLetters.<method>`'s first Redis reply lost on the way back (ConnectionError), after Redis
    did what was asked: a record cut short midway, as a connection reset or a failover leaves one.
    Returns how many replies were lost."""
    lost = [0]
    armed = [False]
    real_read = redis.connection.AbstractConnection.read_response

    def read_response(self, *args, **kwargs):
        reply = real_read(self, *args, **kwargs)
        if armed[0]:
            armed[0] = False
            lost[0] += 1
            raise redis.ConnectionError("reply lost")
        return reply

    real = getattr(DeadLetters, method)

    def recording(self, *args, **kwargs):
        armed[0] = lost[0] == 0
        try:
            return real(self, *args, **kwargs)
        finally:
            armed[0] = False

    monkeypatch.setattr(redis.connection.AbstractConnection, "read_response", read_response)
    monkeypatch.setattr(DeadLetters, method, recording)
    return lost


def _letters(app: ProjectionApp) -> list[tuple[int, str]]:
    return [(int(f[b"partition"]), f[b"entry_id"].decode())
            for _id, f in app.store.client.xrange(DeadLetters(app.store).stream_key)]


def test_a_dead_letter_record_cut_short_midway_and_made_again_writes_each_letter_once(
        app: ProjectionApp, monkeypatch) -> None:
    """Before session 35 the record was a pipeline of an HSETNX and an XADD a letter: a reply lost
    after Redis wrote them (redis-py sends the pipeline again, or the runner records again next
    round) wrote every letter twice. Each letter is now keyed by its partition entry."""
    runner = _f1_poisoned(app, monkeypatch)
    lost = _reply_lost(monkeypatch, "record")
    _run(runner, lambda: _finished(app, ["f0", "f2"]) and "f1" in DeadLetters(app.store).parked_matches())
    assert lost[0] == 1
    f1 = {(e.partition, e.entry_id) for e in app.store.read_partition(app.store.partition_of("f1"), count=1000)
          if e.envelope.match_id == "f1"}
    assert sorted(_letters(app)) == sorted(f1)  # each once
    assert not f1 & _pending_ids(app)


def test_an_unreadable_entry_record_cut_short_midway_and_made_again_writes_each_letter_once(
        app: ProjectionApp, monkeypatch) -> None:
    """Before session 35 each unreadable entry was one XADD: a failure after the first left the
    entries pending, and the claim that found them again wrote the first one twice."""
    lost = _reply_lost(monkeypatch, "record_unreadable")
    write_matches(app.store, app.registry, _specs("g", 2))
    stream = app.store.keys.partition_stream(app.store.partition_of("g0"))
    bad = {(app.store.partition_of("g0"), app.store.client.xadd(stream, {"e": garbage}).decode())
           for garbage in (b"\xff\xff not an envelope", b"", b"\x00")}
    runner = app.runner("c1")
    runner.config = replace(runner.config, claim_idle_ms=0)  # left pending: claimed again at once
    _run(runner, lambda: _finished(app, ["g0", "g1"]) and not bad & _pending_ids(app))
    assert lost[0] == 1
    assert sorted(_letters(app)) == sorted(bad)  # each once


def test_a_rebuild_records_the_entries_no_event_can_be_read_from_as_dead_letters_once(
        app: ProjectionApp) -> None:
    """Before session 35 a rebuild only logged them: one no consumer met (acked by a group since
    recreated, or written after the rebuild's own consumers) left no dead letter. A consumer that
    recorded one already, or a rebuild run again, writes none more."""
    write_matches(app.store, app.registry, _specs("g", 2))
    partition = app.store.partition_of("g0")
    stream = app.store.keys.partition_stream(partition)
    met = (partition, app.store.client.xadd(stream, {"e": b"\xff\xff not an envelope"}).decode())
    runner = app.runner("c1")
    _run(runner, lambda: _finished(app, ["g0", "g1"]))
    assert _letters(app) == [met]
    unmet = (partition, app.store.client.xadd(stream, {"e": b""}).decode())
    for _ in range(2):
        report = app.rebuild()
        assert report.unreadable == 2 and _finished(app, ["g0", "g1"])
        assert sorted(_letters(app)) == sorted([met, unmet])
    fields = app.store.client.xrange(DeadLetters(app.store).stream_key)[-1][1]
    assert fields[b"consumer"] == b"rebuild" and fields[b"reason"].startswith(b"unreadable: NotAnEvent")


def test_a_match_unparked_while_its_entries_wait_for_their_record_is_not_named_parked_again(
        app: ProjectionApp, monkeypatch) -> None:
    """The record of its strike-out refused (Redis out of memory), the hash did not name it yet; an
    operator fixed the cause and ran `unpark`, which projected it. Before session 35 the record, made
    once Redis took it, named the match parked again (its next entries parked by every consumer)."""
    real = Projector._create_match
    fixed = [False]

    def flaky(self, writes, envelope):  # a bug reading this one match, until the fix is deployed
        if envelope.match_id == "f1" and not fixed[0]:
            raise ValueError("cannot read f1")
        return real(self, writes, envelope)

    monkeypatch.setattr(Projector, "_create_match", flaky)
    write_matches(app.store, app.registry, _specs("f", 3))
    runner = app.runner("c1")
    away = _record_refused(monkeypatch, redis.ResponseError(OOM))
    deadline = time.monotonic() + 60
    while "f1" not in runner.projector.parked_matches and time.monotonic() < deadline:
        with contextlib.suppress(ValueError):  # the strikes' rounds, as run() retries them
            runner.run_once(block_ms=0)
    assert "f1" in runner.projector.parked_matches and runner._unrecorded
    fixed[0] = True
    assert not app.unpark("f1").parked and _finished(app, ["f1"])  # the operator's fix and unpark
    away[0] = False  # memory again: the kept record is made
    _run(runner, lambda: _finished(app, ["f0", "f2"]) and not runner._unrecorded)
    assert "f1" not in DeadLetters(app.store).parked_matches()
    assert "f1" not in runner.projector.parked_matches  # at once, not from the next refresh
    f1 = {(e.partition, e.entry_id) for e in app.store.read_partition(app.store.partition_of("f1"), count=1000)
          if e.envelope.match_id == "f1"}
    assert sorted(_letters(app)) == sorted(f1)  # the letters are written all the same, each once
    assert not f1 & _pending_ids(app)


def test_an_entry_is_keyed_as_long_as_the_dead_letter_stream_holds_its_letter(app: ProjectionApp, monkeypatch) -> None:
    """The stream is trimmed `MAXLEN ~`, a whole node at a time: it keeps more than the cap (and the
    letters of no partition entry count in it). Before, the entries lettered were trimmed to the cap
    exactly, so a letter the stream still held was written again when its record was made again (a
    rebuild meets every unreadable entry, and every entry of a parked match, still in the streams).
    Now an entry is keyed while the stream holds its letter, and no longer."""
    monkeypatch.setattr(parking, "DEAD_LETTERS_MAXLEN", 3)
    letters = DeadLetters(app.store)
    entries = [UnreadableEntry(1, f"{1000 + i}-0", "DecodeError: bad") for i in range(6)]
    for entry in entries:
        assert letters.record_unreadable([entry], "c1") == 1
        time.sleep(0.002)  # each letter in a millisecond of its own (its entry's score)
    held = _letters(app)
    assert len(held) > 3  # whole nodes only: none trimmed yet
    assert letters.record_unreadable(entries, "c1") == len(entries) - len(held)
    assert sorted(_letters(app)) == sorted(set(_letters(app)))  # each once
    app.store.client.xtrim(letters.stream_key, maxlen=2, approximate=False)  # as a node dropped
    assert letters.record_unreadable([UnreadableEntry(1, "1006-0", "DecodeError: bad")], "c1") == 1
    assert app.store.client.zrange(letters.lettered_key, 0, -1) == [b"1:1004-0", b"1:1005-0", b"1:1006-0"]
    assert letters.record_unreadable(entries, "c1") == 4  # those the stream dropped, each once more
    assert sorted(_letters(app)) == sorted(set(_letters(app)))


WEEK_MS = 7 * 24 * 3600 * 1000


def test_an_unpark_mark_is_kept_a_week_and_no_longer(app: ProjectionApp, monkeypatch) -> None:
    """`<prefix>:projection:unparked` gained a field for every match ever unparked and lost none.
    A mark matters only to a record made with a count read before it, which a consumer holds no
    longer than its records keep failing: a later `unpark` drops the marks a week old (those with no
    time, from before, dated then), and a younger one still keeps its match from being named again."""
    now = [1_000_000_000_000]
    monkeypatch.setattr(parking, "time", type("Clock", (), {"time_ns": staticmethod(lambda: now[0] * 1_000_000),
                                                           "time": staticmethod(lambda: now[0] / 1000)}))
    letters, client = DeadLetters(app.store), app.store.client
    letters.forget("m-old")
    client.hset(letters.unparked_key, "m-before", 2)  # a replica from before the times were kept
    client.incr(letters.unparks_key)
    now[0] += WEEK_MS - 1
    letters.forget("m-young")  # dates m-before too
    assert set(client.hkeys(letters.unparked_key)) == {b"m-before", b"m-old", b"m-young"}
    now[0] += 2
    letters.forget("m-new")
    assert set(client.hkeys(letters.unparked_key)) == {b"m-before", b"m-young", b"m-new"}
    assert set(client.zrange(letters.unparked_at_key, 0, -1)) == {b"m-before", b"m-young", b"m-new"}
    now[0] += WEEK_MS
    letters.forget("m-last")
    assert set(client.hkeys(letters.unparked_key)) == {b"m-new", b"m-last"}
    assert client.zcard(letters.unparked_at_key) == 2

    def struck(match_id: str, entry_id: str, seen: int) -> Parked:
        envelope = EventEnvelope(match_id=match_id, seq=2, event_id=f"ev-{match_id}")
        return Parked(PartitionEntry(0, entry_id, envelope), "ValueError", first=True, unparks_seen=seen)

    # a mark kept does its work (a count read before it names nothing); one dropped, as before the marks
    assert letters.record([struck("m-new", "1002-0", 3), struck("m-young", "1003-0", 2)], "c1").unparked == ["m-new"]
    assert letters.parked_matches() == {"m-young"}
