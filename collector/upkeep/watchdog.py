"""The health watchdog of ``toolscore serve``: notices a database that stopped answering, or
that answers but refuses every commit.

Two signs, checked every second: the ingest writer's current database work has run longer than
``stuck_after_s`` (a commit blocked on a silent connection, while fresh connections may work),
or a probe (``SELECT 1`` in a thread of its own, one at a time) has not answered within
``stuck_after_s``. Either makes the service unhealthy: ``/health`` answers 503, gRPC health
NOT_SERVING, ``toolscore_healthy`` 0, one WARNING naming the cause is logged, and while the
writer is stuck, waiting and new export requests are answered UNAVAILABLE at once (see
:mod:`toolscore.collector.ingest.guard`). The stuck call itself is ended by the engine's call
deadline (``--db-call-deadline``); the next checks then find the service healthy again (one
INFO line).

A third sign: the ingest writer's latest commit failed though the database answers the probe
(a full disk: ``IngestWriter.commit_failure``). The service is unhealthy, with the reason, until
a commit succeeds (space freed, the next export stored) or ``FAILED_COMMIT_MEMORY_S`` pass
without a failed one. Requests are not refused beforehand: each still tries its commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from toolscore.collector.components import Periodic
from toolscore.collector.ingest.guard import GuardedWriter
from toolscore.collector.ingest.metrics import Metrics

log = logging.getLogger("toolscore.health")

CHECK_PERIOD_S = 1.0
# A failed commit makes the service unhealthy until a commit succeeds, or until this long
# passes without another failing: with no export to try, nothing is known to be refused
# (a readiness probe that took the traffic away would otherwise keep it away for ever).
FAILED_COMMIT_MEMORY_S = 10.0


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    reason: str = ""  # why not ok


class Probe:
    """``SELECT 1`` in a daemon thread, at most one at a time: a probe stuck on a silent
    database holds one thread of its own, never a shared executor's, and is not repeated."""

    def __init__(
        self, ping: Callable[[], None], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ping = ping
        self._clock = clock
        self._pending: asyncio.Future[bool] | None = None
        self._started = 0.0

    async def answer(self, timeout_s: float) -> Verdict:
        """Wait for the current probe (starting one if none runs) up to its ``timeout_s``."""
        if self._pending is None or self._pending.done():
            self._start()
        assert self._pending is not None
        left = self._started + timeout_s - self._clock()
        if left <= 0:
            return Verdict(False, f"database probe unanswered for {timeout_s:.1f} s")
        try:
            ok = await asyncio.wait_for(asyncio.shield(self._pending), left)
        except TimeoutError:
            return Verdict(False, f"database probe unanswered for {timeout_s:.1f} s")
        return Verdict(True) if ok else Verdict(False, "database probe failed")

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        pending: asyncio.Future[bool] = loop.create_future()
        self._pending, self._started = pending, self._clock()

        def run() -> None:
            try:
                self._ping()
                ok = True
            except Exception as exc:
                log.debug("database probe failed: %s", exc)
                ok = False
            with contextlib.suppress(RuntimeError):  # the loop is gone
                loop.call_soon_threadsafe(_resolve, pending, ok)

        threading.Thread(target=run, name="toolscore-health-probe", daemon=True).start()


def _resolve(future: asyncio.Future[bool], ok: bool) -> None:
    if not future.done():
        future.set_result(ok)


class Watchdog:
    """A ``Component``: start after the writer and receivers, stop before them."""

    def __init__(
        self,
        ping: Callable[[], None],
        writer: GuardedWriter,
        metrics: Metrics,
        stuck_after_s: float,
        on_change: Callable[[bool], Awaitable[None]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._writer = writer
        self._metrics = metrics
        self._stuck_after_s = stuck_after_s
        self._on_change = on_change
        self._clock = clock
        self._probe = Probe(ping, clock)
        self._healthy = True
        self._writer_refused = False
        self._periodic = Periodic(
            "toolscore-health-watchdog",
            self._step,
            every_s=CHECK_PERIOD_S,
            what="health check",
            log=log,
            stop_grace_s=0,  # a probe may wait on a silent database: not for stop()
        )
        metrics.healthy.set(1)

    @property
    def healthy(self) -> bool:
        return self._healthy

    async def start(self) -> None:
        await self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()

    async def check(self) -> bool:
        """The verdict now: writer state plus a fresh probe."""
        return (await self._assess()).ok

    async def reason(self) -> str | None:
        """Why the service is unhealthy now (``/health`` asks this), None when it is not."""
        verdict = await self._assess()
        return None if verdict.ok else verdict.reason

    async def _step(self) -> None:
        await self._assess()

    async def _assess(self) -> Verdict:
        verdict = self._writer_verdict()
        if verdict.ok:
            verdict = await self._probe.answer(self._stuck_after_s)
            # the writer may have got stuck while the probe ran
            verdict = verdict if not verdict.ok else self._writer_verdict()
        if verdict.ok:
            verdict = self._commit_verdict()
        await self._record(verdict)
        return verdict

    def _writer_verdict(self) -> Verdict:
        since = self._writer.busy_since
        busy = 0.0 if since is None else max(0.0, self._clock() - since)
        self._metrics.ingest_busy_seconds.set(busy)
        stuck = busy > self._stuck_after_s
        if stuck:
            self._writer.stuck(busy)
            self._writer_refused = True
        elif self._writer_refused:
            self._writer.refuse(None)
            self._writer_refused = False
        if stuck:
            return Verdict(
                False,
                f"ingest writer stuck: its database work has run for {busy:.1f} s "
                f"(--health-stuck-after {self._stuck_after_s:g}); export requests are "
                "answered UNAVAILABLE until it ends",
            )
        return Verdict(True)

    def _commit_verdict(self) -> Verdict:
        """Unhealthy while commits fail though the database answers (a full disk)."""
        failure = self._writer.commit_failure
        now = time.monotonic()  # the writer's clock
        if failure is None or now - failure.last > FAILED_COMMIT_MEMORY_S:
            return Verdict(True)
        return Verdict(
            False,
            f"commits failing for {now - failure.since:.0f} s: {failure.reason}; export "
            "requests are answered UNAVAILABLE until a commit succeeds",
        )

    async def _record(self, verdict: Verdict) -> None:
        if verdict.ok == self._healthy:
            return
        self._healthy = verdict.ok
        self._metrics.healthy.set(1 if verdict.ok else 0)
        if verdict.ok:
            log.info("healthy again: the database answers and the ingest writer is moving")
        else:
            log.warning("unhealthy: %s", verdict.reason)
        if self._on_change is not None:
            await self._on_change(verdict.ok)
