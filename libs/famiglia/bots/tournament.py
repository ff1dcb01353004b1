"""Tournament plans: which matches to play, who sits where. Pure data, no I/O.

Entrants rotate through the seats (match k gives seat i to entrant (k + i) mod E),
so over E matches every entrant has held every seat position equally often —
seat order matters in most of these games (the first player, the Boss).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from famiglia.engine.rng import derive_seed


@dataclass(frozen=True)
class GamePlan:
    game_id: str
    seat_counts: tuple[int, ...]
    options: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TournamentSpec:
    name: str
    games: tuple[GamePlan, ...]
    entrants: tuple[str, ...]
    matches_per_game: int = 6
    round_robin: bool = False
    rounds: int = 1
    seed: int = 1
    concurrency: int = 4
    deadline_seconds: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TournamentSpec:
        raw = json.loads(text)
        games = tuple(GamePlan(g["game_id"], tuple(g["seat_counts"]), dict(g.get("options") or {}))
                      for g in raw.pop("games"))
        raw["entrants"] = tuple(raw["entrants"])
        return cls(games=games, **raw)


@dataclass(frozen=True)
class PlannedMatch:
    index: int
    game_id: str
    seats: int
    entrants: tuple[str, ...]  # index = seat
    seed: int
    options: Mapping[str, str] = field(default_factory=dict)


def rotation(entrants: Sequence[str], seats: int, k: int) -> tuple[str, ...]:
    return tuple(entrants[(k + i) % len(entrants)] for i in range(seats))


def plan(spec: TournamentSpec) -> list[PlannedMatch]:
    """Every match of the tournament, interleaved across games so that partial
    results (a deadline, a cancel) cover every game."""
    if not spec.entrants:
        raise ValueError("a tournament needs at least one entrant")
    per_game: list[list[tuple[str, int, tuple[str, ...], Mapping[str, str]]]] = []
    for game in spec.games:
        rows = []
        counts = game.seat_counts or (2,)
        if spec.round_robin:
            for _ in range(max(1, spec.rounds)):
                for seats in counts:
                    for k in range(len(spec.entrants)):
                        rows.append((game.game_id, seats, rotation(spec.entrants, seats, k), game.options))
        else:
            for k in range(spec.matches_per_game):
                seats = counts[k % len(counts)]
                rows.append((game.game_id, seats, rotation(spec.entrants, seats, k), game.options))
        per_game.append(rows)
    out: list[PlannedMatch] = []
    for i in range(max((len(r) for r in per_game), default=0)):
        for rows in per_game:
            if i < len(rows):
                game_id, seats, entrants, options = rows[i]
                index = len(out)
                out.append(PlannedMatch(index, game_id, seats, entrants,
                                        derive_seed(spec.seed, index, "tournament") >> 1, options))
    return out
