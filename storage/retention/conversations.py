"""History retention: delete whole finished conversations, keep their scores in the daily rollup.

What is deleted: a conversation whose last span or log record was *received* before the cutoff
(``conversations.last_span_received_ns``; ``last_span_at`` is the same instant and indexed), once
it is done exactly as span retention means it (status ``scored``, ``unmatched`` or ``error``, not
waiting to be scored again, not claimed), and none of its evaluations waits in the write-back
outbox. With it go its rows in every table that names it: ``evaluations`` (every revision),
their ``evaluation_exports`` and ``annotation_deliveries`` rows, ``tool_calls``,
``rescore_run_items``, its ``traces`` rows (a row spans are still stored under keeps its number
and loses its conversation) and the ``conversations`` row; its spans and log records were
deleted before, by span retention's own steps (:mod:`toolscore.storage.retention.spans`: mark,
batched deletes, finish), so only a conversation whose telemetry is all gone (``pruned_at`` set,
mark at its last arrival) is deleted, and one a span reached meanwhile is left to be scored
again.

:func:`delete_conversations` is one short transaction per group: it re-checks every condition
under the locks ingest takes (SQLite: the write lock; PostgreSQL: the ``traces`` then the
conversations' row locks, ``SKIP LOCKED``, the order ingest takes them in), adds the current
evaluations to ``daily_score_rollup`` (:mod:`toolscore.storage.retention.rollup`) and their per-tool
counts to ``tool_score_rollup`` / ``tool_argument_score_rollup``
(:mod:`toolscore.storage.retention.tool_rollup`), and deletes. A span
arriving later for a deleted conversation finds its trace without a conversation and starts a
new one.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, false, func, select, text, tuple_

from toolscore.storage.conversations.tables import (
    PRUNABLE,
    STATUS_ERROR,
    STATUS_SCORED,
    STATUS_UNMATCHED,
    conversations,
    evaluations,
    tool_calls,
)
from toolscore.storage.history.deliveries import annotation_deliveries
from toolscore.storage.history.outbox import evaluation_exports
from toolscore.storage.history.rescore_runs import rescore_run_items
from toolscore.storage.plumbing.chunks import chunks
from toolscore.storage.plumbing.dialect import one_writer, skip_locked, take_write_lock
from toolscore.storage.retention.rollup import roll_up
from toolscore.storage.retention.tool_rollup import roll_up_tools
from toolscore.storage.telemetry.spans import spans_table
from toolscore.storage.telemetry.traces import traces_table

FINISHED = (STATUS_SCORED, STATUS_UNMATCHED, STATUS_ERROR)


@dataclass(frozen=True, slots=True)
class Deleted:
    """Conversations with their evaluations and tool calls: deleted, or that deleting the
    history before a cutoff would delete now (:func:`plan`, ``--dry-run``)."""

    conversations: int
    evaluations: int
    tool_calls: int

    def __add__(self, other: Deleted) -> Deleted:
        return Deleted(
            self.conversations + other.conversations,
            self.evaluations + other.evaluations,
            self.tool_calls + other.tool_calls,
        )


def _at(cutoff_ns: int) -> dt.datetime:
    """A time just after the cutoff (``last_span_at`` was rounded from the nanoseconds)."""
    return dt.datetime.fromtimestamp(cutoff_ns / 1e9, dt.UTC) + dt.timedelta(milliseconds=1)


def _finished(cutoff_ns: int) -> Any:
    c = conversations.c
    return and_(
        c.last_span_at < _at(cutoff_ns),  # the index; the exact test is the next line
        c.last_span_received_ns < cutoff_ns,
        c.status.in_(FINISHED),
        c.needs_scoring == false(),
        c.claimed_by.is_(None),
    )


def find_finished(
    conn: Connection, cutoff_ns: int, limit: int, after: tuple[dt.datetime, str] | None = None
) -> list[tuple[dt.datetime, str]]:
    """Up to ``limit`` (last arrival, id) of finished conversations older than the cutoff,
    oldest first; ``after``: those after it in that order."""
    c = conversations.c
    query = select(c.last_span_at, c.id).where(_finished(cutoff_ns))
    if after is not None:
        query = query.where(tuple_(c.last_span_at, c.id) > tuple_(*after))
    rows = conn.execute(query.order_by(c.last_span_at, c.id).limit(limit)).all()
    return [(r[0], str(r[1])) for r in rows]


def _lock_traces(conn: Connection, ids: Sequence[str]) -> set[str]:
    """PostgreSQL: lock the conversations' ``traces`` rows (trace id order, as ingest does),
    skipping rows someone holds (ingest storing spans under the number, or assigning the trace);
    the conversations some of whose traces someone else holds."""
    t = traces_table.c
    theirs = select(t.trace_id, t.conversation_id).where(t.conversation_id.in_(list(ids)))
    every = conn.execute(theirs).all()
    locked = set(conn.execute(skip_locked(conn, theirs.order_by(t.trace_id))).scalars())
    return {str(conv) for trace, conv in every if trace not in locked}


def _forget_traces(conn: Connection, chosen: Sequence[str]) -> None:
    """Delete the conversations' ``traces`` rows no span is stored under any more (span
    retention deleted their spans; see storage/telemetry/traces.py); the rest lose their
    conversation."""
    t, s = traces_table.c, spans_table.c
    spanless = ~select(s.trace_seq).where(s.trace_seq == t.seq).exists()
    conn.execute(traces_table.delete().where(t.conversation_id.in_(list(chosen)), spanless))
    conn.execute(
        traces_table.update()
        .where(t.conversation_id.in_(list(chosen)))
        .values(conversation_id=None)
    )


def _pending_exports(conn: Connection, ids: Sequence[str]) -> set[str]:
    e, x = evaluations.c, evaluation_exports.c
    rows = conn.execute(
        select(e.conversation_id)
        .distinct()
        .select_from(evaluations.join(evaluation_exports, x.evaluation_id == e.id))
        .where(e.conversation_id.in_(list(ids)), x.exported_at.is_(None))
    )
    return {str(r) for r in rows.scalars()}


def delete_conversations(conn: Connection, ids: Sequence[str], cutoff_ns: int) -> Deleted:
    """Roll up and delete those of ``ids`` (at most a few hundred) still finished, older than
    the cutoff and without telemetry, in the caller's transaction."""
    if not ids:
        return Deleted(0, 0, 0)
    take_write_lock(conn)
    busy = set() if one_writer(conn) else _lock_traces(conn, ids)
    c = conversations.c
    locked = conn.execute(
        skip_locked(
            conn,
            select(c.id).where(
                c.id.in_([i for i in ids if i not in busy]),
                _finished(cutoff_ns),
                text(f"NOT ({PRUNABLE})"),  # its telemetry is all deleted
            ),
        )
    ).scalars()
    chosen = sorted(set(map(str, locked)))
    if chosen:
        chosen = sorted(set(chosen) - _pending_exports(conn, chosen))
    if not chosen:
        return Deleted(0, 0, 0)
    roll_up(conn, chosen)
    roll_up_tools(conn, chosen)
    e, t = evaluations.c, tool_calls.c
    for outbox in (evaluation_exports, annotation_deliveries):
        conn.execute(
            outbox.delete().where(
                outbox.c.evaluation_id.in_(
                    select(e.id).where(e.conversation_id.in_(chosen)).scalar_subquery()
                )
            )
        )
    n_evals = conn.execute(evaluations.delete().where(e.conversation_id.in_(chosen))).rowcount
    n_calls = conn.execute(tool_calls.delete().where(t.conversation_id.in_(chosen))).rowcount
    conn.execute(rescore_run_items.delete().where(rescore_run_items.c.conversation_id.in_(chosen)))
    _forget_traces(conn, chosen)
    conn.execute(conversations.delete().where(c.id.in_(chosen)))
    return Deleted(len(chosen), int(n_evals or 0), int(n_calls or 0))


def plan(conn: Connection, cutoff_ns: int, page: int = 1000) -> Deleted:
    """Count what deleting the history before ``cutoff_ns`` would delete (reads only)."""
    total = evals = calls = 0
    after: tuple[dt.datetime, str] | None = None
    e, t = evaluations.c, tool_calls.c
    while True:
        found = find_finished(conn, cutoff_ns, page, after)
        if not found:
            break
        after = found[-1]
        ids = [i for _, i in found]
        ids = sorted(set(ids) - _pending_exports(conn, ids))
        total += len(ids)
        for chunk in chunks(ids):
            evals += int(
                conn.execute(
                    select(func.count())
                    .select_from(evaluations)
                    .where(e.conversation_id.in_(chunk))
                ).scalar_one()
            )
            calls += int(
                conn.execute(
                    select(func.count()).select_from(tool_calls).where(t.conversation_id.in_(chunk))
                ).scalar_one()
            )
    return Deleted(total, evals, calls)
