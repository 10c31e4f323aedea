"""The outbox worker: an async component that exports new evaluations, at least once.

Each pass (in a worker thread, so the event loop and ingest never wait on the sink or the
database): add outbox rows for new evaluations, claim a bounded batch of due rows, export their
spans then their log records with the SDK exporters, and record what the sink acknowledged. Rows
that failed back off exponentially (with jitter); a process that dies mid-export leaves its rows
leased, and they are retried when the lease ends. The worker wakes on its timer or on
:meth:`ExportWorker.notify` (``serve`` calls it, from the pipeline's thread, after each scoring
round that committed evaluations; the timer only matters for evaluations written by other
processes, retries and backoff).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from toolscore.collector.components import Periodic
from toolscore.collector.export.otlp import EvaluationEmitter
from toolscore.collector.export.probe import SignalSupport
from toolscore.collector.export.settings import ExportSettings
from toolscore.storage.database import Database
from toolscore.storage.history import outbox as exports
from toolscore.storage.history.instance import instance_id
from toolscore.storage.history.outbox import ExportItem

log = logging.getLogger(__name__)

# Passes keep claiming batches while there is due work, up to this many batches, then yield to
# the timer so that stop() and other work are never starved.
MAX_BATCHES_PER_PASS = 20


@dataclass(frozen=True, slots=True)
class PassResult:
    enqueued: int
    exported: int  # outbox rows fully delivered in this pass
    failed: int  # rows that failed (and were rescheduled) in this pass
    skipped: Mapping[str, int] = field(default_factory=dict)  # by signal: not implemented there


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def export_pass(
    engine: Database,
    emitter: EvaluationEmitter,
    settings: ExportSettings,
    now: Callable[[], dt.datetime] = _utcnow,
    max_batches: int = MAX_BATCHES_PER_PASS,
    should_stop: Callable[[], bool] = lambda: False,
    support: SignalSupport | None = None,
) -> PassResult:
    """One synchronous pass over the outbox (what the worker runs in its thread).

    ``should_stop`` is checked between batches, so a shutdown waits for one batch at most.
    ``support`` remembers which signals the target does not implement (a new one per call
    when not given).
    """
    support = support or SignalSupport(settings)
    with engine.begin() as conn:
        enqueued = exports.enqueue_new(conn, now(), limit=max(1000, settings.batch_size))
        emitter.thresholds = {**exports.load_thresholds(conn)}
        emitter.instance_id = instance_id(conn)
    exported = failed = 0
    skipped: dict[str, int] = {}
    lease = dt.timedelta(seconds=settings.lease_s)
    for _ in range(max_batches):
        if should_stop():
            break
        with engine.begin() as conn:
            items = exports.claim_batch(conn, now(), settings.batch_size, lease)
        if not items:
            break
        outcome = _send(items, emitter, settings, support)
        at = now()
        failures: dict[int, tuple[str, dt.datetime]] = {}
        for item in items:
            errors = outcome.errors.get(item.evaluation_id)
            if errors:
                delay = settings.backoff_s(item.attempts) * random.uniform(0.8, 1.2)
                failures[item.evaluation_id] = ("; ".join(errors), at + dt.timedelta(seconds=delay))
        with engine.begin() as conn:
            exports.record_results(
                conn,
                at,
                outcome.done["traces"],
                outcome.done["logs"],
                failures,
                skipped=outcome.skipped,
                signals=settings.signals,
            )
        for signal, ids in outcome.skipped.items():
            skipped[signal] = skipped.get(signal, 0) + len(ids)
        exported += len(items) - len(failures)
        failed += len(failures)
        if failures:
            break  # the sink is struggling: let the backoff pace the next attempt
    return PassResult(enqueued=enqueued, exported=exported, failed=failed, skipped=skipped)


@dataclass(slots=True)
class _Outcome:
    done: dict[str, list[int]]  # by signal: acknowledged
    skipped: dict[str, list[int]]  # by signal: not implemented by the target
    errors: dict[int, list[str]]  # by evaluation id


def _send(
    items: Sequence[ExportItem],
    emitter: EvaluationEmitter,
    settings: ExportSettings,
    support: SignalSupport,
) -> _Outcome:
    """Export each selected signal of ``items`` that they still need; sort out what failed."""
    outcome = _Outcome(done={"traces": [], "logs": []}, skipped={}, errors={})
    exporters = {"traces": emitter.export_spans, "logs": emitter.export_logs}
    for signal in settings.signals:
        needing = [i for i in items if (i.needs_span if signal == "traces" else i.needs_log)]
        if not needing:
            continue
        ids = [i.evaluation_id for i in needing]
        if signal in support.unimplemented:
            outcome.skipped[signal] = ids
            continue
        result = exporters[signal](needing)
        if result.ok:
            support.delivered(signal)
            outcome.done[signal] = ids
        elif support.not_implemented(signal):
            outcome.skipped[signal] = ids
        else:
            for i in ids:
                outcome.errors.setdefault(i, []).append(result.error or f"{signal} export failed")
    return outcome


class ThresholdWriter:
    """Component storing ``--pass-threshold`` values at start-up (views and labels read them)."""

    def __init__(self, engine: Database, thresholds: Mapping[str, float]) -> None:
        self._engine = engine
        self._thresholds = dict(thresholds)

    async def start(self) -> None:
        await asyncio.to_thread(self._save)

    def _save(self) -> None:
        with self._engine.begin() as conn:
            exports.save_thresholds(conn, self._thresholds)

    async def stop(self) -> None:
        return None


class ExportWorker:
    """Async component (``start()`` / ``stop()``) running :func:`export_pass` on a timer."""

    def __init__(
        self,
        engine: Database,
        emitter: EvaluationEmitter,
        settings: ExportSettings,
        *,
        on_pass: Callable[[PassResult], None] | None = None,
    ) -> None:
        self._engine = engine
        self._emitter = emitter
        self._settings = settings
        self.on_pass = on_pass
        self._support = SignalSupport(settings)
        self.exported_total = 0
        self.failed_total = 0
        self._periodic = Periodic(
            "toolscore-export",
            self._step,
            every_s=settings.poll_interval_s,
            what="evaluation export pass",
            log=log,
            stop_grace_s=settings.timeout_s * 2 + 5,  # the pass in progress, bounded by timeouts
        )

    async def start(self) -> None:
        await self._periodic.start()

    def notify(self) -> None:
        """New evaluations were committed: run a pass now rather than at the next tick.

        Thread-safe (the pipeline calls it from its worker thread); a notification during a
        pass makes another pass follow it, so nothing committed meanwhile waits for the timer.
        """
        self._periodic.wake()

    async def stop(self) -> None:
        """Finish the pass in progress (bounded by the exporter timeout), then shut down."""
        if not await self._periodic.stop():
            log.warning("export worker did not finish in time; pending rows stay queued")
        await asyncio.to_thread(self._emitter.shutdown)

    async def _step(self) -> None:
        result = await asyncio.to_thread(
            export_pass,
            self._engine,
            self._emitter,
            self._settings,
            should_stop=lambda: self._periodic.stopping,
            support=self._support,
        )
        self.exported_total += result.exported
        self.failed_total += result.failed
        if self.on_pass is not None:
            self.on_pass(result)
