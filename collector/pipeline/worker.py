"""The scoring worker: a ``Component`` of ``serve`` that claims ready conversations and scores them.

It sleeps until the next conversation becomes due (read from the database, so state survives
restarts and other processes' ingest is seen), at most ``poll_s`` (other ``serve`` processes
sharing the database cannot wake it), and is woken early by the ingest hook.

A round (claim, reconstruct and score, write) is CPU-bound Python. It runs either in a thread of
the server process or, with a :class:`ScoringProcess`, in a child process with its own database
connection, so that scoring does not compete with ingest for the GIL (this is what lets scoring
keep up with ingest on a multi-core machine).

A conversation with more than ``SizeLimits.big_spans`` spans is left out of its round (still
claimed) and scored on its own beside the rounds, one at a time: in a thread, or in a fresh child
process per conversation (its memory goes back when the process exits). The worker renews its
lease every ``lease_s / 3`` until its rows are written, so no other worker takes it over, and the
rounds go on scoring the others meanwhile. More than ``SizeLimits.max_spans``: not loaded, status
``error`` with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import BrokenExecutor, Executor, ProcessPoolExecutor, ThreadPoolExecutor

from toolscore.collector.pipeline.child import ScoringProcess, _child_big, _child_init, _child_round
from toolscore.collector.pipeline.claim import NS, Claimed, SizeLimits, Timing
from toolscore.collector.pipeline.rounds import (
    DEFAULT_LIMITS,
    PipelineStats,
    RoundResult,
    RoundRunner,
    default_worker_id,
)
from toolscore.collector.reconstruction.control_calls import DEFAULT as DEFAULT_CONTROL
from toolscore.collector.reconstruction.control_calls import ControlCalls
from toolscore.scorer import ScoringConfig
from toolscore.storage.database import Database
from toolscore.storage.plumbing.faults import failure_reason, is_outage

log = logging.getLogger(__name__)

Observer = Callable[[Sequence[str], Sequence[float]], None]  # statuses, latencies (s)
RoundReport = Callable[[int, float], None]  # claimed, behind (s); on the worker's event loop


def _log_outcomes(result: RoundResult) -> None:
    """One DEBUG line per conversation written (in the server process, whichever scored it)."""
    for cid, status, latency, reason in zip(
        result.ids, result.statuses, result.latencies, result.reasons, strict=True
    ):
        fields = {"conversation_id": cid, "status": status, "latency_s": round(latency, 3)}
        if reason:
            fields["reason"] = reason
        why = f": {reason}" if reason else ""
        log.debug(
            "conversation %s %s, %.2f s after its last span%s",
            cid,
            status,
            latency,
            why,
            extra=fields,
        )


class PipelineWorker:
    """Claims and scores conversations until stopped (a ``toolscore.collector.app.Component``)."""

    def __init__(
        self,
        engine: Database,
        config: ScoringConfig,
        *,
        timing: Timing | None = None,
        batch_size: int = 200,
        poll_s: float = 1.0,
        worker_id: str | None = None,
        clock_ns: Callable[[], int] = time.time_ns,
        observer: Observer | None = None,
        process: ScoringProcess | None = None,
        control_calls: ControlCalls = DEFAULT_CONTROL,
        limits: SizeLimits = DEFAULT_LIMITS,
        on_round: RoundReport | None = None,
    ) -> None:
        self.timing = timing or Timing()
        self.limits = limits
        self.worker_id = worker_id or default_worker_id()
        self.poll_s = poll_s
        self.stats = PipelineStats()
        self._runner = RoundRunner(
            engine,
            config,
            timing=self.timing,
            batch_size=batch_size,
            worker_id=self.worker_id,
            clock_ns=clock_ns,
            control_calls=control_calls,
            limits=limits,
        )
        self._process = process
        self._pool: ProcessPoolExecutor | None = None
        # Big conversations: scored one at a time beside the rounds, their leases renewed by
        # this (server-side) worker until their rows are written.
        self._lane: Executor | None = None
        self._held: dict[str, Claimed] = {}
        self._lane_jobs: set[asyncio.Future[RoundResult]] = set()
        self._heartbeat: asyncio.Task[None] | None = None
        self._observer = observer
        self._on_round = on_round
        self._clock_ns = clock_ns
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._hint_ns: int | None = None
        self._stopping = False
        # A failed round (the database went away) may have left claims it was to write: they
        # are released once the database answers again, not left to their lease (a minute).
        self._claims_left = False
        self._failing_since: float | None = None
        self._failed_rounds = 0

    # --- Component --------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name="toolscore-pipeline")
        self._heartbeat = asyncio.create_task(self._renew_leases(), name="toolscore-leases")

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await self._task  # finishes the round in progress: no half-written revision
            self._task = None
        if self._lane_jobs:
            await self._stop_big()
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
            self._heartbeat = None
        for pool in (self._pool, self._lane):
            if pool is not None:
                pool.shutdown(wait=True)
        self._pool = self._lane = None

    # --- big conversations -------------------------------------------------------------------

    async def _stop_big(self) -> None:
        """A big conversation takes minutes to score, more than the shutdown grace: its scoring
        process is ended (nothing of it was written: its rows are written in one transaction)
        and its claim released, so the next start scores it at once. In a thread it cannot be
        ended: waited for, within the server's shutdown budget."""
        if self._process is not None and self._lane is not None:
            held = list(self._held)
            _end_processes(self._lane)
            await asyncio.gather(*self._lane_jobs, return_exceptions=True)
            with contextlib.suppress(Exception):  # the lease runs out anyway
                await asyncio.to_thread(self._runner.release, held)
            log.info(
                "scoring of %d big conversation(s) stopped: left for the next start", len(held)
            )
            return
        await asyncio.gather(*self._lane_jobs, return_exceptions=True)

    @property
    def held(self) -> tuple[str, ...]:
        """Big conversations this worker has claimed and not yet written (tests, metrics)."""
        return tuple(self._held)

    def _hand_off(self, big: Sequence[Claimed]) -> None:
        loop = asyncio.get_running_loop()
        for claimed in big:
            self._held[claimed.conversation_id] = claimed
            job = loop.run_in_executor(self._lane_executor(), self._lane_call(), claimed)
            self._lane_jobs.add(job)
            job.add_done_callback(functools.partial(self._lane_done, claimed.conversation_id))

    def _lane_executor(self) -> Executor:
        if self._lane is None:
            if self._process is None:
                self._lane = ThreadPoolExecutor(1, thread_name_prefix="toolscore-big")
            else:  # a fresh process per big conversation: its memory is returned afterwards
                process = self._process
                self._lane = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_child_init,
                    initargs=self._child_args(process),
                    max_tasks_per_child=1,
                )
        return self._lane

    def _lane_call(self) -> Callable[[Claimed], RoundResult]:
        return self._runner.score_big if self._process is None else _child_big

    def _lane_done(self, conversation_id: str, job: asyncio.Future[RoundResult]) -> None:
        self._lane_jobs.discard(job)
        self._held.pop(conversation_id, None)  # its lease runs out if it was not written
        if job.cancelled():
            return
        if (exc := job.exception()) is not None:
            if self._stopping:  # ended by stop(): expected
                return
            log.error("scoring big conversation %s failed: %r", conversation_id, exc)
            if isinstance(exc, BrokenExecutor) and self._lane is not None:
                self._lane.shutdown(wait=False, cancel_futures=True)
                self._lane = None
            return
        self._record(job.result())

    async def _renew_leases(self) -> None:
        interval = self.timing.lease_s / 3
        while True:
            await asyncio.sleep(interval)
            if not self._held:
                continue
            try:
                ids = list(self._held)
                kept = await asyncio.to_thread(self._runner.renew, ids)
            except Exception:  # the database may be briefly unavailable: the next beat retries
                log.exception("renewing the leases of big conversations failed")
                continue
            if lost := [i for i in ids if i not in kept and i in self._held]:
                log.warning("lost the claim on %s (its lease ran out: taken over)", lost)

    # --- wake-ups ----------------------------------------------------------------------------

    def notify(self, due_ns: int) -> None:
        """Thread-safe: a conversation may be ready at ``due_ns`` (called by the ingest hook)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # loop closing
            loop.call_soon_threadsafe(self._set_hint, due_ns)

    def _set_hint(self, due_ns: int) -> None:
        if self._hint_ns is None or due_ns < self._hint_ns:
            self._hint_ns = due_ns
            self._wake.set()

    # --- the loop ----------------------------------------------------------------------------

    def run_once(self) -> RoundResult:
        """One round in the calling thread (tests, tools), big conversations included (scored
        after the others, without lease renewal); the loop uses :meth:`_round`."""
        result = self._round_here()
        for claimed in result.big:
            self._record(self._runner.score_big(claimed))
        return result

    def _round_here(self) -> RoundResult:
        result = self._runner.run_once()
        self._record(result)
        return result

    def _record(self, result: RoundResult) -> None:
        self.stats.record(result)
        if log.isEnabledFor(logging.DEBUG):
            _log_outcomes(result)
        if self._observer is not None and result.statuses:
            self._observer(result.statuses, result.latencies)

    async def _round(self) -> RoundResult:
        if self._process is None:
            return await asyncio.to_thread(self._round_here)
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_child_init,
                initargs=self._child_args(self._process),
            )
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(self._pool, _child_round)
        except Exception:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None  # a new child next round; its lease-protected claims expire
            raise
        self._record(result)
        return result

    def _child_args(
        self, process: ScoringProcess
    ) -> tuple[ScoringProcess, Timing, int, str, int, SizeLimits]:
        return (
            process,
            self.timing,
            self._runner.batch_size,
            self.worker_id,
            os.getpid(),
            self.limits,
        )

    async def _run(self) -> None:
        while not self._stopping:
            try:
                if self._claims_left:
                    await asyncio.to_thread(self._runner.release_all_but, list(self._held))
                    self._claims_left = False
                result = await self._round()
            except Exception as exc:  # the database may be briefly unavailable: retry, never die
                self._round_failed(exc)
                self._claims_left = True
                await self._sleep(self.poll_s)
                continue
            self._round_succeeded()
            if self._on_round is not None:
                self._on_round(result.claimed, result.behind_s)
            if result.big:
                self._hand_off(result.big)
            if result.claimed:
                continue  # more may be ready right now
            now = self._clock_ns()
            if self._hint_ns is not None and self._hint_ns <= now:
                self._hint_ns = None
            candidates = [d for d in (result.due_ns, self._hint_ns) if d is not None]
            wait = self.poll_s
            if candidates:
                wait = min(wait, max(0.0, (min(candidates) - now) / NS))
            await self._sleep(wait)

    def _round_failed(self, exc: Exception) -> None:
        """A database outage is expected: one WARNING when rounds start failing, the details at
        DEBUG; anything else (a bug) keeps its traceback at ERROR."""
        if not is_outage(exc):
            log.error("pipeline round failed; retrying", exc_info=exc)
        elif self._failing_since is None:
            log.warning(
                "scoring rounds failing: %s; retrying every %g s", failure_reason(exc), self.poll_s
            )
        else:
            log.debug("pipeline round failed again", exc_info=exc)
        if self._failing_since is None:
            self._failing_since = time.monotonic()
        self._failed_rounds += 1

    def _round_succeeded(self) -> None:
        if self._failing_since is not None:
            log.info(
                "scoring rounds resumed after %.1f s (%d failed rounds)",
                time.monotonic() - self._failing_since,
                self._failed_rounds,
            )
            self._failing_since, self._failed_rounds = None, 0

    async def _sleep(self, seconds: float) -> None:
        self._wake.clear()
        if self._stopping:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=seconds)


def _end_processes(pool: Executor) -> None:
    """Kill the worker processes of ``pool`` (a ProcessPoolExecutor; Python < 3.14 has no
    public way: its futures then fail with BrokenProcessPool)."""
    for process in list(getattr(pool, "_processes", {}).values()):
        with contextlib.suppress(Exception):
            process.kill()
