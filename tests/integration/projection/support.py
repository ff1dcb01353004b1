"""Helpers for the projection tests: write really played matches to Redis, drain consumers, dump tables."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from sqlalchemy.engine import Engine as SqlEngine
from sqlmodel import select

from famiglia.engine import Engine, Result
from famiglia.engine.registry import Registry, default_registry
from famiglia.eventstore.envelopes import game_envelopes, match_created_envelope, seat_change_envelope
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.ratings import MatchOutcome, Placement
from famiglia.readmodels.db import read_session
from famiglia.readmodels.tables import TABLES
from famiglia.testing.random_play import play_random
from famiglia.v1 import envelope_pb2

from . import dice_race


def real_engines() -> dict[str, Engine]:
    """The games registered right now (engines are being written by others): none is fine."""
    try:
        registry = default_registry()
    except Exception:  # noqa: BLE001 - a half-written engine package must not break these tests
        return {}
    return {game_id: registry.get(game_id) for game_id in registry}


def games_registry() -> Registry:
    return Registry({**real_engines(), dice_race.GAME_ID: dice_race.ENGINE, dice_race.DUEL_ID: dice_race.DUEL})


class Clock:
    """Event times that move on one second per call: finish order is known and distinct."""

    def __init__(self, start_ms: int = 1_700_000_000_000, step_ms: int = 1000) -> None:
        self._counter = itertools.count(start_ms, step_ms)

    def __call__(self) -> int:
        return next(self._counter)


@dataclass
class Played:
    match_id: str
    game_id: str
    seats: int
    players: list[str]
    result: Result
    tournament_id: str = ""
    finished_ms: int = 0
    envelopes: list[envelope_pb2.EventEnvelope] = field(default_factory=list)

    def outcome(self) -> MatchOutcome:
        return MatchOutcome(self.match_id, self.finished_ms,
                            tuple(Placement(self.players[s.seat], s.rank) for s in self.result.seats))


@dataclass
class MatchSpec:
    match_id: str
    players: list[str]
    seed: int
    game_id: str = dice_race.GAME_ID
    tournament_id: str = ""
    options: dict[str, str] = field(default_factory=dict)
    names: list[str] | None = None
    """The seats' display names (default: each player id, title-cased)."""
    people: frozenset[int] = frozenset()
    """The seats a person holds (no policy); every other seat with a player id is a bot's."""
    seat_changes: dict[int, list[envelope_pb2.SeatLeft | envelope_pb2.SeatReturned]] = field(default_factory=dict)
    """Before command k (from 0): seat changes (`seat_left`, `seat_returned`), one append each,
    as LeaveMatch and ReturnToMatch write them."""


def _batches(engine: Engine, spec: MatchSpec, clock: Callable[[], int]) -> Iterator[tuple[str, list]]:
    """(command id, envelopes) per append, in the order the command service would write them."""
    seats = len(spec.players)
    play = play_random(engine, seats, spec.seed, spec.options)
    created = envelope_pb2.MatchCreated(game_id=spec.game_id, seats=seats, seed=spec.seed,
                                        tournament_id=spec.tournament_id)
    created.options.update(spec.options)
    for seat, player in enumerate(spec.players):
        if player:
            name = spec.names[seat] if spec.names else player.title()
            bot = seat not in spec.people
            created.seat_info.add(seat=seat, player_id=player, display_name=name, bot=bot,
                                  policy="random" if bot else "")
    now = clock()
    first = [match_created_envelope(spec.match_id, created, now_ms=now)]
    first += game_envelopes(engine, spec.match_id, 1, play.setup_events, now_ms=now)
    yield "", first
    version = len(first)
    for i, step in enumerate(play.steps):
        for n, change in enumerate(spec.seat_changes.get(i, ())):
            command_id = f"{spec.match_id}-s{i}.{n}"
            yield command_id, [seat_change_envelope(spec.match_id, version, spec.game_id, change,
                                                    command_id=command_id, now_ms=clock())]
            version += 1
        envelopes = game_envelopes(engine, spec.match_id, version, step.events, command_id=f"{spec.match_id}-c{i}",
                                   seat=step.seat, command=step.command, now_ms=clock())
        version += len(envelopes)
        yield f"{spec.match_id}-c{i}", envelopes
    result = engine.result(play.state)
    assert result is not None
    yield "done", [result]  # type: ignore[list-item]


def write_matches(store: RedisEventStore, registry: Registry, specs: Sequence[MatchSpec],
                  clock: Callable[[], int] | None = None) -> list[Played]:
    """Play every spec with random legal commands and append its events, interleaving the matches."""
    clock = clock or Clock()
    played = {s.match_id: Played(s.match_id, s.game_id, len(s.players), s.players, None,  # type: ignore[arg-type]
                                 s.tournament_id) for s in specs}
    streams = {s.match_id: _batches(registry.get(s.game_id), s, clock) for s in specs}
    versions = dict.fromkeys(streams, 0)
    while streams:
        for match_id in list(streams):
            command_id, envelopes = next(streams[match_id])
            if command_id == "done":
                played[match_id].result = envelopes[0]
                played[match_id].finished_ms = played[match_id].envelopes[-1].timestamp.ToMilliseconds()
                del streams[match_id]
                continue
            store.append(match_id, versions[match_id], envelopes, command_id=command_id)
            versions[match_id] += len(envelopes)
            played[match_id].envelopes.extend(envelopes)
    return [played[s.match_id] for s in specs]


def drain(runners: Sequence, timeout: float = 30.0) -> None:
    """Run the consumers round-robin until the group has nothing left to do. `timeout`: the
    longest they may go without applying an entry; a soak's thousands of matches on a loaded
    machine take longer than that in all while applying all the time (the soak's long run was
    failed at 30 s with 9,600 entries applied), so progress moves the deadline, up to 20 times."""
    start = time.monotonic()
    deadline = start + timeout
    while True:
        busy = applied = False
        for runner in runners:
            outcome = runner.run_once(block_ms=0)
            applied = applied or bool(outcome.applied)
            busy = busy or bool(outcome.applied or outcome.skipped or outcome.deferred)
        if not busy and all(r.caught_up() for r in runners):
            return
        now = time.monotonic()
        if applied:
            deadline = min(now + timeout, start + 20 * timeout)
        if now > deadline:
            raise AssertionError("the consumers did not catch up")


def dump(engine: SqlEngine) -> dict[str, list[tuple]]:
    """Every read-model table as sorted tuples of its columns: equal dumps mean equal read models.
    Not `matches.last_entry_id`, the partition entry a match was last moved on from: where the
    projection read, not what it made (a rebuild projects from the archive, which records none)."""
    out: dict[str, list[tuple]] = {}
    with read_session(engine) as session:
        for table in TABLES:
            columns = [c for c in table.__table__.columns.keys()  # type: ignore[attr-defined]
                       if (table.__tablename__, c) not in _BOOKKEEPING]
            rows = session.exec(select(table)).all()
            out[table.__tablename__] = sorted(
                (tuple(_plain(getattr(row, c)) for c in columns) for row in rows), key=repr)
    return out


_BOOKKEEPING = {("matches", "last_entry_id")}


def _plain(value: object) -> object:
    if isinstance(value, dict):
        return tuple(sorted(value.items()))
    if isinstance(value, list):
        return tuple(value)
    return value
