"""The fold every reader shares (famiglia.matchstate), mutated: gaps, staged events leaving
the fold, a command's first and last seq, older runs of padding, and a store that went back."""

from __future__ import annotations

import pytest

from famiglia.config import Settings
from famiglia.engine.registry import default_registry
from famiglia.eventstore.envelopes import game_envelopes
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.matchstate import MatchState, NotAMatch, StoreWentBack, command_key
from famiglia.v1 import envelope_pb2
from services.command.bootstrap import bootstrap

SETTINGS = Settings(secret="review-secret")
REGISTRY = default_registry()


def _bots_match() -> tuple[InMemoryEventStore, str, list[envelope_pb2.EventEnvelope]]:
    """A Nothing Personal match of bots only (nothing held), as the store has it."""
    store = InMemoryEventStore()
    app = bootstrap(store=store, settings=SETTINGS)
    bots = [envelope_pb2.SeatInfo(seat=s, bot=True) for s in range(3)]
    created = app.create_match("nothing_personal", 3, seed=3, seat_info=bots)
    return store, created.match_id, store.read(created.match_id)


def _padding(match_id: str, version: int, count: int, **kwargs) -> list[envelope_pb2.EventEnvelope]:
    engine = REGISTRY.get("nothing_personal")
    return game_envelopes(engine, match_id, version, [engine.info.padding_event()] * count, **kwargs)


def test_a_gap_in_the_envelopes_is_refused_not_folded_over() -> None:
    _store, match_id, envelopes = _bots_match()
    version = envelopes[-1].seq
    later = _padding(match_id, version + 1, 1)  # seq version + 2: version + 1 is missing
    with pytest.raises(ValueError, match="gap"):
        MatchState.from_envelopes(REGISTRY, [*envelopes, *later])


def test_a_fold_that_does_not_start_at_seq_1_is_not_a_match() -> None:
    """A fold starts at the match's first event: a match_created envelope at another seq (a
    read that began past the start) would be folded as version 1 and every later seq would be
    off (found by mutating MatchState.start)."""
    _store, match_id, envelopes = _bots_match()
    moved = envelope_pb2.EventEnvelope()
    moved.CopyFrom(envelopes[0])
    moved.seq = 2
    with pytest.raises(NotAMatch):
        MatchState.from_envelopes(REGISTRY, [moved])

def test_a_command_records_its_first_and_last_seq() -> None:
    _store, match_id, envelopes = _bots_match()
    version = envelopes[-1].seq
    events = _padding(match_id, version, 3, command_id="c1", seat=1)
    match = MatchState.from_envelopes(REGISTRY, [*envelopes, *events])
    assert match.commands[command_key(1, "c1")] == (version + 1, version + 3)


def test_a_stream_event_folded_after_staged_ones_ends_their_staging() -> None:
    """The store's next append writes the staged events first: once any other event is folded
    they are in the stream, nothing is staged any more and the public version is the version."""
    _store, match_id, envelopes = _bots_match()
    version = envelopes[-1].seq
    match = MatchState.from_envelopes(REGISTRY, envelopes)
    match.apply(_padding(match_id, version, 2), staged=True)
    assert (match.version, match.public_version, len(match.staged)) == (version + 2, version, 2)
    match.apply(_padding(match_id, version + 2, 1))
    assert (match.version, match.public_version, match.staged, match.unstaged) == (
        version + 3, version + 3, [], None)


def test_past_padding_still_knows_an_older_run() -> None:
    """`padded` keeps the newest runs (64 of them), not the newest alone: a command made at the
    version before an older run went in behind it."""
    _store, match_id, envelopes = _bots_match()
    version = envelopes[-1].seq
    run = _padding(match_id, version, 2)
    between = _padding(match_id, version + 2, 1, command_id="c", seat=0)
    later = _padding(match_id, version + 3, 2)
    match = MatchState.from_envelopes(REGISTRY, [*envelopes, *run, *between, *later])
    assert match.past_padding(version) == version + 2
    assert match.past_padding(version + 3) == version + 5


def _went_back(store: InMemoryEventStore, match_id: str, keep: int) -> InMemoryEventStore:
    """A copy of `store`'s match holding its first `keep` events, then written on anew from there."""
    again = InMemoryEventStore()
    events = store.read(match_id)[:keep]
    again.append(match_id, 0, events)
    again.append(match_id, keep, _padding(match_id, keep, store.version(match_id) - keep + 1))
    return again


def test_a_fold_notices_the_store_lost_the_event_it_last_took_even_at_its_seq() -> None:
    """The store restored from an older file and written on since holds another event at the
    fold's last seq (same seq, another event id): catch_up says so instead of folding on."""
    store, match_id, envelopes = _bots_match()
    version = envelopes[-1].seq
    store.append(match_id, version, _padding(match_id, version, 2))
    match = MatchState.from_envelopes(REGISTRY, envelopes)
    match.catch_up(store)
    assert match.version == version + 2
    with pytest.raises(StoreWentBack):
        match.catch_up(_went_back(store, match_id, keep=version))
    match.catch_up(store)  # the store it folded from: nothing new, nothing wrong
    assert match.version == version + 2


def test_unstaging_two_staged_applies_goes_back_to_the_state_before_the_first() -> None:
    """Staged events folded in two applies (two seats' held answers) and then taken out
    (`unstage`) must leave the fold as it was before the first of them: the snapshot is taken
    when staging starts, not replaced by each later staged event."""
    _store, match_id, envelopes = _bots_match()
    version = envelopes[-1].seq
    match = MatchState.from_envelopes(REGISTRY, envelopes)
    before = (match.state, match.last_timestamp_ms, match.version)
    match.apply(_padding(match_id, version, 1, now_ms=before[1] + 10), staged=True)
    match.apply(_padding(match_id, version + 1, 1, now_ms=before[1] + 20), staged=True)
    assert match.state is not before[0] or match.last_timestamp_ms != before[1]
    match.unstage()
    assert (match.state, match.last_timestamp_ms, match.version) == before
    assert match.staged == [] and match.unstaged is None


def test_finished_is_asked_of_the_engine_once_a_state_and_follows_the_fold() -> None:
    """The command service asks `finished` before each command and its hot matches again (to
    drop finished matches first): the engine's `result` is asked once for each state."""
    from famiglia.bots.toy import toy_registry
    from services.command.app import Viewer

    toy = toy_registry()
    store = InMemoryEventStore()
    app = bootstrap(store=store, registry=toy, settings=SETTINGS)
    match_id = app.create_match("highcard", 2, seed=1, options={"hand": "1"}).match_id
    for i in range(2):
        m = app.matches.get(match_id).match
        seat = m.engine.pending(m.state)[0].seat
        app.submit(match_id, Viewer(seat), f"c{i}", m.engine.legal_commands(m.state, seat)[0])
    envelopes = store.read(match_id)
    match = MatchState.from_envelopes(toy, envelopes[:-1])
    asked: list[object] = []
    engine = match.engine

    class Counting:
        def __getattr__(self, name: str) -> object:
            return getattr(engine, name)

        def result(self, state: object) -> object:
            asked.append(state)
            return engine.result(state)

    match.engine = Counting()  # type: ignore[assignment]
    assert not match.finished and not match.finished
    assert len(asked) == 1
    match.apply(envelopes[-1:])  # the last card: the match has its result
    assert match.finished and match.finished
    assert len(asked) == 2
