"""What each page of the web UI shows, read from the database (blocking: run in a thread).

Every function takes the engine first and returns the template's context (plain values and
frozen dataclasses); the HTML is the templates' business.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from toolscore.collector.ui.alignment import Call, align, flatten
from toolscore.storage.conversations.browse import (
    ConversationFilter,
    PageKey,
    coverage,
    page,
    revisions,
)
from toolscore.storage.database import Engine

PAGE_SIZE = 50
REPORT_DAYS = 14
CHARTS = 12  # overview charts: the series with the lowest pass rates
STATUSES = ("open", "scored", "unmatched", "error")


@dataclass(frozen=True, slots=True)
class LiveStatus:
    """``serve``'s own figures, read when a page is drawn (absent in ``toolscore ui``)."""

    spans_per_second: Callable[[], float | None]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def aggregates(engine: Engine) -> dict[str, Any]:
    """The overview's figures that scan the period (cached by the server)."""
    from toolscore.storage.history.overview import daily_summary
    from toolscore.storage.history.reports import worst_scores
    from toolscore.storage.history.tool_scores import most_often_wrong

    now = _now()
    today = now.date()
    since = today - dt.timedelta(days=REPORT_DAYS - 1)
    start = dt.datetime.combine(since, dt.time(), dt.UTC)
    with engine.connect() as conn:
        days = daily_summary(conn, start, now + dt.timedelta(seconds=1))
        day = coverage(conn, now - dt.timedelta(days=1))
        week = coverage(conn, now - dt.timedelta(days=7))
        tools = tuple(most_often_wrong(conn, since, today, None, limit=10))
        worst = worst_scores(conn, since, today, None, limit=10)
    return {
        "series": _series(days),
        "coverage": {"last 24 hours": day, "last 7 days": week},
        "tools": tools,
        "worst": worst,
        "since": since,
        "until": today,
        "computed_at": now,
        "pending": False,
    }


def pending_figures() -> dict[str, Any]:
    """What the pages show while the period figures are first being computed."""
    from toolscore.storage.conversations.browse import Coverage

    today = _now().date()
    empty = Coverage({}, ())
    return {
        "series": [],
        "coverage": {"last 24 hours": empty, "last 7 days": empty},
        "tools": (),
        "worst": [],
        "since": today - dt.timedelta(days=REPORT_DAYS - 1),
        "until": today,
        "computed_at": None,
        "pending": True,
    }


def _series(days: list[Any]) -> list[Any]:
    """Day summaries as the report's ``Series`` (no percentile band), one per expectation and
    metric, so the report's chart draws them."""
    from toolscore.collector.views.report.data import DailyPoint, Series

    grouped: dict[tuple[str, str], list[Any]] = {}
    limits: dict[tuple[str, str], float] = {}
    for d in days:
        point = DailyPoint(d.day, d.evaluations, d.scored, d.mean, None, None, None, d.pass_rate)
        grouped.setdefault((d.expectation_id, d.metric), []).append(point)
        limits[(d.expectation_id, d.metric)] = d.threshold
    return [Series(e, m, tuple(points), limits[(e, m)]) for (e, m), points in grouped.items()]


def overview(engine: Engine, figures: dict[str, Any], live: LiveStatus | None) -> dict[str, Any]:
    from toolscore.collector.views.report.html import chart_svg
    from toolscore.storage.conversations.backlog import backlog

    with engine.connect() as conn:
        waiting = backlog(conn, _now())
    today = figures["until"].isoformat()
    series = [
        {"series": s, "today": next((p for p in s.points if p.day == today), None)}
        for s in figures["series"]
    ]
    # Charts for the series that most need a look (the table lists every series).
    worst_first = sorted(figures["series"], key=lambda s: (s.pass_rate is None, s.pass_rate or 0))
    charts = [
        (s, Markup(chart_svg(s, figures["since"], figures["until"]))) for s in worst_first[:CHARTS]
    ]
    return {
        **figures,
        "title": "Overview",
        "series": series,
        "charts": charts,
        "charted_all": len(charts) == len(series),
        "backlog": waiting,
        "ingest_rate": live.spans_per_second() if live else None,
        "live": live is not None,
    }


def _filter(query: Mapping[str, str]) -> ConversationFilter:
    def text(name: str) -> str | None:
        value = query.get(name, "").strip()
        return value or None

    def when(name: str) -> dt.datetime | None:
        value = text(name)
        if value is None:
            return None
        try:
            parsed = dt.datetime.fromisoformat(value)
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)

    threshold = text("below")
    try:
        below = float(threshold) if threshold is not None else 1.0
    except ValueError:
        below = 1.0
    status = text("status")
    return ConversationFilter(
        status=status if status in STATUSES else None,
        expectation_id=text("expectation"),
        below_metric=text("metric"),
        below_threshold=below,
        warnings_only=query.get("warnings") == "1",
        since=when("since"),
        until=when("until"),
        text=text("q"),
    )


def _after(query: Mapping[str, str]) -> PageKey | None:
    at, _, cid = query.get("after", "").partition("|")
    if not at or not cid:
        return None
    try:
        when = dt.datetime.fromisoformat(at)
    except ValueError:
        return None
    return PageKey(when if when.tzinfo else when.replace(tzinfo=dt.UTC), cid)


def conversation_list(engine: Engine, query: Mapping[str, str]) -> dict[str, Any]:
    from toolscore.storage.conversations.reading import current_scores

    f = _filter(query)
    with engine.connect() as conn:
        found = page(conn, f, _after(query), PAGE_SIZE)
        scores: dict[str, dict[str, float | None]] = {}
        metrics: list[str] = []
        for s in current_scores(conn, [r.id for r in found.rows]):
            scores.setdefault(s.conversation_id, {})[s.metric] = s.score
            if s.metric not in metrics:
                metrics.append(s.metric)
    next_after = None
    if found.next_key is not None:
        next_after = f"{found.next_key.last_span_at.isoformat()}|{found.next_key.id}"
    kept = {k: v for k, v in query.items() if k != "after" and v}
    return {
        "title": "Conversations",
        "rows": found.rows,
        "scores": scores,
        "metrics": metrics,
        "filter": f,
        "query": kept,
        "next_after": next_after,
        "first_page": "after" not in query,
        "statuses": STATUSES,
    }


def _calls(rows: list[dict[str, Any]]) -> list[Call]:
    return [
        Call(
            i + 1,
            str(r["name"]),
            r["arguments"] if r["arguments_ok"] else r["arguments_raw"],
            f"{r['trace_id']}/{r['span_id']}" if r.get("span_id") else None,
            r.get("convention"),
        )
        for i, r in enumerate(rows)
    ]


def _reference(calls: Any) -> list[Call]:
    return [
        Call(i + 1, str(c.get("name", "?")), c.get("args", c.get("arguments")))
        for i, c in enumerate(flatten(calls))
    ]


def conversation(engine: Engine, cid: str, revision: int | None) -> dict[str, Any] | None:
    from toolscore.collector.views.conversation import load_conversation

    with engine.connect() as conn:
        data = load_conversation(conn, cid, revision=revision, messages=True, spans=True)
        if data is None:
            return None
        history = revisions(conn, cid)
    predicted = _calls(data["tool_calls"])
    reference = _reference(data["reference_tool_calls"]) if data["reference_tool_calls"] else []
    evaluations = [
        {**e, "rows": align(predicted, reference, e["details"] or {})} for e in data["evaluations"]
    ]
    return {
        "title": f"Conversation {cid}",
        "c": data["conversation"],
        "predicted": predicted,
        "reference": reference,
        "evaluations": evaluations,
        "messages": data.get("messages") or [],
        "spans": data.get("spans") or [],
        "revisions": history,
        "revision": revision,
        "expectation": data["expectation"],
    }


def rescore(engine: Engine, cid: str, scoring_config: Any | None) -> str:
    """Score ``cid`` again now (a new revision when anything changed); what happened, in words."""
    from toolscore.collector.pipeline.rescoring import rescore_one

    return rescore_one(engine, cid, scoring_config)


def promote_preview(engine: Engine, cid: str, form: Mapping[str, str]) -> dict[str, Any]:
    """What the conversation called, as an expectation in the ``refs import`` format, to review
    before importing (refused when its rebuild carries a warning, unless forced)."""
    from toolscore.collector.expectations.promote import PromoteError, promote_conversation

    match, force = form.get("match") or "conversation_id", form.get("force") == "1"
    try:
        text, error = promote_conversation(engine, cid, match=match, force=force), None
    except PromoteError as exc:
        text, error = "", str(exc)
    return {
        "title": f"Promote {cid}",
        "cid": cid,
        "yaml": text,
        "error": error,
        "match": match,
        "force": force,
    }


def promote_import(engine: Engine, cid: str, form: Mapping[str, str]) -> str:
    """Import the promoted expectation; its id."""
    from toolscore.collector.expectations.promote import MATCH_BY, PromoteError, promote
    from toolscore.storage.expectations.repository import import_expectations

    match = form.get("match") or "conversation_id"
    if match not in MATCH_BY:
        raise PromoteError(f"unknown match {match!r}")
    with engine.begin() as conn:
        found = promote(conn, cid, match_by=match, force=form.get("force") == "1")
        import_expectations(conn, [found.expectation])
    return found.expectation.id


def expectation_list(engine: Engine, figures: dict[str, Any]) -> dict[str, Any]:
    from toolscore.storage.expectations.lookup import list_expectations

    with engine.connect() as conn:
        rows = list_expectations(conn)
    evaluated: dict[str, int] = {}
    trend: dict[str, Any] = {}
    for s in figures["series"]:  # conversations evaluated: the first metric's evaluations
        if s.expectation_id not in evaluated:
            evaluated[s.expectation_id] = s.evaluations
            trend[s.expectation_id] = s
    return {
        "title": "Expectations",
        "rows": rows,
        "evaluated": evaluated,
        "trend": trend,
        "days": REPORT_DAYS,
        "pending": figures["pending"],
    }


def expectation(engine: Engine, eid: str, figures: dict[str, Any]) -> dict[str, Any] | None:
    """One expectation: its versions, and its series from the overview's (cached) figures."""
    from toolscore.collector.views.report.html import chart_svg
    from toolscore.storage.expectations.lookup import list_versions

    with engine.connect() as conn:
        versions = list_versions(conn, eid)
    if not versions:
        return None
    series = [s for s in figures["series"] if s.expectation_id == eid]
    since, until = figures["since"], figures["until"]
    return {
        "title": f"Expectation {eid}",
        "eid": eid,
        "versions": versions,
        "charts": [(s, Markup(chart_svg(s, since, until))) for s in series],
        "evaluated": series[0].evaluations if series else 0,
        "days": REPORT_DAYS,
        "computed_at": figures["computed_at"],
        "pending": figures["pending"],
    }
