"""Running span retention: one pass of marks and small deletes (what is deleted and why it is
safe: :mod:`toolscore.storage.retention.spans`).

A pass finds conversations whose last span arrived before the cutoff, marks up to
``conversations_per_mark`` of them in one transaction, deletes their spans and log records
``rows_per_batch`` rows per transaction, records them as pruned, and repeats until none is left;
then deletes the stored pieces of long strings of the days no span is left of
(storage/telemetry/content_store.py); then (SQLite files with ``auto_vacuum=INCREMENTAL``) gives
the free pages back to the file system ``vacuum_pages`` pages per transaction. Every transaction
is short, so ingest (one writer at a time on SQLite) waits at most one batch.
"""

from __future__ import annotations

import datetime as dt
import functools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, Engine

from toolscore.storage.plumbing.chunks import chunks
from toolscore.storage.plumbing.database_file import database_bytes, release_free_pages
from toolscore.storage.retention import spans as store
from toolscore.storage.telemetry.content_store import sweep
from toolscore.storage.telemetry.partitions import drop_done


@dataclass(frozen=True, slots=True)
class PruneLimits:
    conversations_per_mark: int = 200
    rows_per_batch: int = 2000  # spans or log records per delete transaction
    vacuum_pages: int = 2048  # pages released per transaction (8 MiB at 4 KiB pages)
    pause_s: float = 0.002  # between transactions: lets a waiting ingest batch take the lock
    marks_per_pass: int = 50_000  # conversations marked per pass (the rest: next pass)


@dataclass(frozen=True, slots=True)
class PruneResult:
    conversations: int
    spans: int
    log_records: int
    bytes_before: int | None  # database_bytes (size) before and after the pass
    bytes_after: int | None
    free_after: int | None  # free bytes inside the file after (SQLite: reused by later writes)

    @property
    def deleted(self) -> int:
        return self.spans + self.log_records


Progress = Callable[[int], None]  # called with the rows each batch deleted


def prune(
    engine: Engine,
    cutoff_ns: int,
    *,
    limits: PruneLimits = PruneLimits(),
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    progress: Progress | None = None,
    stop: threading.Event | None = None,
) -> PruneResult:
    """One pruning pass with ``cutoff_ns`` (Unix ns of arrival); returns what it deleted."""
    before = database_size(engine)
    marked = _mark_all(engine, cutoff_ns, limits, stop)
    spans = logs = 0
    if marked:
        with (
            engine.begin() as conn
        ):  # PostgreSQL: whole days at once (storage/telemetry/partitions.py)
            spans, logs = drop_done(conn, cutoff_ns)
        if progress is not None and spans + logs:
            progress(spans + logs)
    for start in range(0, len(marked), limits.conversations_per_mark):
        group = marked[start : start + limits.conversations_per_mark]
        s, lg = delete_marked(engine, group, limits, progress)
        spans, logs = spans + s, logs + lg
        with engine.begin() as conn:
            store.finish(conn, group, now())
    conversations = len(marked)
    logs += _batches(
        engine,
        limits,
        lambda c: store.delete_traceless_logs(c, cutoff_ns, limits.rows_per_batch),
        progress,
    )
    # the pieces of long strings of the days no span is left of (content_store.sweep)
    pieces = sweep(engine, int(now().timestamp() * 1e9))
    if spans + logs + pieces:
        release_pages(engine, limits)
    after = database_size(engine)
    return PruneResult(
        conversations,
        spans,
        logs,
        before[0] if before else None,
        after[0] if after else None,
        after[1] if after else None,
    )


def _mark_all(
    engine: Engine, cutoff_ns: int, limits: PruneLimits, stop: threading.Event | None
) -> list[store.Marked]:
    """Step 1 for every conversation eligible now (up to ``limits.marks_per_pass``)."""
    marked: list[store.Marked] = []
    after: tuple[int, str] | None = None
    while (stop is None or not stop.is_set()) and len(marked) < limits.marks_per_pass:
        with engine.connect() as conn:
            found = store.find_prunable(conn, cutoff_ns, limits.conversations_per_mark, after)
        if not found:
            break
        after = found[-1]
        with engine.begin() as conn:
            marked += store.mark(conn, [i for _, i in found], cutoff_ns)
    return marked


def delete_marked(
    engine: Engine, marked: Sequence[store.Marked], limits: PruneLimits, progress: Progress | None
) -> tuple[int, int]:
    """Delete the marked conversations' telemetry; (spans, log records) deleted."""
    traces = [t for m in marked for t in zip(m.trace_ids, m.trace_seqs, strict=True)]
    # Every mark is before the cutoff and anything arriving now is after it, so the newest
    # mark bounds the whole group (module docstring of storage.retention.spans).
    through = max(m.through_ns for m in marked)
    spans = logs = 0
    size = limits.rows_per_batch
    for chunk in chunks(traces):
        seqs = [seq for _, seq in chunk]
        ids = [trace for trace, _ in chunk]
        spans += _batches(
            engine, limits, functools.partial(_spans, seqs=seqs, through=through, n=size), progress
        )
        logs += _batches(
            engine, limits, functools.partial(_logs, ids=ids, through=through, n=size), progress
        )
    return spans, logs


def _spans(conn: Connection, *, seqs: Sequence[int], through: int, n: int) -> int:
    return store.delete_spans(conn, seqs, through, n)


def _logs(conn: Connection, *, ids: Sequence[str], through: int, n: int) -> int:
    return store.delete_logs(conn, ids, through, n)


def _batches(
    engine: Engine,
    limits: PruneLimits,
    delete_one: Callable[..., int],
    progress: Progress | None = None,
) -> int:
    """Run ``delete_one`` (one batch) in its own transaction until a batch comes back short."""
    total = 0
    while True:
        with engine.begin() as conn:
            n = delete_one(conn)
        total += n
        if progress is not None and n:
            progress(n)
        if n < limits.rows_per_batch:
            return total
        if limits.pause_s:
            time.sleep(limits.pause_s)


def release_pages(engine: Engine, limits: PruneLimits) -> None:
    while True:
        with engine.begin() as conn:
            released = release_free_pages(conn, limits.vacuum_pages)
        if released < limits.vacuum_pages:
            return
        if limits.pause_s:
            time.sleep(limits.pause_s)


def database_size(engine: Engine) -> tuple[int, int] | None:
    with engine.connect() as conn:
        return database_bytes(conn)
