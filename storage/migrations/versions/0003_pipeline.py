"""pipeline: conversations, conversation_traces, evaluations, tool_calls

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# Self-contained on purpose: migrations never import the models (they change over time).
JSON_ = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
JSON_OR_NULL = sa.JSON(none_as_null=True).with_variant(
    postgresql.JSONB(none_as_null=True), "postgresql"
)
INT64 = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "conversations",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("first_seen_at", TS, nullable=False),
        sa.Column("last_span_at", TS, nullable=False),
        sa.Column("last_span_received_ns", INT64, nullable=False),
        sa.Column("needs_scoring", sa.Boolean(), nullable=False),
        sa.Column("claimed_by", sa.Text(), nullable=True),
        sa.Column("claimed_until", TS, nullable=True),
        sa.Column("last_trace_id", sa.Text(), nullable=False),
        sa.Column("root_span_id", sa.Text(), nullable=True),
        sa.Column("reference_id", sa.Text(), nullable=True),
        sa.Column("first_user_message", sa.Text(), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("scored_at", TS, nullable=True),
        sa.Column("expectation_id", sa.Text(), nullable=True),
        sa.Column("expectation_version", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_conversations"),
    )
    op.create_index(
        "ix_conversations_needs_scoring_last_span_received_ns",
        "conversations",
        ["needs_scoring", "last_span_received_ns"],
    )
    op.create_index("ix_conversations_last_span_at", "conversations", ["last_span_at"])

    op.create_table(
        "conversation_traces",
        sa.Column("trace_id", sa.Text(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("trace_id", name="pk_conversation_traces"),
    )
    op.create_index(
        "ix_conversation_traces_conversation_id", "conversation_traces", ["conversation_id"]
    )

    op.create_table(
        "evaluations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("is_current", sa.Boolean(), nullable=False),
        sa.Column("trace_id", sa.Text(), nullable=False),
        sa.Column("root_span_id", sa.Text(), nullable=True),
        sa.Column("expectation_id", sa.Text(), nullable=False),
        sa.Column("expectation_version", sa.Integer(), nullable=False),
        sa.Column("metric", sa.Text(), nullable=False),
        sa.Column("metric_type", sa.Text(), nullable=False),
        sa.Column("metric_config", JSON_, nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("details", JSON_, nullable=False),
        sa.Column("predicted_count", sa.Integer(), nullable=False),
        sa.Column("expected_count", sa.Integer(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_evaluations"),
        sa.UniqueConstraint(
            "conversation_id",
            "metric",
            "revision",
            name="uq_evaluations_conversation_id_metric_revision",
        ),
    )
    op.create_index(
        "ix_evaluations_expectation_id_created_at", "evaluations", ["expectation_id", "created_at"]
    )
    op.create_index("ix_evaluations_is_current", "evaluations", ["is_current"])
    op.create_index("ix_evaluations_created_at", "evaluations", ["created_at"])

    op.create_table(
        "tool_calls",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("arguments", JSON_OR_NULL, nullable=True),
        sa.Column("arguments_raw", sa.Text(), nullable=True),
        sa.Column("arguments_ok", sa.Boolean(), nullable=False),
        sa.Column("call_id", sa.Text(), nullable=True),
        sa.Column("trace_id", sa.Text(), nullable=False),
        sa.Column("span_id", sa.Text(), nullable=True),
        sa.Column("convention", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_tool_calls"),
        sa.UniqueConstraint(
            "conversation_id",
            "revision",
            "position",
            name="uq_tool_calls_conversation_id_revision_position",
        ),
    )


def downgrade() -> None:
    op.drop_table("tool_calls")
    op.drop_index("ix_evaluations_created_at", table_name="evaluations")
    op.drop_index("ix_evaluations_is_current", table_name="evaluations")
    op.drop_index("ix_evaluations_expectation_id_created_at", table_name="evaluations")
    op.drop_table("evaluations")
    op.drop_index("ix_conversation_traces_conversation_id", table_name="conversation_traces")
    op.drop_table("conversation_traces")
    op.drop_index("ix_conversations_last_span_at", table_name="conversations")
    op.drop_index(
        "ix_conversations_needs_scoring_last_span_received_ns", table_name="conversations"
    )
    op.drop_table("conversations")
