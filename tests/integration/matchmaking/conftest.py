"""Matchmaking on a real redis-server, with the real bootstrap and a recording match creator.

The creator stands in for GameService.CreateMatch (a port of ours): it signs seat
tokens the way the command service does, is idempotent per request id, and records
every table, so tests can check that no player ever sits in two matches.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import pytest
import redis

from famiglia.auth import TokenSigner
from famiglia.config import Settings
from famiglia.matchmaking import FixedRatings, GameShape, MatchPolicy
from famiglia.v1 import envelope_pb2
from services.matchmaking.bootstrap import Matchmaking, bootstrap
from services.matchmaking.creator import CreatedMatch, CreateFailed
from services.matchmaking.matcher import MatcherTuning
from services.matchmaking.players import GUEST_TTL_S
from services.matchmaking.settings import MatchmakingSettings

SECRET = "mm-test-secret"
GAME = "parlour"
SHAPES = {
    GAME: GameShape(GAME, 2, 5, {"variant": "classic"}, {"variant": ("classic", "short")}),
    "duel": GameShape("duel", 2, 2),
}


@dataclass
class Table:
    match_id: str
    game_id: str
    seats: int
    options: dict[str, str]
    seat_info: list[envelope_pb2.SeatInfo]


@dataclass
class RecordingCreator:
    """CreateMatch as the command service answers it; `fail_next` simulates outages."""

    signer: TokenSigner = field(default_factory=lambda: TokenSigner(SECRET))
    tables: dict[str, Table] = field(default_factory=dict)
    calls: int = 0
    fail_next: int = 0
    permanent: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def create_match(self, game_id: str, seats: int, *, options: Mapping[str, str],
                     seat_info: Sequence[envelope_pb2.SeatInfo], request_id: str) -> CreatedMatch:
        with self.lock:
            self.calls += 1
            if self.fail_next:
                self.fail_next -= 1
                raise CreateFailed("UNAVAILABLE: command service down", permanent=self.permanent)
            match_id = "m-" + request_id.replace(":", "-")
            if match_id not in self.tables:
                self.tables[match_id] = Table(match_id, game_id, seats, dict(options), list(seat_info))
        players = {i.seat: i.player_id for i in seat_info}
        return CreatedMatch(match_id, [self.signer.seat_token(match_id, s, players.get(s, "")) for s in range(seats)])

    def seated_players(self) -> list[str]:
        return [i.player_id for t in self.tables.values() for i in t.seat_info if not i.bot]


class FakeClock:
    """Milliseconds that move only when a test says so: timeouts without sleeping or flakiness."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, seconds: float) -> None:
        self.now_ms += int(seconds * 1000)


def make_mm(url: str, creator: RecordingCreator, *, policy: MatchPolicy | None = None,
            ratings: FixedRatings | None = None, tuning: MatcherTuning | None = None,
            clock: FakeClock | None = None, guest_ttl_s: int | None = GUEST_TTL_S,
            secret: str = SECRET, accepted_secret: str = "") -> Matchmaking:
    settings = Settings(redis_url=url, secret=secret, accepted_secret=accepted_secret)
    mm = MatchmakingSettings(policy=policy or MatchPolicy(backfill_after=None),
                             tuning=tuning or MatcherTuning(interval_s=0.02, claim_retry_ms=300),
                             guest_ttl_s=guest_ttl_s)
    return bootstrap(settings=settings, mm=mm, client=redis.Redis.from_url(url, decode_responses=True),
                     creator=creator, games=dict(SHAPES), ratings=ratings or FixedRatings(), clock=clock)


@pytest.fixture()
def creator() -> RecordingCreator:
    return RecordingCreator()


@pytest.fixture()
def clock() -> FakeClock:
    return FakeClock()


def guests(mm: Matchmaking, names: str) -> list[str]:
    """One registered guest per letter of `names`: their player ids."""
    return [mm.app.register_guest(n)[0].player_id for n in names]


@pytest.fixture()
def mm(redis_url: str, creator: RecordingCreator) -> Iterator[Matchmaking]:
    service = make_mm(redis_url, creator)
    yield service
    service.close()
