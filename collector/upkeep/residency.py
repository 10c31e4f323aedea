"""``serve`` keeps SQLite's random-keyed indexes mapped in memory (storage/plumbing/residency.py).

A ``Component``: every ``REFRESH_S`` (longer when a refresh is slow: it reads every page of
those indexes) it maps in their pages, new ones included, up to ``--sqlite-resident-bytes``.
Nothing to do on PostgreSQL, whose shared buffers hold its hot pages: it stops after the first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from prometheus_client import Gauge

from toolscore.storage.database import Engine
from toolscore.storage.plumbing.residency import Residency, ResidencyUnavailable, ResidentPages

log = logging.getLogger("toolscore.residency")

REFRESH_S = 30.0
COST_FACTOR = 100.0  # a refresh that took 1 s waits 100 s: at most 1 % of a core


class ResidencyMetrics:
    """``/metrics`` series of the kept pages (SQLite only)."""

    def __init__(self, registry: object) -> None:
        self.resident = Gauge(
            "toolscore_sqlite_resident_index_bytes",
            "Bytes of SQLite's random-keyed indexes serve keeps mapped in memory "
            "(--sqlite-resident-bytes).",
            registry=registry,  # type: ignore[arg-type]
        )
        self.indexes = Gauge(
            "toolscore_sqlite_random_index_bytes",
            "Bytes of SQLite's random-keyed indexes (trace ids, conversation ids), kept in "
            "memory or not.",
            registry=registry,  # type: ignore[arg-type]
        )


class IndexResidency:
    """Keeps ``engine``'s random-keyed index pages mapped, ``budget`` bytes at most."""

    def __init__(self, engine: Engine, metrics: ResidencyMetrics, budget: int) -> None:
        self._engine = engine
        self._metrics = metrics
        self._pages = ResidentPages(budget)
        self._budget = budget
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._short = False  # the budget last held less than the indexes (said once a streak)

    async def start(self) -> None:
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="toolscore-residency")

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task
        self._pages.close()

    async def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                kept = await asyncio.to_thread(self.refresh)
            except ResidencyUnavailable as exc:
                log.info("SQLite's indexes are not kept in memory: %s", exc)
                return
            except Exception as exc:  # tried again at the next refresh
                log.warning("keeping SQLite's indexes in memory failed: %s", exc)
                kept = True
            if not kept:
                return
            took_s = time.monotonic() - started
            log.debug("SQLite's random-keyed index pages mapped in %.3f s", took_s)
            wait_s = max(REFRESH_S, COST_FACTOR * took_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), wait_s)

    def refresh(self) -> bool:
        """One refresh; False when there is nothing to keep (not a SQLite file)."""
        with self._engine.connect() as conn:
            done = self._pages.refresh(conn)
        if done is None:
            return False
        self._metrics.resident.set(done.resident_bytes)
        self._metrics.indexes.set(done.index_bytes)
        self._say(done)
        return True

    def _say(self, done: Residency) -> None:
        short = done.index_bytes > self._budget
        if short and not self._short:
            log.info(
                "SQLite's random-keyed indexes take %d MiB, more than --sqlite-resident-bytes "
                "(%d MiB): the rest is read back from disk when the system evicted it",
                done.index_bytes >> 20,
                self._budget >> 20,
            )
        self._short = short
