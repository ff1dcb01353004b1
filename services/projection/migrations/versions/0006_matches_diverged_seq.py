"""The seq from which a match's store and archive tell different histories.

Revision ID: 0006
Revises: 0005
Create Date: 2027-01-10 09:00:00

A store that lost acknowledged writes and was written on since holds other events
than the archive at the same seqs. The projection follows it for a live match; a
match that finished (was ranked and rated) on the lost events, or whose
`match_created` was replaced, is left for a rebuild, and this column records that
durably: retention keeps such a match's stream (the only copy of what the store
now says), `python -m services.projection diverged` lists them, and `rebuild` takes
their events from the store. Existing rows get NULL (nothing known to differ).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('matches') as batch:
        batch.add_column(sa.Column('diverged_seq', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN, never the table copied anew: on SQLite that drops `matches`,
    # which the seats' foreign keys refuse while any match has a seat (as 0011).
    with op.batch_alter_table('matches', recreate='never') as batch:
        batch.drop_column('diverged_seq')
