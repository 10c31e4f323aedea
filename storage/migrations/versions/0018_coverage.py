"""coverage of live traffic: conversations.service_name and agent_name, expectation_coverage

Revision ID: 0018
Revises: 0017

Scoring records each conversation's ``service.name`` (resource) and ``gen_ai.agent.name``
(span) so that what share of the traffic found an expectation can be told per service and
agent. The view counts conversations by service, agent, outcome (matched, unmatched, open,
error) and unmatched reason. Conversations scored before this revision have neither name
(``(unknown)`` in the view) until they are scored again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

VIEW = """
CREATE VIEW expectation_coverage AS
SELECT COALESCE(service_name, '(unknown)') AS service_name,
    COALESCE(agent_name, '(unknown)') AS agent_name,
    CASE WHEN expectation_id IS NOT NULL THEN 'matched'
        WHEN status = 'unmatched' THEN 'unmatched'
        WHEN status = 'open' THEN 'open'
        ELSE 'error' END AS outcome,
    unmatched_reason,
    COUNT(*) AS conversations
FROM conversations
GROUP BY COALESCE(service_name, '(unknown)'), COALESCE(agent_name, '(unknown)'),
    CASE WHEN expectation_id IS NOT NULL THEN 'matched'
        WHEN status = 'unmatched' THEN 'unmatched'
        WHEN status = 'open' THEN 'open'
        ELSE 'error' END,
    unmatched_reason
"""


# Plain ALTER TABLE on both dialects, as 0005: a batch rebuild of ``conversations`` would trip
# over the views that read it.


def upgrade() -> None:
    op.add_column("conversations", sa.Column("service_name", sa.Text(), nullable=True))
    op.add_column("conversations", sa.Column("agent_name", sa.Text(), nullable=True))
    op.execute(VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS expectation_coverage")
    op.drop_column("conversations", "agent_name")
    op.drop_column("conversations", "service_name")
