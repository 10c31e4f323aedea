"""Running history retention: one pass over the finished conversations older than the cutoff
(what is deleted and why it is safe: :mod:`toolscore.storage.retention.conversations`).

A pass takes ``conversations_per_mark`` candidates at a time, oldest first: deletes the
telemetry they still have with span retention's steps (mark, batches of ``rows_per_batch`` rows,
finish), then rolls them up and deletes them in one short transaction, and repeats until none is
left (or ``marks_per_pass`` were handled); then gives free SQLite pages back like span retention.
Every transaction is short, so ingest waits at most one batch.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Engine

from toolscore.storage.retention import conversations as history
from toolscore.storage.retention import spans
from toolscore.storage.retention.rollup import record_pass
from toolscore.storage.retention.span_pruning import (
    Progress,
    PruneLimits,
    database_size,
    delete_marked,
    release_pages,
)


@dataclass(frozen=True, slots=True)
class HistoryResult:
    conversations: int
    evaluations: int
    tool_calls: int
    spans: int
    log_records: int
    bytes_before: int | None
    bytes_after: int | None
    free_after: int | None


def prune_history(
    engine: Engine,
    cutoff_ns: int,
    *,
    limits: PruneLimits | None = None,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    progress: Progress | None = None,
    stop: threading.Event | None = None,
) -> HistoryResult:
    """Delete the finished conversations whose last span arrived before ``cutoff_ns``;
    ``progress`` is called with the conversations each transaction deleted."""
    limits = limits or PruneLimits()
    before = database_size(engine)
    done = history.Deleted(0, 0, 0)
    span_rows = log_rows = seen = 0
    after: tuple[dt.datetime, str] | None = None
    while (stop is None or not stop.is_set()) and seen < limits.marks_per_pass:
        with engine.connect() as conn:
            found = history.find_finished(conn, cutoff_ns, limits.conversations_per_mark, after)
        if not found:
            break
        after, seen = found[-1], seen + len(found)
        ids = [i for _, i in found]
        with engine.begin() as conn:
            marked = spans.mark(conn, ids, cutoff_ns)
        if marked:
            s, lg = delete_marked(engine, marked, limits, None)
            span_rows, log_rows = span_rows + s, log_rows + lg
            with engine.begin() as conn:
                spans.finish(conn, marked, now())
        with engine.begin() as conn:
            deleted = history.delete_conversations(conn, ids, cutoff_ns)
            if deleted.conversations:
                record_pass(conn, cutoff_ns, deleted.conversations, now())
        done += deleted
        if progress is not None and deleted.conversations:
            progress(deleted.conversations)
        if limits.pause_s:
            time.sleep(limits.pause_s)
    if done.conversations:
        release_pages(engine, limits)
    size = database_size(engine)
    return HistoryResult(
        done.conversations,
        done.evaluations,
        done.tool_calls,
        span_rows,
        log_rows,
        before[0] if before else None,
        size[0] if size else None,
        size[1] if size else None,
    )
