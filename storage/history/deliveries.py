"""The annotation targets' outbox (migration ``0017``): one row per evaluation and target.

A target is named by its kind and URL (``phoenix=http://host:6006``), so pointing toolscore at
another Phoenix delivers the history again. A row is due until ``done_at`` is set, with the
``outcome``: ``delivered``, ``superseded`` (a newer revision of the same conversation and metric
exists: it is delivered instead, never overwritten by this one), ``skipped`` (the target cannot
hold it, e.g. Langfuse and an evaluation without a score), ``not_found`` (the backend never
ingested the evaluated trace: given up) or ``rejected`` (the backend refused it for good).
Claiming pushes ``next_attempt_at`` forward by a lease, as the OTLP outbox does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, Index, Integer, Table, Text, and_, func, select, update
from sqlalchemy.orm import Mapped, mapped_column

from toolscore.storage.base import Base, UtcDateTime
from toolscore.storage.conversations.tables import evaluations
from toolscore.storage.history.outbox import (
    ENQUEUE_ID_SLACK,
    ExportItem,
    evaluation_columns,
    export_item,
)
from toolscore.storage.plumbing.dialect import insert_ignore_duplicates, skip_locked

OUTCOMES = ("delivered", "superseded", "skipped", "not_found", "rejected")


class AnnotationDelivery(Base):
    __tablename__ = "annotation_deliveries"

    target: Mapped[str] = mapped_column(Text, primary_key=True)
    evaluation_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    enqueued_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, nullable=False)
    next_attempt_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, nullable=False)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    done_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)
    outcome: Mapped[str | None] = mapped_column(Text, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)

    __table_args__ = (Index(None, "target", "done_at", "next_attempt_at"),)


annotation_deliveries: Table = AnnotationDelivery.__table__  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class Delivery:
    """A claimed row: the evaluation, whether it is still the current revision, its age."""

    item: ExportItem
    is_current: bool
    enqueued_at: dt.datetime


@dataclass(frozen=True, slots=True)
class Retry:
    error: str
    at: dt.datetime


def enqueue_new(conn: Connection, target: str, now: dt.datetime, limit: int = 1000) -> int:
    """Add ``target``'s rows for evaluations that have none yet; returns how many were added."""
    d = annotation_deliveries.c
    highest = conn.execute(select(func.max(d.evaluation_id)).where(d.target == target)).scalar()
    on = and_(d.evaluation_id == evaluations.c.id, d.target == target)
    query = (
        select(evaluations.c.id)
        .outerjoin(annotation_deliveries, on)
        .where(d.evaluation_id.is_(None))
        .order_by(evaluations.c.id)
        .limit(limit)
    )
    if highest is not None:
        query = query.where(evaluations.c.id > int(highest) - ENQUEUE_ID_SLACK)
    ids = list(conn.execute(query).scalars())
    rows = [
        {
            "target": target,
            "evaluation_id": i,
            "enqueued_at": now,
            "next_attempt_at": now,
            "attempts": 0,
        }
        for i in ids
    ]
    insert_ignore_duplicates(
        conn, annotation_deliveries, rows, index_elements=["target", "evaluation_id"]
    )
    return len(rows)


def claim_batch(
    conn: Connection, target: str, now: dt.datetime, limit: int, lease: dt.timedelta
) -> list[Delivery]:
    """Take up to ``limit`` of ``target``'s due rows (oldest first), leased until now + lease."""
    d, e = annotation_deliveries.c, evaluations.c
    query = (
        select(d.evaluation_id, d.attempts, d.enqueued_at, e.is_current, *evaluation_columns())
        .join(evaluations, e.id == d.evaluation_id)
        .where(d.target == target, d.done_at.is_(None), d.next_attempt_at <= now)
        .order_by(d.next_attempt_at, d.evaluation_id)
        .limit(limit)
    )
    rows = conn.execute(skip_locked(conn, query, of=annotation_deliveries)).mappings().all()
    if not rows:
        return []
    conn.execute(
        update(annotation_deliveries)
        .where(d.target == target, d.evaluation_id.in_([r["evaluation_id"] for r in rows]))
        .values(next_attempt_at=now + lease)
    )
    return [
        Delivery(
            export_item(r, needs_span=False, needs_log=False),
            bool(r["is_current"]),
            r["enqueued_at"],
        )
        for r in rows
    ]


def record(
    conn: Connection,
    target: str,
    now: dt.datetime,
    done: Mapping[int, str],
    retries: Mapping[int, Retry],
) -> None:
    """``done`` maps evaluation ids to their final outcome; ``retries`` to their next attempt."""
    d = annotation_deliveries.c
    for outcome in sorted(set(done.values())):
        ids = [i for i, o in done.items() if o == outcome]
        conn.execute(
            update(annotation_deliveries)
            .where(d.target == target, d.evaluation_id.in_(ids))
            .values(done_at=now, outcome=outcome)
        )
    for evaluation_id, retry in retries.items():
        conn.execute(
            update(annotation_deliveries)
            .where(d.target == target, d.evaluation_id == evaluation_id)
            .values(
                attempts=d.attempts + 1, last_error=retry.error[:2000], next_attempt_at=retry.at
            )
        )


def pending(conn: Connection, targets: Sequence[str]) -> dict[str, int]:
    """Rows not yet done, by target."""
    d = annotation_deliveries.c
    rows = conn.execute(
        select(d.target, func.count())
        .where(d.done_at.is_(None), d.target.in_(targets))
        .group_by(d.target)
    ).all()
    found = {str(t): int(n) for t, n in rows}
    return {t: found.get(t, 0) for t in targets}
