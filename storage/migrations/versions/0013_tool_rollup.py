"""history retention: the per-tool rollups, and tool_scores / tool_argument_scores over them

Revision ID: 0013
Revises: 0012

Before history retention deletes a conversation, its current ToolCallAccuracy evaluation's
per-tool counts (what ``tool_scores`` and ``tool_argument_scores`` read from ``details``) are
added to ``tool_score_rollup`` and ``tool_argument_score_rollup``, one row per day, expectation,
metric instance and tool (and argument). The two views are rebuilt as the sum of the live
conversations' counts (migration 0007's statements) and the rollup's, so ``toolscore report``'s
"tools most often wrong" gives the same counts after the conversations were deleted.
"""

from __future__ import annotations

import importlib

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

INT64 = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
COUNTS = ("expected", "called", "matched", "wrong", "missing", "extra", "misplaced")
_INT = {"postgresql": "BIGINT", "sqlite": "INTEGER"}


def _live(dialect: str) -> dict[str, str]:
    """Migration 0007's view bodies (``CREATE VIEW name AS`` cut off)."""
    tools = importlib.import_module("toolscore.storage.migrations.versions.0007_tool_scores")
    return {name: sql.split(" AS\n", 1)[1] for name, sql in tools.view_sql(dialect).items()}


def view_sql(dialect: str) -> dict[str, str]:
    live, i64 = _live(dialect), _INT[dialect]
    counts = ", ".join(f"CAST(SUM({c}) AS {i64}) AS {c}" for c in COUNTS)
    columns = ", ".join(COUNTS)
    tools = f"""
CREATE VIEW tool_scores AS
WITH live AS ({live["tool_scores"]}), both_parts AS (
    SELECT day, expectation_id, metric, tool, {columns}, points_lost FROM live
    UNION ALL
    SELECT day, expectation_id, metric, tool, {columns}, points_lost FROM tool_score_rollup
)
SELECT day, expectation_id, metric, tool, {counts}, SUM(points_lost) AS points_lost
FROM both_parts
GROUP BY day, expectation_id, metric, tool
"""
    arguments = f"""
CREATE VIEW tool_argument_scores AS
WITH live AS ({live["tool_argument_scores"]}), both_parts AS (
    SELECT day, expectation_id, metric, tool, argument, wrong, points_lost FROM live
    UNION ALL
    SELECT day, expectation_id, metric, tool, argument, wrong, points_lost
    FROM tool_argument_score_rollup
)
SELECT day, expectation_id, metric, tool, argument, CAST(SUM(wrong) AS {i64}) AS wrong,
    SUM(points_lost) AS points_lost
FROM both_parts
GROUP BY day, expectation_id, metric, tool, argument
"""
    return {"tool_scores": tools, "tool_argument_scores": arguments}


def upgrade() -> None:
    keys = ("day", "expectation_id", "metric", "tool")
    op.create_table(
        "tool_score_rollup",
        *(sa.Column(k, sa.Text(), nullable=False) for k in keys),
        *(sa.Column(c, INT64, nullable=False) for c in COUNTS),
        sa.Column("points_lost", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint(*keys, name="pk_tool_score_rollup"),
    )
    op.create_table(
        "tool_argument_score_rollup",
        *(sa.Column(k, sa.Text(), nullable=False) for k in (*keys, "argument")),
        sa.Column("wrong", INT64, nullable=False),
        sa.Column("points_lost", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint(*keys, "argument", name="pk_tool_argument_score_rollup"),
    )
    op.execute("DROP VIEW tool_argument_scores")
    op.execute("DROP VIEW tool_scores")
    for statement in view_sql(op.get_bind().dialect.name).values():
        op.execute(statement)


def downgrade() -> None:
    tools = importlib.import_module("toolscore.storage.migrations.versions.0007_tool_scores")
    op.execute("DROP VIEW tool_argument_scores")
    op.execute("DROP VIEW tool_scores")
    for statement in tools.view_sql(op.get_bind().dialect.name).values():
        op.execute(statement)
    op.drop_table("tool_argument_score_rollup")
    op.drop_table("tool_score_rollup")
