"""The matchmaking service's metrics: what an operator graphs and alerts on (docs/metrics.md).

Labelled by game only, never by ticket or player."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from famiglia.grpcutil.errors import store_away
from famiglia.telemetry.metrics import meter, tally

from .store import RedisTicketStore, TicketRecord

#: Buckets of a matched ticket's wait, in seconds: a table made at once, within the minute a
#: player waits, and the bot backfill's and a ticket lifetime's minutes.
WAIT_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200)


class MatchmakingMetrics:
    """Tables made, those a bot backfilled, matched tickets' waits, and the tickets searching
    per game (one ZCARD a game, read when the metrics are exported)."""

    def __init__(self, meter: Meter, store: RedisTicketStore, games: Iterable[str]) -> None:
        self._store = store
        self._games = sorted(games)
        self._tables = tally(meter, "famiglia.matchmaking.tables", ("game",), unit="{table}",
                             description="tables made (matches created from tickets)")
        self._backfills = tally(meter, "famiglia.matchmaking.backfills", ("game",), unit="{table}",
                                description="tables made with bot seats filling in for people")
        self._wait = meter.create_histogram("famiglia.matchmaking.wait", unit="s",
                                            description="a matched ticket's wait, from its asking to its table",
                                            explicit_bucket_boundaries_advisory=WAIT_BUCKETS)
        meter.create_observable_gauge("famiglia.matchmaking.searching", [self._searching], unit="{ticket}",
                                      description="tickets in a game's queue, waiting for a table")
        self._by_game: dict[str, dict[str, Any]] = {}

    def _game(self, game: str) -> dict[str, Any]:
        found = self._by_game.get(game)
        if found is None:
            found = self._by_game[game] = {"game": game}
        return found

    def table_made(self, game: str, bots: int, tickets: Sequence[TicketRecord | None], now_ms: int) -> None:
        attributes = self._game(game)
        self._tables.add((game,))
        if bots:
            self._backfills.add((game,))
        for record in tickets:
            if record is not None:
                asked = record.asked_ms or record.created_ms
                self._wait.record(max(0, (record.closed_ms or now_ms) - asked) / 1000.0, attributes)

    def _searching(self, _options: CallbackOptions) -> Iterable[Observation]:
        try:
            sizes = self._store.queue_sizes(self._games)
        except Exception as exc:  # Redis away: no point this time, rather than a traceback a minute
            if store_away(exc):
                return []
            raise
        return [Observation(size, self._game(game)) for game, size in zip(self._games, sizes, strict=True)]


def matchmaking_metrics(store: RedisTicketStore, games: Iterable[str]) -> MatchmakingMetrics | None:
    """The service's instruments, or None when metrics are off (then nothing is recorded)."""
    found = meter("famiglia.matchmaking")
    return None if found is None else MatchmakingMetrics(found, store, games)
