"""What a report shows, read from the SQL views so that it agrees with them by construction."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, text

from toolscore.collector.export.attributes import explanation
from toolscore.storage.pipeline import evaluations

WORST_LIMIT = 10


@dataclass(frozen=True, slots=True)
class DailyPoint:
    day: str  # YYYY-MM-DD (UTC)
    evaluations: int
    scored: int
    mean: float | None
    p10: float | None
    p50: float | None
    p90: float | None
    pass_rate: float | None


@dataclass(frozen=True, slots=True)
class Series:
    """One expectation and metric over the period, day by day, with its totals."""

    expectation_id: str
    metric: str
    points: tuple[DailyPoint, ...]

    @property
    def evaluations(self) -> int:
        return sum(p.evaluations for p in self.points)

    @property
    def scored(self) -> int:
        return sum(p.scored for p in self.points)

    @property
    def mean(self) -> float | None:
        return _weighted([(p.mean, p.scored) for p in self.points])

    @property
    def pass_rate(self) -> float | None:
        return _weighted([(p.pass_rate, p.scored) for p in self.points])

    @property
    def trend(self) -> float | None:
        """Mean of the later half of the scored days minus the earlier half (None: < 2 days)."""
        days = [p for p in self.points if p.mean is not None and p.scored]
        if len(days) < 2:
            return None
        half = len(days) // 2
        early = _weighted([(p.mean, p.scored) for p in days[:half]])
        late = _weighted([(p.mean, p.scored) for p in days[len(days) - half :]])
        if early is None or late is None:
            return None
        return late - early


@dataclass(frozen=True, slots=True)
class WorstConversation:
    conversation_id: str
    expectation_id: str
    metric: str
    score: float | None
    passed: bool | None
    day: str
    trace_id: str
    explanation: str


@dataclass(frozen=True, slots=True)
class Report:
    since: dt.date
    until: dt.date
    series: tuple[Series, ...]
    worst: tuple[WorstConversation, ...]


def _weighted(pairs: Sequence[tuple[float | None, int]]) -> float | None:
    total = sum(n for v, n in pairs if v is not None)
    if not total:
        return None
    return sum(float(v) * n for v, n in pairs if v is not None) / total


def _float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def load_report(
    conn: Connection,
    since: dt.date,
    until: dt.date,
    *,
    expectation_id: str | None = None,
    worst_limit: int = WORST_LIMIT,
) -> Report:
    """The report for conversations whose (UTC) day is within ``since``..``until`` inclusive."""
    params = {"since": since.isoformat(), "until": until.isoformat(), "exp": expectation_id}
    exp_filter = "AND expectation_id = :exp" if expectation_id else ""
    rows = conn.execute(
        text(
            "SELECT day, expectation_id, metric, evaluations, scored, mean_score, p10, p50, p90,"
            " pass_rate FROM daily_scores WHERE day >= :since AND day <= :until "
            f"{exp_filter} ORDER BY expectation_id, metric, day"
        ),
        params,
    ).mappings()
    grouped: dict[tuple[str, str], list[DailyPoint]] = {}
    for r in rows:
        grouped.setdefault((r["expectation_id"], r["metric"]), []).append(
            DailyPoint(
                day=str(r["day"]),
                evaluations=int(r["evaluations"]),
                scored=int(r["scored"]),
                mean=_float(r["mean_score"]),
                p10=_float(r["p10"]),
                p50=_float(r["p50"]),
                p90=_float(r["p90"]),
                pass_rate=_float(r["pass_rate"]),
            )
        )
    series = tuple(Series(e, m, tuple(points)) for (e, m), points in grouped.items())
    worst_rows = conn.execute(
        text(
            "SELECT cs.conversation_id, cs.expectation_id, cs.metric, cs.score, cs.passed,"
            " cs.day, cs.trace_id, cs.error, cs.predicted_count, cs.expected_count, e.details"
            " FROM current_scores cs JOIN evaluations e ON e.id = cs.evaluation_id"
            " WHERE cs.day >= :since AND cs.day <= :until"
            f" {exp_filter.replace('expectation_id', 'cs.expectation_id')}"
            " AND (cs.score IS NULL OR cs.passed = 0)"
            " ORDER BY CASE WHEN cs.score IS NULL THEN 0 ELSE 1 END, cs.score, cs.day DESC,"
            " cs.conversation_id, cs.metric LIMIT :limit"
        ),
        {**params, "limit": worst_limit},
    ).mappings()
    # text() leaves JSON as the driver returns it (a string on SQLite): decode it like the column
    decode = evaluations.c.details.type.result_processor(conn.dialect, None)
    worst = tuple(
        WorstConversation(
            conversation_id=r["conversation_id"],
            expectation_id=r["expectation_id"],
            metric=r["metric"],
            score=_float(r["score"]),
            passed=None if r["passed"] is None else bool(r["passed"]),
            day=str(r["day"]),
            trace_id=r["trace_id"],
            explanation=explanation(
                _float(r["score"]),
                r["error"],
                decode(r["details"]) if decode else r["details"],
                r["predicted_count"],
                r["expected_count"],
            ),
        )
        for r in worst_rows
    )
    return Report(since=since, until=until, series=series, worst=worst)
