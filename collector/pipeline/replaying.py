"""What the replay rule compares for the keyless traces of an ingest batch (``assign``).

A model call's messages may travel only in log records of its span (Semantic Kernel's native
diagnostics), sent before, with or after the spans, in other requests. So a trace's fingerprints
are taken from its spans and the log records carrying its messages together:

- a trace new to the database (``numbered``) is whole in the batch: read from the batch alone;
- a trace seen before whose root span arrives now (its children, or its log records, came
  earlier) is read as stored, this batch included: once per trace;
- a trace seen before whose log records carrying messages are in the batch but not its root span,
  and whose root span is stored (the records came after the spans), is read as stored too, if it
  has no key: it may now join the conversation it replays, and the state it leaves is recorded;
- any other part of a trace (children without their root) is read from the batch's spans alone,
  as before: the trace is read whole when its root comes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from toolscore.collector.reconstruction.replay import ReplayPrints, carries_messages, replay_prints
from toolscore.storage.conversations.assignments import conversations_of, trace_keyed
from toolscore.storage.conversations.replays import rooted
from toolscore.storage.database import Connection
from toolscore.storage.records import LogRecordData, SpanRecord
from toolscore.storage.telemetry.spans import load_logs, load_spans


@dataclass(frozen=True, slots=True)
class Replayable:
    """A keyless trace's fingerprints, and its root span when it is in the batch or stored (only
    then may it join another conversation)."""

    prints: ReplayPrints
    root_span_id: str | None
    first_start_ns: int


def _root(spans: Sequence[SpanRecord]) -> str | None:
    return next((s.span_id for s in spans if not s.parent_span_id), None)


def _of(spans: Sequence[SpanRecord], logs: Sequence[LogRecordData]) -> Replayable:
    start = min((s.start_ns for s in spans), default=0)
    return Replayable(replay_prints(spans, logs), _root(spans), start)


def replayables(
    conn: Connection,
    keyless: Mapping[str, Sequence[SpanRecord]],
    logs: Sequence[LogRecordData],
    numbered: Collection[str],
    spanned: Collection[str],
) -> dict[str, Replayable]:
    """trace id -> what the replay rule compares, for the batch's keyless traces (``keyless``:
    their spans in the batch) and the traces whose message-carrying log records came without
    their spans (``spanned``: every trace with a span in the batch)."""
    logs_of: dict[str, list[LogRecordData]] = defaultdict(list)
    for log in logs:
        if log.trace_id:
            logs_of[log.trace_id].append(log)
    out: dict[str, Replayable] = {}
    stored: list[str] = []
    for trace_id, spans in keyless.items():
        if _root(spans) is None:  # read whole when the root comes
            out[trace_id] = _of(spans, ())
        elif trace_id in numbered:
            out[trace_id] = _of(spans, logs_of.get(trace_id, ()))
        else:
            stored.append(trace_id)
    # Log records carrying messages, of a trace seen before whose root is not in the batch
    # (a trace with a key in the batch is not the rule's): read as stored if its root is.
    late = [
        t
        for t, group in logs_of.items()
        if t not in numbered
        and (t not in spanned or (t in out and out[t].root_span_id is None))
        and carries_messages(group)
    ]
    if late:
        stored += rooted(conn, _keyless(conn, late))
    if stored:
        spans_of: dict[str, list[SpanRecord]] = defaultdict(list)
        for span in load_spans(conn, stored):
            spans_of[span.trace_id].append(span)
        stored_logs: dict[str, list[LogRecordData]] = defaultdict(list)
        for log in load_logs(conn, stored):
            stored_logs[log.trace_id or ""].append(log)
        for trace_id in stored:
            out[trace_id] = _of(spans_of[trace_id], stored_logs[trace_id])
    return out


def _keyless(conn: Connection, trace_ids: Sequence[str]) -> list[str]:
    """Those of ``trace_ids`` in a conversation without a key (keyed by its first trace)."""
    conversation_of = conversations_of(conn, sorted(trace_ids))
    others = sorted({c for t, c in conversation_of.items() if c != t})
    keyless = trace_keyed(conn, others) if others else set()
    return [t for t, c in conversation_of.items() if c == t or c in keyless]
