"""index the current evaluations by conversation: (is_current, conversation_id)

Revision ID: 0009
Revises: 0008

Every scoring round supersedes the current evaluations of the conversations it scores
(``UPDATE evaluations SET is_current = false WHERE conversation_id IN (...) AND is_current``).
With an index on ``is_current`` alone SQLite's planner walked every current evaluation of the
database for that: 2 s per round under the write lock with 700,000 scored conversations (about
5 million stored spans), against 3-9 ms with this index (benchmarks/bench_growth.py found it).
The composite index serves that statement and the current scores of listed conversations; what
reads all current rows still uses its first column.
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_evaluations_is_current_conversation_id",
        "evaluations",
        ["is_current", "conversation_id"],
    )
    op.drop_index("ix_evaluations_is_current", table_name="evaluations")


def downgrade() -> None:
    op.create_index("ix_evaluations_is_current", "evaluations", ["is_current"])
    op.drop_index("ix_evaluations_is_current_conversation_id", table_name="evaluations")
