"""expectations: versioned reference expectations and their conversation-id match side table

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# Self-contained on purpose (no model imports). Plain JSON, not JSONB: JSONB reorders object keys,
# and Ragas parity compares nested argument values by repr, where key order matters.
EXACT_JSON = sa.JSON(none_as_null=True)


def upgrade() -> None:
    op.create_table(
        "expectations",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("is_latest", sa.Boolean(), nullable=False),
        sa.Column("reference_tool_calls", EXACT_JSON, nullable=False),
        sa.Column("user_input", EXACT_JSON, nullable=True),
        sa.Column("metrics", EXACT_JSON, nullable=True),
        sa.Column("match", EXACT_JSON, nullable=True),
        sa.Column("match_user_input_norm", sa.Text(), nullable=True),
        sa.Column("content_hash", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", "version", name="pk_expectations"),
    )
    op.create_index(
        "ix_expectations_match_user_input_norm", "expectations", ["match_user_input_norm"]
    )
    # At most one latest version per id.
    op.create_index(
        "uq_expectations_latest_id",
        "expectations",
        ["id"],
        unique=True,
        sqlite_where=sa.text("is_latest"),
        postgresql_where=sa.text("is_latest"),
    )
    op.create_table(
        "expectation_match_ids",
        sa.Column("expectation_id", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint(
            "expectation_id", "version", "conversation_id", name="pk_expectation_match_ids"
        ),
        sa.ForeignKeyConstraint(
            ["expectation_id", "version"],
            ["expectations.id", "expectations.version"],
            name="fk_expectation_match_ids_expectation_id_expectations",
            ondelete="CASCADE",
        ),
    )
    op.create_index(
        "ix_expectation_match_ids_conversation_id", "expectation_match_ids", ["conversation_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_expectation_match_ids_conversation_id", table_name="expectation_match_ids")
    op.drop_table("expectation_match_ids")
    op.drop_index("uq_expectations_latest_id", table_name="expectations")
    op.drop_index("ix_expectations_match_user_input_norm", table_name="expectations")
    op.drop_table("expectations")
