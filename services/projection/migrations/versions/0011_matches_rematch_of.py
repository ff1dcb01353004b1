"""A series: the finished match a rematch follows.

Revision ID: 0011
Revises: 0010
Create Date: 2027-02-14 12:00:00

A finished match's table may play again (GameService.AskRematch); the rematch's `match_created`
names the match it follows (`MatchCreated.rematch_of`, set by the server's rematch creation only).
The matches record it, `rematch_of`, for the match summaries to show both ways: the match a
rematch follows, and a match's rematch (the match whose `rematch_of` is its id, found through
`ix_matches_rematch_of`, which holds the rematches only). The matches already projected get NULL:
no event before this one named the match it follows, so there is nothing to fill in.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None

_REMATCHES = sa.text('rematch_of IS NOT NULL')


def upgrade() -> None:
    with op.batch_alter_table('matches') as batch:
        batch.add_column(sa.Column('rematch_of', sa.String(length=64), nullable=True))
    op.create_index('ix_matches_rematch_of', 'matches', ['rematch_of', 'created_ms', 'match_id'], unique=False,
                    sqlite_where=_REMATCHES, postgresql_where=_REMATCHES)


def downgrade() -> None:
    op.drop_index('ix_matches_rematch_of', table_name='matches')
    # ALTER TABLE ... DROP COLUMN (SQLite 3.35 on), never the table copied anew: on SQLite that
    # drops `matches`, which the seats' foreign keys refuse while any match has a seat.
    with op.batch_alter_table('matches', recreate='never') as batch:
        batch.drop_column('rematch_of')
