"""Conversation bookkeeping inside the ingest transaction: which conversation each trace belongs to.

A trace belongs as a whole to the conversation any of its spans names (the first present key of
the configured list), else to a conversation keyed by its own trace id. Instrumentations often
name the conversation on some spans only, so a trace first seen without a name and later naming
one *moves*: its trace-keyed conversation is dropped (its evaluations, if it was already scored,
stay in the history as superseded) and the named conversation takes it. Once a trace belongs to a
named conversation it stays there: the first name wins over conflicting later ones.

Cost per ingest batch, whatever its size: one ``SELECT`` of known traces, one upsert of new trace
assignments, one upsert of conversations, plus two small statements only when traces move.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, case, false, func, select, true

from toolscore.collector.conversation_keys import (
    DEFAULT_CONVERSATION_KEYS,
    DEFAULT_REFERENCE_KEY,
    conversation_id_for_trace,
    reference_id_for,
)
from toolscore.collector.model import SpanRecord
from toolscore.storage.pipeline import (
    STATUS_OPEN,
    conversation_traces,
    conversations,
    evaluations,
    insert_for,
)

_CHUNK = 500  # bound on IN (...) list sizes


@dataclass(frozen=True, slots=True)
class AssignConfig:
    """Which attributes name a conversation (first present wins) and the reference id."""

    conversation_keys: tuple[str, ...] = DEFAULT_CONVERSATION_KEYS
    reference_key: str = DEFAULT_REFERENCE_KEY


@dataclass(frozen=True, slots=True)
class AssignResult:
    conversations: int  # conversations touched by the batch
    new_traces: int  # traces seen for the first time
    moved_traces: int  # traces moved from their trace-keyed conversation to a named one


@dataclass(frozen=True, slots=True)
class _TraceInBatch:
    trace_id: str
    named: str | None
    root_span_id: str | None
    reference_id: str | None
    first_start_ns: int


def _chunks(items: Sequence[str], size: int = _CHUNK) -> Iterator[Sequence[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _summarise(
    spans: Iterable[SpanRecord], log_trace_ids: Iterable[str], config: AssignConfig
) -> list[_TraceInBatch]:
    by_trace: dict[str, list[SpanRecord]] = defaultdict(list)
    for span in spans:
        by_trace[span.trace_id].append(span)
    out = []
    # Log records (GenAI content events) count as activity of their trace, naming nothing.
    for trace_id in sorted(set(log_trace_ids) - by_trace.keys()):
        out.append(_TraceInBatch(trace_id, None, None, None, 0))
    for trace_id, trace_spans in by_trace.items():
        roots = sorted(
            (s for s in trace_spans if not s.parent_span_id), key=lambda s: (s.start_ns, s.span_id)
        )
        # Only ask about keys the trace carries at all: most carry one or none (hot path).
        present: set[str] = set()
        for s in trace_spans:
            present.update(s.attributes)
            present.update(s.resource_attributes)
        keys = [k for k in config.conversation_keys if k in present]
        out.append(
            _TraceInBatch(
                trace_id=trace_id,
                named=(conversation_id_for_trace(trace_spans, keys) or None) if keys else None,
                root_span_id=roots[0].span_id if roots else None,
                reference_id=(reference_id_for(trace_spans, config.reference_key) or None)
                if config.reference_key in present
                else None,
                first_start_ns=min(s.start_ns for s in trace_spans),
            )
        )
    return out


def _known_traces(conn: Connection, trace_ids: Sequence[str]) -> dict[str, tuple[str, str | None]]:
    """trace id -> (its conversation, that conversation's last trace) for already-known traces."""
    ct, c = conversation_traces, conversations
    known: dict[str, tuple[str, str | None]] = {}
    for chunk in _chunks(trace_ids):
        rows = conn.execute(
            select(ct.c.trace_id, ct.c.conversation_id, c.c.last_trace_id)
            .select_from(ct.outerjoin(c, c.c.id == ct.c.conversation_id))
            .where(ct.c.trace_id.in_(chunk))
        )
        for trace_id, conversation_id, last_trace_id in rows:
            known[trace_id] = (conversation_id, last_trace_id)
    return known


def assign_spans(
    conn: Connection,
    spans: Sequence[SpanRecord],
    *,
    received_at_ns: int,
    config: AssignConfig,
    log_trace_ids: Iterable[str] = (),
) -> AssignResult:
    """Record the conversations of ``spans`` (one ingest batch) in the caller's transaction."""
    traces = _summarise(spans, log_trace_ids, config)
    if not traces:
        return AssignResult(0, 0, 0)
    known = _known_traces(conn, [t.trace_id for t in traces])

    new_assignments: dict[str, str] = {}  # trace id -> conversation id (new or moved)
    moved_from: list[str] = []  # trace-keyed conversations left empty by a move
    groups: dict[str, list[tuple[_TraceInBatch, bool]]] = defaultdict(list)
    last_known: dict[str, str | None] = {}
    for t in traces:
        current = known.get(t.trace_id)
        if current is None:
            target, is_new = t.named or t.trace_id, True
        elif t.named and current[0] == t.trace_id and t.named != t.trace_id:
            target, is_new = t.named, True
            moved_from.append(t.trace_id)
        else:
            target, is_new = current[0], False
            last_known[target] = current[1]
        if is_new:
            new_assignments[t.trace_id] = target
        groups[target].append((t, is_new))

    # conversation id -> (its last trace, that trace's root span if in this batch, reference id)
    touched: dict[str, tuple[str, str | None, str | None]] = {}
    for conv_id, members in groups.items():
        joined = [t for t, is_new in members if is_new]
        if joined:  # a newly joined trace is the conversation's latest turn
            last = max(joined, key=lambda t: (t.first_start_ns, t.trace_id)).trace_id
        else:
            last = last_known.get(conv_id) or members[0][0].trace_id
        root = next((t.root_span_id for t, _ in members if t.trace_id == last), None)
        ref = next((t.reference_id for t, _ in members if t.reference_id), None)
        touched[conv_id] = (last, root, ref)

    if moved_from:
        _drop_trace_keyed(conn, sorted(moved_from))
    if new_assignments:
        ins = insert_for(conn, conversation_traces)
        conn.execute(
            ins.on_conflict_do_update(
                index_elements=[conversation_traces.c.trace_id],
                set_={"conversation_id": ins.excluded.conversation_id},
            ),
            [{"trace_id": k, "conversation_id": v} for k, v in sorted(new_assignments.items())],
        )
    _upsert_conversations(conn, touched, received_at_ns)
    return AssignResult(len(touched), len(new_assignments) - len(moved_from), len(moved_from))


def _drop_trace_keyed(conn: Connection, conversation_ids: Sequence[str]) -> None:
    """A trace moved to a named conversation: its trace-keyed one is gone, its scores superseded."""
    for chunk in _chunks(conversation_ids):
        conn.execute(
            evaluations.update()
            .where(evaluations.c.conversation_id.in_(chunk), evaluations.c.is_current == true())
            .values(is_current=false())
        )
        conn.execute(conversations.delete().where(conversations.c.id.in_(chunk)))


def _upsert_conversations(
    conn: Connection,
    touched: dict[str, tuple[str, str | None, str | None]],
    received_at_ns: int,
) -> None:
    at = dt.datetime.fromtimestamp(received_at_ns / 1e9, tz=dt.UTC)
    rows = [
        {
            "id": conv_id,
            "status": STATUS_OPEN,
            "first_seen_at": at,
            "last_span_at": at,
            "last_span_received_ns": received_at_ns,
            "needs_scoring": True,
            "last_trace_id": last_trace,
            "root_span_id": root,
            "reference_id": ref,
            "revision": 0,
        }
        # Sorted: concurrent ingest transactions lock conversation rows in the same order.
        for conv_id, (last_trace, root, ref) in sorted(touched.items())
    ]
    ins = insert_for(conn, conversations)
    c, ex = conversations.c, ins.excluded
    stmt = ins.on_conflict_do_update(
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
            "reference_id": func.coalesce(ex.reference_id, c.reference_id),
        },
    )
    conn.execute(stmt, rows)
