"""An ingest writer whose waiting requests can be answered before their commit ends.

A request normally waits until its batch is committed. When the writer is stuck on a database
that does not answer, or the server is shutting down and its grace is running out, waiting on
helps nobody: the exporter times out or the process exits with its call unanswered. So
:meth:`GuardedWriter.refuse` answers every waiting request, and every new one, with a retryable
error at once. The commit itself is not cancelled (it cannot be: it runs in a thread, in the
driver); if it succeeds later, the client's resend finds its spans already stored and is
deduplicated (spans by trace and span id, log records by hash), so nothing is lost or doubled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from toolscore.collector.errors import RetryableError, ShuttingDown, StorageUnavailable
from toolscore.collector.ingest.writer import IngestWriter
from toolscore.storage.records import LogRecordData, SpanRecord

ErrorFactory = Callable[[], RetryableError]


class GuardedWriter(IngestWriter):
    """:class:`IngestWriter` plus :meth:`refuse` / :meth:`shut_out` (event-loop thread only)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._refusal: ErrorFactory | None = None
        self._shut_out = False
        self._waiting: set[asyncio.Future[ErrorFactory | None]] = set()  # requests' wake-ups

    def refuse(self, error: ErrorFactory | None) -> None:
        """Answer waiting and new requests with ``error()`` until called with None."""
        if self._shut_out:
            return  # shutting down wins
        self._refusal = error
        if error is not None:
            self._release(error)

    def stuck(self, seconds: float) -> None:
        """The writer's current database work has run ``seconds``: refuse (retryably)."""
        retry = self._config.retry_after_s

        def unavailable() -> RetryableError:
            return StorageUnavailable(
                f"database not answering (a commit has waited {seconds:.0f} s); nothing of "
                "this request is known to be stored; retry later",
                retry,
            )

        self.refuse(unavailable)

    def shut_out(self) -> None:
        """Shutting down: answer every waiting and new request with ShuttingDown, for good."""
        retry = self._config.retry_after_s
        self.refuse(lambda: ShuttingDown("server is shutting down; retry later", retry))
        self._shut_out = True

    async def submit(self, spans: Sequence[SpanRecord], logs: Sequence[LogRecordData] = ()) -> None:
        if self._refusal is not None:
            raise self._refusal()
        stored = asyncio.ensure_future(super().submit(spans, logs))
        # woken by the commit's outcome or by refuse(), whichever comes first
        woken: asyncio.Future[ErrorFactory | None] = asyncio.get_running_loop().create_future()
        stored.add_done_callback(lambda _: _wake(woken, None))
        self._waiting.add(woken)
        try:
            error = await woken
        except asyncio.CancelledError:  # the client went away: the commit still goes on
            stored.add_done_callback(_forget)
            raise
        finally:
            self._waiting.discard(woken)
        if error is None:
            return stored.result()
        stored.add_done_callback(_forget)  # the commit goes on; its outcome is nobody's now
        raise error()

    def _release(self, error: ErrorFactory) -> None:
        for woken in self._waiting:
            _wake(woken, error)


def _wake(woken: asyncio.Future[ErrorFactory | None], error: ErrorFactory | None) -> None:
    if not woken.done():
        woken.set_result(error)


def _forget(task: asyncio.Future[None]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: no "exception was never retrieved" noise
