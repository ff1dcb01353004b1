"""The projection's SQL read models and the small repository API other services import.

Reading order:
    tables       the SQLModel tables (own metadata; Alembic migrations in services/projection)
    db           engines: SQLite (WAL) by default, PostgreSQL by URL; session helpers
    archive      the event archive: `archived_envelopes(session, match_id)` for replay
    tournaments  `record_tournament(...)`, `tournament_standings(...)` for the bots' tournaments
    queries      matches, leaderboards, player histories (what the QueryService serves)

Only the projection service writes these tables, except `record_tournament`.
"""

from .archive import archived_envelopes, archived_version
from .db import make_engine, read_session, write_session
from .queries import (
    BadPageToken,
    HistoryEntry,
    LeaderboardEntry,
    MatchSummary,
    Page,
    PlayerHistory,
    PlayerInfo,
    SeatSummary,
    game_scope,
    has_game,
    leaderboard,
    list_matches,
    match_summary,
    player_history,
    player_info,
    player_ratings,
)
from .tables import metadata
from .tournaments import (
    Standing,
    TournamentInfo,
    get_tournament,
    record_tournament,
    tournament_scope,
    tournament_standings,
)

__all__ = [
    "BadPageToken",
    "HistoryEntry",
    "LeaderboardEntry",
    "MatchSummary",
    "Page",
    "PlayerHistory",
    "PlayerInfo",
    "SeatSummary",
    "Standing",
    "TournamentInfo",
    "archived_envelopes",
    "archived_version",
    "game_scope",
    "get_tournament",
    "has_game",
    "leaderboard",
    "list_matches",
    "make_engine",
    "match_summary",
    "metadata",
    "player_history",
    "player_info",
    "player_ratings",
    "read_session",
    "record_tournament",
    "tournament_scope",
    "tournament_standings",
    "write_session",
]
