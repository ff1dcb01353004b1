"""A rebuild when the streams still hold a parked (poison) match, and unparking.

The incremental projection parked `m-dupe` (an import that kept the event ids of `m0`);
the rebuild must give the same tables (m0 projected, m-dupe not) and report the parked entries.
"""
from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from famiglia.v1.envelope_pb2 import EventEnvelope
from services.projection.app import ProjectionApp
from services.projection.parking import DeadLetters
from services.projection.projector import Projector
from services.projection.rebuild import rebuild
from services.projection.runner import ProjectionRunner
from tests.integration.projection.support import dump, write_matches
from tests.integration.projection.test_parking import _finished, _poison_f1, _run, _specs

pytestmark = pytest.mark.redis


def _parked_dupe(app: ProjectionApp) -> int:
    first = write_matches(app.store, app.registry, _specs("m", 2))
    runner = app.runner("c1")
    _run(runner, lambda: _finished(app, ["m0", "m1"]))
    dupe = [EventEnvelope.FromString(e.SerializeToString()) for e in first[0].envelopes]
    for env in dupe:
        env.match_id = "m-dupe"
    app.store.append("m-dupe", 0, dupe)
    _run(runner, lambda: "m-dupe" in runner.projector.parked_matches)
    runner.flush_acks()
    runner.projector.release()
    return len(dupe)


def _f1_copy(app: ProjectionApp) -> list[EventEnvelope]:
    """Match src0 played, and a copy of its events for a match f1 (event ids of its own), to append."""
    played = write_matches(app.store, app.registry, _specs("src", 1))
    copy = [EventEnvelope.FromString(e.SerializeToString()) for e in played[0].envelopes]
    for env in copy:
        env.match_id, env.event_id = "f1", uuid.uuid4().hex[:26]
    return copy


def _no_checkpoints(tables):
    return {k: v for k, v in tables.items() if k != "projection_checkpoints"}


def test_default_rebuild_keeps_the_original_not_the_duplicate(app: ProjectionApp) -> None:
    """One rebuild batch holds m0 (archive and stream) and m-dupe: split, the matches go alone in
    the order their entries were written (the archive's first), not by id, so m0 keeps its event
    ids and m-dupe ('-' < '0') is parked, as the incremental projection did."""
    n = _parked_dupe(app)
    before = dump(app.sql)
    report = app.rebuild()
    assert report.left_deferred == 0, report
    assert _no_checkpoints(dump(app.sql)) == _no_checkpoints(before)
    assert report.parked == n


def test_rebuild_whose_last_batches_hold_only_a_poison_match_finishes(app: ProjectionApp) -> None:
    """Small batches: the stream part is all skipped (archived already) but for m-dupe. A batch
    where nothing else moved raises for a struck poison match; the rebuild feeds it again until
    it is parked, as the runner's next rounds do, instead of dying (and every rebuild after it)."""
    n = _parked_dupe(app)
    before = dump(app.sql)
    report = rebuild(app.store, app.sql, app.projector, batch=4)
    assert _no_checkpoints(dump(app.sql)) == _no_checkpoints(before)
    assert report.parked == n and report.left_deferred == 0


def test_a_consumer_that_has_not_refreshed_yet_does_not_park_an_unparked_match_again(
        app: ProjectionApp, monkeypatch) -> None:
    """`unpark` lets a match go while a consumer still has it parked as it last read (refreshed
    every few seconds): its next entries are checked against the record in Redis, projected,
    and the match is not parked again."""
    copy = _f1_copy(app)
    half = len(copy) // 2
    app.store.append("f1", 0, copy[:half])  # f1 is live: its commands keep coming

    _poison_f1(monkeypatch)
    # The default refresh interval (claim_every_s=5): the parked set is re-read every 5 s.
    config = replace(app.settings.runner_config("c1"), claim_every_s=5.0)
    runner = ProjectionRunner(app.store, Projector(app.sql, app.registry), config)
    _run(runner, lambda: _finished(app, ["src0"]) and "f1" in runner.projector.parked_matches)
    monkeypatch.undo()  # the fix is deployed
    assert app.unpark("f1").applied
    app.store.append("f1", half, copy[half:])  # the next move, within the consumer's 5 s
    _run(runner, lambda: True)
    assert "f1" not in DeadLetters(app.store).records()  # the unpark stands
    runner.refresh_parked()
    _run(runner, lambda: True)
    assert _finished(app, ["f1"])


def test_lag_is_zero_once_the_group_is_caught_up_even_if_the_newest_entries_were_parked(app: ProjectionApp) -> None:
    """Checkpoints move past parked entries as past applied ones: they are acked and done with,
    and the partition is not lagging behind them (before, its lag stayed above zero until some
    other entry landed on that partition)."""
    from services.projection.lag import LagMonitor

    _parked_dupe(app)
    runner = app.runner("c1")
    assert runner.caught_up()
    assert LagMonitor(app.store, app.sql).measure().max_lag_ms == 0


def test_a_rebuild_records_the_matches_it_parks_as_a_consumer_does(app: ProjectionApp, monkeypatch) -> None:
    """A poison match no consumer met (the rebuild ran first): before session 35 it was only logged and
    counted, so `parked` did not list it and the consumers, not knowing it parked, left its next
    entries waiting for a gap. Its letters are written once, however many rebuilds park it."""
    _poison_f1(monkeypatch)
    write_matches(app.store, app.registry, _specs("f", 3))
    f1 = sorted((e.partition, e.entry_id) for e in app.store.read_partition(app.store.partition_of("f1"), count=1000)
                if e.envelope.match_id == "f1")
    letters = DeadLetters(app.store)
    for _ in range(2):
        report = app.rebuild()
        assert report.parked == len(f1) and _finished(app, ["f0", "f2"])
        record = letters.records()["f1"]
        assert (record["seq"], record["consumer"]) == ("1", "rebuild") and "cannot read f1" in record["reason"]
        assert sorted((int(f[b"partition"]), f[b"entry_id"].decode())
                      for _id, f in app.store.client.xrange(letters.stream_key)) == f1
    runner = app.runner("c1")
    runner.refresh_parked()
    assert "f1" in runner.projector.parked_matches


def test_a_match_struck_out_after_an_unpark_its_consumer_had_not_read_is_tried_again_and_named(
        app: ProjectionApp, monkeypatch) -> None:
    """A record names no match `unpark` let go since its consumer last read the parked matches: for
    an unpark after the strike-out, which projected the entries struck from the match's stream. One
    before it (a consumer reads the parked matches every few seconds) projected none of the entries
    struck, written after it. Before, the record acked them all the same, unprojected, and named no
    match: the match lost those events, `parked` listed nothing, and its next entries would have
    waited for a gap for ever. The entries of a match not named are now tried again: the unpark's
    projection skips them, and struck again they name the match."""
    copy = _f1_copy(app)
    half = len(copy) // 2
    app.store.append("f1", 0, copy[:half])
    config = replace(app.settings.runner_config("c1"), claim_every_s=3600.0)  # the parked matches read once
    runner = ProjectionRunner(app.store, Projector(app.sql, app.registry), config)
    _run(runner, lambda: _finished(app, ["src0"]))
    assert not app.unpark("f1").applied  # an operator's unpark, the consumer's read of the parked matches before it
    real = Projector._apply_run

    def flaky(self, conn, writes, row, envelopes, *args):  # a bug reading f1's next moves
        if envelopes[0].match_id == "f1" and envelopes[-1].seq > half:
            raise ValueError("cannot read f1's next move")
        return real(self, conn, writes, row, envelopes, *args)

    monkeypatch.setattr(Projector, "_apply_run", flaky)
    app.store.append("f1", half, copy[half:])
    _run(runner, lambda: True)
    record = DeadLetters(app.store).records()["f1"]
    assert record["seq"] == str(half + 1) and "cannot read f1's next move" in record["reason"]
    monkeypatch.undo()  # the fix is deployed
    assert app.unpark("f1").applied and _finished(app, ["f1"])


def test_a_rebuild_whose_redis_refuses_the_dead_letters_still_rebuilds_every_table(
        app: ProjectionApp, monkeypatch) -> None:
    """The rebuild empties the tables, then records what it parks and what it cannot read in the
    dead letters. A Redis out of memory (reads served, writes refused: a restore at its limit) failed
    it at its first letter, and every run after it, the read models left half built. It goes on now,
    and counts the entries left unrecorded (the command exits 1); a run once Redis takes writes
    records them."""
    _poison_f1(monkeypatch)
    write_matches(app.store, app.registry, _specs("f", 3))
    app.store.client.xadd(app.store.keys.partition_stream(0), {"e": b"\xff\xff not an envelope"})
    app.store.client.config_set("maxmemory", 1)
    try:
        report = app.rebuild()
    finally:
        app.store.client.config_set("maxmemory", 0)
    assert _finished(app, ["f0", "f2"]) and report.parked and report.unreadable == 1
    assert report.unrecorded == report.parked + 1
    letters = DeadLetters(app.store)
    assert not letters.records() and not app.store.client.xlen(letters.stream_key)
    report = app.rebuild()
    assert not report.unrecorded and "f1" in letters.records()
    assert app.store.client.xlen(letters.stream_key) == report.parked + 1


def test_an_unpark_whose_projection_fails_leaves_the_match_parked(app: ProjectionApp, monkeypatch) -> None:
    """`unpark` forgot the match's record before projecting it: with the database away (or the
    cause not fixed after all) the call failed, and the match was named nowhere, its earlier
    entries acked by the consumers that parked them, projected by nobody. The record stays until
    the match is projected."""
    copy = _f1_copy(app)
    app.store.append("f1", 0, copy)
    _poison_f1(monkeypatch)
    runner = ProjectionRunner(app.store, Projector(app.sql, app.registry), app.settings.runner_config("c1"))
    _run(runner, lambda: _finished(app, ["src0"]) and "f1" in DeadLetters(app.store).records())
    first = DeadLetters(app.store).records()["f1"]

    def away(self, entries):
        raise ConnectionError("the database is away")

    monkeypatch.setattr(Projector, "project", away)
    with pytest.raises(ConnectionError):
        app.unpark("f1")
    assert DeadLetters(app.store).records().get("f1") == first  # still named, as it was
    monkeypatch.undo()  # the database back, the fix deployed
    assert app.unpark("f1").applied and _finished(app, ["f1"])
    assert "f1" not in DeadLetters(app.store).records()
