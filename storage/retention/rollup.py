"""The daily rollup of deleted conversations' scores and what history retention last did
(migration 0012).

``daily_score_rollup`` holds, per day, expectation, metric instance, metric type and score, how
many current evaluations of conversations deleted by history retention had that score; the
``daily_scores`` view adds it to the live current scores, so a day's row does not change when
its conversations are deleted. ``history_retention`` is one row: the newest cutoff applied.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Boolean,
    Connection,
    Float,
    Integer,
    Table,
    Text,
    case,
    column,
    inspect,
    select,
    table,
)
from sqlalchemy.orm import Mapped, mapped_column

from toolscore.storage.base import Base, Int64, UtcDateTime
from toolscore.storage.plumbing.chunks import chunks
from toolscore.storage.plumbing.dialect import insert_for


class DailyScoreRollup(Base):
    __tablename__ = "daily_score_rollup"

    day: Mapped[str] = mapped_column(Text, primary_key=True)
    expectation_id: Mapped[str] = mapped_column(Text, primary_key=True)
    metric: Mapped[str] = mapped_column(Text, primary_key=True)
    metric_type: Mapped[str] = mapped_column(Text, primary_key=True)
    scored: Mapped[bool] = mapped_column(Boolean, primary_key=True)  # false: no score (error)
    score: Mapped[float] = mapped_column(Float, primary_key=True)  # 0 when not scored
    evaluations: Mapped[int] = mapped_column(Int64, nullable=False)


class HistoryRetention(Base):
    __tablename__ = "history_retention"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    cutoff_ns: Mapped[int] = mapped_column(Int64, nullable=False)  # newest cutoff applied
    conversations: Mapped[int] = mapped_column(Int64, nullable=False)  # deleted so far
    pruned_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, nullable=False)


daily_score_rollup: Table = DailyScoreRollup.__table__  # type: ignore[assignment]
history_retention: Table = HistoryRetention.__table__  # type: ignore[assignment]

# the current_scores view's columns that the rollups read (tool_rollup.py too)
current_scores_view = table(
    "current_scores",
    column("evaluation_id"),
    column("conversation_id"),
    column("day"),
    column("expectation_id"),
    column("metric"),
    column("metric_type"),
    column("score"),
)


def roll_up(conn: Connection, conversation_ids: Sequence[str]) -> int:
    """Add the current evaluations of ``conversation_ids`` to the rollup (in the caller's
    transaction, before it deletes them); returns how many evaluations were added."""
    cs = current_scores_view.c
    counts: Counter[tuple[str, str, str, str, bool, float]] = Counter()
    for chunk in chunks(conversation_ids):
        rows = conn.execute(
            select(cs.day, cs.expectation_id, cs.metric, cs.metric_type, cs.score).where(
                cs.conversation_id.in_(chunk)
            )
        )
        for day, exp, metric, metric_type, score in rows:
            scored = score is not None
            counts[(str(day), exp, metric, metric_type, scored, float(score or 0.0))] += 1
    keys = ("day", "expectation_id", "metric", "metric_type", "scored", "score")
    added = [
        {**dict(zip(keys, k, strict=True)), "evaluations": n} for k, n in sorted(counts.items())
    ]
    add_counts(conn, daily_score_rollup, added, keys, ("evaluations",))
    return sum(counts.values())


def add_counts(
    conn: Connection,
    target: Table,
    rows: list[dict[str, Any]],
    keys: Sequence[str],
    summed: Sequence[str],
) -> None:
    """Insert ``rows`` into the rollup ``target``, adding the ``summed`` columns to a row that
    has the same ``keys``. Callers pass rows sorted by key: concurrent passes (several servers)
    then lock rollup rows in one order."""
    if not rows:
        return
    ins = insert_for(conn, target)
    conn.execute(
        ins.on_conflict_do_update(
            index_elements=list(keys),
            set_={c: target.c[c] + getattr(ins.excluded, c) for c in summed},
        ),
        rows,
    )


@dataclass(frozen=True, slots=True)
class HistoryState:
    cutoff: dt.datetime  # conversations whose last span arrived before this may be deleted
    conversations: int
    pruned_at: dt.datetime


def record_pass(conn: Connection, cutoff_ns: int, deleted: int, now: dt.datetime) -> None:
    """Remember the newest cutoff applied and count the conversations deleted."""
    ins = insert_for(conn, history_retention)
    h = history_retention.c
    conn.execute(
        ins.on_conflict_do_update(
            index_elements=[h.id],
            set_={
                "cutoff_ns": case(
                    (ins.excluded.cutoff_ns > h.cutoff_ns, ins.excluded.cutoff_ns),
                    else_=h.cutoff_ns,
                ),
                "conversations": h.conversations + ins.excluded.conversations,
                "pruned_at": ins.excluded.pruned_at,
            },
        ),
        {"id": 1, "cutoff_ns": cutoff_ns, "conversations": deleted, "pruned_at": now},
    )


def supported(conn: Connection) -> bool:
    """Whether the database has the history retention tables (migration 0012)."""
    return bool(inspect(conn).has_table("history_retention"))


def state(conn: Connection) -> HistoryState | None:
    """What history retention did last (None: never ran, or the database predates it)."""
    if not supported(conn):
        return None
    h = history_retention.c
    row = conn.execute(select(h.cutoff_ns, h.conversations, h.pruned_at)).first()
    if row is None:
        return None
    cutoff = dt.datetime.fromtimestamp(int(row.cutoff_ns) / 1e9, dt.UTC)
    return HistoryState(cutoff, int(row.conversations), row.pruned_at)
