"""The command service's metrics: what an operator graphs and alerts on (docs/metrics.md).

Labelled by game, refusal code and reason only, never by match, seat or player: a label's
every value is a series of its own in the collector."""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from famiglia.grpcutil.errors import AppError
from famiglia.telemetry.metrics import meter, tally

from .hot_matches import HotMatches


class CommandMetrics:
    """Commands accepted and refused, decisions made again, seats the bots took (tallies: a
    command pays a dict update, famiglia.telemetry.metrics.Tally), and the hot matches' count
    and bytes (read when the metrics are exported, not per command)."""

    def __init__(self, meter: Meter, matches: HotMatches) -> None:
        self._accepted = tally(meter, "famiglia.command.accepted", ("game",), unit="{command}",
                               description="commands decided and stored")
        self._refused = tally(meter, "famiglia.command.refused", ("game", "code"), unit="{command}",
                              description="commands refused, by their code")
        self._redecided = tally(meter, "famiglia.command.redecided", ("game", "reason"), unit="{decision}",
                                description="commands decided again on a newer state (another replica moved the match)")
        self._seats_to_bots = tally(meter, "famiglia.command.seats_to_bots", ("game", "reason"), unit="{seat}",
                                    description="people's seats the bots took, by why")
        self._matches = matches
        meter.create_observable_gauge("famiglia.command.hot_matches", [self._count], unit="{match}",
                                      description="matches kept folded in memory")
        meter.create_observable_gauge("famiglia.command.hot_bytes", [self._bytes], unit="By",
                                      description="the memory those matches hold, estimated (held_bytes)")
        self._games: dict[str, tuple[str]] = {}

    def accepted(self, game: str) -> None:
        found = self._games.get(game)
        if found is None:
            found = self._games[game] = (game,)
        self._accepted.add(found)

    def refused(self, game: str, refusal: AppError) -> None:
        """`game`: "" when the match is not known (no such match)."""
        self._refused.add((game, refusal.code))

    def redecided(self, game: str, why: str) -> None:
        """`why`: `conflict` (the append lost a race) or `refused_on_old_state` (a refusal on
        this process's state, decided again on the stream's)."""
        self._redecided.add((game, why))

    def seat_to_bots(self, game: str, reason: str) -> None:
        self._seats_to_bots.add((game, reason))

    def _count(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(len(self._matches))]

    def _bytes(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(self._matches.held_bytes)]


def command_metrics(matches: HotMatches) -> CommandMetrics | None:
    """The service's instruments, or None when metrics are off (then nothing is recorded)."""
    found = meter("famiglia.command")
    return None if found is None else CommandMetrics(found, matches)
