"""Tournament plans: which matches to play, who sits where. Pure data, no I/O.

Entrants rotate through the seats (match k gives seat i to entrant (k + i) mod E),
so over E matches every entrant has held every seat position equally often —
seat order matters in most of these games (the first player, the Boss).

`check` holds a spec to the bounds of `Limits` (the one place they are set) before anything
is planned or stored: the plan is materialised whole, so its size must be bounded.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import ClassVar

from famiglia.chat_text import unshowable
from famiglia.engine import options_refusal
from famiglia.engine.registry import Registry
from famiglia.engine.rng import derive_seed

from .policy import BadPolicyParameter, checked_spec


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


class Limits:
    """The bounds of a tournament request (CreateTournament answers INVALID_ARGUMENT beyond them).

    A plan holds every match in memory (about 0.5 KB each) and in every GetTournament answer's
    counts, so the total is what matters; the others keep one request from occupying the
    workers, the command service or Redis without end. Policy parameters are bounded in
    `famiglia.bots.policy.PARAMETERS`."""

    MATCHES_PER_GAME: ClassVar[int] = 10_000
    ROUNDS: ClassVar[int] = 100
    """Round-robin repetitions."""
    TOTAL_MATCHES: ClassVar[int] = 20_000
    """Planned matches over all games (the bench's largest run plans 1,000)."""
    CONCURRENCY: ClassVar[int] = 1_024
    """Matches in play at once (`make run` asks for 4 per core)."""
    DEADLINE_SECONDS: ClassVar[float] = 7 * 86_400.0
    ENTRANTS: ClassVar[int] = 16
    GAMES: ClassVar[int] = 16
    """Entries of `games` (a game may be listed twice, with other options)."""
    SEAT_COUNTS: ClassVar[int] = 16
    """Entries of one game's `seat_counts` (repeats weigh a size)."""
    NAME_CHARS: ClassVar[int] = 100


class BadTournament(ValueError):
    """A tournament request outside `Limits` or naming what cannot be played; `code` is stable."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def planned_matches(spec: TournamentSpec) -> int:
    """len(plan(spec)), counted without making the plan."""
    total = 0
    for game in spec.games:
        counts = game.seat_counts or (2,)
        total += (max(1, spec.rounds) * len(counts) * len(spec.entrants) if spec.round_robin
                  else max(0, spec.matches_per_game))
    return total


def shown_name(name: str) -> str:
    """A tournament's name as a line may show it: as given, or escaped (`repr`) when it holds
    what `check` refuses, as one stored before that check may (a cancel's reason carries it)."""
    return repr(name) if unshowable(name, lines=False) else name


def check(spec: TournamentSpec, registry: Registry | None = None) -> None:
    """Refuse (BadTournament) a spec outside `Limits`, an entrant whose policy spec is refused,
    and, with `registry`, a game, seat count or options the game itself refuses: every match
    of the plan must be one CreateMatch accepts."""
    if len(spec.name) > Limits.NAME_CHARS or "\x00" in spec.name:  # the read models (PostgreSQL) hold it
        raise BadTournament("bad_name", f"a name is at most {Limits.NAME_CHARS} characters, without NUL")
    why = unshowable(spec.name, "a tournament's name", lines=False)
    if why:  # shown on a line (standings, the CLI, its matches' cancel reason), as a seat's name is
        raise BadTournament("bad_name", why)
    if not spec.entrants:
        raise BadTournament("no_entrants", "a tournament needs at least one entrant")
    if len(spec.entrants) > Limits.ENTRANTS:
        raise BadTournament("too_many_entrants", f"at most {Limits.ENTRANTS} entrants")
    for entrant in spec.entrants:
        try:
            checked_spec(entrant)
        except BadPolicyParameter as exc:
            raise BadTournament("bad_policy_params", f"entrant {entrant[:60]!r}: {exc}") from None
        except ValueError as exc:
            raise BadTournament("unknown_policy", f"entrant {entrant[:60]!r}: {exc}") from None
    if not spec.games:
        raise BadTournament("no_games", "no game to play")
    if len(spec.games) > Limits.GAMES:
        raise BadTournament("too_many_games", f"at most {Limits.GAMES} game entries")
    if not 1 <= spec.matches_per_game <= Limits.MATCHES_PER_GAME:
        raise BadTournament("bad_matches_per_game", f"matches_per_game is 1..{Limits.MATCHES_PER_GAME} "
                                                    "(0 asks for 2 per entrant)")
    if not 1 <= spec.rounds <= Limits.ROUNDS:
        raise BadTournament("bad_rounds", f"rounds is 1..{Limits.ROUNDS} (0 asks for 1)")
    if not 1 <= spec.concurrency <= Limits.CONCURRENCY:
        raise BadTournament("bad_concurrency", f"concurrency is 1..{Limits.CONCURRENCY} (0 asks for 4)")
    if not (math.isfinite(spec.deadline_seconds) and 0 <= spec.deadline_seconds <= Limits.DEADLINE_SECONDS):
        raise BadTournament("bad_deadline", f"deadline_seconds is 0..{Limits.DEADLINE_SECONDS:.0f} (0: none)")
    for game in spec.games:
        if len(game.seat_counts) > Limits.SEAT_COUNTS:
            raise BadTournament("bad_seats", f"{game.game_id}: at most {Limits.SEAT_COUNTS} seat counts")
    total = planned_matches(spec)
    if total > Limits.TOTAL_MATCHES:
        raise BadTournament("too_many_matches", f"the plan has {total:,} matches; at most "
                                                f"{Limits.TOTAL_MATCHES:,} per tournament")
    if registry is not None:
        for game in spec.games:
            _check_game(game, registry)


def _check_game(game: GamePlan, registry: Registry) -> None:
    if game.game_id not in registry:
        raise BadTournament("unknown_game", f"the bots cannot play {game.game_id[:60]!r}")
    engine = registry.get(game.game_id)
    info = engine.info
    counts = game.seat_counts or (2,)  # as `plan` reads it
    for n in counts:
        if not info.min_players <= n <= info.max_players:
            raise BadTournament("bad_seats", f"{game.game_id} takes {info.min_players}-{info.max_players} seats")
    for n in sorted(set(counts)):  # what CreateMatch will run for each match
        refusal = options_refusal(engine, n, game.options)
        if refusal is not None:
            code, message = refusal
            raise BadTournament(code, message if code == "unknown_option" else f"{game.game_id} at {n} seats: {message}")


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
                # The sizes take turns; each size's own matches rotate the seats (counted over all
                # sizes, entrants and sizes sharing a factor kept some entrant off a seat at a size).
                seats = counts[k % len(counts)]
                rows.append((game.game_id, seats, rotation(spec.entrants, seats, k // len(counts)), game.options))
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
