"""The read models say what the events say: every table, and what the queries answer from them,
against a reference computed here from the match streams alone (the engines' `evolve` and
`result`, OpenSkill called directly), on a real Redis and SQL (SQLite and PostgreSQL).

The matches: every game, ties at the top, a Nostra City match nobody won, a player in two
seats, a seat nobody holds, people and bots, a tournament and matches outside it, a match
cancelled midway, one cancelled before any move and one left stuck, written by clocks that
disagree (times do not always grow with seqs). They are projected live by
two consumers, then again in batches of one to three entries, each delivered twice, by a
projector that restarts every few batches, and once more by a rebuild from the archive."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from openskill.models import PlackettLuce
from sqlmodel import select

from famiglia.engine.registry import Registry
from famiglia.eventstore import PartitionEntry
from famiglia.eventstore.envelopes import match_cancelled_envelope
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.readmodels import leaderboard, list_matches, tournament_standings
from famiglia.readmodels.db import read_session
from famiglia.readmodels.queries import player_history
from famiglia.readmodels.tables import (
    ArchivedEvent,
    Match,
    MatchSeat,
    Player,
    PlayerRating,
    RatingHistory,
    RatingScope,
    Tournament,
    TournamentStanding,
)
from famiglia.v1 import envelope_pb2
from services.projection.app import ProjectionApp

from . import support
from .support import Clock, MatchSpec, drain, dump, write_matches

CUP = "cup"

# (match id, game, players, seed, tournament, seats held by people). Seeds from test_projection's
# TIED_MATCHES: ties at several rank positions, a Nostra City match nobody won (x03), a shared win.
FINISHED = [
    ("x00", "goodcritters", ["ann", "bob", "cy", "dee"], 27, CUP, {0}),
    ("x01", "grifters", ["ann", "bob", "cy"], 178, CUP, {1}),
    ("x02", "grifters", ["ann", "ann", "bob", "cy"], 238, CUP, {0, 1}),
    ("x03", "nostra_city", ["ann", "bob", "cy"], 3, CUP, set()),
    ("x04", "nostra_city", ["ann", "bob", "cy", "dee", "eve"], 158, "", {4}),
    ("x05", "nothing_personal", ["ann", "bob", "cy"], 0, CUP, {2}),
    ("x06", "dice_race", ["guest-7", "", "bob"], 31, CUP, {0}),
    ("x07", "dice_race", ["cy", "dee"], 32, "", set()),
    ("x08", "dice_race", ["eve", "eve"], 33, CUP, set()),
]
# (match id, game, players, seed, tournament, commands played, cancelled)
UNFINISHED = [
    ("c00", "dice_race", ["ann", "bob"], 40, CUP, 3, True),
    ("c01", "dice_race", ["dee", "eve"], 41, CUP, 0, True),
    ("s00", "grifters", ["bob", "cy", "dee"], 42, CUP, 4, False),
]


class SkewedClock(Clock):
    """One second per call, but every fifth call a minute behind: another command process's
    clock, or a held answer written out in seat order with the time it was given (NP-H9)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return super().__call__() - (60_000 if self.calls % 5 == 0 else 0)


class ZigzagClock:
    """A second forward, half a second back, and so on: a match whose times go back and forth
    between every pair of commands, so its latest time is often not its last event's."""

    def __init__(self, start_ms: int) -> None:
        self.now, self.calls = start_ms, 0

    def __call__(self) -> int:
        self.calls += 1
        self.now += 1000 if self.calls % 2 else -500
        return self.now


ZIGZAG = {"x07", "x08"}
"""Matches written with a clock of their own (`ZigzagClock`)."""


def write_scenario(store: RedisEventStore, registry: Registry, clock: Callable[[], int]) -> None:
    specs = [MatchSpec(match_id, players, seed, game, tournament, names=[f"{p.title()} {match_id}" for p in players],
                       people=frozenset(people))
             for match_id, game, players, seed, tournament, people in FINISHED]
    write_matches(store, registry, [s for s in specs if s.match_id not in ZIGZAG], clock)
    for spec in specs:
        if spec.match_id in ZIGZAG:
            write_matches(store, registry, [spec], ZigzagClock(clock()))
    for match_id, game, players, seed, tournament, commands, cancelled in UNFINISHED:
        spec = MatchSpec(match_id, players, seed, game, tournament)
        version = 0
        for _command_id, envelopes in itertools.islice(support._batches(registry.get(game), spec, clock),
                                                       commands + 1):
            store.append(match_id, version, envelopes, command_id=_command_id)
            version += len(envelopes)
        if cancelled:
            cancel = match_cancelled_envelope(match_id, version, game, envelope_pb2.MatchCancelled(
                reason="stuck", operator="tournaments"), command_id=f"cancel:{match_id}",
                now_ms=clock() - 60_000)  # written by a command process whose clock is a minute behind
            store.append(match_id, version, [cancel], command_id=cancel.command_id)


# -- the reference: from the streams alone ------------------------------------------------------
@dataclass
class Ref:
    match_id: str
    created: envelope_pb2.MatchCreated
    created_ms: int
    last_event_ms: int
    version: int
    status: str = "live"
    finished_ms: int | None = None
    outcome: dict[str, str] = field(default_factory=dict)
    seats: dict[int, tuple[float, int, dict[str, str]]] = field(default_factory=dict)
    """seat -> (score, rank, details) once finished."""

    def player(self, seat: int) -> str:
        return next((i.player_id for i in self.created.seat_info if i.seat == seat), "")

    def best_seats(self) -> dict[str, int]:
        """Each player's best seat: the best rank, then the lowest seat."""
        best: dict[str, int] = {}
        for seat in sorted(self.seats):
            player = self.player(seat)
            if player and (player not in best or self.seats[seat][1] < self.seats[best[player]][1]):
                best[player] = seat
        return best


def reference_match(registry: Registry, envelopes: list[envelope_pb2.EventEnvelope]) -> Ref:
    created = envelope_pb2.MatchCreated.FromString(envelopes[0].payload)
    engine = registry.get(created.game_id)
    ref = Ref(envelopes[0].match_id, created, envelopes[0].timestamp.ToMilliseconds(),
              max(e.timestamp.ToMilliseconds() for e in envelopes), envelopes[-1].seq)
    state = None
    latest = ref.created_ms
    for env in envelopes[1:]:
        latest = max(latest, env.timestamp.ToMilliseconds())
        if env.type == "match_cancelled":
            cancel = envelope_pb2.MatchCancelled.FromString(env.payload)
            ref.status, ref.finished_ms = "cancelled", env.timestamp.ToMilliseconds()
            ref.outcome = {"reason": cancel.reason, "cancelled_by": cancel.operator}
            break
        state = engine.evolve(state, engine.info.event_type.FromString(env.payload))
        result = engine.result(state)
        if result is not None:
            ref.status, ref.finished_ms = "finished", latest  # the latest time yet: times need not grow
            ref.outcome = {str(k): str(v) for k, v in result.outcome.items()}
            ref.seats = {s.seat: (float(s.score), int(s.rank), {str(k): str(v) for k, v in s.details.items()})
                         for s in result.seats}
            break
    return ref


def _exact(value: float) -> float:
    step = 2.0 ** -20
    return round(value / step) * step


def _signed(seed: int) -> int:
    return seed - (1 << 64) if seed >= 1 << 63 else seed


def reference_tables(refs: list[Ref]) -> dict[str, dict[Any, dict[str, Any]]]:
    """Every read model as {primary key: {column: value}}, from the reference matches."""
    model = PlackettLuce(mu=25.0, sigma=25.0 / 3.0)
    out: dict[str, dict[Any, dict[str, Any]]] = {t: {} for t in (
        "matches", "match_seats", "players", "rating_scopes", "ratings", "rating_history", "tournaments",
        "tournament_standings")}
    for r in refs:
        c = r.created
        out["matches"][r.match_id] = dict(
            game_id=c.game_id, status=r.status, seats=c.seats, created_ms=r.created_ms, finished_ms=r.finished_ms,
            last_event_ms=r.last_event_ms, version=r.version, seed=_signed(c.seed), options=dict(c.options),
            tournament_id=c.tournament_id, outcome=r.outcome, fold_error="", diverged_seq=None,
            rematch_of=c.rematch_of or None)
        info = {i.seat: i for i in c.seat_info}
        for seat in range(c.seats):
            i = info.get(seat)
            score, rank, details = r.seats.get(seat, (None, None, {}))
            out["match_seats"][(r.match_id, seat)] = dict(
                player_id=i.player_id if i else "", display_name=i.display_name if i else "", bot=bool(i and i.bot),
                policy=i.policy if i else "", created_ms=r.created_ms, score=score, rank=rank, winner=rank == 1,
                details=details)
    # players: name, bot and policy from the newest match joined (created, then match id)
    for r in sorted(refs, key=lambda r: (r.created_ms, r.match_id)):
        for i in r.created.seat_info:
            if not i.player_id:
                continue
            seen = out["players"].get(i.player_id)
            first = r.created_ms if seen is None else min(seen["first_seen_ms"], r.created_ms)
            out["players"][i.player_id] = dict(display_name=i.display_name, bot=i.bot, policy=i.policy,
                                               first_seen_ms=first, last_seen_ms=r.created_ms,
                                               last_match_id=r.match_id)
    finished = sorted((r for r in refs if r.status == "finished"), key=lambda r: (r.finished_ms, r.match_id))
    scopes: dict[str, list[Ref]] = {}
    for r in finished:
        scopes.setdefault(f"game:{r.created.game_id}", []).append(r)
        if r.created.tournament_id:
            scopes.setdefault(f"tournament:{r.created.tournament_id}:{r.created.game_id}", []).append(r)
    for scope, matches in scopes.items():
        ratings: dict[str, tuple[float, float]] = {}
        counts: dict[str, list[int]] = {}
        for r in matches:
            ranks = {p: r.seats[s][1] for p, s in sorted(r.best_seats().items())}
            if len(ranks) < 2:
                continue
            players = sorted(ranks)
            before = {p: ratings.get(p, (25.0, 25.0 / 3.0)) for p in players}
            teams = [[model.rating(mu=before[p][0], sigma=before[p][1])] for p in players]
            rated = model.rate(teams, ranks=[float(ranks[p]) for p in players])
            for p, team in zip(players, rated, strict=True):
                ratings[p] = (float(team[0].mu), float(team[0].sigma))
                n = counts.setdefault(p, [0, 0])
                n[0] += 1
                n[1] += ranks[p] == 1
                out["rating_history"][(scope, r.match_id, p)] = dict(
                    order_ms=r.finished_ms, rank=ranks[p], mu_before=before[p][0], sigma_before=before[p][1],
                    mu_after=ratings[p][0], sigma_after=ratings[p][1])
        out["rating_scopes"][scope] = dict(last_finished_ms=matches[-1].finished_ms,
                                           last_match_id=matches[-1].match_id, matches=len(matches))
        for p, (mu, sigma) in ratings.items():
            out["ratings"][(scope, p)] = dict(mu=mu, sigma=sigma, ordinal=mu - 3 * sigma, matches=counts[p][0],
                                              wins=counts[p][1])
    for r in refs:
        t = r.created.tournament_id
        if not t:
            continue
        row = out["tournaments"].setdefault(t, dict(name="", status="running", games=set(), config={},
                                                    created_ms=r.created_ms, finished_ms=None, matches_finished=0))
        row["games"].add(r.created.game_id)
        row["created_ms"] = min(row["created_ms"], r.created_ms)
        if r.status != "finished":
            continue
        row["matches_finished"] += 1
        n = max(2, r.created.seats)
        for p, seat in r.best_seats().items():
            score, rank, _ = r.seats[seat]
            s = out["tournament_standings"].setdefault((t, r.created.game_id, p), dict(
                played=0, wins=0, points=0.0, score_total=0.0, rank_total=0))
            s["played"] += 1
            s["wins"] += rank == 1
            s["points"] += _exact((n - rank) / (n - 1))
            s["score_total"] += _exact(score)
            s["rank_total"] += rank
    for row in out["tournaments"].values():
        row["games"] = sorted(row["games"])
    return out


_TABLES = {"matches": Match, "match_seats": MatchSeat, "players": Player, "rating_scopes": RatingScope,
           "ratings": PlayerRating, "rating_history": RatingHistory, "tournaments": Tournament,
           "tournament_standings": TournamentStanding}


def stored_tables(app: ProjectionApp, like: dict[str, dict[Any, dict[str, Any]]]) -> dict[str, dict[Any, dict]]:
    """The read models in the reference's shape (its columns only)."""
    out: dict[str, dict[Any, dict[str, Any]]] = {}
    with read_session(app.sql) as session:
        for name, table in _TABLES.items():
            keys = [c.name for c in table.__table__.primary_key.columns]  # type: ignore[attr-defined]
            columns = next(iter(like[name].values())).keys()
            rows = {}
            for row in session.exec(select(table)).all():
                key = tuple(getattr(row, k) for k in keys)
                rows[key[0] if len(key) == 1 else key] = {c: getattr(row, c) for c in columns}
            out[name] = rows
    return out


def streams(store: RedisEventStore) -> dict[str, list[envelope_pb2.EventEnvelope]]:
    ids = [m[0] for m in FINISHED] + [m[0] for m in UNFINISHED]
    return {match_id: store.read(match_id) for match_id in ids}


def assert_read_models_say_what_the_events_say(app: ProjectionApp) -> None:
    events = streams(app.store)
    refs = [reference_match(app.registry, envelopes) for envelopes in events.values()]
    expected = reference_tables(refs)
    stored = stored_tables(app, expected)
    for name in expected:
        assert stored[name] == expected[name], name
    with read_session(app.sql) as session:
        archive = session.exec(select(ArchivedEvent)).all()
        assert {(a.match_id, a.seq): a.envelope for a in archive} == \
            {(e.match_id, e.seq): e.SerializeToString(deterministic=True) for es in events.values() for e in es}
        # What the queries answer from the tables.
        for game_id in {r.created.game_id for r in refs}:
            board = [(e.rank, e.player_id, e.mu, e.sigma, e.matches, e.wins, e.display_name, e.bot)
                     for e in leaderboard(session, game_id)]
            rated = sorted(((k[1], v) for k, v in expected["ratings"].items() if k[0] == f"game:{game_id}"),
                           key=lambda kv: (-kv[1]["ordinal"], -kv[1]["mu"], kv[0]))
            assert board == [(i, p, v["mu"], v["sigma"], v["matches"], v["wins"],
                              expected["players"][p]["display_name"], expected["players"][p]["bot"])
                             for i, (p, v) in enumerate(rated, 1)], game_id
        table = tournament_standings(session, CUP)
        want = []
        for (t, game_id, p), s in expected["tournament_standings"].items():
            mu, sigma = (expected["ratings"][(f"tournament:{t}:{game_id}", p)][c] for c in ("mu", "sigma")) \
                if (f"tournament:{t}:{game_id}", p) in expected["ratings"] else (25.0, 25.0 / 3.0)
            want.append((game_id, p, s["played"], s["wins"], s["points"], s["rank_total"] / s["played"], mu, sigma))
        want.sort(key=lambda w: (w[0], -(w[6] - 3 * w[7]), -w[4], -w[3], w[1]))
        assert [(s.game_id, s.player_id, s.played, s.wins, s.points, s.average_rank, s.mu, s.sigma)
                for s in table] == want
        assert [s.rank for s in table] == [1 + sum(1 for w in want[:i] if w[0] == want[i][0])
                                           for i in range(len(want))]
        for player in expected["players"]:
            history = player_history(session, player, page_size=500)
            mine = sorted((r for r in refs if player in {i.player_id for i in r.created.seat_info}),
                          key=lambda r: (r.created_ms, r.match_id), reverse=True)
            seats = []
            for r in mine:
                held = sorted(i.seat for i in r.created.seat_info if i.player_id == player)
                seat = r.best_seats().get(player, held[0])
                rated = expected["rating_history"].get((f"game:{r.created.game_id}", r.match_id, player))
                seats.append((r.match_id, seat, None if rated is None else (rated["mu_after"], rated["sigma_after"])))
            assert [(h.match.match_id, h.seat, None if h.rating_after is None else
                     (h.rating_after.mu, h.rating_after.sigma)) for h in history.entries] == seats, player
            assert sorted(history.ratings) == sorted(k[0].removeprefix("game:") for k in expected["ratings"]
                                                     if k[1] == player and k[0].startswith("game:"))
        assert {m.match_id for m in list_matches(session, status="cancelled").matches} == {"c00", "c01"}
        assert [m.match_id for m in list_matches(session, status="live").matches] == ["s00"]


# -- the tests ----------------------------------------------------------------------------------
@pytest.fixture()
def scenario(app: ProjectionApp) -> ProjectionApp:
    if any(game not in app.registry for _m, game, *_rest in FINISHED):
        pytest.skip("the four real games are not all registered")
    write_scenario(app.store, app.registry, SkewedClock())
    return app


def _all_entries(app: ProjectionApp) -> list[PartitionEntry]:
    reader = app.runner("reader")
    reader.start()
    entries: list[PartitionEntry] = []
    while batch := reader.consumer.read(count=100):
        entries.extend(batch)
    return entries


def test_live_projection_and_rebuild_say_what_the_events_say(scenario: ProjectionApp) -> None:
    drain([scenario.runner("left"), scenario.runner("right")])
    assert_read_models_say_what_the_events_say(scenario)
    live = dump(scenario.sql)
    report = scenario.rebuild()
    assert report.left_deferred == 0
    assert dump(scenario.sql) == live


def _chunks(entries: list[PartitionEntry]) -> Iterator[list[PartitionEntry]]:
    sizes = itertools.cycle([1, 3, 2])
    at = 0
    while at < len(entries):
        size = next(sizes)
        yield entries[at:at + size]
        at += size


def test_batches_split_redelivered_and_a_restarted_projector_say_what_the_events_say(
        scenario: ProjectionApp) -> None:
    entries = _all_entries(scenario)
    projector = scenario.runner("split").projector
    pending: list[PartitionEntry] = []
    for i, chunk in enumerate(_chunks(entries)):
        if i % 5 == 4:  # a restart: the folded matches are gone, refolded from the archive
            projector.release()
            projector = scenario.runner(f"split{i}").projector
        outcome = projector.project(pending + chunk)
        pending = outcome.deferred
        again = projector.project(chunk)  # delivered twice
        assert not again.applied
    while pending:
        outcome = projector.project(pending)
        assert outcome.applied, "entries left deferred"
        pending = outcome.deferred
    projector.release()
    assert_read_models_say_what_the_events_say(scenario)
