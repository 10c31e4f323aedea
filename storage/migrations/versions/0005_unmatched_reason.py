"""why a conversation is unmatched: conversations.unmatched_reason

Revision ID: 0005
Revises: 0004

Set when scoring finds no expectation (which rules were tried and what each found), NULL
otherwise; ``toolscore show`` and ``toolscore conversations`` print it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


# Plain ALTER TABLE on both dialects (SQLite >= 3.35 drops columns itself): a batch rebuild of
# ``conversations`` would trip over the views that read it.


def upgrade() -> None:
    op.add_column("conversations", sa.Column("unmatched_reason", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("conversations", "unmatched_reason")
