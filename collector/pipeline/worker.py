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
import dataclasses
import datetime as dt
import functools
import gc
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import BrokenExecutor, Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from toolscore.collector.control_calls import DEFAULT as DEFAULT_CONTROL
from toolscore.collector.control_calls import ControlCalls
from toolscore.collector.pipeline.claim import (
    NS,
    Claimed,
    SizeLimits,
    Timing,
    claim_ready,
    next_due_ns,
)
from toolscore.collector.pipeline.score import compute, write
from toolscore.scorer import ScoringConfig
from toolscore.storage.database import Database
from toolscore.storage.leases import renew_leases, span_counts

log = logging.getLogger(__name__)

DEFAULT_LIMITS = SizeLimits()

Observer = Callable[[Sequence[str], Sequence[float]], None]  # statuses, latencies (s)


@dataclass(frozen=True, slots=True)
class RoundResult:
    claimed: int
    due_ns: int | None  # when the next conversation becomes ready (when nothing was claimed)
    statuses: tuple[str, ...] = ()  # scored / unmatched / error, one per written conversation
    latencies: tuple[float, ...] = ()  # seconds from its last span to its rows, likewise
    # Claimed but left for :meth:`RoundRunner.score_big` (still claimed: renew their leases).
    big: tuple[Claimed, ...] = ()
    ids: tuple[str, ...] = ()  # the written conversations, likewise
    reasons: tuple[str | None, ...] = ()  # why unmatched / the error, likewise


@dataclass(slots=True)
class PipelineStats:
    """Counters since start (read by tests and the benchmark)."""

    scored: int = 0
    unmatched: int = 0
    errors: int = 0
    rounds: int = 0
    latency_s: list[float] = field(default_factory=list)  # the most recent ones
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, result: RoundResult) -> None:
        with self.lock:
            self.rounds += 1
            for status in result.statuses:
                if status == "scored":
                    self.scored += 1
                elif status == "unmatched":
                    self.unmatched += 1
                else:
                    self.errors += 1
            self.latency_s.extend(result.latencies)
            del self.latency_s[:-10_000]


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class RoundRunner:
    """One round, blocking: claim ready conversations, score them, write their revisions."""

    def __init__(
        self,
        engine: Database,
        config: ScoringConfig,
        *,
        timing: Timing,
        batch_size: int,
        worker_id: str,
        clock_ns: Callable[[], int] = time.time_ns,
        control_calls: ControlCalls = DEFAULT_CONTROL,
        limits: SizeLimits = DEFAULT_LIMITS,
    ) -> None:
        self.engine = engine
        self.control_calls = control_calls
        self.limits = limits
        self.config = config
        self.timing = timing
        self.batch_size = batch_size
        self.worker_id = worker_id
        self._clock_ns = clock_ns

    def run_once(self) -> RoundResult:
        now_ns = self._clock_ns()
        with self.engine.begin() as conn:
            claimed = claim_ready(
                conn,
                worker_id=self.worker_id,
                now_ns=now_ns,
                timing=self.timing,
                limit=self.batch_size,
            )
        if not claimed:
            with self.engine.connect() as conn:
                return RoundResult(0, next_due_ns(conn, now_ns=now_ns, timing=self.timing))
        with self.engine.connect() as conn:
            counts = span_counts(conn, [c.conversation_id for c in claimed])
            conn.rollback()
        big = [c for c in claimed if self.limits.big_spans < counts.get(c.conversation_id, 0)]
        refuse = {
            c.conversation_id: self._too_big(counts[c.conversation_id])
            for c in big
            if counts[c.conversation_id] > self.limits.max_spans
        }
        big = [c for c in big if c.conversation_id not in refuse]
        for c in big:
            log.info(
                "conversation %s has %d spans: scored on its own, beside the rounds",
                c.conversation_id,
                counts[c.conversation_id],
            )
        now_done = [c for c in claimed if c not in big]
        result = self._score(now_done, refuse)
        return dataclasses.replace(result, claimed=len(claimed), big=tuple(big))

    def score_big(self, claimed: Claimed) -> RoundResult:
        """Score one conversation left aside by :meth:`run_once` (its caller renews the lease)."""
        return self._score([claimed], {})

    def _too_big(self, spans: int) -> str:
        return (
            f"not scored: the conversation has {spans} spans, more than the limit of "
            f"{self.limits.max_spans} per conversation (serve --max-conversation-spans, env "
            "TOOLSCORE_MAX_CONVERSATION_SPANS); its spans are stored, none were loaded"
        )

    def _score(self, claimed: Sequence[Claimed], refuse: dict[str, str]) -> RoundResult:
        if not claimed:
            return RoundResult(0, None)
        with self.engine.connect() as conn:
            computed = compute(
                conn,
                [c.conversation_id for c in claimed],
                self.config,
                control_calls=self.control_calls,
                refuse=refuse,
            )
            conn.rollback()
        now = dt.datetime.fromtimestamp(self._clock_ns() / NS, tz=dt.UTC)
        seen = {c.conversation_id: c.last_span_received_ns for c in claimed}
        with self.engine.begin() as conn:
            outcomes = write(conn, computed, now=now, claimed_by=self.worker_id, seen_ns=seen)
        done_ns = self._clock_ns()
        return RoundResult(
            len(claimed),
            None,
            tuple(o.status for o in outcomes),
            tuple((done_ns - seen[o.conversation_id]) / NS for o in outcomes),
            ids=tuple(o.conversation_id for o in outcomes),
            reasons=tuple(o.unmatched_reason or o.error for o in outcomes),
        )

    def renew(self, conversation_ids: Sequence[str]) -> list[str]:
        """Renew this worker's leases on ``conversation_ids``; the ids still held."""
        until_ns = self._clock_ns() + int(self.timing.lease_s * NS)
        with self.engine.begin() as conn:
            return renew_leases(
                conn,
                conversation_ids,
                worker_id=self.worker_id,
                until=dt.datetime.fromtimestamp(until_ns / NS, tz=dt.UTC),
            )


@dataclass(frozen=True, slots=True)
class ScoringProcess:
    """Run rounds in a child process: it connects to ``db_url`` and loads its scoring config
    from ``config_path`` (``None``: the default config), as the server did."""

    db_url: str
    config_path: Path | None = None
    control_calls: ControlCalls = DEFAULT_CONTROL
    log_level: str = "INFO"  # the child logs like the server (a spawned process starts bare)
    log_format: str = "text"


_child_runner: RoundRunner | None = None


def _child_init(
    spec: ScoringProcess,
    timing: Timing,
    batch_size: int,
    worker_id: str,
    server_pid: int,
    limits: SizeLimits = DEFAULT_LIMITS,
) -> None:
    global _child_runner
    # Ctrl-C / SIGTERM reach the whole process group: the server decides when scoring stops
    # (it finishes the round in progress, then shuts the pool down), not the signal.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # A server killed with SIGKILL cannot shut the pool down: exit when orphaned.
    threading.Thread(target=_exit_when_orphaned, args=(server_pid,), daemon=True).start()
    from toolscore.collector.logformat import configure as configure_logging
    from toolscore.scorer import default_config, load_config
    from toolscore.storage.database import open_database

    configure_logging(spec.log_level, spec.log_format)
    config = load_config(spec.config_path) if spec.config_path else default_config()
    _tune_gc()
    _child_runner = RoundRunner(
        open_database(spec.db_url),
        config,
        timing=timing,
        batch_size=batch_size,
        worker_id=worker_id,
        control_calls=spec.control_calls,
        limits=limits,
    )


def _tune_gc() -> None:
    """A round allocates many short-lived objects (decoded spans, messages, rows) while keeping
    few: with the default thresholds the collector runs every 700 allocations and its full passes
    walk every live object. Freezing what start-up created and collecting young objects less
    often cuts about a tenth of the scoring CPU; memory stays bounded by the round's size."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def _exit_when_orphaned(server_pid: int, interval_s: float = 1.0) -> None:
    while os.getppid() == server_pid:
        time.sleep(interval_s)
    os._exit(0)  # mid-round work is lost safely: its claims expire, nothing half-written commits


def _child_round() -> RoundResult:
    assert _child_runner is not None, "scoring process not initialised"
    return _child_runner.run_once()


def _child_big(claimed: Claimed) -> RoundResult:
    assert _child_runner is not None, "scoring process not initialised"
    return _child_runner.score_big(claimed)


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
        self._heartbeat = asyncio.create_task(self._renew_leases(), name="toolscore-leases")

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await self._task  # finishes the round in progress: no half-written revision
            self._task = None
        if self._lane_jobs:  # likewise the big conversations in hand (leases still renewed)
            await asyncio.gather(*self._lane_jobs, return_exceptions=True)
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
                result = await self._round()
            except Exception:  # the database may be briefly unavailable: retry, never die
                log.exception("pipeline round failed; retrying")
                await self._sleep(self.poll_s)
                continue
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

    async def _sleep(self, seconds: float) -> None:
        self._wake.clear()
        if self._stopping:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=seconds)
