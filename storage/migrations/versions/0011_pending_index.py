"""the pending-conversations index is partial: only rows with needs_scoring

Revision ID: 0011
Revises: 0010

``(needs_scoring, last_span_received_ns)`` serves the claims, which ask only for conversations
waiting to be scored. Over every row, SQLite's planner also took it for queries about *done*
conversations older than a time (span retention's ``find_prunable`` and ``mark``), walking every
scored conversation: with 700,000 of them 0.66 s per search and 1.9 s per mark, the latter under
the write lock (ingest waits). Partial, it holds only the pending rows: those queries use the
retention index (0.2 ms, 1.1 ms) and the claims are unchanged.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

NAME = "ix_conversations_needs_scoring_last_span_received_ns"
COLUMNS = ["needs_scoring", "last_span_received_ns"]


def upgrade() -> None:
    op.drop_index(NAME, table_name="conversations")
    op.create_index(
        NAME,
        "conversations",
        COLUMNS,
        sqlite_where=sa.text("needs_scoring = 1"),  # storage.conversations.tables.PENDING_SQLITE
        postgresql_where=sa.text("needs_scoring"),
    )


def downgrade() -> None:
    op.drop_index(NAME, table_name="conversations")
    op.create_index(NAME, "conversations", COLUMNS)
