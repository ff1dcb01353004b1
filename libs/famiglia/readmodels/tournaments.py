"""Tournaments: what the bots' tournament runner records, and the standings the projection derives.

The runner calls `record_tournament` when it starts and when it ends a tournament
(name, games, configuration, status). The projection fills the standings from
every finished match whose MatchCreated names the tournament, plus a
tournament-scoped OpenSkill rating (scope "tournament:<id>"). A rebuild keeps
what the runner recorded.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import literal
from sqlmodel import Session, col, select

from famiglia.ratings import DEFAULT_RATING

from .db import dialect_insert
from .tables import Player, PlayerRating, Tournament, TournamentStanding


def tournament_scope(tournament_id: str, game_id: str) -> str:
    """The rating scope of one game of a tournament (game ids never contain ':')."""
    return f"tournament:{tournament_id}:{game_id}"


@dataclass(frozen=True, slots=True)
class TournamentInfo:
    tournament_id: str
    name: str
    status: str
    games: tuple[str, ...]
    config: Mapping[str, Any]
    created_ms: int
    finished_ms: int | None
    matches_finished: int


@dataclass(frozen=True, slots=True)
class Standing:
    """One entrant in one game of a tournament; ranked within the game by tournament rating
    ordinal, then points, then wins."""

    game_id: str
    rank: int
    player_id: str
    display_name: str
    bot: bool
    policy: str
    played: int
    wins: int
    points: float
    score_total: float
    average_rank: float
    mu: float
    sigma: float

    @property
    def ordinal(self) -> float:
        return self.mu - 3.0 * self.sigma


def record_tournament(
    session: Session,
    tournament_id: str,
    *,
    name: str | None = None,
    games: Sequence[str] | None = None,
    config: Mapping[str, Any] | None = None,
    status: str | None = None,
    now_ms: int | None = None,
) -> TournamentInfo:
    """Create or update a tournament (fields left None keep their value). The caller commits.

    `status="finished"` or `"cancelled"` stamps the finish time once; an ended tournament is not
    made `running` again (a runner's late record).
    """
    if not tournament_id:
        raise ValueError("tournament_id is required")
    if status is not None and status not in ("running", "finished", "cancelled"):
        raise ValueError(f"status must be running, finished or cancelled, not {status!r}")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    _insert_if_absent(session, tournament_id, now)
    row = session.get(Tournament, tournament_id, with_for_update=True, populate_existing=True)
    assert row is not None
    if name is not None:
        row.name = name
    if games is not None:
        row.games = sorted(set(row.games) | set(games))
    if config is not None:
        row.config = dict(config)
    if status is not None and not (status == "running" and row.status != "running"):
        row.status = status
        if status != "running" and row.finished_ms is None:
            row.finished_ms = now
    session.flush()
    return tournament_info(row)


def _insert_if_absent(session: Session, tournament_id: str, now_ms: int) -> None:
    """INSERT ... ON CONFLICT DO NOTHING: the projection may create the row at the same moment."""
    values: dict[str, Any] = {"tournament_id": tournament_id, "name": "", "status": "running", "games": [],
                              "config": {}, "created_ms": now_ms, "finished_ms": None, "matches_finished": 0}
    insert = dialect_insert(session.get_bind().dialect.name)
    session.execute(insert(Tournament).values(**values).on_conflict_do_nothing())


def get_tournament(session: Session, tournament_id: str) -> TournamentInfo | None:
    row = session.get(Tournament, tournament_id)
    return None if row is None else tournament_info(row)


def tournament_info(row: Tournament) -> TournamentInfo:
    return TournamentInfo(row.tournament_id, row.name, row.status, tuple(row.games), dict(row.config),
                          row.created_ms, row.finished_ms, row.matches_finished)


def tournament_standings(session: Session, tournament_id: str, game_id: str = "") -> list[Standing]:
    """Entrants per game (games in name order), best first within each game."""
    query = (
        select(TournamentStanding, PlayerRating, Player)
        .join(PlayerRating, (PlayerRating.player_id == TournamentStanding.player_id)  # type: ignore[arg-type]
              & (PlayerRating.scope == literal("tournament:") + col(TournamentStanding.tournament_id) + ":"
                 + col(TournamentStanding.game_id)), isouter=True)
        .join(Player, Player.player_id == TournamentStanding.player_id, isouter=True)  # type: ignore[arg-type]
        .where(TournamentStanding.tournament_id == tournament_id)
    )
    if game_id:
        query = query.where(TournamentStanding.game_id == game_id)
    unranked = []
    for standing, rating, player in session.exec(query).all():
        mu = rating.mu if rating is not None else DEFAULT_RATING.mu
        sigma = rating.sigma if rating is not None else DEFAULT_RATING.sigma
        unranked.append((standing, player, mu, sigma))
    unranked.sort(key=lambda r: (r[0].game_id, -(r[2] - 3 * r[3]), -r[0].points, -r[0].wins, r[0].player_id))
    out: list[Standing] = []
    for standing, player, mu, sigma in unranked:
        rank = 1 if not out or out[-1].game_id != standing.game_id else out[-1].rank + 1
        out.append(Standing(
            game_id=standing.game_id, rank=rank, player_id=standing.player_id,
            display_name=player.display_name if player else "", bot=bool(player and player.bot),
            policy=player.policy if player else "", played=standing.played, wins=standing.wins,
            points=standing.points, score_total=standing.score_total,
            average_rank=standing.rank_total / standing.played if standing.played else 0.0,
            mu=mu, sigma=sigma,
        ))
    return out
