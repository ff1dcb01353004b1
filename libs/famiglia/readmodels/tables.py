"""The projection's SQL read models (SQLModel), on their own metadata.

Times are integer milliseconds since the epoch (UTC), exactly as the events
carry them, so SQLite and PostgreSQL store the same values and a rebuild
compares equal to an incremental build. Everything here is derived from the
event streams except `Tournament.name/status/config`, which the bots'
tournament runner records (`tournaments.record_tournament`).

The schema is created by Alembic (services/projection/migrations); a change here
needs a new revision there.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Index, LargeBinary, text
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel

#: Separate from SQLModel's global metadata, so other services' tables never collide with ours.
mapper_registry = registry()


class ReadModel(SQLModel, registry=mapper_registry):
    """Base of every projection table."""


metadata = mapper_registry.metadata


def _ms(**kw: Any) -> Any:
    return Field(sa_column=Column(BigInteger, **kw))


class Player(ReadModel, table=True):
    """A person or bot seen in a seat. Name/bot/policy follow the newest match they joined: the
    latest created, the greater match id among matches created in the same millisecond
    (`last_match_id`), so the row does not depend on the order matches are projected in."""

    __tablename__ = "players"

    player_id: str = Field(primary_key=True, max_length=128)
    display_name: str = Field(default="", max_length=200)
    bot: bool = False
    policy: str = Field(default="", max_length=64)
    first_seen_ms: int = _ms(nullable=False)
    last_seen_ms: int = _ms(nullable=False)
    last_match_id: str = Field(default="", max_length=64, sa_column_kwargs={"server_default": ""})


class Match(ReadModel, table=True):
    """One match; `version` is the last event projected, the exactly-once fence per match."""

    __tablename__ = "matches"
    __table_args__ = (
        Index("ix_matches_created", "created_ms", "match_id"),
        # ListMatches by game and status, by game, by status, by tournament, each newest first (migration 0008)
        Index("ix_matches_game_status", "game_id", "status", "created_ms", "match_id"),
        Index("ix_matches_game_created", "game_id", "created_ms", "match_id"),
        Index("ix_matches_status_created", "status", "created_ms", "match_id"),
        Index("ix_matches_tournament", "tournament_id", "created_ms", "match_id"),
        Index("ix_matches_finished", "finished_ms", "match_id"),  # the retention sweep's order
        Index("ix_matches_game_finished", "game_id", "status", "finished_ms", "match_id"),  # a game's rerate window
        # The few diverged matches (`divergence.flagged`, `... diverged`), not a walk of every match (0009)
        Index("ix_matches_diverged", "match_id", sqlite_where=text("diverged_seq IS NOT NULL"),
              postgresql_where=text("diverged_seq IS NOT NULL")),
        # A match's rematch (`rematch_of` = its id), among the few matches that are one (0011)
        Index("ix_matches_rematch_of", "rematch_of", "created_ms", "match_id",
              sqlite_where=text("rematch_of IS NOT NULL"), postgresql_where=text("rematch_of IS NOT NULL")),
    )

    match_id: str = Field(primary_key=True, max_length=64)
    game_id: str = Field(max_length=64)
    status: str = Field(default="live", max_length=16)  # live | finished | cancelled (GameService.CancelMatch)
    seats: int
    created_ms: int = _ms(nullable=False)
    finished_ms: int | None = _ms(nullable=True)
    last_event_ms: int = _ms(nullable=False)
    version: int = Field(sa_column=Column(BigInteger, nullable=False))
    seed: int = Field(sa_column=Column(BigInteger, nullable=False))  # stored as signed 64-bit
    options: dict[str, str] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    tournament_id: str = Field(default="", max_length=128)
    outcome: dict[str, str] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    fold_error: str = Field(default="", max_length=2000)
    """Why results could not be computed (unknown game, engine error); events are archived regardless."""
    diverged_seq: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    """The first seq at which the event store holds other events than the archive (it lost
    acknowledged writes and was written on since) when the projection could not follow it (the
    match had finished on the lost events, or its `match_created` was replaced): nothing more is
    projected onto the match, retention keeps its stream, and `rebuild` takes its events from
    the store. None: the two agree."""
    last_entry_id: str | None = Field(default=None, max_length=64)
    """The newest partition stream entry the projection moved the match on from (the entry of the
    event at `version`, or of one before it in the same history); None when unknown (projected
    from the archive by a rebuild, or before migration 0007). An entry of the match whose id is not
    past it was read before it: a batch read before the store went back, which another consumer
    overtook with the store's new history (`Projector._read_before`). Where the projection read,
    not a read model: a rebuild sets it only for the entries it projects from the streams."""
    rematch_of: str | None = Field(default=None, max_length=64)
    """The finished match this one is the rematch of (its `MatchCreated.rematch_of`, AskRematch);
    None for any other match, and for a rematch made before the link (migration 0011)."""


class MatchSeat(ReadModel, table=True):
    """A seat of a match: who sat there and, once finished, how they did."""

    __tablename__ = "match_seats"
    # A player's matches newest first (ListMatches by player, GetPlayerHistory), a seek (migration 0009)
    __table_args__ = (Index("ix_match_seats_player", "player_id", "created_ms", "match_id"),)

    match_id: str = Field(primary_key=True, max_length=64, foreign_key="matches.match_id")
    seat: int = Field(primary_key=True)
    player_id: str = Field(default="", max_length=128)
    display_name: str = Field(default="", max_length=200)
    bot: bool = False
    policy: str = Field(default="", max_length=64)
    created_ms: int = _ms(nullable=False, server_default="0")
    """The match's (`Match.created_ms`): the order a player's matches are paged in, kept here so
    that a page of one player's matches is read in order rather than sorted from all of them."""
    score: float | None = None
    rank: int | None = None
    winner: bool = False
    details: dict[str, str] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    """Game-specific outcome of the seat (a verdict, a role...)."""
    away: str = Field(default="", max_length=16, sa_column_kwargs={"server_default": ""})
    """Why the seat's player left it, while the bots play it (its `seat_left`: "left" for good,
    "timeouts" when its clock ran out too often); "" while its player plays (or took it back:
    `seat_returned`). A seat away at the match's end is rated last (migration 0010)."""
    away_since: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    """The seq of that `seat_left` (None while its player plays)."""


class RatingScope(ReadModel, table=True):
    """One rating pool ("game:<id>" or "tournament:<id>") and the last match it rated.

    Matches are rated in canonical order (finish time, match id); a match
    finishing "in the past" of the watermark makes the scope recompute. The row
    is also the lock that serialises rating updates of its pool.
    """

    __tablename__ = "rating_scopes"

    scope: str = Field(primary_key=True, max_length=200)
    last_finished_ms: int = _ms(nullable=False, default=0)
    last_match_id: str = Field(default="", max_length=64)
    matches: int = 0


class PlayerRating(ReadModel, table=True):
    """A player's OpenSkill (Plackett-Luce) rating in one scope."""

    __tablename__ = "ratings"
    __table_args__ = (Index("ix_ratings_scope_ordinal", "scope", "ordinal"),)

    scope: str = Field(primary_key=True, max_length=200)
    player_id: str = Field(primary_key=True, max_length=128)
    mu: float
    sigma: float
    ordinal: float
    matches: int = 0
    wins: int = 0


class RatingHistory(ReadModel, table=True):
    """A player's rating before and after one rated match of a scope, in canonical order.

    What lets a match that finishes "in the past" re-rate only the matches after
    it: the ratings just before it are read from here.
    """

    __tablename__ = "rating_history"
    __table_args__ = (Index("ix_rating_history_player", "scope", "player_id", "order_ms", "match_id"),
                      Index("ix_rating_history_order", "scope", "order_ms", "match_id"))

    scope: str = Field(primary_key=True, max_length=200)
    match_id: str = Field(primary_key=True, max_length=64)
    player_id: str = Field(primary_key=True, max_length=128)
    order_ms: int = _ms(nullable=False)
    """The match's finish time: with match_id, the canonical rating order."""
    rank: int
    mu_before: float
    sigma_before: float
    mu_after: float
    sigma_after: float


class Tournament(ReadModel, table=True):
    __tablename__ = "tournaments"

    tournament_id: str = Field(primary_key=True, max_length=128)
    name: str = Field(default="", max_length=200)
    status: str = Field(default="running", max_length=16)  # running | finished | cancelled
    games: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    config: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_ms: int = _ms(nullable=False)
    finished_ms: int | None = _ms(nullable=True)
    matches_finished: int = 0


class TournamentStanding(ReadModel, table=True):
    """A tournament entrant's totals in one of its games; all sums, so the order of matches does not matter.

    Per game, like the tournament's ratings (scope "tournament:<id>:<game>"): skill
    at one game says little about another.
    """

    __tablename__ = "tournament_standings"

    tournament_id: str = Field(primary_key=True, max_length=128)
    game_id: str = Field(primary_key=True, max_length=64)
    player_id: str = Field(primary_key=True, max_length=128)
    played: int = 0
    wins: int = 0
    points: float = 0.0
    """Placement points: 1 for first, 0 for last, linear between (ties share)."""
    score_total: float = 0.0
    rank_total: int = 0


class ArchivedEvent(ReadModel, table=True):
    """Every event, complete enough to rebuild a match once its Redis stream is trimmed."""

    __tablename__ = "event_archive"
    __table_args__ = (Index("ix_event_archive_event_id", "event_id", unique=True),)

    match_id: str = Field(primary_key=True, max_length=64)
    seq: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    event_id: str = Field(max_length=40)
    game_id: str = Field(default="", max_length=64)
    type: str = Field(max_length=128)
    payload_type: str = Field(default="", max_length=200)
    visibility: int = 0
    visible_seats: list[int] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    seat: int = -1
    command_id: str = Field(default="", max_length=128)
    timestamp_ms: int = _ms(nullable=False)
    payload: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    envelope: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    """The whole serialized EventEnvelope (trace, command bytes and all)."""


class Checkpoint(ReadModel, table=True):
    """The newest partition entry committed, per partition (lag and progress)."""

    __tablename__ = "projection_checkpoints"

    partition: int = Field(primary_key=True)
    last_entry_id: str = Field(default="0-0", max_length=40)
    last_event_ms: int = _ms(nullable=False, default=0)
    events: int = Field(sa_column=Column(BigInteger, nullable=False, default=0))


#: Tables in dependency order (children after parents), for wiping and dumping.
TABLES: tuple[type[ReadModel], ...] = (
    Player, Match, MatchSeat, RatingScope, PlayerRating, RatingHistory, Tournament, TournamentStanding, ArchivedEvent,
    Checkpoint,
)
