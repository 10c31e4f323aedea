"""The scoring worker: a ``Component`` of ``serve`` that claims ready conversations and scores them.

It sleeps until the next conversation becomes due (read from the database, so state survives
restarts and other processes' ingest is seen), at most ``poll_s`` (other ``serve`` processes
sharing the database cannot wake it), and is woken early by the ingest hook. Database work runs in
a thread so the event loop keeps serving OTLP requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import Engine

from collector.pipeline.claim import NS, Timing, claim_ready, next_due_ns
from collector.pipeline.score import ScoreOutcome, compute, write
from scorer import ScoringConfig

log = logging.getLogger(__name__)


@dataclass(slots=True)
class PipelineStats:
    """Counters since start (read by /metrics and the benchmark)."""

    scored: int = 0
    unmatched: int = 0
    errors: int = 0
    rounds: int = 0
    latency_s: list[float] = field(default_factory=list)  # last span -> rows, recent ones
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, outcomes: list[ScoreOutcome], latencies: list[float]) -> None:
        with self.lock:
            for o in outcomes:
                if o.status == "scored":
                    self.scored += 1
                elif o.status == "unmatched":
                    self.unmatched += 1
                else:
                    self.errors += 1
            self.latency_s.extend(latencies)
            del self.latency_s[:-10_000]


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class PipelineWorker:
    """Claims and scores conversations until stopped."""

    def __init__(
        self,
        engine: Engine,
        config: ScoringConfig,
        *,
        timing: Timing | None = None,
        batch_size: int = 200,
        poll_s: float = 1.0,
        worker_id: str | None = None,
        clock_ns: Callable[[], int] = time.time_ns,
        observer: Callable[[list[ScoreOutcome], list[float]], None] | None = None,
    ) -> None:
        self.engine = engine
        self._observer = observer
        self.config = config
        self.timing = timing or Timing()
        self.batch_size = batch_size
        self.poll_s = poll_s
        self.worker_id = worker_id or default_worker_id()
        self.stats = PipelineStats()
        self._clock_ns = clock_ns
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._hint_ns: int | None = None
        self._stopping = False

    # --- Component --------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name="toolscore-pipeline")

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await self._task  # finishes the round in progress: no half-written revision
            self._task = None

    # --- wake-ups ----------------------------------------------------------------------------

    def notify(self, due_ns: int) -> None:
        """Thread-safe: a conversation may be ready at ``due_ns`` (called by the ingest hook)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(self._set_hint, due_ns)

    def _set_hint(self, due_ns: int) -> None:
        if self._hint_ns is None or due_ns < self._hint_ns:
            self._hint_ns = due_ns
            self._wake.set()

    # --- the loop ----------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._stopping:
            try:
                claimed, due = await asyncio.to_thread(self.run_once)
            except Exception:  # the database may be briefly unavailable: retry, never die
                log.exception("pipeline round failed; retrying")
                claimed, due = 0, None
                await self._sleep(self.poll_s)
                continue
            if claimed:
                continue  # more may be ready right now
            now = self._clock_ns()
            if self._hint_ns is not None and self._hint_ns <= now:
                self._hint_ns = None
            candidates = [d for d in (due, self._hint_ns) if d is not None]
            wait = self.poll_s
            if candidates:
                wait = min(wait, max(0.0, (min(candidates) - now) / NS))
            await self._sleep(wait)

    async def _sleep(self, seconds: float) -> None:
        self._wake.clear()
        if self._stopping:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=seconds)

    def run_once(self) -> tuple[int, int | None]:
        """One round (blocking): claim, score, write. Returns (claimed, next due time in ns)."""
        now_ns = self._clock_ns()
        with self.engine.begin() as conn:
            claimed = claim_ready(
                conn,
                worker_id=self.worker_id,
                now_ns=now_ns,
                timing=self.timing,
                limit=self.batch_size,
            )
        self.stats.rounds += 1
        if not claimed:
            with self.engine.connect() as conn:
                return 0, next_due_ns(conn, now_ns=now_ns, timing=self.timing)
        ids = [c.conversation_id for c in claimed]
        with self.engine.connect() as conn:
            computed = compute(conn, ids, self.config)
            conn.rollback()
        now = dt.datetime.fromtimestamp(self._clock_ns() / NS, tz=dt.UTC)
        seen = {c.conversation_id: c.last_span_received_ns for c in claimed}
        with self.engine.begin() as conn:
            outcomes = write(conn, computed, now=now, claimed_by=self.worker_id, seen_ns=seen)
        done_ns = self._clock_ns()
        latencies = [(done_ns - seen[o.conversation_id]) / NS for o in outcomes]
        self.stats.record(outcomes, latencies)
        if self._observer is not None:
            self._observer(outcomes, latencies)
        return len(claimed), None
