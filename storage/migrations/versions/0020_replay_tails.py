"""replay_tails: the states keyless conversations were left in, to join the traces replaying them

Revision ID: 0020
Revises: 0019

A stateless client (one trace per model call, no session) sends the whole history with every
model call; a trace whose model input replays the state an earlier conversation was left in
joins it (storage/conversations/replays.py). Rows older than the replay window are deleted as
new ones come.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "replay_tails",
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column(
            "at_ns",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("fingerprint", "conversation_id"),
    )
    op.create_index("ix_replay_tails_at_ns", "replay_tails", ["at_ns"])


def downgrade() -> None:
    op.drop_index("ix_replay_tails_at_ns", table_name="replay_tails")
    op.drop_table("replay_tails")
