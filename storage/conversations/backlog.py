"""Cheap questions about the service's backlog, asked every few seconds (indexed queries only)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, func, select, true

from toolscore.storage.conversations.tables import STATUSES, conversations, evaluations
from toolscore.storage.history.outbox import evaluation_exports


@dataclass(frozen=True, slots=True)
class Backlog:
    waiting: int  # conversations that need scoring (new spans since their last scoring)
    oldest_waiting_s: float | None  # age of the oldest one's last span; None when none waits
    export_pending: int  # evaluations not yet written back
    export_failing: int  # of those, the ones whose last attempt failed


def backlog(conn: Connection, now: dt.datetime) -> Backlog:
    """What waits to be scored and to be written back."""
    c = conversations.c
    waiting, oldest = conn.execute(
        # "= true", as the partial pending index is written
        # (storage.conversations.tables.PENDING_SQLITE)
        select(func.count(), func.min(c.last_span_at)).where(c.needs_scoring == true())
    ).one()
    x = evaluation_exports.c
    pending, failing = conn.execute(
        select(func.count(), func.count().filter(x.attempts > 0)).where(x.exported_at.is_(None))
    ).one()
    age = None
    if oldest is not None:
        age = max(0.0, (now - _aware(oldest)).total_seconds())
    return Backlog(int(waiting), age, int(pending), int(failing))


def _aware(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def backlog_reader(engine: Engine) -> Callable[[], Backlog]:
    """:func:`backlog` on a connection of its own each call (for a polling thread)."""

    def read() -> Backlog:
        with engine.connect() as conn:
            return backlog(conn, dt.datetime.now(dt.UTC))

    return read


def conversations_by_status(conn: Connection) -> dict[str, int]:
    """How many conversations have each status, and how many carry a warning
    (:data:`WITH_WARNING`; a scan of ``conversations``: poll it rarely).
    A count per status rather than ``GROUP BY``, which sorts every row in a temporary b-tree
    (held in memory by serve's SQLite connections: 38 MB at 790,000 conversations)."""
    c = conversations.c
    columns = [func.count().filter(c.status == s) for s in STATUSES]
    columns.append(func.count().filter(c.warning.is_not(None)))
    counts = conn.execute(select(*columns)).one()
    keys = (*STATUSES, WITH_WARNING)
    return {key: int(n) for key, n in zip(keys, counts, strict=True) if n}


#: The key of :func:`conversations_by_status`'s count of conversations carrying a warning.
WITH_WARNING = "with_warning"


def status_counts_reader(engine: Engine) -> Callable[[], dict[str, int]]:
    """:func:`conversations_by_status` on a connection of its own each call."""

    def read() -> dict[str, int]:
        with engine.connect() as conn:
            return conversations_by_status(conn)

    return read


@dataclass(frozen=True, slots=True)
class ScoredEvaluation:
    id: int
    metric: str
    metric_type: str
    score: float | None
    details: Any = None  # its label when not evaluated (collector/pipeline/not_evaluated.py)


def last_evaluation_id(conn: Connection) -> int:
    return int(conn.execute(select(func.max(evaluations.c.id))).scalar() or 0)


def evaluations_after(conn: Connection, after_id: int, limit: int) -> list[ScoredEvaluation]:
    """Evaluation rows with an id above ``after_id``, oldest first (at most ``limit``)."""
    e = evaluations.c
    rows = conn.execute(
        select(e.id, e.metric, e.metric_type, e.score, e.details)
        .where(e.id > after_id)
        .order_by(e.id)
        .limit(limit)
    ).all()
    return [ScoredEvaluation(int(i), m, t, s, d) for i, m, t, s, d in rows]


def evaluation_reader(
    engine: Engine, limit: int = 10_000
) -> Callable[[int | None], tuple[list[ScoredEvaluation], dict[str, float], int]]:
    """For a polling thread: evaluations above an id, the pass thresholds, the highest id."""
    from toolscore.storage.history.outbox import load_thresholds

    def read(after_id: int | None) -> tuple[list[ScoredEvaluation], dict[str, float], int]:
        with engine.connect() as conn:
            rows = [] if after_id is None else evaluations_after(conn, after_id, limit)
            return rows, load_thresholds(conn), last_evaluation_id(conn)

    return read
