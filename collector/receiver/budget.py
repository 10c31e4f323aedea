"""A byte budget on request data in memory, shared by both transports.

A request reserves, in steps, what it is about to hold: its body as it is read (decompressed
bytes), then what parsing and decoding one chunk of it may cost (protobuf: estimated from the
chunk's items and bytes before it is parsed, wire.py; OTLP/JSON: from the body's bytes, objects
and arrays, as it is parsed whole; limits.py). A step that does not fit is refused at once with
:class:`MemoryBusy` (UNAVAILABLE / 503, retryable) and the request's whole reservation is given
back; a request that could not fit even in an empty budget gets :class:`RequestTooLarge`
(permanent: resending cannot help). So what admitted requests hold is bounded by the budget,
not by the number of requests times their size. All of it runs on the event loop: nothing
awaits between a test and its update.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import threading
from collections.abc import Callable

from toolscore.collector.errors import RequestTooLarge, RetryableError
from toolscore.collector.ingest.metrics import Metrics
from toolscore.collector.receiver.limits import TRIM_AFTER_BYTES

log = logging.getLogger(__name__)


class MemoryBusy(RetryableError):
    """The in-flight memory budget is taken by other requests: retry later."""

    reason = "memory_budget"


class MemoryBudget:
    def __init__(self, limit_bytes: int, metrics: Metrics, retry_after_s: float) -> None:
        self.limit = limit_bytes
        self.used = 0
        self._metrics = metrics
        self._retry_after_s = retry_after_s
        self._trim = _Trimmer()
        self._waiters: list[asyncio.Future[None]] = []

    def reservation(self, transport: str) -> Reservation:
        return Reservation(self, transport)

    def _take(self, n: int, held: int, transport: str) -> None:
        if held + n > self.limit:
            self._metrics.memory_refused.labels(transport).inc()
            raise RequestTooLarge(
                f"this request needs about {(held + n) // 2**20} MiB to be decoded, more than "
                f"the server's in-flight memory budget ({self.limit // 2**20} MiB): send "
                "smaller batches"
            )
        if self.used + n > self.limit:
            self._metrics.memory_refused.labels(transport).inc()
            raise MemoryBusy(
                "the server's in-flight memory budget is taken by other requests; retry later",
                self._retry_after_s,
            )
        self.used += n
        self._metrics.memory_reserved.set(self.used)

    async def room(self, n: int) -> None:
        """Return once ``n`` bytes are free (``n`` is capped at the limit); the caller reserves
        them before it awaits anything else. Cancel it (a timeout) to stop waiting."""
        n = min(n, self.limit)
        while self.used + n > self.limit:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def _give_back(self, n: int, trim: bool = True) -> None:
        self.used -= n
        self._metrics.memory_reserved.set(self.used)
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:  # each checks again whether its room is there
            if not waiter.done():
                waiter.set_result(None)
        if trim and n >= TRIM_AFTER_BYTES:
            self._trim.soon()


class Reservation:
    """What one request holds of the budget; ``close()`` (idempotent) gives all of it back."""

    __slots__ = ("_budget", "_transport", "held")

    def __init__(self, budget: MemoryBudget, transport: str) -> None:
        self._budget = budget
        self._transport = transport
        self.held = 0

    def grow(self, n: int) -> None:
        """Hold ``n`` more bytes, or raise MemoryBusy / RequestTooLarge after giving back all."""
        if n <= 0:
            return
        try:
            self._budget._take(n, self.held, self._transport)
        except Exception:
            self.close()
            raise
        self.held += n

    def shrink(self, n: int) -> None:
        """Give back ``n`` of the bytes held (at most all of them): room reserved but never
        filled (a gRPC read's allowance beyond the message), so no heap to trim."""
        n = min(n, self.held)
        if n > 0:
            self.held -= n
            self._budget._give_back(n, trim=False)

    def close(self) -> None:
        held, self.held = self.held, 0
        if held:
            self._budget._give_back(held)

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Trimmer:
    """glibc keeps freed heap mapped: after a huge request the process stayed over 2 GB.
    ``malloc_trim(0)`` returns it; it takes tens of ms, so it runs in its own short thread, one
    at a time."""

    def __init__(self) -> None:
        self._running = threading.Lock()
        self._fn: Callable[[int], int] | None
        try:
            self._fn = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError):  # not glibc
            self._fn = None

    def soon(self) -> None:
        if self._fn is None or not self._running.acquire(blocking=False):
            return
        threading.Thread(target=self._run, name="toolscore-malloc-trim", daemon=True).start()

    def _run(self) -> None:
        try:
            assert self._fn is not None
            self._fn(0)
        except Exception:  # pragma: no cover - best effort
            log.debug("malloc_trim failed", exc_info=True)
        finally:
            self._running.release()
