"""Initial read models: players, matches, seats, ratings, tournaments, event archive, checkpoints.

Revision ID: 0001
Revises:
Create Date: 2026-11-29 16:15:22.939566
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('event_archive',
    sa.Column('match_id', sa.String(length=64), nullable=False),
    sa.Column('seq', sa.BigInteger(), autoincrement=False, nullable=False),
    sa.Column('event_id', sa.String(length=40), nullable=False),
    sa.Column('game_id', sa.String(length=64), nullable=False),
    sa.Column('type', sa.String(length=128), nullable=False),
    sa.Column('payload_type', sa.String(length=200), nullable=False),
    sa.Column('visibility', sa.Integer(), nullable=False),
    sa.Column('visible_seats', sa.JSON(), nullable=False),
    sa.Column('seat', sa.Integer(), nullable=False),
    sa.Column('command_id', sa.String(length=128), nullable=False),
    sa.Column('timestamp_ms', sa.BigInteger(), nullable=False),
    sa.Column('payload', sa.LargeBinary(), nullable=False),
    sa.Column('envelope', sa.LargeBinary(), nullable=False),
    sa.PrimaryKeyConstraint('match_id', 'seq')
    )
    op.create_index('ix_event_archive_event_id', 'event_archive', ['event_id'], unique=True)
    op.create_table('matches',
    sa.Column('match_id', sa.String(length=64), nullable=False),
    sa.Column('game_id', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('seats', sa.Integer(), nullable=False),
    sa.Column('created_ms', sa.BigInteger(), nullable=False),
    sa.Column('finished_ms', sa.BigInteger(), nullable=True),
    sa.Column('last_event_ms', sa.BigInteger(), nullable=False),
    sa.Column('version', sa.BigInteger(), nullable=False),
    sa.Column('seed', sa.BigInteger(), nullable=False),
    sa.Column('options', sa.JSON(), nullable=False),
    sa.Column('tournament_id', sa.String(length=128), nullable=False),
    sa.Column('outcome', sa.JSON(), nullable=False),
    sa.Column('fold_error', sa.String(length=2000), nullable=False),
    sa.PrimaryKeyConstraint('match_id')
    )
    op.create_index('ix_matches_created', 'matches', ['created_ms', 'match_id'], unique=False)
    op.create_index('ix_matches_game_status', 'matches', ['game_id', 'status', 'created_ms'], unique=False)
    op.create_index('ix_matches_tournament', 'matches', ['tournament_id'], unique=False)
    op.create_table('players',
    sa.Column('player_id', sa.String(length=128), nullable=False),
    sa.Column('display_name', sa.String(length=200), nullable=False),
    sa.Column('bot', sa.Boolean(), nullable=False),
    sa.Column('policy', sa.String(length=64), nullable=False),
    sa.Column('first_seen_ms', sa.BigInteger(), nullable=False),
    sa.Column('last_seen_ms', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('player_id')
    )
    op.create_table('projection_checkpoints',
    sa.Column('partition', sa.Integer(), nullable=False),
    sa.Column('last_entry_id', sa.String(length=40), nullable=False),
    sa.Column('last_event_ms', sa.BigInteger(), nullable=False),
    sa.Column('events', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('partition')
    )
    op.create_table('rating_scopes',
    sa.Column('scope', sa.String(length=200), nullable=False),
    sa.Column('last_finished_ms', sa.BigInteger(), nullable=False),
    sa.Column('last_match_id', sa.String(length=64), nullable=False),
    sa.Column('matches', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('scope')
    )
    op.create_table('ratings',
    sa.Column('scope', sa.String(length=200), nullable=False),
    sa.Column('player_id', sa.String(length=128), nullable=False),
    sa.Column('mu', sa.Float(), nullable=False),
    sa.Column('sigma', sa.Float(), nullable=False),
    sa.Column('ordinal', sa.Float(), nullable=False),
    sa.Column('matches', sa.Integer(), nullable=False),
    sa.Column('wins', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('scope', 'player_id')
    )
    op.create_index('ix_ratings_scope_ordinal', 'ratings', ['scope', 'ordinal'], unique=False)
    op.create_table('tournament_standings',
    sa.Column('tournament_id', sa.String(length=128), nullable=False),
    sa.Column('player_id', sa.String(length=128), nullable=False),
    sa.Column('played', sa.Integer(), nullable=False),
    sa.Column('wins', sa.Integer(), nullable=False),
    sa.Column('points', sa.Float(), nullable=False),
    sa.Column('score_total', sa.Float(), nullable=False),
    sa.Column('rank_total', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('tournament_id', 'player_id')
    )
    op.create_table('tournaments',
    sa.Column('tournament_id', sa.String(length=128), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('games', sa.JSON(), nullable=False),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('created_ms', sa.BigInteger(), nullable=False),
    sa.Column('finished_ms', sa.BigInteger(), nullable=True),
    sa.Column('matches_finished', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('tournament_id')
    )
    op.create_table('match_seats',
    sa.Column('match_id', sa.String(length=64), nullable=False),
    sa.Column('seat', sa.Integer(), nullable=False),
    sa.Column('player_id', sa.String(length=128), nullable=False),
    sa.Column('display_name', sa.String(length=200), nullable=False),
    sa.Column('bot', sa.Boolean(), nullable=False),
    sa.Column('policy', sa.String(length=64), nullable=False),
    sa.Column('score', sa.Float(), nullable=True),
    sa.Column('rank', sa.Integer(), nullable=True),
    sa.Column('winner', sa.Boolean(), nullable=False),
    sa.Column('details', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['match_id'], ['matches.match_id'], ),
    sa.PrimaryKeyConstraint('match_id', 'seat')
    )
    op.create_index('ix_match_seats_player', 'match_seats', ['player_id', 'match_id'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_match_seats_player', table_name='match_seats')
    op.drop_table('match_seats')
    op.drop_table('tournaments')
    op.drop_table('tournament_standings')
    op.drop_index('ix_ratings_scope_ordinal', table_name='ratings')
    op.drop_table('ratings')
    op.drop_table('rating_scopes')
    op.drop_table('projection_checkpoints')
    op.drop_table('players')
    op.drop_index('ix_matches_tournament', table_name='matches')
    op.drop_index('ix_matches_game_status', table_name='matches')
    op.drop_index('ix_matches_created', table_name='matches')
    op.drop_table('matches')
    op.drop_index('ix_event_archive_event_id', table_name='event_archive')
    op.drop_table('event_archive')
