"""The annotation worker: one async component per target, delivering through the outbox.

Each pass: add the target's rows for new evaluations, claim a batch of due ones, and send each
(a few at a time, with aiohttp, on the event loop; the database work runs in a thread). An
evaluation that is no longer the current revision is not sent (the newer one is, and must not be
overwritten by it). A 404 (the backend has not ingested the evaluated span yet: the agent's spans
may still be on their way) and a failure are retried with backoff; a 404 for a day is given up.
Woken by the scoring rounds (``notify``) and by a timer, like the OTLP worker.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import aiohttp

from toolscore.collector.components import Periodic
from toolscore.collector.export.annotations.content import Annotation, Outcome, Sent, annotation
from toolscore.collector.export.annotations.targets import AnnotationTarget
from toolscore.storage.database import Database
from toolscore.storage.history import deliveries
from toolscore.storage.history.deliveries import Delivery, Retry
from toolscore.storage.history.instance import instance_id
from toolscore.storage.history.outbox import load_thresholds

log = logging.getLogger(__name__)


class Client(Protocol):
    async def send(self, session: aiohttp.ClientSession, annotation: Annotation) -> Outcome: ...


@dataclass(frozen=True, slots=True)
class Pacing:
    batch_size: int = 100
    concurrency: int = 8  # requests in flight per target
    poll_interval_s: float = 2.0
    timeout_s: float = 10.0
    initial_backoff_s: float = 1.0
    max_backoff_s: float = 300.0
    lease_s: float = 120.0
    give_up_not_found_s: float = 86_400.0  # a trace the backend never ingested

    def backoff_s(self, attempts: int) -> float:
        return min(self.max_backoff_s, self.initial_backoff_s * 2.0 ** max(0, attempts))


# what /metrics counts, per delivery attempt
RESULTS = (
    "delivered",
    "superseded",
    "skipped",
    "not_ingested_yet",
    "failed",
    "not_found",
    "rejected",
)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class AnnotationWorker:
    """Async component (``start()`` / ``stop()``) delivering one target's annotations."""

    def __init__(
        self,
        engine: Database,
        target: AnnotationTarget,
        client: Client,
        pacing: Pacing = Pacing(),
        *,
        on_pass: Callable[[Mapping[str, int], int], None] | None = None,
        now: Callable[[], dt.datetime] = _utcnow,
    ) -> None:
        self.target = target
        self._engine = engine
        self._client = client
        self._pacing = pacing
        self.on_pass = on_pass  # (results of the pass, rows still pending)
        self._now = now
        self._periodic = Periodic(
            f"toolscore-annotate-{target.kind}",
            self._step,
            every_s=pacing.poll_interval_s,
            what=f"annotation pass for {target.key}",
            log=log,
            stop_grace_s=pacing.timeout_s * 2 + 5,  # the pass in progress, bounded by timeouts
        )
        self._session: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        """The HTTP session (``start()`` opens it; a test driving ``run_pass`` calls this)."""
        timeout = aiohttp.ClientTimeout(total=self._pacing.timeout_s)
        self._session = aiohttp.ClientSession(timeout=timeout)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def start(self) -> None:
        await self.open()
        await self._periodic.start()

    def notify(self) -> None:
        """New evaluations were committed (thread-safe): run a pass now."""
        self._periodic.wake()

    async def stop(self) -> None:
        if not await self._periodic.stop():
            log.warning("annotation worker did not finish in time; pending rows stay queued")
        await self.close()

    async def _step(self) -> float | None:
        results, pending = await self.run_pass()
        if self.on_pass is not None:
            self.on_pass(results, pending)
        if results.get("delivered") and pending:
            return 0  # more due work: do not wait for the timer
        return None

    async def run_pass(self) -> tuple[dict[str, int], int]:
        """One batch: (what happened to each claimed row, by result; rows still pending)."""
        batch, thresholds, instance = await asyncio.to_thread(self._claim)
        assert self._session is not None, "start() first"
        limit = asyncio.Semaphore(self._pacing.concurrency)

        async def one(delivery: Delivery) -> Outcome:
            if not delivery.is_current:
                return Outcome(Sent.SKIPPED, "superseded")
            async with limit:
                return await self._client.send(
                    self._session,  # type: ignore[arg-type]
                    annotation(delivery.item, thresholds, instance),
                )

        outcomes = await asyncio.gather(*(one(d) for d in batch))
        results, done, retries = self._sort(batch, outcomes)
        pending = await asyncio.to_thread(self._record, done, retries)
        return dict(results), pending

    def _claim(self) -> tuple[list[Delivery], dict[str, float], str]:
        now, lease = self._now(), dt.timedelta(seconds=self._pacing.lease_s)
        with self._engine.begin() as conn:
            deliveries.enqueue_new(
                conn, self.target.key, now, limit=max(1000, self._pacing.batch_size)
            )
            batch = deliveries.claim_batch(
                conn, self.target.key, now, self._pacing.batch_size, lease
            )
            return batch, load_thresholds(conn), instance_id(conn)

    def _sort(
        self, batch: list[Delivery], outcomes: list[Outcome]
    ) -> tuple[Counter[str], dict[int, str], dict[int, Retry]]:
        now = self._now()
        results: Counter[str] = Counter()
        done: dict[int, str] = {}
        retries: dict[int, Retry] = {}
        for delivery, outcome in zip(batch, outcomes, strict=True):
            eid = delivery.item.evaluation_id
            result = _result(outcome)
            if result == "not_ingested_yet":
                age = (now - delivery.enqueued_at).total_seconds()
                if age > self._pacing.give_up_not_found_s:
                    result = "not_found"
            results[result] += 1
            if result in ("not_ingested_yet", "failed"):
                delay = self._pacing.backoff_s(delivery.item.attempts) * random.uniform(0.8, 1.2)
                error = outcome.error or result
                retries[eid] = Retry(error, now + dt.timedelta(seconds=delay))
            else:
                done[eid] = "delivered" if result == "delivered" else result
        return results, done, retries

    def _record(self, done: dict[int, str], retries: dict[int, Retry]) -> int:
        with self._engine.begin() as conn:
            deliveries.record(conn, self.target.key, self._now(), done, retries)
            return deliveries.pending(conn, [self.target.key])[self.target.key]


def _result(outcome: Outcome) -> str:
    if outcome.sent is Sent.SKIPPED and outcome.error == "superseded":
        return "superseded"
    return {
        Sent.DELIVERED: "delivered",
        Sent.SKIPPED: "skipped",
        Sent.NOT_FOUND: "not_ingested_yet",
        Sent.REJECTED: "rejected",
        Sent.FAILED: "failed",
    }[outcome.sent]
