"""Tournament standings: per game and entrant, seats played, wins, mean rank and an
OpenSkill rating (Plackett-Luce, every entrant its own team, famiglia.ratings).
Ratings are folded in match order, so the same finished matches always give the
same table."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SeatRecord:
    seat: int
    entrant: str
    rank: int
    score: float = 0.0


@dataclass(frozen=True)
class MatchRecord:
    match_id: str
    game_id: str
    seats: tuple[SeatRecord, ...]
    commands: int = 0
    finished_ms: int = 0


@dataclass
class Standing:
    game_id: str
    entrant: str
    matches: int = 0
    wins: int = 0
    rank_total: float = 0.0
    mu: float = 25.0
    sigma: float = 25.0 / 3

    @property
    def mean_rank(self) -> float:
        return self.rank_total / self.matches if self.matches else 0.0

    @property
    def ordinal(self) -> float:
        return self.mu - 3 * self.sigma


def _order(row: Standing) -> tuple[str, float, float, str]:
    """Game, then conservative rating (ordinal) best first, then mean rank, then the entrant: entrants
    tied on both (a Nostra City match nobody won rates everyone alike) stand in one order, not
    in the order the results happen to be listed in."""
    return (row.game_id, -row.ordinal, row.mean_rank, row.entrant)


def standings(records: Iterable[MatchRecord]) -> list[Standing]:
    """Sorted by game, then conservative rating (ordinal), best first (`_order`).

    Ratings come from famiglia.ratings, the helper the projection's tournament
    tables use too: matches rated in canonical order (finish time, match id), an
    entrant holding several seats of one match rated once, at its best rank.
    """
    from famiglia.ratings import MatchOutcome, Placement, rate_in_order

    table: dict[tuple[str, str], Standing] = {}
    outcomes: dict[str, list[MatchOutcome]] = {}
    for record in records:
        seats: Sequence[SeatRecord] = sorted(record.seats, key=lambda s: s.seat)
        for s in seats:
            row = table.setdefault((record.game_id, s.entrant), Standing(record.game_id, s.entrant))
            row.matches += 1
            row.wins += int(s.rank == 1)
            row.rank_total += s.rank
        outcomes.setdefault(record.game_id, []).append(
            MatchOutcome(record.match_id, record.finished_ms, tuple(Placement(s.entrant, s.rank) for s in seats)))
    for game_id, game_outcomes in outcomes.items():
        for entrant, rating in rate_in_order(game_outcomes).items():
            row = table[(game_id, entrant)]
            row.mu, row.sigma = rating.mu, rating.sigma
    return sorted(table.values(), key=_order)


class RunningStandings:
    """`standings` of a tournament whose results keep coming: each call folds only the
    matches not seen before, on top of the table and ratings so far.

    A client polling a 1,000-match tournament twice a second would otherwise rate
    every finished match again at each poll (~30 ms at 1,000 matches). Ratings
    depend on the order matches are rated in (finish time, then match id): when a
    new match sorts before one already rated — a clock step, a result written
    late — the table is rated again from scratch, so the answer is always exactly
    `standings(records)`."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._table: dict[tuple[str, str], Standing] = {}
        self._ratings: dict[str, dict] = {}  # game id -> entrant -> famiglia.ratings.Rating
        self._last: dict[str, tuple[int, str]] = {}  # game id -> order key of the last match rated

    def __call__(self, records: Iterable[MatchRecord]) -> list[Standing]:
        from famiglia.ratings import MatchOutcome, Placement, apply_match

        records = list(records)
        new = [r for r in records if r.match_id not in self._seen]
        if len(records) != len(self._seen) + len(new) or any(
                (r.finished_ms, r.match_id) < self._last.get(r.game_id, (-1, "")) for r in new):
            self.__init__()  # type: ignore[misc]  # a record went away or sorts before one rated: start over
            new = records
        for record in sorted(new, key=lambda r: (r.finished_ms, r.match_id)):
            self._seen.add(record.match_id)
            seats: Sequence[SeatRecord] = sorted(record.seats, key=lambda s: s.seat)
            for s in seats:
                row = self._table.setdefault((record.game_id, s.entrant), Standing(record.game_id, s.entrant))
                row.matches += 1
                row.wins += int(s.rank == 1)
                row.rank_total += s.rank
            ratings = self._ratings.setdefault(record.game_id, {})
            changed = apply_match(ratings, MatchOutcome(record.match_id, record.finished_ms,
                                                        tuple(Placement(s.entrant, s.rank) for s in seats)))
            for entrant, rating in changed.items():
                row = self._table[(record.game_id, entrant)]
                row.mu, row.sigma = rating.mu, rating.sigma
            self._last[record.game_id] = (record.finished_ms, record.match_id)
        rows = [Standing(r.game_id, r.entrant, r.matches, r.wins, r.rank_total, r.mu, r.sigma)
                for r in self._table.values()]
        return sorted(rows, key=_order)
