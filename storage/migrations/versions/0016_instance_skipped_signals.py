"""toolscore_instance (a random id per database), evaluation_exports.skipped_signals

Revision ID: 0016
Revises: 0015

The instance id makes the write-back's span ids and annotation ids unique across databases
(two databases number their evaluations alike); it is drawn once here and never changes.
``skipped_signals`` names the OTLP signals a row was not sent on because the target does not
implement them (a Phoenix has no logs receiver).
"""

from __future__ import annotations

import datetime as dt
import secrets

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "toolscore_instance",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("instance_id", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_toolscore_instance"),
    )
    op.bulk_insert(
        table,
        [{"id": 1, "instance_id": secrets.token_hex(16), "created_at": dt.datetime.now(dt.UTC)}],
    )
    op.add_column("evaluation_exports", sa.Column("skipped_signals", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("evaluation_exports", "skipped_signals")
    op.drop_table("toolscore_instance")
