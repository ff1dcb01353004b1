"""The match a player's name, bot flag and policy were taken from.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-06 14:30:00

A player's row follows the newest match they joined. Two matches created in the
same millisecond reach the projection in any order, so the newer one is the
greater (created time, match id); `last_match_id` keeps the second half of that
key. Existing rows get "" (any later match in the same millisecond wins, as
before); `famiglia projection rebuild` fills it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('players') as batch:
        batch.add_column(sa.Column('last_match_id', sa.String(length=64), nullable=False, server_default=''))


def downgrade() -> None:
    with op.batch_alter_table('players') as batch:
        batch.drop_column('last_match_id')
