"""The command service's metrics: what an operator graphs and alerts on (docs/metrics.md).

Labelled by game, refusal code and reason only, never by match, seat or player: a label's
every value is a series of its own in the collector."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from famiglia.grpcutil.errors import AppError
from famiglia.telemetry.metrics import meter

from .hot_matches import HotMatches


class CommandMetrics:
    """Commands accepted and refused, decisions made again, seats the bots took, and the hot
    matches' count and bytes (read when the metrics are exported, not per command)."""

    def __init__(self, meter: Meter, matches: HotMatches) -> None:
        self._accepted = meter.create_counter(
            "famiglia.command.accepted", unit="{command}", description="commands decided and stored")
        self._refused = meter.create_counter(
            "famiglia.command.refused", unit="{command}", description="commands refused, by their code")
        self._redecided = meter.create_counter(
            "famiglia.command.redecided", unit="{decision}",
            description="commands decided again on a newer state (another replica moved the match)")
        self._seats_to_bots = meter.create_counter(
            "famiglia.command.seats_to_bots", unit="{seat}", description="people's seats the bots took, by why")
        self._matches = matches
        meter.create_observable_gauge("famiglia.command.hot_matches", [self._count], unit="{match}",
                                      description="matches kept folded in memory")
        meter.create_observable_gauge("famiglia.command.hot_bytes", [self._bytes], unit="By",
                                      description="the memory those matches hold, estimated (held_bytes)")
        self._games: dict[str, dict[str, Any]] = {}
        self._codes: dict[tuple[str, str], dict[str, Any]] = {}
        self._reasons: dict[tuple[str, str], dict[str, Any]] = {}

    def _game(self, game: str) -> dict[str, Any]:
        found = self._games.get(game)
        if found is None:
            found = self._games[game] = {"game": game}
        return found

    def accepted(self, game: str) -> None:
        self._accepted.add(1, self._game(game))

    def refused(self, game: str, refusal: AppError) -> None:
        """`game`: "" when the match is not known (no such match)."""
        key = (game, refusal.code)
        found = self._codes.get(key)
        if found is None:
            found = self._codes[key] = {"game": game, "code": refusal.code}
        self._refused.add(1, found)

    def redecided(self, game: str, why: str) -> None:
        """`why`: `conflict` (the append lost a race) or `refused_on_old_state` (a refusal on
        this process's state, decided again on the stream's)."""
        key = (game, why)
        found = self._reasons.get(key)
        if found is None:
            found = self._reasons[key] = {"game": game, "reason": why}
        self._redecided.add(1, found)

    def seat_to_bots(self, game: str, reason: str) -> None:
        self._seats_to_bots.add(1, {"game": game, "reason": reason})

    def _count(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(len(self._matches))]

    def _bytes(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(self._matches.held_bytes)]


def command_metrics(matches: HotMatches) -> CommandMetrics | None:
    """The service's instruments, or None when metrics are off (then nothing is recorded)."""
    found = meter("famiglia.command")
    return None if found is None else CommandMetrics(found, matches)
