"""The export outbox: which evaluations have reached the user's OTLP backend (migration ``0004``).

One ``evaluation_exports`` row per evaluation. A row is *pending* until both its span and its log
record were acknowledged by the sink (``spans_exported_at`` / ``logs_exported_at``, so a retry only
resends what was not delivered), then ``exported_at`` is set. Claiming a batch pushes the row's
``next_attempt_at`` forward by a lease, so a process that dies mid-export leaves the rows to be
retried after the lease (at-least-once), and several processes sharing PostgreSQL never take the
same rows (``FOR UPDATE SKIP LOCKED``). Failures back off exponentially.

``metric_thresholds`` holds the pass threshold per metric instance (or metric type): the one place
that the write-back labels, the SQL views' pass rate and ``toolscore report`` all read. Metrics
without a row use :data:`DEFAULT_PASS_THRESHOLD`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Connection,
    Float,
    Index,
    Integer,
    Table,
    Text,
    and_,
    func,
    select,
    update,
)
from sqlalchemy.orm import Mapped, mapped_column

from toolscore.storage.base import Base, UtcDateTime
from toolscore.storage.conversations.tables import evaluations
from toolscore.storage.plumbing.dialect import (
    insert_ignore_duplicates,
    json_text,
    skip_locked,
    upsert,
)
from toolscore.storage.telemetry.spans import load_resource, spans_table
from toolscore.storage.telemetry.traces import traces_table

DEFAULT_PASS_THRESHOLD = 1.0
# New evaluations are found by an anti-join restricted to ids above (highest enqueued - slack):
# PostgreSQL sequences can commit out of order, the slack covers transactions still in flight.
ENQUEUE_ID_SLACK = 10_000


class EvaluationExport(Base):
    __tablename__ = "evaluation_exports"

    evaluation_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    enqueued_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, nullable=False)
    next_attempt_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, nullable=False)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    spans_exported_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)
    logs_exported_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)
    exported_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # signals not sent because the target does not implement them (comma-separated)
    skipped_signals: Mapped[str | None] = mapped_column(Text, nullable=True)

    __table_args__ = (Index(None, "exported_at", "next_attempt_at"),)


class MetricThreshold(Base):
    __tablename__ = "metric_thresholds"

    metric: Mapped[str] = mapped_column(Text, primary_key=True)
    threshold: Mapped[float] = mapped_column(Float, nullable=False)


evaluation_exports: Table = EvaluationExport.__table__  # type: ignore[assignment]
metric_thresholds: Table = MetricThreshold.__table__  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class ExportItem:
    """A claimed evaluation with everything the exporter needs, and what is left to send."""

    evaluation_id: int
    conversation_id: str
    revision: int
    trace_id: str
    root_span_id: str | None
    expectation_id: str | None
    expectation_version: int | None
    metric: str
    metric_type: str
    metric_config: Any
    score: float | None
    error: str | None
    details: Any
    predicted_count: int | None
    expected_count: int | None
    created_at: dt.datetime
    attempts: int  # attempts before this one
    needs_span: bool
    needs_log: bool
    # the evaluated trace as stored (None when its spans are gone or never came): the root
    # span's bounds (else the trace's) and the resource attributes of its root span
    bounds_ns: tuple[int, int] | None = None
    resource: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class OutboxCounts:
    pending: int
    exported: int
    failing: int  # pending rows that failed at least once


def enqueue_new(conn: Connection, now: dt.datetime, limit: int = 1000) -> int:
    """Add outbox rows for evaluations that have none yet; returns how many were added."""
    highest = conn.execute(select(func.max(evaluation_exports.c.evaluation_id))).scalar()
    floor = (int(highest) - ENQUEUE_ID_SLACK) if highest is not None else None
    query = (
        select(evaluations.c.id)
        .outerjoin(evaluation_exports, evaluation_exports.c.evaluation_id == evaluations.c.id)
        .where(evaluation_exports.c.evaluation_id.is_(None))
        .order_by(evaluations.c.id)
        .limit(limit)
    )
    if floor is not None:
        query = query.where(evaluations.c.id > floor)
    ids = list(conn.execute(query).scalars())
    rows = [
        {"evaluation_id": i, "enqueued_at": now, "next_attempt_at": now, "attempts": 0} for i in ids
    ]
    insert_ignore_duplicates(conn, evaluation_exports, rows, index_elements=["evaluation_id"])
    return len(rows)


def evaluation_columns() -> list[Any]:
    """What an :class:`ExportItem` is made of, from ``evaluations``."""
    e = evaluations.c
    return [
        e.conversation_id,
        e.revision,
        e.trace_id,
        e.root_span_id,
        e.expectation_id,
        e.expectation_version,
        e.metric,
        e.metric_type,
        e.metric_config,
        e.score,
        e.error,
        e.details,
        e.predicted_count,
        e.expected_count,
        e.created_at,
    ]


def export_item(
    r: Mapping[Any, Any],
    *,
    needs_span: bool,
    needs_log: bool,
    trace: tuple[tuple[int, int] | None, Mapping[str, Any] | None] = (None, None),
) -> ExportItem:
    """An :class:`ExportItem` from a row holding :func:`evaluation_columns` (and the outbox's)."""
    return ExportItem(
        evaluation_id=r["evaluation_id"],
        conversation_id=r["conversation_id"],
        revision=r["revision"],
        trace_id=r["trace_id"],
        root_span_id=r["root_span_id"],
        expectation_id=r["expectation_id"],
        expectation_version=r["expectation_version"],
        metric=r["metric"],
        metric_type=r["metric_type"],
        metric_config=r["metric_config"],
        score=r["score"],
        error=r["error"],
        details=r["details"],
        predicted_count=r["predicted_count"],
        expected_count=r["expected_count"],
        created_at=r["created_at"],
        attempts=r["attempts"],
        needs_span=needs_span,
        needs_log=needs_log,
        bounds_ns=trace[0],
        resource=trace[1],
    )


def claim_batch(
    conn: Connection, now: dt.datetime, limit: int, lease: dt.timedelta
) -> list[ExportItem]:
    """Take up to ``limit`` due rows (oldest first) and lease them until ``now + lease``."""
    x, e = evaluation_exports, evaluations
    query = (
        select(
            x.c.evaluation_id,
            x.c.attempts,
            x.c.spans_exported_at,
            x.c.logs_exported_at,
            *evaluation_columns(),
        )
        .join(e, e.c.id == x.c.evaluation_id)
        .where(and_(x.c.exported_at.is_(None), x.c.next_attempt_at <= now))
        .order_by(x.c.next_attempt_at, x.c.evaluation_id)
        .limit(limit)
    )
    query = skip_locked(conn, query, of=evaluation_exports)
    rows = conn.execute(query).mappings().all()
    if not rows:
        return []
    conn.execute(
        update(x)
        .where(x.c.evaluation_id.in_([r["evaluation_id"] for r in rows]))
        .values(next_attempt_at=now + lease)
    )
    traces = evaluated_traces(conn, [(r["trace_id"], r["root_span_id"]) for r in rows])
    return [
        export_item(
            r,
            needs_span=r["spans_exported_at"] is None,
            needs_log=r["logs_exported_at"] is None,
            trace=traces.get(r["trace_id"], (None, None)),
        )
        for r in rows
    ]


def evaluated_traces(
    conn: Connection, roots: Sequence[tuple[str, str | None]]
) -> dict[str, tuple[tuple[int, int] | None, Mapping[str, Any] | None]]:
    """By trace id: (the root span's start and end, else the trace's first start and last end;
    the root span's resource attributes), for the stored ones among ``roots``."""
    s, t = spans_table.c, traces_table.c
    trace_ids = sorted({trace for trace, _ in roots if trace})
    wanted = {(trace, root) for trace, root in roots if root}
    found: dict[str, tuple[tuple[int, int] | None, Mapping[str, Any] | None]] = {}
    if not trace_ids:
        return found
    root_rows = conn.execute(
        select(t.trace_id, s.span_id, s.start_ns, s.end_ns, json_text(s.resource_attributes))
        .select_from(traces_table.join(spans_table, s.trace_seq == t.seq))
        .where(t.trace_id.in_(trace_ids), s.span_id.in_(sorted({r for _, r in wanted})))
    ).all()
    for trace, span, start, end, resource in root_rows:
        if (trace, span) in wanted:
            found[trace] = ((int(start), int(end)), load_resource(conn, _decoded(resource)))
    rest = [trace for trace in trace_ids if trace not in found]
    if rest:
        spans = (
            select(t.trace_id, func.min(s.start_ns), func.max(s.end_ns))
            .select_from(traces_table.join(spans_table, s.trace_seq == t.seq))
            .where(t.trace_id.in_(rest))
            .group_by(t.trace_id)
        )
        for trace, start, end in conn.execute(spans).all():
            if start is not None and end is not None:
                found[trace] = ((int(start), int(end)), None)
    return found


def _decoded(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


SIGNAL_COLUMNS = {"traces": "spans_exported_at", "logs": "logs_exported_at"}


def record_results(
    conn: Connection,
    now: dt.datetime,
    spans_done: Sequence[int],
    logs_done: Sequence[int],
    failed: Mapping[int, tuple[str, dt.datetime]],
    *,
    skipped: Mapping[str, Sequence[int]] | None = None,
    signals: Sequence[str] = ("traces", "logs"),
) -> None:
    """Store what the sink acknowledged; failed rows get their error and next attempt time.

    ``failed`` maps an evaluation id to (error text, when to try again); ``skipped`` maps a
    signal to the rows not sent on it because the target does not implement it (they count as
    done for that signal). A row is exported once each of ``signals`` was acknowledged or
    skipped (in this attempt or an earlier one).
    """
    x = evaluation_exports
    if spans_done:
        conn.execute(
            update(x).where(x.c.evaluation_id.in_(spans_done)).values(spans_exported_at=now)
        )
    if logs_done:
        conn.execute(update(x).where(x.c.evaluation_id.in_(logs_done)).values(logs_exported_at=now))
    for signal, ids in (skipped or {}).items():
        if ids:
            marked = func.coalesce(x.c.skipped_signals + ",", "") + signal
            conn.execute(
                update(x)
                .where(x.c.evaluation_id.in_(ids), x.c[SIGNAL_COLUMNS[signal]].is_(None))
                .values({SIGNAL_COLUMNS[signal]: now, "skipped_signals": marked})
            )
    touched = sorted(
        set(spans_done)
        | set(logs_done)
        | set(failed)
        | {i for v in (skipped or {}).values() for i in v}
    )
    if touched:
        conn.execute(
            update(x)
            .where(
                and_(
                    x.c.evaluation_id.in_(touched),
                    *(x.c[SIGNAL_COLUMNS[signal]].is_not(None) for signal in signals),
                    x.c.exported_at.is_(None),
                )
            )
            .values(exported_at=now, last_error=None)
        )
    for evaluation_id, (error, retry_at) in failed.items():
        conn.execute(
            update(x)
            .where(x.c.evaluation_id == evaluation_id)
            .values(attempts=x.c.attempts + 1, last_error=error[:2000], next_attempt_at=retry_at)
        )


def counts(conn: Connection) -> OutboxCounts:
    """How many outbox rows are pending, exported, and pending after a failure."""
    x = evaluation_exports
    pending = conn.execute(
        select(func.count()).select_from(x).where(x.c.exported_at.is_(None))
    ).scalar_one()
    exported = conn.execute(
        select(func.count()).select_from(x).where(x.c.exported_at.is_not(None))
    ).scalar_one()
    failing = conn.execute(
        select(func.count()).select_from(x).where(and_(x.c.exported_at.is_(None), x.c.attempts > 0))
    ).scalar_one()
    return OutboxCounts(pending=int(pending), exported=int(exported), failing=int(failing))


def load_thresholds(conn: Connection) -> dict[str, float]:
    """Pass thresholds by metric instance name (or metric type)."""
    rows = conn.execute(select(metric_thresholds.c.metric, metric_thresholds.c.threshold))
    return {str(m): float(t) for m, t in rows}


def save_thresholds(conn: Connection, thresholds: Mapping[str, float]) -> None:
    """Set (insert or replace) the pass threshold of each named metric."""
    rows = [{"metric": m, "threshold": float(t)} for m, t in thresholds.items()]
    upsert(conn, metric_thresholds, rows, index_elements=["metric"], update_columns=["threshold"])
