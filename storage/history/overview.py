"""What the web UI's overview and expectation pages chart: scores per day, expectation and
metric, read straight from the current evaluations of a period (the ``created_at`` index), with
each metric's pass threshold. Cheaper than the ``daily_scores`` view (no percentiles), so the
pages can be drawn at any history size; days are the day each evaluation was written (UTC).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import Connection, Float, case, cast, func, select
from sqlalchemy.orm import aliased

from toolscore.storage.conversations.tables import evaluations
from toolscore.storage.history.outbox import metric_thresholds
from toolscore.storage.plumbing.dialect import utc_day


@dataclass(frozen=True, slots=True)
class DaySummary:
    day: str  # YYYY-MM-DD (UTC)
    expectation_id: str
    metric: str
    evaluations: int
    scored: int
    mean: float | None
    pass_rate: float | None
    threshold: float


def daily_summary(
    conn: Connection,
    since: dt.datetime,
    until: dt.datetime,
    expectation_id: str | None = None,
) -> list[DaySummary]:
    """Current evaluations written in ``since``..``until``, by day, expectation and metric."""
    e = evaluations.c
    by_name, by_type = aliased(metric_thresholds), aliased(metric_thresholds)
    threshold = func.coalesce(by_name.c.threshold, by_type.c.threshold, 1.0)
    passed = case((e.score.is_(None), None), (e.score >= threshold, 1.0), else_=0.0)
    day = utc_day(conn.dialect, e.created_at)
    stmt = (
        select(
            day,
            e.expectation_id,
            e.metric,
            func.count(),
            func.count(e.score),
            func.avg(e.score),
            func.avg(cast(passed, Float)),
            func.max(threshold),
        )
        .select_from(evaluations)
        .outerjoin(by_name, by_name.c.metric == e.metric)
        .outerjoin(by_type, by_type.c.metric == e.metric_type)
        .where(e.created_at >= since, e.created_at < until, e.is_current.is_(True))
        .group_by(day, e.expectation_id, e.metric)
        .order_by(e.expectation_id, e.metric, day)
    )
    if expectation_id is not None:
        stmt = stmt.where(e.expectation_id == expectation_id)
    return [
        DaySummary(
            str(d),
            str(x),
            str(m),
            int(n),
            int(s),
            None if mean is None else float(mean),
            None if rate is None else float(rate),
            float(t),
        )
        for d, x, m, n, s, mean, rate, t in conn.execute(stmt)
    ]
