"""Read-model rules the projector, its writes and the queries keep (no Redis): each pins what a
mutation of the code once changed without any other test noticing."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from sqlmodel import select

from famiglia.eventstore import PartitionEntry
from famiglia.readmodels import match_summary
from famiglia.readmodels.db import make_engine, read_session
from famiglia.readmodels.queries import list_matches, player_history
from famiglia.readmodels.tables import MatchSeat, RatingScope, Tournament, TournamentStanding
from famiglia.v1.envelope_pb2 import EventEnvelope
from services.projection import schema
from services.projection.projector import Projector
from tests.integration.projection.dice_race import ENGINE, GAME_ID, registry
from tests.integration.projection.support import Clock, MatchSpec, _batches, dump
from tests.support.postgres import postgres_database, postgres_server, postgres_url  # noqa: F401
from tests.unit.projection.test_projector import _diverged_seq, _written_again, played_entries, unflagged_dump


@pytest.fixture()
def projector(tmp_path: Path) -> Iterator[Projector]:
    engine = make_engine(f"sqlite:///{tmp_path / 'review.db'}")
    schema.upgrade(engine)
    yield Projector(engine, registry())
    engine.dispose()


def tournament_entries(match_id: str, players: list[str], seed: int, start_ms: int = 1_700_000_000_000,
                       tournament_id: str = "cup") -> list[PartitionEntry]:
    spec = MatchSpec(match_id=match_id, players=players, seed=seed, game_id=GAME_ID, tournament_id=tournament_id)
    out = []
    for command_id, envelopes in _batches(ENGINE, spec, Clock(start_ms)):
        if command_id == "done":
            break
        out += [PartitionEntry(0, f"{e.timestamp.ToMilliseconds()}-{e.seq}", e) for e in envelopes]
    return out


# pins projector._went_back `or seq <= 1`
def test_a_live_match_whose_first_event_was_replaced_is_left_for_an_operator(projector: Projector) -> None:
    """seq 1 made the match row (game, seats, players): projecting it again over the row is not
    possible, so a replaced match_created is flagged for a rebuild and changes nothing else."""
    entries, _ = played_entries("m1", seed=6)
    projector.project(entries[:4])
    again = _written_again(entries[:4], suffix="ZZ")  # the store went back to 0 and was written on
    store = [e.envelope for e in again]
    projector.store_events = lambda match_id, after: [e for e in store if e.seq > after]
    before = dump(projector.engine)
    outcome = projector.project(again[:2])
    assert not outcome.applied and len(outcome.skipped) == 2
    assert _diverged_seq(projector, "m1") == 1
    assert unflagged_dump(projector) == before


# pins projector._apply_events `or row.status != "live"`
def test_events_after_the_end_never_finish_rate_or_count_a_match_again(projector: Projector) -> None:
    entries = tournament_entries("t1", ["ann", "bob"], seed=11)
    assert projector.project(entries).finished_matches == ["t1"]
    before = dump(projector.engine)
    extra = EventEnvelope.FromString(entries[-1].envelope.SerializeToString())
    extra.seq += 1
    extra.event_id = extra.event_id[:-2] + "ZZ"
    extra.timestamp.FromMilliseconds(extra.timestamp.ToMilliseconds() + 5000)
    outcome = projector.project([PartitionEntry(0, "1800000000000-0", extra)])
    assert len(outcome.applied) == 1 and not outcome.finished_matches
    with read_session(projector.engine) as session:
        assert {s.scope: s.matches for s in session.exec(select(RatingScope)).all()} == {
            "game:dice_race": 1, "tournament:cup:dice_race": 1}
        assert {s.player_id: s.played for s in session.exec(select(TournamentStanding)).all()} == {"ann": 1, "bob": 1}
        assert session.get(Tournament, "cup").matches_finished == 1
    after = dump(projector.engine)
    assert after["ratings"] == before["ratings"] and after["match_seats"] == before["match_seats"]


# pins writes._entry_newer `ms > top_ms`
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_checkpoint_never_goes_back_to_an_older_seq_of_the_same_millisecond(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = f"sqlite:///{tmp_path / 'ck.db'}" if backend == "sqlite" else str(request.getfixturevalue("postgres_url"))
    engine = make_engine(url)
    schema.upgrade(engine)
    projector = Projector(engine, registry())
    m1, _ = played_entries("m1", seed=6, partition=1)
    m2, _ = played_entries("m2", seed=7, partition=1)
    m1 = [replace(e, entry_id=f"5000-{100 + i}") for i, e in enumerate(m1)]
    m2 = [replace(e, entry_id=f"5000-{i}") for i, e in enumerate(m2)]  # committed later, appended earlier
    projector.project(m1)
    projector.project(m2)
    [(_p, last_id, event_ms, _n)] = dump(engine)["projection_checkpoints"]
    assert (last_id, event_ms) == (m1[-1].entry_id, m1[-1].envelope.timestamp.ToMilliseconds())
    engine.dispose()


def _standings(projector: Projector) -> dict[str, TournamentStanding]:
    with read_session(projector.engine) as session:
        return {s.player_id: s for s in session.exec(select(TournamentStanding)).all()}


def _seats(projector: Projector, match_id: str) -> list[MatchSeat]:
    with read_session(projector.engine) as session:
        return list(session.exec(select(MatchSeat).where(MatchSeat.match_id == match_id)).all())


# pins writes.tournament_points `(n - rank) / (n - 1)`
def test_placement_points_are_one_for_first_and_zero_for_last(projector: Projector) -> None:
    projector.project(tournament_entries("t1", ["ann", "bob", "cat"], seed=21))
    ranks = {s.player_id: s.rank for s in _seats(projector, "t1")}
    points = {p: s.points for p, s in _standings(projector).items()}
    assert points == {p: (3 - r) / 2 for p, r in ranks.items()}
    assert max(points.values()) == 1.0


# pins writes.tournament_points best seat `seat.rank < ...`
def test_a_player_in_several_seats_stands_at_their_best_seat(tmp_path: Path) -> None:
    for seed in range(30, 80):
        engine = make_engine(f"sqlite:///{tmp_path / f's{seed}.db'}")
        schema.upgrade(engine)
        projector = Projector(engine, registry())
        projector.project(tournament_entries("t1", ["ann", "ann", "bob"], seed=seed))
        ann = sorted(s.rank for s in _seats(projector, "t1") if s.player_id == "ann")
        standing = _standings(projector)["ann"]
        engine.dispose()
        if ann[0] != ann[1]:
            assert (standing.played, standing.rank_total, standing.points) == (1, ann[0], (3 - ann[0]) / 2)
            return
    raise AssertionError("no seed gave ann two different ranks")


# pins writes._see_tournaments `first < created_ms`
def test_a_tournament_starts_at_its_earliest_match_whatever_order_they_are_projected_in(
        projector: Projector) -> None:
    late = tournament_entries("t2", ["ann", "bob"], seed=12, start_ms=1_700_100_000_000)
    early = tournament_entries("t1", ["ann", "bob"], seed=11, start_ms=1_700_000_000_000)
    projector.project(late)
    projector.project(early)
    with read_session(projector.engine) as session:
        assert session.get(Tournament, "cup").created_ms == 1_700_000_000_000


# pins queries.summary seed only once finished
def test_a_live_matchs_summary_never_shows_its_seed(projector: Projector) -> None:
    entries, _ = played_entries("m1", seed=77)
    projector.project(entries[:3])
    with read_session(projector.engine) as session:
        live = match_summary(session, "m1")
        listed = list_matches(session).matches
    assert live is not None and live.status == "live" and live.seed is None
    assert [m.seed for m in listed] == [None]
    projector.project(entries[3:])
    with read_session(projector.engine) as session:
        done = match_summary(session, "m1")
    assert done is not None and done.status == "finished" and done.seed == 77


# pins queries.list_matches `more = len(rows) > size`
def test_a_last_page_that_is_exactly_full_has_no_next_token(projector: Projector) -> None:
    for i in range(4):
        entries, _ = played_entries(f"m{i}", seed=100 + i, start_ms=1_700_000_000_000 + i * 1000)
        projector.project(entries[:2])
    with read_session(projector.engine) as session:
        first = list_matches(session, page_size=2)
        second = list_matches(session, page_size=2, page_token=first.next_page_token)
        whole = list_matches(session, page_size=4)
    assert first.next_page_token and len(second.matches) == 2
    assert second.next_page_token == "" and whole.next_page_token == ""


# pins writes.BatchWriter.players / BatchWrites.see_player: a tie in creation time goes to the match id
def test_a_renamed_players_name_does_not_depend_on_projection_order_within_one_millisecond(
        tmp_path: Path) -> None:
    """Two matches created in the same millisecond, the player renamed between them: the name
    shown is the same whichever match is projected first (in one batch or in two), as a rebuild
    (event time, then match id) and the live projection must agree (docs/projection.md)."""
    def entries(match_id: str, name: str) -> list[PartitionEntry]:
        spec = MatchSpec(match_id=match_id, players=["ann", "bob"], seed=5, game_id=GAME_ID,
                         names=[name, "Bob"])
        out = []
        for command_id, envelopes in _batches(ENGINE, spec, Clock(1_700_000_000_000)):
            if command_id == "done":
                break
            out += [PartitionEntry(0, f"{e.timestamp.ToMilliseconds()}-{e.seq}", e) for e in envelopes]
        return out

    a, b = entries("m-a", "Ann Old"), entries("m-b", "Ann New")
    assert a[0].envelope.timestamp == b[0].envelope.timestamp
    players = []
    for name, batches in (("ab", [a, b]), ("ba", [b, a]), ("one", [b[:1] + a[:1]])):
        engine = make_engine(f"sqlite:///{tmp_path / (name + '.db')}")
        schema.upgrade(engine)
        projector = Projector(engine, registry())
        for batch in batches:
            projector.project(batch)
        players.append(dump(engine)["players"])
        engine.dispose()
    assert players[0] == players[1] == players[2]


def test_a_player_in_several_seats_is_in_their_history_once_at_their_best_seat(tmp_path: Path) -> None:
    """Ratings and standings take a player who held several seats of one match once, at their best
    seat (docs/projection.md); their history listed the match once per seat, so a bot entrant's
    history showed its matches twice and a page held more entries than its page size."""
    for seed in range(30, 80):
        engine = make_engine(f"sqlite:///{tmp_path / f'h{seed}.db'}")
        schema.upgrade(engine)
        projector = Projector(engine, registry())
        projector.project(tournament_entries("t1", ["ann", "bob", "ann"], seed=seed))
        ann = {s.seat: s.rank for s in _seats(projector, "t1") if s.player_id == "ann"}
        with read_session(engine) as session:
            history = player_history(session, "ann")
        engine.dispose()
        assert [e.match.match_id for e in history.entries] == ["t1"]
        if ann[0] != ann[2]:
            best = min(ann, key=lambda seat: (ann[seat], seat))
            assert history.entries[0].seat == best and history.entries[0].rating_after is not None
            return
    raise AssertionError("no seed gave ann two different ranks")


# pins projector._cancel: the cancel's own time, not the latest of the match's events
@pytest.mark.parametrize("together", [False, True])
def test_a_cancelled_match_is_over_at_the_cancels_time_whatever_the_clocks_of_earlier_events(
        projector: Projector, together: bool) -> None:
    """The cancel may be written by a command process whose clock is behind the one that wrote
    the last move: the match is over when the cancel says, and its last event time stays the latest."""
    from famiglia.eventstore.envelopes import match_cancelled_envelope
    from famiglia.v1.envelope_pb2 import MatchCancelled

    entries, _ = played_entries("m1", seed=8)
    moves = entries[:4]
    latest = max(e.envelope.timestamp.ToMilliseconds() for e in moves)
    cancel = match_cancelled_envelope("m1", moves[-1].envelope.seq, GAME_ID,
                                      MatchCancelled(reason="stuck", operator="cli"), command_id="cancel:x",
                                      now_ms=latest - 40)
    if not together:
        projector.project(moves)
    projector.project((moves if together else []) + [PartitionEntry(0, f"{latest + 1}-0", cancel)])
    with read_session(projector.engine) as session:
        summary = match_summary(session, "m1")
    assert summary is not None and summary.status == "cancelled"
    assert (summary.finished_ms, summary.last_event_ms) == (latest - 40, latest)


# pins projector._apply_events: the latest time of every event of a run, not of its last one
def test_a_matchs_times_do_not_depend_on_how_its_events_were_batched_when_they_are_out_of_time_order(
        tmp_path: Path) -> None:
    """A stream's times need not grow with its seqs: Nothing Personal's held answers are written
    out in seat order with the times they were given (NP-H9), and two command processes' clocks
    differ. The match's last event and finish times are then the latest of its events', whether
    they came in one batch (a rebuild) or one at a time (live), and so is the order it is rated in."""
    entries, _ = played_entries("m1", seed=9)
    late = entries[-2].envelope
    stamp = EventEnvelope()
    stamp.CopyFrom(late)
    stamp.timestamp.FromMilliseconds(entries[-1].envelope.timestamp.ToMilliseconds() + 5_000)
    entries[-2] = replace(entries[-2], envelope=stamp)
    dumps = []
    for name, batches in (("whole", [entries]), ("one_by_one", [[e] for e in entries])):
        engine = make_engine(f"sqlite:///{tmp_path / f'{name}.db'}")
        schema.upgrade(engine)
        projector = Projector(engine, registry())
        for batch in batches:
            projector.project(batch)
        with read_session(engine) as session:
            summary = match_summary(session, "m1")
        assert summary is not None and summary.status == "finished"
        assert summary.finished_ms == summary.last_event_ms == stamp.timestamp.ToMilliseconds()
        tables = dump(engine)
        tables.pop("projection_checkpoints")
        dumps.append(tables)
        engine.dispose()
    assert dumps[0] == dumps[1]



# pins projector._apply_events: a cancel ends a live match only, over at its result or not
def test_a_cancel_after_a_matchs_result_ends_nothing_however_its_events_were_batched(tmp_path: Path) -> None:
    """Only an imported file holds a cancel after the result (the command service refuses to
    cancel a match that is over, `match_over`; admission and verification let it through). The
    match was over at its result: it stays finished, rated once, whether the cancel came in the
    result's batch (a rebuild, an import read at once) or a later one (live)."""
    from famiglia.eventstore.envelopes import match_cancelled_envelope
    from famiglia.v1.envelope_pb2 import MatchCancelled

    entries, total = played_entries("m1", seed=8)
    last_ms = max(e.envelope.timestamp.ToMilliseconds() for e in entries)
    cancel = PartitionEntry(0, f"{last_ms + 10}-0", match_cancelled_envelope(
        "m1", total, GAME_ID, MatchCancelled(reason="late", operator="cli"), command_id="cancel:x", now_ms=last_ms + 10))
    tables = []
    for name, batches in (("one", [entries + [cancel]]), ("two", [entries, [cancel]])):
        engine = make_engine(f"sqlite:///{tmp_path / name}.db")
        schema.upgrade(engine)
        projector = Projector(engine, registry())
        for batch in batches:
            projector.project(batch)
        with read_session(engine) as session:
            summary = match_summary(session, "m1")
        assert summary is not None and (summary.status, summary.version) == ("finished", total + 1), name
        assert (summary.finished_ms, summary.last_event_ms) == (last_ms, last_ms + 10), name
        tables.append(dump(engine))
        projector.release()
        engine.dispose()
    assert tables[0] == tables[1]
