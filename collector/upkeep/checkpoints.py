"""SQLite write-ahead log checkpoints in ``serve``, off the commit path.

By default SQLite copies the log into the database file inside whichever commit pushes the log
past 1,000 pages: an ingest request then waits for a copy of every page written since the last
one. Once the random-keyed indexes outgrow the cache, nearly every insert dirties a page of its
own, so those copies grow with the stored data. ``serve`` turns that off for its connections
(``create_engine(autocheckpoint=False)``) and runs this component instead: a PASSIVE checkpoint
every ``interval_s`` in a worker thread, which neither waits for nor blocks readers and writers.
"""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import Counter, Gauge

from toolscore.collector.components import Finished, Periodic
from toolscore.storage.database import Engine
from toolscore.storage.plumbing.database_file import checkpoint_wal

log = logging.getLogger("toolscore.checkpoints")

DEFAULT_INTERVAL_S = 1.0
# A reader still on an older snapshot stops a checkpoint short of the log's end, and the log only
# starts again from its beginning once a checkpoint reached it: try again soon, as SQLite's own
# checkpoint on every commit did, or the log grows by gigabytes under steady reads (a 30-minute
# soak at 5,000 spans/s with one try a second reached 3.3 GiB).
RETRY_S = 0.05
# Past this many pages (64 MiB of 4 KiB pages) the log is emptied with a TRUNCATE checkpoint,
# which holds writers back for as long as readers on older snapshots take to finish (ms here):
# retries alone still let the log reach hundreds of MiB under steady reads.
TRUNCATE_PAGES = 16_384


class CheckpointMetrics:
    """``/metrics`` series of the checkpoints (SQLite only)."""

    def __init__(self, registry: object) -> None:
        self.pages = Counter(
            "toolscore_sqlite_checkpointed_pages",
            "Write-ahead log pages copied into the SQLite database file by serve's checkpoints.",
            registry=registry,  # type: ignore[arg-type]
        )
        self.behind = Gauge(
            "toolscore_sqlite_wal_pages",
            "Pages in SQLite's write-ahead log not yet copied into the database file, after the "
            "last checkpoint.",
            registry=registry,  # type: ignore[arg-type]
        )
        self.truncations = Counter(
            "toolscore_sqlite_wal_truncations",
            "Checkpoints that emptied SQLite's write-ahead log because it had grown past 64 MiB.",
            registry=registry,  # type: ignore[arg-type]
        )
        self.failures = Counter(
            "toolscore_sqlite_failed_checkpoints",
            "Checkpoints that failed (retried at the next interval; the log has the error).",
            registry=registry,  # type: ignore[arg-type]
        )


class WalCheckpointer:
    """A ``Component`` of serve: a PASSIVE checkpoint of ``engine`` every ``interval_s``."""

    def __init__(
        self,
        engine: Engine,
        metrics: CheckpointMetrics,
        interval_s: float = DEFAULT_INTERVAL_S,
        truncate_pages: int = TRUNCATE_PAGES,
    ) -> None:
        self._engine = engine
        self._truncate_pages = truncate_pages
        self._metrics = metrics
        self._interval_s = interval_s
        self._copied = 0  # pages of the current log already counted
        self._periodic = Periodic(
            "toolscore-checkpoints",
            self._step,
            every_s=interval_s,
            first_after_s=interval_s,
            what="checkpoint of the write-ahead log",
            log=log,
            on_failure=lambda _exc: metrics.failures.inc(),
        )

    async def start(self) -> None:
        await self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()

    @property
    def done(self) -> bool:
        """Ended: stopped, or not SQLite (the database checkpoints on its own)."""
        return self._periodic.done

    async def _step(self) -> float | None:
        result = await asyncio.to_thread(self.run_once)
        if result is None:  # not SQLite: the database checkpoints on its own
            raise Finished
        pages, copied = result
        return min(RETRY_S, self._interval_s) if copied < pages else None

    def run_once(self) -> tuple[int, int] | None:
        """One checkpoint: (pages in the log, pages copied), None when not SQLite."""
        with self._engine.connect() as conn:
            result = checkpoint_wal(conn)
            if result is None:
                return None
            self._count(*result)
            if result[0] > self._truncate_pages:
                emptied = checkpoint_wal(conn, truncate=True)
                assert emptied is not None
                if emptied[0] > 0:  # readers did not finish within 0.2 s: next time
                    return result
                self._metrics.truncations.inc()
                self._metrics.pages.inc(result[0] - result[1])  # the rest, copied now
                self._copied = 0
                self._metrics.behind.set(0)
                return emptied
        return result

    def _count(self, pages: int, copied: int) -> None:
        # The log restarts from page 0 once a checkpoint copied all of it: counts start again.
        self._metrics.pages.inc(copied - self._copied if copied >= self._copied else copied)
        self._copied = copied
        self._metrics.behind.set(pages - copied)
