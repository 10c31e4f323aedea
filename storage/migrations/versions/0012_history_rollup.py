"""history retention: the daily rollup of pruned conversations' scores, and daily_scores over it

Revision ID: 0012
Revises: 0011

History retention (``serve --history-retention``, ``toolscore prune --history-older-than``)
deletes whole finished conversations. Before it deletes one, it adds the conversation's current
evaluations to ``daily_score_rollup``: one row per day, expectation, metric instance, metric
type and score with how many evaluations had it (``scored`` false, ``score`` 0: not scored).
The table is never pruned: its size grows with days times distinct scores, not conversations.

``daily_scores`` is rebuilt over the current scores *and* the rollup, both brought to the same
form first (one row per day, expectation, metric, type and score with a count), so a day gives
the same row before and after its conversations were deleted: counts, the mean
(``SUM(score * n) / SUM(n)``), the continuous percentiles (the linear interpolation of
``percentile_cont``, computed on both databases from the running counts) and the pass rate
(thresholds applied when read, as ``current_scores`` does). ``history_retention`` keeps the
newest cutoff applied, so ``toolscore show`` can say a conversation may have been deleted;
``rescore_run_items`` gains an index on ``conversation_id`` (the deletes look its rows up).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)
INT64 = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

_DIALECT = {
    "postgresql": {"float": "DOUBLE PRECISION", "int": "BIGINT", "floor": "FLOOR({x})"},
    "sqlite": {"float": "REAL", "int": "INTEGER", "floor": "{x}"},
}


def _percentile(d: dict[str, str], p: float, name: str) -> str:
    # percentile_cont: position p*(n-1) among the sorted scores, linear between its neighbours;
    # a merged row holds the ranks first_rank .. first_rank + n - 1.
    pos = f"(CAST({p} AS {d['float']}) * (scored_n - 1))"
    lo = f"CAST({d['floor'].format(x=pos)} AS {d['int']})"
    hi = f"({lo} + CASE WHEN {pos} > {lo} THEN 1 ELSE 0 END)"

    def at(rank: str) -> str:
        return (
            f"MAX(CASE WHEN score IS NOT NULL AND first_rank <= {rank}"
            f" AND {rank} < first_rank + n THEN score END)"
        )

    frac = f"MAX(CASE WHEN score IS NOT NULL THEN {pos} - {lo} END)"
    return f"{at(lo)} + {frac} * ({at(hi)} - {at(lo)}) AS {name}"


def daily_scores_sql(dialect: str) -> str:
    d = _DIALECT[dialect]
    flt, i64 = d["float"], d["int"]
    return f"""
CREATE VIEW daily_scores AS
WITH items AS (
    SELECT day, expectation_id, metric, metric_type, score, COUNT(*) AS n
    FROM current_scores
    GROUP BY day, expectation_id, metric, metric_type, score
    UNION ALL
    SELECT day, expectation_id, metric, metric_type,
        CASE WHEN scored THEN score END AS score, evaluations AS n
    FROM daily_score_rollup
), merged AS (
    SELECT i.day, i.expectation_id, i.metric, i.score, CAST(SUM(i.n) AS {i64}) AS n,
        CAST(CASE
            WHEN i.score IS NULL THEN NULL
            WHEN i.score >= COALESCE(tm.threshold, tt.threshold, 1.0) THEN 1
            ELSE 0
        END AS {flt}) AS passed
    FROM items i
    LEFT JOIN metric_thresholds tm ON tm.metric = i.metric
    LEFT JOIN metric_thresholds tt ON tt.metric = i.metric_type
    GROUP BY i.day, i.expectation_id, i.metric, i.metric_type, i.score, tm.threshold,
        tt.threshold
), ranked AS (
    SELECT day, expectation_id, metric, score, passed, n,
        CAST(SUM(n) OVER (
            PARTITION BY day, expectation_id, metric, (score IS NULL)
            ORDER BY score, passed ROWS UNBOUNDED PRECEDING
        ) AS {i64}) - n AS first_rank,
        CAST(SUM(CASE WHEN score IS NOT NULL THEN n ELSE 0 END) OVER (
            PARTITION BY day, expectation_id, metric
        ) AS {i64}) AS scored_n
    FROM merged
)
SELECT
    day,
    expectation_id,
    metric,
    CAST(SUM(n) AS {i64}) AS evaluations,
    CAST(SUM(CASE WHEN score IS NOT NULL THEN n ELSE 0 END) AS {i64}) AS scored,
    CAST(SUM(CASE WHEN score IS NULL THEN n ELSE 0 END) AS {i64}) AS errors,
    SUM(score * n) / CAST(NULLIF(MAX(scored_n), 0) AS {flt}) AS mean_score,
    {_percentile(d, 0.1, "p10")},
    {_percentile(d, 0.5, "p50")},
    {_percentile(d, 0.9, "p90")},
    SUM(passed * n)
        / CAST(NULLIF(SUM(CASE WHEN passed IS NOT NULL THEN n ELSE 0 END), 0) AS {flt})
        AS pass_rate
FROM ranked
GROUP BY day, expectation_id, metric
"""


def upgrade() -> None:
    op.create_table(
        "daily_score_rollup",
        sa.Column("day", sa.Text(), nullable=False),
        sa.Column("expectation_id", sa.Text(), nullable=False),
        sa.Column("metric", sa.Text(), nullable=False),
        sa.Column("metric_type", sa.Text(), nullable=False),
        sa.Column("scored", sa.Boolean(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("evaluations", INT64, nullable=False),
        sa.PrimaryKeyConstraint(
            "day", "expectation_id", "metric", "metric_type", "scored", "score",
            name="pk_daily_score_rollup",
        ),
    )  # fmt: skip
    op.create_table(
        "history_retention",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("cutoff_ns", INT64, nullable=False),
        sa.Column("conversations", INT64, nullable=False),
        sa.Column("pruned_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_history_retention"),
    )
    op.create_index(
        "ix_rescore_run_items_conversation_id", "rescore_run_items", ["conversation_id"]
    )
    op.execute("DROP VIEW daily_scores")
    op.execute(daily_scores_sql(op.get_bind().dialect.name))


def downgrade() -> None:
    import importlib

    views = importlib.import_module("toolscore.storage.migrations.versions.0004_exports_views")
    op.execute("DROP VIEW daily_scores")
    op.execute(views.view_sql(op.get_bind().dialect.name)["daily_scores"])
    op.drop_index("ix_rescore_run_items_conversation_id", table_name="rescore_run_items")
    op.drop_table("history_retention")
    op.drop_table("daily_score_rollup")
