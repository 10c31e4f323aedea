"""Re-scoring runs (migration ``0004``): what a ``toolscore rescore`` run set out to do and did.

A run records its filters and a hash of the scoring configuration; each conversation it handled
gets a ``rescore_run_items`` row written in the same transaction as the conversation's new
revision, so an interrupted run resumed with ``--resume RUN`` skips exactly what was done.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Connection,
    Index,
    Integer,
    PrimaryKeyConstraint,
    Table,
    Text,
    and_,
    func,
    or_,
    select,
)
from sqlalchemy.orm import Mapped, mapped_column

from toolscore.storage.base import Base, UtcDateTime
from toolscore.storage.conversations.tables import STATUS_OPEN, conversations, evaluations
from toolscore.storage.plumbing.dialect import insert_ignore_duplicates

OUTCOME_RESCORED = "rescored"  # a new revision was written
OUTCOME_UNCHANGED = "unchanged"  # same expectation version, configuration and results: no write
OUTCOME_MISSING = "missing"  # the conversation no longer exists


class RescoreRun(Base):
    __tablename__ = "rescore_runs"

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    started_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, nullable=False)
    finished_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)
    expectation_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    since: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)
    config_hash: Mapped[str] = mapped_column(Text, nullable=False)


class RescoreRunItem(Base):
    __tablename__ = "rescore_run_items"

    run_id: Mapped[str] = mapped_column(Text, nullable=False)
    conversation_id: Mapped[str] = mapped_column(Text, nullable=False)
    outcome: Mapped[str] = mapped_column(Text, nullable=False)
    revision: Mapped[int | None] = mapped_column(Integer, nullable=True)
    done_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, nullable=False)

    __table_args__ = (
        PrimaryKeyConstraint("run_id", "conversation_id"),
        # history retention deletes a conversation's items (migration 0012)
        Index(None, "conversation_id"),
    )


rescore_runs: Table = RescoreRun.__table__  # type: ignore[assignment]
rescore_run_items: Table = RescoreRunItem.__table__  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class Run:
    id: str
    started_at: dt.datetime
    finished_at: dt.datetime | None
    expectation_id: str | None
    since: dt.datetime | None
    config_hash: str


def create_run(conn: Connection, run: Run) -> None:
    conn.execute(
        rescore_runs.insert().values(
            id=run.id,
            started_at=run.started_at,
            finished_at=run.finished_at,
            expectation_id=run.expectation_id,
            since=run.since,
            config_hash=run.config_hash,
        )
    )


def get_run(conn: Connection, run_id: str) -> Run | None:
    row = conn.execute(select(rescore_runs).where(rescore_runs.c.id == run_id)).mappings().first()
    return Run(**dict(row)) if row else None


def finish_run(conn: Connection, run_id: str, now: dt.datetime) -> None:
    conn.execute(rescore_runs.update().where(rescore_runs.c.id == run_id).values(finished_at=now))


def candidates(conn: Connection, run: Run) -> list[str]:
    """Conversations the run covers (completed ones: open ones are the pipeline's), by id."""
    c = conversations.c
    query = select(c.id).where(c.status != STATUS_OPEN).order_by(c.id)
    if run.expectation_id is not None:
        query = query.where(
            or_(c.expectation_id == run.expectation_id, c.reference_id == run.expectation_id)
        )
    if run.since is not None:
        query = query.where(c.last_span_at >= run.since)
    return [str(x) for x in conn.execute(query).scalars()]


def done_ids(conn: Connection, run_id: str) -> set[str]:
    i = rescore_run_items.c
    return {
        str(x) for x in conn.execute(select(i.conversation_id).where(i.run_id == run_id)).scalars()
    }


def record_items(
    conn: Connection,
    run_id: str,
    items: Sequence[tuple[str, str, int | None]],
    now: dt.datetime,
) -> None:
    """Mark (conversation id, outcome, revision) items done in ``run_id`` (idempotent)."""
    rows = [
        {"run_id": run_id, "conversation_id": c, "outcome": o, "revision": r, "done_at": now}
        for c, o, r in items
    ]
    insert_ignore_duplicates(conn, rescore_run_items, rows, ["run_id", "conversation_id"])


def outcome_counts(conn: Connection, run_id: str) -> dict[str, int]:
    i = rescore_run_items.c
    counts: dict[str, int] = {}
    for (outcome,) in conn.execute(select(i.outcome).where(i.run_id == run_id)):
        counts[str(outcome)] = counts.get(str(outcome), 0) + 1
    return counts


def unfinished_runs(conn: Connection) -> list[Run]:
    rows = conn.execute(
        select(rescore_runs)
        .where(and_(rescore_runs.c.finished_at.is_(None)))
        .order_by(rescore_runs.c.started_at)
    ).mappings()
    return [Run(**dict(r)) for r in rows]


def recorded_metric_configs(conn: Connection) -> dict[str, dict[str, Any]]:
    """Each metric instance the server has scored with, as its latest evaluation recorded it
    (``metric_config``, the instance's normalised options), by instance name."""
    e = evaluations.c
    latest = (
        select(func.max(e.id))
        .where(e.metric_type != "unknown")
        .group_by(e.metric)
        .scalar_subquery()
    )
    rows = conn.execute(select(e.metric, e.metric_config).where(e.id.in_(latest))).all()
    return {name: dict(options) for name, options in sorted(rows)}


def current_evaluations(conn: Connection, ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """The current revision's evaluation rows of each conversation of ``ids``."""
    e = evaluations.c
    rows: dict[str, list[dict[str, Any]]] = {i: [] for i in ids}
    query = select(evaluations).where(e.conversation_id.in_(list(ids)), e.is_current.is_(True))
    for r in conn.execute(query).mappings():
        rows[r["conversation_id"]].append(dict(r))
    return rows
