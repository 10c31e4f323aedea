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

from toolscore.collector.errors import RetryableError, ShuttingDown, StorageUnavailable
from toolscore.collector.ingest import IngestWriter
from toolscore.collector.model import LogRecordData, SpanRecord

ErrorFactory = Callable[[], RetryableError]


class GuardedWriter(IngestWriter):
    """:class:`IngestWriter` plus :meth:`refuse` / :meth:`shut_out` (event-loop thread only)."""

    _refusal: ErrorFactory | None = None
    _shut_out = False
    _released: asyncio.Future[ErrorFactory] | None = None

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
        if self._released is None or self._released.done():
            self._released = asyncio.get_running_loop().create_future()
        released = self._released
        stored = asyncio.ensure_future(super().submit(spans, logs))
        await asyncio.wait((stored, released), return_when=asyncio.FIRST_COMPLETED)
        if stored.done():
            return stored.result()
        stored.add_done_callback(_forget)  # the commit goes on; its outcome is nobody's now
        raise released.result()()

    def _release(self, error: ErrorFactory) -> None:
        if self._released is not None and not self._released.done():
            self._released.set_result(error)


def _forget(task: asyncio.Future[None]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: no "exception was never retrieved" noise
