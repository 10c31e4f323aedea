"""What ``toolscore report`` adds to the score history: the per-tool views (``tool_scores``,
``tool_argument_scores``, migration 0007), i.e. which tools and arguments lost the most points
over a range of days, and the pass thresholds the charts draw."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Connection, text


@dataclass(frozen=True, slots=True)
class ToolScore:
    """One tool of one metric instance over the days asked for (``tool_scores`` summed)."""

    metric: str
    tool: str
    expected: int
    called: int
    matched: int
    wrong: int
    missing: int
    extra: int
    misplaced: int
    points_lost: float
    #: The tool's arguments most often wrong, most first: (argument, times wrong).
    wrong_arguments: tuple[tuple[str, int], ...] = ()

    @property
    def failures(self) -> int:
        """Times the tool was wrong, missing, extra or misplaced."""
        return self.wrong + self.missing + self.extra + self.misplaced


def _params(since: dt.date, until: dt.date, expectation_id: str | None) -> dict[str, Any]:
    return {"since": since.isoformat(), "until": until.isoformat(), "exp": expectation_id}


def most_often_wrong(
    conn: Connection,
    since: dt.date,
    until: dt.date,
    expectation_id: str | None = None,
    *,
    limit: int = 10,
    arguments: int = 3,
) -> list[ToolScore]:
    """Up to ``limit`` tools with failures on the days ``since``..``until`` (inclusive), most
    failures first (then most points lost), each with up to ``arguments`` wrong arguments."""
    exp_filter = "AND expectation_id = :exp" if expectation_id else ""
    where = f"WHERE day >= :since AND day <= :until {exp_filter}"
    params = {**_params(since, until, expectation_id), "limit": limit}
    rows = conn.execute(
        text(
            "SELECT metric, tool, SUM(expected), SUM(called), SUM(matched), SUM(wrong),"
            " SUM(missing), SUM(extra), SUM(misplaced), SUM(points_lost) AS lost"
            f" FROM tool_scores {where} GROUP BY metric, tool"
            " HAVING SUM(wrong) + SUM(missing) + SUM(extra) + SUM(misplaced) > 0"
            " ORDER BY SUM(wrong) + SUM(missing) + SUM(extra) + SUM(misplaced) DESC,"
            " lost DESC, metric, tool LIMIT :limit"
        ),
        params,
    ).all()
    found = [_tool_score(row) for row in rows]
    if not found or arguments <= 0:
        return found
    by_tool = _wrong_arguments(conn, where, params, {(s.metric, s.tool) for s in found})
    return [
        replace(s, wrong_arguments=tuple(by_tool.get((s.metric, s.tool), [])[:arguments]))
        for s in found
    ]


def _tool_score(row: Any) -> ToolScore:
    metric, tool, expected, called, matched, wrong, missing, extra, misplaced, lost = row
    return ToolScore(
        metric=str(metric),
        tool=str(tool),
        expected=int(expected or 0),
        called=int(called or 0),
        matched=int(matched or 0),
        wrong=int(wrong or 0),
        missing=int(missing or 0),
        extra=int(extra or 0),
        misplaced=int(misplaced or 0),
        points_lost=float(lost or 0.0),
    )


def _wrong_arguments(
    conn: Connection, where: str, params: dict[str, Any], wanted: set[tuple[str, str]]
) -> dict[tuple[str, str], list[tuple[str, int]]]:
    rows = conn.execute(
        text(
            "SELECT metric, tool, argument, SUM(wrong) AS n, SUM(points_lost) AS lost"
            f" FROM tool_argument_scores {where} GROUP BY metric, tool, argument"
            " ORDER BY n DESC, lost DESC, argument"
        ),
        params,
    ).all()
    out: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for metric, tool, argument, n, _ in rows:
        if (metric, tool) in wanted:
            out.setdefault((metric, tool), []).append((str(argument), int(n)))
    return out


def thresholds(
    conn: Connection, since: dt.date, until: dt.date, expectation_id: str | None = None
) -> dict[tuple[str, str], float]:
    """The pass threshold of each expectation and metric instance scored on the days (the
    highest, should it have changed: ``current_scores`` gives each row today's)."""
    exp_filter = "AND expectation_id = :exp" if expectation_id else ""
    rows = conn.execute(
        text(
            "SELECT expectation_id, metric, MAX(threshold) FROM current_scores"
            f" WHERE day >= :since AND day <= :until {exp_filter}"
            " GROUP BY expectation_id, metric"
        ),
        _params(since, until, expectation_id),
    ).all()
    return {(str(e), str(m)): float(t) for e, m, t in rows if t is not None}
