"""span retention: what was pruned of each conversation

Revision ID: 0006
Revises: 0005

``conversations`` gains the retention bookkeeping (``toolscore.storage.retention.spans``):

- ``pruned_through_ns``: spans and log records of the conversation received at or before this
  time (Unix ns, the receiving server's clock) were deleted, or are being deleted;
- ``pruned_calls``: how many leading tool calls of the current revision came from them (a later
  scoring carries these over and rebuilds only what arrived after);
- ``pruned_at``: when the deletion finished (NULL while it runs or before any pruning).

A partial index on ``last_span_received_ns`` holds only the conversations with spans left to
prune, so finding the next ones costs the same whatever the history's size.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

INT64 = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS = sa.DateTime(timezone=True)
# Must stay textually identical to storage.retention.spans.PRUNABLE (SQLite uses a partial index
# only for queries whose WHERE contains its predicate as written).
PRUNABLE = "pruned_at IS NULL OR pruned_through_ns <> last_span_received_ns"


def upgrade() -> None:
    op.add_column("conversations", sa.Column("pruned_through_ns", INT64, nullable=True))
    op.add_column("conversations", sa.Column("pruned_calls", sa.Integer(), nullable=True))
    op.add_column("conversations", sa.Column("pruned_at", TS, nullable=True))
    op.create_index(
        "ix_conversations_prunable",
        "conversations",
        ["last_span_received_ns"],
        sqlite_where=sa.text(PRUNABLE),
        postgresql_where=sa.text(PRUNABLE),
    )


def downgrade() -> None:
    op.drop_index("ix_conversations_prunable", table_name="conversations")
    # Plain ALTER TABLE (SQLite >= 3.35): a batch copy of the table would break the views on it.
    for column in ("pruned_at", "pruned_calls", "pruned_through_ns"):
        op.execute(f"ALTER TABLE conversations DROP COLUMN {column}")
