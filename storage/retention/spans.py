"""Span retention: delete the raw telemetry of finished conversations, keep their history.

What is deleted: the ``spans`` and ``log_records`` of a conversation whose LAST span or log
record was *received* before the cutoff (``conversations.last_span_received_ns``, the receiving
server's clock), once the conversation is done: status ``scored``, ``unmatched`` or ``error``,
not waiting to be scored again (``needs_scoring`` false) and not claimed by a scoring worker.
The spans' own start/end times are never used: clients set them, and they can be anything
(1970, the year 2200, a skewed clock). What stays: the conversation, its tool calls,
evaluations and expectations (docs/receiver.md, "Retention").

Each conversation is pruned in two steps, so that ingest and scoring running at the same time
(on this or another server) always see a consistent conversation:

1. :func:`mark`, one short transaction: ``pruned_through_ns`` = its last arrival,
   ``pruned_calls`` = the number of tool calls of its current revision, ``pruned_at`` NULL.
   The conditions above are checked again under a row lock (PostgreSQL: ``SKIP LOCKED``, so
   rows that ingest or a scorer holds are left for the next pass, never waited for).
2. :func:`delete_spans` / :func:`delete_logs`: the telemetry received up to the mark, in small
   batches, each its own transaction; then :func:`finish` sets ``pruned_at``.

From step 1 on, scoring (collector.pipeline.score) reads only telemetry received after the mark
and carries the first ``pruned_calls`` stored calls over, so what it scores does not depend on
how far step 2 got. A span arriving later moves ``last_span_received_ns`` past the mark: the
conversation is scored again (a new revision) and pruned again once it is old. A crash between
the steps leaves ``pruned_at`` NULL: the next pass marks and deletes again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import Connection, and_, bindparam, false, func, inspect, select, text, tuple_
from sqlalchemy.engine import Dialect

from toolscore.storage.conversations.tables import (
    PRUNABLE,
    STATUS_OPEN,
    conversations,
    tool_calls,
)
from toolscore.storage.history.rows import CallRow, call_from_row
from toolscore.storage.plumbing.chunks import chunks
from toolscore.storage.plumbing.dialect import in_ids, skip_locked, take_write_lock
from toolscore.storage.telemetry.spans import log_records_table, spans_table
from toolscore.storage.telemetry.traces import traces_table


@dataclass(frozen=True, slots=True)
class Marked:
    """A conversation whose telemetry received up to ``through_ns`` is to be deleted."""

    conversation_id: str
    through_ns: int
    trace_ids: tuple[str, ...]
    trace_seqs: tuple[int, ...]  # their numbers (the span key's first column), in that order


@dataclass(frozen=True, slots=True)
class Carried:
    """What a scoring of a pruned conversation starts from (see the module docstring)."""

    through_ns: int  # telemetry received up to this was deleted (or is being deleted)
    calls: tuple[CallRow, ...]  # the current revision's first pruned_calls tool calls
    first_user_message: str | None


@dataclass(frozen=True, slots=True)
class Plan:
    """What a pruning with this cutoff would delete now (``toolscore prune --dry-run``)."""

    conversations: int
    spans: int
    log_records: int


def _eligible(cutoff_ns: int) -> Any:
    c = conversations.c
    return and_(
        c.last_span_received_ns < cutoff_ns,
        text(f"({PRUNABLE})"),  # as written: lets SQLite use the partial index
        c.status != STATUS_OPEN,
        c.needs_scoring == false(),
        c.claimed_by.is_(None),
    )


def supported(conn: Connection) -> bool:
    """Whether the database has the retention columns (migration 0005)."""
    return "pruned_through_ns" in {c["name"] for c in inspect(conn).get_columns("conversations")}


def find_prunable(
    conn: Connection, cutoff_ns: int, limit: int, after: tuple[int, str] | None = None
) -> list[tuple[int, str]]:
    """Up to ``limit`` (last arrival, id) of conversations whose telemetry may be deleted,
    oldest arrivals first; ``after``: those that come after it in that order."""
    c = conversations.c
    query = select(c.last_span_received_ns, c.id).where(_eligible(cutoff_ns))
    if after is not None:
        query = query.where(tuple_(c.last_span_received_ns, c.id) > tuple_(*after))
    rows = conn.execute(query.order_by(c.last_span_received_ns, c.id).limit(limit)).all()
    return [(int(n), str(i)) for n, i in rows]


def _traces_of(conn: Connection, ids: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
    """conversation id -> its traces' (id, number), by trace id."""
    t = traces_table.c
    out: dict[str, list[tuple[str, int]]] = {i: [] for i in ids}
    for chunk in chunks(ids):
        rows = conn.execute(
            select(t.conversation_id, t.trace_id, t.seq)
            .where(t.conversation_id.in_(chunk))
            .order_by(t.trace_id)
        )
        for conversation_id, trace_id, seq in rows:
            out[conversation_id].append((trace_id, int(seq)))
    return out


def mark(conn: Connection, ids: Sequence[str], cutoff_ns: int) -> list[Marked]:
    """Step 1 for those of ``ids`` still eligible and not locked by anyone else, in the
    caller's transaction (commit it before deleting)."""
    if not ids:
        return []
    c = conversations.c
    # SQLite: the write lock first, so nothing changes between this read and the update;
    # PostgreSQL: row locks, skipping rows ingest or a scorer holds (no waiting, no deadlock
    # with their multi-row locks).
    take_write_lock(conn)
    locked = conn.execute(
        skip_locked(
            conn,
            select(c.id, c.revision, c.last_span_received_ns).where(
                c.id.in_(list(ids)), _eligible(cutoff_ns)
            ),
        )
    ).all()
    if not locked:
        return []
    t = tool_calls.c
    counts: dict[str, int] = {}
    for chunk in chunks([str(r.id) for r in locked]):
        current = {str(r.id): r.revision for r in locked if r.id in chunk}
        rows = conn.execute(
            select(t.conversation_id, t.revision, func.count())
            .where(t.conversation_id.in_(chunk))
            .group_by(t.conversation_id, t.revision)
        )
        for conversation_id, revision, n in rows:
            if current.get(conversation_id) == revision:
                counts[conversation_id] = int(n)
    params = [
        {"b_id": r.id, "b_through": r.last_span_received_ns, "b_calls": counts.get(r.id, 0)}
        for r in locked
    ]
    conn.execute(
        conversations.update()
        .where(c.id == bindparam("b_id"))
        .values(
            pruned_through_ns=bindparam("b_through"),
            pruned_calls=bindparam("b_calls"),
            pruned_at=None,
        ),
        params,
    )
    traces = _traces_of(conn, [p["b_id"] for p in params])
    return [
        Marked(
            p["b_id"],
            int(p["b_through"]),
            tuple(trace for trace, _ in traces[p["b_id"]]),
            tuple(seq for _, seq in traces[p["b_id"]]),
        )
        for p in params
    ]


def delete_spans(conn: Connection, trace_seqs: Sequence[int], through_ns: int, limit: int) -> int:
    """Delete up to ``limit`` spans of the traces numbered ``trace_seqs`` received up to
    ``through_ns``; returns how many (0: none left). One batch: the caller commits between
    batches."""
    s = spans_table.c
    if not trace_seqs:
        return 0
    batch = (
        select(s.trace_seq, s.span_id)
        .where(s.trace_seq.in_(list(trace_seqs)), s.received_at_ns <= through_ns)
        .limit(limit)
    )
    result = conn.execute(spans_table.delete().where(tuple_(s.trace_seq, s.span_id).in_(batch)))
    return int(result.rowcount or 0)


def delete_logs(conn: Connection, trace_ids: Sequence[str], through_ns: int, limit: int) -> int:
    """:func:`delete_spans` for ``log_records``."""
    lr = log_records_table.c
    batch = (
        select(lr.id)
        .where(lr.trace_id.in_(list(trace_ids)), lr.received_at_ns <= through_ns)
        .limit(limit)
    )
    result = conn.execute(log_records_table.delete().where(lr.id.in_(batch.scalar_subquery())))
    return int(result.rowcount or 0)


def delete_traceless_logs(conn: Connection, cutoff_ns: int, limit: int) -> int:
    """Delete up to ``limit`` log records without a trace id (no conversation: nothing scores
    them) received before ``cutoff_ns``."""
    lr = log_records_table.c
    batch = select(lr.id).where(lr.trace_id.is_(None), lr.received_at_ns < cutoff_ns).limit(limit)
    result = conn.execute(log_records_table.delete().where(lr.id.in_(batch.scalar_subquery())))
    return int(result.rowcount or 0)


def finish(conn: Connection, marked: Sequence[Marked], now: dt.datetime) -> None:
    """Step 2 done: ``pruned_at`` for each conversation still at its mark."""
    if not marked:
        return
    c = conversations.c
    conn.execute(
        conversations.update()
        .where(c.id == bindparam("b_id"), c.pruned_through_ns == bindparam("b_through"))
        .values(pruned_at=now),
        [{"b_id": m.conversation_id, "b_through": m.through_ns} for m in marked],
    )


def plan(conn: Connection, cutoff_ns: int, page: int = 1000) -> Plan:
    """Count what pruning with ``cutoff_ns`` would delete (reads only)."""
    c = conversations.c
    s, lr = spans_table.c, log_records_table.c
    total = spans = logs = 0
    after: tuple[int, str] | None = None
    while True:
        query = select(c.id, c.last_span_received_ns).where(_eligible(cutoff_ns))
        if after is not None:
            query = query.where(tuple_(c.last_span_received_ns, c.id) > tuple_(*after))
        rows = conn.execute(query.order_by(c.last_span_received_ns, c.id).limit(page)).all()
        if not rows:
            break
        after = (rows[-1].last_span_received_ns, rows[-1].id)
        total += len(rows)
        traces = [t for ts in _traces_of(conn, [r.id for r in rows]).values() for t in ts]
        through = max(r.last_span_received_ns for r in rows)
        for chunk in chunks(traces):
            spans += int(
                conn.execute(
                    select(func.count())
                    .select_from(spans_table)
                    .where(s.trace_seq.in_([n for _, n in chunk]), s.received_at_ns <= through)
                ).scalar_one()
            )
            logs += int(
                conn.execute(
                    select(func.count())
                    .select_from(log_records_table)
                    .where(lr.trace_id.in_([t for t, _ in chunk]), lr.received_at_ns <= through)
                ).scalar_one()
            )
    logs += int(
        conn.execute(
            select(func.count())
            .select_from(log_records_table)
            .where(lr.trace_id.is_(None), lr.received_at_ns < cutoff_ns)
        ).scalar_one()
    )
    return Plan(total, spans, logs)


@cache
def _marked(dialect: Dialect) -> Any:
    """Pruned conversations among ``ids`` (built once: every scoring round runs it)."""
    c = conversations.c
    return select(
        c.id, c.revision, c.pruned_through_ns, c.pruned_calls, c.first_user_message
    ).where(in_ids(dialect, c.id), c.pruned_through_ns.is_not(None))


def carried(conn: Connection, ids: Sequence[str]) -> dict[str, Carried]:
    """For each pruned conversation of ``ids``: its mark and the calls a scoring carries over."""
    t = tool_calls.c
    out: dict[str, Carried] = {}
    for chunk in chunks(ids):
        rows = conn.execute(_marked(conn.dialect), {"ids": chunk}).all()
        if not rows:
            continue
        calls: dict[str, list[CallRow]] = {str(r.id): [] for r in rows}
        keep = {str(r.id): (r.revision, r.pruned_calls or 0) for r in rows}
        query = (
            select(tool_calls)
            .where(t.conversation_id.in_(list(keep)))
            .order_by(t.conversation_id, t.position)
        )
        for call in conn.execute(query).mappings():
            revision, count = keep[call["conversation_id"]]
            if call["revision"] == revision and call["position"] < count:
                calls[call["conversation_id"]].append(call_from_row(call))
        for r in rows:
            out[str(r.id)] = Carried(
                int(r.pruned_through_ns), tuple(calls[str(r.id)]), r.first_user_message
            )
    return out


def marks(conn: Connection, trace_to_conversation: Mapping[str, str]) -> dict[str, int]:
    """trace id -> the mark of its conversation, for the pruned ones (telemetry received up to
    the mark is not read by scoring)."""
    c = conversations.c
    found: dict[str, int] = {}
    ids = sorted(set(trace_to_conversation.values()))
    for chunk in chunks(ids):
        rows = conn.execute(
            select(c.id, c.pruned_through_ns).where(
                c.id.in_(chunk), c.pruned_through_ns.is_not(None)
            )
        )
        found.update({str(i): int(n) for i, n in rows})
    return {t: found[cid] for t, cid in trace_to_conversation.items() if cid in found}
