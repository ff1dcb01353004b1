"""The state at every event id equals folding the events up to it, and costs at most K folds."""

from __future__ import annotations

import pytest

from famiglia.engine import fold
from famiglia.eventstore.envelopes import open_event
from famiglia.replay.timeline import MatchTimeline, TimelineCache

from .games import copy, engine, game_ids, recorded, registry


@pytest.mark.parametrize("game_id", game_ids())
@pytest.mark.parametrize("seed", [3, 11])
def test_state_at_every_event_equals_the_fold_up_to_it(game_id: str, seed: int) -> None:
    envelopes = recorded(game_id, seed)
    eng = engine(game_id)
    timeline = MatchTimeline(registry(), envelopes, every=7)
    events = [open_event(eng, e) for e in envelopes[1:]]
    state = None
    assert timeline.state_at(1) is None
    for seq in range(2, len(envelopes) + 1):
        state = eng.evolve(state, events[seq - 2])
        assert timeline.state_at(seq) == state, f"{game_id} seq {seq}"
        assert timeline.folded_last < 7
    assert timeline.head == fold(eng, events)
    assert timeline.finished


def test_state_at_folds_at_most_k_events_in_any_order() -> None:
    envelopes = recorded(game_ids()[-1])
    timeline = MatchTimeline(registry(), envelopes, every=16)
    for seq in reversed(range(1, len(envelopes) + 1)):
        timeline.state_at(seq)
        assert timeline.folded_last < 16
    assert timeline.snapshot_count() == len(envelopes) // 16


def test_states_walks_forward_folding_each_event_once() -> None:
    envelopes = recorded(game_ids()[-1])
    timeline = MatchTimeline(registry(), envelopes, every=5)
    walked = list(timeline.states(10, 20))
    assert [e.seq for e, _ in walked] == list(range(10, 21))
    assert all(state == timeline.state_at(env.seq) for env, state in walked)


def test_a_gap_in_the_envelopes_is_refused() -> None:
    envelopes = copy(recorded(game_ids()[-1]))
    with pytest.raises(ValueError, match="gap"):
        MatchTimeline(registry(), envelopes[:5] + envelopes[6:])


def test_the_cache_catches_a_running_match_up_and_forgets_the_least_recent() -> None:
    envelopes = copy(recorded(game_ids()[-1]))
    stored = {"a": envelopes[:10]}
    cache = TimelineCache(registry(), lambda m, after: [e for e in stored.get(m, []) if e.seq > after],
                          every=4, capacity=1)
    timeline = cache.get("a")
    assert timeline is not None and timeline.last_seq == 10
    stored["a"] = envelopes
    assert cache.get("a") is timeline and timeline.last_seq == len(envelopes)
    assert cache.get("missing") is None
    other = copy(recorded(game_ids()[-1], 11))
    stored[other[0].match_id] = other
    cache.get(other[0].match_id)
    assert cache.get("a") is not timeline  # evicted, loaded again


def test_a_running_match_the_store_took_back_is_loaded_anew_not_read_on() -> None:
    """The store lost acknowledged writes and was written on since, at the same seqs under
    other event ids: a cached running match is built anew from the store, not extended on top
    of the lost events (a replay would have mixed the two)."""
    played = copy(recorded(game_ids()[-1]))
    rewritten = copy(played)
    for env in rewritten:
        env.event_id = "x" + env.event_id[1:]  # made again, under other ids
    stored = {"a": played[:12]}
    cache = TimelineCache(registry(), lambda m, after: [e for e in stored.get(m, []) if e.seq > after], every=4)
    timeline = cache.get("a")
    assert timeline is not None and timeline.last_seq == 12
    stored["a"] = played[:8] + [e for e in rewritten if e.seq > 8][:10]  # back to 8, written on to 18
    again = cache.get("a")
    assert again is not timeline and again.last_seq == 18
    assert [e.event_id for e in again.envelopes] == [e.event_id for e in stored["a"]]
    assert cache.get("a") is again  # nothing lost since: caught up in place


def test_an_envelope_that_fails_to_fold_leaves_the_timeline_at_the_one_before() -> None:
    envelopes = copy(recorded(game_ids()[-1]))
    eng = engine(game_ids()[-1])
    broken = 12
    envelopes[broken - 1].payload = b"\xff\xff\xff"   # not an event of any game
    timeline = MatchTimeline(registry(), envelopes[:broken - 1], every=4)
    with pytest.raises(Exception):  # noqa: B017 - whatever the decoder raises
        timeline.extend(envelopes[broken - 1:])
    assert timeline.last_seq == broken - 1
    assert timeline.head == fold(eng, [open_event(eng, e) for e in envelopes[1:broken - 1]])
    assert timeline.extend(envelopes[:broken - 1]) == 0   # older envelopes are skipped, not refolded


def test_two_questions_catching_a_running_match_up_at_once_do_not_load_it_anew() -> None:
    """Question B reads on from the event it saw last while question A caught the timeline up
    past it: what B read is still the store's (the event it checks is there, at its seq), so
    the timeline is extended, not refolded from the first event as if the store lost writes."""
    envelopes = copy(recorded(game_ids()[-1]))
    stored = {"a": envelopes[:10]}
    loads: list[int] = []
    cache: TimelineCache

    def load(match_id: str, after: int) -> list:
        loads.append(after)
        found = [e for e in stored.get(match_id, []) if e.seq > after]
        if len(loads) == 2:  # B's read is in flight: A asks now and catches the match up first
            stored["a"] = envelopes[:20]
            found = [e for e in stored["a"] if e.seq > after]
            cache.get("a")
        return found

    cache = TimelineCache(registry(), load, every=4)
    timeline = cache.get("a")
    assert timeline is not None and timeline.last_seq == 10
    stored["a"] = envelopes[:20]
    assert cache.get("a") is timeline and timeline.last_seq == 20
    assert loads == [0, 9, 9], "a whole reload (after=0) for a store that lost nothing"


def test_the_cache_keeps_timelines_within_its_memory_bound_not_only_its_match_count() -> None:
    """A timeline holds every event of its match (about 1.5 KiB each), so the 256 matches the
    cache kept could be gigabytes of long ones: it now also drops the least recent beyond
    `max_bytes` (FAMIGLIA_REPLAY_CACHED_MB), and keeps the match asked about even alone past it."""
    from famiglia.replay.timeline import held_bytes

    played = copy(recorded(game_ids()[-1]))
    stored = {}
    for name in "abcd":
        stored[name] = copy(played)
        for env in stored[name]:
            env.match_id = name
    one = held_bytes(MatchTimeline(registry(), stored["a"]))
    cache = TimelineCache(registry(), lambda m, after: [e for e in stored.get(m, []) if e.seq > after],
                          capacity=256, max_bytes=2 * one + one // 2)
    for name in "abcd":
        assert cache.get(name) is not None
        assert cache.held <= cache.max_bytes
    assert list(cache._entries) == ["c", "d"] and cache.held == 2 * one
    tiny = TimelineCache(registry(), lambda m, after: [e for e in stored.get(m, []) if e.seq > after],
                         max_bytes=1)
    first = tiny.get("a")
    assert first is not None and tiny.get("a") is first  # alone past the bound: kept, not loaded again
    tiny.get("b")
    assert list(tiny._entries) == ["b"]


def test_the_service_bounds_its_timelines_by_famiglia_replay_cached_mb(monkeypatch: pytest.MonkeyPatch) -> None:
    from famiglia.config import Settings
    from famiglia.eventstore.memory_store import InMemoryEventStore
    from famiglia.replay.sources import MemorySource
    from services.replay.bootstrap import ReplaySettings, bootstrap

    monkeypatch.setenv("FAMIGLIA_REPLAY_CACHED_MB", "3")
    app = bootstrap(store=InMemoryEventStore(), cold=MemorySource(), registry=registry(),
                    settings=Settings(secret="x"), replay_settings=ReplaySettings.from_env())
    assert app.timelines.max_bytes == 3 << 20
    assert ReplaySettings().cached_mb == 512


def test_a_catch_up_shows_its_events_all_at_once_to_readers_without_the_lock() -> None:
    """StreamReplay's last event, ListMatchEvents' page end and the look-ahead deciding whether a
    command has an event hidden from the asker read `last_seq` and the envelopes without the
    timeline's lock. A catch-up in another thread appended its events one by one, so they could
    see the first event of a command without the rest (a public event without the hidden one
    that makes it unattributed: its acting seat and command id shown). They see whole catch-ups now."""
    envelopes = copy(recorded(game_ids()[-1]))
    timeline = MatchTimeline(registry(), envelopes[:10], every=4)
    seen: list[tuple[int, int, bool, bool]] = []

    def arriving():
        for env in envelopes[10:20]:
            seen.append((timeline.last_seq, len(timeline.envelopes), timeline.cancelled,
                         timeline.seq_of(env.event_id) is not None))
            yield env

    assert timeline.extend(arriving()) == 10
    assert set(seen) == {(10, 10, False, False)}
    assert timeline.last_seq == 20 and timeline.seq_of(envelopes[19].event_id) == 20


def test_a_finished_match_the_store_took_back_is_loaded_anew_not_shown_whole() -> None:
    """A match over in the cache is never caught up again, so a store that lost its last,
    acknowledged writes (a failover) and plays the match on from there left the cache showing
    the lost ending: the match 'over', its full view (deck order, hands) granted to anyone, while
    the table plays the same deck on. The store's version (one look-up, kept by a trim) now says
    when a finished match's timeline is not the store's any more."""
    played = copy(recorded(game_ids()[-1]))
    n = len(played)
    stored = {"a": played}
    cache = TimelineCache(registry(), lambda m, after: [e for e in stored.get(m, []) if e.seq > after],
                          version=lambda m: len(stored.get(m, [])))
    timeline = cache.get("a")
    assert timeline is not None and timeline.finished
    assert cache.get("a") is timeline  # the store still holds it: not loaded again
    stored["a"] = played[: n - 3]  # the ending lost: the match runs again from there
    again = cache.get("a")
    assert again is not timeline and again.last_seq == n - 3 and not again.finished
    loads: list[int] = []  # a store that knows nothing of it (version 0): the archive's, as it was
    archived = TimelineCache(registry(), lambda m, after: loads.append(after) or [e for e in played if e.seq > after],
                             version=lambda m: 0)
    kept = archived.get("a")
    assert kept is not None and archived.get("a") is kept and loads == [0]
