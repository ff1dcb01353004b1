"""Indexes for the match listings and a rerate's window, so none sorts or walks every match.

Revision ID: 0008
Revises: 0007
Create Date: 2027-01-24 09:00:00

ListMatches pages newest first by (created_ms, match_id). Filtered by game alone, by
status alone or by tournament, no index gave that order under the filter: SQLite sorted
every match of the game (or of the tournament) for each page, or walked the created-time
index past every match of other statuses (the last page of the live matches read the whole
table). A match rated "in the past" of its game re-read every finished match of the game to
find the few after it. Each of these grew with the matches ever played; each is now a seek.
`ix_matches_tournament` and `ix_matches_game_status` gain the listing's whole order (the match
id breaks ties of created_ms), so a page filtered by game and status is read in order too,
rather than through the status index past every other game's matches.
"""

from __future__ import annotations

from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_matches_game_created', 'matches', ['game_id', 'created_ms', 'match_id'], unique=False)
    op.create_index('ix_matches_status_created', 'matches', ['status', 'created_ms', 'match_id'], unique=False)
    op.create_index('ix_matches_game_finished', 'matches', ['game_id', 'status', 'finished_ms', 'match_id'],
                    unique=False)
    op.drop_index('ix_matches_tournament', table_name='matches')
    op.create_index('ix_matches_tournament', 'matches', ['tournament_id', 'created_ms', 'match_id'], unique=False)
    op.drop_index('ix_matches_game_status', table_name='matches')
    op.create_index('ix_matches_game_status', 'matches', ['game_id', 'status', 'created_ms', 'match_id'],
                    unique=False)


def downgrade() -> None:
    op.drop_index('ix_matches_game_status', table_name='matches')
    op.create_index('ix_matches_game_status', 'matches', ['game_id', 'status', 'created_ms'], unique=False)
    op.drop_index('ix_matches_tournament', table_name='matches')
    op.create_index('ix_matches_tournament', 'matches', ['tournament_id'], unique=False)
    op.drop_index('ix_matches_game_finished', table_name='matches')
    op.drop_index('ix_matches_status_created', table_name='matches')
    op.drop_index('ix_matches_game_created', table_name='matches')
