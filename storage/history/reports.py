"""Reading the score history through the SQL views (``daily_scores``, ``current_scores``), so a
report agrees with the views by construction."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, text

from toolscore.storage.conversations.tables import evaluations


@dataclass(frozen=True, slots=True)
class DailyScore:
    """One row of ``daily_scores``: an expectation's metric on one (UTC) day."""

    day: str  # YYYY-MM-DD
    expectation_id: str
    metric: str
    evaluations: int
    scored: int
    mean: float | None
    p10: float | None
    p50: float | None
    p90: float | None
    pass_rate: float | None


@dataclass(frozen=True, slots=True)
class FailingScore:
    """A current score that failed or could not be computed, with what explains it."""

    conversation_id: str
    expectation_id: str
    metric: str
    score: float | None
    passed: bool | None
    day: str
    trace_id: str
    error: str | None
    predicted_count: int
    expected_count: int
    details: Any


def _float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def _params(since: dt.date, until: dt.date, expectation_id: str | None) -> dict[str, Any]:
    return {"since": since.isoformat(), "until": until.isoformat(), "exp": expectation_id}


def daily_scores(
    conn: Connection, since: dt.date, until: dt.date, expectation_id: str | None = None
) -> list[DailyScore]:
    """The days ``since``..``until`` (inclusive), by expectation, metric and day."""
    exp_filter = "AND expectation_id = :exp" if expectation_id else ""
    rows = conn.execute(
        text(
            "SELECT day, expectation_id, metric, evaluations, scored, mean_score, p10, p50, p90,"
            " pass_rate FROM daily_scores WHERE day >= :since AND day <= :until "
            f"{exp_filter} ORDER BY expectation_id, metric, day"
        ),
        _params(since, until, expectation_id),
    )
    return [
        DailyScore(
            str(day), exp, metric, int(n), int(scored), *(_float(v) for v in (m, p10, p50, p90, pr))
        )
        for day, exp, metric, n, scored, m, p10, p50, p90, pr in rows
    ]


def worst_scores(
    conn: Connection,
    since: dt.date,
    until: dt.date,
    expectation_id: str | None = None,
    *,
    limit: int,
) -> list[FailingScore]:
    """Up to ``limit`` current failing or error scores of the days, errors first, then lowest."""
    exp_filter = "AND cs.expectation_id = :exp" if expectation_id else ""
    rows = conn.execute(
        text(
            "SELECT cs.conversation_id, cs.expectation_id, cs.metric, cs.score, cs.passed,"
            " cs.day, cs.trace_id, cs.error, cs.predicted_count, cs.expected_count, e.details"
            " FROM current_scores cs JOIN evaluations e ON e.id = cs.evaluation_id"
            " WHERE cs.day >= :since AND cs.day <= :until"
            f" {exp_filter}"
            " AND (cs.score IS NULL OR cs.passed = 0)"
            " ORDER BY CASE WHEN cs.score IS NULL THEN 0 ELSE 1 END, cs.score, cs.day DESC,"
            " cs.conversation_id, cs.metric LIMIT :limit"
        ),
        {**_params(since, until, expectation_id), "limit": limit},
    ).mappings()
    # text() leaves JSON as the driver returns it (a string on SQLite): decode it like the column
    decode = evaluations.c.details.type.result_processor(conn.dialect, None)
    return [
        FailingScore(
            conversation_id=r["conversation_id"],
            expectation_id=r["expectation_id"],
            metric=r["metric"],
            score=_float(r["score"]),
            passed=None if r["passed"] is None else bool(r["passed"]),
            day=str(r["day"]),
            trace_id=r["trace_id"],
            error=r["error"],
            predicted_count=r["predicted_count"],
            expected_count=r["expected_count"],
            details=decode(r["details"]) if decode else r["details"],
        )
        for r in rows
    ]
