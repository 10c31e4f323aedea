"""indexes for browsing conversations: by expectation, and those with a warning

Revision ID: 0019
Revises: 0018

The web UI lists conversations newest first, continued by keyset on ``(last_span_at, id)``.
Filtered by expectation, or to the few that carry a reconstruction warning, the
``last_span_at`` index alone walks every other conversation on the way (200 ms and more at a
million conversations); these two serve each page from its first row.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

BY_EXPECTATION = "ix_conversations_expectation_last_span_at"
WITH_WARNING = "ix_conversations_warning_last_span_at"


def upgrade() -> None:
    op.create_index(BY_EXPECTATION, "conversations", ["expectation_id", "last_span_at"])
    op.create_index(
        WITH_WARNING,
        "conversations",
        ["last_span_at"],
        sqlite_where=sa.text("warning IS NOT NULL"),
        postgresql_where=sa.text("warning IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index(WITH_WARNING, table_name="conversations")
    op.drop_index(BY_EXPECTATION, table_name="conversations")
