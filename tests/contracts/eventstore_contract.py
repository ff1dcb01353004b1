"""The event-store contract suite: every adapter binds it in one line.

    class TestInMemoryEventStore(EventStoreContract):
        def make_store(self) -> EventStore:
            return InMemoryEventStore()

It reads as a story of one match's stream: versions count up from 1 with no
gaps; a stale writer is refused and writes nothing; a batch lands whole; a
retried command gets its first answer; readers see the tail in order; the
partition stream sees every entry; matches stay apart; `wait_for` wakes on a
new append; racing writers get exactly one winner per version; staged events
(NP-H9) stay out of every reader's sight until the next append writes them first, or a
writer writes them out where it places them, their commands' records moving with them. What only one
adapter can show (AOF survival, hash slots) extends its binding.
"""

from __future__ import annotations

import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator

import pytest

from famiglia.eventstore import AppendResult, ConcurrencyConflict, EventStore
from famiglia.v1.envelope_pb2 import EventEnvelope, Visibility, VisibilityKind


def envelope(match_id: str, seq: int, kind: str = "tick", command_id: str = "", payload: bytes = b"") -> EventEnvelope:
    """A test envelope; the event store never looks inside the payload."""
    event = EventEnvelope(
        event_id=f"{match_id}/{seq}/{uuid.uuid4().hex[:8]}",
        match_id=match_id,
        seq=seq,
        type=kind,
        payload_type="famiglia.test.Tick",
        payload=payload or f"{kind}:{seq}".encode(),
        visibility=Visibility(kind=VisibilityKind.VISIBILITY_PUBLIC),
        command_id=command_id,
        seat=-1,
        game_id="test",
    )
    event.timestamp.FromMilliseconds(1_700_000_000_000 + seq)
    return event


def renumbered(staged: EventEnvelope, seq: int) -> EventEnvelope:
    """A staged envelope as a writer places it in a block: only its seq changes."""
    moved = EventEnvelope()
    moved.CopyFrom(staged)
    moved.seq = seq
    return moved


def batch(match_id: str, after: int, count: int, command_id: str = "") -> list[EventEnvelope]:
    """`count` envelopes continuing a match at version `after`."""
    return [envelope(match_id, after + i, command_id=command_id) for i in range(1, count + 1)]


def new_match_id() -> str:
    return f"m-{uuid.uuid4().hex[:12]}"


class EventStoreContract(ABC):
    """Bind with `make_store()`; the store is closed after each test."""

    #: writers per race and appends each; bindings may raise them under the soak profile
    race_writers: int = 6
    race_appends: int = 15

    @abstractmethod
    def make_store(self) -> EventStore:
        """A fresh, empty store."""

    @pytest.fixture()
    def store(self) -> Iterator[EventStore]:
        store = self.make_store()
        try:
            yield store
        finally:
            store.close()

    # -- versions ------------------------------------------------------------------------
    def test_a_new_match_is_at_version_zero(self, store: EventStore) -> None:
        match = new_match_id()
        assert store.version(match) == 0
        assert not store.exists(match)
        assert store.read(match) == []

    def test_versions_count_up_from_one_without_gaps(self, store: EventStore) -> None:
        match = new_match_id()
        first = store.append(match, 0, batch(match, 0, 1))
        second = store.append(match, 1, batch(match, 1, 3))
        assert first == AppendResult(version=1, first_seq=1, last_seq=1)
        assert second == AppendResult(version=4, first_seq=2, last_seq=4)
        assert store.version(match) == 4
        assert store.exists(match)
        assert [event.seq for event in store.read(match)] == [1, 2, 3, 4]

    def test_events_come_back_byte_for_byte(self, store: EventStore) -> None:
        match = new_match_id()
        written = batch(match, 0, 3)
        written[1].trace["traceparent"] = "00-abc-def-01"
        written[2].payload = bytes(range(256))  # binary payloads survive (no decoding anywhere)
        store.append(match, 0, written)
        assert [e.SerializeToString() for e in store.read(match)] == [e.SerializeToString() for e in written]

    # -- conflicts -----------------------------------------------------------------------
    def test_a_stale_expected_version_is_refused_and_writes_nothing(self, store: EventStore) -> None:
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 2))
        partition_before = store.read_partition(store.partition_of(match), count=10_000)
        for stale in (0, 1, 3):
            with pytest.raises(ConcurrencyConflict) as refused:
                store.append(match, stale, batch(match, stale, 2))
            assert (refused.value.match_id, refused.value.expected, refused.value.actual) == (match, stale, 2)
        assert store.version(match) == 2
        assert [event.seq for event in store.read(match)] == [1, 2]
        assert store.read_partition(store.partition_of(match), count=10_000) == partition_before

    def test_a_batch_is_atomic(self, store: EventStore) -> None:
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 5), command_id="c1")
        with pytest.raises(ConcurrencyConflict):
            store.append(match, 3, batch(match, 3, 4), command_id="c2")
        assert [event.seq for event in store.read(match)] == [1, 2, 3, 4, 5]
        # the refused command id was not recorded: it may run once the writer caught up
        assert store.append(match, 5, batch(match, 5, 4), command_id="c2").duplicate is False
        assert [event.seq for event in store.read(match)] == list(range(1, 10))

    def test_a_malformed_batch_is_refused_before_anything_is_written(self, store: EventStore) -> None:
        match = new_match_id()
        gap = [envelope(match, 1), envelope(match, 3)]
        wrong_match = [envelope(match, 1), envelope("someone-else", 2)]
        for bad in (gap, wrong_match, [envelope(match, 2)], []):
            with pytest.raises(ValueError):
                store.append(match, 0, bad)
        with pytest.raises(ValueError):
            store.append(match, -1, [envelope(match, 0)])
        assert store.version(match) == 0
        assert store.read_partition(store.partition_of(match), count=10_000) == []

    # -- idempotency ---------------------------------------------------------------------
    def test_a_repeated_command_id_returns_the_first_answer_and_appends_nothing(self, store: EventStore) -> None:
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 1))
        first = store.append(match, 1, batch(match, 1, 2, "cmd-1"), command_id="cmd-1")
        again = store.append(match, 1, batch(match, 1, 2, "cmd-1"), command_id="cmd-1")
        assert first == AppendResult(version=3, first_seq=2, last_seq=3)
        assert again == AppendResult(version=3, first_seq=2, last_seq=3, duplicate=True)
        store.append(match, 3, batch(match, 3, 1), command_id="cmd-2")
        # even with a stale (or current) expected version, the first answer wins
        late = store.append(match, 4, batch(match, 4, 2, "cmd-1"), command_id="cmd-1")
        assert late == AppendResult(version=3, first_seq=2, last_seq=3, duplicate=True)
        assert store.version(match) == 4
        assert len(store.read_partition(store.partition_of(match), count=10_000)) == 4

    def test_command_ids_are_scoped_to_their_match(self, store: EventStore) -> None:
        one, two = new_match_id(), new_match_id()
        store.append(one, 0, batch(one, 0, 1), command_id="same")
        assert store.append(two, 0, batch(two, 0, 2), command_id="same").duplicate is False
        assert store.version(two) == 2

    def test_without_a_command_id_every_append_is_new(self, store: EventStore) -> None:
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 1))
        assert store.append(match, 1, batch(match, 1, 1)).duplicate is False
        assert store.version(match) == 2

    # -- staging (NP-H9) -----------------------------------------------------------------
    def test_staged_events_take_their_seqs_but_no_reader_sees_them(self, store: EventStore) -> None:
        match = new_match_id()
        partition = store.partition_of(match)
        store.append(match, 0, batch(match, 0, 2))
        staged = store.stage(match, 2, batch(match, 2, 1, "answer-a"), command_id="answer-a")
        assert staged == AppendResult(version=3, first_seq=3, last_seq=3)
        assert store.stage(match, 3, batch(match, 3, 2, "answer-b"), command_id="answer-b").version == 5
        assert store.version(match) == 2
        assert [e.seq for e in store.read(match)] == [1, 2]
        assert store.wait_for(match, 2, 50) == []
        assert len(store.read_partition(partition, count=10_000)) == 2
        assert [(e.seq, e.command_id) for e in store.read_staged(match)] == [(3, "answer-a"), (4, "answer-b"),
                                                                            (5, "answer-b")]
        assert [e.seq for e in store.read_staged(match, after=3)] == [4, 5]

    def test_the_next_append_writes_the_staged_events_first(self, store: EventStore) -> None:
        match = new_match_id()
        partition = store.partition_of(match)
        store.append(match, 0, batch(match, 0, 1))
        store.stage(match, 1, batch(match, 1, 1, "answer-a"), command_id="answer-a")
        store.stage(match, 2, batch(match, 2, 1, "answer-b"), command_id="answer-b")
        result = store.append(match, 3, batch(match, 3, 2, "resolve"), command_id="resolve")
        assert result == AppendResult(version=5, first_seq=4, last_seq=5)
        assert store.version(match) == 5
        assert store.read_staged(match) == []
        assert [(e.seq, e.command_id) for e in store.read(match)] == [
            (1, ""), (2, "answer-a"), (3, "answer-b"), (4, "resolve"), (5, "resolve")]
        assert [e.envelope.seq for e in store.read_partition(partition, count=10_000)] == [1, 2, 3, 4, 5]
        # and the match goes on as before
        assert store.append(match, 5, batch(match, 5, 1)).version == 6

    def test_writers_check_the_position_and_conflicts_report_it(self, store: EventStore) -> None:
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 1))
        store.stage(match, 1, batch(match, 1, 1))
        for write in (store.append, store.stage):
            with pytest.raises(ConcurrencyConflict) as conflict:
                write(match, 1, batch(match, 1, 1))  # the version, not the position
            assert conflict.value.actual == 2
        assert store.version(match) == 1
        assert [e.seq for e in store.read_staged(match)] == [2]
        with pytest.raises(ConcurrencyConflict) as ahead:
            store.stage(match, 3, batch(match, 3, 1))
        assert ahead.value.actual == 2

    def test_a_staged_command_id_answers_with_its_first_answer(self, store: EventStore) -> None:
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 1))
        store.stage(match, 1, batch(match, 1, 1, "answer"), command_id="answer")
        again = store.stage(match, 2, batch(match, 2, 1, "answer"), command_id="answer")
        assert again == AppendResult(version=2, first_seq=2, last_seq=2, duplicate=True)
        assert store.append(match, 2, batch(match, 2, 1, "answer"), command_id="answer").duplicate
        store.append(match, 2, batch(match, 2, 1))
        late = store.append(match, 3, batch(match, 3, 1, "answer"), command_id="answer")
        assert late == AppendResult(version=2, first_seq=2, last_seq=2, duplicate=True)
        assert [e.seq for e in store.read(match)] == [1, 2, 3]

    def test_nothing_is_staged_before_a_match_exists(self, store: EventStore) -> None:
        match = new_match_id()
        with pytest.raises(ValueError):
            store.stage(match, 0, batch(match, 0, 1))
        with pytest.raises(ConcurrencyConflict):
            store.stage(match, 1, batch(match, 1, 1))
        assert store.version(match) == 0 and store.read_staged(match) == []

    # -- writing staged events out (NP-H9's slots) -----------------------------------------
    def _two_staged(self, store: EventStore) -> str:
        """A match at version 1 with answer-a staged at 2 and answer-b's two events at 3-4."""
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 1))
        store.stage(match, 1, batch(match, 1, 1, "answer-a"), command_id="answer-a")
        store.stage(match, 2, batch(match, 2, 2, "answer-b"), command_id="answer-b")
        return match

    def test_a_write_out_puts_the_staged_events_where_the_writer_places_them(self, store: EventStore) -> None:
        match = self._two_staged(store)
        a, b1, b2 = store.read_staged(match)
        block = [renumbered(b1, 2), renumbered(b2, 3), envelope(match, 4, "padding"), renumbered(a, 5)]
        result = store.write_out(match, 4, block, [5, 2, 3], [envelope(match, 6, command_id="chat")], "chat")
        assert result == AppendResult(version=6, first_seq=6, last_seq=6)
        assert store.version(match) == 6 and store.read_staged(match) == []
        written = store.read(match)
        assert [e.seq for e in written] == [1, 2, 3, 4, 5, 6]
        assert [e.event_id for e in written[1:5]] == [b1.event_id, b2.event_id, block[2].event_id, a.event_id]
        assert [e.SerializeToString() for e in written[1:5]] == [e.SerializeToString() for e in block]
        assert [e.envelope.seq for e in store.read_partition(store.partition_of(match), count=10_000)] == [
            1, 2, 3, 4, 5, 6]
        assert store.append(match, 6, batch(match, 6, 1)).version == 7  # and the match goes on

    def test_a_written_out_command_answers_a_duplicate_with_its_events_new_seqs(self, store: EventStore) -> None:
        match = self._two_staged(store)
        a, b1, b2 = store.read_staged(match)
        block = [renumbered(b1, 2), renumbered(b2, 3), envelope(match, 4, "padding"), renumbered(a, 5)]
        store.write_out(match, 4, block, [5, 2, 3], [envelope(match, 6, command_id="chat")], "chat")
        later = batch(match, 6, 1)
        assert store.append(match, 6, later, "answer-a") == AppendResult(5, 5, 5, duplicate=True)
        assert store.stage(match, 6, later, "answer-b") == AppendResult(3, 2, 3, duplicate=True)
        assert store.append(match, 6, later, "chat") == AppendResult(6, 6, 6, duplicate=True)
        again = store.write_out(match, 6, [], [], later, "chat")
        assert again == AppendResult(6, 6, 6, duplicate=True)
        assert store.version(match) == 6

    def test_a_lone_staged_answer_written_out_answers_a_duplicate_at_its_slot(self, store: EventStore) -> None:
        """The common window: one held answer, written out at its seat's slot, not where it was
        staged; its record moves with it (write_out.lua once read the staged list only for two
        or more, found by mutation)."""
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 1))
        store.stage(match, 1, batch(match, 1, 1, "answer"), command_id="answer")
        (answer,) = store.read_staged(match)
        block = [envelope(match, 2, "padding"), renumbered(answer, 3)]
        store.write_out(match, 2, block, [3], [envelope(match, 4, command_id="chat")], "chat")
        assert store.append(match, 4, batch(match, 4, 1), "answer") == AppendResult(3, 3, 3, duplicate=True)
        assert store.version(match) == 4

    def test_a_write_out_is_checked_against_the_position_and_writes_nothing_when_stale(
            self, store: EventStore) -> None:
        match = self._two_staged(store)
        a, b1, b2 = store.read_staged(match)
        stale_writes = (  # (expected, block, placed): as a writer that knows other staged events would
            (1, [], []),  # the version: a writer that knows nothing staged
            (2, [renumbered(a, 2)], [2]),  # a position gone by: only answer-a staged
            (5, [renumbered(b1, 2), renumbered(b2, 3), renumbered(a, 4), envelope(match, 5)], [5, 2, 3, 4]),
        )
        for expected, block, placed in stale_writes:
            chat = [envelope(match, expected - len(placed) + len(block) + 1, command_id="c")]
            with pytest.raises(ConcurrencyConflict) as refused:
                store.write_out(match, expected, block, placed, chat, "c")
            assert (refused.value.expected, refused.value.actual) == (expected, 4)
        assert store.version(match) == 1 and [e.seq for e in store.read_staged(match)] == [2, 3, 4]
        assert len(store.read_partition(store.partition_of(match), count=10_000)) == 1
        # the refused command id was not recorded
        block = [renumbered(b1, 2), renumbered(b2, 3), renumbered(a, 4)]
        assert store.write_out(match, 4, block, [4, 2, 3], [envelope(match, 5, command_id="c")], "c").version == 5

    def test_a_write_out_must_place_every_staged_event_once_and_a_command_whole(self, store: EventStore) -> None:
        match = self._two_staged(store)
        a, b1, b2 = store.read_staged(match)
        chat = [envelope(match, 5, command_id="chat")]
        apart = [renumbered(b1, 2), renumbered(a, 3), renumbered(b2, 4)]
        for block, placed in (
            (apart, [3, 2, 4]),  # answer-b's two events with answer-a between them
            ([renumbered(b1, 2), renumbered(b2, 3), renumbered(a, 4)], [4, 2, 2]),  # one seq twice
            ([renumbered(b1, 2), renumbered(b2, 3), renumbered(a, 4)], [5, 2, 3]),  # past the block
            ([renumbered(b1, 2), renumbered(b2, 3), renumbered(a, 4)], [1, 2, 3]),  # before the block
        ):
            with pytest.raises(ValueError):
                store.write_out(match, 4, block, placed, chat, "chat")
        with pytest.raises(ValueError):  # fewer placed than staged: the position matches, the count does not
            store.write_out(match, 4, [renumbered(b1, 3), renumbered(b2, 4)], [3, 4],
                            [envelope(match, 5, command_id="chat")], "chat")
        with pytest.raises(ValueError):  # no command's events
            store.write_out(match, 4, [renumbered(b1, 2), renumbered(b2, 3), renumbered(a, 4)], [4, 2, 3], [])
        assert store.version(match) == 1 and [e.seq for e in store.read_staged(match)] == [2, 3, 4]
        assert len(store.read_partition(store.partition_of(match), count=10_000)) == 1
        assert store.append(match, 4, chat, "chat").duplicate is False  # "chat" was never recorded

    def test_a_write_out_with_nothing_staged_is_an_append_behind_its_block(self, store: EventStore) -> None:
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 1))
        padding = [envelope(match, 2, "padding"), envelope(match, 3, "padding")]
        result = store.write_out(match, 1, padding, [], [envelope(match, 4, command_id="chat")], "chat")
        assert result == AppendResult(version=4, first_seq=4, last_seq=4)
        assert [e.type for e in store.read(match)] == ["tick", "padding", "padding", "tick"]

    def test_a_write_out_that_places_fewer_than_are_staged_is_refused(self, store: EventStore) -> None:
        """A writer that missed a staged event (here one with no command id, so no record
        betrays the count) is refused: the block would overwrite its seq and drop it."""
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 1))
        store.stage(match, 1, batch(match, 1, 1))
        with pytest.raises(ValueError):
            store.write_out(match, 2, [envelope(match, 3, "padding")], [], [envelope(match, 4, command_id="c")], "c")
        assert store.version(match) == 1 and [e.seq for e in store.read_staged(match)] == [2]
        assert len(store.read_partition(store.partition_of(match), count=10_000)) == 1
        assert store.append(match, 2, batch(match, 2, 1), "c").first_seq == 3  # "c" was never recorded

    # -- reads ---------------------------------------------------------------------------
    def test_reads_from_any_version_return_the_tail_in_order(self, store: EventStore) -> None:
        match = new_match_id()
        for after in range(0, 12, 3):
            store.append(match, after, batch(match, after, 3))
        for after in range(0, 14):
            assert [e.seq for e in store.read(match, after=after)] == list(range(after + 1, 13))

    def test_limit_caps_a_read(self, store: EventStore) -> None:
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 10))
        assert [e.seq for e in store.read(match, limit=3)] == [1, 2, 3]
        assert [e.seq for e in store.read(match, after=8, limit=5)] == [9, 10]
        assert store.read(match, after=2, limit=0) == []
        with pytest.raises(ValueError):
            store.read(match, limit=-1)

    # -- partitions ----------------------------------------------------------------------
    def test_the_partition_stream_gets_every_entry_with_its_match_and_seq(self, store: EventStore) -> None:
        matches = [new_match_id() for _ in range(12)]
        for round_ in range(3):
            for match in matches:
                store.append(match, round_ * 2, batch(match, round_ * 2, 2))
        seen: dict[str, list[int]] = {}
        for partition in range(store.partitions):
            entries = store.read_partition(partition, count=10_000)
            assert [e.entry_id for e in entries] == sorted(
                (e.entry_id for e in entries), key=lambda i: tuple(int(x) for x in i.split("-"))
            )
            for entry in entries:
                assert entry.partition == partition == store.partition_of(entry.envelope.match_id)
                seen.setdefault(entry.envelope.match_id, []).append(entry.envelope.seq)
        assert seen == {match: [1, 2, 3, 4, 5, 6] for match in matches}

    def test_read_partition_pages_after_an_entry_id(self, store: EventStore) -> None:
        match = new_match_id()
        partition = store.partition_of(match)
        store.append(match, 0, batch(match, 0, 7))
        pages: list[list[int]] = []
        after = "0-0"
        while page := store.read_partition(partition, after_entry_id=after, count=3):
            pages.append([entry.envelope.seq for entry in page])
            after = page[-1].entry_id
        assert pages == [[1, 2, 3], [4, 5, 6], [7]]

    def test_read_partition_page_ends_at_the_last_entry_read_and_says_whether_it_was_full(
            self, store: EventStore) -> None:
        match = new_match_id()
        partition = store.partition_of(match)
        store.append(match, 0, batch(match, 0, 6))
        pages: list[tuple[list[int], bool]] = []
        after, more = "0-0", True
        while more:
            page = store.read_partition_page(partition, after_entry_id=after, count=3)
            pages.append(([entry.envelope.seq for entry in page.entries], page.more))
            assert page.unreadable == [] and page.last_entry_id == (page.entries[-1].entry_id if page.entries else after)
            after, more = page.last_entry_id, page.more
        assert pages == [([1, 2, 3], True), ([4, 5, 6], True), ([], False)]

    def test_read_partition_refuses_a_partition_out_of_range(self, store: EventStore) -> None:
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 1))
        for partition in (-1, store.partitions):
            with pytest.raises(ValueError):
                store.read_partition(partition)

    def test_matches_are_kept_apart(self, store: EventStore) -> None:
        one, two = new_match_id(), new_match_id()
        store.append(one, 0, batch(one, 0, 3))
        store.append(two, 0, batch(two, 0, 1))
        with pytest.raises(ConcurrencyConflict):
            store.append(two, 3, batch(two, 3, 1))
        assert (store.version(one), store.version(two)) == (3, 1)
        assert {e.match_id for e in store.read(one)} == {one}
        assert {e.match_id for e in store.read(two)} == {two}

    # -- waiting -------------------------------------------------------------------------
    def test_wait_for_returns_at_once_when_events_are_there(self, store: EventStore) -> None:
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 3))
        started = time.monotonic()
        assert [e.seq for e in store.wait_for(match, after=1, timeout_ms=5_000)] == [2, 3]
        assert time.monotonic() - started < 2

    def test_wait_for_wakes_up_on_an_append_from_another_thread(self, store: EventStore) -> None:
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 1))
        writer = threading.Timer(0.15, lambda: store.append(match, 1, batch(match, 1, 2)))
        started = time.monotonic()
        writer.start()
        try:
            woke = store.wait_for(match, after=1, timeout_ms=10_000)
        finally:
            writer.join()
        assert [e.seq for e in woke][:1] == [2]
        assert time.monotonic() - started < 5

    def test_wait_for_returns_nothing_on_timeout(self, store: EventStore) -> None:
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 2))
        started = time.monotonic()
        assert store.wait_for(match, after=2, timeout_ms=150) == []
        assert store.wait_for(new_match_id(), after=0, timeout_ms=50) == []
        assert time.monotonic() - started >= 0.15

    def test_wait_for_with_no_time_to_wait_is_a_plain_read(self, store: EventStore) -> None:
        """A timeout of 0 (or less) never blocks: the tail if there is one, else []."""
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 2))
        answers: list[list[int]] = []

        def wait() -> None:
            for after, timeout_ms in ((0, 0), (2, 0), (2, -1)):
                answers.append([e.seq for e in store.wait_for(match, after=after, timeout_ms=timeout_ms)])

        waiter = threading.Thread(target=wait, daemon=True)
        waiter.start()
        waiter.join(timeout=30)  # a guard against blocking forever, not a measure of speed
        assert answers == [[1, 2], [], []]

    def test_wait_for_wakes_up_on_a_write_out_from_another_thread(self, store: EventStore) -> None:
        match = new_match_id()
        store.append(match, 0, batch(match, 0, 1))
        store.stage(match, 1, batch(match, 1, 1, "answer"), command_id="answer")
        (staged,) = store.read_staged(match)
        woke: list[EventEnvelope] = []
        waiter = threading.Thread(target=lambda: woke.extend(store.wait_for(match, after=1, timeout_ms=120_000)),
                                  daemon=True)
        waiter.start()
        time.sleep(0.15)  # the reader is waiting by now
        store.write_out(match, 2, [renumbered(staged, 2)], [2], [envelope(match, 3, command_id="chat")], "chat")
        waiter.join(timeout=30)  # the write-out wakes it: this only guards against its two minutes
        assert [e.seq for e in woke] == [2, 3]

    # -- races ---------------------------------------------------------------------------
    def test_racing_writers_get_exactly_one_winner_per_version(self, store: EventStore) -> None:
        match = new_match_id()
        winners: dict[int, list[str]] = {}
        errors: list[BaseException] = []
        lock = threading.Lock()
        start = threading.Barrier(self.race_writers)

        def write(writer: str) -> None:
            try:
                start.wait()
                for i in range(self.race_appends):
                    while True:
                        version = store.version(match)
                        events = [envelope(match, version + 1, kind=writer)]
                        try:
                            result = store.append(match, version, events, command_id=f"{writer}-{i}")
                        except ConcurrencyConflict as conflict:
                            assert conflict.actual > version
                            continue
                        with lock:
                            winners.setdefault(result.last_seq, []).append(writer)
                        break
            except BaseException as error:  # surfaced in the main thread
                errors.append(error)

        threads = [threading.Thread(target=write, args=(f"w{n}",)) for n in range(self.race_writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not errors, errors
        total = self.race_writers * self.race_appends
        assert sorted(winners) == list(range(1, total + 1))
        assert all(len(names) == 1 for names in winners.values())
        stored = store.read(match)
        assert [e.seq for e in stored] == list(range(1, total + 1))
        assert [e.type for e in stored] == [winners[e.seq][0] for e in stored]
