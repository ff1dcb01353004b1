"""The newest partition stream entry the projection moved a match on from.

Revision ID: 0007
Revises: 0006
Create Date: 2027-01-17 09:00:00

A consumer may hold entries it read just before Redis restarted without them (lost
acknowledged writes) while another consumer projects the store's new history of the
match; the stale entry's seq can then be the match's next one. Partition stream ids grow
with every write, so an entry of the match whose id is not past the one the match was
last moved on from was read before it: the projector checks such an entry against the
store before applying it. Existing rows get NULL (nothing known: no check until the
match's next entry is projected).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('matches') as batch:
        batch.add_column(sa.Column('last_entry_id', sa.String(length=64), nullable=True))


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN, never the table copied anew: on SQLite that drops `matches`,
    # which the seats' foreign keys refuse while any match has a seat (as 0011).
    with op.batch_alter_table('matches', recreate='never') as batch:
        batch.drop_column('last_entry_id')
