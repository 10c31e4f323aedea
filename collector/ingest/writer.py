"""Bounded ingest queue and group-commit writer: a request is acknowledged only once committed.

Requests put their decoded spans and log records on the queue and wait on a future. One writer
task takes everything queued (up to ``max_batch_items``), writes it in ONE transaction in a worker
thread (duplicates ignored with ``ON CONFLICT DO NOTHING``; hooks run inside the transaction),
commits, then resolves every future of the batch. Requests arriving meanwhile form the next batch,
so concurrent requests share commits. The queue is bounded in items: past the bound, ``submit``
raises :class:`QueueFull` at once (retryable), and a failed transaction fails each of its requests
with :class:`StorageUnavailable` (retryable): nothing is acknowledged that is not committed.

When the database refuses a batch for the data it carries (``storage.plumbing.faults.data_fault``:
a value
out of range, NUL in text, a key too long for its index), resending would fail for ever and take
the batch's other requests down each time. So the batch is split in halves and each committed on
its own, recursively, until the requests responsible stand alone; those get
:class:`UnstorableData` (non-retryable), the others are committed. One such request among N costs
about 2·log2(N) extra transactions. Other failures (connection refused or reset...) fail the
whole batch, retryably, as before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from toolscore.collector.errors import (
    QueueFull,
    ReceiverError,
    ShuttingDown,
    StorageUnavailable,
    UnstorableData,
)
from toolscore.collector.export.attributes import without_toolscore_evaluations
from toolscore.collector.ingest.metrics import Metrics
from toolscore.storage.database import Connection, Database
from toolscore.storage.plumbing.dialect import write_transaction
from toolscore.storage.plumbing.faults import data_fault, failure_reason
from toolscore.storage.records import LogRecordData, SpanRecord
from toolscore.storage.telemetry.compressed import compresses_values
from toolscore.storage.telemetry.contents import KnownContents
from toolscore.storage.telemetry.row_encode import prepare_telemetry
from toolscore.storage.telemetry.spans import store_telemetry

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """One ingest transaction's telemetry, as it stands before the commit."""

    # Each (trace_id, span_id) of the batch once, whether or not it was already stored (a resend).
    spans: Sequence[SpanRecord]
    logs: Sequence[LogRecordData]
    numbered: frozenset[str]  # traces new to the database (storage.telemetry.traces.Numbered.new)


class IngestHook(Protocol):
    """Called inside the ingest transaction, before commit, with the batch being stored.

    Hooks must be idempotent: a batch may hold a resend. An exception rolls the whole batch
    back and its requests get a retryable error (unless it is a data fault: see the module
    docstring); the hook may then be called again with part of the batch.
    """

    def on_batch(self, conn: Connection, batch: StoredBatch) -> None: ...


class AckGate(Protocol):
    """Holds the acknowledgement of a request whose items were committed (backpressure from
    later stages); returns the seconds held."""

    async def hold(self) -> float: ...


@dataclass(frozen=True, slots=True)
class IngestConfig:
    max_queued_items: int = 100_000  # spans + log records waiting; past it -> QueueFull
    max_batch_items: int = 20_000  # per transaction
    retry_after_s: float = 1.0  # delay suggested to clients on retryable errors


@dataclass(frozen=True, slots=True)
class CommitFailure:
    """Commits failing (not for their data): why, and since when and last when, in
    ``time.monotonic()`` seconds."""

    reason: str
    since: float
    last: float


@dataclass(slots=True)
class _Pending:
    spans: Sequence[SpanRecord]
    logs: Sequence[LogRecordData]
    future: asyncio.Future[None]

    @property
    def size(self) -> int:
        return len(self.spans) + len(self.logs)


class IngestWriter:
    """The group-commit writer. ``start()`` before use; ``stop()`` drains and waits."""

    def __init__(
        self,
        engine: Database,
        config: IngestConfig = IngestConfig(),
        hooks: Sequence[IngestHook] = (),
        metrics: Metrics | None = None,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self._engine = engine
        self._config = config
        self._hooks = tuple(hooks)
        self._metrics = metrics or Metrics()
        self._clock_ns = clock_ns
        self._queue: deque[_Pending] = deque()
        self._queued_items = 0
        self._wake = asyncio.Event()
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self._busy_since: float | None = None
        self._failure: CommitFailure | None = None
        # the pieces of long strings stored lately: not compressed nor sent again
        self._known = KnownContents()
        # one thread: a single writer avoids lock contention in SQLite and keeps batches ordered
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolscore-ingest")

    @property
    def queued_items(self) -> int:
        return self._queued_items

    @property
    def busy_since(self) -> float | None:
        """``time.monotonic()`` when the batch being stored now was handed to the writer
        thread (None: idle). Read-only, for a watchdog to tell a stuck writer."""
        return self._busy_since

    @property
    def commit_failure(self) -> CommitFailure | None:
        """Set while the latest commit failed (not for its data), None once one succeeds: for
        the watchdog to say why writes are refused (a full disk, a lost connection...)."""
        return self._failure

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="toolscore-ingest-writer")

    async def stop(self) -> None:
        """Refuse new work, commit (or fail) everything queued, then stop the writer."""
        self._closed = True
        self._wake.set()
        if self._task is not None:
            await self._task
        self._executor.shutdown(wait=True)

    async def submit(self, spans: Sequence[SpanRecord], logs: Sequence[LogRecordData] = ()) -> None:
        """Return once ``spans`` and ``logs`` are committed; raise a RetryableError otherwise."""
        if self._closed:
            raise ShuttingDown("server is shutting down", self._config.retry_after_s)
        spans, logs = without_toolscore_evaluations(spans, logs)  # our write-back, looped back
        size = len(spans) + len(logs)
        if size == 0:
            return
        # A single request bigger than the bound is still taken when the queue is empty,
        # otherwise it could never be stored (the request size limit bounds it anyway).
        if self._queued_items and self._queued_items + size > self._config.max_queued_items:
            raise QueueFull(
                f"ingest queue full ({self._queued_items} items waiting); retry later",
                self._config.retry_after_s,
            )
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(spans, logs, future))
        self._queued_items += size
        self._metrics.queue_spans.set(self._queued_items)
        self._wake.set()
        await asyncio.shield(future)  # a client that goes away must not cancel the commit

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._queue:
                if self._closed:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            batch = self._take_batch()
            self._busy_since = time.monotonic()
            try:
                outcomes = await loop.run_in_executor(self._executor, self._store, batch)
            except Exception:  # a bug in _store itself: nothing is known to be stored
                log.exception("ingest: batch of %d requests not stored", len(batch))
                outcomes = [self._unavailable()] * len(batch)
            finally:
                self._busy_since = None
                self._queued_items -= sum(item.size for item in batch)
                self._metrics.queue_spans.set(self._queued_items)
            for item, outcome in zip(batch, outcomes, strict=True):
                if item.future.done():
                    continue
                if outcome is None:
                    item.future.set_result(None)
                else:
                    item.future.set_exception(outcome)

    def _take_batch(self) -> list[_Pending]:
        batch = [self._queue.popleft()]
        total = batch[0].size
        while self._queue and total + self._queue[0].size <= self._config.max_batch_items:
            item = self._queue.popleft()
            batch.append(item)
            total += item.size
        return batch

    def _store(self, batch: Sequence[_Pending]) -> list[ReceiverError | None]:
        """Runs in the writer thread: commit ``batch``, isolating requests whose data the
        database refuses. Returns each request's outcome: None (committed) or its error."""
        try:
            self._commit(batch)
        except Exception as exc:
            fault = data_fault(exc)
            if fault is None:
                self._metrics.commit_failures.inc()
                self._failed(failure_reason(exc))
                log.warning("ingest: batch of %d requests not stored: %s", len(batch), exc)
                return [self._unavailable()] * len(batch)
            self._metrics.data_faults.inc()
            if len(batch) > 1:
                half = len(batch) // 2
                return self._store(batch[:half]) + self._store(batch[half:])
            self._metrics.unstorable_requests.inc()
            log.warning(
                "ingest: a request of %d items refused by the database (%s): %s",
                batch[0].size,
                fault,
                _short(exc),
            )
            return [
                UnstorableData(
                    f"the database cannot store this request: it holds {fault}; nothing of it "
                    "was stored and resending it unchanged will fail again"
                )
            ]
        self._failure = None
        return [None] * len(batch)

    def _failed(self, reason: str) -> None:
        now = time.monotonic()
        since = self._failure.since if self._failure is not None else now
        self._failure = CommitFailure(reason, since, now)

    def _unavailable(self) -> StorageUnavailable:
        # The driver's text names hosts, ports and limits: it goes to the log, not to clients.
        return StorageUnavailable(
            "database unavailable, nothing of this request was stored; retry later",
            self._config.retry_after_s,
        )

    def _commit(self, batch: Sequence[_Pending]) -> None:
        """Runs in the writer thread: one transaction for the whole batch."""
        started = time.perf_counter()
        now = self._clock_ns()
        unique: dict[tuple[str, str], SpanRecord] = {}
        for item in batch:
            for span in item.spans:
                unique.setdefault((span.trace_id, span.span_id), span)
        spans = list(unique.values())
        logs = [rec for item in batch for rec in item.logs]
        compress = compresses_values(self._engine.dialect)
        rows = prepare_telemetry(spans, logs, now, compress, self._known)
        with write_transaction(self._engine) as conn:
            stored = StoredBatch(spans, logs, store_telemetry(conn, rows))
            for hook in self._hooks:
                hook.on_batch(conn, stored)
        self._known.remember(rows.contents.keys)  # committed
        self._metrics.commit_seconds.observe(time.perf_counter() - started)
        self._metrics.batch_items.observe(len(spans) + len(logs))


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
