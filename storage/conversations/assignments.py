"""Statements of the conversation bookkeeping (``collector.pipeline.assign`` decides, this writes).

Concurrency: several ingest transactions (one per ``toolscore serve`` process on one PostgreSQL)
may touch the same trace at once, e.g. one storing its unnamed child spans while another stores
the root span that names its conversation. A trace's conversation is ``traces.conversation_id``
(storage/telemetry/traces.py; ingest numbered the trace, and holds its row, earlier in the same
transaction). A transaction that may move a trace, or write to its trace-keyed conversation,
first holds the trace's row lock: :func:`claim_traces` sets the conversation of traces that have
none (waiting on a concurrent transaction setting it) and locks the rows of traces that may
still move ``FOR NO KEY UPDATE``, in trace id order. So a move and a join of
one trace are serialised and the later one sees the earlier one's result: no trace is moved
back, and no reference id is written to a trace-keyed conversation a concurrent move has just
dropped. SQLite has one writer at a time (the ingest transaction writes spans first), so it needs
no row locks.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import Connection, bindparam, case, false, func, select, true
from sqlalchemy.engine import Dialect

from toolscore.storage.conversations.tables import STATUS_OPEN, conversations, evaluations
from toolscore.storage.plumbing.chunks import chunks
from toolscore.storage.plumbing.dialect import (
    execute_prepared,
    insert_dialect,
    insert_for,
    one_writer,
)
from toolscore.storage.plumbing.row_lists import each_id
from toolscore.storage.telemetry.traces import traces_table


@dataclass(frozen=True, slots=True)
class TraceState:
    """A trace's conversation as this transaction holds it (its row locked)."""

    conversation_id: str
    inserted: bool  # assigned for the first time by this transaction
    last_trace_id: str | None  # the conversation's last trace (None: no conversation row yet)
    reference_id: str | None  # the conversation's stored reference id


@dataclass(frozen=True, slots=True)
class ConversationTouch:
    """One conversation's row as an ingest batch leaves it."""

    conversation_id: str
    last_trace_id: str
    root_span_id: str | None  # of the last trace, if that root is in the batch
    reference_id: str | None  # proposed; a reference id already stored wins


def claim_traces(
    conn: Connection, proposed: Mapping[str, str], numbered: Collection[str] = frozenset()
) -> dict[str, TraceState]:
    """Assign each new trace of ``proposed`` (trace id -> its named conversation, else itself);
    read the rest, locking those a concurrent transaction may move: traces still in their
    trace-keyed conversation and new ones another transaction assigned first. A trace in a
    named conversation never moves, so it is read without a lock. Traces of ``numbered``, which
    this transaction numbered (``storage.telemetry.traces.Numbered.new``), have no conversation
    yet: they
    are not looked up.

    A trace that already has a conversation keeps it here (moves are :func:`move_traces`).
    """
    known = _read_assigned(conn, sorted(proposed.keys() - numbered))
    unknown = sorted(proposed.keys() - known.keys())
    inserted = _assign_new(conn, {t: proposed[t] for t in unknown})
    states = {t: TraceState(proposed[t], True, None, None) for t in inserted}
    states.update(known)
    if one_writer(conn):  # what was read is current
        return states
    may_move = {t for t in unknown if t not in inserted}
    # in their trace-keyed conversation, or (joined by replay) proposed another one
    may_move.update(t for t, s in known.items() if proposed[t] not in (s.conversation_id, t))
    may_move.update(t for t, s in known.items() if s.conversation_id == t)
    locked = _lock(conn, sorted(may_move))
    # Re-read (after the lock) the conversations of traces that move now (their stored reference
    # id moves with them) or that another transaction assigned or moved meanwhile.
    stale = {
        t: conv
        for t, conv in locked.items()
        if (conv == t != proposed[t]) or t not in known or known[t].conversation_id != conv
    }
    rows_of = _conversation_rows(conn, sorted(set(stale.values())))
    for t, conv in stale.items():
        states[t] = TraceState(conv, False, *rows_of.get(conv, (None, None)))
    return states


def _read_assigned(conn: Connection, trace_ids: Sequence[str]) -> dict[str, TraceState]:
    found: dict[str, TraceState] = {}
    for chunk in chunks(trace_ids):
        rows = conn.execute(_assigned(conn.dialect), {"ids": chunk})
        for trace_id, conversation_id, last, ref in rows:
            found[trace_id] = TraceState(conversation_id, False, last, ref)
    return found


@cache
def _assigned(dialect: Dialect) -> Any:
    """Built once: every ingest transaction runs it. Looked up trace by trace (each_id): a plan
    made while the tables were small (a fresh database, statistics never gathered) would
    otherwise keep scanning them whole as they grow."""
    t, c = traces_table.c, conversations.c
    query = select(t.trace_id, t.conversation_id, c.last_trace_id, c.reference_id).select_from(
        traces_table.outerjoin(conversations, c.id == t.conversation_id)
    )
    return each_id(dialect, query.where(t.conversation_id.is_not(None)), t.trace_id)


def _assign_new(conn: Connection, assignments: Mapping[str, str]) -> set[str]:
    """Set the traces' conversations where they have none (a trace without a row yet, one with
    log records only, is numbered here); the trace ids this transaction assigned (others were
    first)."""
    if not assignments:
        return set()
    rows = [{"trace_id": k, "conversation_id": v} for k, v in sorted(assignments.items())]
    if one_writer(conn):  # nobody else assigned them meanwhile
        execute_prepared(conn, "assign.new", _assign_stmt, traces_table, rows)
        return set(assignments)
    # A trace another transaction is assigning makes this wait for it, then leave the row be.
    stmt = _assign(insert_for(conn, traces_table)).returning(traces_table.c.trace_id)
    return set(conn.execute(stmt, rows).scalars())


def _assign_stmt(dialect: str) -> Any:
    return _assign(insert_dialect(dialect, traces_table))


def _assign(ins: Any) -> Any:
    t = traces_table.c
    return ins.on_conflict_do_update(
        index_elements=[t.trace_id],
        set_={"conversation_id": ins.excluded.conversation_id},
        where=t.conversation_id.is_(None),
    )


def _lock(conn: Connection, trace_ids: Sequence[str]) -> dict[str, str]:
    """Lock the traces' rows (waiting for a transaction moving one); trace id -> conversation."""
    t = traces_table.c
    current: dict[str, str] = {}
    for chunk in chunks(trace_ids):
        locked = conn.execute(
            select(t.trace_id, t.conversation_id)
            .where(t.trace_id.in_(chunk), t.conversation_id.is_not(None))
            .order_by(t.trace_id)  # one lock order for all transactions
            .with_for_update(key_share=True)  # FOR NO KEY UPDATE: what the move's UPDATE takes
        )
        current.update((trace_id, conversation_id) for trace_id, conversation_id in locked)
    return current


def _conversation_rows(
    conn: Connection, conversation_ids: Sequence[str]
) -> dict[str, tuple[str | None, str | None]]:
    """conversation id -> (last trace id, reference id), in a statement of its own: PostgreSQL
    would give a locking join the conversation row as it was before the lock wait."""
    c = conversations.c
    found: dict[str, tuple[str | None, str | None]] = {}
    for chunk in chunks(conversation_ids):
        rows = conn.execute(select(c.id, c.last_trace_id, c.reference_id).where(c.id.in_(chunk)))
        found.update((conv_id, (last, ref)) for conv_id, last, ref in rows)
    return found


def move_traces(conn: Connection, moves: Mapping[str, str], *, with_joined: bool = False) -> None:
    """Trace id -> named conversation: each trace leaves its trace-keyed conversation, which is
    dropped (its current evaluations stay in the history, no longer current). ``with_joined``:
    the traces that joined that conversation by replay go with it (they continue it)."""
    if not moves:
        return
    t = traces_table
    ins = insert_for(conn, t)
    rows = [{"trace_id": k, "conversation_id": v} for k, v in sorted(moves.items())]
    conn.execute(
        ins.on_conflict_do_update(
            index_elements=[t.c.trace_id], set_={"conversation_id": ins.excluded.conversation_id}
        ),
        rows,
    )
    if with_joined:
        conn.execute(
            t.update()
            .where(t.c.conversation_id == bindparam("old"))
            .values(conversation_id=bindparam("new")),
            [{"old": r["trace_id"], "new": r["conversation_id"]} for r in rows],
        )
    for chunk in chunks(sorted(moves)):
        # Delete first: the delete waits for a scoring transaction that holds the row (it may be
        # writing a revision right now), so the update after it sees that revision's rows too.
        conn.execute(conversations.delete().where(conversations.c.id.in_(chunk)))
        conn.execute(
            evaluations.update()
            .where(evaluations.c.conversation_id.in_(chunk), evaluations.c.is_current == true())
            .values(is_current=false())
        )


def conversations_of(conn: Connection, trace_ids: Sequence[str]) -> dict[str, str]:
    """trace id -> its conversation, for the traces of ``trace_ids`` that have one."""
    t = traces_table.c
    found: dict[str, str] = {}
    for chunk in chunks(trace_ids):
        rows = conn.execute(
            select(t.trace_id, t.conversation_id).where(
                t.trace_id.in_(chunk), t.conversation_id.is_not(None)
            )
        )
        found.update((trace_id, conv) for trace_id, conv in rows)
    return found


def trace_keyed(conn: Connection, conversation_ids: Sequence[str]) -> set[str]:
    """Those of ``conversation_ids`` keyed by a trace (their first trace's id): keyless."""
    t = traces_table.c
    found: set[str] = set()
    for chunk in chunks(conversation_ids):
        found.update(conn.execute(select(t.trace_id).where(t.trace_id.in_(chunk))).scalars())
    return found


def leave_conversations(conn: Connection, left: Mapping[str, Sequence[str]]) -> None:
    """Keyless conversation -> the traces that left it (joined by replay, named since): it is
    scored again, its last trace (if one of them) now its first."""
    c = conversations.c
    for conv_id, gone in sorted(left.items()):
        conn.execute(
            conversations.update()
            .where(c.id == conv_id, c.last_trace_id.in_(list(gone)))
            .values(last_trace_id=conv_id, root_span_id=None)
        )
        conn.execute(conversations.update().where(c.id == conv_id).values(needs_scoring=True))


def upsert_conversations(
    conn: Connection, touched: Sequence[ConversationTouch], received_at_ns: int
) -> None:
    """Create or refresh each touched conversation: active now, needs scoring."""
    at = dt.datetime.fromtimestamp(received_at_ns / 1e9, tz=dt.UTC)
    rows = [
        {
            "id": t.conversation_id,
            "status": STATUS_OPEN,
            "first_seen_at": at,
            "last_span_at": at,
            "last_span_received_ns": received_at_ns,
            "needs_scoring": True,
            "last_trace_id": t.last_trace_id,
            "root_span_id": t.root_span_id,
            "reference_id": t.reference_id,
            "revision": 0,
        }
        # Sorted: concurrent ingest transactions lock conversation rows in the same order.
        for t in sorted(touched, key=lambda t: t.conversation_id)
    ]
    execute_prepared(conn, "assign.upsert", _upsert_stmt, conversations, rows)


def _upsert_stmt(dialect: str) -> Any:
    ins = insert_dialect(dialect, conversations)
    c, ex = conversations.c, ins.excluded
    return ins.on_conflict_do_update(
        index_elements=[c.id],
        set_={
            "last_span_at": ex.last_span_at,
            "last_span_received_ns": ex.last_span_received_ns,
            "needs_scoring": true(),
            "last_trace_id": ex.last_trace_id,
            # Same last trace: keep a root seen in an earlier batch; new last trace: its own root.
            "root_span_id": case(
                (
                    c.last_trace_id == ex.last_trace_id,
                    func.coalesce(ex.root_span_id, c.root_span_id),
                ),
                else_=ex.root_span_id,
            ),
            # The first reference id stored stays: a late or conflicting one cannot flip the
            # expectation a conversation is scored against between revisions.
            "reference_id": func.coalesce(c.reference_id, ex.reference_id),
        },
    )
