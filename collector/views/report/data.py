"""What a report shows, read from the SQL views (``storage.history.reports``): it agrees with
them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from toolscore.collector.export.attributes import LABEL_NOT_EVALUATED, explanation, pass_label
from toolscore.storage.conversations.browse import Warned, warned
from toolscore.storage.conversations.coverage import CoverageLine, coverage
from toolscore.storage.database import Connection
from toolscore.storage.history.reports import daily_scores, worst_scores
from toolscore.storage.history.tool_scores import ToolScore, most_often_wrong, thresholds

WORST_LIMIT = 10
TOOLS_LIMIT = 10


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
    threshold: float | None = None  # the pass threshold (None: unknown)

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
    # no score because arguments it compares were not recorded (collector/pipeline/not_evaluated.py)
    not_evaluated: bool = False


@dataclass(frozen=True, slots=True)
class Report:
    since: dt.date
    until: dt.date
    series: tuple[Series, ...]
    worst: tuple[WorstConversation, ...]
    #: The tools with the most failures (wrong, missing, extra, misplaced), most first.
    tools: tuple[ToolScore, ...] = ()
    #: Conversations active in the period by service and agent: matched, unmatched and why.
    coverage: tuple[CoverageLine, ...] = ()
    #: Conversations scored in the period whose rebuilt calls may be wrong: how many, the latest.
    warned_total: int = 0
    warned: tuple[Warned, ...] = ()


def _weighted(pairs: Sequence[tuple[float | None, int]]) -> float | None:
    total = sum(n for v, n in pairs if v is not None)
    if not total:
        return None
    return sum(float(v) * n for v, n in pairs if v is not None) / total


def load_report(
    conn: Connection,
    since: dt.date,
    until: dt.date,
    *,
    expectation_id: str | None = None,
    worst_limit: int = WORST_LIMIT,
) -> Report:
    """The report for conversations whose (UTC) day is within ``since``..``until`` inclusive."""
    grouped: dict[tuple[str, str], list[DailyPoint]] = {}
    for r in daily_scores(conn, since, until, expectation_id):
        grouped.setdefault((r.expectation_id, r.metric), []).append(
            DailyPoint(r.day, r.evaluations, r.scored, r.mean, r.p10, r.p50, r.p90, r.pass_rate)
        )
    limits = thresholds(conn, since, until, expectation_id)
    series = tuple(
        Series(e, m, tuple(points), limits.get((e, m))) for (e, m), points in grouped.items()
    )
    worst = tuple(
        WorstConversation(
            conversation_id=r.conversation_id,
            expectation_id=r.expectation_id,
            metric=r.metric,
            score=r.score,
            passed=r.passed,
            day=r.day,
            trace_id=r.trace_id,
            explanation=explanation(
                r.score, r.error, r.details, r.predicted_count, r.expected_count
            ),
            not_evaluated=pass_label(r.score, 1.0, r.details) == LABEL_NOT_EVALUATED,
        )
        for r in worst_scores(conn, since, until, expectation_id, limit=worst_limit)
    )
    tools = tuple(most_often_wrong(conn, since, until, expectation_id, limit=TOOLS_LIMIT))
    start = dt.datetime.combine(since, dt.time(), dt.UTC)
    end = dt.datetime.combine(until + dt.timedelta(days=1), dt.time(), dt.UTC)
    covered = () if expectation_id else tuple(coverage(conn, since=start, until=end))
    total, latest = warned(conn, start, end, expectation_id, limit=worst_limit)
    return Report(
        since=since,
        until=until,
        series=series,
        worst=worst,
        tools=tools,
        coverage=covered,
        warned_total=total,
        warned=tuple(latest),
    )
