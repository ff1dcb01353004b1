"""A player's matches and the diverged matches read through an index, not found among every row.

Revision ID: 0009
Revises: 0008
Create Date: 2027-01-24 12:00:00

ListMatches by player and GetPlayerHistory page a player's matches newest first by
(created_ms, match_id). The seats knew the player but not the order: each page found every
match the player ever sat in (`ix_match_seats_player` was (player_id, match_id)) and sorted
them all, so a bot with 50,000 matches cost that much a page. The seats now carry their
match's created time, filled here from `matches` (the projection writes it with the seats
from now on), and the index is (player_id, created_ms, match_id): a page is a seek.

The diverged matches (`diverged_seq IS NOT NULL`, a handful at most) were found by reading
every match; a partial index holds only them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None

_DIVERGED = sa.text('diverged_seq IS NOT NULL')


def upgrade() -> None:
    with op.batch_alter_table('match_seats') as batch:
        batch.add_column(sa.Column('created_ms', sa.BigInteger(), nullable=False, server_default='0'))
    op.execute('UPDATE match_seats SET created_ms = '
               '(SELECT matches.created_ms FROM matches WHERE matches.match_id = match_seats.match_id)')
    op.drop_index('ix_match_seats_player', table_name='match_seats')
    op.create_index('ix_match_seats_player', 'match_seats', ['player_id', 'created_ms', 'match_id'], unique=False)
    op.create_index('ix_matches_diverged', 'matches', ['match_id'], unique=False,
                    sqlite_where=_DIVERGED, postgresql_where=_DIVERGED)


def downgrade() -> None:
    op.drop_index('ix_matches_diverged', table_name='matches')
    op.drop_index('ix_match_seats_player', table_name='match_seats')
    op.create_index('ix_match_seats_player', 'match_seats', ['player_id', 'match_id'], unique=False)
    with op.batch_alter_table('match_seats') as batch:
        batch.drop_column('created_ms')
