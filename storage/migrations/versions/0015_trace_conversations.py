"""traces.conversation_id replaces table conversation_traces

Revision ID: 0015
Revises: 0014

A trace's conversation is stored on its row in ``traces`` (storage/telemetry/traces.py) instead of
in a
table of its own keyed by the random trace id: ingest makes one row per new trace instead of
two, and the hook's lookup finds the row store_telemetry has just touched
(docs/scaling.md#as-the-data-grows). Traces with a conversation but no number (log records
only, or spans pruned and numbers deleted before 0015) are numbered here. Each step is logged
with its row count.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from toolscore.storage.migrations.steps import run_step

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("traces", sa.Column("conversation_id", sa.Text(), nullable=True))
    run_step(
        "0015",
        "giving the numbered traces their conversations",
        "UPDATE traces SET conversation_id = ct.conversation_id FROM conversation_traces ct "
        "WHERE ct.trace_id = traces.trace_id",
    )
    run_step(
        "0015",
        "numbering the traces that have a conversation but no number",
        "INSERT INTO traces (trace_id, conversation_id) "
        "SELECT ct.trace_id, ct.conversation_id FROM conversation_traces ct "
        "WHERE NOT EXISTS (SELECT 1 FROM traces t WHERE t.trace_id = ct.trace_id) "
        "ORDER BY ct.trace_id",
    )
    run_step(
        "0015",
        "indexing the traces by conversation",
        "CREATE INDEX ix_traces_conversation_id ON traces (conversation_id)",
    )
    op.drop_table("conversation_traces")


def downgrade() -> None:
    op.create_table(
        "conversation_traces",
        sa.Column("trace_id", sa.Text(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("trace_id", name="pk_conversation_traces"),
    )
    op.execute(
        "INSERT INTO conversation_traces (trace_id, conversation_id) "
        "SELECT trace_id, conversation_id FROM traces WHERE conversation_id IS NOT NULL"
    )
    op.create_index(
        "ix_conversation_traces_conversation_id", "conversation_traces", ["conversation_id"]
    )
    op.drop_index("ix_traces_conversation_id", table_name="traces")
    with op.batch_alter_table("traces") as batch:
        batch.drop_column("conversation_id")
