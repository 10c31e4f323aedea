"""per-tool views: tool_scores and tool_argument_scores

Revision ID: 0007
Revises: 0006

Built from the current ToolCallAccuracy evaluations' explanations (``evaluations.details``:
``pairs`` and the loss labels ``losses``, see docs/scoring.md), same columns and answers on
SQLite and PostgreSQL (the dialect differences are the ``_DIALECT`` fragments below):

- ``tool_scores``: per day, expectation, metric instance and tool name: the calls expected,
  called, matched (paired, every argument right), wrong (paired, some argument wrong), missing,
  extra and misplaced (expected but left without a partner by the order or group gate), and the
  points of the score lost on that tool. ``expected = matched + wrong + missing + misplaced``.
- ``tool_argument_scores``: per day, expectation, metric instance, tool and argument name: how
  often the argument was wrong and the points it lost.

Evaluations scored before the loss labels existed have ``pairs`` but no ``losses``: they count
their paired calls only.
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

VIEWS = ("tool_argument_scores", "tool_scores")

_DIALECT = {
    "postgresql": {
        "each": "CROSS JOIN LATERAL jsonb_array_elements(a.details -> '{key}') AS j(value)",
        "text": "(j.value ->> '{key}')",
        "number": "CAST(j.value ->> '{key}' AS DOUBLE PRECISION)",
        "has": "(j.value -> '{key}') IS NOT NULL",
    },
    "sqlite": {
        "each": "CROSS JOIN json_each(a.details, '$.{key}') AS j",
        "text": "json_extract(j.value, '$.{key}')",
        "number": "CAST(json_extract(j.value, '$.{key}') AS REAL)",
        "has": "json_type(j.value, '$.{key}') IS NOT NULL",
    },
}

_ACCURACY = """
    SELECT cs.day, cs.expectation_id, cs.metric, e.details
    FROM current_scores cs JOIN evaluations e ON e.id = cs.evaluation_id
    WHERE cs.metric_type = 'tool_call_accuracy' AND cs.score IS NOT NULL
"""


def view_sql(dialect: str) -> dict[str, str]:
    """``CREATE VIEW`` statements for ``dialect``, in creation order."""
    d = _DIALECT[dialect]

    def each(key: str) -> str:
        return d["each"].format(key=key)

    def text(key: str) -> str:
        return d["text"].format(key=key)

    def number(key: str) -> str:
        return d["number"].format(key=key)

    def has(key: str) -> str:
        return d["has"].format(key=key)

    kind = text("kind")
    unpaired = f"{kind} <> 'wrong_argument'"
    tools = f"""
CREATE VIEW tool_scores AS
WITH accuracy AS ({_ACCURACY}), events AS (
    SELECT a.day, a.expectation_id, a.metric, {text("name")} AS tool,
        1 AS expected, 1 AS called,
        CASE WHEN {number("score")} >= 1 THEN 1 ELSE 0 END AS matched,
        CASE WHEN {number("score")} < 1 THEN 1 ELSE 0 END AS wrong,
        0 AS missing, 0 AS extra, 0 AS misplaced, 0.0 AS points
    FROM accuracy a {each("pairs")}
    UNION ALL
    SELECT a.day, a.expectation_id, a.metric, {text("tool")} AS tool,
        CASE WHEN {unpaired} AND {has("expected")} THEN 1 ELSE 0 END AS expected,
        CASE WHEN {unpaired} AND {has("predicted")} THEN 1 ELSE 0 END AS called,
        0 AS matched, 0 AS wrong,
        CASE WHEN {kind} = 'missing' THEN 1 ELSE 0 END AS missing,
        CASE WHEN {kind} = 'extra' THEN 1 ELSE 0 END AS extra,
        CASE WHEN {kind} IN ('order', 'group') AND {has("expected")} THEN 1 ELSE 0 END
            AS misplaced,
        {number("points")} AS points
    FROM accuracy a {each("losses")}
)
SELECT day, expectation_id, metric, tool,
    SUM(expected) AS expected, SUM(called) AS called, SUM(matched) AS matched,
    SUM(wrong) AS wrong, SUM(missing) AS missing, SUM(extra) AS extra,
    SUM(misplaced) AS misplaced, SUM(points) AS points_lost
FROM events
WHERE tool IS NOT NULL
GROUP BY day, expectation_id, metric, tool
"""
    arguments = f"""
CREATE VIEW tool_argument_scores AS
WITH accuracy AS ({_ACCURACY})
SELECT a.day, a.expectation_id, a.metric, {text("tool")} AS tool,
    {text("argument")} AS argument, COUNT(*) AS wrong, SUM({number("points")}) AS points_lost
FROM accuracy a {each("losses")}
WHERE {kind} = 'wrong_argument'
GROUP BY a.day, a.expectation_id, a.metric, {text("tool")}, {text("argument")}
"""
    return {"tool_scores": tools, "tool_argument_scores": arguments}


def upgrade() -> None:
    for statement in view_sql(op.get_bind().dialect.name).values():
        op.execute(statement)


def downgrade() -> None:
    for name in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {name}")
