"""The projector on SQLite with hand-made partition entries (no Redis): the exactly-once rules."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import redis
from redis._parsers.base import BaseParser

from famiglia.eventstore import PartitionEntry
from famiglia.readmodels import match_summary
from famiglia.readmodels.db import make_engine, read_session
from famiglia.v1.envelope_pb2 import EventEnvelope
from services.projection import schema
from services.projection.projector import (
    Projector,
    StoreCorrupt,
    StoreUnreadable,
    partial_outcome,
    poison_like,
)
from tests.integration.projection.dice_race import ENGINE, GAME_ID, registry
from tests.integration.projection.support import Clock, MatchSpec, _batches, dump
from tests.support.postgres import postgres_database, postgres_server, postgres_url  # noqa: F401 - fixtures


def played_entries(match_id: str, seed: int, partition: int = 0, players: tuple[str, ...] = ("ann", "bob"),
                   start_ms: int = 1_700_000_000_000) -> tuple[list[PartitionEntry], int]:
    """The entries of one random Dice Race match, as a partition stream would deliver them."""
    spec = MatchSpec(match_id=match_id, players=list(players), seed=seed, game_id=GAME_ID)
    entries: list[PartitionEntry] = []
    for command_id, envelopes in _batches(ENGINE, spec, Clock(start_ms)):
        if command_id == "done":
            break
        for env in envelopes:
            entries.append(PartitionEntry(partition, f"{env.timestamp.ToMilliseconds()}-{env.seq}", env))
    return entries, len(entries)


@pytest.fixture()
def projector(tmp_path: Path) -> Iterator[Projector]:
    engine = make_engine(f"sqlite:///{tmp_path / 'unit.db'}")
    schema.upgrade(engine)
    yield Projector(engine, registry())
    engine.dispose()


def test_a_gap_defers_the_rest_of_the_match_until_the_missing_events_arrive(projector: Projector) -> None:
    entries, total = played_entries("m1", seed=3)
    head, tail = entries[:4], entries[4:]
    early = projector.project(tail)
    assert not early.applied and len(early.deferred) == len(tail)
    assert projector.project(head).applied == head
    late = projector.project(early.deferred)
    assert len(late.applied) == len(tail)
    with read_session(projector.engine) as session:
        summary = match_summary(session, "m1")
    assert summary is not None and summary.version == total and summary.status == "finished"


def test_redelivery_is_skipped_and_changes_no_table(projector: Projector) -> None:
    entries, _ = played_entries("m1", seed=4)
    projector.project(entries)
    before = dump(projector.engine)
    again = projector.project(entries[2:] + entries[:2])
    assert not again.applied and len(again.skipped) == len(entries)
    assert dump(projector.engine) == before


def test_a_restarted_projector_refolds_live_matches_from_the_archive(projector: Projector) -> None:
    entries, _ = played_entries("m1", seed=5)
    projector.project(entries[:5])
    fresh = Projector(projector.engine, registry())  # a new process: nothing in memory
    outcome = fresh.project(entries[5:])
    assert outcome.finished_matches == ["m1"]
    with read_session(projector.engine) as session:
        summary = match_summary(session, "m1")
    assert summary is not None and summary.status == "finished"
    assert sorted(s.rank for s in summary.seats if s.rank is not None) in ([1, 1], [1, 2])


def test_the_checkpoint_keeps_the_newest_entry_per_partition(projector: Projector) -> None:
    first, _ = played_entries("m1", seed=6, partition=2)
    projector.project(first)
    tables = dump(projector.engine)
    [(partition, last_id, _ms, events)] = tables["projection_checkpoints"]
    assert partition == 2 and last_id == first[-1].entry_id and events == len(first)




@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_checkpoint_only_moves_forward_comparing_entry_ids_as_numbers(backend: str, tmp_path: Path,
                                                                       request: pytest.FixtureRequest) -> None:
    url = f"sqlite:///{tmp_path / 'ids.db'}" if backend == "sqlite" else str(request.getfixturevalue("postgres_url"))
    engine = make_engine(url)
    schema.upgrade(engine)
    projector = Projector(engine, registry())
    m1, _ = played_entries("m1", seed=6, partition=1)
    m2, _ = played_entries("m2", seed=7, partition=1)
    m3, _ = played_entries("m3", seed=8, partition=1)
    assert len(m1) < 900 and len(m2) < 900 and len(m3) > 5
    # m1 ends at 10000-0; m2's ids are older though larger as text (9xxx-5); m3's seqs pass 9 within 10000.
    m1 = [replace(e, entry_id=f"{10_000 - len(m1) + 1 + i}-0") for i, e in enumerate(m1)]
    m2 = [replace(e, entry_id=f"{9_000 + i}-5") for i, e in enumerate(m2)]
    m3 = [replace(e, entry_id=f"10000-{i + 5}") for i, e in enumerate(m3)]

    def checkpoint() -> tuple:
        [(partition, last_id, event_ms, events)] = dump(engine)["projection_checkpoints"]
        assert partition == 1
        return last_id, event_ms, events

    projector.project(m1)
    assert checkpoint() == ("10000-0", m1[-1].envelope.timestamp.ToMilliseconds(), len(m1))
    projector.project(m2)
    assert checkpoint() == ("10000-0", m1[-1].envelope.timestamp.ToMilliseconds(), len(m1) + len(m2))
    projector.project(m3[:5])
    assert checkpoint()[0] == "10000-9"
    projector.project(m3[5:])
    assert checkpoint() == (m3[-1].entry_id, m3[-1].envelope.timestamp.ToMilliseconds(),
                            len(m1) + len(m2) + len(m3))
    engine.dispose()


def test_ratings_do_not_depend_on_the_order_matches_finish_in(tmp_path: Path) -> None:
    import random

    pool = ("ann", "bob", "cy", "dee")
    matches = [played_entries(f"m{i}", seed=20 + i, partition=i % 3, players=(pool[i % 4], pool[(i + 1) % 4], "eve"),
                              start_ms=1_700_000_000_000 + 7_000 * i)[0] for i in range(6)]
    dumps = []
    for attempt, order in enumerate([list(range(6)), list(reversed(range(6))), random.Random(3).sample(range(6), 6)]):
        engine = make_engine(f"sqlite:///{tmp_path / f'order{attempt}.db'}")
        schema.upgrade(engine)
        projector = Projector(engine, registry())
        for i in order:
            projector.project(matches[i])
        tables = dump(engine)
        tables.pop("projection_checkpoints")  # entry ids are per partition arrival, not part of the ratings
        dumps.append(tables)
        engine.dispose()
    assert dumps[0]["ratings"] and dumps[0]["rating_history"]
    assert dumps[1] == dumps[0] and dumps[2] == dumps[0]


def test_sqlite_driver_statements_write_what_sqlalchemy_writes(tmp_path: Path) -> None:
    """The archive, match progress and checkpoint rows the SQLite driver path writes are the very
    rows (stored values, not only read-back ones) that SQLAlchemy's own execution writes."""
    entries = played_entries("m1", seed=9, partition=3)[0] + played_entries("m2", seed=10, partition=5)[0]

    def project(name: str, driver: bool) -> dict[str, list[tuple]]:
        engine = make_engine(f"sqlite:///{tmp_path / name}")
        schema.upgrade(engine)
        projector = Projector(engine, registry())
        assert set(projector.writer.driver) == {"archive", "progress", "checkpoints"}
        if not driver:
            projector.writer.driver = {}
        for i in range(0, len(entries), 7):  # batches that create, move and finish matches
            projector.project(entries[i:i + 7])
        with engine.connect() as conn:
            raw = {t: sorted(tuple(r) for r in conn.exec_driver_sql(f"SELECT * FROM {t}"))
                   for t in ("event_archive", "matches", "projection_checkpoints")}
        engine.dispose()
        return raw

    through_driver, through_sqlalchemy = project("driver.db", True), project("sqlalchemy.db", False)
    assert through_driver["event_archive"] and through_driver["projection_checkpoints"]
    assert through_driver == through_sqlalchemy


def test_a_failed_batch_gives_its_kept_connection_back_and_the_next_starts_afresh(projector: Projector,
                                                                                 monkeypatch) -> None:
    entries, total = played_entries("m1", seed=11)
    projector.project(entries[:3])
    kept = projector._conn
    assert kept is not None and not kept.closed
    projector.project(entries[3:5])
    assert projector._conn is kept  # one connection for every batch of this thread

    def broken(conn, writes) -> None:
        raise RuntimeError("disk gone")

    monkeypatch.setattr(projector.writer, "write", broken)
    with pytest.raises(RuntimeError):
        projector.project(entries[5:8])
    assert projector._conn is None and kept.closed  # rolled back and returned
    monkeypatch.undo()
    assert len(projector.project(entries[5:]).applied) == total - 5
    with read_session(projector.engine) as session:
        summary = match_summary(session, "m1")
    assert summary is not None and summary.version == total


# -- a store that lost acknowledged writes -------------------------------------------------------------------
def _written_again(entries: list[PartitionEntry], suffix: str) -> list[PartitionEntry]:
    """The same commands made again after the store lost them: the same seqs, new event ids."""
    out = []
    for entry in entries:
        env = EventEnvelope.FromString(entry.envelope.SerializeToString())
        new = env.event_id[:-len(suffix)] + suffix
        if new == env.event_id:  # a random id that ended so already: another one all the same
            new = env.event_id[:-len(suffix)] + suffix.lower()
        env.event_id = new
        out.append(replace(entry, envelope=env, entry_id=entry.entry_id + "9"))
    return out


def _archived_ids(projector: Projector, match_id: str) -> dict[int, str]:
    from sqlalchemy import select

    from services.projection.writes import ARCHIVE

    with projector.engine.connect() as conn:
        return dict(conn.execute(select(ARCHIVE.c.seq, ARCHIVE.c.event_id).where(ARCHIVE.c.match_id == match_id)).all())


def test_events_written_again_at_lost_seqs_replace_the_archived_ones_of_a_live_match(projector: Projector) -> None:
    """The store lost acknowledged writes (a Redis restored from an older AOF) and was written
    on since: entries at archived seqs under other event ids. A redelivery keeps its id and is
    skipped; these are projected again from the first of them, in the same transaction, and the
    match goes on to its end from the store's events. Before, they were skipped as redeliveries
    and the read models kept the lost events."""
    entries, total = played_entries("m1", seed=6)
    assert total == 10
    projector.project(entries[:8])
    again = _written_again(entries[4:8], suffix="ZZ")  # the store went back to 4
    assert all(a.envelope.event_id != e.envelope.event_id for a, e in zip(again, entries[4:8], strict=True))
    outcome = projector.project(again[:2])  # ... and was written on to 6
    assert outcome.applied == again[:2] and not outcome.skipped
    ids = _archived_ids(projector, "m1")
    assert sorted(ids) == list(range(1, 7))  # the lost 7 and 8 are gone with the replaced 5 and 6
    assert [ids[5], ids[6]] == [e.envelope.event_id for e in again[:2]]
    assert not projector.project(again[:2]).applied  # redelivered now: skipped
    assert projector.project(again[2:] + entries[8:]).finished_matches == ["m1"]
    with read_session(projector.engine) as session:
        summary = match_summary(session, "m1")
    assert summary is not None and summary.version == total and summary.status == "finished"
    assert _archived_ids(projector, "m1")[8] == again[-1].envelope.event_id


def test_a_match_the_store_took_back_is_projected_again_from_the_store_whoever_got_its_entries(
        projector: Projector) -> None:
    """Consumers of a group split a partition, so after the store went back and was written on,
    one consumer may project a new entry past the projected version (on top of the lost events)
    and acknowledge it before another meets the replaced seqs. Once the replaced seqs show, the
    match is projected again from the store's events, that acknowledged one included: it does
    not come back from the partition."""
    entries, total = played_entries("m1", seed=6)
    assert total == 10
    again = _written_again(entries[4:], suffix="ZZ")  # the store went back to 4, written on to 10
    store = [e.envelope for e in entries[:4] + again]
    projector.store_events = lambda match_id, after: [e for e in store if e.match_id == match_id and e.seq > after]
    projector.project(entries[:8])
    assert projector.project(again[4:5]).applied == again[4:5]  # seq 9, applied on the lost 5..8
    outcome = projector.project(again[:4])  # the replaced 5..8: the store's 5..10 are projected
    assert not outcome.applied and len(outcome.skipped) == 4 and outcome.finished_matches == ["m1"]
    assert _archived_ids(projector, "m1") == {e.seq: e.event_id for e in store}
    assert not projector.project(again[5:]).applied  # seq 10's entry, when it comes: already projected
    with read_session(projector.engine) as session:
        summary = match_summary(session, "m1")
    assert summary is not None and summary.version == total and summary.status == "finished"


def test_a_live_match_is_projected_again_from_the_first_seq_the_store_replaced_whatever_entry_showed_it(
        projector: Projector) -> None:
    """The first replaced seq may be in another consumer's hands: the one that meets a later
    replaced seq finds the first by comparing the archive with the store. Before, the match
    was projected again from the seq this consumer met, the store's events on top of lost
    ones before it, until an earlier replaced seq reached the projection (had the store's
    events ended the match meanwhile, it was flagged for a rebuild instead)."""
    entries, _ = played_entries("m1", seed=6)
    projector.project(entries[:8])
    again = _written_again(entries[4:8], suffix="ZZ")  # the store went back to 4, written on to 8
    store = [e.envelope for e in entries[:4] + again]
    projector.store_events = lambda match_id, after: [e for e in store if e.seq > after]
    outcome = projector.project(again[2:3])  # seq 7 meets the projection first
    assert not outcome.applied and len(outcome.skipped) == 1
    assert _archived_ids(projector, "m1") == {e.seq: e.event_id for e in store}
    assert not projector.project(again[:2] + again[3:]).applied  # the store's 5, 6 and 8: redeliveries now


def test_an_entry_past_what_the_store_holds_once_it_went_back_is_never_projected(projector: Projector) -> None:
    """A batch read just before the store went back holds an entry the store then lost, past
    the replaced ones. The store is read after the batch (to project the match again from it),
    so an entry past what it holds then is of the lost history. Before, the one right after
    the store's new last event was applied onto it (and kept for good had that event ended
    the match)."""
    entries, _ = played_entries("m1", seed=6)
    projector.project(entries[:6])
    again = _written_again(entries[4:6], suffix="ZZ")  # the store went back to 4, written on to 6
    store = [e.envelope for e in entries[:4] + again]
    projector.store_events = lambda match_id, after: [e for e in store if e.seq > after]
    outcome = projector.project([again[0], entries[6]])  # 5 again, and the lost 7 read before
    assert not outcome.applied and sorted(e.envelope.event_id for e in outcome.skipped) == sorted(
        e.envelope.event_id for e in (again[0], entries[6]))
    assert _archived_ids(projector, "m1") == {e.seq: e.event_id for e in store}
    with read_session(projector.engine) as session:
        summary = match_summary(session, "m1")
    assert summary is not None and summary.version == 6


def _counted_store(projector: Projector, store: list[EventEnvelope]) -> list[int]:
    """Give the projector `store` as its event store; the returned list gets the `after` of each read."""
    reads: list[int] = []

    def read(match_id: str, after: int) -> list[EventEnvelope]:
        reads.append(after)
        return [e for e in store if e.match_id == match_id and e.seq > after]

    projector.store_events = read
    return reads


def _read_at(entries: list[PartitionEntry], ms: int) -> list[PartitionEntry]:
    """The entries as a partition stream read at `ms` gives them (stream ids grow with every write)."""
    return [replace(e, entry_id=f"{ms}-{e.envelope.seq}") for e in entries]


def test_entries_read_before_the_store_went_back_are_skipped_once_another_consumer_projected_the_new_history(
        projector: Projector) -> None:
    """A consumer read the lost 6 and 7 just before the store went back; another consumer projected
    the store's new 5 meanwhile. Before, the lost 6 was applied onto it: its seq is the match's next.
    Its stream id is not past the one the match was last moved on from, so it is checked against
    the store, which holds another event at 6: skipped, and the store's own 6 comes after it."""
    entries, _ = played_entries("m1", seed=6)
    read_before = _read_at(entries, 1000)
    projector.project(read_before[:4])
    again = _read_at(_written_again(entries[4:6], suffix="ZZ"), 2000)  # the store went back to 4, wrote 5 and 6
    store = [e.envelope for e in entries[:4] + again]
    reads = _counted_store(projector, store)
    assert projector.project(again[:1]).applied == again[:1] and reads == []
    outcome = projector.project(read_before[5:7])
    assert not outcome.applied and outcome.skipped == read_before[5:7] and reads == [5]
    assert _archived_ids(projector, "m1") == {e.seq: e.event_id for e in store[:5]}
    assert projector.project(again[1:]).applied == again[1:]
    assert _archived_ids(projector, "m1") == {e.seq: e.event_id for e in store}


def test_the_store_is_read_only_for_an_entry_whose_stream_id_is_not_past_the_matchs_last(
        projector: Projector) -> None:
    """The check costs one comparison per match and batch: the store is not read while stream ids
    grow. An entry whose id only looks early (written by a Redis whose clock went back) is applied
    once the store is found to hold it."""
    entries, total = played_entries("m1", seed=6)
    reads = _counted_store(projector, [e.envelope for e in entries])
    read = _read_at(entries, 2000)
    for i in range(0, 8, 2):
        assert projector.project(read[i:i + 2]).applied == read[i:i + 2]
    assert reads == []
    early = _read_at(entries[8:], 1000)
    assert projector.project(early).applied == early and reads == [8]
    with read_session(projector.engine) as session:
        summary = match_summary(session, "m1")
    assert summary is not None and summary.version == total and summary.status == "finished"


def test_an_entry_read_before_the_store_went_back_never_flags_a_match_that_ended_on_the_stores_history(
        projector: Projector) -> None:
    """Another consumer projected the store's new history to the match's end; then a batch read
    before the store went back arrives, at archived seqs under other event ids. Before, the match
    was flagged for a rebuild (a store that went back after it finished), though the archive held
    what the store holds: the entries are of the lost history, skipped."""
    entries, total = played_entries("m1", seed=3)
    lost = _read_at(entries, 1000)
    projector.project(lost[:-2])
    again = _read_at(_written_again(entries[-2:], suffix="ZZ"), 2000)
    store = [e.envelope for e in entries[:-2] + again]
    projector.store_events = lambda match_id, after: [e for e in store if e.seq > after]
    assert projector.project(again).finished_matches == ["m1"]
    outcome = projector.project(lost[-2:])
    assert not outcome.applied and outcome.skipped == lost[-2:]
    assert _diverged_seq(projector, "m1") is None
    assert _archived_ids(projector, "m1") == {e.seq: e.event_id for e in store} and len(store) == total


def test_a_store_that_cannot_be_read_fails_the_batch_without_parking_the_match(projector: Projector) -> None:
    """Projecting a match again from the store needs the store: when it is away the batch fails
    and is redone later, and the events, not at fault, are never parked."""
    entries, _ = played_entries("m1", seed=6)
    projector.project(entries[:8])

    def away(match_id: str, after: int) -> list[EventEnvelope]:
        raise ConnectionError("the store is away")

    projector.store_events = away
    again = _written_again(entries[4:8], suffix="ZZ")
    for _ in range(projector.park_after + 1):
        with pytest.raises(StoreUnreadable):
            projector.project(again)
    assert not projector.parked_matches
    assert _archived_ids(projector, "m1") == {e.envelope.seq: e.envelope.event_id for e in entries[:8]}


@pytest.mark.parametrize("away", [redis.exceptions.ConnectionError("Connection refused"),
                                  redis.exceptions.BusyLoadingError("Redis is loading the dataset in memory"),
                                  redis.exceptions.TimeoutError("Timeout reading from socket"),
                                  # Redis's own replies, as redis-py's parser makes them
                                  BaseParser.parse_error("MASTERDOWN Link with MASTER is down"),
                                  BaseParser.parse_error("MISCONF Redis is configured to save RDB snapshots, but "
                                                         "it's currently unable to persist to disk."),
                                  BaseParser.parse_error("OOM command not allowed when used memory > 'maxmemory'."),
                                  BaseParser.parse_error("READONLY You can't write against a read only replica.")])
def test_redis_out_of_reach_is_an_unreadable_store_never_a_poison(projector: Projector, away: Exception) -> None:
    entries, _ = played_entries("m1", seed=6)
    projector.project(entries[:8])

    def failing(match_id: str, after: int) -> list[EventEnvelope]:
        raise away

    projector.store_events = failing
    for _ in range(projector.park_after + 1):
        with pytest.raises(StoreUnreadable) as failed:
            projector.project(_written_again(entries[4:8], suffix="ZZ"))
        assert not poison_like(failed.value)
    assert not projector.parked_matches


def test_an_event_the_store_holds_but_cannot_be_read_gets_its_match_parked(projector: Projector) -> None:
    """A corrupt event in the match's stream is no outage: the store answers, and what it holds
    fails the match as a poison entry does, until it is parked (before, it was an unreadable
    store: never parked, and the consumer held back for good)."""
    entries, _ = played_entries("m1", seed=6)
    projector.project(entries[:8])

    def corrupt(match_id: str, after: int) -> list[EventEnvelope]:
        return [EventEnvelope.FromString(b"\xff\xff garbage")]

    projector.store_events = corrupt
    again = _written_again(entries[4:8], suffix="ZZ")
    for _ in range(projector.park_after - 1):  # alone, nothing else moved: the round fails, a strike each
        with pytest.raises(StoreCorrupt) as failed:
            projector.project(again)
        assert poison_like(failed.value) and "DecodeError" in str(failed.value)
    parked = projector.project(again)
    assert [p.entry for p in parked.parked] == again and "StoreCorrupt" in parked.parked[0].reason
    assert projector.parked_matches == {"m1"}


def _diverged_seq(projector: Projector, match_id: str) -> int | None:
    from sqlalchemy import select

    from services.projection.writes import MATCHES

    with projector.engine.connect() as conn:
        return conn.execute(select(MATCHES.c.diverged_seq).where(MATCHES.c.match_id == match_id)).scalar_one()


def unflagged_dump(projector: Projector) -> dict[str, list[tuple]]:
    """The tables with every diverged flag cleared: what else a flagged batch changed."""
    from sqlalchemy import update

    from services.projection.writes import MATCHES

    with projector.engine.begin() as conn:
        conn.execute(update(MATCHES).values(diverged_seq=None))
    return dump(projector.engine)


def test_events_written_again_after_a_match_was_rated_are_left_for_an_operator(projector: Projector) -> None:
    """A finished match was ranked and rated on the events the store lost: the projection does
    not undo that; it flags the match for a rebuild (durably, with the batch) and changes
    nothing else. Before, it only logged the match, and nothing kept retention from trimming
    the store's copy."""
    entries, _ = played_entries("m1", seed=3)
    projector.project(entries)
    before = dump(projector.engine)
    outcome = projector.project(_written_again(entries[-3:], suffix="ZZ"))
    assert not outcome.applied and len(outcome.skipped) == 3
    assert _diverged_seq(projector, "m1") == entries[-3].envelope.seq
    assert unflagged_dump(projector) == before


def _past_the_end(entry: PartitionEntry, seqs: int) -> list[PartitionEntry]:
    """Events after a finished match's last seq: a store that went back and was played on
    further than the match had gone."""
    out = []
    for n in range(1, seqs + 1):
        env = EventEnvelope.FromString(entry.envelope.SerializeToString())
        env.seq += n
        env.event_id = env.event_id[:-2] + f"Y{n}"
        out.append(replace(entry, envelope=env, entry_id=f"{entry.entry_id}{n}"))
    return out


def test_nothing_more_is_projected_onto_a_match_flagged_as_diverged(projector: Projector) -> None:
    """The store went back and was played on past the old end: the events after the projected
    version are of the store's new history and must not be archived on top of the lost one
    (a mix of two histories, which a later trim would make the only copy). Before, those in
    the flagging batch and every later one were applied."""
    entries, total = played_entries("m1", seed=3)
    projector.project(entries)
    before = dump(projector.engine)
    again = _written_again(entries[-2:], suffix="ZZ")
    further = _past_the_end(again[-1], 2)
    outcome = projector.project(again + further[:1])
    assert not outcome.applied and len(outcome.skipped) == 3
    assert not projector.project(further[1:]).applied
    assert sorted(_archived_ids(projector, "m1")) == list(range(1, total + 1))
    assert _diverged_seq(projector, "m1") == total - 1
    assert unflagged_dump(projector) == before


def test_a_match_flagged_again_keeps_the_earliest_seq_it_was_flagged_from(projector: Projector) -> None:
    """The retention sweep may flag a match the projector flagged meanwhile (or the other way):
    `diverged_seq` is where the two histories part, so a later seq never replaces an earlier one."""
    from services.projection.divergence import mark_diverged

    entries, _ = played_entries("m1", seed=17)
    projector.project(entries)
    mark_diverged(projector.engine, "m1", 4)
    mark_diverged(projector.engine, "m1", 6)
    assert _diverged_seq(projector, "m1") == 4
    mark_diverged(projector.engine, "m1", 2)
    assert _diverged_seq(projector, "m1") == 2


def test_an_earlier_replaced_seq_that_comes_later_lowers_the_flag(projector: Projector) -> None:
    """Consumers split a partition: the replaced seqs of a finished match may reach the
    projection in several batches, the later seqs first. The flag names the first of them."""
    entries, total = played_entries("m1", seed=3)
    projector.project(entries)
    again = _written_again(entries[-4:], suffix="ZZ")
    projector.project(again[2:])
    assert _diverged_seq(projector, "m1") == total - 1
    assert not projector.project(again[:2]).applied
    assert _diverged_seq(projector, "m1") == total - 3


# -- poison entries: parked, never wedging the others ---------------------------------------------------
def _copy_keeping_event_ids(entries: list[PartitionEntry], match_id: str) -> list[PartitionEntry]:
    """What an import before the fix stored: another match id, the same event ids (unique in the archive)."""
    out = []
    for entry in entries:
        env = EventEnvelope.FromString(entry.envelope.SerializeToString())
        env.match_id = match_id
        out.append(replace(entry, envelope=env))
    return out


def test_a_match_whose_events_break_the_archive_is_parked_and_the_others_go_on(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'poison.db'}")
    schema.upgrade(engine)
    projector = Projector(engine, registry(), max_attempts=2, park_after=3)
    original, _ = played_entries("m-original", seed=3)
    projector.project(original)
    dupe = _copy_keeping_event_ids(original, "m-dupe")
    others = [played_entries(f"m-other{i}", seed=20 + i, partition=1)[0] for i in range(3)]

    first = projector.project(dupe + others[0])
    assert first.applied == others[0] and {e.envelope.match_id for e in first.deferred} == {"m-dupe"}
    assert not first.parked
    second = projector.project(first.deferred + others[1])  # the suspect goes alone: the rest commits
    assert second.applied == others[1] and not second.parked
    third = projector.project(second.deferred + others[2])
    assert third.applied == others[2] and not third.deferred
    assert [p.entry for p in third.parked] == dupe and [p.first for p in third.parked].count(True) == 1
    assert "IntegrityError" in third.parked[0].reason
    assert projector.parked_matches == {"m-dupe"}
    late = projector.project(dupe[-1:])  # a later entry of a parked match is parked without a try
    assert [p.reason for p in late.parked] == ["match_parked"] and not late.deferred
    with read_session(engine) as session:
        assert match_summary(session, "m-dupe") is None
        assert all(match_summary(session, f"m-other{i}").status == "finished" for i in range(3))  # type: ignore[union-attr]
    projector.release()
    engine.dispose()


def test_a_match_that_does_not_start_with_match_created_is_parked_at_once(projector: Projector) -> None:
    entries, _ = played_entries("m-headless", seed=6)
    entries[0].envelope.type = "zzz"  # seq 1, but no match_created: corrupt, for good
    good, _ = played_entries("m-fine", seed=7, partition=1)
    outcome = projector.project(entries + good)
    assert outcome.applied == good
    assert [p.entry for p in outcome.parked] == entries and outcome.parked[0].first
    assert outcome.parked[0].reason.startswith("not_a_match") and not outcome.deferred
    assert projector.parked_matches == {"m-headless"}


def test_a_failure_of_our_own_fails_the_round_until_the_match_is_parked(projector: Projector, monkeypatch) -> None:
    entries, _ = played_entries("m1", seed=12)
    real_write = projector.writer.write

    def broken(conn, writes) -> None:
        if any(row.match_id == "m1" for row in writes.matches):
            raise KeyError("cannot read m1")
        real_write(conn, writes)

    monkeypatch.setattr(projector.writer, "write", broken)
    for _ in range(projector.park_after - 1):  # alone and nothing else moved: the round fails, as before
        with pytest.raises(KeyError):
            projector.project(entries)
    parked = projector.project(entries)
    assert [p.entry for p in parked.parked] == entries and "KeyError" in parked.parked[0].reason


def test_several_matches_failing_alone_at_once_are_never_parked(projector: Projector, monkeypatch) -> None:
    """The fault is then ours or the database's, not the matches': the round fails, nothing is parked."""
    a, _ = played_entries("m-a", seed=13)
    b, _ = played_entries("m-b", seed=14, partition=1)

    def broken(conn, writes) -> None:
        raise TypeError("a bug in the writer")

    monkeypatch.setattr(projector.writer, "write", broken)
    for _ in range(projector.park_after + 2):
        with pytest.raises(TypeError):
            projector.project(a + b)
    assert not projector.parked_matches
    monkeypatch.undo()
    assert len(projector.project(a + b).applied) == len(a) + len(b)


def test_poison_matches_failing_alone_together_with_nothing_else_are_parked(projector: Projector,
                                                                           monkeypatch) -> None:
    """Two poison matches and no other traffic: a made-up match, rolled back, still commits, so
    the fault is theirs. Before, several matches failing alone with nothing else moving counted
    no strike: the round failed every few seconds for good."""
    a, _ = played_entries("m-a", seed=13)
    b, _ = played_entries("m-b", seed=14, partition=1)
    real_write = projector.writer.write

    def broken(conn, writes) -> None:
        if any(row.match_id in ("m-a", "m-b") for row in writes.matches):
            raise KeyError("cannot read this match")
        real_write(conn, writes)

    monkeypatch.setattr(projector.writer, "write", broken)
    for _ in range(projector.park_after - 1):
        with pytest.raises(KeyError):
            projector.project(a + b)
    parked = projector.project(a + b)
    assert [p.entry for p in parked.parked] == a + b and not parked.deferred
    assert projector.parked_matches == {"m-a", "m-b"}
    assert dump(projector.engine)["matches"] == []  # the probes left nothing behind


def test_a_failed_round_hands_back_what_it_did_before_it_failed(projector: Projector, monkeypatch) -> None:
    """A redelivery and an entry of a parked match, beside a poison match failing alone: the round
    fails, and the entries done or parked go with the error, for the caller to ack (before, the
    raise dropped them, and they stayed unacked until a healthy batch came)."""
    done, _ = played_entries("m-done", seed=3)
    projector.project(done)
    poison, _ = played_entries("m-poison", seed=12, partition=1)
    parked, _ = played_entries("m-parked", seed=5, partition=2)
    projector.parked_matches.add("m-parked")
    real_write = projector.writer.write

    def broken(conn, writes) -> None:
        if any(row.match_id == "m-poison" for row in writes.matches):
            raise KeyError("cannot read m-poison")
        real_write(conn, writes)

    monkeypatch.setattr(projector.writer, "write", broken)
    with pytest.raises(KeyError) as failed:
        projector.project(poison + done[-2:])
    partial = partial_outcome(failed.value)
    assert partial is not None and partial.skipped == done[-2:] and not partial.parked
    other, _ = played_entries("m-other", seed=7, partition=3)

    def bug(conn, writes) -> None:  # every match fails, the probe too: ours, no strike
        raise TypeError("a bug in the writer")

    monkeypatch.setattr(projector.writer, "write", bug)
    with pytest.raises(TypeError) as failed:
        projector.project(poison + other + parked[:3])
    partial = partial_outcome(failed.value)
    assert partial is not None and [p.entry for p in partial.parked] == parked[:3] and not partial.done


def test_a_database_that_is_away_is_never_a_reason_to_park(projector: Projector, monkeypatch) -> None:
    from sqlalchemy.exc import OperationalError

    entries, _ = played_entries("m1", seed=15)
    projector.max_attempts = 1

    def away(conn, writes) -> None:
        raise OperationalError("INSERT", {}, Exception("server closed the connection"))

    monkeypatch.setattr(projector.writer, "write", away)
    for _ in range(projector.park_after + 2):
        with pytest.raises(OperationalError):
            projector.project(entries)
    assert not projector.parked_matches


def test_a_fold_failure_names_the_event_its_command_and_its_trace() -> None:
    from services.projection.projector import _envelope_ids

    envelope = EventEnvelope(event_id="e1", type="card_played", seat=2, command_id="c-7",
                             trace={"traceparent": "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"})
    assert _envelope_ids(envelope) == {"event_id": "e1", "type": "card_played", "seat": 2, "command_id": "c-7",
                                       "event_trace_id": "ab" * 16}
    assert _envelope_ids(None) == {}


def test_a_projection_span_links_the_traces_of_the_batchs_other_commands() -> None:
    from services.projection.projector import _other_commands

    def traced(n: int) -> EventEnvelope:
        return EventEnvelope(trace={"traceparent": f"00-{n:032x}-{n:016x}-01"})

    links = _other_commands([traced(1), traced(1), traced(2), EventEnvelope(), traced(3), traced(2)])
    assert [link.context.trace_id for link in links] == [2, 3]  # the first's is the span's own


def test_the_trace_of_a_command_reaches_the_batch_that_writes_its_read_models(projector: Projector,
                                                                             monkeypatch) -> None:
    """The batch span (the read models' write and commit) is a trace of its own, as it serves
    many commands: it links to each command's trace, and each `projection.apply` span, in its
    command's trace, links back to it."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from famiglia import telemetry

    provider, exporter = TracerProvider(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)  # the global provider, for this test
    monkeypatch.setattr(telemetry, "_tracers", {})
    commands = {}
    for n, match_id in enumerate(("m1", "m2"), start=1):
        entries, _ = played_entries(match_id, seed=n)
        for entry in entries:
            entry.envelope.trace["traceparent"] = f"00-{n:032x}-{n:016x}-01"
        commands[match_id] = (n, entries)
    projector.project([e for _n, entries in commands.values() for e in entries[:3]])
    spans = exporter.get_finished_spans()
    (batch,) = [s for s in spans if s.name == "projection.batch"]
    assert batch.parent is None and batch.context.trace_id not in (1, 2)
    assert sorted(link.context.trace_id for link in batch.links) == [1, 2]
    applied = {s.attributes["match_id"]: s for s in spans if s.name == "projection.apply"}
    for match_id, (n, _entries) in commands.items():
        span = applied[match_id]
        assert span.context.trace_id == n and span.parent.span_id == n
        assert span.attributes["game_id"] == GAME_ID
        assert [link.context.span_id for link in span.links] == [batch.context.span_id]


def test_a_match_that_failed_before_and_then_loses_a_race_alone_is_redone_at_once_not_struck(
        projector: Projector, monkeypatch) -> None:
    """Alone, a lost race (a unique violation: another consumer wrote the match first) is redone
    within the batch: it is not counted against the match, which would park it after a few."""
    from sqlalchemy.exc import IntegrityError

    entries, _ = played_entries("m1", seed=16)
    projector.max_attempts = 2
    real_write = projector.writer.write
    races = iter(range(3))  # the first round's two attempts, then the first attempt alone

    def racing(conn, writes) -> None:
        if next(races, None) is not None:
            raise IntegrityError("INSERT", {}, Exception("UNIQUE constraint failed: matches.match_id"))
        real_write(conn, writes)

    monkeypatch.setattr(projector.writer, "write", racing)
    with pytest.raises(IntegrityError):  # lost every attempt: the match goes alone from now on
        projector.project(entries)
    again = projector.project(entries)
    assert again.applied == entries and not again.deferred and not again.parked
    assert again.attempts == 2


def test_a_writer_failing_for_every_match_in_progress_parks_none(projector: Projector, monkeypatch) -> None:
    """The probe goes the way the failing matches go: a made-up match created, then moved on. Before,
    it was only created (rows inserted), so a fault of ours or the database's in moving a match on
    (its progress row, written for every match in progress) passed the probe, and every match a
    consumer kept was parked after `park_after` rounds."""
    a, _ = played_entries("m-a", seed=13)
    b, _ = played_entries("m-b", seed=14, partition=1)
    projector.project(a[:2] + b[:2])
    real_write = projector.writer.write

    def broken(conn, writes) -> None:
        if any(row.created is None for row in writes.matches):
            raise KeyError("a bug in writing a match's progress")
        real_write(conn, writes)

    monkeypatch.setattr(projector.writer, "write", broken)
    for _ in range(projector.park_after + 2):
        with pytest.raises(KeyError):
            projector.project(a[2:] + b[2:])
    assert not projector.parked_matches
    monkeypatch.undo()
    assert len(projector.project(a[2:] + b[2:]).applied) == len(a) + len(b) - 4
    assert {m[0] for m in dump(projector.engine)["matches"]} == {"m-a", "m-b"}  # no probe's left behind
