"""annotation_deliveries: the annotation targets' outbox, one row per evaluation and target

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "annotation_deliveries",
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("evaluation_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("enqueued_at", TS, nullable=False),
        sa.Column("next_attempt_at", TS, nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("done_at", TS, nullable=True),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("target", "evaluation_id", name="pk_annotation_deliveries"),
    )
    op.create_index(
        "ix_annotation_deliveries_target_done_at_next_attempt_at",
        "annotation_deliveries",
        ["target", "done_at", "next_attempt_at"],
    )


def downgrade() -> None:
    op.drop_index(
        "ix_annotation_deliveries_target_done_at_next_attempt_at",
        table_name="annotation_deliveries",
    )
    op.drop_table("annotation_deliveries")
