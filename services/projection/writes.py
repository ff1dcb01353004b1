"""What one batch writes, gathered while folding and sent as a few executemany statements.

A batch used to cost far more than its events: an ORM `session.get` and flush per
match, one bulk insert per match, a `get` per checkpoint. Here the projector only
records plain values (`BatchWrites`), and `write` sends them in dependency order
through SQLAlchemy Core on the batch's connection: one statement per kind of row,
whatever the number of matches — archive rows, new matches and seats, players
(one upsert), seats left to the bots, match progress, seat results, tournaments, standings (additive
upserts), checkpoints. Row locks are taken in key order, like the match rows.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import JSON, BigInteger, Table, and_, bindparam, case, cast, func, or_, select, update
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection

from famiglia.eventstore.port import entry_key  # noqa: F401 - imported from here by the projection
from famiglia.readmodels.db import dialect_insert
from famiglia.readmodels.tables import (
    ArchivedEvent,
    Checkpoint,
    Match,
    MatchSeat,
    Player,
    Tournament,
    TournamentStanding,
)
from famiglia.v1.envelope_pb2 import EventEnvelope

MATCHES: Table = Match.__table__  # type: ignore[attr-defined]
SEATS: Table = MatchSeat.__table__  # type: ignore[attr-defined]
PLAYERS: Table = Player.__table__  # type: ignore[attr-defined]
ARCHIVE: Table = ArchivedEvent.__table__  # type: ignore[attr-defined]
TOURNAMENTS: Table = Tournament.__table__  # type: ignore[attr-defined]
STANDINGS: Table = TournamentStanding.__table__  # type: ignore[attr-defined]
CHECKPOINTS: Table = Checkpoint.__table__  # type: ignore[attr-defined]


@dataclass(slots=True)
class MatchRow:
    """The columns of a `matches` row a batch reads or writes, as plain values (no ORM object)."""

    match_id: str
    game_id: str
    seats: int
    tournament_id: str
    version: int
    last_event_ms: int
    status: str = "live"
    fold_error: str = ""
    diverged_seq: int | None = None
    """Set: the store and the archive differ from this seq on; nothing more is projected onto the match."""
    finished_ms: int | None = None
    outcome: dict[str, str] = field(default_factory=dict)
    created: dict[str, Any] | None = None
    """The other columns when this batch creates the row (inserted whole, at its final version)."""
    archived_id: str | None = None
    """The archive's event id at `version` as the batch found it (read with the row, not written):
    what a folded match kept in memory must have folded last to be of the archive's history."""
    last_entry_id: str | None = None
    """The newest partition stream entry the match was moved on from (read with the row, written
    with its progress): an entry of the match read before it is checked against the store."""


@dataclass(slots=True)
class SeatResult:
    seat: int
    player_id: str
    score: float
    rank: int
    details: dict[str, str]
    away: bool = False
    """Its player had left it to the bots at the end (`seat_left`): rated last (`_rated`)."""


@dataclass
class BatchWrites:
    """Every row a batch writes; filled by the projector in match-id order, written by `write`."""

    archive: list[dict[str, Any]] = field(default_factory=list)
    matches: list[MatchRow] = field(default_factory=list)
    seats: list[dict[str, Any]] = field(default_factory=list)
    players: dict[str, dict[str, Any]] = field(default_factory=dict)
    tournaments: dict[str, tuple[int, set[str]]] = field(default_factory=dict)
    results: list[tuple[MatchRow, list[SeatResult]]] = field(default_factory=list)
    ended: list[MatchRow] = field(default_factory=list)
    """Matches cancelled in this batch: their status, end and outcome, with no seat results."""
    seats_away: list[dict[str, Any]] = field(default_factory=list)
    """Seats whose player left them to the bots or took them back in this batch (`seat_left`,
    `seat_returned`): match, seat, why it is away ("" for none) and since which seq."""

    def see_player(self, player_id: str, name: str, bot: bool, policy: str, ms: int, match_id: str = "") -> None:
        """Name, bot flag and policy follow the newest match: by creation time, then match id (two
        matches created in one millisecond reach the projection in any order; a rebuild takes
        them by match id), so the row does not depend on the order matches are projected in."""
        seen = self.players.get(player_id)
        if seen is None:
            self.players[player_id] = dict(player_id=player_id, display_name=name, bot=bot, policy=policy,
                                           first_seen_ms=ms, last_seen_ms=ms, last_match_id=match_id)
            return
        seen["first_seen_ms"] = min(seen["first_seen_ms"], ms)
        if (ms, match_id) >= (seen["last_seen_ms"], seen["last_match_id"]):
            seen.update(display_name=name, bot=bot, policy=policy, last_seen_ms=ms, last_match_id=match_id)

    def see_tournament(self, tournament_id: str, game_id: str, ms: int) -> None:
        first, games = self.tournaments.get(tournament_id, (ms, set()))
        games.add(game_id)
        self.tournaments[tournament_id] = (min(first, ms), games)


@dataclass(frozen=True)
class DriverStatement:
    """A statement compiled once to SQLite's SQL, run with plain tuples through the driver.

    A batch of bot moves is small, and SQLAlchemy's execution path (cache lookup, a
    parameter dict and bind processors per row, events) cost more than SQLite's own
    work on the hot statements; here each row is one tuple in the compiled order."""

    sql: str
    names: tuple[str, ...]
    constants: dict[str, Any]
    """Literal parameters of the statement itself (SQLAlchemy binds them too)."""
    json_names: frozenset[str] = frozenset()
    """Parameters of JSON columns, serialized as SQLAlchemy's JSON type would."""

    @classmethod
    def compile(cls, statement: Any, column_keys: Sequence[str] | None = None, json_names: Sequence[str] = ()
                ) -> DriverStatement:
        compiled = statement.compile(dialect=sqlite.dialect(), column_keys=column_keys)
        names = tuple(compiled.positiontup or ())
        constants = {n: compiled.binds[n].effective_value for n in names if not compiled.binds[n].required}
        return cls(compiled.string, names, constants, frozenset(json_names))

    def execute(self, conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
        pick = operator.itemgetter(*self.names)
        values = pick if len(self.names) > 1 else (lambda row: (pick(row),))
        if self.constants:
            tuples = [values({**self.constants, **row}) for row in rows]
        else:
            tuples = [values(row) for row in rows]
        json_at = [i for i, name in enumerate(self.names) if name in self.json_names]
        if json_at:
            dumps = conn.dialect._json_serializer or json.dumps  # type: ignore[attr-defined]
            for k, row in enumerate(tuples):
                cells = list(row)
                for i in json_at:
                    cells[i] = dumps(cells[i])
                tuples[k] = tuple(cells)
        conn.exec_driver_sql(self.sql, tuples)


class BatchWriter:
    """The statements, built once per dialect (SQLAlchemy caches their compiled form; on SQLite the
    three written by every batch — archive, match progress, checkpoints — go through the driver)."""

    def __init__(self, dialect: str) -> None:
        insert = dialect_insert(dialect)
        # With each row the archive's event id at its version (a primary-key lookup, in the same
        # statement): a folded match in memory is checked against it (`Projector._state_for`).
        self.lock_matches = (
            select(MATCHES.c.match_id, MATCHES.c.game_id, MATCHES.c.seats, MATCHES.c.tournament_id,
                   MATCHES.c.version, MATCHES.c.last_event_ms, MATCHES.c.status, MATCHES.c.fold_error,
                   MATCHES.c.diverged_seq, ARCHIVE.c.event_id, MATCHES.c.last_entry_id)
            .select_from(MATCHES.outerjoin(ARCHIVE, and_(ARCHIVE.c.match_id == MATCHES.c.match_id,
                                                         ARCHIVE.c.seq == MATCHES.c.version)))
            .where(MATCHES.c.match_id.in_(bindparam("ids", expanding=True)))
            .order_by(MATCHES.c.match_id).with_for_update(of=MATCHES))
        self.progress = (
            update(MATCHES).where(MATCHES.c.match_id == bindparam("b_match"))
            .values(version=bindparam("b_version"), last_event_ms=bindparam("b_last"),
                    fold_error=bindparam("b_error"), diverged_seq=bindparam("b_diverged"),
                    last_entry_id=bindparam("b_entry")))
        self.finish = (
            update(MATCHES).where(MATCHES.c.match_id == bindparam("b_match"))
            .values(status=bindparam("b_status"), finished_ms=bindparam("b_finished"),
                    outcome=bindparam("b_outcome", type_=JSON)))
        self.seat_result = (
            update(SEATS).where(SEATS.c.match_id == bindparam("b_match"), SEATS.c.seat == bindparam("b_seat"))
            .values(score=bindparam("b_score"), rank=bindparam("b_rank"), winner=bindparam("b_winner"),
                    details=bindparam("b_details", type_=JSON)))
        self.seat_away = (
            update(SEATS).where(SEATS.c.match_id == bindparam("b_match"), SEATS.c.seat == bindparam("b_seat"))
            .values(away=bindparam("b_away"), away_since=bindparam("b_since")))
        players = insert(PLAYERS)
        newer = or_(players.excluded.last_seen_ms > PLAYERS.c.last_seen_ms,
                    and_(players.excluded.last_seen_ms == PLAYERS.c.last_seen_ms,
                         players.excluded.last_match_id >= PLAYERS.c.last_match_id))
        self.players = players.on_conflict_do_update(index_elements=[PLAYERS.c.player_id], set_={
            "first_seen_ms": case((players.excluded.first_seen_ms < PLAYERS.c.first_seen_ms,
                                   players.excluded.first_seen_ms), else_=PLAYERS.c.first_seen_ms),
            **{name: case((newer, players.excluded[name]), else_=PLAYERS.c[name])
               for name in ("display_name", "bot", "policy", "last_seen_ms", "last_match_id")},
        })
        self.new_tournament = insert(TOURNAMENTS).on_conflict_do_nothing(index_elements=[TOURNAMENTS.c.tournament_id])
        self.lock_tournaments = (
            select(TOURNAMENTS.c.tournament_id, TOURNAMENTS.c.created_ms, TOURNAMENTS.c.games)
            .where(TOURNAMENTS.c.tournament_id.in_(bindparam("ids", expanding=True)))
            .order_by(TOURNAMENTS.c.tournament_id).with_for_update())
        self.tournament_seen = (
            update(TOURNAMENTS).where(TOURNAMENTS.c.tournament_id == bindparam("b_tournament"))
            .values(created_ms=bindparam("b_created"), games=bindparam("b_games", type_=JSON)))
        self.tournament_finished = (
            update(TOURNAMENTS).where(TOURNAMENTS.c.tournament_id == bindparam("b_tournament"))
            .values(matches_finished=TOURNAMENTS.c.matches_finished + bindparam("b_finished")))
        standings = insert(STANDINGS)
        self.standings = standings.on_conflict_do_update(
            index_elements=[STANDINGS.c.tournament_id, STANDINGS.c.game_id, STANDINGS.c.player_id],
            set_={name: STANDINGS.c[name] + standings.excluded[name]
                  for name in ("played", "wins", "points", "score_total", "rank_total")})
        checkpoints = insert(CHECKPOINTS)
        newer = _entry_newer(dialect, checkpoints.excluded.last_entry_id, CHECKPOINTS.c.last_entry_id)
        self.checkpoints = checkpoints.on_conflict_do_update(index_elements=[CHECKPOINTS.c.partition], set_={
            "last_entry_id": case((newer, checkpoints.excluded.last_entry_id), else_=CHECKPOINTS.c.last_entry_id),
            "last_event_ms": case((newer, checkpoints.excluded.last_event_ms), else_=CHECKPOINTS.c.last_event_ms),
            "events": CHECKPOINTS.c.events + checkpoints.excluded.events,
        })
        self.driver: dict[str, DriverStatement] = {}
        self._lock_sql: dict[int, str] = {}
        if dialect == "sqlite":
            self.driver = {
                "archive": DriverStatement.compile(ARCHIVE.insert(), [c.name for c in ARCHIVE.columns],
                                                   json_names=["visible_seats"]),
                "progress": DriverStatement.compile(self.progress),
                "checkpoints": DriverStatement.compile(self.checkpoints, [c.name for c in CHECKPOINTS.columns]),
            }

    # -- reads under lock ------------------------------------------------------------------
    def lock_match_rows(self, conn: Connection, ids: Sequence[str]) -> dict[str, MatchRow]:
        """The batch's match rows, locked in match-id order (FOR UPDATE; SQLite holds BEGIN IMMEDIATE)."""
        if not self.driver:
            rows = conn.execute(self.lock_matches, {"ids": list(ids)})
        else:
            sql = self._lock_sql.get(len(ids))
            if sql is None:  # SQLite: the same SELECT with the IN list spelled out, once per list length
                compiled = self.lock_matches.params(ids=list(ids)).compile(
                    dialect=sqlite.dialect(), compile_kwargs={"render_postcompile": True})
                sql = self._lock_sql[len(ids)] = compiled.string
            rows = conn.exec_driver_sql(sql, tuple(ids))
        return {r[0]: MatchRow(*r[:9], archived_id=r[9], last_entry_id=r[10]) for r in rows}

    # -- the writes ------------------------------------------------------------------------
    def write(self, conn: Connection, batch: BatchWrites) -> None:
        """Parents before children: players and tournaments, matches, seats, archive, results, standings."""
        if batch.players:
            conn.execute(self.players, [batch.players[p] for p in sorted(batch.players)])
        if batch.tournaments:
            self._see_tournaments(conn, batch.tournaments)
        new = [m for m in batch.matches if m.created is not None]
        if new:
            conn.execute(MATCHES.insert(), [_match_values(m) for m in new])
        if batch.seats:
            conn.execute(SEATS.insert(), batch.seats)
        if batch.seats_away:  # (before the results: a rating looked again at the match reads them)
            conn.execute(self.seat_away, batch.seats_away)
        if batch.archive:
            self._execute("archive", ARCHIVE.insert(), conn, batch.archive)
        moved = [m for m in batch.matches if m.created is None]
        if moved:
            self._execute("progress", self.progress, conn, [
                dict(b_match=m.match_id, b_version=m.version, b_last=m.last_event_ms, b_error=m.fold_error,
                     b_diverged=m.diverged_seq, b_entry=m.last_entry_id) for m in moved])
        finished = [m for m, _seats in batch.results if m.created is None]
        finished += [m for m in batch.ended if m.created is None]
        if finished:
            conn.execute(self.finish, [dict(b_match=m.match_id, b_status=m.status, b_finished=m.finished_ms,
                                            b_outcome=m.outcome) for m in finished])
        if batch.results:
            self._results(conn, batch.results)

    def _see_tournaments(self, conn: Connection, seen: dict[str, tuple[int, set[str]]]) -> None:
        """Create missing tournaments (the bots' runner may create the same row at once), then widen
        the created time and the games of the existing ones."""
        ids = sorted(seen)
        conn.execute(self.new_tournament, [
            dict(tournament_id=t, name="", status="running", games=sorted(seen[t][1]), config={},
                 created_ms=seen[t][0], finished_ms=None, matches_finished=0) for t in ids])
        changed = []
        for tournament_id, created_ms, games in conn.execute(self.lock_tournaments, {"ids": ids}):
            first, new_games = seen[tournament_id]
            widened = sorted({*games, *new_games})
            if first < created_ms or widened != list(games):
                changed.append(dict(b_tournament=tournament_id, b_created=min(first, created_ms), b_games=widened))
        if changed:
            conn.execute(self.tournament_seen, changed)

    def _results(self, conn: Connection, results: list[tuple[MatchRow, list[SeatResult]]]) -> None:
        """Seat results, then tournament standings (sums, added in match-id then player order)."""
        rows = [dict(b_match=m.match_id, b_seat=s.seat, b_score=s.score, b_rank=s.rank, b_winner=s.rank == 1,
                     b_details=s.details) for m, seats in results for s in seats]
        if rows:
            conn.execute(self.seat_result, rows)
        finished: dict[str, int] = {}
        standings = []
        for match, seats in results:
            if not match.tournament_id:
                continue
            finished[match.tournament_id] = finished.get(match.tournament_id, 0) + 1
            standings += tournament_points(match, seats)
        if finished:
            conn.execute(self.tournament_finished,
                         [dict(b_tournament=t, b_finished=n) for t, n in sorted(finished.items())])
        if standings:
            conn.execute(self.standings, standings)

    def advance_checkpoints(self, conn: Connection, newest: dict[int, tuple[str, int]], counts: dict[int, int]
                            ) -> None:
        """One upsert: per touched partition, the newest entry id (and its event time) when newer than the
        committed one — another consumer may have committed a newer entry of the partition — plus the
        events applied."""
        if newest:
            self._execute("checkpoints", self.checkpoints, conn, [
                dict(partition=p, last_entry_id=newest[p][0], last_event_ms=newest[p][1], events=counts[p])
                for p in sorted(newest)])

    def _execute(self, name: str, statement: Any, conn: Connection, rows: list[dict[str, Any]]) -> None:
        driver = self.driver.get(name)
        if driver is not None:
            driver.execute(conn, rows)
        else:
            conn.execute(statement, rows)


def _entry_newer(dialect: str, candidate: Any, current: Any) -> Any:
    """SQL for "stream entry id `candidate` is after `current`": ids compare as (ms, seq) numbers, not text."""
    def parts(entry_id: Any) -> tuple[Any, Any]:
        if dialect == "postgresql":
            return (cast(func.split_part(entry_id, "-", 1), BigInteger),
                    cast(func.split_part(entry_id, "-", 2), BigInteger))
        dash = func.instr(entry_id, "-")
        return (cast(func.substr(entry_id, 1, dash - 1), BigInteger), cast(func.substr(entry_id, dash + 1), BigInteger))

    (ms, seq), (top_ms, top_seq) = parts(candidate), parts(current)
    return or_(ms > top_ms, and_(ms == top_ms, seq > top_seq))


def archived(conn: Connection, match_id: str, *, after: int = 0, upto: int) -> list[EventEnvelope]:
    """The match's archived envelopes with `after < seq <= upto`, in order (to refold a match)."""
    query = (select(ARCHIVE.c.envelope)
             .where(ARCHIVE.c.match_id == match_id, ARCHIVE.c.seq > after, ARCHIVE.c.seq <= upto)
             .order_by(ARCHIVE.c.seq))
    return [EventEnvelope.FromString(raw) for (raw,) in conn.execute(query)]


def tournament_points(match: MatchRow, seats: list[SeatResult]) -> list[dict[str, Any]]:
    """One standings increment per player of a finished tournament match, at their best seat
    (1 point first ... 0 last, linear between; a missing rank counts as last)."""
    best: dict[str, SeatResult] = {}
    for seat in seats:
        if seat.player_id and (seat.player_id not in best or seat.rank < (best[seat.player_id].rank or 0)):
            best[seat.player_id] = seat
    n = max(2, match.seats)
    out = []
    for player_id in sorted(best):
        seat = best[player_id]
        rank = seat.rank or n
        out.append(dict(tournament_id=match.tournament_id, game_id=match.game_id, player_id=player_id, played=1,
                        wins=1 if rank == 1 else 0, points=_exact((n - rank) / (n - 1)),
                        score_total=_exact(seat.score or 0.0), rank_total=rank))
    return out


_STEP = 2.0 ** -20


def _exact(value: float) -> float:
    """`value` to the nearest multiple of 2^-20 (a millionth, about): the standings add these up
    one finished match at a time, and sums of such numbers are exact in floating point, so the
    totals do not depend on the order matches finished in (2/3 + 1/3 + ... is not), and an
    incremental build and a rebuild give the same tables."""
    return round(value / _STEP) * _STEP


def _match_values(m: MatchRow) -> dict[str, Any]:
    assert m.created is not None
    return dict(m.created, match_id=m.match_id, game_id=m.game_id, seats=m.seats, tournament_id=m.tournament_id,
                version=m.version, last_event_ms=m.last_event_ms, status=m.status, fold_error=m.fold_error,
                diverged_seq=m.diverged_seq, finished_ms=m.finished_ms, outcome=m.outcome,
                last_entry_id=m.last_entry_id)
