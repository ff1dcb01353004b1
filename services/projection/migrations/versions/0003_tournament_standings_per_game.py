"""Tournament standings and ratings per game of the tournament.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 17:00:00

The standings table gets `game_id` in its primary key. Standings and tournament
ratings are derived data: the table is recreated empty and the old
tournament-wide rating scopes are dropped; run `famiglia projection rebuild`
once to fill them again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def _standings(with_game: bool) -> None:
    columns: list[sa.Column] = [sa.Column('tournament_id', sa.String(length=128), nullable=False)]
    if with_game:
        columns.append(sa.Column('game_id', sa.String(length=64), nullable=False))
    columns += [
        sa.Column('player_id', sa.String(length=128), nullable=False),
        sa.Column('played', sa.Integer(), nullable=False),
        sa.Column('wins', sa.Integer(), nullable=False),
        sa.Column('points', sa.Float(), nullable=False),
        sa.Column('score_total', sa.Float(), nullable=False),
        sa.Column('rank_total', sa.Integer(), nullable=False),
    ]
    key = ['tournament_id', 'game_id', 'player_id'] if with_game else ['tournament_id', 'player_id']
    op.create_table('tournament_standings', *columns, sa.PrimaryKeyConstraint(*key))


def _drop_tournament_ratings() -> None:
    for table in ('rating_history', 'ratings', 'rating_scopes'):
        op.execute(sa.text(f"DELETE FROM {table} WHERE scope LIKE 'tournament:%'"))


def upgrade() -> None:
    op.drop_table('tournament_standings')
    _standings(with_game=True)
    _drop_tournament_ratings()


def downgrade() -> None:
    op.drop_table('tournament_standings')
    _standings(with_game=False)
    _drop_tournament_ratings()
