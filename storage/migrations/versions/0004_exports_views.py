"""export outbox, pass thresholds, rescore runs, and the history views

Revision ID: 0004
Revises: 0003

Views (same columns and answers on SQLite and PostgreSQL; the dialect differences are the
``_DIALECT`` fragments below and nowhere else):

- ``current_scores``: the current score per conversation and metric instance, with its pass
  threshold (``metric_thresholds`` by instance name, then by metric type, else 1.0), ``passed``
  (1.0 / 0.0, NULL when not scored) and ``day``, the UTC date of the conversation's first span.
- ``daily_scores``: per day, expectation and metric over current scores: evaluations, scored,
  errors, mean_score, p10/p50/p90 (continuous percentiles: PostgreSQL ``percentile_cont``; SQLite
  the same linear interpolation computed with window functions), pass_rate.
- ``expectation_version_regressions``: per expectation, metric and expectation version, the mean
  of the newest score of each conversation scored with that version, and the delta against the
  previous version's mean (negative = regression).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)
VIEWS = ("expectation_version_regressions", "daily_scores", "current_scores")


def _sqlite_percentile(p: float, name: str) -> str:
    # percentile_cont: position p*(n-1) in the sorted scores, linear between its neighbours.
    pos = f"({p} * (n - 1))"
    lo = f"CAST({pos} AS INTEGER)"
    hi = f"({lo} + ({pos} > {lo}))"
    lo_val = f"MAX(CASE WHEN score IS NOT NULL AND rn = {lo} THEN score END)"
    hi_val = f"MAX(CASE WHEN score IS NOT NULL AND rn = {hi} THEN score END)"
    frac = f"MAX(CASE WHEN score IS NOT NULL THEN {pos} - {lo} END)"
    return f"{lo_val} + {frac} * ({hi_val} - {lo_val}) AS {name}"


def _postgres_percentile(p: float, name: str) -> str:
    return f"percentile_cont({p}) WITHIN GROUP (ORDER BY score) AS {name}"


_DIALECT = {
    "postgresql": {
        "day": "to_char({ts} AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
        "float": "DOUBLE PRECISION",
        "percentile": _postgres_percentile,
    },
    "sqlite": {
        "day": "date({ts})",
        "float": "REAL",
        "percentile": _sqlite_percentile,
    },
}


def view_sql(dialect: str) -> dict[str, str]:
    """``CREATE VIEW`` statements for ``dialect``, in creation order."""
    d = _DIALECT[dialect]
    day = str(d["day"]).format(ts="COALESCE(c.first_seen_at, e.created_at)")
    flt = d["float"]
    pct = d["percentile"]
    assert callable(pct)
    current = f"""
CREATE VIEW current_scores AS
SELECT
    e.id AS evaluation_id,
    e.conversation_id,
    e.metric,
    e.metric_type,
    e.revision,
    e.expectation_id,
    e.expectation_version,
    e.score,
    e.error,
    e.predicted_count,
    e.expected_count,
    e.trace_id,
    e.root_span_id,
    e.created_at,
    {day} AS day,
    COALESCE(tm.threshold, tt.threshold, 1.0) AS threshold,
    CAST(CASE
        WHEN e.score IS NULL THEN NULL
        WHEN e.score >= COALESCE(tm.threshold, tt.threshold, 1.0) THEN 1
        ELSE 0
    END AS {flt}) AS passed
FROM evaluations e
LEFT JOIN conversations c ON c.id = e.conversation_id
LEFT JOIN metric_thresholds tm ON tm.metric = e.metric
LEFT JOIN metric_thresholds tt ON tt.metric = e.metric_type
WHERE e.is_current
"""
    daily = f"""
CREATE VIEW daily_scores AS
WITH ranked AS (
    SELECT
        day, expectation_id, metric, score, passed,
        ROW_NUMBER() OVER (
            PARTITION BY day, expectation_id, metric, (score IS NULL) ORDER BY score
        ) - 1 AS rn,
        COUNT(score) OVER (PARTITION BY day, expectation_id, metric) AS n
    FROM current_scores
)
SELECT
    day,
    expectation_id,
    metric,
    COUNT(*) AS evaluations,
    COUNT(score) AS scored,
    COUNT(*) - COUNT(score) AS errors,
    AVG(score) AS mean_score,
    {pct(0.1, "p10")},
    {pct(0.5, "p50")},
    {pct(0.9, "p90")},
    AVG(passed) AS pass_rate
FROM ranked
GROUP BY day, expectation_id, metric
"""
    regressions = """
CREATE VIEW expectation_version_regressions AS
WITH newest AS (
    SELECT
        conversation_id, metric, expectation_id, expectation_version, score,
        ROW_NUMBER() OVER (
            PARTITION BY conversation_id, metric, expectation_id, expectation_version
            ORDER BY revision DESC
        ) AS rk
    FROM evaluations
), per_version AS (
    SELECT
        expectation_id,
        metric,
        expectation_version,
        COUNT(*) AS conversations,
        COUNT(score) AS scored,
        AVG(score) AS mean_score
    FROM newest
    WHERE rk = 1
    GROUP BY expectation_id, metric, expectation_version
)
SELECT
    expectation_id,
    metric,
    expectation_version,
    conversations,
    scored,
    mean_score,
    LAG(expectation_version) OVER w AS previous_version,
    LAG(mean_score) OVER w AS previous_mean_score,
    mean_score - LAG(mean_score) OVER w AS delta
FROM per_version
WINDOW w AS (PARTITION BY expectation_id, metric ORDER BY expectation_version)
"""
    return {
        "current_scores": current,
        "daily_scores": daily,
        "expectation_version_regressions": regressions,
    }


def upgrade() -> None:
    op.create_table(
        "evaluation_exports",
        sa.Column("evaluation_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("enqueued_at", TS, nullable=False),
        sa.Column("next_attempt_at", TS, nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("spans_exported_at", TS, nullable=True),
        sa.Column("logs_exported_at", TS, nullable=True),
        sa.Column("exported_at", TS, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("evaluation_id", name="pk_evaluation_exports"),
    )
    op.create_index(
        "ix_evaluation_exports_exported_at_next_attempt_at",
        "evaluation_exports",
        ["exported_at", "next_attempt_at"],
    )
    op.create_table(
        "metric_thresholds",
        sa.Column("metric", sa.Text(), nullable=False),
        sa.Column("threshold", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("metric", name="pk_metric_thresholds"),
    )
    op.create_table(
        "rescore_runs",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("finished_at", TS, nullable=True),
        sa.Column("expectation_id", sa.Text(), nullable=True),
        sa.Column("since", TS, nullable=True),
        sa.Column("config_hash", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_rescore_runs"),
    )
    op.create_table(
        "rescore_run_items",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=True),
        sa.Column("done_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("run_id", "conversation_id", name="pk_rescore_run_items"),
    )
    for statement in view_sql(op.get_bind().dialect.name).values():
        op.execute(statement)


def downgrade() -> None:
    for name in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {name}")
    op.drop_table("rescore_run_items")
    op.drop_table("rescore_runs")
    op.drop_table("metric_thresholds")
    op.drop_index(
        "ix_evaluation_exports_exported_at_next_attempt_at", table_name="evaluation_exports"
    )
    op.drop_table("evaluation_exports")
