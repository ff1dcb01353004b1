"""Who plays a seat: the seats whose players left them to the bots (`seat_left`).

Revision ID: 0010
Revises: 0009
Create Date: 2027-02-07 12:00:00

A seat's player may leave a match mid-way (GameService.LeaveMatch) or be taken off it by its
turn clock running out too often, and may take a seat left that way back (ReturnToMatch): the
events `seat_left` and `seat_returned`. The seats record it, `away` the reason ("left",
"timeouts"; "" while the player plays) and `away_since` the seq of the `seat_left`, for the
match summaries and player histories to show, and for the ratings: a seat away at the match's
end is rated last. The seats already projected had no such events: "" and NULL.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('match_seats') as batch:
        batch.add_column(sa.Column('away', sa.String(length=16), nullable=False, server_default=''))
        batch.add_column(sa.Column('away_since', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('match_seats') as batch:
        batch.drop_column('away_since')
        batch.drop_column('away')
