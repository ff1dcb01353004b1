"""An index of matches by finish time, for the retention sweep.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 07:00:00

The sweep that trims archived finished matches from Redis walks them in
(finished_ms, match_id) order from a watermark; without the index each sweep
would scan the whole table.
"""

from __future__ import annotations

from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_matches_finished', 'matches', ['finished_ms', 'match_id'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_matches_finished', table_name='matches')
