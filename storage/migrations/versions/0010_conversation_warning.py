"""why a conversation's score may mislead: conversations.warning

Revision ID: 0010
Revises: 0009

Set when scoring rebuilt no tool call although spans of the conversation look like tool runs
(a convention toolscore does not read: collector/reconstruction/conventions/unrecognised.py), NULL
otherwise;
``toolscore show`` and ``toolscore conversations --json`` print it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


# Plain ALTER TABLE on both dialects, as 0005: a batch rebuild of ``conversations`` would trip
# over the views that read it.


def upgrade() -> None:
    op.add_column("conversations", sa.Column("warning", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("conversations", "warning")
