"""Rating history: each rated player's rating before and after each match, per scope.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 16:40:00

Lets a match that finishes "in the past" re-rate only the matches after it.
Existing databases get the table empty: run `famiglia projection rebuild` once to
fill it (until then a late match re-rates from default ratings of the players
in the window).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('rating_history',
    sa.Column('scope', sa.String(length=200), nullable=False),
    sa.Column('match_id', sa.String(length=64), nullable=False),
    sa.Column('player_id', sa.String(length=128), nullable=False),
    sa.Column('order_ms', sa.BigInteger(), nullable=False),
    sa.Column('rank', sa.Integer(), nullable=False),
    sa.Column('mu_before', sa.Float(), nullable=False),
    sa.Column('sigma_before', sa.Float(), nullable=False),
    sa.Column('mu_after', sa.Float(), nullable=False),
    sa.Column('sigma_after', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('scope', 'match_id', 'player_id')
    )
    op.create_index('ix_rating_history_player', 'rating_history', ['scope', 'player_id', 'order_ms', 'match_id'],
                    unique=False)
    op.create_index('ix_rating_history_order', 'rating_history', ['scope', 'order_ms', 'match_id'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_rating_history_order', table_name='rating_history')
    op.drop_index('ix_rating_history_player', table_name='rating_history')
    op.drop_table('rating_history')
