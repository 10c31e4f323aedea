"""The ingest hook: conversation bookkeeping in each ingest transaction, then wake the worker."""

from __future__ import annotations

import time
from collections.abc import Callable

from toolscore.collector.ingest.writer import StoredBatch
from toolscore.collector.pipeline.assign import AssignConfig, assign_spans
from toolscore.collector.pipeline.claim import Timing
from toolscore.storage.database import Connection


class ConversationHook:
    """An ``IngestHook`` (``collector.ingest.writer``): records which conversation each trace
    belongs to.

    ``notify`` (e.g. ``PipelineWorker.notify``) is told the earliest time a conversation touched
    by the batch can become ready; it is a time in the future, by when the batch is committed.
    """

    def __init__(
        self,
        config: AssignConfig,
        timing: Timing,
        notify: Callable[[int], None] | None = None,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.config = config
        self.timing = timing
        self._notify = notify
        self._clock_ns = clock_ns

    def on_batch(self, conn: Connection, batch: StoredBatch) -> None:
        now = self._clock_ns()
        result = assign_spans(
            conn,
            batch.spans,
            received_at_ns=now,
            config=self.config,
            numbered=batch.numbered,
            logs=batch.logs,
        )
        if result.conversations and self._notify is not None:
            self._notify(now + self.timing.idle_ns)
