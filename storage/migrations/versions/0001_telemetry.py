"""telemetry: spans and log_records

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Frozen copies of the portable types in storage/base.py (revisions never import the models).
JSON_T = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
INT64 = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "spans",
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("span_id", sa.String(16), nullable=False),
        sa.Column("parent_span_id", sa.String(16), nullable=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("kind", sa.Integer(), nullable=False),
        sa.Column("start_ns", INT64, nullable=False),
        sa.Column("end_ns", INT64, nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("status_message", sa.Text(), nullable=False),
        sa.Column("attributes", JSON_T, nullable=False),
        sa.Column("resource_attributes", JSON_T, nullable=False),
        sa.Column("scope_name", sa.Text(), nullable=False),
        sa.Column("scope_version", sa.Text(), nullable=False),
        sa.Column("events", JSON_T, nullable=False),
        sa.Column("links", JSON_T, nullable=False),
        sa.Column("received_at_ns", INT64, nullable=False),
        sa.PrimaryKeyConstraint("trace_id", "span_id", name="pk_spans"),
    )
    op.create_table(
        "log_records",
        sa.Column("id", INT64, nullable=False, autoincrement=True),
        sa.Column("record_hash", sa.String(64), nullable=False),
        sa.Column("trace_id", sa.String(32), nullable=True),
        sa.Column("span_id", sa.String(16), nullable=True),
        sa.Column("time_ns", INT64, nullable=False),
        sa.Column("observed_time_ns", INT64, nullable=False),
        sa.Column("severity_number", sa.Integer(), nullable=False),
        sa.Column("severity_text", sa.Text(), nullable=False),
        sa.Column("event_name", sa.Text(), nullable=False),
        sa.Column("body", JSON_T, nullable=True),
        sa.Column("attributes", JSON_T, nullable=False),
        sa.Column("resource_attributes", JSON_T, nullable=False),
        sa.Column("scope_name", sa.Text(), nullable=False),
        sa.Column("scope_version", sa.Text(), nullable=False),
        sa.Column("received_at_ns", INT64, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_log_records"),
        sa.UniqueConstraint("record_hash", name="uq_log_records_record_hash"),
    )
    op.create_index("ix_log_records_trace_id", "log_records", ["trace_id"])


def downgrade() -> None:
    op.drop_index("ix_log_records_trace_id", table_name="log_records")
    op.drop_table("log_records")
    op.drop_table("spans")
